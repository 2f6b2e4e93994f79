//! The two halves of every scenario test.
//!
//! The runner refuses to work as root, and CI runs as root. So each scenario is an
//! outer `#[test]` (root) that prepares a folder owned by `nobody` and re-executes this
//! very test binary as `nobody`, running only the matching inner test, which is
//! `#[ignore]`d so that it never runs on its own. The outer test fails with the inner's
//! output unless the inner passed.

#![allow(dead_code)] // each test binary uses its own share of the helpers

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use ferry_exec::{Command, Identity, Output, Policy};

/// The repository's seccomp filters, shared with the end-to-end tests.
#[path = "../../../../tests/support/seccomp.rs"]
pub mod seccomp;

/// Names the folder the outer test prepared; set only for the inner half.
const BASE_ENV: &str = "FERRY_EXEC_TEST_BASE";
/// An inner test that has not finished by then is killed and the outer test fails.
const INNER_MAX: Duration = Duration::from_secs(30);

/// The uid of `nobody` and the gid of `nogroup` (or `nobody`), from the system files.
pub fn nobody() -> (u32, u32) {
    let field = |file: &str, names: &[&str]| -> u32 {
        let text = std::fs::read_to_string(file).unwrap();
        for name in names {
            for line in text.lines() {
                let parts: Vec<&str> = line.split(':').collect();
                if parts.first() == Some(name) && parts.len() > 2 {
                    return parts[2].parse().unwrap();
                }
            }
        }
        panic!("none of {names:?} in {file}");
    };
    (
        field("/etc/passwd", &["nobody"]),
        field("/etc/group", &["nogroup", "nobody"]),
    )
}

pub fn assert_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test must run as root (CI does): it checks the refusal as root and runs \
         every other scenario as `nobody`"
    );
}

/// Inner tests share `nobody`; one that uses up its process budget runs alone.
static NOBODY: RwLock<()> = RwLock::new(());

/// Runs the inner test `inner` of this binary as `nobody` and fails unless it passed.
pub fn as_nobody(inner: &str) {
    let _shared = NOBODY.read().unwrap_or_else(|e| e.into_inner());
    run_inner(inner);
}

/// [`as_nobody`], with no other inner test of this binary running meanwhile:
/// `RLIMIT_NPROC` counts every process of the user, so a fork bomb test needs them
/// to be its own.
pub fn as_nobody_alone(inner: &str) {
    let _alone = NOBODY.write().unwrap_or_else(|e| e.into_inner());
    run_inner(inner);
}

