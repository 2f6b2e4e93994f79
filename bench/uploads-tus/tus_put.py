#!/usr/bin/env python3
"""A plain tus 1.0 upload of one file, as any tus client does it: POST to declare it,
then PATCH parts of PART bytes each on one kept-alive connection, each part sent from
the file as it goes (`sendfile`). Prints the final PATCH's Ferry-Sha256 on success.

It speaks HTTP/1.1 over a socket itself, from the standard library's `socket` alone:
the time of a whole client process is what the benchmark compares with curl's single
POST, and importing `http.client` (and the e-mail parser it brings) costs a Python
process about 20 ms before the first byte, 6 % of a 256 MiB upload here; a client that
read each part into memory and copied it again would likewise time itself, not the
protocol.

usage: tus_put.py BASE_URL TOKEN FILE PART_BYTES
"""
import base64
import os
import socket
import sys


class Connection:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.head = f"Host: {host}:{port}\r\n"

    def request(self, method, target, headers, file=None, offset=0, count=0):
        """Sends one request (the body, if any, `count` bytes of `file` from `offset`)
        and returns (status, headers with lowercase names)."""
        lines = [f"{method} {target} HTTP/1.1\r\n", self.head]
        lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
        lines.append(f"Content-Length: {count}\r\n\r\n")
        self.sock.sendall("".join(lines).encode())
        if count:
            self.sock.sendfile(file, offset, count)
        return self.response()

    def response(self):
        while b"\r\n\r\n" not in self.buffer:
            self.fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self.fill()
        self.buffer = self.buffer[length:]
        return status, headers

    def fill(self):
        more = self.sock.recv(65536)
        if not more:
            sys.exit("the gateway closed the connection")
        self.buffer += more


def main():
    base, token, path, part = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    host, _, port = base.split("://", 1)[1].rstrip("/").partition(":")
    conn = Connection(host, int(port or 80))
    size = os.path.getsize(path)
    name = base64.b64encode(os.path.basename(path).encode()).decode()
    common = {"Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0"}
    status, headers = conn.request("POST", "/v1/uploads", {
        **common, "Upload-Length": str(size), "Upload-Metadata": f"filename {name}"})
    if status != 201:
        sys.exit(f"POST answered {status}")
    location = headers["location"]
    if "://" in location:
        location = "/" + location.split("://", 1)[1].split("/", 1)[1]
    offset = 0
    digest = None
    with open(path, "rb") as f:
        while offset < size:
            count = min(part, size - offset)
            status, headers = conn.request("PATCH", location, {
                **common, "Upload-Offset": str(offset),
                "Content-Type": "application/offset+octet-stream"}, f, offset, count)
            if status != 204:
                sys.exit(f"PATCH at {offset} answered {status}")
            offset = int(headers["upload-offset"])
            digest = headers.get("ferry-sha256") or digest
    print(digest)


if __name__ == "__main__":
    main()
