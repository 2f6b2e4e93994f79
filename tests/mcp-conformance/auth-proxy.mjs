// Puts a person's token on every request to a gateway's /mcp: the MCP conformance suite
// (@modelcontextprotocol/conformance) has no option for an Authorization header, and
// ferry's /mcp answers nobody without one. Requests and answers pass through as they
// come (event streams included), untouched but for that header.
//
//   FERRY_URL=http://127.0.0.1:8080 FERRY_TOKEN=fy_… [PROXY_PORT=N] node auth-proxy.mjs
//
// Listens on loopback, on PROXY_PORT or a free port, and prints the port on its first
// line. The gateway must count this origin as its own ([tools] allowed_origins), as it
// would a reverse proxy's in front of it.
import http from "node:http";

const target = new URL(process.env.FERRY_URL ?? "");
const token = process.env.FERRY_TOKEN ?? "";
if (!target.host || !token) {
  console.error("auth-proxy: set FERRY_URL and FERRY_TOKEN");
  process.exit(2);
}

const server = http.createServer((request, response) => {
  const headers = { ...request.headers, authorization: `Bearer ${token}` };
  const onward = http.request(
    {
      host: target.hostname,
      port: target.port,
      method: request.method,
      path: request.url,
      headers,
    },
    (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    },
  );
  onward.on("error", (e) => {
    if (!response.headersSent) {
      response.writeHead(502, { "content-type": "text/plain" });
    }
    response.end(`auth-proxy: ${e.message}`);
  });
  request.pipe(onward);
});

server.listen(Number(process.env.PROXY_PORT ?? 0), "127.0.0.1", () => {
  console.log(server.address().port);
});
