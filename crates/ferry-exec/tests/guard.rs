//! T-GUARD without a sandbox: root refusal, working folder, environment, timeout and
//! group kill, output caps, exit reporting, fork bombs. Real bash, real processes.
//!
//! Every scenario but the first runs as `nobody` (see common/mod.rs).

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Site, as_nobody, dies_within, gone_within, inner_base};
use ferry_config::limits::{
    COMMAND_DEFAULT_TIMEOUT, COMMAND_MAX_TIMEOUT, FULL_OUTPUT_MAX_BYTES, PROCESS_MAX_COUNT,
    VISIBLE_OUTPUT_BYTES,
};
use ferry_exec::{
    CANONICAL_PATH, Command, ENV_NAMES, ExecError, Identity, Output, Policy, effective_timeout, run,
};

fn ok(site: &Site, command: &str) -> Output {
    run(&site.cmd(command, None), &site.who(), &site.policy())
        .unwrap_or_else(|e| panic!("{command}: {e}"))
}

#[test]
fn refuses_as_root() {
    common::assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("output");
    let policy = Policy::new(tmp.path(), &out_dir);
    let who = Identity {
        home: tmp.path().into(),
        user: "root".into(),
    };
    let marker = tmp.path().join("ran");
    let cmd = Command {
        command: format!("touch {}", marker.display()),
        cwd: tmp.path().into(),
        timeout: None,
        ..Command::default()
    };
    let err = run(&cmd, &who, &policy).unwrap_err();
    assert!(matches!(err, ExecError::RefusedAsRoot), "{err:?}");
    assert_eq!(err.code(), "refused_as_root");
    // Refused before anything happened, bad input or not.
    assert!(!marker.exists() && !out_dir.exists());
    let bad = Command {
        command: "true".into(),
        cwd: "/".into(),
        timeout: Some(Duration::ZERO),
        ..Command::default()
    };
    assert!(matches!(
        run(&bad, &who, &policy),
        Err(ExecError::RefusedAsRoot)
    ));
}

#[test]
fn timeout_defaults_and_clamps_at_the_edges() {
    assert_eq!(effective_timeout(None).unwrap(), COMMAND_DEFAULT_TIMEOUT);
    assert_eq!(COMMAND_DEFAULT_TIMEOUT, Duration::from_secs(120));
    assert_eq!(COMMAND_MAX_TIMEOUT, Duration::from_secs(600));
    let secs = |s| effective_timeout(Some(Duration::from_secs(s))).unwrap();
    assert_eq!(secs(599), Duration::from_secs(599));
    assert_eq!(secs(600), Duration::from_secs(600));
    assert_eq!(secs(601), Duration::from_secs(600));
    assert_eq!(secs(u64::MAX), COMMAND_MAX_TIMEOUT);
    assert_eq!(
        effective_timeout(Some(Duration::from_nanos(1))).unwrap(),
        Duration::from_nanos(1)
    );
    let zero = effective_timeout(Some(Duration::ZERO)).unwrap_err();
    assert!(matches!(zero, ExecError::InvalidTimeout));
    assert_eq!(zero.code(), "invalid_timeout");
}

