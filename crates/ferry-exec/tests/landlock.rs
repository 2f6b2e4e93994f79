//! T-GUARD with `Sandbox::Landlock`: the running kernel's Landlock, run as `nobody` with
//! no root and no user namespace; see common/mod.rs for the two halves of each test.
//!
//! Every denial is checked against a control: the same command without the sandbox
//! does reach the file, the port, the socket or the process.

mod common;

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Site, alive, as_nobody, dies_within, inner_base};
use ferry_exec::{ExecError, Output, Policy, Sandbox, run};
use landlock::{ABI, LandlockStatus, RestrictSelf};

/// What bob keeps in his home, beside alice's workspace.
const BOBS_SECRET: &str = "bob's secret";

/// Alice's workspace (the site root), bob's home beside it, and a tree to share read-only.
struct People {
    site: Site,
    bob: PathBuf,
    shared: PathBuf,
}

impl People {
    fn new(base: &Path) -> People {
        let site = Site::new(base);
        let bob = base.join("home").join("bob");
        std::fs::create_dir_all(&bob).unwrap();
        std::fs::write(bob.join("secret"), BOBS_SECRET).unwrap();
        let shared = base.join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        std::fs::write(shared.join("readme"), "shared").unwrap();
        let tool = shared.join("tool.sh");
        std::fs::write(&tool, "#!/bin/sh\necho tool ran\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        People { site, bob, shared }
    }

    /// Alice's workspace read-write, the shared tree read-only.
    fn confined(&self, network: bool) -> Policy {
        let mut policy = self.site.policy();
        policy.sandbox = Sandbox::landlock(
            vec![self.site.root.clone()],
            vec![self.shared.clone()],
            network,
        );
        policy
    }

    fn run(&self, policy: &Policy, command: &str) -> Output {
        run(&self.site.cmd(command, None), &self.site.who(), policy)
            .unwrap_or_else(|e| panic!("{command}: {e}"))
    }

    /// Runs `command` confined and checks that the kernel said no.
    fn denied(&self, policy: &Policy, command: &str) -> Output {
        let out = self.run(policy, command);
        assert_ne!(out.exit_code, Some(0), "{command}: {out:?}");
        assert!(
            out.stderr.contains("Permission denied"),
            "{command}: {out:?}"
        );
        out
    }
}

/// The Landlock ABI the crate finds in the running kernel, without restricting anything.
fn probed_abi() -> ABI {
    let status = RestrictSelf::default().no_new_privs(false).apply().unwrap();
    match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi,
        other => panic!("Landlock is not available here: {other:?}"),
    }
}

#[test]
fn the_kernel_has_every_landlock_feature_these_tests_check() {
    // Network rules came with ABI 4, signal and abstract socket scopes with ABI 6.
    let abi = probed_abi();
    assert!(
        abi >= ABI::V6,
        "Landlock ABI {abi} is too old for these tests"
    );
}

