#!/usr/bin/env python3
"""A bare MCP client over streamable HTTP (no SDK), for timing the gateway's tools.

Usage:
  mcp_call.py URL TOKEN call TOOL ARGS_JSON
      one timed call; prints {"seconds": …, "result": <structuredContent>} as one line
  mcp_call.py URL TOKEN repeat COUNT WARMUP TOOL ARGS_JSON
      COUNT timed calls after WARMUP untimed ones, on one session and one connection;
      prints {"p50_ms": …, "p99_ms": …, "calls": COUNT}

A time is the wall time of one `tools/call`: the request written, the gateway's work,
and the whole answer read (the call returns once the bytes are in the media store).
Session setup (initialize, initialized) is not timed. A tool error exits with status 1.
"""

import http.client
import json
import sys
import time
import urllib.parse

PROTOCOL = "2025-06-18"


class Session:
    def __init__(self, url, token):
        parts = urllib.parse.urlsplit(url)
        self.path = parts.path or "/mcp"
        # Large transfers take long: no socket timeout below the call's own.
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=3600)
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": PROTOCOL,
        }
        self.next_id = 1
        answer, response = self.request("initialize", {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "bench-nodes", "version": "1"},
        })
        session = response.getheader("mcp-session-id")
        if session:
            self.headers["Mcp-Session-Id"] = session
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message):
        self.connection.request("POST", self.path, body=json.dumps(message), headers=self.headers)
        response = self.connection.getresponse()
        body = response.read()
        if response.status >= 400:
            sys.exit(f"{message.get('method')}: HTTP {response.status}: {body[:500]!r}")
        return response, body

    def request(self, method, params):
        ident = self.next_id
        self.next_id += 1
        response, body = self.post({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return answer_of(response, body, ident), response

    def call(self, tool, arguments):
        answer, _ = self.request("tools/call", {"name": tool, "arguments": arguments})
        if "error" in answer:
            sys.exit(f"{tool}: {answer['error']}")
        result = answer["result"]
        if result.get("isError"):
            sys.exit(f"{tool} {json.dumps(arguments)}: {json.dumps(result)[:2000]}")
        return result


def answer_of(response, body, ident):
    """The JSON-RPC answer with `ident`, from a JSON body or an SSE stream."""
    kind = response.getheader("content-type", "")
    if kind.startswith("application/json"):
        messages = [json.loads(body)]
    else:
        messages = []
        for event in body.decode().split("\n\n"):
            data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
            if data:
                messages.append(json.loads(data))
    for message in messages:
        if message.get("id") == ident:
            return message
    sys.exit(f"no answer with id {ident} in: {body[:500]!r}")


def percentile(sorted_values, fraction):
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def main():
    url, token, mode = sys.argv[1:4]
    session = Session(url, token)
    if mode == "call":
        tool, arguments = sys.argv[4], json.loads(sys.argv[5])
        started = time.perf_counter()
        result = session.call(tool, arguments)
        seconds = time.perf_counter() - started
        print(json.dumps({"seconds": seconds, "result": result.get("structuredContent")}))
    elif mode == "repeat":
        count, warmup = int(sys.argv[4]), int(sys.argv[5])
        tool, arguments = sys.argv[6], json.loads(sys.argv[7])
        times = []
        for i in range(warmup + count):
            started = time.perf_counter()
            session.call(tool, arguments)
            if i >= warmup:
                times.append(time.perf_counter() - started)
        times.sort()
        print(json.dumps({"p50_ms": percentile(times, 0.5) * 1000,
                          "p99_ms": percentile(times, 0.99) * 1000, "calls": count}))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