#[test]
fn environment_is_exactly_the_allowlist() {
    as_nobody("inner_environment_is_exactly_the_allowlist");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_environment_is_exactly_the_allowlist() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    // /proc/$$/environ is what bash was given; `env` adds what bash exports itself.
    // The trailing `true` keeps bash from exec'ing the last command in its own place.
    let out = ok(
        &site,
        "tr '\\0' '\\n' < /proc/$$/environ; echo ---; env; echo ---; \
         stat -c '%a %U' \"$TMPDIR\"; readlink /proc/$$/fd/0; cat; \
         grep 'Max processes' /proc/$$/limits; true",
    );
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let sections: Vec<&str> = out.stdout.split("---\n").collect();
    let [given, exported, rest] = sections[..] else {
        panic!("{out:?}")
    };
    let vars = |text: &str| -> Vec<(String, String)> {
        text.lines()
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let given = vars(given);
    let names: BTreeSet<&str> = given.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ENV_NAMES.into_iter().collect(), "{given:?}");
    assert_eq!(given.len(), ENV_NAMES.len(), "no name twice: {given:?}");
    let value = |name: &str| &given.iter().find(|(k, _)| k == name).unwrap().1;
    let root = site.root.to_str().unwrap();
    assert_eq!(value("PATH"), CANONICAL_PATH);
    assert_eq!(CANONICAL_PATH, "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(value("HOME"), root);
    assert_eq!(value("USER"), "alice");
    assert_eq!(value("LOGNAME"), "alice");
    assert_eq!(value("LANG"), "C.UTF-8");
    assert_eq!(value("LC_ALL"), "C.UTF-8");
    assert_eq!(value("TZ"), "UTC");
    assert_eq!(value("TERM"), "dumb");
    let tmpdir = Path::new(value("TMPDIR"));
    assert_eq!(tmpdir.parent(), Some(site.out.as_path()));
    assert!(
        tmpdir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("tmp-")
    );
    assert!(!tmpdir.exists(), "the per-run TMPDIR is removed afterwards");

    let exported: BTreeSet<String> = vars(exported).into_iter().map(|(k, _)| k).collect();
    let mut expected: BTreeSet<String> = ENV_NAMES.iter().map(|s| s.to_string()).collect();
    expected.extend(["PWD", "SHLVL", "_"].map(String::from));
    assert_eq!(exported, expected);

    // TMPDIR private to the person; stdin is /dev/null, so `cat` ends at once; the
    // process limit is set, soft and hard.
    let lines: Vec<&str> = rest.lines().collect();
    assert_eq!(lines[..2], ["700 nobody", "/dev/null"], "{rest}");
    let limit = PROCESS_MAX_COUNT.to_string();
    let words: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(words, ["Max", "processes", &limit, &limit, "processes"]);
    let mode = std::fs::metadata(&site.out).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the output folder is created private");
}

#[test]
fn working_folder_stays_inside_the_root() {
    as_nobody("inner_working_folder_stays_inside_the_root");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_working_folder_stays_inside_the_root() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let outside = base.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(site.root.join("sub")).unwrap();
    std::fs::write(site.root.join("file"), "x").unwrap();
    symlink(&outside, site.root.join("out-abs")).unwrap();
    symlink("../../outside", site.root.join("out-rel")).unwrap();
    symlink("sub", site.root.join("in-rel")).unwrap();

    let run_in = |cwd: &Path| {
        let cmd = Command {
            command: "pwd -P".into(),
            cwd: cwd.into(),
            timeout: None,
            ..Command::default()
        };
        run(&cmd, &site.who(), &site.policy())
    };
    let real_root = std::fs::canonicalize(&site.root).unwrap();
    let pwd = |cwd: &Path| run_in(cwd).unwrap().stdout;
    assert_eq!(pwd(&site.root), format!("{}\n", real_root.display()));
    let sub = format!("{}\n", real_root.join("sub").display());
    assert_eq!(pwd(&site.root.join("sub")), sub);
    assert_eq!(pwd(Path::new("sub")), sub, "relative: against the root");
    assert_eq!(pwd(&site.root.join("in-rel")), sub, "a link inside is fine");

    for cwd in [
        outside.clone(),
        site.root.join("out-abs"),
        site.root.join("out-rel"),
        site.root.join("out-abs/deeper"),
        site.root.join("sub/.."),
        site.root.join("../alice/sub"),
        site.root.join("sub/../../../outside"),
        "/".into(),
        "..".into(),
    ] {
        let err = run_in(&cwd).unwrap_err();
        assert!(
            matches!(err, ExecError::CwdOutside { .. }),
            "{}: {err:?}",
            cwd.display()
        );
        assert_eq!(err.code(), "cwd_outside");
    }
    let err = run_in(&site.root.join("missing")).unwrap_err();
    assert!(matches!(err, ExecError::CwdNotFound { .. }), "{err:?}");
    assert_eq!(err.code(), "cwd_not_found");
    let err = run_in(&site.root.join("file")).unwrap_err();
    assert!(matches!(err, ExecError::CwdUnusable { .. }), "{err:?}");

    let mut policy = site.policy();
    policy.root = base.join("no-such-root");
    let err = run(&site.cmd("true", None), &site.who(), &policy).unwrap_err();
    assert_eq!(err.code(), "root_unavailable", "{err:?}");
}

#[test]
fn bad_requests_are_refused() {
    as_nobody("inner_bad_requests_are_refused");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_bad_requests_are_refused() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let err = run(
        &site.cmd("true", Some(Duration::ZERO)),
        &site.who(),
        &site.policy(),
    )
    .unwrap_err();
    assert!(matches!(err, ExecError::InvalidTimeout), "{err:?}");
    let err = run(&site.cmd("echo a\0b", None), &site.who(), &site.policy()).unwrap_err();
    assert_eq!(err.code(), "invalid_command");
    // A command that looks like an option is still just a command.
    let out = run(&site.cmd("--version", None), &site.who(), &site.policy()).unwrap();
    assert_eq!(out.exit_code, Some(127), "{out:?}");
    assert!(
        out.stderr.contains("--version: command not found"),
        "{out:?}"
    );
    // A timeout over the maximum is cut, not refused.
    let out = run(
        &site.cmd(
            "echo fine",
            Some(COMMAND_MAX_TIMEOUT + Duration::from_secs(1)),
        ),
        &site.who(),
        &site.policy(),
    )
    .unwrap();
    assert_eq!(out.stdout, "fine\n");
}

#[test]
fn timeout_kills_the_whole_group() {
    as_nobody("inner_timeout_kills_the_whole_group");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_timeout_kills_the_whole_group() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let pidfile = base.join("grandchild.pid");
    // The odd durations mark these processes in /proc.
    let command = format!(
        "sleep 1001.25 & echo $! > {}; echo started; sleep 1001.5",
        pidfile.display()
    );
    let started = Instant::now();
    let out = run(
        &site.cmd(&command, Some(Duration::from_secs(1))),
        &site.who(),
        &site.policy(),
    )
    .unwrap();
    let took = started.elapsed();
    assert!(out.timed_out, "{out:?}");
    assert_eq!((out.exit_code, out.signal), (None, Some(9)), "{out:?}");
    assert_eq!(out.stdout, "started\n");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_millis(2500),
        "returned after {took:?}"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        dies_within(pid, Duration::from_secs(2)),
        "the backgrounded grandchild {pid} survived the timeout"
    );
    assert_eq!(
        gone_within("1001.", Duration::from_secs(2)),
        Vec::<u32>::new()
    );
}

