//! A herd worker's run (spec handoffs.md H-WHERE): the command of `terminal_run`, with
//! `FERRY_HERD_*` variables, a lifetime, programs outside the person's trees, and
//! read-only trees but a writable folder. Real bwrap and Landlock, run as `nobody`; see
//! common/mod.rs for the two halves of each test.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Site, as_nobody, gone_within, inner_base, processes_with};
use ferry_config::limits::{COMMAND_MAX_TIMEOUT, HERD_WORKER_MAX_LIFETIME};
use ferry_exec::ops::{Executor, RunSettings, SandboxKind, WorkerRun};
use ferry_exec::worker::{Hello, WorkerPool, WorkerSpawn};
use ferry_exec::{
    Access, ExecError, Output, RequestError, Requester, Scope, Tree, effective_lifetime,
    effective_timeout,
};

/// Every sandbox a worker may run under.
const SANDBOXES: [SandboxKind; 3] = [SandboxKind::None, SandboxKind::Bwrap, SandboxKind::Landlock];

/// The trees of alice's executor: her home, writable, with `.ferry-herd/` in it.
fn trees(site: &Site) -> Vec<Tree> {
    vec![Tree {
        path: site.root.canonicalize().unwrap(),
        writable: true,
    }]
}

fn run_settings(site: &Site, sandbox: SandboxKind) -> RunSettings {
    RunSettings {
        user: "alice".into(),
        full_output_dir: site.out.clone(),
        sandbox,
        network: false,
        output_ttl_secs: ferry_config::limits::EXEC_OUTPUT_TTL_HOURS * 60 * 60,
        output_max_bytes: ferry_config::limits::EXEC_OUTPUT_MAX_BYTES,
    }
}

/// Alice's requester in this process (local mode), with `sandbox`.
fn requester(site: &Site, sandbox: SandboxKind) -> Requester {
    let trees = trees(site);
    let home = trees[0].path.clone();
    let base = site.base.canonicalize().unwrap();
    let scope = Scope::new(base.clone(), home.clone(), trees, Access::Confined)
        .unwrap()
        .with_locked(vec![home.join("locked")]);
    Requester::InProcess(Executor::new(scope, run_settings(site, sandbox), None))
}

/// A worker run living `lifetime_secs`, adding nothing else.
fn lives(lifetime_secs: u64) -> WorkerRun {
    WorkerRun {
        lifetime_secs,
        ..WorkerRun::default()
    }
}

fn ran(requester: &Requester, command: &str, worker: WorkerRun) -> Output {
    requester
        .run_worker(command.into(), None, worker)
        .unwrap_or_else(|e| panic!("{command}: {e}"))
}

fn refused(requester: &Requester, command: &str, worker: WorkerRun) -> RequestError {
    match requester.run_worker(command.into(), None, worker) {
        Ok(out) => panic!("{command} ran: {out:?}"),
        Err(e) => e,
    }
}

// ----------------------------------------------------------------------- the variables

#[test]
fn worker_variables_reach_the_command_and_others_are_refused() {
    as_nobody("inner_worker_variables_reach_the_command_and_others_are_refused");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_worker_variables_reach_the_command_and_others_are_refused() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let marker = site.root.join("ran");
    for sandbox in SANDBOXES {
        let requester = requester(&site, sandbox);
        let with = |name: &str, value: &str| WorkerRun {
            env: vec![
                ("FERRY_HERD_LABEL".into(), "reviewer-2".into()),
                (name.into(), value.into()),
            ],
            ..lives(60)
        };
        let out = ran(
            &requester,
            "echo \"$FERRY_HERD_LABEL/$FERRY_HERD_ROLE_2\"; echo \"$PATH\"",
            with("FERRY_HERD_ROLE_2", "a b=c"),
        );
        assert_eq!(
            out.stdout,
            format!("reviewer-2/a b=c\n{}\n", ferry_exec::CANONICAL_PATH),
            "{sandbox:?}: {out:?}"
        );
        // A plain run gets none of them.
        let plain = requester
            .run("echo \"[$FERRY_HERD_LABEL]\"".into(), None, None)
            .unwrap();
        assert_eq!(plain.stdout, "[]\n", "{sandbox:?}");

        let touch = format!("touch {}", marker.display());
        for (name, value) in [
            ("PATH", "/tmp"),
            ("FERRY_HERDX", "x"),
            ("ferry_herd_x", "x"),
            ("FERRY_HERD_", "x"),
            ("FERRY_HERD_LABEL", "a\0b"),
        ] {
            let err = refused(&requester, &touch, with(name, value));
            assert_eq!(err.code, "invalid_command", "{sandbox:?} {name}: {err}");
            assert!(!marker.exists(), "{sandbox:?} {name}: nothing runs");
        }
    }
}