fn run_inner(inner: &str) {
    assert_root();
    let (uid, gid) = nobody();
    let base = tempfile::Builder::new()
        .prefix("ferry-exec-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::chown(base.path(), Some(uid), Some(gid)).unwrap();
    // A copy inside the prepared folder: the target dir may lie below a folder that only
    // root can search (a home folder), where nobody could not start the binary.
    let exe = base.path().join("inner-test");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // std drops the supplementary groups itself (setgroups(0)) when it changes the uid
    // as root; the inner half checks that it has none.
    let spawn = || {
        std::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                inner,
                "--nocapture",
                "--test-threads=1",
            ])
            .env(BASE_ENV, base.path())
            .current_dir(base.path())
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    // ETXTBSY: another test thread forked while this copy was still open for writing, and
    // its child holds the descriptor until it execs. It passes within moments.
    let mut attempts = 0;
    let mut child = loop {
        match spawn() {
            Err(e) if e.raw_os_error() == Some(26) && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            result => {
                break result
                    .unwrap_or_else(|e| panic!("cannot run {} as nobody: {e}", exe.display()));
            }
        }
    };
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > INNER_MAX {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = format!("{}\n{}", reader.join().unwrap(), err_reader.join().unwrap());
    let Some(status) = status else {
        panic!("{inner} (as nobody) did not finish within {INNER_MAX:?}:\n{text}");
    };
    // "1 passed" also proves the filter matched: zero tests run would exit 0 too.
    assert!(
        status.success() && text.contains("test result: ok. 1 passed"),
        "{inner} (as nobody) failed ({status}):\n{text}"
    );
}

/// For the inner half: the prepared folder, or `None` when started any other way
/// (for example by a plain `cargo test -- --ignored`), in which case it does nothing.
pub fn inner_base() -> Option<PathBuf> {
    let Some(base) = std::env::var_os(BASE_ENV) else {
        eprintln!("inner half: runs only when its outer test starts it as nobody");
        return None;
    };
    assert!(
        !rustix::process::geteuid().is_root(),
        "the inner half runs as nobody"
    );
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let groups = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .unwrap();
    assert_eq!(groups.trim(), "", "no supplementary groups as nobody");
    Some(PathBuf::from(base))
}

/// A person's workspace (`root`, also HOME) and the output folder, under `base`.
pub struct Site {
    pub base: PathBuf,
    pub root: PathBuf,
    pub out: PathBuf,
}

impl Site {
    pub fn new(base: &Path) -> Site {
        let root = base.join("home").join("alice");
        std::fs::create_dir_all(&root).unwrap();
        Site {
            base: base.to_path_buf(),
            out: base.join("output"),
            root,
        }
    }

    pub fn policy(&self) -> Policy {
        Policy::new(&self.root, &self.out)
    }

    pub fn who(&self) -> Identity {
        Identity {
            home: self.root.clone(),
            user: "alice".into(),
        }
    }

    /// `command` in the workspace root with the given timeout.
    pub fn cmd(&self, command: &str, timeout: Option<Duration>) -> Command {
        Command {
            command: command.into(),
            cwd: self.root.clone(),
            timeout,
            ..Command::default()
        }
    }
}

/// Pids of live processes whose command line holds `token`. Zombies have an empty
/// command line, so they do not count: they are dead, only not yet reaped.
pub fn processes_with(token: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(token) {
            found.push(pid);
        }
    }
    found
}

