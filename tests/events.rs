//! The live events' poll of `public/attachments/`, end to end over HTTP (spec members
//! M-WEB): a folder that cannot be read is left out on its own, and many files cost the
//! gateway little while nothing changes.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{
    Peer, Reply, Server, SseStream, assert_error, client, create_project, json_answer, post_json,
    upload, write_file,
};

/// Files written straight to disk are seen within a poll (400 ms) when their folder moved;
/// this leaves room for a loaded machine.
const POLL_WAIT: Duration = Duration::from_millis(1500);
/// A folder of up to 10,000 files is read in full every 0.7 s whether it moved or not.
const FULL_WAIT: Duration = Duration::from_millis(2500);
/// A folder of 50,000 files is read in full every 3.5 s, moved or not; of 50,001, every
/// 4.2 s.
const BIG_WAIT: Duration = Duration::from_secs(7);

fn attachments_dir(server: &Server, person: &str, project: Option<&str>) -> PathBuf {
    server
        .workspace(person, project)
        .join("public")
        .join("attachments")
}

fn open_events(server: &Server) -> SseStream {
    let response = client()
        .get(server.url("/v1/events"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    SseStream::new(response)
}

/// `GET /v1/events?project=…`: the open stream, or the refusal's status and body.
fn open_project_events(
    server: &Server,
    token: &str,
    project: &str,
) -> Result<SseStream, (u16, Value)> {
    let response = client()
        .get(server.url("/v1/events"))
        .query(&[("project", project)])
        .bearer_auth(token)
        .send()
        .unwrap();
    if response.status().as_u16() == 200 {
        Ok(SseStream::new(response))
    } else {
        Err(json_answer(response))
    }
}

/// The next `files` event within `wait`; `None` when none came.
fn next_files(stream: &mut SseStream, wait: Duration) -> Option<Value> {
    let deadline = Instant::now() + wait;
    loop {
        let event = stream.next(deadline.saturating_duration_since(Instant::now()))?;
        if event.event == "files" {
            return Some(event.json());
        }
    }
}

/// The next `files` event, within `wait`, announces just `path` in `project`.
fn expect(stream: &mut SseStream, wait: Duration, project: Option<&str>, path: &str) {
    let want = json!({ "project": project, "paths": [path] });
    let got = next_files(stream, wait).unwrap_or_else(|| panic!("no event {want} in {wait:?}"));
    assert_eq!(got, want);
}

/// CPU time (user + system) the process has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn events_announce_the_main_attachments_while_a_project_public_is_a_link() {
    let server = Server::start();
    let harness = server.create_token("me", "harness");
    create_project(&server, &server.token, "p1");
    let peer = Peer::start(|_| Reply::ok("delivered"));
    // The agent replaces the project's public/ by a link to a folder elsewhere.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(elsewhere.path().join("attachments")).unwrap();
    let public = server.workspace("me", Some("p1")).join("public");
    std::fs::remove_dir_all(&public).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), &public).unwrap();

    let mut stream = open_events(&server);
    write_file(
        &attachments_dir(&server, "me", None).join("ondisk.txt"),
        b"written by the agent",
    );
    expect(
        &mut stream,
        POLL_WAIT,
        None,
        "public/attachments/ondisk.txt",
    );
    let (status, body) = post_json(
        &server,
        &harness,
        "/v1/deliveries",
        &json!({ "url": peer.url("/d.txt") }),
    );
    assert_eq!(status, 201, "{body}");
    expect(&mut stream, POLL_WAIT, None, "public/attachments/d.txt");

    // The linked folder is not followed: what is written behind the link is never news.
    write_file(&elsewhere.path().join("attachments/behind.txt"), b"x");
    write_file(
        &attachments_dir(&server, "me", None).join("later.txt"),
        b"y",
    );
    expect(&mut stream, POLL_WAIT, None, "public/attachments/later.txt");
    assert_eq!(next_files(&mut stream, FULL_WAIT), None);
    // Logged when it starts failing, not at every poll.
    let log = server.log();
    assert_eq!(
        log.matches("live events leave out a folder").count(),
        1,
        "{log}"
    );
}

