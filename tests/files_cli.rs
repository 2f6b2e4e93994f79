//! `ferry files` (spec members M-DAILY, "From a terminal") against a real gateway: what a
//! script sees (output, exit status 0/1/2/3) and what a broken transfer leaves to resume.

mod support;

use std::path::Path;
use std::process::Command;

use support::{Finished, Server, ferry_command, finish, sha256_hex};

/// A `ferry files` command aimed at `server` with its admin token in the environment.
fn files(server: &Server, cwd: &Path, args: &[&str]) -> Finished {
    let mut cmd = ferry_command();
    cmd.current_dir(cwd)
        .env("FERRY_URL", &server.base)
        .env("FERRY_TOKEN", &server.token)
        .env("XDG_STATE_HOME", cwd.join("state"))
        .arg("files")
        .args(args);
    finish(cmd)
}

fn code(done: &Finished) -> i32 {
    done.status.code().expect("exited, not killed")
}

fn ok(done: Finished) -> Finished {
    assert_eq!(code(&done), 0, "{}", done.both());
    done
}

#[test]
fn put_ls_get_rm_round_trip() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("data.csv"), &bytes).unwrap();

    let put = ok(files(&server, dir.path(), &["put", "data.csv"]));
    let fields: Vec<&str> = put.stdout.trim().split('\t').collect();
    assert_eq!(fields, ["public/data.csv", "300000", &sha256_hex(&bytes)]);
    // Not a terminal: no progress bar in what a script reads.
    assert!(!put.stderr.contains('\r'), "{}", put.stderr);

    let ls = ok(files(&server, dir.path(), &["ls"]));
    assert!(
        ls.stdout
            .lines()
            .any(|l| l.starts_with("file\t300000\t") && l.ends_with("\tpublic/data.csv")),
        "{}",
        ls.stdout
    );
    assert!(
        ls.stdout
            .lines()
            .any(|l| l.starts_with("dir\t") && l.ends_with("\tpublic/attachments/"))
    );
    let json: serde_json::Value = serde_json::from_str(
        &ok(files(
            &server,
            dir.path(),
            &["ls", "public/data.csv", "--json"],
        ))
        .stdout,
    )
    .unwrap();
    assert_eq!(json[0]["size"], 300_000);

    std::fs::create_dir(dir.path().join("out")).unwrap();
    let get = ok(files(
        &server,
        dir.path(),
        &["get", "public/data.csv", "-o", "out"],
    ));
    assert!(
        get.stdout.starts_with("out/data.csv\t300000"),
        "{}",
        get.stdout
    );
    assert_eq!(
        std::fs::read(dir.path().join("out/data.csv")).unwrap(),
        bytes
    );
    let streamed = Command::new(support::ferry_bin())
        .current_dir(dir.path())
        .env("FERRY_URL", &server.base)
        .env("FERRY_TOKEN", &server.token)
        .args(["files", "get", "public/data.csv", "-o", "-"])
        .output()
        .unwrap();
    assert!(streamed.status.success());
    assert_eq!(streamed.stdout, bytes);

    let rm = ok(files(&server, dir.path(), &["rm", "public/data.csv"]));
    assert!(
        rm.stdout.starts_with("public/data.csv\ttrash\t"),
        "{}",
        rm.stdout
    );
    let gone = files(&server, dir.path(), &["get", "public/data.csv"]);
    assert_eq!(code(&gone), 3, "{}", gone.both());
    assert!(!dir.path().join("data.csv.ferry-part").exists());
}

#[test]
fn exit_status_tells_usage_from_missing_from_failure() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    // Not found: 3, for a download, a delete and a listing of a path.
    for args in [
        &["get", "public/none.txt"][..],
        &["rm", "public/none.txt"],
        &["ls", "public/none"],
    ] {
        let done = files(&server, dir.path(), args);
        assert_eq!(code(&done), 3, "{args:?}: {}", done.both());
        assert!(done.stderr.starts_with("ferry files: "), "{}", done.stderr);
    }
    // Usage: 2, from clap and from a missing token.
    let done = files(&server, dir.path(), &["get"]);
    assert_eq!(code(&done), 2, "{}", done.both());
    let mut cmd = ferry_command();
    cmd.current_dir(dir.path())
        .env_remove("FERRY_TOKEN")
        .env("FERRY_URL", &server.base)
        .args(["files", "ls"]);
    let done = finish(cmd);
    assert_eq!(code(&done), 2, "{}", done.both());
    assert!(done.stderr.contains("FERRY_TOKEN"), "{}", done.stderr);
    // A file that is not there locally is the caller's: 3 too, naming it.
    let done = files(&server, dir.path(), &["put", "absent.txt"]);
    assert_eq!(code(&done), 3, "{}", done.both());
    assert!(done.stderr.contains("absent.txt"), "{}", done.stderr);
    // Refused: 1, with the gateway's own sentence.
    std::fs::write(dir.path().join("tool.exe"), b"MZ").unwrap();
    let done = files(&server, dir.path(), &["put", "tool.exe"]);
    assert_eq!(code(&done), 1, "{}", done.both());
    assert!(
        done.stderr.contains("extension_not_allowed"),
        "{}",
        done.stderr
    );
    // A wrong token: 1, and the token is not printed back.
    let mut cmd = ferry_command();
    cmd.current_dir(dir.path())
        .env("FERRY_TOKEN", "fy_not_a_real_token")
        .env("FERRY_URL", &server.base)
        .args(["files", "ls"]);
    let done = finish(cmd);
    assert_eq!(code(&done), 1, "{}", done.both());
    assert!(!done.both().contains("fy_not_a_real_token"));
    // Nothing listening: 1, saying so.
    let mut cmd = ferry_command();
    cmd.current_dir(dir.path())
        .env("FERRY_TOKEN", &server.token)
        .env("FERRY_URL", "http://127.0.0.1:9")
        .args(["files", "ls"]);
    let done = finish(cmd);
    assert_eq!(code(&done), 1, "{}", done.both());
    assert!(
        done.stderr.contains("could not be reached"),
        "{}",
        done.stderr
    );
}

