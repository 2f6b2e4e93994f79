#!/usr/bin/env python3
"""Server-side latency: ferry's tools and the reference filesystem server's, driven by a
minimal JSON-RPC client over stdio (no SDK, no validation), so the figures show the
servers rather than the client. Complements bench.py, whose official SDK client costs
more per call than either server.

Usage: thin_client.py FERRY DATA REFERENCE   (DATA: a ferry site with person `me` whose
home holds read.txt (4 KiB), edit.txt (containing "alpha") and many/ (1,000 files);
REFERENCE: the reference server's executable). Prints a markdown table of medians.
"""

import json
import subprocess
import sys
import time

CALLS = 500
WARMUP = 50


def server(command):
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(message):
        process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()

    def receive():
        while True:
            message = json.loads(process.stdout.readline())
            if "id" in message:
                return message

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "thin", "version": "1"}}})
    receive()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return process, send, receive


def median_ms(contender, method, params):
    _, send, receive = contender
    times = []
    for i in range(CALLS + WARMUP):
        started = time.perf_counter()
        send({"jsonrpc": "2.0", "id": i + 1, "method": method, "params": params})
        answer = receive()
        times.append(time.perf_counter() - started)
        if "error" in answer or answer.get("result", {}).get("isError"):
            sys.exit(f"{method} {params} failed: {answer}")
    times = sorted(times[WARMUP:])
    return times[len(times) // 2] * 1000


def main():
    ferry, data, reference = sys.argv[1:4]
    home = f"{data}/home/me"
    ours = server([ferry, "mcp", "--data", data, "--person", "me"])
    theirs = server([reference, home])
    rows = [
        ("ping", ("ping", {}), ("ping", {})),
        ("read 4 KiB", ("tools/call", {"name": "file_read", "arguments": {"path": "read.txt"}}),
         ("tools/call", {"name": "read_text_file", "arguments": {"path": f"{home}/read.txt"}})),
        ("edit one replacement", ("tools/call", {"name": "file_edit", "arguments": {
            "edits": [{"path": "edit.txt", "oldText": "alpha", "newText": "alpha"}]}}),
         ("tools/call", {"name": "edit_file", "arguments": {
             "path": f"{home}/edit.txt", "edits": [{"oldText": "alpha", "newText": "alpha"}]}})),
        ("list 1,000 entries (ferry: first page)", ("tools/call", {"name": "dir_list", "arguments": {"path": "many"}}),
         ("tools/call", {"name": "list_directory", "arguments": {"path": f"{home}/many"}})),
    ]
    print("| operation | reference median ms | ferry median ms | reference ÷ ferry |")
    print("| --- | ---: | ---: | ---: |")
    for name, ferry_call, reference_call in rows:
        ferry_ms = median_ms(ours, *ferry_call)
        reference_ms = median_ms(theirs, *reference_call)
        print(f"| {name} | {reference_ms:.3f} | {ferry_ms:.3f} | **{reference_ms / ferry_ms:.2f}** |")
    for process, _, _ in (ours, theirs):
        process.stdin.close()
        process.wait()


if __name__ == "__main__":
    main()
