#!/usr/bin/env python3
"""Drives one MCP server with the official MCP Python SDK's client, for the end-to-end
tests: the tests then check ferry against a client that ferry's authors did not write.

Input, one JSON document on stdin:

    {"server": {"stdio": {"command": ["prog", "arg", ...], "env": {...}, "cwd": "..."}}
             | {"http": {"url": "...", "headers": {"Authorization": "Bearer ..."}}},
     "elicitation": null | "accept" | "decline" | "cancel",
     "steps": [{"op": "list_tools"},
               {"op": "call", "name": "file_read", "arguments": {...}},
               {"op": "sleep", "seconds": 0.5}],
     "timeout_secs": 60}

`elicitation` null: the client does not declare elicitation support. Otherwise it does,
and answers every request so; "accept" fills the requested form (every boolean field
true, other required fields their default or an empty value).
`env` is added to the SDK's small default environment (HOME, PATH, USER, ...), so
nothing else of the caller's environment reaches the server. `timeout_secs` (default 60)
bounds the whole run.

Output, one JSON document on stdout:

    {"initialize": the InitializeResult (protocolVersion, serverInfo, capabilities,
                   instructions),
     "results": one per step: list_tools -> the list of tools; call -> the
                CallToolResult; sleep -> null. A step the server answered with a
                JSON-RPC error -> {"protocolError": {"code", "message", "data"?}};
                one the client itself rejected (a result that breaks the tool's
                outputSchema, a malformed message) -> {"clientError": "..."};
     "elicitations": the elicitation requests received, in order (message,
                     requestedSchema, mode)}

Exit status: 0 whenever a session was established (step failures are in the output);
2 for bad input, when the server cannot be started or initialized, or on timeout,
with the reason on stderr. The server's own stderr (stdio) is passed through to ours.
"""

import json
import sys
from contextlib import asynccontextmanager

import anyio
import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client

CLIENT_INFO = types.Implementation(name="ferry-test-driver", version="1")
ELICITATION_ANSWERS = ("accept", "decline", "cancel")


class Failure(Exception):
    """The run cannot go on: bad input, or no session. Exits 2 with this message."""


def leaves(error):
    """The exceptions inside `error`: anyio's task groups wrap what they raise in groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def describe(error):
    return "; ".join(f"{type(e).__name__}: {e}" for e in leaves(error))


def dump(model):
    """An SDK object as the JSON the server sent: camelCase, and only the fields it
    set, so no default of the SDK's model (nulls, `resultType`, ...) shows up."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)


def accepted_content(schema):
    """A form that satisfies `schema` as an approving person fills it: every boolean
    true (a confirmation), every other required field its default or an empty value."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    content = {}
    for name, prop in properties.items():
        kind = prop.get("type")
        if kind == "boolean":
            content[name] = True
        elif name not in required:
            continue
        elif "default" in prop:
            content[name] = prop["default"]
        elif prop.get("enum"):
            content[name] = prop["enum"][0]
        elif kind in ("number", "integer"):
            content[name] = prop.get("minimum", 0)
        elif kind == "array":
            content[name] = []
        else:
            content[name] = ""
    return content


def elicitation_callback(answer, received):
    """The client's answer to `elicitation/create`; None declares no elicitation support
    (the SDK leaves the capability out when no callback is given)."""
    if answer is None:
        return None

    async def on_elicit(context, params):
        received.append(dump(params))
        if answer != "accept":
            return types.ElicitResult(action=answer)
        if isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="accept", content=accepted_content(dump(params)["requestedSchema"]))
        return types.ElicitResult(action="accept")  # URL mode carries no content

    return on_elicit


@asynccontextmanager
async def transport(server, errlog=sys.stderr):
    """The SDK's stdio or streamable HTTP transport for `server` (the input's "server");
    a stdio server's stderr goes to `errlog`."""
    if "stdio" in server:
        spec = server["stdio"]
        command = spec.get("command") or []
        if not command:
            raise Failure("server.stdio.command must name a program")
        params = StdioServerParameters(
            command=command[0], args=list(command[1:]), env=spec.get("env"), cwd=spec.get("cwd")
        )
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
    elif "http" in server:
        spec = server["http"]
        # Long reads: a tool may take its time, and the answer may come as an SSE stream.
        client = httpx2.AsyncClient(headers=spec.get("headers") or {}, timeout=httpx2.Timeout(30, read=300))
        async with client, streamable_http_client(spec["url"], http_client=client) as streams:
            yield streams
    else:
        raise Failure('server must be {"stdio": ...} or {"http": ...}')