#[test]
fn keep_refuses_to_replace_and_says_what_is_there() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"first").unwrap();
    ok(files(&server, dir.path(), &["put", "notes.txt"]));
    std::fs::write(dir.path().join("notes.txt"), b"second").unwrap();
    let kept = files(&server, dir.path(), &["put", "--keep", "notes.txt"]);
    assert_eq!(code(&kept), 1, "{}", kept.both());
    assert!(kept.stderr.contains("exists"), "{}", kept.stderr);
    assert_eq!(
        std::fs::read(server.workspace("me", None).join("public/notes.txt")).unwrap(),
        b"first"
    );
    ok(files(&server, dir.path(), &["put", "notes.txt"]));
    assert_eq!(
        std::fs::read(server.workspace("me", None).join("public/notes.txt")).unwrap(),
        b"second"
    );
}

#[test]
fn an_interrupted_download_resumes_and_a_changed_file_starts_over() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let public = server.workspace("me", None).join("public");
    std::fs::create_dir_all(&public).unwrap();
    let bytes: Vec<u8> = (0..2_000_000u32).map(|i| (i * 7 % 253) as u8).collect();
    std::fs::write(public.join("big.txt"), &bytes).unwrap();

    // What an interrupted run leaves: the first part, and the version it belongs to.
    let head = support::client()
        .get(server.url("/v1/files/content?path=public/big.txt"))
        .bearer_auth(&server.token)
        .header("Range", "bytes=0-0")
        .send()
        .unwrap();
    let etag = head.headers()["etag"].to_str().unwrap().to_owned();
    std::fs::write(dir.path().join("big.txt.ferry-part"), &bytes[..1_234_567]).unwrap();
    std::fs::write(dir.path().join("big.txt.ferry-part.etag"), &etag).unwrap();
    let get = ok(files(&server, dir.path(), &["get", "public/big.txt"]));
    assert!(
        get.stderr.contains("resumed after 1.2 MiB"),
        "{}",
        get.stderr
    );
    assert_eq!(std::fs::read(dir.path().join("big.txt")).unwrap(), bytes);
    assert!(!dir.path().join("big.txt.ferry-part").exists());
    assert!(!dir.path().join("big.txt.ferry-part.etag").exists());
    let log = server.log();
    assert!(
        log.contains("206"),
        "the resumed download asked for a range: {log}"
    );

    // The file changed since the part was written: If-Range fails, all of it comes again.
    std::fs::write(dir.path().join("big.txt.ferry-part"), &bytes[..1_000]).unwrap();
    std::fs::write(dir.path().join("big.txt.ferry-part.etag"), &etag).unwrap();
    let changed: Vec<u8> = bytes.iter().rev().copied().collect();
    std::fs::write(public.join("big.txt"), &changed).unwrap();
    let get = ok(files(&server, dir.path(), &["get", "public/big.txt"]));
    assert!(!get.stderr.contains("resumed"), "{}", get.stderr);
    assert_eq!(std::fs::read(dir.path().join("big.txt")).unwrap(), changed);
}

#[test]
fn put_places_into_an_existing_folder() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(server.workspace("me", None).join("public/reports 2026")).unwrap();
    std::fs::write(dir.path().join("q1.txt"), b"q1").unwrap();
    let put = ok(files(
        &server,
        dir.path(),
        &["put", "q1.txt", "--to", "public/reports 2026"],
    ));
    assert!(
        put.stdout.starts_with("public/reports 2026/q1.txt\t2\t"),
        "{}",
        put.stdout
    );
    let missing = files(
        &server,
        dir.path(),
        &["put", "q1.txt", "--to", "public/none"],
    );
    assert_ne!(code(&missing), 0, "{}", missing.both());
}

