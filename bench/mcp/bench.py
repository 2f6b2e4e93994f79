#!/usr/bin/env python3
"""Per-call latency of ferry's MCP tools and of the reference MCP filesystem server's,
both driven in one run by the same client: the official MCP Python SDK, with the
session code of tests/mcp/driver.py. Start it through bench/mcp/run, which prepares
the Python environment, the reference server and a release build of ferry.

Each operation is called once and its answer checked, then called `--warmup` times
untimed, then `--calls` times timed, the two servers taking turns call by call so
that noise from the rest of the machine falls on both alike. A time is the wall time
of one `await` of the SDK call: client encoding and decoding, the pipe both ways and
the server's work.

With --host (as root) a third contender joins: ferry in host mode. The bench makes a
host-mode site (`ferry site init --mode host`) with one person, runs `ferry mcp` as the
service user `ferry`, and every file operation and command of that server is done by
the person's worker, started through the setuid `ferry-posix-helper` on first use and
reused afterwards. Beside the table it times the first call of fresh sessions, which
pays the worker's start. Every POSIX user and group the bench creates is removed at
the end, whatever happens.

With --unsandboxed another contender joins: ferry on a second local site that sets
`[exec] sandbox = "none"`, beside the default one (`auto`, the strongest sandbox the
machine has), so that "default − none" prices the sandbox per call.
"""

import argparse
import grp
import math
import os
import platform
import pwd
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mcp"))
import driver  # noqa: E402 - the tests' session code, so both measure the same client
import thin_client  # noqa: E402 - beside this file: the bare JSON-RPC client

PERSON = "alice"
# Host mode: a person id no real site is likely to use, its POSIX user, and the
# accounts `ferry site init --mode host` makes for every site.
HOST_PERSON = "benchhost"
HOST_USER = f"fy_person_{HOST_PERSON}"
SERVICE_USER = "ferry"
SHARED_GROUP = "fy_shared"
READ_BYTES = 4096
LIST_ENTRIES = 1000
# The edit flips this word back and forth: every call is one exact replacement.
EDIT_WORDS = ("alpha", "omega")


