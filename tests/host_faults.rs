//! Host mode under a person's own hand (spec tools T-ID, members.md): what a person does
//! to their own folders at their shell (a `public/` replaced by a link, a file or folder
//! they made unreadable, a `public/` moved away mid-upload) never stops the site's set-up
//! for the others, never makes root act through a link, and never answers a 500.
//!
//! Users and groups are global to the machine: one test runs its steps in order, with
//! ids no one else uses (persons `hfa`, `hfb`, `hfc`, `hfd`), and a guard removes every
//! user and group it made, even when a step fails. It must run as root (CI does); it
//! fails, never skips, when it is not or a tool is missing.

#[allow(dead_code)] // the host-mode API helpers; this file uses some of them
#[path = "support/host_api.rs"]
mod host_api;
#[allow(dead_code)]
#[path = "support/host.rs"]
mod host_support;
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use host_api::{HostGateway, owned_by, raw_upload, temporaries_beneath};
use host_support::{
    AccountsGuard, build_helper, gid_of, owner_mode, passwd, require_root_and_tools, run_as,
    run_ok, tool_path, uid_of,
};
use serde_json::{Value, json};
use support::{SseStream, assert_error, client, json_answer, listed_paths};

const A: &str = "hfa";
const B: &str = "hfb";
const C: &str = "hfc";
const D: &str = "hfd";
const USER_A: &str = "fy_person_hfa";
const USER_B: &str = "fy_person_hfb";
const USER_C: &str = "fy_person_hfc";
const USER_D: &str = "fy_person_hfd";
const CIRCLE: &str = "hfx";
const CIRCLE_GROUP: &str = "fy_circle_hfx";
/// The exit status of a set-up that had to leave a person out.
const SKIPPED: i32 = 3;

struct Site {
    data: PathBuf,
    helper: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let tmp = tempfile::Builder::new()
            .prefix("ferry-host-faults-")
            .tempdir_in("/tmp")
            .unwrap();
        // Persons walk down to their home through it.
        std::fs::set_permissions(
            tmp.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let site = Site {
            data: tmp.path().join("site"),
            helper: tmp.path().join("lib").join("ferry-posix-helper"),
            _tmp: tmp,
        };
        // Administration commands never make a site: this one does.
        exits(&site.ferry(&["site", "init", "--mode", "local"]), 0);
        site
    }

    fn ferry(&self, args: &[&str]) -> Output {
        support::ferry_command()
            .args(args)
            .arg("--data")
            .arg(&self.data)
            .output()
            .expect("running ferry")
    }

    fn init(&self) -> Output {
        let helper = self.helper.to_str().unwrap();
        self.ferry(&["site", "init", "--mode", "host", "--helper-path", helper])
    }

    fn home(&self, person: &str) -> PathBuf {
        self.data.join("home").join(person)
    }

    /// `sh -c script` as `person`'s POSIX user, as they would at their shell; whether it
    /// succeeded.
    fn sh(&self, person: &str, script: &str) -> bool {
        let user = format!("fy_person_{person}");
        let out = run_as(&user, Path::new("/bin/sh"), &["-c", script]);
        if !out.status.success() {
            eprintln!("as {user}: `{script}`: {}", text(&out.stderr));
        }
        out.status.success()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Its exit status, asserted, and what it said on both streams.
#[track_caller]
fn exits(output: &Output, status: i32) -> (String, String) {
    let (out, err) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(status),
        "stdout: {out}\nstderr: {err}"
    );
    (out, err)
}

#[test]
fn a_persons_own_hand_breaks_nothing_for_the_others() {
    require_root_and_tools();
    build_helper();
    let mut guard = AccountsGuard::new(
        &[USER_A, USER_B, USER_C, USER_D],
        &[USER_A, USER_B, USER_C, USER_D, CIRCLE_GROUP],
        &["ferry", "fy_shared"],
    );
    let site = Site::new();
    for person in [A, B] {
        exits(&site.ferry(&["person", "add", person]), 0);
    }
    exits(&site.ferry(&["project", "add", A, "pa"]), 0);
    exits(&site.init(), 0);

    a_linked_public_leaves_only_its_person_out(&site);
    a_person_whose_own_setup_fails_is_finished_by_the_next_run(&site);

    let tokens = [A, B].map(|p| support::last_line(&site.ferry(&["token", "create", p])));
    let ferry = support::ferry_bin_at(&site.data.parent().unwrap().join("ferry-served"));
    let log = site.data.parent().unwrap().join("gateway.log");
    let gateway = HostGateway::start(&ferry, &site.data, &log, &[]);
    unreadable_entries_are_refused_as_permission_denied(&site, &gateway, &tokens[0]);
    a_public_moved_away_mid_upload_keeps_no_temporary(&site, &gateway, &tokens[0]);
    events_of_a_project_are_scoped(&site, &gateway, &tokens[0], &tokens[1]);

    drop(gateway);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log.contains("panicked"), "{log}");
    drop(site);
    let left = guard.remove_all();
    assert!(left.is_empty(), "could not remove: {left:?}");
    for user in [USER_A, USER_B, USER_C, USER_D] {
        assert!(passwd(user).is_none(), "{user} is left");
    }
}

