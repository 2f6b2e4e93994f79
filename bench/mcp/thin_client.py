"""A bare JSON-RPC client for stdio MCP servers: one line out, one line back, no SDK
objects and no validation. bench.py runs every operation through it as well as through
the official SDK, so the second table shows the servers' own latency, which the SDK's
per-call cost (about 0.3 ms, the ping row) hides.

`ThinClient` offers the two calls bench.py makes of an SDK session, `call_tool` and
`send_ping`, and answers them with the JSON the server sent (a dict).
"""

import json
import subprocess
from contextlib import asynccontextmanager

from mcp.client.stdio import get_default_environment

PROTOCOL_VERSION = "2025-06-18"


class ThinError(Exception):
    """The server answered a request with a JSON-RPC error, or stopped answering."""


class ThinClient:
    def __init__(self, process):
        self.process = process
        self.next_id = 0

    def request(self, method, params=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        # Notifications and requests from the server (logging, progress) are skipped:
        # the bench's calls ask for neither.
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise ThinError(f"the server closed its output during {method}")
            answer = json.loads(line)
            if answer.get("id") == self.next_id and "method" not in answer:
                break
        if "error" in answer:
            raise ThinError(f"{method}: {answer['error']}")
        return answer["result"]

    # Async like the SDK's session, so bench.py drives both alike; each call blocks
    # the event loop for its round trip, and nothing else runs beside it.
    async def call_tool(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments})

    async def send_ping(self):
        return self.request("ping")


@asynccontextmanager
async def session(command, errlog):
    """An initialized ThinClient with the stdio server `command` (with the SDK's small
    default environment, as the SDK starts it), and the server's initialize result."""
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=get_default_environment()
    )
    try:
        client = ThinClient(process)
        initialized = client.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "ferry-bench-thin", "version": "1"},
            },
        )
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        process.stdin.flush()
        yield client, initialized
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