// ------------------------------------------------------------------------ the lifetime

#[test]
fn a_lifetime_is_cut_at_the_max_and_a_timeout_still_at_600_s() {
    let secs = |s| effective_lifetime(Duration::from_secs(s)).unwrap();
    let max = HERD_WORKER_MAX_LIFETIME.as_secs();
    let past_timeout = COMMAND_MAX_TIMEOUT.as_secs() + 1;
    assert_eq!(secs(past_timeout), Duration::from_secs(past_timeout));
    assert_eq!(secs(max - 1), Duration::from_secs(max - 1));
    assert_eq!(secs(max), HERD_WORKER_MAX_LIFETIME);
    assert_eq!(secs(max + 1), HERD_WORKER_MAX_LIFETIME);
    assert_eq!(secs(u64::MAX), HERD_WORKER_MAX_LIFETIME);
    let zero = effective_lifetime(Duration::ZERO).unwrap_err();
    assert!(matches!(zero, ExecError::InvalidLifetime), "{zero:?}");
    assert_eq!(zero.code(), "invalid_timeout");
    let timeout = |s| effective_timeout(Some(Duration::from_secs(s))).unwrap();
    assert_eq!(timeout(past_timeout), COMMAND_MAX_TIMEOUT);
    assert_eq!(timeout(max), COMMAND_MAX_TIMEOUT);
}

#[test]
fn a_worker_ends_at_its_lifetime_and_zero_is_refused() {
    as_nobody("inner_a_worker_ends_at_its_lifetime_and_zero_is_refused");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_worker_ends_at_its_lifetime_and_zero_is_refused() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let requester = requester(&site, SandboxKind::None);
    let marker = site.root.join("ran");
    let err = refused(&requester, &format!("touch {}", marker.display()), lives(0));
    assert_eq!(err.code, "invalid_timeout", "{err}");
    assert!(!marker.exists(), "nothing runs");

    // The lifetime is the deadline, in place of the command timeout.
    let started = Instant::now();
    let out = ran(&requester, "sleep 30", lives(1));
    let took = started.elapsed();
    assert!(out.timed_out, "{out:?}");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(8),
        "{took:?}"
    );
}

// ------------------------------------------------------------------------ the programs