#[test]
fn exit_kills_what_the_command_left_running() {
    as_nobody("inner_exit_kills_what_the_command_left_running");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_exit_kills_what_the_command_left_running() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let pidfile = base.join("grandchild.pid");
    // The background sleep holds stdout open: without the group kill the read would
    // last 1002 seconds.
    let command = format!("sleep 1002.25 & echo $! > {}; echo done", pidfile.display());
    let started = Instant::now();
    let out = ok(&site, &command);
    let took = started.elapsed();
    assert_eq!(out.stdout, "done\n");
    assert_eq!((out.exit_code, out.signal), (Some(0), None));
    assert!(!out.timed_out);
    assert!(took < Duration::from_secs(1), "returned after {took:?}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        dies_within(pid, Duration::from_secs(2)),
        "{pid} left running"
    );
    assert_eq!(
        gone_within("1002.", Duration::from_secs(2)),
        Vec::<u32>::new()
    );
}

#[test]
fn nothing_the_command_started_outlives_the_call() {
    as_nobody("inner_nothing_the_command_started_outlives_the_call");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_nothing_the_command_started_outlives_the_call() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    common::assert_nothing_outlives(&site, &site.policy(), true);
}

#[test]
fn a_command_that_kills_its_watcher_gets_no_answer() {
    as_nobody("inner_a_command_that_kills_its_watcher_gets_no_answer");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_command_that_kills_its_watcher_gets_no_answer() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    // Without a sandbox the reaper is the person's like the command, which can kill it;
    // then nothing vouches that what the command started has ended, and the run says so
    // instead of reporting an exit.
    let err = run(
        &site.cmd("kill -KILL $PPID; echo $?", None),
        &site.who(),
        &site.policy(),
    )
    .unwrap_err();
    assert!(matches!(err, ExecError::Unwatched), "{err:?}");
    assert_eq!(err.code(), "unwatched");
    // The signals it can ignore, it does: the watch goes on and the answer is whole.
    for signal in ["TERM", "INT", "HUP", "QUIT", "USR1", "USR2", "PIPE"] {
        let command = format!("kill -{signal} $PPID; setsid sleep 30 & echo sent");
        let out = ok(&site, &command);
        assert_eq!(out.stdout, "sent\n", "{signal}: {out:?}");
        assert_eq!(out.leftovers_killed, 1, "{signal}: {out:?}");
    }
}

