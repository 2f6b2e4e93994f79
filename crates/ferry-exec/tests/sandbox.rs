//! T-GUARD with `Sandbox::Bwrap`: real bubblewrap, run as `nobody` (unprivileged user
//! namespaces), see common/mod.rs for the two halves of each test.

mod common;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Site, as_nobody, gone_within, inner_base};
use ferry_exec::{ENV_NAMES, ExecError, Output, Policy, Sandbox, run};

/// A workspace for alice bound read-write, and bob's beside it, not bound.
fn two_people(base: &Path) -> (Site, PathBuf) {
    let site = Site::new(base);
    let bob = base.join("home").join("bob");
    std::fs::create_dir_all(&bob).unwrap();
    std::fs::write(bob.join("secret"), "bob's").unwrap();
    (site, bob)
}

fn sandboxed(site: &Site, read_only: Vec<PathBuf>, network: bool) -> Policy {
    let mut policy = site.policy();
    policy.sandbox = Sandbox::bwrap(vec![site.root.clone()], read_only, network);
    policy
}

fn ok(site: &Site, policy: &Policy, command: &str) -> Output {
    run(&site.cmd(command, None), &site.who(), policy).unwrap_or_else(|e| panic!("{command}: {e}"))
}

#[test]
fn bwrap_shows_only_the_bound_trees() {
    as_nobody("inner_bwrap_shows_only_the_bound_trees");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_bwrap_shows_only_the_bound_trees() {
    let Some(base) = inner_base() else { return };
    let (site, bob) = two_people(&base);
    let docs = site.root.join("docs");
    let shared = base.join("shared");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("readme"), "shared").unwrap();
    // docs/ read-only inside the read-write workspace: the deeper bind wins.
    let policy = sandboxed(&site, vec![shared.clone(), docs.clone()], false);

    let home = base.join("home");
    let out = ok(&site, &policy, &format!("ls -A {}", home.display()));
    assert_eq!(out.stdout, "alice\n", "bob's tree is not there: {out:?}");
    let out = ok(&site, &policy, &format!("cat {}/secret", bob.display()));
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr.contains("No such file or directory"), "{out:?}");

    let out = ok(&site, &policy, "echo made > new && cat new");
    assert_eq!((out.stdout.as_str(), out.exit_code), ("made\n", Some(0)));
    assert_eq!(
        std::fs::read_to_string(site.root.join("new")).unwrap(),
        "made\n"
    );
    for target in [shared.join("x"), shared.join("readme"), docs.join("x")] {
        let out = ok(&site, &policy, &format!("echo no > {}", target.display()));
        assert_ne!(out.exit_code, Some(0), "{}", target.display());
        assert!(out.stderr.contains("Read-only file system"), "{out:?}");
    }
    assert!(!shared.join("x").exists() && !docs.join("x").exists());
    let out = ok(&site, &policy, &format!("cat {}/readme", shared.display()));
    assert_eq!(out.stdout, "shared");
    let out = ok(&site, &policy, "touch /usr/x /etc/x /x 2>&1 | wc -l");
    assert_eq!(out.stdout, "3\n", "system folders are read-only");

    // Only the system folders, a fresh /tmp, and the path down to the binds.
    let out = ok(&site, &policy, "ls -A /");
    let top = base
        .components()
        .nth(1)
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    let mut expected: BTreeSet<&str> = ["bin", "dev", "etc", "lib", "lib64", "proc", "tmp", "usr"]
        .into_iter()
        .collect();
    expected.insert(top);
    assert_eq!(
        out.stdout.lines().collect::<BTreeSet<_>>(),
        expected,
        "{out:?}"
    );
    if let Ok(below_tmp) = base.strip_prefix("/tmp") {
        let out = ok(&site, &policy, "ls -A /tmp");
        let first = below_tmp.components().next().unwrap().as_os_str();
        assert_eq!(
            out.stdout,
            format!("{}\n", first.to_str().unwrap()),
            "a fresh /tmp"
        );
    }

    // The environment: the same allowlist; TMPDIR is the sandbox's own /tmp.
    let out = ok(
        &site,
        &policy,
        "tr '\\0' '\\n' < /proc/$$/environ | sort; true",
    );
    let names: BTreeSet<&str> = out
        .stdout
        .lines()
        .map(|l| l.split_once('=').unwrap().0)
        .collect();
    // bwrap itself sets PWD (to the folder bash would put there anyway).
    let mut expected: BTreeSet<&str> = ENV_NAMES.into_iter().collect();
    expected.insert("PWD");
    assert_eq!(names, expected);
    assert!(out.stdout.contains("\nTMPDIR=/tmp\n"), "{}", out.stdout);
    let real_root = std::fs::canonicalize(&site.root).unwrap();
    assert!(
        out.stdout
            .contains(&format!("\nPWD={}\n", real_root.display()))
    );

    // A working folder outside every bind is refused, not run somewhere else.
    let mut narrow = site.policy();
    narrow.sandbox = Sandbox::bwrap(vec![docs.clone()], vec![], false);
    let err = run(&site.cmd("true", None), &site.who(), &narrow).unwrap_err();
    assert!(matches!(err, ExecError::CwdNotInSandbox { .. }), "{err:?}");
}

