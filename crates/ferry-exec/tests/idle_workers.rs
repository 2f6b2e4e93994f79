//! A person's workers end: idle ones once unused for the pool's idle timeout, and one
//! whose start failed is waited for, so no process of it is left.
//!
//! The worker here is this test binary run again: the "helper" is `env`, which sets a
//! variable and execs the binary with only [`worker_entry`] selected; that test then
//! serves the pool's socket on its stdin, as `ferry worker` does behind the real helper.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_exec::ops::{Op, Reply, RunSettings, SandboxKind};
use ferry_exec::worker::{Hello, WorkerPool, WorkerSpawn};

/// Set in the environment of the re-run binary: it is to serve as a worker.
const AS_WORKER: &str = "FERRY_TEST_SERVE_AS_WORKER";

/// Not a test of its own: when this binary runs as a worker, serves stdin.
#[test]
fn worker_entry() {
    if std::env::var_os(AS_WORKER).is_none() {
        return;
    }
    let stdin = std::io::stdin().as_raw_fd();
    // SAFETY: the pool gave the worker its socket as stdin, and nothing else here uses it.
    let stream = unsafe { <UnixStream as std::os::fd::FromRawFd>::from_raw_fd(stdin) };
    ferry_exec::worker::serve(stream).expect("the worker serves until its socket closes");
}

fn pool(data: &std::path::Path, idle_timeout: Duration) -> WorkerPool {
    let home = data.join("home/alice");
    std::fs::create_dir_all(home.join("output")).unwrap();
    let spawn = WorkerSpawn {
        helper: PathBuf::from("/usr/bin/env"),
        person: format!("{AS_WORKER}=1"),
        program: std::env::current_exe().unwrap(),
        args: ["--exact", "worker_entry", "--test-threads=1", "--quiet"]
            .map(str::to_owned)
            .to_vec(),
        hello: Hello {
            base: data.to_path_buf(),
            home: home.clone(),
            trees: Vec::new(),
            run: RunSettings {
                user: "alice".into(),
                full_output_dir: home.join("output"),
                sandbox: SandboxKind::None,
                network: false,
                output_ttl_secs: 60,
                output_max_bytes: 1 << 20,
            },
        },
        // An account that exists wherever the test runs: the pool looks it up.
        account: "root".into(),
    };
    WorkerPool::with_idle_timeout(spawn, idle_timeout)
}

/// Waits up to `limit` for `done`, checking every 10 ms.
fn within(limit: Duration, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

fn sweep(pool: &WorkerPool) {
    match pool.execute(&Op::SweepOutput) {
        Ok((Reply::Done, None)) => {}
        other => panic!("the worker answered {other:?}"),
    }
}

#[test]
fn idle_workers_end_after_the_idle_timeout() {
    let data = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(300);
    let pool = pool(data.path(), timeout);
    // Three calls at once leave three idle workers.
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| sweep(&pool));
        }
    });
    assert!(
        pool.idle_count() >= 1,
        "the workers wait idle after their calls"
    );
    let idle = pool.idle_count();
    assert_eq!(pool.live_count(), idle, "every live worker is idle");
    // Still there well before the timeout...
    std::thread::sleep(timeout / 3);
    assert_eq!(pool.idle_count(), idle, "no worker ends before its time");
    // ...and gone, processes and all, after it.
    assert!(
        within(timeout * 10, || pool.live_count() == 0),
        "idle workers left: {}, live: {}",
        pool.idle_count(),
        pool.live_count()
    );
    assert_eq!(pool.idle_count(), 0);
    // A call after that starts a fresh worker, which waits again.
    sweep(&pool);
    assert_eq!(pool.idle_count(), 1);
    assert!(within(timeout * 10, || pool.live_count() == 0));
}

#[test]
fn a_worker_used_again_waits_its_full_time_from_its_last_use() {
    let data = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(400);
    let pool = pool(data.path(), timeout);
    sweep(&pool);
    for _ in 0..4 {
        std::thread::sleep(timeout / 2);
        // Used again before its time: the same worker, still alive.
        sweep(&pool);
        assert_eq!(pool.live_count(), 1, "the worker was reused, not restarted");
    }
    assert!(within(timeout * 10, || pool.live_count() == 0));
}

/// The children of this process that ended and were not waited for, named `comm`.
fn unwaited_children(comm: &str) -> Vec<String> {
    let mut zombies = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_whitespace() {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            if stat.contains(&format!("({comm}) Z")) {
                zombies.push(stat);
            }
        }
    }
    zombies
}

#[test]
fn a_start_that_fails_is_waited_for() {
    let data = tempfile::tempdir().unwrap();
    // A "helper" that ends at once, and a greeting too large to send: the start fails
    // after the process was made, so only the pool can reap it.
    let home = data.path().join("home/alice");
    std::fs::create_dir_all(&home).unwrap();
    let spawn = WorkerSpawn {
        helper: PathBuf::from("/bin/sh"),
        person: "-c".into(),
        program: PathBuf::from("exit 0"),
        args: Vec::new(),
        hello: Hello {
            base: data.path().to_path_buf(),
            home: home.clone(),
            trees: vec![ferry_exec::Tree {
                path: home.join("x".repeat(ferry_exec::worker::FRAME_MAX_BYTES)),
                writable: true,
            }],
            run: RunSettings {
                user: "alice".into(),
                full_output_dir: home.join("output"),
                sandbox: SandboxKind::None,
                network: false,
                output_ttl_secs: 60,
                output_max_bytes: 1 << 20,
            },
        },
        account: "root".into(),
    };
    let pool = WorkerPool::new(spawn);
    for _ in 0..3 {
        let failed = pool.execute(&Op::SweepOutput).unwrap_err();
        assert_eq!(failed.code.as_str(), "worker_failed", "{failed:?}");
    }
    assert_eq!(pool.live_count(), 0);
    let zombies = unwaited_children("sh");
    assert!(zombies.is_empty(), "{zombies:?}");
}