#[test]
fn landlock_shows_only_the_trees() {
    as_nobody("inner_landlock_shows_only_the_trees");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_shows_only_the_trees() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let policy = people.confined(false);
    let (bob, shared) = (people.bob.display(), people.shared.display());

    // Alice's tree: everything.
    let out = people.run(
        &policy,
        "echo made > new && mkdir -p d/e && mv new d/e/moved && cat d/e/moved && \
         cp d/e/moved copy && rm -r d && cat copy",
    );
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("made\nmade\n", Some(0)),
        "{out:?}"
    );
    let copy = std::fs::read_to_string(people.site.root.join("copy")).unwrap();
    assert_eq!(copy, "made\n");

    // Bob's tree: not read, not listed, not written.
    let control = people.run(&people.site.policy(), &format!("cat {bob}/secret"));
    assert_eq!(
        control.stdout, BOBS_SECRET,
        "without the sandbox it is there"
    );
    for command in [
        format!("cat {bob}/secret"),
        format!("ls {bob}"),
        format!("ls {}", base.join("home").display()),
        format!("echo planted > {bob}/planted"),
    ] {
        let out = people.denied(&policy, &command);
        assert!(!out.stdout.contains(BOBS_SECRET), "{command}: {out:?}");
    }
    assert!(!people.bob.join("planted").exists());

    // The shared tree: read, listed and executed, never changed.
    let out = people.run(
        &policy,
        &format!("cat {shared}/readme && echo && ls {shared} && {shared}/tool.sh"),
    );
    assert_eq!(out.stdout, "shared\nreadme\ntool.sh\ntool ran\n", "{out:?}");
    for command in [
        format!("echo no > {shared}/x"),
        format!("echo no > {shared}/readme"),
        format!("rm {shared}/readme"),
        format!("mkdir {shared}/d"),
        format!("mv {shared}/readme ."),
    ] {
        people.denied(&policy, &command);
    }
    let readme = std::fs::read_to_string(people.shared.join("readme")).unwrap();
    assert_eq!(readme, "shared");
    assert!(!people.shared.join("x").exists() && !people.shared.join("d").exists());

    // The system: read and run, never changed; no shared /tmp, no /proc.
    let out = people.run(&policy, "touch /usr/x /etc/x /x /tmp/x");
    assert_eq!(
        out.stderr.matches("Permission denied").count(),
        4,
        "{out:?}"
    );
    people.denied(&policy, "ls /proc");
    people.denied(&policy, "cat /proc/self/status");
    let out = people.run(
        &policy,
        "printf 'b\\na\\n' | sort | tr a-z A-Z && id -un && \
         python3 -c 'print(6 * 7)' && perl -e 'print 7 * 6, qq(\\n)' && \
         grep -c '^root:' /etc/passwd",
    );
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("A\nB\nnobody\n42\n42\n1\n", Some(0)),
        "{out:?}"
    );

    // The devices, /dev/fd (through /proc/self, which is only followed), and a TMPDIR
    // of the run's own that is gone afterwards.
    let out = people.run(
        &policy,
        "echo x > /dev/null && head -c 5 /dev/urandom | wc -c && cat <(echo substituted) && \
         echo out > /dev/stdout && t=$(mktemp) && echo tmp > \"$t\" && cat \"$t\" && \
         echo \"$TMPDIR\"",
    );
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[..4], ["5", "substituted", "out", "tmp"], "{out:?}");
    let tmpdir = Path::new(lines[4]);
    assert!(tmpdir.starts_with(&people.site.out), "{out:?}");
    assert!(!tmpdir.exists(), "the run's TMPDIR is removed after it");

    // Exit codes and signals as without a sandbox: no init in between.
    let out = people.run(&policy, "exit 3");
    assert_eq!((out.exit_code, out.signal), (Some(3), None));
    let out = people.run(&policy, "kill -TERM $$");
    assert_eq!((out.exit_code, out.signal), (None, Some(15)));
}

#[test]
fn landlock_blocks_the_ways_out() {
    as_nobody("inner_landlock_blocks_the_ways_out");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_blocks_the_ways_out() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let root = &people.site.root;
    // Links planted in alice's tree before the run, as an earlier command could have.
    symlink(&people.bob, root.join("to-bob")).unwrap();
    symlink(people.bob.join("secret"), root.join("secret-link")).unwrap();
    let policy = people.confined(false);
    let bob = people.bob.display();

    let control = people.run(&people.site.policy(), "cat to-bob/secret ../bob/secret");
    assert_eq!(control.stdout, BOBS_SECRET.repeat(2), "without the sandbox");
    for command in [
        "cat ../bob/secret".to_string(),
        "cd .. && cat bob/secret".into(),
        "cd ../.. && cat home/bob/secret".into(),
        "cat to-bob/secret".into(),
        "cat secret-link".into(),
        format!("ln -s {bob}/secret fresh-link && cat fresh-link"),
        format!("cat /proc/self/root{bob}/secret"),
        "cat /proc/self/cwd/../bob/secret".into(),
        format!("exec 3< {bob}/secret; cat /dev/fd/3"),
        format!("cp {bob}/secret copied"),
    ] {
        let out = people.denied(&policy, &command);
        assert!(!out.stdout.contains(BOBS_SECRET), "{command}: {out:?}");
    }
    // Moving or linking bob's file into alice's tree: Landlock says EXDEV to a move
    // across trees, so mv falls back to copying, which cannot read it.
    for command in [
        format!("ln {bob}/secret hard"),
        format!("mv {bob}/secret stolen"),
    ] {
        let out = people.run(&policy, &command);
        assert_ne!(out.exit_code, Some(0), "{command}: {out:?}");
    }
    let secret = std::fs::read_to_string(people.bob.join("secret")).unwrap();
    assert_eq!(secret, BOBS_SECRET, "bob's file is where it was");
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fresh-link", "secret-link", "to-bob"]);
}

