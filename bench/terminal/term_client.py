#!/usr/bin/env python3
"""The client side of bench/terminal/run: one program drives both contenders.

Two ways into a terminal, measured by the same code:

  --ws URL --token TOKEN   ferry: the gateway's terminal WebSocket (subprotocols
                           ferry.terminal.v1 and ferry.token.TOKEN), binary frames both
                           ways; --ws again adds a node's URL, which only hold uses
  --ssh ARG...             ssh -tt ARG..., started on a PTY made here, as a person's
                           terminal emulator would (ssh puts that PTY in raw mode itself)

Commands (each prints one JSON object on stdout):

  latency KEYS WARMUP      keystroke echo latency: in a plain `bash --norc --noprofile`
                           with an empty prompt, type one letter, time until its echo
                           arrives, wait BENCH_KEY_GAP_MS (20), type the next; WARMUP
                           untimed keys first, then KEYS timed ones
  throughput FILE REPS     `cat FILE; echo DONE-…-MARKER`, timed from the send to the
                           marker's arrival, REPS times
  merge FILE...            p50 and p99 over the samples of several latency answers
  hold COUNT PID...        (--ws only) open COUNT terminals, in turn on each --ws URL, run
                           one command in each, and read VmRSS / VmHWM of each PID
                           before, with all open, and after closing them
"""

import argparse
import fcntl
import json
import os
import pty
import select
import signal
import struct
import sys
import termios
import time

COLS, ROWS = 120, 40
# How long any one wait may take before the run is declared broken.
WAIT_SECS = 60
# The plain shell both contenders type into: no rc files, an empty prompt, the same TERM.
PLAIN_SHELL = b"exec env PS1= PROMPT_COMMAND= TERM=xterm-256color bash --norc --noprofile\r"
# Timed keys: lowercase letters but h, l and m (they end escape sequences), so no echo can be
# mistaken for the tail of one (and the sync byte "#" that starts each line drains those).
KEYS = b"abcdefgijknopqrstuvwxyz"
KEYS_PER_LINE = 60
# The pause between one echo and the next keystroke: a person types, the shell waits. Back
# to back, every process on the way is still awake and the figure is a busy loop's.
KEY_GAP_SECS = float(os.environ.get("BENCH_KEY_GAP_MS", "20")) / 1000


class Broken(Exception):
    """The terminal did not behave as the bench needs (closed, silent, refused)."""


class Terminal:
    """Bytes in and out of one terminal, with a buffer of what arrived but was not used."""

    def __init__(self):
        self.pending = b""

    def send(self, data):
        raise NotImplementedError

    def recv(self, timeout):
        """The next piece of output, b"" if none arrived within timeout seconds."""
        raise NotImplementedError

    def close(self):
        raise NotImplementedError

    def wait_for(self, needle, timeout=WAIT_SECS):
        """Reads until `needle` has arrived; what follows it stays pending."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.pending.find(needle)
            if at >= 0:
                self.pending = self.pending[at + len(needle):]
                return
            left = deadline - time.monotonic()
            if left <= 0:
                tail = self.pending[-200:]
                raise Broken(f"no {needle!r} within {timeout} s; last output {tail!r}")
            # Keep only what could still hold the start of the needle.
            self.pending = self.pending[-len(needle):] + self.recv(left)


class WsTerminal(Terminal):
    """ferry: the gateway's terminal WebSocket."""

    def __init__(self, url, token):
        super().__init__()
        import websocket  # websocket-client, from the bench's own venv

        self.ws_module = websocket
        sep = "&" if "?" in url else "?"
        self.ws = websocket.create_connection(
            f"{url}{sep}cols={COLS}&rows={ROWS}",
            subprotocols=["ferry.terminal.v1", f"ferry.token.{token}"],
            timeout=WAIT_SECS,
            skip_utf8_validation=True,
        )
        opcode, data = self.ws.recv_data()
        if opcode != websocket.ABNF.OPCODE_TEXT:
            raise Broken(f"the first message is not text (opcode {opcode})")
        ready = json.loads(data)
        if ready.get("type") != "ready":
            raise Broken(f"the first message is not ready: {ready}")
        self.ready = ready

    def send(self, data):
        self.ws.send_bytes(data)

    def recv(self, timeout):
        websocket = self.ws_module
        self.ws.settimeout(timeout)
        try:
            opcode, data = self.ws.recv_data()
        except websocket.WebSocketTimeoutException:
            return b""
        except websocket.WebSocketConnectionClosedException as e:
            raise Broken(f"the terminal's WebSocket closed: {e}") from e
        if opcode == websocket.ABNF.OPCODE_BINARY:
            return data
        if opcode == websocket.ABNF.OPCODE_TEXT:
            message = json.loads(data)
            if message.get("type") in ("exit", "error"):
                raise Broken(f"the terminal ended: {message}")
            return b""
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            raise Broken("the gateway closed the terminal's WebSocket")
        return b""

    def close(self):
        try:
            self.ws.send(json.dumps({"type": "close"}))
        finally:
            self.ws.close()