#[test]
fn events_over_many_unchanged_files_cost_little_and_a_new_one_is_still_announced() {
    const FILES: usize = 50_000;
    let server = Server::start();
    let attachments = attachments_dir(&server, "me", None);
    std::fs::create_dir_all(&attachments).unwrap();
    for i in 0..FILES {
        std::fs::File::create(attachments.join(format!("f{i}"))).unwrap();
    }
    let mut stream = open_events(&server);
    // Settle past the first readings, then measure two full readings' worth of polling.
    std::thread::sleep(Duration::from_millis(800));
    let ticks_per_second = 100; // USER_HZ on Linux
    let (before, started) = (cpu_ticks(server.pid()), Instant::now());
    std::thread::sleep(Duration::from_secs(8));
    let used = (cpu_ticks(server.pid()) - before) as f64 / ticks_per_second as f64;
    let share = used / started.elapsed().as_secs_f64();
    eprintln!(
        "gateway CPU over {FILES} files: {:.1}% of a core",
        share * 100.0
    );
    assert!(share < 0.15, "{:.1}% of a core", share * 100.0);

    write_file(&attachments.join("new.txt"), b"new");
    expect(&mut stream, BIG_WAIT, None, "public/attachments/new.txt");
    // A write into a file already there leaves the folder's mtime alone; it is found by
    // the full reading.
    write_file(&attachments.join("f7"), b"changed in place");
    expect(&mut stream, BIG_WAIT, None, "public/attachments/f7");
}

#[test]
fn events_of_a_project_are_scoped_to_it_and_an_unknown_project_is_not_found() {
    let server = Server::start();
    let bob = server.add_person("bob");
    create_project(&server, &server.token, "p1");
    create_project(&server, &bob, "bobs");

    // A project no one has and one of another person are not found; names no project
    // can have are refused as the listing refuses them.
    for project in ["nope", "bobs", "../p1", "", "p1/..", "P1"] {
        let Err((status, body)) = open_project_events(&server, &server.token, project) else {
            panic!("events of {project:?} were opened");
        };
        let listing = client()
            .get(server.url("/v1/files"))
            .query(&[("project", project)])
            .bearer_auth(&server.token)
            .send()
            .unwrap();
        let (want_status, want) = json_answer(listing);
        assert_error(status, &body, want_status, support::error_code(&want));
        if ["nope", "bobs"].contains(&project) {
            assert_error(status, &body, 404, "unknown_project");
        }
    }
    // Another parameter is refused, as on the listing.
    let response = client()
        .get(server.url("/v1/events"))
        .query(&[("projects", "p1")])
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    let (status, body) = json_answer(response);
    assert_error(status, &body, 400, "bad_query");

    // A known project: its changes come, the main workspace's do not.
    let mut scoped = open_project_events(&server, &server.token, "p1").unwrap();
    let mut all = open_events(&server);
    let (status, body) = upload(&server, &server.token, "main.txt", b"main", None);
    assert_eq!(status, 201, "{body}");
    let (status, body) = upload(&server, &server.token, "in-p1.txt", b"p1", Some("p1"));
    assert_eq!(status, 201, "{body}");
    expect(&mut all, POLL_WAIT, None, "public/main.txt");
    expect(&mut all, POLL_WAIT, Some("p1"), "public/in-p1.txt");
    expect(&mut scoped, POLL_WAIT, Some("p1"), "public/in-p1.txt");
    write_file(
        &attachments_dir(&server, "me", None).join("ondisk.txt"),
        b"main again",
    );
    expect(&mut all, POLL_WAIT, None, "public/attachments/ondisk.txt");
    assert_eq!(next_files(&mut scoped, FULL_WAIT), None);
}