/// Alice replaces her `public/` with a link to `/etc`, then to Bob's home: adding Carol
/// and setting the site up again still set up everyone else fully, name Alice's link by
/// its exact path with the fix, exit 3, and never change what the link points to.
fn a_linked_public_leaves_only_its_person_out(site: &Site) {
    let alice_public = site.home(A).join("public");
    let bob_home = site.home(B);
    assert!(site.sh(
        A,
        &format!("mv {0} {0}.mine && ln -s /etc {0}", alice_public.display())
    ));
    let etc_before = owner_mode(Path::new("/etc"));

    // A new person is set up fully; only Alice is left out.
    let (out, err) = exits(&site.ferry(&["person", "add", C]), SKIPPED);
    let token = out.lines().last().unwrap_or_default();
    assert!(
        token.starts_with("fy_"),
        "the token is the last line: {out}"
    );
    assert_left_out(&err, A, &alice_public, "/etc");
    assert_set_up(site, C);
    assert_eq!(owner_mode(Path::new("/etc")), etc_before);
    assert!(!Path::new("/etc/attachments").exists());

    // The whole site again, with the link now at Bob's home.
    let bob_before = [owner_mode(&bob_home), owner_mode(&bob_home.join("public"))];
    assert!(site.sh(
        A,
        &format!(
            "rm {0} && ln -s {1} {0}",
            alice_public.display(),
            bob_home.display()
        )
    ));
    let (out, err) = exits(&site.init(), SKIPPED);
    assert!(out.contains("2 of 3 person(s)"), "{out}");
    assert_left_out(&err, A, &alice_public, &bob_home.display().to_string());
    assert_eq!(
        [owner_mode(&bob_home), owner_mode(&bob_home.join("public"))],
        bob_before
    );
    for person in [B, C] {
        assert_set_up(site, person);
    }
    assert!(
        std::fs::symlink_metadata(&alice_public)
            .unwrap()
            .is_symlink()
    );
    // A circle is made and joined all the same.
    let (_, err) = exits(
        &site.ferry(&["circle", "add", CIRCLE, "--member", B]),
        SKIPPED,
    );
    assert_left_out(&err, A, &alice_public, &bob_home.display().to_string());
    assert!(host_support::groups_of(USER_B).contains(&CIRCLE_GROUP.to_owned()));
    // A project's public/ replaced by a file is named the same way.
    let project_public = site.home(A).join("projects/pa/public");
    assert!(site.sh(
        A,
        &format!(
            "rm {0} && mv {0}.mine {0} && mv {1} {1}.mine && echo no > {1}",
            alice_public.display(),
            project_public.display()
        )
    ));
    let (_, err) = exits(&site.init(), SKIPPED);
    assert_left_out(&err, A, &project_public, "a file");

    // Put right, Alice is set up again and the run succeeds.
    assert!(site.sh(
        A,
        &format!("rm {0} && mv {0}.mine {0}", project_public.display())
    ));
    let (out, err) = exits(&site.init(), 0);
    assert!(out.contains("3 of 3 person(s)"), "{out}");
    assert!(!err.contains("warning"), "{err}");
    assert_set_up(site, A);
}

/// Root's warning names the person, the exact path, what is there, and the fix.
#[track_caller]
fn assert_left_out(stderr: &str, person: &str, path: &Path, found: &str) {
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("person {person} was not set up")))
        .unwrap_or_else(|| panic!("no warning about {person}: {stderr}"));
    assert!(line.contains(&path.display().to_string()), "{line}");
    assert!(line.contains(found), "{line}");
    assert!(line.contains("ferry site init --mode host"), "{line}");
}