def log(message):
    print(f"[bench mcp {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class BenchError(Exception):
    """The run cannot be trusted or cannot go on; main() reports it and exits 1."""


def die(message):
    raise BenchError(message)


def make_files(folder):
    """The files every operation works on, identical for both servers."""
    folder.mkdir(parents=True, exist_ok=True)
    lines, size, n = [], 0, 0
    while size < READ_BYTES:
        line = f"line {n:04d}: the quick brown fox jumps over the lazy dog\n"
        lines.append(line)
        size += len(line)
        n += 1
    text = "".join(lines)[: READ_BYTES - 1] + "\n"
    (folder / "read.txt").write_text(text)
    (folder / "edit.txt").write_text(f"# settings\nname = {EDIT_WORDS[0]}\nsize = 3\n")
    many = folder / "many"
    many.mkdir(exist_ok=True)
    for i in range(LIST_ENTRIES):
        (many / f"f{i:04d}.txt").write_text(f"{i}\n")


def ferry_env():
    """The caller's environment without FERRY_ settings, which would change the site."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}


def as_user(user):
    """The command prefix that runs a program as `user` (nothing for None); ferry runs
    no command while it is root, and both servers run as the same user, to be fair."""
    if user is None:
        return []
    entry = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]


def give_to(folder, user):
    """Makes `folder` and everything below it `user`'s, as if they had written it."""
    entry = pwd.getpwnam(user)
    for parent, dirs, files in os.walk(folder):
        for name in [parent] + [os.path.join(parent, n) for n in dirs + files]:
            os.chown(name, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def prepare_ferry(ferry, work, prefix):
    """A site with person alice and the files in her workspace; None (after saying why)
    when this ferry has no `mcp` command yet."""
    help_run = subprocess.run(
        prefix + [ferry, "mcp", "--help"], check=False, capture_output=True, text=True, env=ferry_env()
    )
    if help_run.returncode != 0:
        log(
            f"warning: `ferry mcp` is not available ({help_run.stderr.strip().splitlines()[-1:]}); "
            "measuring the reference server alone"
        )
        return None
    data = work / "site"
    for command in (["site", "init", "--mode", "local"], ["person", "add", PERSON]):
        done = subprocess.run(
            prefix + [ferry, *command, "--data", str(data)],
            check=False,
            capture_output=True,
            text=True,
            env=ferry_env(),
        )
        if done.returncode != 0:
            die(f"ferry {' '.join(command)} failed: {done.stdout}{done.stderr}")
    make_files(data / "home" / PERSON / "bench")
    return data


def system_tool(name):
    """A system program; the administration tools may live in sbin, outside PATH."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(["/usr/sbin", "/sbin"]))
    if not found:
        die(f"`{name}` is missing: --host needs it (Debian: passwd, util-linux)")
    return found


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def group_exists(name):
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


def pids_of(uid):
    """The processes whose real uid is `uid`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                for line in status:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except OSError:
            continue  # ended meanwhile
    return pids


def copy_executable(source, folder):
    """A copy of `source` in `folder` that every user can run, and that a rebuild of
    the original during the run does not change."""
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    target = folder / Path(source).name
    shutil.copyfile(source, target)
    target.chmod(0o755)
    return target


class HostSite:
    """A host-mode site with person benchhost, made in `work`/host, and the POSIX
    accounts that come with it. `cleanup` removes every user and group it created (and
    only those), even after a failure halfway through `prepare`."""

    def __init__(self, work):
        self.root = work / "host"
        self.data = self.root / "site"
        self.helper = self.root / "lib" / "ferry-posix-helper"
        self.folder = self.data / "home" / HOST_PERSON / "bench"
        self.users, self.groups = [], []

    def claim_accounts(self):
        """Decides which accounts are the bench's to remove: the person's always (a
        leftover of an interrupted run is removed first), the service user and the
        shared group only when they do not exist yet."""
        for tool in ("useradd", "userdel", "groupadd", "groupdel", "usermod", "setpriv"):
            system_tool(tool)
        self.users, self.groups = [HOST_USER], [HOST_USER]
        if user_exists(HOST_USER) or group_exists(HOST_USER):
            log(f"removing {HOST_USER}, left by an earlier run")
            _, left = self.remove_accounts()
            if left:
                die(f"could not remove {', '.join(left)} left by an earlier run")
        if not user_exists(SERVICE_USER):
            self.users.append(SERVICE_USER)
        for name in (SERVICE_USER, SHARED_GROUP):
            if not group_exists(name):
                self.groups.append(name)

    def prepare(self, ferry, helper):
        """Makes the site as the operator would, as root: site init, person add, then site init --mode host.
        Returns the server command (`ferry mcp` as the service user)."""
        if not Path(helper).is_file():
            die(f"{helper} is missing: build it (cargo build --release -p ferry-posix-helper) or name it with --helper")
        # Persons walk down to their home, the service to the site: every folder above
        # must be open to all. The helper's folder must be root's and no one else's.
        for folder in [self.root.parent, *self.root.parent.parents]:
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                die(f"{folder} is closed to other users: host mode needs every folder above the site open (o+x)")
        self.root.mkdir(mode=0o755)
        self.root.chmod(0o755)
        self.helper.parent.mkdir(mode=0o755)
        self.helper.parent.chmod(0o755)
        self.claim_accounts()
        for command in (
            [ferry, "site", "init", "--mode", "local", "--data", str(self.data)],
            [ferry, "person", "add", HOST_PERSON, "--data", str(self.data)],
            [ferry, "site", "init", "--mode", "host", "--data", str(self.data),
             "--helper-path", str(self.helper), "--helper-source", str(helper)],
        ):
            done = subprocess.run(command, check=False, capture_output=True, text=True, env=ferry_env())
            if done.returncode != 0:
                die(f"`ferry {' '.join(command[1:4])}` failed: {done.stdout}{done.stderr}")
        make_files(self.folder)
        give_to(self.folder, HOST_USER)
        setpriv = system_tool("setpriv")
        service = [setpriv, f"--reuid={SERVICE_USER}", f"--regid={SERVICE_USER}", "--init-groups", "--"]
        return service + [ferry, "mcp", "--data", str(self.data), "--person", HOST_PERSON]

    def remove_accounts(self):
        """Removes the claimed users, then groups (userdel may take a user's own group
        with it); returns what was there and what is still there."""
        there = [f"user {u}" for u in self.users if user_exists(u)]
        there += [f"group {g}" for g in self.groups if group_exists(g)]
        for user in self.users:
            if user_exists(user):
                subprocess.run([system_tool("userdel"), user], check=False, capture_output=True)
        for name in self.groups:
            if group_exists(name):
                subprocess.run([system_tool("groupdel"), name], check=False, capture_output=True)
        left = [f"user {u}" for u in self.users if user_exists(u)]
        left += [f"group {g}" for g in self.groups if group_exists(g)]
        return there, left

    def cleanup(self):
        """Ends the person's workers if any outlived their server (they end when its
        socket closes), then removes the accounts; returns what could not be removed."""
        if not self.users:
            return []  # nothing was claimed, so nothing was made
        if user_exists(HOST_USER):
            uid = pwd.getpwnam(HOST_USER).pw_uid
            deadline = time.monotonic() + 5
            while pids_of(uid) and time.monotonic() < deadline:
                time.sleep(0.1)
            for pid in pids_of(uid):
                log(f"warning: a process of {HOST_USER} outlived its server: ending {pid}")
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while pids_of(uid) and time.monotonic() < deadline:
                time.sleep(0.1)
        there, left = self.remove_accounts()
        if left:
            log(f"error: could not remove {', '.join(left)}: remove them by hand (userdel, groupdel)")
        elif there:
            log(f"host mode: removed {', '.join(there)}")
        return left


@dataclass
class Contender:
    """One server in the race, with how it names the bench files."""

    label: str
    server: dict
    path: Callable[[str], str]  # bench file name -> the path this server takes
    client: object = None
    info: dict = field(default_factory=dict)
    tools: set = field(default_factory=set)
    edits: int = 0  # edits made so far, to know which way the next one flips


@dataclass
class Operation:
    label: str
    # Per contender label: (tool name, function(contender) -> the call's coroutine); a
    # contender without an entry (or without the tool) does not take part.
    ways: dict
    check: Callable[[Contender, dict], None]  # raises on a wrong answer


def tool_result(result):
    if not isinstance(result, dict) or "content" not in result:
        raise AssertionError(f"not a tool result: {result}")
    if result.get("isError"):
        raise AssertionError(f"the tool failed: {result}")
    return "\n".join(item.get("text", "") for item in result["content"])


async def call(contender, name, arguments):
    result = await contender.client.call_tool(name, arguments)
    # The thin client answers with the server's JSON already; the SDK with its objects.
    return result if isinstance(result, dict) else driver.dump(result)


async def ping(contender):
    await contender.client.send_ping()
    return {"content": []}


async def edit(contender, tool):
    old, new = EDIT_WORDS if contender.edits % 2 == 0 else EDIT_WORDS[::-1]
    contender.edits += 1
    if tool == "edit_file":
        arguments = {"path": contender.path("edit.txt"), "edits": [{"oldText": old, "newText": new}]}
    else:
        arguments = {"edits": [{"path": contender.path("edit.txt"), "oldText": old, "newText": new}]}
    return await call(contender, tool, arguments)


async def list_all(contender, tool):
    """Every entry of the folder: one call for the reference server, page after page
    for ferry's dir_list (8192-byte pages); returns the last page with the count."""
    if tool == "list_directory":
        result = await call(contender, tool, {"path": contender.path("many")})
        result["counted"] = tool_result(result).count("[FILE]")
        return result
    arguments, counted = {"path": contender.path("many")}, 0
    while True:
        result = await call(contender, tool, arguments)
        tool_result(result)
        page = result.get("structuredContent") or {}
        counted += len(page.get("entries") or [])
        if not page.get("nextPageToken"):
            result["counted"] = counted
            return result
        arguments = {"path": contender.path("many"), "pageToken": page["nextPageToken"]}


def check_read(contender, result):
    text = tool_result(result)
    if "line 0000" not in text or "lazy dog" not in text:
        raise AssertionError(f"the 4 KiB file's text is not in the answer: {text[:300]!r}")


def check_list_first(contender, result):
    if "f0000.txt" not in tool_result(result):
        raise AssertionError("the listing does not show f0000.txt")


def check_list_all(contender, result):
    tool_result(result)
    if result.get("counted") != LIST_ENTRIES:
        raise AssertionError(f"listed {result.get('counted')} entries, not {LIST_ENTRIES}")


def check_terminal(contender, result):
    tool_result(result)


OPERATIONS = [
    Operation(
        "ping (transport and client floor)",
        {
            "reference": ("ping", ping),
            "ferry": ("ping", ping),
        },
        lambda c, r: None,
    ),
    Operation(
        "read a 4 KiB text file",
        {
            "reference": ("read_text_file", lambda c: call(c, "read_text_file", {"path": c.path("read.txt")})),
            "ferry": ("file_read", lambda c: call(c, "file_read", {"path": c.path("read.txt")})),
        },
        check_read,
    ),
    Operation(
        "edit: one exact replacement",
        {
            "reference": ("edit_file", lambda c: edit(c, "edit_file")),
            "ferry": ("file_edit", lambda c: edit(c, "file_edit")),
        },
        lambda c, r: tool_result(r),
    ),
    Operation(
        "list a 1,000-entry folder: one call",
        {
            "reference": ("list_directory", lambda c: call(c, "list_directory", {"path": c.path("many")})),
            "ferry": ("dir_list", lambda c: call(c, "dir_list", {"path": c.path("many")})),
        },
        check_list_first,
    ),
    Operation(
        "list a 1,000-entry folder: every page",
        {
            "reference": ("list_directory", lambda c: list_all(c, "list_directory")),
            "ferry": ("dir_list", lambda c: list_all(c, "dir_list")),
        },
        check_list_all,
    ),
    Operation(
        "terminal_run `true`",
        {
            "ferry": ("terminal_run", lambda c: call(c, "terminal_run", {"command": "true"})),
        },
        check_terminal,
    ),
]


# Host mode and the unsandboxed site answer the same calls as local mode: only who
# performs them, or the sandbox commands run in, changes.
UNSANDBOXED = "ferry none"
for _op in OPERATIONS:
    if "ferry" in _op.ways:
        _op.ways["ferry host"] = _op.ways["ferry"]
        _op.ways[UNSANDBOXED] = _op.ways["ferry"]


def check_edit_landed(contender, folder):
    """The first edit changed the file on disk (then the second turns it back)."""
    text = (folder / "edit.txt").read_text()
    want = EDIT_WORDS[contender.edits % 2]
    if f"name = {want}" not in text:
        raise AssertionError(f"after {contender.edits} edits edit.txt reads {text!r}")


def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


async def measure(contenders, folders, calls, warmup):
    rows = []
    for op in OPERATIONS:
        racing = []
        for c in contenders:
            way = op.ways.get(c.label)
            if way is None:
                continue
            tool, run = way
            if tool != "ping" and tool not in c.tools:
                log(f"warning: {c.label} has no tool {tool}: '{op.label}' is not measured for it")
                continue
            racing.append((c, tool, run))
        if not racing:
            continue
        log(f"{op.label}: {warmup} warm-up, then {calls} timed calls each")
        for c, tool, run in racing:
            try:
                result = await run(c)
                op.check(c, result)
                if tool in ("edit_file", "file_edit"):
                    check_edit_landed(c, folders[c.label])
            except Exception as e:  # a wrong answer makes its timing meaningless
                die(f"{c.label} {tool}: {e}")
        for _ in range(warmup):
            for c, _tool, run in racing:
                await run(c)
        times = {c.label: [] for c, _, _ in racing}
        for _ in range(calls):
            for c, _tool, run in racing:
                start = time.perf_counter_ns()
                result = await run(c)
                times[c.label].append(time.perf_counter_ns() - start)
                if isinstance(result, dict) and result.get("isError"):
                    die(f"{c.label} {op.label}: a timed call failed: {result}")
        row = {"operation": op.label}
        for c, tool, _ in racing:
            values = sorted(times[c.label])
            row[c.label] = {
                "tool": tool,
                "median_ms": statistics.median(values) / 1e6,
                "p95_ms": percentile(values, 0.95) / 1e6,
            }
        rows.append(row)
    return rows


def ms(value):
    return f"{value:.3f}"


def table(rows, contenders):
    labels = [c.label for c in contenders]
    host = "ferry host" in labels
    head = (
        "| operation | reference tool | median ms | p95 ms | ferry tool | median ms | p95 ms "
        "| reference ÷ ferry (median) |"
    )
    rule = "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |"
    if host:
        head += " ferry host median ms | p95 ms | host − local (median ms) |"
        rule += " ---: | ---: | ---: |"
    unsandboxed = UNSANDBOXED in labels
    if unsandboxed:
        head += " ferry none median ms | p95 ms | default − none (median ms) |"
        rule += " ---: | ---: | ---: |"
    out = [head, rule]
    for row in rows:
        cells = [row["operation"]]
        for label in ("reference", "ferry"):
            m = row.get(label)
            if label in labels and m:
                cells += [f"`{m['tool']}`", ms(m["median_ms"]), ms(m["p95_ms"])]
            else:
                cells += ["—", "", ""]
        if row.get("reference") and row.get("ferry"):
            cells.append(f"**{row['reference']['median_ms'] / row['ferry']['median_ms']:.2f}**")
        else:
            cells.append("")
        if host:
            local, hosted = row.get("ferry"), row.get("ferry host")
            cells += [ms(hosted["median_ms"]), ms(hosted["p95_ms"])] if hosted else ["", ""]
            cells.append(f"**{hosted['median_ms'] - local['median_ms']:+.3f}**" if local and hosted else "")
        if unsandboxed:
            local, bare = row.get("ferry"), row.get(UNSANDBOXED)
            cells += [ms(bare["median_ms"]), ms(bare["p95_ms"])] if bare else ["", ""]
            cells.append(f"**{local['median_ms'] - bare['median_ms']:+.3f}**" if local and bare else "")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


async def first_calls(contenders, runs, errlog):
    """The first and the second tool call (file_read of the 4 KiB file) of `runs` fresh
    sessions per contender, the contenders taking turns: in host mode the first one
    starts the person's worker. Returns {label: (first times, second times)} in ns."""
    times = {c.label: ([], []) for c in contenders}
    for i in range(runs):
        for c in contenders if i % 2 == 0 else contenders[::-1]:
            fresh = Contender(c.label, c.server, c.path)
            try:
                async with driver.session(fresh.server, errlog=errlog) as (fresh.client, _):
                    for nth in (0, 1):
                        start = time.perf_counter_ns()
                        result = await call(fresh, "file_read", {"path": fresh.path("read.txt")})
                        times[c.label][nth].append(time.perf_counter_ns() - start)
                        check_read(fresh, result)
            except BenchError:
                raise
            except Exception as e:
                die(f"{c.label}, fresh session {i + 1}: {driver.describe(e)}")
    return times


def first_call_table(times):
    """Medians of first_calls() for local and host mode, and the difference."""
    medians = {label: [statistics.median(t) / 1e6 for t in pair] for label, pair in times.items()}
    local, host = medians["ferry"], medians["ferry host"]
    runs = len(times["ferry"][0])
    return "\n".join(
        [
            f"| fresh session: `file_read` 4 KiB, median of {runs} sessions | first call ms | second call ms |",
            "| --- | ---: | ---: |",
            f"| ferry | {ms(local[0])} | {ms(local[1])} |",
            f"| ferry host | {ms(host[0])} | {ms(host[1])} |",
            f"| host − local | **{host[0] - local[0]:+.3f}** | **{host[1] - local[1]:+.3f}** |",
        ]
    )


async def run(args, ferry, host_server):
    """Starts the servers, measures; returns the rows, the contenders and the fresh
    sessions' times (None without the host contender)."""
    work = Path(args.work).resolve()
    prefix = as_user(args.run_as)
    # The reference server's folder and the local site, the user the servers run as's.
    local = work / "local"
    local.mkdir()
    if args.run_as:
        log(f"the reference server and local ferry run as {args.run_as}")
        work.chmod(0o755)
        give_to(local, args.run_as)
    ref_folder = local / "reference"
    make_files(ref_folder)
    contenders = [
        Contender(
            "reference",
            {"stdio": {"command": prefix + [args.reference, str(ref_folder)]}},
            lambda name: str(ref_folder / name),
        )
    ]
    folders = {"reference": ref_folder}
    data = None if ferry is None else prepare_ferry(ferry, local, prefix)
    if data is not None:
        command = [ferry, "mcp", "--data", str(data), "--person", PERSON]
        contenders.append(Contender("ferry", {"stdio": {"command": prefix + command}}, lambda name: f"bench/{name}"))
        folders["ferry"] = data / "home" / PERSON / "bench"
        if args.unsandboxed:
            bare = local / "none"
            bare.mkdir()
            if args.run_as:
                give_to(bare, args.run_as)
            bare_data = prepare_ferry(ferry, bare, prefix)
            (bare_data / "ferry.toml").write_text('[exec]\nsandbox = "none"\n')
            command = [ferry, "mcp", "--data", str(bare_data), "--person", PERSON]
            contenders.append(
                Contender(UNSANDBOXED, {"stdio": {"command": prefix + command}}, lambda name: f"bench/{name}")
            )
            folders[UNSANDBOXED] = bare_data / "home" / PERSON / "bench"
        if host_server is not None:
            command, folder = host_server
            contenders.append(Contender("ferry host", {"stdio": {"command": command}}, lambda name: f"bench/{name}"))
            folders["ferry host"] = folder
    elif host_server is not None or args.unsandboxed:
        die("--host and --unsandboxed need a ferry with the `mcp` command")
    if args.run_as:
        give_to(local, args.run_as)

    # The servers' stderr: kept out of the report, shown when one fails to start.
    errlog_path = work / "servers.log"
    with open(errlog_path, "w") as errlog:
        async with AsyncExitStack() as stack:
            for c in contenders:
                try:
                    c.client, initialized = await stack.enter_async_context(driver.session(c.server, errlog=errlog))
                except Exception as e:
                    errlog.flush()
                    die(f"{c.label} did not start: {driver.describe(e)}; its stderr:\n{errlog_path.read_text()}")
                c.info = driver.dump(initialized).get("serverInfo", {})
                c.tools = {tool.name for tool in await driver.list_all_tools(c.client)}
                log(f"{c.label}: {c.info.get('name')} {c.info.get('version')}, {len(c.tools)} tools")
            rows = await measure(contenders, folders, args.calls, args.warmup)
        thin_rows = await measure_thin(contenders, folders, args, errlog)
        fresh = None
        if host_server is not None:
            racing = [c for c in contenders if c.label in ("ferry", "ferry host")]
            log(f"first calls: {args.fresh_sessions} fresh sessions each of local and host ferry")
            fresh = await first_calls(racing, args.fresh_sessions, errlog)
    return rows, thin_rows, contenders, fresh


async def measure_thin(contenders, folders, args, errlog):
    """The same operations through the bare JSON-RPC client: the same servers started
    again, each taking over its SDK run's tools and its count of edits (which word the
    next edit flips)."""
    log("the same calls again through a bare JSON-RPC client (no SDK)")
    thin = [Contender(c.label, c.server, c.path, tools=c.tools, edits=c.edits, info=c.info) for c in contenders]
    async with AsyncExitStack() as stack:
        for c in thin:
            try:
                c.client, _ = await stack.enter_async_context(
                    thin_client.session(c.server["stdio"]["command"], errlog)
                )
            except Exception as e:
                die(f"{c.label} did not start for the bare client: {e}")
        return await measure(thin, folders, args.calls, args.warmup)


def interrupted(signum, _frame):
    """SIGTERM and SIGHUP end the run like Ctrl-C, so the accounts are still removed;
    a second signal does not cut that cleanup short."""
    for other in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(other, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    parser = argparse.ArgumentParser(description="ferry's MCP tools against the reference filesystem server")
    parser.add_argument("--work", required=True, help="an empty folder for the files and the ferry sites")
    parser.add_argument("--reference", required=True, help="the reference server's executable")
    parser.add_argument("--ferry", help="the ferry binary (not needed with --reference-only)")
    parser.add_argument("--reference-only", action="store_true", help="measure the reference server alone")
    parser.add_argument(
        "--host",
        action="store_true",
        help="also measure ferry in host mode (root: creates POSIX users and groups, removed at the end)",
    )
    parser.add_argument(
        "--helper", help="the ferry-posix-helper to install with --host (default: the one beside --ferry)"
    )
    parser.add_argument(
        "--unsandboxed",
        action="store_true",
        help='also measure ferry on a site with [exec] sandbox = "none", to price the default sandbox',
    )
    parser.add_argument("--calls", type=int, default=500, help="timed calls per operation and server")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls first")
    parser.add_argument(
        "--fresh-sessions", type=int, default=7, help="with --host: fresh sessions timed for the first call"
    )
    parser.add_argument("--results", help="also write the results (markdown) here")
    parser.add_argument(
        "--run-as",
        default="nobody" if os.geteuid() == 0 else None,
        help="the user the reference server and local ferry run as (default: nobody when root, else yourself)",
    )
    args = parser.parse_args()
    if not args.reference_only and not args.ferry:
        parser.error("--ferry is required unless --reference-only")
    if args.host and args.reference_only:
        parser.error("--host measures ferry: it does not go with --reference-only")
    if args.unsandboxed and args.reference_only:
        parser.error("--unsandboxed measures ferry: it does not go with --reference-only")
    if args.host and os.geteuid() != 0:
        parser.error(
            "--host creates POSIX users and groups and installs a setuid helper: run it as root "
            f"(effective uid {os.geteuid()})"
        )
    if args.host and args.fresh_sessions < 1:
        parser.error("--fresh-sessions must be at least 1")
    if args.ferry and not args.reference_only and not Path(args.ferry).is_file():
        parser.error(f"--ferry {args.ferry}: no such file")

    load_before = os.getloadavg()
    work = Path(args.work).resolve()
    host = HostSite(work) if args.host else None
    left = []
    if host:
        signal.signal(signal.SIGTERM, interrupted)
        signal.signal(signal.SIGHUP, interrupted)
        work.chmod(0o755)  # the service and the person walk through it to the site
    try:
        try:
            # A copy, run by every ferry contender: the servers (and host mode's workers,
            # started later) run the same binary even if the build tree changes meanwhile.
            ferry = None if args.reference_only else str(copy_executable(args.ferry, work / "bin"))
            host_server = None
            if host:
                helper = args.helper or str(Path(args.ferry).with_name("ferry-posix-helper"))
                host_server = (host.prepare(ferry, helper), host.folder)
                log(f"host mode: site at {host.data}, person {HOST_PERSON} ({HOST_USER})")
            rows, thin_rows, contenders, fresh = anyio.run(run, args, ferry, host_server)
        finally:
            if host:
                left = host.cleanup()
    except BaseException as e:  # anyio's task groups wrap errors: find ours
        errors = [leaf for leaf in driver.leaves(e) if isinstance(leaf, BenchError)]
        if not errors:
            raise
        log(f"error: {errors[0]}")
        sys.exit(1)
    versions = ", ".join(f"{c.label}: {c.info.get('name')} {c.info.get('version')}" for c in contenders)
    node = subprocess.run(["node", "--version"], check=False, capture_output=True, text=True).stdout.strip()
    lines = [
        f"## MCP tool latency: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        (
            f"{args.calls} timed calls per operation and server after {args.warmup} warm-up calls, "
            f"the servers taking turns. Client: MCP Python SDK {version('mcp')} on Python "
            f"{platform.python_version()}, stdio. Servers: {versions}; Node.js {node}."
        ),
        (
            f"Machine: {os.cpu_count()} cores; load average before {load_before[0]:.2f}, "
            f"after {os.getloadavg()[0]:.2f}."
        ),
    ]
    if any(c.label == "ferry host" for c in contenders):
        lines.append(
            f"ferry host: `ferry mcp` as the service user `{SERVICE_USER}`; every file operation and "
            f"command is done by the person's worker (`{HOST_USER}`), started through "
            "`ferry-posix-helper` on the first call and reused. The first call of a session pays "
            "that start; the warm-up absorbs it, so \"host − local\" is what the helper and worker "
            "cost per call once the worker runs. The first call is timed on its own below."
        )
    if any(c.label == UNSANDBOXED for c in contenders):
        lines.append(
            "ferry none: the same local site with `[exec] sandbox = \"none\"`; ferry runs its "
            "commands in the default sandbox (`auto`), so \"default − none\" is what that sandbox "
            "costs per call."
        )
    lines += [
        "",
        table(rows, contenders),
        "",
        "The same calls through a bare JSON-RPC client (`bench/mcp/thin_client.py`: one line "
        "out, one line back, no SDK objects): the servers' own latency.",
        "",
        table(thin_rows, contenders),
        "",
    ]
    if fresh is not None:
        lines += [first_call_table(fresh), ""]
    report = "\n".join(lines)
    print(report)
    if args.results:
        Path(args.results).write_text(report)
        log(f"written to {args.results}")
    if len(contenders) == 1:
        log("the reference server alone was measured: no ratios")
    if left:
        sys.exit(1)


if __name__ == "__main__":
    main()
