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
//! a run).

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use support::mcp_stdio::McpProcess;
use support::{Server, client, create_project, get_json};

/// A small random generator (xorshift), so a failing run can be repeated from its seed.
struct Random(u64);

impl Random {
    fn seeded() -> Random {
        let seed = std::env::var("FERRY_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        println!("crash harness seed: {seed}");
        Random(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn kills() -> usize {
    std::env::var("FERRY_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

/// Version `k` of a file: a first line naming it, then 256 KiB of lines that do too, so
/// a file that is any mix of two versions, or cut short, is told from every version.
fn version(k: u64) -> Vec<u8> {
    let mut out = format!("version {k}\n").into_bytes();
    let line = format!("{k:015}\n");
    while out.len() < 256 * 1024 {
        out.extend_from_slice(line.as_bytes());
    }
    out
}

/// Whether `bytes` is exactly one version.
fn is_a_version(bytes: &[u8]) -> bool {
    let Some(first) = bytes.split(|b| *b == b'\n').next() else {
        return false;
    };
    std::str::from_utf8(first)
        .ok()
        .and_then(|l| l.strip_prefix("version "))
        .and_then(|k| k.parse().ok())
        .is_some_and(|k| version(k) == bytes)
}

/// The temporaries beneath `dir`, at any depth.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            found.extend(temporaries(&path));
        } else if entry
            .file_name()
            .to_string_lossy()
            .starts_with(ferry_fs::TEMP_PREFIX)
        {
            found.push(path);
        }
    }
    found
}

/// Every name a listing shows, at any depth.
fn listed_names(listing: &Value, out: &mut Vec<String>) {
    for entry in listing["entries"].as_array().into_iter().flatten() {
        out.push(entry["path"].as_str().unwrap_or_default().to_owned());
        listed_names(entry, out);
    }
}

/// Sets every temporary beneath `dir` to look older than the sweep's threshold.
fn age(dir: &Path) {
    let past = SystemTime::now() - ferry_site::TEMPORARY_STALE - Duration::from_secs(60);
    for path in temporaries(dir) {
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_modified(past).unwrap();
    }
}

/// The temporaries left beneath `dir` after the leftovers are aged past the sweep's
/// threshold and the gateway starts again.
fn swept_at_next_start(server: &mut Server, dir: &Path) -> Vec<PathBuf> {
    age(dir);
    server.restart();
    swept(dir)
}

/// Prints what one part did, then holds it to the invariants.
fn report(
    part: &str,
    what: &str,
    completed: usize,
    left: usize,
    remaining: &[PathBuf],
    violations: &[String],
) {
    println!(
        "{part}: {} kills, {completed} {what} between them, {left} temporaries left behind \
         by them all, {} after the sweep, {} violations",
        kills(),
        remaining.len(),
        violations.len()
    );
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(remaining.is_empty(), "{remaining:?}");
    assert!(
        completed > 0,
        "nothing ever completed: the harness tested nothing"
    );
}

/// Waits (bounded) until no temporary is left beneath `dir`; the ones left.
fn swept(dir: &Path) -> Vec<PathBuf> {
    for _ in 0..200 {
        if temporaries(dir).is_empty() {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    temporaries(dir)
}

#[test]
fn uploads_killed_at_random_points_leave_the_old_file_or_the_new_one() {
    let mut random = Random::seeded();
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
    let (mut violations, mut completed, mut left) = (Vec::new(), 0, 0);
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
        stop.store(true, Ordering::Relaxed);
        for writer in writers {
            writer.join().unwrap();
        }
        completed += placed.load(Ordering::Relaxed);
        server.restart();

        for (name, project, public) in &targets {
            if let Ok(bytes) = std::fs::read(public.join(name))
                && !is_a_version(&bytes)
            {
                violations.push(format!("kill {kill}: {name} is no whole version"));
            }
            let query = project.map_or(String::new(), |p| format!("?project={p}"));
            let (status, listing) =
                get_json(&server.url(&format!("/v1/files{query}")), &server.token);
            assert_eq!(status, 200, "{listing}");
            let mut names = Vec::new();
            listed_names(&listing, &mut names);
            if names.iter().any(|n| n.contains(ferry_fs::TEMP_PREFIX)) {
                violations.push(format!(
                    "kill {kill}: a listing shows a temporary: {names:?}"
                ));
            }
        }
        left = temporaries(&home).len();
    }
    let remaining = swept_at_next_start(&mut server, &home);
    report(
        "uploads",
        "uploads placed",
        completed,
        left,
        &remaining,
        &violations,
    );
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
    let mut random = Random::seeded();
    let server = Server::start();
    let home = server.home("me");
    let filler = "unchanged line\n".repeat(4096);
    for name in ["a.txt", "b.txt"] {
        std::fs::write(home.join(name), format!("counter: 0\n{filler}")).unwrap();
    }
    let next = AtomicUsize::new(0);
    let (mut violations, mut completed, mut left) = (Vec::new(), 0usize, 0);
    for kill in 0..kills() {
        let mut mcp = McpProcess::start(&server.data);
        let pid = mcp.child.id();
        let delay = Duration::from_millis(random.below(300));
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        });
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
            completed += 2;
        }
        let _ = mcp.child.wait();
        killer.join().unwrap();

        match std::fs::read(home.join("notes.txt")) {
            Ok(bytes) if !is_a_version(&bytes) => {
                violations.push(format!("kill {kill}: notes.txt is no whole version"))
            }
            _ => {}
        }
        let (a, b) = (counter(&home.join("a.txt")), counter(&home.join("b.txt")));
        if a.is_none() || a != b {
            violations.push(format!("kill {kill}: a.txt at {a:?} but b.txt at {b:?}"));
            // Start the next round level again, so one violation is counted once.
            let level = a.max(b).unwrap_or(0);
            for name in ["a.txt", "b.txt"] {
                std::fs::write(home.join(name), format!("counter: {level}\n{filler}")).unwrap();
            }
        }
        left = temporaries(&home).len();
    }
    let (status, listing) = get_json(&server.url("/v1/files"), &server.token);
    assert_eq!(status, 200, "{listing}");
    let mut names = Vec::new();
    listed_names(&listing, &mut names);
    assert!(
        !names.iter().any(|n| n.contains(ferry_fs::TEMP_PREFIX)),
        "{names:?}"
    );
    let mut server = server;
    let remaining = swept_at_next_start(&mut server, &home);
    report(
        "tool writes",
        "writes and edits completed",
        completed,
        left,
        &remaining,
        &violations,
    );
}