#[test]
fn a_command_gets_umask_022_whatever_the_service_has() {
    as_nobody("inner_a_command_gets_umask_022_whatever_the_service_has");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_command_gets_umask_022_whatever_the_service_has() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    for service in [0o000, 0o077] {
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(service));
        let out = ok(&site, "umask; rm -rf f d; touch f; mkdir d; stat -c %a f d");
        assert_eq!(
            out.stdout, "0022\n644\n755\n",
            "service umask {service:o}: {out:?}"
        );
    }
}

#[test]
fn exit_codes_and_signals_are_reported() {
    as_nobody("inner_exit_codes_and_signals_are_reported");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_exit_codes_and_signals_are_reported() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let status = |command: &str| {
        let out = ok(&site, command);
        assert!(!out.timed_out && !out.truncated, "{out:?}");
        (out.exit_code, out.signal)
    };
    assert_eq!(status("true"), (Some(0), None));
    assert_eq!(status("exit 3"), (Some(3), None));
    assert_eq!(status("exit 255"), (Some(255), None));
    assert_eq!(status("kill -TERM $$"), (None, Some(15)));
    assert_eq!(status("kill -KILL $$"), (None, Some(9)));
    let out = ok(&site, "echo out; echo err >&2; exit 1");
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str()),
        ("out\n", "err\n")
    );
    assert_eq!((out.stdout_bytes, out.stderr_bytes), (4, 4));
    assert_eq!(out.full_output_path, None);
}

/// The full-output file's sections: (name, declared total, saved bytes).
fn sections(file: &[u8]) -> Vec<(String, u64, Vec<u8>)> {
    let mut rest = file;
    let mut found = Vec::new();
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\n').unwrap();
        let header = std::str::from_utf8(&rest[..end]).unwrap();
        let inner = header
            .strip_prefix("==== ")
            .and_then(|h| h.strip_suffix(" ===="))
            .unwrap_or_else(|| panic!("bad header {header:?}"));
        let (name, counts) = inner.split_once(": ").unwrap();
        let total: u64 = counts.split(' ').next().unwrap().parse().unwrap();
        let saved: u64 = match counts.split_once(", the first ") {
            Some((_, s)) => s.strip_suffix(" saved").unwrap().parse().unwrap(),
            None => total,
        };
        let body = &rest[end + 1..end + 1 + saved as usize];
        assert_eq!(
            rest[end + 1 + saved as usize],
            b'\n',
            "section ends in a newline"
        );
        found.push((name.to_string(), total, body.to_vec()));
        rest = &rest[end + 2 + saved as usize..];
    }
    found
}

#[test]
fn visible_output_is_capped_at_the_edges() {
    as_nobody("inner_visible_output_is_capped_at_the_edges");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_visible_output_is_capped_at_the_edges() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let cap = VISIBLE_OUTPUT_BYTES;
    assert_eq!(cap, 64 * 1024);
    for n in [cap - 1, cap, cap + 1] {
        let command =
            format!("head -c {n} /dev/zero | tr '\\0' a; head -c {n} /dev/zero | tr '\\0' b >&2");
        let out = ok(&site, &command);
        let over = n > cap;
        assert_eq!(out.stdout, "a".repeat(n.min(cap)), "n={n}");
        assert_eq!(out.stderr, "b".repeat(n.min(cap)), "n={n}");
        assert_eq!((out.stdout_bytes, out.stderr_bytes), (n as u64, n as u64));
        assert_eq!(out.truncated, over, "n={n}");
        assert_eq!(out.full_output_path.is_some(), over, "n={n}");
        assert_eq!(out.full_output_note, None);
        if let Some(path) = &out.full_output_path {
            let meta = std::fs::metadata(path).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, 0o600);
            assert_eq!(path.parent(), Some(site.out.as_path()));
            let name = path.file_name().unwrap().to_str().unwrap();
            assert!(name.starts_with("run-") && name.ends_with(".log"), "{name}");
            let file = std::fs::read(path).unwrap();
            assert_eq!(
                sections(&file),
                vec![
                    ("stdout".into(), n as u64, vec![b'a'; n]),
                    ("stderr".into(), n as u64, vec![b'b'; n]),
                ]
            );
        }
    }

    // Only stderr over the cap: the file still holds both streams, complete.
    let out = ok(
        &site,
        &format!("echo small; head -c {} /dev/zero >&2", cap + 1),
    );
    assert!(out.truncated && out.stdout == "small\n");
    let file = std::fs::read(out.full_output_path.unwrap()).unwrap();
    let found = sections(&file);
    assert_eq!(found[0], ("stdout".into(), 6, b"small\n".to_vec()));
    assert_eq!(found[1].1, cap as u64 + 1);

    // Cut on a character boundary; invalid bytes decoded lossily.
    let mut policy = site.policy();
    policy.visible_output_bytes = 5;
    let small = |command: &str| run(&site.cmd(command, None), &site.who(), &policy).unwrap();
    let out = small("printf 'aaaa\\xe2\\x82\\xac'"); // "aaaa€": the € would be cut
    assert_eq!((out.stdout.as_str(), out.truncated), ("aaaa", true));
    let out = small("printf 'a\\xffb'");
    assert_eq!((out.stdout.as_str(), out.truncated), ("a\u{FFFD}b", false));
    // Nothing left behind in the output folder but the logs.
    for entry in std::fs::read_dir(&site.out).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(name.starts_with("run-"), "left behind: {name}");
    }
}