/// `<base>/tools/prog` (a script), `<base>/tools/id` (an ELF copy of `id`) and a secret
/// beside them, all outside alice's trees.
fn tools(base: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let tools = base.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let tools = tools.canonicalize().unwrap();
    let script = tools.join("prog");
    std::fs::write(&script, "#!/bin/sh\necho program ran\n").unwrap();
    let elf = tools.join("id");
    std::fs::copy("/usr/bin/id", &elf).unwrap();
    for program in [&script, &elf] {
        std::fs::set_permissions(program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(tools.join("secret"), "beside the program").unwrap();
    (script, elf, tools.join("secret"))
}

#[test]
fn a_program_outside_the_trees_runs_and_its_folder_stays_closed() {
    as_nobody("inner_a_program_outside_the_trees_runs_and_its_folder_stays_closed");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_program_outside_the_trees_runs_and_its_folder_stays_closed() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let (script, elf, secret) = tools(&base);
    let folder = secret.parent().unwrap();
    let command = format!(
        "{script} && {elf} -u && echo changed > {script}; cat {secret}; ls {folder}",
        script = script.display(),
        elf = elf.display(),
        secret = secret.display(),
        folder = folder.display(),
    );
    let programs = vec![
        script.to_str().unwrap().to_owned(),
        elf.to_str().unwrap().to_owned(),
    ];
    for sandbox in [SandboxKind::Bwrap, SandboxKind::Landlock] {
        let requester = requester(&site, sandbox);
        // Without them, the sandbox shows neither (the control).
        let out = ran(&requester, &command, lives(60));
        assert!(!out.stdout.contains("program ran"), "{sandbox:?}: {out:?}");

        let worker = WorkerRun {
            programs: programs.clone(),
            ..lives(60)
        };
        let out = ran(&requester, &command, worker);
        let uid = rustix::process::getuid().as_raw();
        // bwrap shows the folder with the programs' mount points alone in it; Landlock
        // refuses to list it.
        let (listed, denials): (&str, &[&str]) = match sandbox {
            SandboxKind::Bwrap => ("id\nprog\n", &["Read-only file system", "No such file"]),
            _ => ("", &["Permission denied"]),
        };
        assert_eq!(
            out.stdout,
            format!("program ran\n{uid}\n{listed}"),
            "{sandbox:?}: {out:?}"
        );
        // The write, the read beside it, and (Landlock) the listing each fail.
        let failed: usize = denials.iter().map(|d| out.stderr.matches(d).count()).sum();
        let want = if sandbox == SandboxKind::Bwrap { 2 } else { 3 };
        assert_eq!(failed, want, "{sandbox:?}: {out:?}");
        assert_eq!(
            std::fs::read_to_string(&script).unwrap(),
            "#!/bin/sh\necho program ran\n"
        );
    }
    // Checked in the runner itself, whatever the sandbox: a link or a folder is refused.
    let link = base.join("link-to-prog");
    std::os::unix::fs::symlink(&script, &link).unwrap();
    for sandbox in SANDBOXES {
        let requester = requester(&site, sandbox);
        for program in [link.clone(), folder.to_path_buf(), PathBuf::from("prog")] {
            let worker = WorkerRun {
                programs: vec![program.to_str().unwrap().to_owned()],
                ..lives(60)
            };
            let err = refused(&requester, "true", worker);
            assert_eq!(err.code, "invalid_command", "{}: {err}", program.display());
        }
    }
}

// --------------------------------------------------------------- a read-only worker

#[test]
fn a_read_only_worker_writes_only_in_its_writable_folder() {
    as_nobody("inner_a_read_only_worker_writes_only_in_its_writable_folder");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_read_only_worker_writes_only_in_its_writable_folder() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let home = site.root.canonicalize().unwrap();
    let herd = home.join(".ferry-herd");
    let own = herd.join("w-1");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::create_dir_all(home.join("locked")).unwrap();
    std::fs::write(home.join("notes"), "home notes\n").unwrap();
    std::fs::write(herd.join("mail"), "herd mail\n").unwrap();
    let worker = WorkerRun {
        read_only: true,
        writable: vec![own.to_str().unwrap().to_owned()],
        ..lives(60)
    };
    let write = |dir: &Path| format!("echo x > {}/new && echo wrote", dir.display());
    for sandbox in [SandboxKind::Bwrap, SandboxKind::Landlock] {
        let requester = requester(&site, sandbox);
        for dir in [&home, &herd] {
            let out = ran(&requester, &write(dir), worker.clone());
            assert!(
                !out.stdout.contains("wrote"),
                "{sandbox:?} {dir:?}: {out:?}"
            );
            assert_ne!(out.exit_code, Some(0), "{sandbox:?}: {out:?}");
            assert!(!dir.join("new").exists(), "{sandbox:?} {dir:?}");
            // The same command, not read-only, does write there (the control).
            let out = ran(&requester, &write(dir), lives(60));
            assert_eq!(out.stdout, "wrote\n", "{sandbox:?}: {out:?}");
            std::fs::remove_file(dir.join("new")).unwrap();
        }
        let out = ran(&requester, "cat notes .ferry-herd/mail", worker.clone());
        assert_eq!(
            out.stdout, "home notes\nherd mail\n",
            "{sandbox:?}: {out:?}"
        );
        let out = ran(&requester, &write(&own), worker.clone());
        assert_eq!(out.stdout, "wrote\n", "{sandbox:?}: {out:?}");
        assert_eq!(std::fs::read_to_string(own.join("new")).unwrap(), "x\n");
        std::fs::remove_file(own.join("new")).unwrap();
    }

    // A writable folder the worker swapped for a link (to the home) between two runs is
    // refused, under both sandboxes, and nothing is written through it.
    let swapped = herd.join("w-2");
    std::os::unix::fs::symlink(&home, &swapped).unwrap();
    let linked = WorkerRun {
        writable: vec![swapped.to_str().unwrap().to_owned()],
        ..worker.clone()
    };
    for sandbox in [SandboxKind::Bwrap, SandboxKind::Landlock] {
        let requester = requester(&site, sandbox);
        let err = refused(&requester, &write(&swapped), linked.clone());
        assert_eq!(err.code, "path_escapes", "{sandbox:?}: {err}");
        assert!(!home.join("new").exists(), "{sandbox:?}");
    }

    // What a writable folder must be: absolute, in a tree the person may write, not
    // locked; checked for any worker.
    let requester = requester(&site, SandboxKind::Landlock);
    for (folder, code) in [
        (base.join("tools"), "path_escapes"),
        (home.join("../bob"), "path_escapes"),
        (PathBuf::from(".ferry-herd/w-1"), "bad_path"),
        (home.join("locked"), "read_only"),
        (home.join("locked/inner"), "read_only"),
    ] {
        for read_only in [true, false] {
            let worker = WorkerRun {
                read_only,
                writable: vec![folder.to_str().unwrap().to_owned()],
                ..lives(60)
            };
            let err = refused(&requester, "true", worker);
            assert_eq!(err.code, code, "{}: {err}", folder.display());
        }
    }
}

#[test]
fn a_read_only_worker_without_a_sandbox_is_refused() {
    as_nobody("inner_a_read_only_worker_without_a_sandbox_is_refused");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_read_only_worker_without_a_sandbox_is_refused() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let requester = requester(&site, SandboxKind::None);
    let marker = site.root.join("ran");
    let worker = WorkerRun {
        read_only: true,
        ..lives(60)
    };
    let err = refused(&requester, &format!("touch {}", marker.display()), worker);
    assert_eq!(err.code, "sandbox_unavailable", "{err}");
    assert!(!marker.exists(), "nothing runs");
}

// -------------------------------------------------- the runner killed, the tree ended

/// Set for the victim: the sandbox its worker runs under, and how it runs it.
const VICTIM_SANDBOX: &str = "FERRY_EXEC_TEST_VICTIM_SANDBOX";
const VICTIM_HOST_MODE: &str = "FERRY_EXEC_TEST_VICTIM_HOST";
/// Set for this binary run as the host-mode worker of the victim's pool.
const AS_WORKER: &str = "FERRY_EXEC_TEST_SERVE_AS_WORKER";
/// The victim's test name: its reaper, a fork that never execs, carries it too.
const VICTIM: &str = "inner_victim_runs_a_worker";

/// Not a test of its own: when this binary runs as a worker, serves stdin.
#[test]
fn worker_entry() {
    if std::env::var_os(AS_WORKER).is_none() {
        return;
    }
    use std::os::fd::{AsRawFd, FromRawFd};
    let stdin = std::io::stdin().as_raw_fd();
    // SAFETY: the pool gave the worker its socket as stdin, and nothing else here uses it.
    let stream = unsafe { std::os::unix::net::UnixStream::from_raw_fd(stdin) };
    ferry_exec::worker::serve(stream).expect("the worker serves until its socket closes");
}

/// Alice's requester in host mode: a pool whose worker is this binary (the "helper" is
/// `env`, which sets [`AS_WORKER`] and execs it), as the same user.
fn host_requester(site: &Site, sandbox: SandboxKind) -> Requester {
    let trees = trees(site);
    let spawn = WorkerSpawn {
        helper: PathBuf::from("/usr/bin/env"),
        person: format!("{AS_WORKER}=1"),
        program: std::env::current_exe().unwrap(),
        args: ["--exact", "worker_entry", "--test-threads=1", "--quiet"]
            .map(str::to_owned)
            .to_vec(),
        hello: Hello {
            base: site.base.canonicalize().unwrap(),
            home: trees[0].path.clone(),
            trees,
            run: run_settings(site, sandbox),
        },
        account: "nobody".into(),
    };
    Requester::Worker(WorkerPool::new(spawn))
}

#[test]
fn killing_the_runner_ends_the_whole_tree() {
    as_nobody("inner_killing_the_runner_ends_the_whole_tree");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_killing_the_runner_ends_the_whole_tree() {
    let Some(base) = inner_base() else { return };
    for host in [false, true] {
        for sandbox in SANDBOXES {
            // In the home: the only tree a sandbox shows.
            let started = Site::new(&base)
                .root
                .join(format!("started-{host}-{}", sandbox.name()));
            let mut victim = Victim(
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--ignored", "--exact", VICTIM, "--nocapture"])
                    .env(VICTIM_SANDBOX, sandbox.name())
                    .env(VICTIM_HOST_MODE, if host { "1" } else { "0" })
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .unwrap(),
            );
            let token = format!("herd-token-{host}-{}", sandbox.name());
            let waited = Instant::now();
            while !started.exists() || processes_with(&token).len() < 4 {
                assert!(
                    waited.elapsed() < Duration::from_secs(10),
                    "{host} {sandbox:?}: the worker did not start: {:?}",
                    processes_with(&token)
                );
                assert!(victim.0.try_wait().unwrap().is_none(), "the victim ended");
                std::thread::sleep(Duration::from_millis(20));
            }
            victim.0.kill().unwrap();
            victim.0.wait().unwrap();
            let left = gone_within(&token, Duration::from_secs(5));
            assert_eq!(left, Vec::<u32>::new(), "{host} {sandbox:?}: still running");
            // The reaper and the host worker, which never exec past the victim's own
            // binary name, are gone too.
            let watchers = gone_within(VICTIM, Duration::from_secs(5));
            assert_eq!(watchers, Vec::<u32>::new(), "{host} {sandbox:?}");
            if host {
                let workers = gone_within("worker_entry", Duration::from_secs(5));
                assert_eq!(workers, Vec::<u32>::new(), "{host} {sandbox:?}");
            }
        }
    }
}

/// The runner to be killed; killed also when the test fails before it meant to.
struct Victim(std::process::Child);

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run by [`inner_killing_the_runner_ends_the_whole_tree`]: starts a worker whose
/// command leaves the group every way it can, says so, and waits to be killed.
#[test]
#[ignore = "started by inner_killing_the_runner_ends_the_whole_tree"]
fn inner_victim_runs_a_worker() {
    let (Some(base), Some(sandbox)) = (inner_base(), std::env::var_os(VICTIM_SANDBOX)) else {
        return;
    };
    let host = std::env::var_os(VICTIM_HOST_MODE).is_some_and(|v| v == "1");
    let sandbox = SANDBOXES.into_iter().find(|s| sandbox == s.name()).unwrap();
    let site = Site::new(&base);
    let requester = if host {
        host_requester(&site, sandbox)
    } else {
        requester(&site, sandbox)
    };
    let token = format!("herd-token-{host}-{}", sandbox.name());
    // In the home: the only tree a sandbox shows.
    let started = Site::new(&base)
        .root
        .join(format!("started-{host}-{}", sandbox.name()));
    // A child, a new session, a double fork: each names the token in its argv[0].
    let command = format!(
        "(exec -a {token}-child sleep 300) & \
         setsid bash -c 'exec -a {token}-session sleep 300' & \
         (bash -c '(exec -a {token}-orphan sleep 300) &' &) ; \
         touch {started}; wait # {token}",
        started = started.display()
    );
    let out = requester.run_worker(command, None, lives(120));
    panic!("the worker was to be killed first: {out:?}");
}