@asynccontextmanager
async def session(server, elicitation=None, received=None, errlog=sys.stderr):
    """An initialized `ClientSession` with `server`, and the server's InitializeResult.
    Elicitation requests are appended to `received`."""
    callback = elicitation_callback(elicitation, received if received is not None else [])
    async with (
        transport(server, errlog) as (read, write),
        ClientSession(read, write, elicitation_callback=callback, client_info=CLIENT_INFO) as client,
    ):
        try:
            initialized = await client.initialize()
        except Exception as e:
            raise Failure(f"the server did not initialize: {type(e).__name__}: {e}") from e
        yield client, initialized


async def list_all_tools(client):
    """Every tool, following the pages."""
    tools, cursor = [], None
    while True:
        page = await client.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def run_step(client, step):
    op = step["op"]
    try:
        if op == "list_tools":
            return [dump(tool) for tool in await list_all_tools(client)]
        if op == "call":
            return dump(await client.call_tool(step["name"], step.get("arguments") or {}))
        await anyio.sleep(float(step.get("seconds", 0)))
        return None
    except MCPError as e:
        return {"protocolError": dump(e.error)}
    except Exception as e:  # the SDK refused what the server sent: the test shall see why
        return {"clientError": f"{type(e).__name__}: {e}"}


def check_input(spec):
    if not isinstance(spec.get("server"), dict):
        raise Failure('"server" is missing')
    if spec.get("elicitation") not in (None, *ELICITATION_ANSWERS):
        raise Failure(f'"elicitation" must be null or one of {ELICITATION_ANSWERS}')
    for i, step in enumerate(spec.get("steps") or []):
        op = step.get("op") if isinstance(step, dict) else None
        if op not in ("list_tools", "call", "sleep"):
            raise Failure(f"step {i}: unknown op {op!r} (list_tools, call, sleep)")
        if op == "call" and not isinstance(step.get("name"), str):
            raise Failure(f'step {i}: a call needs a "name"')


async def drive(spec):
    check_input(spec)
    received, results, initialized = [], [], None
    timeout = float(spec.get("timeout_secs") or 60)
    steps = spec.get("steps") or []
    try:
        with anyio.fail_after(timeout):
            async with session(spec["server"], spec.get("elicitation"), received) as (client, initialized):
                for step in steps:
                    results.append(await run_step(client, step))
    except TimeoutError:
        if initialized is None:
            where = "while starting and initializing the server"
        elif len(results) < len(steps):
            where = f"in step {len(results)}: {json.dumps(steps[len(results)])}"
        else:
            where = "while closing the session"
        raise Failure(f"timed out after {timeout:g} s {where}") from None
    return {"initialize": dump(initialized), "results": results, "elicitations": received}


def main():
    try:
        spec = json.load(sys.stdin)
        if not isinstance(spec, dict):
            raise Failure("the input must be one JSON object")
        output = anyio.run(drive, spec)
    except json.JSONDecodeError as e:
        print(f"driver: the input is not JSON: {e}", file=sys.stderr)
        return 2
    except BaseException as e:  # every way of failing ends here, said plainly
        failures = [leaf for leaf in leaves(e) if isinstance(leaf, Failure)]
        if failures:
            print(f"driver: {failures[0]}", file=sys.stderr)
        elif isinstance(e, KeyboardInterrupt):
            raise
        else:  # the transport could not start, or broke down before the session stood
            print(f"driver: no session: {describe(e)}", file=sys.stderr)
        return 2
    json.dump(output, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
