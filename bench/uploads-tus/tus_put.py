#!/usr/bin/env python3
"""A plain tus 1.0 upload of one file, as any tus client does it, from the standard
library alone: POST to declare it, then PATCH parts of PART bytes each, reading each
part from the file as it goes. Prints the final PATCH's Ferry-Sha256 on success.

usage: tus_put.py BASE_URL TOKEN FILE PART_BYTES
"""
import base64
import http.client
import os
import sys
import urllib.parse


def main():
    base, token, path, part = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port)
    size = os.path.getsize(path)
    name = base64.b64encode(os.path.basename(path).encode()).decode()
    common = {"Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0"}
    conn.request("POST", "/v1/uploads", headers={
        **common, "Upload-Length": str(size), "Upload-Metadata": f"filename {name}"})
    answer = conn.getresponse()
    answer.read()
    if answer.status != 201:
        sys.exit(f"POST answered {answer.status}")
    location = answer.getheader("Location")
    offset = 0
    digest = None
    with open(path, "rb") as f:
        while offset < size:
            data = f.read(part)
            conn.request("PATCH", location, body=data, headers={
                **common, "Upload-Offset": str(offset),
                "Content-Type": "application/offset+octet-stream"})
            answer = conn.getresponse()
            answer.read()
            if answer.status != 204:
                sys.exit(f"PATCH at {offset} answered {answer.status}")
            offset = int(answer.getheader("Upload-Offset"))
            digest = answer.getheader("Ferry-Sha256") or digest
    print(digest)


if __name__ == "__main__":
    main()