#[test]
fn landlock_network_only_when_allowed() {
    as_nobody("inner_landlock_network_only_when_allowed");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_network_only_when_allowed() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let bind = "perl -MSocket -e 'socket(S, PF_INET, SOCK_STREAM, 0) or die qq(socket: $!\\n); \
                bind(S, pack_sockaddr_in(0, inet_aton(q(127.0.0.1)))) or die qq(bind: $!\\n); \
                print qq(bound\\n)'";

    let cut = people.confined(false);
    let out = people.denied(&cut, &connect);
    assert!(!out.stdout.contains("connected"), "{out:?}");
    let out = people.denied(&cut, bind);
    assert!(!out.stdout.contains("bound"), "{out:?}");

    let open = people.confined(true);
    let out = people.run(&open, &connect);
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("connected\n", Some(0)),
        "{out:?}"
    );
    let out = people.run(&open, bind);
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("bound\n", Some(0)),
        "{out:?}"
    );
}

#[test]
fn landlock_keeps_signals_and_abstract_sockets_inside() {
    as_nobody("inner_landlock_keeps_signals_and_abstract_sockets_inside");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_keeps_signals_and_abstract_sockets_inside() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let policy = people.confined(false);

    // A process of the same user, outside the run.
    let mut outside = std::process::Command::new("sleep")
        .arg("1012.5")
        .spawn()
        .unwrap();
    let pid = outside.id();
    let kill = format!("kill -TERM {pid}");
    let out = people.run(&policy, &kill);
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(out.stderr.contains("Operation not permitted"), "{out:?}");
    assert!(alive(pid as i32), "the signal did not arrive");
    // Inside its own run a command still signals what it started.
    let out = people.run(&policy, "sleep 30 & kill -TERM $! && wait $!; echo $?");
    assert_eq!(out.stdout, "143\n", "{out:?}");
    let out = people.run(&people.site.policy(), &kill);
    assert_eq!(out.exit_code, Some(0), "without the sandbox: {out:?}");
    assert!(dies_within(pid as i32, Duration::from_secs(2)));
    let _ = outside.wait();

    // An abstract unix socket of a process outside the run.
    let name = format!("ferry-exec-test-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = UnixListener::bind_addr(&addr).unwrap();
    let connect = format!(
        "perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) or die qq(socket: $!\\n); \
         connect(S, pack_sockaddr_un(qq(\\0{name}))) or die qq(connect: $!\\n); \
         print qq(connected\\n)'"
    );
    // The socket filter refuses the socket itself; Landlock's scope would refuse the
    // connect (EPERM) behind it.
    let out = people.run(&policy, &connect);
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(out.stderr.contains("socket: Permission denied"), "{out:?}");
    let out = people.run(&people.site.policy(), &connect);
    assert_eq!(out.stdout, "connected\n", "without the sandbox: {out:?}");
}

#[test]
fn landlock_nothing_the_command_started_outlives_the_call() {
    as_nobody("inner_landlock_nothing_the_command_started_outlives_the_call");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_nothing_the_command_started_outlives_the_call() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let policy = people.confined(false);
    common::assert_nothing_outlives(&people.site, &policy, true);
    // The reaper watching the command is outside its domain, so the command cannot kill
    // it to set what it started free (without a sandbox it can: see guard.rs).
    let out = people.run(&policy, "kill -KILL $PPID; echo $?");
    assert_eq!(out.stdout, "1\n", "{out:?}");
    assert!(out.stderr.contains("Operation not permitted"), "{out:?}");
}

#[test]
fn landlock_bounds_a_fork_bomb() {
    common::as_nobody_alone("inner_landlock_bounds_a_fork_bomb");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_bounds_a_fork_bomb() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let policy = people.confined(false);
    common::assert_fork_bomb_bounded(&people.site, policy, "ferry-bomb-3", Duration::from_secs(5));
}

#[test]
fn landlock_refuses_what_it_cannot_confine() {
    as_nobody("inner_landlock_refuses_what_it_cannot_confine");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_refuses_what_it_cannot_confine() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let site = &people.site;
    let marker = site.root.join("ran");
    let command = site.cmd(&format!("touch {}", marker.display()), None);
    let refused = |sandbox: Sandbox| {
        let mut policy = site.policy();
        policy.sandbox = sandbox;
        let err = run(&command, &site.who(), &policy).unwrap_err();
        assert!(!marker.exists(), "nothing ran: {err:?}");
        err
    };
    let root = || site.root.clone();

    // A read-only tree inside a read-write one would stay writable under Landlock.
    let docs = site.root.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let err = refused(Sandbox::landlock(vec![root()], vec![docs.clone()], false));
    assert_eq!(err.code(), "sandbox_bind_failed", "{err:?}");
    // A tree that does not exist is an error, not a smaller sandbox.
    let err = refused(Sandbox::landlock(
        vec![root(), base.join("gone")],
        vec![],
        false,
    ));
    assert_eq!(err.code(), "sandbox_bind_failed", "{err:?}");
    // A working folder the command could not see.
    let err = refused(Sandbox::landlock(vec![docs], vec![], false));
    assert!(matches!(err, ExecError::CwdNotInSandbox { .. }), "{err:?}");
}

#[test]
fn missing_landlock_is_refused_never_skipped() {
    as_nobody("inner_missing_landlock_is_refused_never_skipped");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_missing_landlock_is_refused_never_skipped() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let marker = people.site.root.join("ran");
    let command = format!("touch {}", marker.display());
    common::hide(common::Hidden::Landlock);
    let status = RestrictSelf::default().no_new_privs(false).apply().unwrap();
    assert_eq!(status.landlock, LandlockStatus::NotImplemented);
    for network in [false, true] {
        let policy = people.confined(network);
        let err = run(
            &people.site.cmd(&command, None),
            &people.site.who(),
            &policy,
        )
        .unwrap_err();
        assert!(
            matches!(err, ExecError::SandboxUnavailable { .. }),
            "{err:?}"
        );
        assert_eq!(err.code(), "sandbox_unavailable");
        assert!(!marker.exists(), "nothing ran without the sandbox");
    }
}

#[test]
fn landlock_keeps_the_proc_entries_of_outside_processes_closed_even_where_proc_is_readable() {
    as_nobody("inner_landlock_keeps_the_proc_entries_of_outside_processes_closed");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_keeps_the_proc_entries_of_outside_processes_closed() {
    // The sandbox grants no /proc at all; this grants it read-only on purpose, to show the
    // second wall behind the first: Landlock's ptrace rule keeps a confined command out
    // of the memory, descriptors and environment of every process outside its domain,
    // this one (same user, unconfined, holding a secret in its environment) included.
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let outside = std::process::Command::new("sleep")
        .arg("1013.5")
        .env("SERVICE_SECRET", "s3cret-in-env")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let outside = KillOnDrop(outside);
    let pid = outside.0.id();
    let mut policy = people.site.policy();
    policy.sandbox = Sandbox::landlock(
        vec![people.site.root.clone()],
        vec![PathBuf::from("/proc")],
        false,
    );
    // What needs no ptrace access is readable: the rule above does let /proc in.
    let out = people.run(&policy, &format!("grep ^Name: /proc/{pid}/status"));
    assert_eq!(out.stdout, "Name:\tsleep\n", "{out:?}");
    for template in [
        "cat P/environ",
        "cat P/mem",
        "cat P/maps",
        "readlink -v P/fd/0",
        "ls P/cwd/",
    ] {
        let command = template.replace('P', &format!("/proc/{pid}"));
        let out = people.denied(&policy, &command);
        assert!(!out.stdout.contains("s3cret"), "{command}: {out:?}");
    }
    // The control: without a sandbox the same user reads it.
    let out = people.run(
        &people.site.policy(),
        &format!("tr '\\0' '\\n' < /proc/{pid}/environ"),
    );
    assert!(
        out.stdout.contains("SERVICE_SECRET=s3cret-in-env"),
        "{out:?}"
    );
}

/// A child that is killed and reaped however the test ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Listeners of the test's own, outside every tree, that record what reaches them.
struct Listeners {
    udp: std::net::UdpSocket,
    stream: UnixListener,
    datagram: std::os::unix::net::UnixDatagram,
    /// The folder of both named sockets (0700, outside the trees).
    dir: PathBuf,
}

impl Listeners {
    fn new(base: &Path) -> Listeners {
        let dir = base.join("daemon");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let stream = UnixListener::bind(dir.join("stream.sock")).unwrap();
        stream.set_nonblocking(true).unwrap();
        let datagram = std::os::unix::net::UnixDatagram::bind(dir.join("dgram.sock")).unwrap();
        datagram.set_nonblocking(true).unwrap();
        Listeners {
            udp,
            stream,
            datagram,
            dir,
        }
    }

    /// The attacks, each a command that tries to get `LEAK` to one listener.
    fn attacks(&self) -> Vec<(&'static str, String)> {
        let port = self.udp.local_addr().unwrap().port();
        let (stream, dgram) = (
            self.dir.join("stream.sock").display().to_string(),
            self.dir.join("dgram.sock").display().to_string(),
        );
        vec![
            ("udp", format!("echo -n LEAK > /dev/udp/127.0.0.1/{port}")),
            (
                "udp",
                format!(
                    "python3 -c 'import socket; socket.socket(socket.AF_INET, \
                     socket.SOCK_DGRAM).sendto(b\"LEAK\", (\"127.0.0.1\", {port}))'"
                ),
            ),
            (
                "stream",
                format!(
                    "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); \
                     s.connect(\"{stream}\"); s.sendall(b\"LEAK\")'"
                ),
            ),
            (
                "datagram",
                format!(
                    "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX, \
                     socket.SOCK_DGRAM); s.sendto(b\"LEAK\", \"{dgram}\")'"
                ),
            ),
            // A private pair is allowed, but a datagram one could send to any name.
            (
                "datagram",
                format!(
                    "python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, \
                     socket.SOCK_DGRAM); a.sendto(b\"LEAK\", \"{dgram}\")'"
                ),
            ),
        ]
    }

    /// What arrived at `which` since the last look.
    fn received(&self, which: &str) -> Vec<u8> {
        // Loopback and unix sockets deliver at once; a moment more for the sender's exit.
        std::thread::sleep(Duration::from_millis(50));
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        match which {
            "udp" => {
                while let Ok(n) = self.udp.recv(&mut buf) {
                    got.extend_from_slice(&buf[..n]);
                }
            }
            "datagram" => {
                while let Ok(n) = self.datagram.recv(&mut buf) {
                    got.extend_from_slice(&buf[..n]);
                }
            }
            _ => {
                while let Ok((mut conn, _)) = self.stream.accept() {
                    conn.set_nonblocking(false).unwrap();
                    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let _ = std::io::Read::read_to_end(&mut conn, &mut got);
                }
            }
        }
        got
    }
}

/// Calls io_uring_setup (425 on x86_64 and aarch64 alike): prints the answer and errno.
const IO_URING_PROBE: &str = "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); \
     p = ctypes.create_string_buffer(120); print(libc.syscall(425, 4, p), ctypes.get_errno())'";

#[test]
fn landlock_cuts_the_sockets_its_rules_do_not_cover() {
    as_nobody("inner_landlock_cuts_the_sockets_its_rules_do_not_cover");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_cuts_the_sockets_its_rules_do_not_cover() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let listeners = Listeners::new(&base);
    let unconfined = people.site.policy();

    // The controls first: without the sandbox every attack arrives, and a ring is made.
    for (which, command) in listeners.attacks() {
        let out = people.run(&unconfined, &command);
        assert_eq!(out.exit_code, Some(0), "{command}: {out:?}");
        assert_eq!(listeners.received(which), b"LEAK", "{command}: {out:?}");
    }
    let out = people.run(&unconfined, IO_URING_PROBE);
    assert!(
        out.stdout.ends_with(" 0\n") && !out.stdout.starts_with('-'),
        "{out:?}"
    );

    for network in [false, true] {
        let policy = people.confined(network);
        for (which, command) in listeners.attacks() {
            if network && which == "udp" {
                continue;
            }
            let out = people.denied(&policy, &command);
            assert_eq!(listeners.received(which), b"", "{command}: {out:?}");
        }
        // As on a kernel without io_uring: ENOSYS.
        let out = people.run(&policy, IO_URING_PROBE);
        assert_eq!(out.stdout, "-1 38\n", "network={network}: {out:?}");
    }

    // With the network: UDP and TCP to loopback work.
    let open = people.confined(true);
    for (which, command) in listeners.attacks() {
        if which == "udp" {
            let out = people.run(&open, &command);
            assert_eq!(out.exit_code, Some(0), "{command}: {out:?}");
            assert_eq!(listeners.received(which), b"LEAK", "{command}: {out:?}");
        }
    }
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let out = people.run(
        &open,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
    );
    assert_eq!(out.stdout, "connected\n", "{out:?}");
}

#[test]
fn landlock_leaves_private_pairs_netlink_and_ordinary_work_alone() {
    as_nobody("inner_landlock_leaves_private_pairs_netlink_and_ordinary_work_alone");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_leaves_private_pairs_netlink_and_ordinary_work_alone() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let policy = people.confined(false);
    let out = people.run(
        &policy,
        "ls -a && python3 -c 'import socket; a, b = socket.socketpair(); a.sendall(b\"pair\"); \
         print(b.recv(4).decode()); a, b = socket.socketpair(socket.AF_UNIX, \
         socket.SOCK_SEQPACKET); a.send(b\"seq\"); print(b.recv(3).decode()); \
         print(len(socket.if_nameindex()) > 0)' && \
         python3 -c 'import socket\n\
         try: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4); print(\"diag open\")\n\
         except PermissionError: print(\"diag refused\")' && \
         python3 -c 'import multiprocessing as m\n\
         def add(c): c.send(sum(c.recv()))\n\
         a, b = m.Pipe()\n\
         p = m.Process(target=add, args=(b,)); p.start(); a.send([1, 2, 3])\n\
         print(a.recv()); p.join()'",
    );
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        (".\n..\npair\nseq\nTrue\ndiag refused\n6\n", Some(0)),
        "{out:?}"
    );
}

/// Runs machine code of the 32-bit x86 system call interface (`int 0x80`) that asks for
/// a UDP socket (socket is 359 there), and prints the descriptor.
#[cfg(target_arch = "x86_64")]
const IA32_SOCKET: &str = "python3 -c 'import ctypes, mmap\n\
     m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n\
     m.write(bytes.fromhex(\"53b867010000bb02000000b90200000031d2cd805bc3\"))\n\
     f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))\n\
     print(\"socket\", f())'; echo \"status $?\"";
/// Asks for a UDP socket through the x32 interface (socket, 41, with the x32 bit).
#[cfg(target_arch = "x86_64")]
const X32_SOCKET: &str = "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); \
     print(\"socket\", libc.syscall(0x40000000 | 41, 2, 2, 0))'; echo \"status $?\"";

#[cfg(target_arch = "x86_64")]
#[test]
fn landlock_kills_a_command_that_calls_another_architecture() {
    as_nobody("inner_landlock_kills_a_command_that_calls_another_architecture");
}

#[cfg(target_arch = "x86_64")]
#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_kills_a_command_that_calls_another_architecture() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    // The control: this kernel runs 32-bit calls, so the socket is made without the sandbox.
    let out = people.run(&people.site.policy(), IA32_SOCKET);
    assert!(
        out.stdout.starts_with("socket ") && out.stdout.ends_with("status 0\n"),
        "{out:?}"
    );
    assert!(!out.stdout.starts_with("socket -"), "{out:?}");
    // 159: killed by SIGSYS (31), before any socket.
    for network in [false, true] {
        let policy = people.confined(network);
        for command in [IA32_SOCKET, X32_SOCKET] {
            let out = people.run(&policy, command);
            assert_eq!(out.stdout, "status 159\n", "{command}: {out:?}");
        }
    }
}

