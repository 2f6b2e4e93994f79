//! C-ATOMIC under SIGKILL (issue 15's crash harness): `ferry serve` and `ferry mcp` are
//! killed at random points while they write, hundreds of times, and after each kill and
//! restart the invariants are checked:
//!
//! - every file is one whole version the test wrote, never a mix and never partial;
//! - a `file_edit` of two files landed in both or in neither;
//! - no listing shows a temporary;
//! - what the killed writers left is removed at a start once it is stale (the last
//!   start, with the leftovers aged past [`ferry_site::TEMPORARY_STALE`], leaves none).
//!
//! `FERRY_CRASH_KILLS` sets the kills of each part (default 60; `.ci/run` keeps the
//! default, a longer run is for the report). Each part prints its kills, the writes
//! that completed between them, the temporaries left, and the violations, which must
//! be 0. The random points come from a seed printed first (`FERRY_CRASH_SEED` repeats
//! a run). `tests/crash_faces.rs` kills the other writers the same way; what both
//! share is in `tests/support/crash.rs`.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::crash::{
    Random, Report, is_a_version, kill_after, kills, lists_a_temporary, swept_at_next_start,
    temporaries, version,
};
use support::mcp_stdio::McpProcess;
use support::{Server, client, create_project, get_json};

#[test]
fn uploads_killed_at_random_points_leave_the_old_file_or_the_new_one() {
    let mut random = Random::seeded("uploads");
    let mut server = Server::start();
    create_project(&server, &server.token, "plans");
    let targets = [
        (
            "report.txt",
            None,
            server.workspace("me", None).join("public"),
        ),
        (
            "plan.txt",
            Some("plans"),
            server.workspace("me", Some("plans")).join("public"),
        ),
    ];
    let home = server.home("me");
    let next = Arc::new(AtomicUsize::new(0));
    let mut report = Report::new("uploads", "uploads placed");
    let mut left = 0;
    for kill in 0..kills() {
        // Four writers, two on each file, each sending new versions as fast as it can.
        let stop = Arc::new(AtomicBool::new(false));
        let placed = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..4)
            .map(|i| {
                let (name, project, _) = targets[i % 2].clone();
                let (stop, placed, next) = (stop.clone(), placed.clone(), next.clone());
                let (base, token) = (server.url(""), server.token.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let k = next.fetch_add(1, Ordering::Relaxed) as u64;
                        let mut form = reqwest::blocking::multipart::Form::new().part(
                            "file",
                            reqwest::blocking::multipart::Part::bytes(version(k)).file_name(name),
                        );
                        if let Some(project) = project {
                            form = form.text("project", project);
                        }
                        match client()
                            .post(format!("{base}/v1/media"))
                            .bearer_auth(&token)
                            .multipart(form)
                            .send()
                        {
                            Ok(r) if r.status().as_u16() == 201 => {
                                placed.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(random.below(300)));
        server.kill();
        report.kills += 1;
        stop.store(true, Ordering::Relaxed);
        for writer in writers {
            writer.join().unwrap();
        }
        report.completed += placed.load(Ordering::Relaxed);
        server.restart();

        for (name, project, public) in &targets {
            if let Ok(bytes) = std::fs::read(public.join(name))
                && !is_a_version(&bytes)
            {
                report.violation(kill, format!("{name} is no whole version"));
            }
            let query = project.map_or(String::new(), |p| format!("?project={p}"));
            let (status, listing) =
                get_json(&server.url(&format!("/v1/files{query}")), &server.token);
            assert_eq!(status, 200, "{listing}");
            if let Some(names) = lists_a_temporary(&listing) {
                report.violation(kill, format!("a listing shows a temporary: {names:?}"));
            }
        }
        left = temporaries(&home).len();
    }
    let remaining = swept_at_next_start(&mut server, &home);
    report.temporaries(left, remaining);
    report.finish();
}

/// The counter line of the two files one `file_edit` changes together.
fn counter(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("counter: "))
        .and_then(|n| n.parse().ok())
}

#[test]
fn tool_writes_killed_at_random_points_land_whole_and_edits_all_or_none() {
    let mut random = Random::seeded("tool writes");
    let server = Server::start();
    let home = server.home("me");
    let filler = "unchanged line\n".repeat(4096);
    for name in ["a.txt", "b.txt"] {
        std::fs::write(home.join(name), format!("counter: 0\n{filler}")).unwrap();
    }
    let next = AtomicUsize::new(0);
    let mut report = Report::new("tool writes", "writes and edits completed");
    let mut left = 0;
    // Each kill's invariants are checked once the next `ferry mcp` has started: a
    // `file_edit` killed between its files is undone from its journal as that process
    // opens its toolbox, before it answers `initialize`.
    let check = |kill: usize, report: &mut Report| {
        match std::fs::read(home.join("notes.txt")) {
            Ok(bytes) if !is_a_version(&bytes) => {
                report.violation(kill, "notes.txt is no whole version")
            }
            _ => {}
        }
        let (a, b) = (counter(&home.join("a.txt")), counter(&home.join("b.txt")));
        if a.is_none() || a != b {
            report.violation(kill, format!("a.txt at {a:?} but b.txt at {b:?}"));
            // Start the next round level again, so one violation is counted once.
            let level = a.max(b).unwrap_or(0);
            for name in ["a.txt", "b.txt"] {
                std::fs::write(home.join(name), format!("counter: {level}\n{filler}")).unwrap();
            }
        }
    };
    for kill in 0..kills() {
        let mut mcp = McpProcess::start(&server.data);
        if kill > 0 {
            check(kill - 1, &mut report);
        }
        let killer = kill_after(mcp.child.id(), Duration::from_millis(random.below(300)));
        report.kills += 1;
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed) as u64;
            let written = mcp.call(
                "file_write",
                json!({"path": "notes.txt", "content": String::from_utf8(version(k)).unwrap()}),
            );
            let Some(written) = written else { break };
            assert_ne!(written["isError"], true, "{written}");
            // Both files move on by one, or neither does.
            let Some(n) = counter(&home.join("a.txt")) else {
                break;
            };
            let edits: Vec<Value> = ["a.txt", "b.txt"]
                .iter()
                .map(|p| {
                    json!({"path": p, "oldText": format!("counter: {n}\n"),
                           "newText": format!("counter: {}\n", n + 1)})
                })
                .collect();
            let Some(edited) = mcp.call("file_edit", json!({"edits": edits})) else {
                break;
            };
            if edited["isError"] == true {
                // Only after a kill left the two apart, which the check below reports.
                break;
            }
            report.completed += 2;
        }
        let _ = mcp.child.wait();
        killer.join().unwrap();
        left = temporaries(&home).len();
    }
    let mut last = McpProcess::start(&server.data);
    check(report.kills - 1, &mut report);
    let _ = last.child.kill();
    let _ = last.child.wait();
    let (status, listing) = get_json(&server.url("/v1/files"), &server.token);
    assert_eq!(status, 200, "{listing}");
    assert!(lists_a_temporary(&listing).is_none(), "{listing}");
    let mut server = server;
    let remaining = swept_at_next_start(&mut server, &home);
    report.temporaries(left, remaining);
    report.finish();
}
