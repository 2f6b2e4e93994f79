-- wrk: one 4 KiB file per request, as multipart/form-data POST /v1/media (M-UP).
-- The token comes from the environment (FERRY_TOKEN); every request replaces
-- public/small.txt, so the run measures the write path, not the directory's growth.
local boundary = "ferrybench4kboundary"
local payload = string.rep("0123456789abcdef", 256) -- 4096 bytes
wrk.method = "POST"
wrk.path = "/v1/media"
wrk.headers["Content-Type"] = "multipart/form-data; boundary=" .. boundary
wrk.headers["Authorization"] = "Bearer " .. assert(os.getenv("FERRY_TOKEN"), "set FERRY_TOKEN")
wrk.body = "--" .. boundary .. "\r\n"
  .. "Content-Disposition: form-data; name=\"file\"; filename=\"small.txt\"\r\n"
  .. "Content-Type: text/plain\r\n\r\n"
  .. payload
  .. "\r\n--" .. boundary .. "--\r\n"