/// A kernel without seccomp filters: the `seccomp` system call answers `EINVAL`.
static HIDE_SECCOMP: [libc::sock_filter; 4] = [
    libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    },
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt: 0,
        jf: 1,
        k: libc::SYS_seccomp as u32,
    },
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ERRNO | libc::EINVAL as u32,
    },
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    },
];

#[test]
fn landlock_without_seccomp_is_refused_never_run_with_sockets_open() {
    as_nobody("inner_landlock_without_seccomp_is_refused_never_run_with_sockets_open");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_landlock_without_seccomp_is_refused_never_run_with_sockets_open() {
    let Some(base) = inner_base() else { return };
    let people = People::new(&base);
    let marker = people.site.root.join("ran");
    let command = format!("touch {}", marker.display());
    // The control: with seccomp, the same run goes ahead.
    let out = people.run(&people.confined(false), &command);
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    std::fs::remove_file(&marker).unwrap();
    common::seccomp::install(&HIDE_SECCOMP).expect("seccomp");
    for network in [false, true] {
        let err = run(
            &people.site.cmd(&command, None),
            &people.site.who(),
            &people.confined(network),
        )
        .unwrap_err();
        assert!(
            matches!(err, ExecError::SandboxUnavailable { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("seccomp"), "{err}");
        assert!(!marker.exists(), "nothing ran without the filter");
    }
}