#[test]
fn saved_output_is_capped_at_the_edges() {
    as_nobody("inner_saved_output_is_capped_at_the_edges");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_saved_output_is_capped_at_the_edges() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let mut policy = site.policy();
    policy.visible_output_bytes = 10;
    policy.full_output_max_bytes = 1000;
    for n in [999u64, 1000, 1001] {
        let cmd = site.cmd(&format!("head -c {n} /dev/zero | tr '\\0' x"), None);
        let out = run(&cmd, &site.who(), &policy).unwrap();
        assert_eq!(out.stdout, "x".repeat(10));
        let file = std::fs::read(out.full_output_path.as_ref().unwrap()).unwrap();
        let found = sections(&file);
        assert_eq!(found[0].1, n);
        assert_eq!(found[0].2, vec![b'x'; n.min(1000) as usize], "n={n}");
        assert_eq!(found[1], ("stderr".into(), 0, vec![]));
        match n {
            1001 => assert_eq!(
                out.full_output_note.as_deref(),
                Some("stdout: only the first 1000 of 1001 bytes were saved (the cap per stream)")
            ),
            _ => assert_eq!(out.full_output_note, None, "n={n}"),
        }
    }
}

#[test]
fn a_gibibyte_of_output_keeps_memory_bounded() {
    as_nobody("inner_a_gibibyte_of_output_keeps_memory_bounded");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_gibibyte_of_output_keeps_memory_bounded() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    const GIB: u64 = 1 << 30;
    let started = Instant::now();
    let out = ok(&site, "head -c 1G /dev/zero; echo tail >&2");
    let took = started.elapsed();
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout_bytes, GIB);
    assert_eq!(out.stdout.len(), VISIBLE_OUTPUT_BYTES);
    assert!(out.truncated);
    let path = out.full_output_path.as_ref().unwrap();
    let len = std::fs::metadata(path).unwrap().len();
    let header =
        format!("==== stdout: {GIB} bytes, the first {FULL_OUTPUT_MAX_BYTES} saved ====\n");
    let stderr_section = "==== stderr: 5 bytes ====\ntail\n\n";
    assert_eq!(
        len,
        header.len() as u64 + FULL_OUTPUT_MAX_BYTES + 1 + stderr_section.len() as u64
    );
    let note = out.full_output_note.as_deref().unwrap();
    assert!(
        note.contains("only the first 268435456 of 1073741824 bytes"),
        "{note}"
    );
    let peak = common::peak_rss_bytes();
    assert!(peak < 64 << 20, "peak RSS {} MiB", peak >> 20);
    eprintln!("1 GiB in {took:?}, peak RSS {} KiB", peak >> 10);
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_fork_bomb_is_bounded() {
    common::as_nobody_alone("inner_a_fork_bomb_is_bounded");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_fork_bomb_is_bounded() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    let out = common::assert_fork_bomb_bounded(
        &site,
        site.policy(),
        "ferry-bomb-1",
        Duration::from_secs(4),
    );
    assert_eq!(out.stdout, "survived\n");
}