class SshTerminal(Terminal):
    """ssh -tt on a PTY of this side, read and written through the PTY's master."""

    def __init__(self, ssh_args):
        super().__init__()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
            os.execvp("ssh", ["ssh", "-tt", *ssh_args])

    def send(self, data):
        while data:
            data = data[os.write(self.fd, data):]

    def recv(self, timeout):
        if not select.select([self.fd], [], [], timeout)[0]:
            return b""
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError as e:  # EIO: ssh exited and the PTY's other end is gone
            raise Broken(f"ssh ended: {e}") from e
        if not data:
            raise Broken("ssh ended")
        return data

    def close(self):
        os.kill(self.pid, signal.SIGTERM)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def start_plain_shell(term):
    """Replaces whatever shell the terminal started with the plain one, and waits for it."""
    term.send(PLAIN_SHELL)
    # A shell starting up may drop what was typed before its line editor took the
    # terminal; ask again each second until one answer comes back.
    for attempt in range(WAIT_SECS):
        term.send(b"echo READY-$((40+2))\r")
        try:
            term.wait_for(b"READY-42", timeout=1)
            return
        except Broken:
            if attempt == WAIT_SECS - 1:
                raise


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[int(rank) - 1]


def latency(term, keys, warmup):
    start_plain_shell(term)
    samples = []
    typed = 0
    while typed < warmup + keys:
        # '#' makes the line a comment, and its echo drains the previous line's output.
        term.send(b"#")
        term.wait_for(b"#")
        for _ in range(min(KEYS_PER_LINE, warmup + keys - typed)):
            key = KEYS[typed % len(KEYS):][:1]
            time.sleep(KEY_GAP_SECS)
            t0 = time.perf_counter_ns()
            term.send(key)
            term.wait_for(key)
            t1 = time.perf_counter_ns()
            if typed >= warmup:
                samples.append((t1 - t0) / 1e6)
            typed += 1
        term.send(b"\r")
    samples.sort()
    return {
        "keys": len(samples),
        "p50_ms": percentile(samples, 50),
        "p99_ms": percentile(samples, 99),
        "min_ms": samples[0],
        "max_ms": samples[-1],
        "mean_ms": sum(samples) / len(samples),
        "samples_ms": samples,
    }


def throughput(term, path, reps):
    start_plain_shell(term)
    marker = b"DONE-42-MARKER"
    runs = []
    for _ in range(reps):
        # The echo of the typed line shows $((6*7)), so only the command's output matches.
        command = f"cat '{path}'; echo DONE-$((6*7))-MARKER\r".encode()
        t0 = time.perf_counter_ns()
        term.send(command)
        received = len(term.pending)
        tail = term.pending
        term.pending = b""
        deadline = time.monotonic() + 10 * WAIT_SECS
        while marker not in tail:
            if time.monotonic() > deadline:
                raise Broken("no marker after the cat")
            piece = term.recv(WAIT_SECS)
            received += len(piece)
            tail = tail[-len(marker):] + piece
        t1 = time.perf_counter_ns()
        term.pending = tail[tail.find(marker) + len(marker):]
        runs.append({"seconds": (t1 - t0) / 1e9, "received_bytes": received})
    return {"runs": runs}


def merge(paths):
    """p50 and p99 over the samples of several latency answers (files of JSON)."""
    samples = []
    for path in paths:
        with open(path) as f:
            samples += json.load(f)["samples_ms"]
    samples.sort()
    return {
        "keys": len(samples),
        "p50_ms": percentile(samples, 50),
        "p99_ms": percentile(samples, 99),
        "max_ms": samples[-1],
    }


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields


def hold(open_terminal, count, pids):
    before = {pid: proc_status(pid) for pid in pids}
    terms = []
    t0 = time.monotonic()
    try:
        for i in range(count):
            term = open_terminal(i)
            terms.append(term)
            term.send(f"echo HELD-$(({i}+1000))\r".encode())
            term.wait_for(f"HELD-{i + 1000}".encode())
        opened_secs = time.monotonic() - t0
        time.sleep(1)
        held = {pid: proc_status(pid) for pid in pids}
    finally:
        for term in terms:
            term.close()
    time.sleep(3)
    after = {pid: proc_status(pid) for pid in pids}
    return {
        "count": len(terms),
        "open_seconds": opened_secs,
        "kib": {
            str(pid): {"before": before[pid], "held": held[pid], "after": after[pid]}
            for pid in pids
        },
    }


def main():
    if sys.argv[1:2] == ["merge"]:
        json.dump(merge(sys.argv[2:]), sys.stdout)
        print()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    way = parser.add_mutually_exclusive_group(required=True)
    way.add_argument("--ws", metavar="URL", action="append")
    way.add_argument("--ssh", nargs=argparse.REMAINDER, metavar="ARG")
    parser.add_argument("--token")
    parser.add_argument("command", nargs="+")
    # --ssh takes the rest of the line: the command comes first, the ssh arguments last.
    args = parser.parse_args()
    if args.ws and not args.token:
        parser.error("--ws needs --token")

    def open_terminal(index=0):
        if args.ws:
            return WsTerminal(args.ws[index % len(args.ws)], args.token)
        return SshTerminal(args.ssh)

    name, *rest = args.command
    if name == "hold":
        if not args.ws:
            parser.error("hold is for --ws")
        result = hold(open_terminal, int(rest[0]), [int(p) for p in rest[1:]])
    else:
        term = open_terminal()
        try:
            if name == "latency":
                result = latency(term, int(rest[0]), int(rest[1]))
            elif name == "throughput":
                result = throughput(term, rest[0], int(rest[1]))
            else:
                parser.error(f"unknown command {name}")
        finally:
            term.close()
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    try:
        main()
    except Broken as e:
        print(f"term_client: {e}", file=sys.stderr)
        sys.exit(1)