#[test]
fn bwrap_network_only_when_allowed() {
    as_nobody("inner_bwrap_network_only_when_allowed");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_bwrap_network_only_when_allowed() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let out = ok(&site, &sandboxed(&site, vec![], false), &connect);
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("connected"), "{out:?}");
    assert!(out.stderr.contains("Connection refused"), "{out:?}");

    let out = ok(&site, &sandboxed(&site, vec![], true), &connect);
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("connected\n", Some(0)),
        "{out:?}"
    );
    // And without a sandbox, the person's own network as it is.
    let out = ok(&site, &site.policy(), &connect);
    assert_eq!(out.exit_code, Some(0), "{out:?}");
}

#[test]
fn bwrap_timeout_and_exit_end_the_whole_sandbox() {
    as_nobody("inner_bwrap_timeout_and_exit_end_the_whole_sandbox");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_bwrap_timeout_and_exit_end_the_whole_sandbox() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let policy = sandboxed(&site, vec![], false);
    // Even a process that started its own session dies with the pid namespace.
    let command = "setsid sleep 1004.25 & sleep 1004.5 & echo started; sleep 1004.75";
    let started = Instant::now();
    let out = run(
        &site.cmd(command, Some(Duration::from_secs(1))),
        &site.who(),
        &policy,
    )
    .unwrap();
    let took = started.elapsed();
    assert!(out.timed_out, "{out:?}");
    assert_eq!(out.signal, Some(9), "{out:?}");
    assert_eq!(out.stdout, "started\n");
    assert!(
        took < Duration::from_millis(2500),
        "returned after {took:?}"
    );
    assert_eq!(
        gone_within("1004.", Duration::from_secs(2)),
        Vec::<u32>::new()
    );

    let command = "setsid sleep 1005.25 & sleep 1005.5 & echo done";
    let started = Instant::now();
    let out = ok(&site, &policy, command);
    let took = started.elapsed();
    assert_eq!((out.stdout.as_str(), out.exit_code), ("done\n", Some(0)));
    assert!(took < Duration::from_secs(2), "returned after {took:?}");
    assert_eq!(
        gone_within("1005.", Duration::from_secs(2)),
        Vec::<u32>::new()
    );
}

#[test]
fn bwrap_nothing_the_command_started_outlives_the_call() {
    as_nobody("inner_bwrap_nothing_the_command_started_outlives_the_call");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_bwrap_nothing_the_command_started_outlives_the_call() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    common::assert_nothing_outlives(&site, &sandboxed(&site, vec![], false), false);
}

#[test]
fn bwrap_exit_codes_and_signals() {
    as_nobody("inner_bwrap_exit_codes_and_signals");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_bwrap_exit_codes_and_signals() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let policy = sandboxed(&site, vec![], false);
    let status = |command: &str| {
        let out = ok(&site, &policy, command);
        (out.exit_code, out.signal)
    };
    assert_eq!(status("true"), (Some(0), None));
    assert_eq!(status("exit 3"), (Some(3), None));
    // bwrap's init reports a signal death as 128+N, like a shell (documented).
    assert_eq!(status("kill -TERM $$"), (Some(128 + 15), None));
}

#[test]
fn bwrap_bounds_a_fork_bomb() {
    common::as_nobody_alone("inner_bwrap_bounds_a_fork_bomb");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_bwrap_bounds_a_fork_bomb() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let policy = sandboxed(&site, vec![], false);
    common::assert_fork_bomb_bounded(&site, policy, "ferry-bomb-2", Duration::from_secs(5));
}

#[test]
fn missing_bwrap_is_refused_never_skipped() {
    as_nobody("inner_missing_bwrap_is_refused_never_skipped");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_missing_bwrap_is_refused_never_skipped() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let marker = site.root.join("ran");
    let command = format!("touch {}", marker.display());
    let mut policy = site.policy();
    policy.sandbox = Sandbox::Bwrap {
        bwrap: base.join("no-such-bwrap"),
        read_write: vec![site.root.clone()],
        read_only: vec![],
        network: false,
    };
    let err = run(&site.cmd(&command, None), &site.who(), &policy).unwrap_err();
    assert!(
        matches!(err, ExecError::SandboxUnavailable { .. }),
        "{err:?}"
    );
    assert_eq!(err.code(), "sandbox_unavailable");
    assert!(!marker.exists(), "nothing ran without the sandbox");

    // A bind that does not exist is an error too, not a smaller sandbox.
    policy.sandbox = Sandbox::bwrap(vec![site.root.clone(), base.join("gone")], vec![], false);
    let err = run(&site.cmd(&command, None), &site.who(), &policy).unwrap_err();
    assert_eq!(err.code(), "sandbox_bind_failed", "{err:?}");
    assert!(!marker.exists());
}