/// The person's user exists and their folders are theirs.
#[track_caller]
fn assert_set_up(site: &Site, person: &str) {
    let user = format!("fy_person_{person}");
    let ids = (uid_of(&user), gid_of(&user));
    assert_eq!(owner_mode(&site.home(person)), (ids.0, ids.1, 0o700));
    for rel in ["public", "public/attachments"] {
        owned_by(&site.home(person).join(rel), &user);
    }
    let artifacts = site
        .data
        .join("private/people")
        .join(person)
        .join("artifacts");
    assert_eq!(owner_mode(&artifacts), (ids.0, ids.1, 0o700));
}

/// A person whose own set-up fails (a user of that name exists with a system uid) gets no
/// token and is told how to finish; once fixed, the next run finishes them.
fn a_person_whose_own_setup_fails_is_finished_by_the_next_run(site: &Site) {
    run_ok(
        tool_path("useradd").to_str().unwrap(),
        &["--system", "--no-create-home", "--user-group", USER_D],
    );
    let (out, err) = exits(&site.ferry(&["person", "add", D]), 1);
    assert!(!out.contains("token"), "{out}");
    for hint in [
        "hfd",
        "100000",
        "ferry site init --mode host",
        "ferry token create hfd",
    ] {
        assert!(err.contains(hint), "{hint}: {err}");
    }
    // The others were set up all the same.
    assert_set_up(site, C);
    let (_, err) = exits(&site.init(), SKIPPED);
    assert!(err.contains("person hfd was not set up"), "{err}");

    run_ok(tool_path("userdel").to_str().unwrap(), &[USER_D]);
    // Its group too, if userdel left it.
    let _ = std::process::Command::new(tool_path("groupdel"))
        .arg(USER_D)
        .output();
    exits(&site.init(), 0);
    assert_set_up(site, D);
    let token = support::last_line(&site.ferry(&["token", "create", D]));
    assert!(token.starts_with("fy_"), "{token}");
}

