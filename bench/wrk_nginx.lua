-- wrk: one 4 KiB file per request, as a WebDAV PUT to nginx (the reference).
-- Every request replaces /small.txt, like the ferry run replaces public/small.txt.
wrk.method = "PUT"
wrk.path = "/small.txt"
wrk.body = string.rep("0123456789abcdef", 256) -- 4096 bytes
