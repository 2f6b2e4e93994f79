//! `auto` ([`SandboxKind::Auto`]): the probe for the strongest sandbox, on the running
//! kernel, then on the same kernel with Landlock, and then user namespaces too, taken
//! away by a seccomp filter (see common/mod.rs `hide`), run as `nobody` like every
//! scenario here.

mod common;

use common::{Hidden, Site, as_nobody, hide, inner_base};
use ferry_exec::ops::{Executor, Op, Reply, RunSettings, SandboxKind};
use ferry_exec::{
    AUTO_LANDLOCK_MIN_ABI, Access, DEFAULT_BWRAP, Output, RequestError, Scope, Strongest, Tree,
    probe,
};
use std::path::{Path, PathBuf};

/// Alice's workspace, and bob's secret beside it.
fn prepare(base: &Path) -> (Site, PathBuf) {
    let site = Site::new(base);
    let bob = base.join("home/bob");
    std::fs::create_dir_all(&bob).unwrap();
    std::fs::write(bob.join("secret"), "bob's secret").unwrap();
    (site, bob.join("secret"))
}

/// Alice's executor with `sandbox`, her workspace as her one tree.
fn executor(site: &Site, sandbox: SandboxKind) -> Executor {
    let tree = Tree {
        path: site.root.canonicalize().unwrap(),
        writable: true,
    };
    let scope = Scope::new(
        // The site's folder: it holds the workspace and the output folder.
        site.base.canonicalize().unwrap(),
        tree.path.clone(),
        vec![tree],
        Access::Confined,
    )
    .unwrap();
    let run = RunSettings {
        user: "alice".into(),
        full_output_dir: site.out.clone(),
        sandbox,
        network: false,
        output_ttl_secs: ferry_config::limits::EXEC_OUTPUT_TTL_HOURS * 60 * 60,
        output_max_bytes: ferry_config::limits::EXEC_OUTPUT_MAX_BYTES,
    };
    Executor::new(scope, run, None)
}

fn run(executor: &Executor, command: &str) -> Result<Output, RequestError> {
    let op = Op::Run {
        command: command.into(),
        cwd: None,
        timeout_secs: Some(20),
        worker: None,
    };
    match executor.execute(op)? {
        (Reply::Ran(out), _) => Ok(out),
        (other, _) => panic!("not a command's reply: {other:?}"),
    }
}

/// What every sandbox `auto` picks must do: the person's own work runs, bob's secret,
/// the test's own environment and a signal to the test are out of reach.
fn assert_confined(executor: &Executor, secret: &Path) {
    let me = std::process::id();
    let out = run(executor, "echo work > mine && cat mine").unwrap();
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("work\n", Some(0)),
        "{out:?}"
    );
    for attack in [
        format!("cat {}", secret.display()),
        format!("cat /proc/{me}/environ"),
        format!("kill -CONT {me}"),
    ] {
        let out = run(executor, &attack).unwrap();
        assert_ne!(out.exit_code, Some(0), "{attack}: {out:?}");
        assert!(!out.stdout.contains("secret"), "{attack}: {out:?}");
    }
}

#[test]
fn auto_takes_landlock_where_the_kernel_scopes_signals() {
    as_nobody("inner_auto_takes_landlock_where_the_kernel_scopes_signals");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_auto_takes_landlock_where_the_kernel_scopes_signals() {
    let Some(base) = inner_base() else { return };
    let (site, secret) = prepare(&base);
    let found = probe(Path::new(DEFAULT_BWRAP)).unwrap();
    let Strongest::Landlock { abi } = found else {
        panic!("this kernel has Landlock ABI 6 or later (the landlock tests check), yet: {found:?}")
    };
    assert!(abi >= AUTO_LANDLOCK_MIN_ABI as i32);
    assert_eq!(found.to_string(), format!("landlock (ABI {abi})"));
    let auto = executor(&site, SandboxKind::Auto);
    assert_confined(&auto, &secret);
    // Landlock's mark: no /proc at all (bwrap shows one of its own).
    let out = run(&auto, "ls /proc").unwrap();
    assert!(out.stderr.contains("Permission denied"), "{out:?}");
    // The control: without a sandbox the same attacks reach.
    let none = executor(&site, SandboxKind::None);
    let out = run(&none, &format!("cat {}", secret.display())).unwrap();
    assert_eq!(out.stdout, "bob's secret");
}

#[test]
fn without_landlock_auto_takes_a_working_bwrap() {
    as_nobody("inner_without_landlock_auto_takes_a_working_bwrap");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_without_landlock_auto_takes_a_working_bwrap() {
    let Some(base) = inner_base() else { return };
    let (site, secret) = prepare(&base);
    hide(Hidden::Landlock);
    let found = probe(Path::new(DEFAULT_BWRAP)).unwrap();
    assert_eq!(
        found,
        Strongest::Bwrap {
            bwrap: PathBuf::from(DEFAULT_BWRAP)
        }
    );
    let auto = executor(&site, SandboxKind::Auto);
    assert_confined(&auto, &secret);
    // bwrap's mark: a /proc of its own pid namespace, where this test does not exist.
    let out = run(&auto, "ls /proc | grep -c '^[0-9]'").unwrap();
    let pids: u32 = out.stdout.trim().parse().unwrap();
    assert!(pids < 10, "only the sandbox's processes: {out:?}");
}

#[test]
fn with_neither_auto_refuses_and_names_the_opt_out() {
    as_nobody("inner_with_neither_auto_refuses_and_names_the_opt_out");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_with_neither_auto_refuses_and_names_the_opt_out() {
    let Some(base) = inner_base() else { return };
    let (site, _) = prepare(&base);
    hide(Hidden::LandlockAndUserNamespaces);

    // bubblewrap is installed, and still does not count: it cannot build a namespace.
    let why = probe(Path::new(DEFAULT_BWRAP)).unwrap_err();
    assert!(why.landlock.contains("no Landlock"), "{why:?}");
    assert!(why.bwrap.contains("cannot make its namespaces"), "{why:?}");
    let why = probe(&base.join("no-bwrap-here")).unwrap_err();
    assert!(why.bwrap.contains("not installed"), "{why:?}");

    let marker = site.root.join("ran");
    let touch = format!("touch {}", marker.display());
    let err = run(&executor(&site, SandboxKind::Auto), &touch).unwrap_err();
    assert_eq!(err.code, "sandbox_unavailable", "{err:?}");
    assert!(
        err.message.contains("`[exec] sandbox = \"none\"`"),
        "{}",
        err.message
    );
    assert!(!marker.exists(), "nothing ran unconfined");
    // The operator's explicit opt-out still runs (the filter leaves plain spawning alone).
    let out = run(&executor(&site, SandboxKind::None), &touch).unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(marker.exists());
}