fn request(
    gw: &HostGateway,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client()
        .request(method.parse().unwrap(), gw.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    json_answer(request.send().unwrap())
}

/// A file Alice made unreadable, a folder she made unreadable, and her `public/` made
/// unwritable: every member route answers a 4xx (permission_denied where the kernel
/// refused), never a 500, and nothing of hers is lost.
fn unreadable_entries_are_refused_as_permission_denied(site: &Site, gw: &HostGateway, token: &str) {
    let public = site.home(A).join("public");
    let p = public.display();
    assert!(site.sh(A, &format!("echo old > {p}/x.txt && chmod 000 {p}/x.txt")));
    // An upload over it replaces it, as every upload replaces its name (M-UP 5) and as
    // the person could at their shell: the folder is theirs and writable.
    let (status, body) = gw.upload(token, "x.txt", b"new", None);
    assert_eq!(status, 201, "{body}");
    assert_eq!(std::fs::read(public.join("x.txt")).unwrap(), b"new");
    owned_by(&public.join("x.txt"), USER_A);
    assert!(site.sh(A, &format!("echo old > {p}/y.txt && chmod 000 {p}/y.txt")));
    let (status, bytes) = gw.download(token, "public/y.txt", None);
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert_error(status, &body, 403, "permission_denied");

    // A folder its owner cannot read: listed (empty), every route into it refused.
    assert!(site.sh(
        A,
        &format!("mkdir {p}/locked && echo keep > {p}/locked/a.txt && chmod 000 {p}/locked")
    ));
    let (status, listing) = gw.list(token, None);
    assert_eq!(status, 200, "{listing}");
    assert!(
        listed_paths(&listing).contains(&"public/locked".to_owned()),
        "{listing}"
    );
    let refused = [
        ("GET", "/v1/files/content?path=public/locked/a.txt", None),
        (
            "POST",
            "/v1/files/move",
            Some(json!({"from": "public/locked/a.txt", "to": "public/a.txt"})),
        ),
        (
            "POST",
            "/v1/files/mkdir",
            Some(json!({"path": "public/locked/new"})),
        ),
        ("DELETE", "/v1/files?path=public/locked/a.txt", None),
        ("DELETE", "/v1/files?path=public/locked", None),
    ];
    for (method, path, body) in refused {
        let (status, answer) = request(gw, method, path, token, body);
        assert_error(status, &answer, 403, "permission_denied");
    }
    // The quota cannot be counted past it: the upload says so and what to do. (A delete
    // for good frees room, so the next upload counts again; one into the trash does not.)
    let forever = client()
        .delete(gw.url("/v1/files?path=public/y.txt&forever=true"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(forever.status().as_u16(), 204);
    let (status, body) = gw.upload(token, "z.txt", b"z", None);
    assert_error(status, &body, 403, "permission_denied");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("chmod"), "{message}");
    assert_eq!(
        std::fs::read(public.join("locked/a.txt")).unwrap(),
        b"keep\n"
    );
    assert!(site.sh(A, &format!("chmod 700 {p}/locked")));

    // public/ itself unwritable: nothing can be made in it.
    assert!(site.sh(A, &format!("chmod 500 {p}")));
    let (status, body) = gw.upload(token, "w.txt", b"w", None);
    assert_error(status, &body, 403, "permission_denied");
    let (status, body) = request(
        gw,
        "POST",
        "/v1/files/mkdir",
        token,
        Some(json!({"path": "public/n"})),
    );
    assert_error(status, &body, 403, "permission_denied");
    let (status, body) = request(
        gw,
        "POST",
        "/v1/files/move",
        token,
        Some(json!({"from": "public/x.txt", "to": "public/x2.txt"})),
    );
    assert_error(status, &body, 403, "permission_denied");
    assert!(site.sh(A, &format!("chmod 700 {p}")));
    assert!(public.join("x.txt").exists() && public.join("locked/a.txt").exists());
    assert!(temporaries_beneath(&site.home(A)).is_empty());
}

/// Alice moves her `public/` away while an upload streams into it: whether the body is
/// then finished or dropped, no temporary is left anywhere (not in the folder moved away
/// either), and the answer is never a 5xx.
fn a_public_moved_away_mid_upload_keeps_no_temporary(site: &Site, gw: &HostGateway, token: &str) {
    let home = site.home(A);
    let public = home.join("public");
    for (n, finish) in [true, false].into_iter().enumerate() {
        let name = format!("moving{n}.txt");
        let total: usize = 4 * 1024 * 1024;
        let (mut stream, tail) = raw_upload(gw, token, &name, total);
        let chunk = vec![b'm'; 1024 * 1024];
        stream.write_all(&chunk).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while temporaries_beneath(&public).is_empty() {
            assert!(Instant::now() < deadline, "the upload was never staged");
            std::thread::sleep(Duration::from_millis(20));
        }
        let moved = home.join(format!("public.old{n}"));
        assert!(site.sh(A, &format!("mv {} {}", public.display(), moved.display())));
        if finish {
            let sent = (1..total / chunk.len()).try_for_each(|_| stream.write_all(&chunk));
            if sent.is_ok() {
                let _ = stream.write_all(tail.as_bytes());
            }
            let answer = support::read_response(&mut stream);
            let status = support::status_of(&answer);
            assert!((200..500).contains(&status), "answered {status}: {answer}");
        } else {
            drop(stream);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !temporaries_beneath(&home).is_empty() {
            assert!(
                Instant::now() < deadline,
                "temporaries left: {:?}",
                temporaries_beneath(&home)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Whatever the answer, the folder moved away got no file.
        assert!(!moved.join(&name).exists());
    }
    let (status, body) = gw.upload(token, "after.txt", b"after", None);
    assert_eq!(status, 201, "{body}");
    owned_by(&public.join("after.txt"), USER_A);
}

/// `GET /v1/events?project=…` in host mode: an unknown project, or Bob's, is `404
/// unknown_project`; Alice's own scopes the stream to that project.
fn events_of_a_project_are_scoped(site: &Site, gw: &HostGateway, token: &str, bob: &str) {
    let (status, body) = request(gw, "POST", "/v1/projects", bob, Some(json!({"id": "bobs"})));
    assert_eq!(status, 201, "{body}");
    for project in ["nope", "bobs"] {
        let (status, body) = request(
            gw,
            "GET",
            &format!("/v1/events?project={project}"),
            token,
            None,
        );
        assert_error(status, &body, 404, "unknown_project");
    }
    let response = client()
        .get(gw.url("/v1/events?project=pa"))
        .bearer_auth(token)
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut events = SseStream::new(response);
    let (status, body) = gw.upload(token, "main.txt", b"main", None);
    assert_eq!(status, 201, "{body}");
    let (status, body) = gw.upload(
        token,
        "in-pa.txt",
        b"pa",
        Some(("pa", host_api::FieldOrder::FileFirst)),
    );
    assert_eq!(status, 201, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no files event of the project");
        if let Some(event) = events.next(left)
            && event.event == "files"
        {
            break event.json();
        }
    };
    assert_eq!(
        first,
        json!({"project": "pa", "paths": ["public/in-pa.txt"]})
    );
    assert!(site.home(A).join("public/main.txt").exists());
}