/// Waits up to `within` for every process holding `token` to be gone; returns the rest.
pub fn gone_within(token: &str, within: Duration) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let left = processes_with(token);
        if left.is_empty() || started.elapsed() > within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kill -0`: whether `pid` still exists and is not a zombie awaiting its reaper.
pub fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    if rustix::process::test_kill_process(pid).is_err() {
        return false;
    }
    let stat =
        std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())).unwrap_or_default();
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, None | Some('Z') | Some('X'))
}

/// Waits up to `within` for `pid` to die.
pub fn dies_within(pid: i32, within: Duration) -> bool {
    let started = Instant::now();
    while alive(pid) {
        if started.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The peak resident memory of this process, in bytes.
pub fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

/// Runs `f` while counting, every few milliseconds, the live processes holding `token`;
/// returns its result and the largest count seen.
pub fn peak_count_during<T>(token: &str, f: impl FnOnce() -> T) -> (T, usize) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        let token = token.to_string();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(processes_with(&token).len());
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let result = f();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (result, sampler.join().unwrap())
}

/// Tasks (threads) whose real uid is ours, zombies included: what `RLIMIT_NPROC` counts.
pub fn tasks_of_my_uid() -> u64 {
    let me = rustix::process::getuid().as_raw().to_string();
    let mut tasks = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        // Numeric entries only: `self` and `thread-self` are this process again.
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
        let real_uid = field("Uid:").and_then(|v| v.split_whitespace().next());
        if real_uid == Some(me.as_str()) {
            tasks += field("Threads:")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(1);
        }
    }
    tasks
}

/// The `max_processes` that leaves a fork bomb `budget` processes of its own.
///
/// Processes that earlier tests' runs killed are reparented to pid 1 and count against
/// the limit until it reaps them, which some container inits do only every few
/// seconds: wait (up to 5 s) for only this process's own tasks to be left.
pub fn process_limit_leaving(budget: u64) -> u64 {
    let own = || {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let started = Instant::now();
    let mut tasks = tasks_of_my_uid();
    while tasks > own() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        tasks = tasks_of_my_uid();
    }
    // +1: the sampler thread of `peak_count_during`.
    tasks + 1 + budget
}

/// Runs a fork bomb (marked in /proc by `token`) under `policy` with a process limit of
/// what runs already plus 64, and checks that the limit held, the call came back within
/// `within`, and nothing of it is left. Returns the output for the caller's own checks.
pub fn assert_fork_bomb_bounded(
    site: &Site,
    mut policy: Policy,
    token: &str,
    within: Duration,
) -> Output {
    policy.max_processes = process_limit_leaving(64);
    // The sleep starts before the bomb, so that the wait needs no fork; the comment
    // marks every forked copy of bash in /proc.
    let command = format!(
        "sleep 2 & s=$!; bomb() {{ bomb | bomb & }}; bomb; wait $s; echo survived # {token}"
    );
    let started = Instant::now();
    let (out, peak) = peak_count_during(token, || {
        ferry_exec::run(
            &site.cmd(&command, Some(Duration::from_secs(8))),
            &site.who(),
            &policy,
        )
        .unwrap()
    });
    let took = started.elapsed();
    assert!(
        peak > 10 && peak as u64 <= policy.max_processes,
        "{peak} processes at the peak, limit {}",
        policy.max_processes
    );
    assert!(!out.timed_out, "{out:?}");
    assert!(
        out.stderr.contains("Resource temporarily unavailable"),
        "forks hit the limit: {}",
        out.stderr
    );
    assert!(took < within, "returned after {took:?}");
    assert_eq!(
        gone_within(token, Duration::from_secs(3)),
        Vec::<u32>::new()
    );
    out
}

#[path = "../../../../tests/support/escapes.rs"]
pub mod escapes;

/// Runs every way out of escapes.rs under `policy`, once to bash's exit and once to the
/// deadline. When each call returns, no process the command started may be alive, and
/// the answer says what happened. `exact`: the answer counts every leftover; not under
/// bwrap, whose pid namespace may end some of them before the reaper gets to them.
pub fn assert_nothing_outlives(site: &Site, policy: &Policy, exact: bool) {
    for outlast in [false, true] {
        let marker = escapes::marker();
        let dir = site.root.join(format!("escapes-{outlast}"));
        let script = escapes::script(&marker, &dir, outlast);
        let timeout = outlast.then_some(Duration::from_secs(8));
        let started = Instant::now();
        let out = ferry_exec::run(&site.cmd(&script, timeout), &site.who(), policy)
            .unwrap_or_else(|e| panic!("outlast={outlast}: {e}"));
        let took = started.elapsed();
        let left = escapes::survivors(&marker);
        assert_eq!(
            left,
            Vec::<u32>::new(),
            "outlast={outlast}: alive after the call returned: {out:?}"
        );
        assert_eq!(out.stdout, "ready\n", "every escape ran: {out:?}");
        assert_eq!(out.timed_out, outlast, "{out:?}");
        let want = escapes::ESCAPES + u32::from(outlast);
        if outlast {
            assert_eq!(out.signal, Some(9), "{out:?}");
        } else {
            assert_eq!((out.exit_code, out.signal), (Some(0), None), "{out:?}");
            assert!(took < Duration::from_secs(8), "returned after {took:?}");
        }
        if exact {
            assert_eq!(out.leftovers_killed, want, "{out:?}");
        } else {
            assert!(out.leftovers_killed <= want + 2, "{out:?}");
        }
    }
}

/// What [`hide`] takes away from the kernel this thread sees.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// Landlock, as a kernel built without it.
    Landlock,
    /// Landlock, and new user namespaces, as a kernel or container that forbids them.
    LandlockAndUserNamespaces,
}

/// Makes this thread (and what it starts) see a kernel without what `hidden` names.
pub fn hide(hidden: Hidden) {
    let program: &'static [libc::sock_filter] = match hidden {
        Hidden::Landlock => &seccomp::HIDE_LANDLOCK,
        Hidden::LandlockAndUserNamespaces => &seccomp::HIDE_LANDLOCK_AND_USER_NAMESPACES,
    };
    seccomp::install(program).expect("seccomp");
}