#[test]
fn share_prints_a_link_that_works_without_a_token_until_revoked() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"shared words").unwrap();
    ok(files(&server, dir.path(), &["put", "notes.txt"]));
    let share = ok(files(
        &server,
        dir.path(),
        &["share", "public/notes.txt", "--expires", "1h"],
    ));
    let url = share.stdout.trim().to_owned();
    let fetched = reqwest::blocking::get(&url).unwrap();
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().unwrap().as_ref(), b"shared words");
    let id = share
        .stderr
        .split_whitespace()
        .nth(3)
        .expect("the share's id is named")
        .to_owned();
    ok(files(&server, dir.path(), &["share", "--revoke", &id]));
    assert!(!reqwest::blocking::get(&url).unwrap().status().is_success());
    let bad = files(
        &server,
        dir.path(),
        &["share", "public/notes.txt", "--expires", "7w"],
    );
    assert_eq!(code(&bad), 2, "{}", bad.both());
    let missing = files(&server, dir.path(), &["share", "public/none.txt"]);
    assert_eq!(code(&missing), 3, "{}", missing.both());
}

#[test]
fn a_stopped_put_resumes_through_tus_where_the_gateway_stopped() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..40 * 1024 * 1024u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(dir.path().join("big.csv"), &bytes).unwrap();
    let state = dir.path().join("state/ferry/resumable-uploads");

    // A run stopped (SIGKILL) once the gateway holds at least one whole part.
    let mut cmd = ferry_command();
    cmd.current_dir(dir.path())
        .env("FERRY_URL", &server.base)
        .env("FERRY_TOKEN", &server.token)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .args(["files", "put", "big.csv"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let stopped = stop_after_first_part(&mut child, &server, &state, bytes.len() as u64);
    let public = server.workspace("me", None).join("public");
    assert!(
        !public.join("big.csv").exists(),
        "nothing lands before the last byte"
    );

    let put = ok(files(&server, dir.path(), &["put", "big.csv"]));
    assert!(
        put.stderr.contains("resumed big.csv after"),
        "{}",
        put.stderr
    );
    let fields: Vec<&str> = put.stdout.trim().split('\t').collect();
    assert_eq!(fields[0], "public/big.csv");
    assert_eq!(fields[2], sha256_hex(&bytes));
    assert_eq!(std::fs::read(public.join("big.csv")).unwrap(), bytes);
    assert!(stopped > 0);
    // Finished: nothing is remembered any more.
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 0);
}

/// Kills (SIGKILL) a running `put` once the gateway holds at least one whole part of an
/// upload of `len` bytes, and answers how far it had come.
fn stop_after_first_part(
    child: &mut std::process::Child,
    server: &Server,
    state: &Path,
    len: u64,
) -> u64 {
    let http = support::client();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the upload never got going");
        }
        let remembered = std::fs::read_dir(state)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .and_then(|e| std::fs::read_to_string(e.path()).ok())
            // Read while the CLI writes it: not whole yet.
            .filter(|url| url.trim().starts_with("http://"));
        if let Some(url) = remembered {
            let head = http
                .head(url.trim())
                .bearer_auth(&server.token)
                .header("Tus-Resumable", "1.0.0")
                .send()
                .unwrap();
            let offset: u64 = head.headers()["upload-offset"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            if offset >= 8 * 1024 * 1024 && offset < len {
                child.kill().unwrap();
                child.wait().unwrap();
                return offset;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_download_never_writes_through_a_planted_link_nor_onto_a_device() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let public = server.workspace("me", None).join("public");
    std::fs::create_dir_all(&public).unwrap();
    std::fs::write(public.join("f.txt"), b"downloaded").unwrap();
    // Someone who can write the download folder points the part file (or its version
    // file) at a file of the person's.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    for planted in ["f.txt.ferry-part", "f.txt.ferry-part.etag"] {
        let link = dir.path().join(planted);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let done = files(&server, dir.path(), &["get", "public/f.txt"]);
        assert_ne!(code(&done), 0, "{planted}: {}", done.both());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{planted}");
        std::fs::remove_file(&link).unwrap();
        let _ = std::fs::remove_file(dir.path().join("f.txt.ferry-part"));
    }
    // A device is not replaced by a file.
    let done = files(
        &server,
        dir.path(),
        &["get", "public/f.txt", "-o", "/dev/null"],
    );
    assert_eq!(code(&done), 2, "{}", done.both());
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    // A path whose last part is no name writes nothing.
    for path in ["public/..", "public/sub/.", "public/"] {
        let done = files(&server, dir.path(), &["get", path]);
        assert_eq!(code(&done), 2, "{path}: {}", done.both());
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["victim.txt"]);
}
