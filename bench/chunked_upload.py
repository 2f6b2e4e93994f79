#!/usr/bin/env python3
"""Streams a multipart/form-data upload to ferry's POST /v1/media with
Transfer-Encoding: chunked over a raw socket, from a generator: the client
never holds more than one chunk, and no Content-Length warns the server.

Usage: chunked_upload.py HOST:PORT TOKEN TOTAL_BYTES [FILENAME] [CHUNK_BYTES]

Prints one JSON line: {"sent": bytes of file content sent, "status": HTTP
status or null, "outcome": "complete" | "answered_early" | "reset" | ...}.
A server that refuses the body once past its cap answers 413 and may close
the connection while the client is still sending: that shows as
"answered_early" or "reset", and is the expected outcome over the cap.
"""

import json
import os
import select
import socket
import sys
import time


def main():
    addr, token, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    filename = sys.argv[4] if len(sys.argv) > 4 else "stream.pdf"
    chunk_size = int(sys.argv[5]) if len(sys.argv) > 5 else 64 * 1024
    host, port = addr.rsplit(":", 1)
    boundary = "ferrybench" + os.urandom(8).hex()

    head = (
        f"POST /v1/media HTTP/1.1\r\n"
        f"Host: {addr}\r\n"
        f"Authorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Transfer-Encoding: chunked\r\n"
        f"Connection: close\r\n\r\n"
    ).encode()
    preamble = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    epilogue = f"\r\n--{boundary}--\r\n".encode()
    block = os.urandom(chunk_size)

    def frame(data):
        return b"%x\r\n" % len(data) + data + b"\r\n"

    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent = 0
    outcome = "complete"
    started = time.monotonic()
    try:
        sock.sendall(head + frame(preamble))
        while sent < total:
            n = min(chunk_size, total - sent)
            sock.sendall(frame(block[:n]))
            sent += n
            # The server may answer (413) before the body is over: stop then.
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                outcome = "answered_early"
                break
        else:
            sock.sendall(frame(epilogue) + b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        outcome = "reset"

    status = None
    response = b""
    try:
        sock.settimeout(30)
        while True:
            data = sock.recv(65536)
            if not data:
                break
            response += data
    except (ConnectionResetError, socket.timeout):
        pass
    finally:
        sock.close()
    if response.startswith(b"HTTP/1."):
        try:
            status = int(response.split(b" ", 2)[1])
        except (IndexError, ValueError):
            pass
    print(
        json.dumps(
            {
                "sent": sent,
                "status": status,
                "outcome": outcome,
                "seconds": round(time.monotonic() - started, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
