#!/usr/bin/env python3
"""A tiny MCP server built on the SDK's own server (MCPServer, formerly FastMCP), which
the tests of the driver (tests/mcp_driver.rs) talk to: every kind of answer the driver
must record has a tool here, elicitation included.

    echo_server.py                      serves on stdio
    echo_server.py --http [--token T]   serves streamable HTTP on a free loopback port,
                                        prints its URL alone on the first line of
                                        stdout; with --token, any request without
                                        `Authorization: Bearer T` is answered 401
"""

import argparse
import socket
import sys

import anyio
from mcp import types
import uvicorn
from mcp import MCPError
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

# Not a real picture: the driver's test checks that these bytes arrive unchanged.
IMAGE_BYTES = b"\x89PNG\r\n\x1a\nnot really a picture"

server = MCPServer(
    "echo", instructions="Echoes what it is sent; the driver's tests use it.", version="1", log_level="WARNING"
)


@server.tool()
def echo(text: str) -> str:
    """Returns `text` unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers (the sum also comes as structured content)."""
    return a + b


@server.tool()
def fail(message: str) -> str:
    """Fails with `message`, as a tool result with isError."""
    raise ToolError(message)


@server.tool()
def refuse() -> str:
    """Answers with a JSON-RPC error instead of a result."""
    raise MCPError(code=types.INVALID_PARAMS, message="refused at the protocol level")


@server.tool()
def image() -> Image:
    """Returns a small PNG image content."""
    return Image(data=IMAGE_BYTES, format="png")


class Confirmation(BaseModel):
    confirm: bool


@server.tool()
async def confirm(what: str, ctx: Context) -> str:
    """Asks the person to approve `what` (MCP elicitation) and says how they answered."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        raise ToolError("no approval channel: this client cannot ask the person")
    answer = await ctx.elicit(f"Approve {what}?", Confirmation)
    if answer.action == "accept":
        return f"accept confirm={answer.data.confirm}"
    return answer.action


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header the request came with ("none" on stdio)."""
    headers = ctx.headers or {}
    return headers.get("authorization", "none")


def require_bearer(app, token):
    """`app` behind a check of `Authorization: Bearer <token>` on every HTTP request."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return guarded


async def serve_http(token):
    # Bound here, before uvicorn starts, so the port is known and printed first.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app()
    if token is not None:
        app = require_bearer(app, token)
    config = uvicorn.Config(app, log_level="warning")
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--token", help="with --http: the bearer token every request must carry")
    args = parser.parse_args()
    if args.http:
        anyio.run(serve_http, args.token)
    else:
        server.run()


if __name__ == "__main__":
    sys.exit(main())
