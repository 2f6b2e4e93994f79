//! C-ATOMIC under SIGKILL at the kill points `tests/crash_safety.rs` does not cover
//! (issue 15's crash harness, second half): the writer is killed at a random point, many
//! times, and after each kill and restart the invariants are checked.
//!
//! - **Deliveries** (`POST /v1/deliveries` fetching from a test peer, `ferry serve`
//!   killed; `file_deliver`, `ferry mcp` killed): each attachment is one whole version,
//!   no listing shows a temporary, every record (the audit trail for deliveries by URL,
//!   the artifact manifest for `file_deliver`) names a whole version that landed, and
//!   every delivery that was answered is recorded.
//! - **The legacy migration** (spec M-MIGRATE, `ferry serve` killed while it merges a
//!   large `uploads/` into `public/`): the next access completes it, no file is lost or
//!   doubled, the newer file wins each collision, and `uploads/` is gone.
//! - **`dir_fetch` extraction** (a real `ferry node run`, `ferry serve` killed): a
//!   fetched tree is whole or absent, never half there; no media record lacks its blob.
//! - **`file_push` on the node** (`ferry node run` killed while it writes): the node's
//!   file is its old or its new version, and no temporary is left once the node has
//!   started again.
//! - **A herd assign** (`ferry serve` killed during a `subagent` assign at `/mcp`, the
//!   worker killed during one, or the `ferry herd assign` process itself killed): no
//!   envelope is lost, doubled or partial, and the herd takes the next assign.
//! - **A metadata migration** (`ferry site migrate-metadata --to postgres://…` killed):
//!   PostgreSQL holds all of the copy or none of it, the SQLite site is refused only once
//!   the copy is whole, and running it again completes it with every count matching.
//!
//! `FERRY_CRASH_KILLS` sets the kills of each part (default 60), `FERRY_CRASH_SEED`
//! repeats a run. Each part prints its kills, what completed between them and its
//! violations, which must be 0. The metadata part needs PostgreSQL
//! (`eval "$(.ci/postgres start)"`).

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use ferry_sql::{Exec, params};
use serde_json::{Value, json};
use support::crash::{
    Random, Report, Versions, age, age_temporaries, kill_after, kills, left_after,
    lists_a_temporary, named_beneath, swept, swept_at_next_start, temporaries, version_of,
    version_sized,
};
use support::mcp_stdio::McpProcess;
use support::node::{NodeProcess, wait_for_node};
use support::{NOBODY, Options, Peer, Reply, Server, client, create_project, get_json};

/// No per-person rate: the harness sends as fast as it can.
const NO_RATES: &str = "[limits]\nuploads_per_minute = 0\ndeliveries_per_minute = 0\n\
                        tool_calls_per_minute = 0\n";

/// How long an operation took, measured once without a kill: the random points of a
/// part fall within it (and a little past it), so that every step of the operation is
/// hit, not only its start.
fn span_of(took: Duration) -> Duration {
    took.mul_f64(1.3).max(Duration::from_millis(20))
}

// ---------------------------------------------------------------------------------------
// MCP at /mcp, spoken by hand: a session that tells a gateway killed midway from an answer
// ---------------------------------------------------------------------------------------

/// An MCP session at a gateway's `/mcp` (streamable HTTP), whose calls give `None` once
/// the gateway is gone.
struct McpHttp {
    url: String,
    token: String,
    session: Option<String>,
    next: u64,
}

impl McpHttp {
    /// Opens a session (initialize, then initialized); `None` if the gateway is gone.
    fn open(server: &Server, token: &str) -> Option<McpHttp> {
        let mut mcp = McpHttp {
            url: server.url("/mcp"),
            token: token.to_owned(),
            session: None,
            next: 0,
        };
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "crash-harness", "version": "1"}}),
        )?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let status = mcp.post(&initialized)?.status().as_u16();
        (status == 202).then_some(mcp)
    }

    fn post(&self, body: &Value) -> Option<reqwest::blocking::Response> {
        let mut request = client()
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if let Some(session) = &self.session {
            request = request.header("Mcp-Session-Id", session);
        }
        request.send().ok()
    }

    /// The answer to one request; `None` once the gateway is gone.
    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        self.next += 1;
        let id = self.next;
        let response =
            self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        assert_eq!(response.status().as_u16(), 200, "{method}");
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.to_str().unwrap().to_owned());
        }
        let json_answer = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
        if json_answer {
            return response.json().ok();
        }
        // Server-sent events: the message whose id is this request's.
        let mut reader = BufReader::new(response);
        let mut data = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(more) = line.strip_prefix("data:") {
                data.push_str(more.trim_start());
            } else if line.is_empty() && !data.is_empty() {
                if let Ok(message) = serde_json::from_str::<Value>(&data)
                    && message["id"] == id
                {
                    return Some(message);
                }
                data.clear();
            }
        }
    }

    /// A tool call's result; `None` once the gateway is gone.
    fn call(&mut self, tool: &str, args: Value) -> Option<Value> {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
            .map(|m| m["result"].clone())
    }
}

impl Drop for McpHttp {
    /// Ends the session (a token holds only so many at once); a gateway gone ended it.
    fn drop(&mut self) {
        if let Some(session) = &self.session {
            let _ = client()
                .delete(&self.url)
                .bearer_auth(&self.token)
                .header("Mcp-Session-Id", session)
                .header("MCP-Protocol-Version", "2025-06-18")
                .timeout(Duration::from_secs(5))
                .send();
        }
    }
}

/// A tool result's text.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

/// Every regular file below `dir`, by its path relative to `dir`, with its bytes.
fn files_below(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    support::tree(dir)
        .into_iter()
        .filter(|rel| {
            std::fs::symlink_metadata(dir.join(rel)).is_ok_and(|m| m.file_type().is_file())
        })
        .map(|rel| {
            let bytes = std::fs::read(dir.join(&rel)).unwrap_or_default();
            (rel, bytes)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. Deliveries
// ---------------------------------------------------------------------------------------

/// The size of a delivered version: small, so its hash is cheap; the peer sends it in
/// pieces, so the kill lands while bytes stream too.
const DELIVERY_BYTES: usize = 64 * 1024;

#[test]
fn deliveries_by_url_killed_at_random_points_land_whole_and_recorded() {
    let mut random = Random::seeded("deliveries by URL");
    let mut server = Server::start_with(Options {
        config_toml: Some(NO_RATES.to_owned()),
        ..Options::default()
    });
    create_project(&server, &server.token, "plans");
    let harness = server.create_token("me", "harness");
    // Version k of any name at /v/<k>/<name>, in eight pieces a few milliseconds apart.
    let peer = Peer::start(|path| {
        let k = path
            .split('/')
            .nth(2)
            .and_then(|k| k.parse().ok())
            .unwrap_or(0);
        let bytes = version_sized(k, DELIVERY_BYTES);
        Reply {
            status: 200,
            headers: Vec::new(),
            chunks: bytes
                .chunks(DELIVERY_BYTES / 8)
                .map(<[u8]>::to_vec)
                .collect(),
            chunk_delay: Duration::from_millis(3),
            content_length: true,
        }
    });
    let targets = [
        ("report.txt", None, server.workspace("me", None)),
        (
            "plan.txt",
            Some("plans"),
            server.workspace("me", Some("plans")),
        ),
    ];
    let home = server.home("me");
    let versions = Arc::new(Mutex::new(Versions::default()));
    let answered = Arc::new(Mutex::new(Vec::<String>::new()));
    let next = Arc::new(AtomicUsize::new(0));
    let mut report = Report::new("deliveries by URL", "deliveries answered");
    let (mut left, mut unrecorded) = (0, 0);
    for kill in 0..kills() {
        // Four deliverers, two on each attachment, each as fast as it can.
        let stop = Arc::new(AtomicBool::new(false));
        let deliverers: Vec<_> = (0..4)
            .map(|i| {
                let (name, project, _) = targets[i % 2].clone();
                let (stop, next, versions, answered) = (
                    stop.clone(),
                    next.clone(),
                    versions.clone(),
                    answered.clone(),
                );
                let (url, harness, base) = (
                    server.url("/v1/deliveries"),
                    harness.clone(),
                    peer.base.clone(),
                );
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let k = next.fetch_add(1, Ordering::Relaxed) as u64;
                        versions.lock().unwrap().make(k, DELIVERY_BYTES);
                        let body =
                            json!({"url": format!("{base}/v/{k}/{name}"), "project": project});
                        match client().post(&url).bearer_auth(&harness).json(&body).send() {
                            Ok(r) if r.status().as_u16() == 201 => {
                                let Ok(answer) = r.json::<Value>() else { break };
                                let sha = answer["sha256"].as_str().unwrap_or_default();
                                answered.lock().unwrap().push(sha.to_owned());
                            }
                            Ok(r) => {
                                let status = r.status().as_u16();
                                let text = r.text().unwrap_or_default();
                                panic!("a delivery answered {status}: {text}");
                            }
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
        for deliverer in deliverers {
            deliverer.join().unwrap();
        }
        server.restart();

        let versions = versions.lock().unwrap();
        for (name, project, workspace) in &targets {
            let at = workspace.join("public/attachments").join(name);
            if let Ok(bytes) = std::fs::read(&at)
                && version_of(&bytes).is_none()
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
        // The audit trail records every delivery: each record names a whole version, and
        // each delivery answered is recorded.
        let records: Vec<(String, Option<i64>, Option<String>)> = server
            .metadata_db()
            .rows(
                "SELECT path, size, sha256 FROM audit WHERE action = 'delivery' \
                 AND outcome = 'ok'",
                params![],
                |r| Ok::<_, ferry_sql::Error>((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let recorded: BTreeSet<String> = records
            .iter()
            .filter_map(|(_, _, sha)| sha.clone())
            .collect();
        for (path, size, sha) in &records {
            let whole = sha.as_deref().and_then(|s| versions.by_sha256(s)).is_some()
                && *size == Some(DELIVERY_BYTES as i64);
            if !whole {
                report.violation(kill, format!("the record of {path} names no whole version"));
            }
        }
        let answered = std::mem::take(&mut *answered.lock().unwrap());
        report.completed += answered.len();
        for sha in answered.iter().filter(|sha| !recorded.contains(*sha)) {
            report.violation(kill, format!("a delivery answered ({sha}) is not recorded"));
        }
        // A delivery placed by a gateway killed before its record: the call unanswered.
        for (name, _, workspace) in &targets {
            let at = workspace.join("public/attachments").join(name);
            if let Ok(bytes) = std::fs::read(&at)
                && !recorded.contains(&support::sha256_hex(&bytes))
            {
                unrecorded += 1;
            }
        }
        left = temporaries(&home).len();
    }
    report.fact(format!(
        "{unrecorded} times an attachment was a delivery killed between its placing and its \
         record (the call unanswered)"
    ));
    let remaining = swept_at_next_start(&mut server, &home);
    report.temporaries(left, remaining);
    report.finish();
}

#[test]
fn file_deliver_killed_at_random_points_lands_whole_and_recorded() {
    let mut random = Random::seeded("file_deliver");
    let mut server = Server::start_with(Options {
        config_toml: Some(NO_RATES.to_owned()),
        ..Options::default()
    });
    let home = server.home("me");
    let (out, staging) = (home.join("out"), home.join("staging"));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&staging).unwrap();
    let attachment = home.join("public/attachments/report.txt");
    let mut versions = Versions::default();
    let mut next = 0u64;
    let (mut report, mut left, mut unrecorded) =
        (Report::new("file_deliver", "deliveries answered"), 0, 0);
    for kill in 0..kills() {
        let mut mcp = McpProcess::start(&server.data);
        let killer = kill_after(mcp.child.id(), random.delay(Duration::from_millis(300)));
        report.kills += 1;
        let mut answered = Vec::new();
        loop {
            // The finished file, put in place whole by the test as the agent's work would.
            let k = next;
            next += 1;
            std::fs::write(staging.join("report.txt"), versions.make(k, 256 * 1024)).unwrap();
            std::fs::rename(staging.join("report.txt"), out.join("report.txt")).unwrap();
            let Some(delivered) = mcp.call("file_deliver", json!({"paths": ["out/report.txt"]}))
            else {
                break;
            };
            assert_ne!(delivered["isError"], true, "{delivered}");
            answered.push(k);
        }
        let _ = mcp.child.wait();
        killer.join().unwrap();
        report.completed += answered.len();

        let on_disk = std::fs::read(&attachment).ok().map(|b| version_of(&b));
        if let Some(None) = on_disk {
            report.violation(kill, "the attachment is no whole version");
        }
        let records: Vec<(i64, String, String)> = server
            .metadata_db()
            .rows(
                "SELECT size, sha256, delivered_as FROM artifacts WHERE kind = 'delivery' \
                 ORDER BY id",
                params![],
                |r| Ok::<_, ferry_sql::Error>((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let mut recorded = Vec::new();
        for (size, sha, delivered_as) in &records {
            match versions.by_sha256(sha) {
                Some(k)
                    if *size == 256 * 1024 && delivered_as == "public/attachments/report.txt" =>
                {
                    recorded.push(k)
                }
                _ => report.violation(kill, format!("a record names no whole version: {sha}")),
            }
        }
        // A record never runs ahead of the file: what it names landed (the file may be
        // one delivery further, placed by a process killed before it wrote the record).
        let on_disk = on_disk.flatten();
        match (recorded.last(), on_disk) {
            (Some(r), Some(f)) if *r > f => {
                report.violation(kill, format!("recorded version {r}, but the file is {f}"))
            }
            (Some(r), None) => report.violation(kill, format!("version {r} recorded, no file")),
            (r, Some(f)) if r.is_none_or(|r| *r < f) => unrecorded += 1,
            _ => {}
        }
        for k in answered.iter().filter(|k| !recorded.contains(k)) {
            report.violation(
                kill,
                format!("delivery of version {k} answered, not recorded"),
            );
        }
        let (status, listing) = get_json(&server.url("/v1/files"), &server.token);
        assert_eq!(status, 200, "{listing}");
        if let Some(names) = lists_a_temporary(&listing) {
            report.violation(kill, format!("a listing shows a temporary: {names:?}"));
        }
        left = temporaries(&home).len();
    }
    report.fact(format!(
        "{unrecorded} kills fell between a copy and its record (the file one delivery ahead of \
         the manifest, the call unanswered)"
    ));
    let remaining = swept_at_next_start(&mut server, &home);
    report.temporaries(left, remaining);
    report.finish();
}

// ---------------------------------------------------------------------------------------
// 2. The legacy migration
// ---------------------------------------------------------------------------------------

/// Files only in the legacy folder, each round (in folders both have).
const LEGACY_FILES: usize = 240;
/// Files in both folders, each round (half won by each side).
const LEGACY_CLASHES: usize = 100;

/// Writes the files of a legacy tree, making each folder once.
#[derive(Default)]
struct Planter(BTreeSet<PathBuf>);

impl Planter {
    /// Writes `text` at `path`, its mtime `secs` after a fixed epoch when given.
    fn put(&mut self, path: &Path, text: &str, secs: Option<u64>) {
        let parent = path.parent().unwrap();
        if self.0.insert(parent.to_owned()) {
            std::fs::create_dir_all(parent).unwrap();
        }
        let mut file = std::fs::File::create(path).unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        if let Some(secs) = secs {
            file.set_modified(UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs))
                .unwrap();
        }
    }
}

/// Plants round `round`'s legacy `uploads/` in `home` (and, with `both`, a `public/` it
/// collides with), and gives what `public/` must then hold once migrated.
fn plant_legacy(home: &Path, round: usize, both: bool) -> BTreeMap<String, Vec<u8>> {
    let (public, legacy) = (home.join("public"), home.join("uploads"));
    let _ = std::fs::remove_dir_all(&public);
    let mut planter = Planter::default();
    let mut want = BTreeMap::new();
    let mut expect = |rel: &str, text: &str| {
        want.insert(rel.to_owned(), text.as_bytes().to_vec());
    };
    // In folders both trees have, so that each moves on its own, not with its folder.
    for i in 0..LEGACY_FILES {
        let rel = format!("only/d{:02}/f{i}.txt", i % 8);
        let text = format!("legacy {round} f{i}");
        planter.put(&legacy.join(&rel), &text, None);
        expect(&rel, &text);
    }
    if both {
        for d in 0..8 {
            let rel = format!("only/d{d:02}/kept.txt");
            planter.put(&public.join(&rel), "kept", None);
            expect(&rel, "kept");
        }
    }
    for i in 0..LEGACY_CLASHES {
        let rel = format!("clash/c{i}.txt");
        let (ours, theirs) = (
            format!("legacy {round} c{i}"),
            format!("public {round} c{i}"),
        );
        // Even: the legacy copy is newer and wins; odd: the public one is.
        planter.put(
            &legacy.join(&rel),
            &ours,
            Some(if i % 2 == 0 { 20 } else { 5 }),
        );
        if both {
            planter.put(&public.join(&rel), &theirs, Some(10));
            expect(&rel, if i % 2 == 0 { &ours } else { &theirs });
        } else {
            expect(&rel, &ours);
        }
    }
    // A folder by the name of a file: neither may go, the legacy one moves in aside.
    let mixed = format!("legacy {round} mixed");
    planter.put(&legacy.join("mixed/x.txt"), &mixed, None);
    if both {
        planter.put(
            &public.join("mixed"),
            &format!("public {round} mixed"),
            None,
        );
        expect("mixed", &format!("public {round} mixed"));
        expect("mixed-from-uploads/x.txt", &mixed);
    } else {
        expect("mixed/x.txt", &mixed);
    }
    planter.put(
        &legacy.join("attachments/old.pdf"),
        &format!("old {round}"),
        None,
    );
    expect("attachments/old.pdf", &format!("old {round}"));
    // What a writer that died left in the legacy folder is not a file of the person's.
    planter.put(&legacy.join(".ferry-tmp-left"), "half", None);
    want
}

#[test]
fn the_legacy_migration_killed_midway_completes_at_the_next_access() {
    let mut random = Random::seeded("legacy migration");
    let mut server = Server::start();
    let home = server.home("me");
    let list = |server: &Server| {
        client()
            .get(server.url("/v1/files"))
            .bearer_auth(&server.token)
            .send()
    };
    // One round without a kill measures how long a migration takes.
    plant_legacy(&home, 0, true);
    let started = Instant::now();
    assert_eq!(list(&server).unwrap().status().as_u16(), 200);
    let span = span_of(started.elapsed());
    let mut report = Report::new("legacy migration", "migrations completed");
    let (mut before_kill, mut unfinished) = (0, 0);
    for kill in 0..kills() {
        let round = kill + 1;
        let both = random.below(4) != 0;
        let want = plant_legacy(&home, round, both);
        let (base, token) = (server.url("/v1/files"), server.token.clone());
        let access = std::thread::spawn(move || {
            client()
                .get(base)
                .bearer_auth(token)
                .send()
                .is_ok_and(|r| r.status().as_u16() == 200)
        });
        std::thread::sleep(random.delay(span));
        server.kill();
        report.kills += 1;
        if access.join().unwrap() {
            before_kill += 1;
        } else if home.join("uploads").exists() {
            unfinished += 1;
        }
        server.restart();

        // The next access completes it.
        let response = list(&server).unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let listing: Value = response.json().unwrap();
        if home.join("uploads").exists() {
            report.violation(kill, "uploads/ is still there after the next access");
        }
        // What a writer that died left is hidden, and swept once stale, wherever it went.
        let mut have = files_below(&home.join("public"));
        have.retain(|rel, _| !rel.split('/').any(|c| c.starts_with(ferry_fs::TEMP_PREFIX)));
        for (rel, bytes) in &want {
            match have.get(rel) {
                None => report.violation(kill, format!("{rel} was lost")),
                Some(got) if got != bytes => report.violation(
                    kill,
                    format!("{rel} holds {:?}", String::from_utf8_lossy(got)),
                ),
                Some(_) => {}
            }
        }
        for rel in have.keys().filter(|rel| !want.contains_key(*rel)) {
            report.violation(kill, format!("{rel} is there twice or should not be"));
        }
        report.completed += 1;
        let mut names = Vec::new();
        support::crash::listed_names(&listing, &mut names);
        let shown =
            |n: &&String| n.contains(ferry_fs::TEMP_PREFIX) || n.split('/').any(|c| c == "uploads");
        if names.iter().any(|n| shown(&n)) {
            report.violation(kill, format!("the listing shows {names:?}"));
        }
    }
    report.fact(format!(
        "{before_kill} finished before their kill, {unfinished} kills left uploads/ to the \
         next access ({} files each)",
        LEGACY_FILES + LEGACY_CLASHES + 3
    ));
    report.finish();
}

// ---------------------------------------------------------------------------------------
// 3 and 4. A node: dir_fetch extraction and file_push
// ---------------------------------------------------------------------------------------

/// A gateway whose person `me` may use one real `ferry node run`, on loopback, serving
/// `srv/` (reads) and `srv/inbox/` (writes).
struct NodeSite {
    server: Server,
    node: Option<NodeProcess>,
    id: String,
    state: PathBuf,
    srv: PathBuf,
    harness: String,
    _tmp: tempfile::TempDir,
}

impl NodeSite {
    fn start() -> NodeSite {
        let tmp = tempfile::tempdir().unwrap();
        let srv = tmp.path().join("srv");
        std::fs::create_dir_all(srv.join("inbox")).unwrap();
        let srv = std::fs::canonicalize(srv).unwrap();
        let state = tmp.path().join("node-state");
        let id = ferry_node::Identity::load_or_create(&state)
            .unwrap()
            .node_id();
        let config = format!(
            "{NO_RATES}[nodes.\"{id}\"]\npersons = [\"me\"]\nallow_read = [\"{srv}/**\"]\n\
             allow_write = [\"{srv}/**\"]\n",
            srv = srv.display()
        );
        let server = Server::start_with(Options {
            config_toml: Some(config),
            ..Options::default()
        });
        let harness = server.create_token("me", "harness");
        let mut site = NodeSite {
            server,
            node: None,
            id: id.clone(),
            state,
            srv,
            harness,
            _tmp: tmp,
        };
        site.start_node();
        let out = site.server.ferry(&["node", "approve", &id]);
        assert!(out.status.success(), "{out:?}");
        wait_for_node(&site.server, &id, |n| n["state"] == "approved");
        site
    }

    /// Starts the node (a new process on the same state folder), once it is connected.
    fn start_node(&mut self) {
        self.node = None;
        let gateway = format!("ws://{}", self.server.addr);
        let srv = self.srv.display().to_string();
        let node = NodeProcess::start(
            &[
                "--gateway",
                &gateway,
                "--name",
                "box",
                "--state",
                self.state.to_str().unwrap(),
                "--allow-read",
                &format!("{srv}/**"),
                "--allow-write",
                &format!("{srv}/inbox/**"),
            ],
            &[],
        );
        let line = node.line_blocking();
        assert!(
            line.starts_with("connected to "),
            "{line}: {}",
            node.stderr()
        );
        self.node = Some(node);
        wait_for_node(&self.server, &self.id, |n| n["connected"] == true);
    }

    /// The node's process id.
    fn node_pid(&self) -> u32 {
        self.node.as_ref().unwrap().child.id()
    }

    /// Starts the gateway again on the same address (the node dials it there).
    fn restart_gateway(&mut self) {
        let addr = self.server.addr.clone();
        self.server.restart_on(&addr);
    }

    fn mcp(&self) -> McpHttp {
        McpHttp::open(&self.server, &self.harness).expect("the gateway answers /mcp")
    }
}

/// Files in the tree `dir_fetch` fetches.
const TREE_FILES: usize = 80;

/// The media store's records: id, size and sha256 (read with the gateway stopped).
fn media_records(server: &Server) -> Vec<(String, i64, String)> {
    server
        .metadata_db()
        .rows("SELECT id, size, sha256 FROM media", params![], |r| {
            Ok::<_, ferry_sql::Error>((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap()
}

#[test]
fn dir_fetch_killed_midway_leaves_a_whole_tree_or_none() {
    let mut random = Random::seeded("dir_fetch");
    let mut site = NodeSite::start();
    let tree = site.srv.join("tree");
    for i in 0..TREE_FILES {
        let text = format!("file {i} of the tree\n").repeat(100);
        support::write_file(&tree.join(format!("d{:02}/f{i}.txt", i % 12)), text);
    }
    let source = files_below(&tree);
    let media = site.server.data.join(".ferry/media");
    let args = json!({"node": "box", "path": tree});
    // The second fetch, once all is warm, measures how long one takes.
    let mut mcp = site.mcp();
    let mut started = Instant::now();
    for _ in 0..2 {
        started = Instant::now();
        let fetched = mcp.call("dir_fetch", args.clone()).unwrap();
        assert!(!is_error(&fetched), "{}", text_of(&fetched));
    }
    let span = span_of(started.elapsed());
    let mut report = Report::new("dir_fetch", "trees fetched");
    let (mut checked, mut left, mut unextracted) = (BTreeSet::new(), 0, BTreeSet::new());
    for kill in 0..kills() {
        let mut mcp = site.mcp();
        let killer = kill_after(site.server.pid(), random.delay(span));
        report.kills += 1;
        let mut answered = Vec::new();
        while let Some(result) = mcp.call("dir_fetch", args.clone()) {
            assert!(!is_error(&result), "{}", text_of(&result));
            answered.push(
                result["structuredContent"]["rootDir"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        killer.join().unwrap();
        site.server.kill();
        report.completed += answered.len();

        // With the gateway stopped: every tree there is whole, every record has its blob.
        let records = media_records(&site.server);
        for (id, size, sha) in &records {
            let blob = media.join("blobs").join(sha);
            if std::fs::metadata(&blob).map(|m| m.len() as i64).ok() != Some(*size) {
                report.violation(kill, format!("the record {id} has no whole blob"));
            }
            if !media.join(format!("dir-fetch-{id}")).exists() {
                unextracted.insert(id.clone());
            }
        }
        for entry in std::fs::read_dir(&media).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_prefix("dir-fetch-") else {
                continue;
            };
            if !records.iter().any(|(r, _, _)| r == id) {
                report.violation(kill, format!("the tree {name} has no record"));
            }
            if checked.insert(name.clone()) && files_below(&entry.path()) != source {
                report.violation(kill, format!("the tree {name} is not whole"));
            }
        }
        for root in &answered {
            if files_below(Path::new(root)) != source {
                report.violation(kill, format!("{root} was answered, and is not whole"));
            }
        }
        left = named_beneath(&media, &|n| n.starts_with(".tmp-dir-fetch-")).len()
            + named_beneath(&media.join("tmp"), &|_| true).len();
        site.restart_gateway();
        site.start_node();
    }
    // The extraction's leftovers go at a start once they are as old as a dead put's.
    let media_temporaries = || {
        let mut found = named_beneath(&media, &|n| n.starts_with(".tmp-dir-fetch-"));
        found.extend(named_beneath(&media.join("tmp"), &|_| true));
        found
    };
    let idle = Duration::from_secs(ferry_config::limits::MEDIA_TEMPORARY_IDLE_MAX_SECS);
    age(&media_temporaries(), idle);
    site.restart_gateway();
    let remaining = left_after(&media_temporaries);
    report.fact(format!(
        "{} archives recorded by a fetch killed before its tree was in place",
        unextracted.len()
    ));
    report.temporaries(left, remaining);
    report.finish();
}

/// The size of a pushed version: large enough that the node is killed while it writes.
const PUSH_BYTES: usize = 1024 * 1024;

#[test]
fn file_push_on_a_killed_node_leaves_the_old_file_or_the_new_one() {
    use data_encoding::BASE64;
    let mut random = Random::seeded("file_push");
    let mut site = NodeSite::start();
    let (inbox, target) = (site.srv.join("inbox"), site.srv.join("inbox/big.bin"));
    let push = |mcp: &mut McpHttp, k: u64| {
        let bytes = version_sized(k, PUSH_BYTES);
        mcp.call(
            "file_push",
            json!({"node": "box", "path": target, "contentBase64": BASE64.encode(&bytes),
                   "overwrite": true}),
        )
    };
    // The second push, once all is warm, measures how long one takes.
    let mut mcp = site.mcp();
    let mut started = Instant::now();
    for _ in 0..2 {
        started = Instant::now();
        let pushed = push(&mut mcp, 0).unwrap();
        assert!(!is_error(&pushed), "{}", text_of(&pushed));
    }
    let span = span_of(started.elapsed());
    let mut next = 1u64;
    let (mut report, mut left) = (Report::new("file_push", "pushes acknowledged"), 0);
    for kill in 0..kills() {
        let mut mcp = site.mcp();
        // One push the node restarted takes whole, then pushes until the kill.
        let pushed = push(&mut mcp, next).unwrap();
        assert!(!is_error(&pushed), "{}", text_of(&pushed));
        let mut acknowledged = next;
        next += 1;
        report.completed += 1;
        let killer = kill_after(site.node_pid(), random.delay(span));
        report.kills += 1;
        loop {
            let k = next;
            next += 1;
            let result = push(&mut mcp, k).expect("the gateway stays up");
            if is_error(&result) {
                // The node is gone: `node_offline`, or the call cut off.
                break;
            }
            acknowledged = k;
            report.completed += 1;
        }
        killer.join().unwrap();
        let _ = site.node.as_mut().unwrap().child.wait();

        match std::fs::read(&target).ok().map(|b| version_of(&b)) {
            Some(Some(k)) if k < acknowledged => report.violation(
                kill,
                format!("the file is version {k}, but version {acknowledged} was acknowledged"),
            ),
            Some(None) => report.violation(kill, "the node's file is no whole version"),
            None => report.violation(kill, "the node's file is gone"),
            Some(Some(_)) => {}
        }
        left += temporaries(&inbox).len();
        site.start_node();
        // Swept before the node said it was connected.
        let after_start = temporaries(&inbox);
        if !after_start.is_empty() {
            report.violation(
                kill,
                format!("temporaries left past the node's next start: {after_start:?}"),
            );
        }
    }
    report.temporaries(left, temporaries(&inbox));
    report.finish();
}

// ---------------------------------------------------------------------------------------
// 5. A herd assign
// ---------------------------------------------------------------------------------------

/// What a herd holds: every envelope in every mailbox (the worker's, the ones set aside
/// for earlier generations, the owner's), by its task text.
#[derive(Default)]
struct Mailboxes {
    /// Task text → the workers (`label#pid`) it is addressed to, one per copy found.
    tasks: HashMap<String, Vec<String>>,
    /// Files that are no whole envelope, or were refused.
    bad: Vec<String>,
    /// Temporaries of writers that died.
    temporaries: Vec<PathBuf>,
}

fn read_mailboxes(herd: &Path) -> Mailboxes {
    let mut found = Mailboxes::default();
    let Ok(mailboxes) = std::fs::read_dir(herd.join("mailboxes")) else {
        return found;
    };
    for mailbox in mailboxes.flatten() {
        for sub in ["new", "cur", "rejected"] {
            let Ok(entries) = std::fs::read_dir(mailbox.path().join(sub)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(ferry_fs::TEMP_PREFIX) {
                    found.temporaries.push(entry.path());
                    continue;
                }
                let parsed = std::fs::read(entry.path())
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
                match parsed {
                    Some(envelope) if sub != "rejected" => {
                        if envelope["kind"] == "task" {
                            let text = envelope["text"].as_str().unwrap_or_default().to_owned();
                            let to = envelope["to"].as_str().unwrap_or_default().to_owned();
                            found.tasks.entry(text).or_default().push(to);
                        }
                    }
                    _ => found.bad.push(format!(
                        "{}/{sub}/{name}",
                        mailbox.file_name().to_string_lossy()
                    )),
                }
            }
        }
    }
    found
}

/// A gateway run as `nobody` (commands are refused as root) whose person `me` has the
/// worker definition `idle` (it waits: its mailbox fills), and a harness token of `me`.
fn herd_site() -> (Server, String) {
    let server = Server::start_with(Options {
        as_nobody: true,
        config_toml: Some(NO_RATES.to_owned()),
        ..Options::default()
    });
    let harness = server.create_token("me", "harness");
    support::write_file(
        &server.home("me").join(".ferry-herd/agents/idle.md"),
        "---\nname: idle\ndescription: waits\ncommand: sleep 600\n---\nWait.\n",
    );
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{NOBODY}:{NOBODY}"))
        .arg(&server.data)
        .status()
        .unwrap();
    assert!(status.success());
    (server, harness)
}

/// `subagent` `assign` of task `n` to the label `idle`.
fn assign_args(n: usize) -> Value {
    json!({"action": "assign", "agent": "idle", "label": "idle", "task": format!("task {n}")})
}

/// Notes an assign's answer: the worker it went to, which now holds the label, among
/// the answered; or, refused, why.
fn note_assign(
    result: &Value,
    task: usize,
    worker: &mut u64,
    answered: &mut Vec<(String, u64)>,
) -> Result<(), String> {
    let pid = worker_of(result).ok_or_else(|| text_of(result))?;
    *worker = pid;
    answered.push((format!("task {task}"), pid));
    Ok(())
}

/// What an answered assign says: the worker's pid.
fn worker_of(result: &Value) -> Option<u64> {
    let answer: Value = serde_json::from_str(&text_of(result)).ok()?;
    answer["worker"]["pid"].as_u64()
}

/// A process's command line, its arguments joined by spaces.
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

/// The supervisor of a worker killed while its reaper had not yet ended the worker's
/// command (the crash harness's worker kills hit this window once in about a hundred):
/// the reaper, forked from the supervisor without a new program and so under its
/// command line, was taken for a supervisor once orphaned, and the next assign killed
/// it, so the command escaped every reaper and the assign failed. The reaper is held
/// stopped here to hold the window open.
#[test]
fn a_killed_supervisors_reaper_is_left_to_end_the_worker() {
    use support::herd::{processes_below, running};
    let (server, harness) = herd_site();
    let mut mcp = McpHttp::open(&server, &harness).unwrap();
    let first = mcp.call("subagent", assign_args(0)).unwrap();
    let supervisor = worker_of(&first).unwrap_or_else(|| panic!("{first}")) as u32;
    let below = || processes_below(supervisor);
    assert!(
        support::herd::wait_for(|| below().iter().any(|p| cmdline(*p) == "sleep 600")),
        "the worker runs"
    );
    let reaper = *below()
        .iter()
        .find(|p| cmdline(**p) == cmdline(supervisor))
        .expect("the reaper, under the supervisor's command line");
    let command = *below()
        .iter()
        .find(|p| cmdline(**p) == "sleep 600")
        .unwrap();
    // SAFETY: plain kill(2)s of processes this test's gateway started.
    unsafe {
        libc::kill(reaper as i32, libc::SIGSTOP);
        libc::kill(supervisor as i32, libc::SIGKILL);
    }
    assert!(support::herd::wait_for(|| !running(supervisor)));

    let started = Instant::now();
    let next = mcp.call("subagent", assign_args(1)).unwrap();
    let new = worker_of(&next).unwrap_or_else(|| panic!("{}", text_of(&next)));
    assert_ne!(new as u32, supervisor);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // The reaper, let go, ends the old worker's command itself.
    assert!(running(reaper), "the reaper was killed");
    unsafe { libc::kill(reaper as i32, libc::SIGCONT) };
    assert!(
        support::herd::wait_for(|| !running(command)),
        "the old command escaped"
    );
    let _ = mcp.call("subagent", json!({"action": "stop", "label": "idle"}));
}

#[test]
fn herd_assigns_killed_midway_lose_and_double_no_message() {
    let mut random = Random::seeded("herd assign");
    let (mut server, harness) = herd_site();
    // `ferry herd` as nobody, for the controller killed on its own.
    let bin = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        bin.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let ferry = support::ferry_bin_at(&bin.path().join("ferry"));
    let herd_dir = server.data.join("private/people/me/herd");

    let (data, home) = (server.data.clone(), server.home("me"));
    let cli_assign = |task: usize| {
        let mut command = Command::new("setpriv");
        command
            .arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"))
            .arg("--clear-groups")
            .arg(&ferry)
            .args(["herd", "assign", "--agent", "idle", "--label", "idle"])
            .arg("--task")
            .arg(format!("task {task}"))
            .arg("--data")
            .arg(&data)
            .args(["--person", "me"])
            .current_dir(&home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };

    // The first assign starts the worker: it measures the longest an assign takes at
    // /mcp. One by the command line measures that process's whole run.
    let started = Instant::now();
    let mut mcp = McpHttp::open(&server, &harness).unwrap();
    let first = mcp.call("subagent", assign_args(0)).unwrap();
    let span = span_of(started.elapsed());
    let mut worker = worker_of(&first).unwrap_or_else(|| panic!("{first}"));
    let started = Instant::now();
    let out = cli_assign(1).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let cli_span = span_of(started.elapsed());
    // Answered assigns not yet found in a check: task → the worker it was answered for.
    let mut answered: Vec<(String, u64)> =
        vec![("task 0".into(), worker), ("task 1".into(), worker)];
    let mut next = 2;
    let mut report = Report::new("herd assign", "assigns answered");
    let mut by_target = [0usize; 3];
    let mut left = 0;
    for kill in 0..kills() {
        let target = random.below(3) as usize;
        by_target[target] += 1;
        report.kills += 1;
        let mut refused = Vec::new();
        match target {
            // The gateway, during `subagent` assigns at /mcp.
            0 => {
                let mut mcp = McpHttp::open(&server, &harness).unwrap();
                let killer = kill_after(server.pid(), random.delay(span));
                loop {
                    let task = next;
                    next += 1;
                    let Some(result) = mcp.call("subagent", assign_args(task)) else {
                        break;
                    };
                    if let Err(why) = note_assign(&result, task, &mut worker, &mut answered) {
                        refused.push(why);
                    }
                }
                killer.join().unwrap();
                server.kill();
                server.restart();
            }
            // The worker (its supervisor, whose reaper ends the rest), during assigns.
            1 => {
                let mut mcp = McpHttp::open(&server, &harness).unwrap();
                let killer = kill_after(worker as u32, random.delay(span));
                let until = Instant::now() + span + Duration::from_millis(50);
                while Instant::now() < until {
                    let task = next;
                    next += 1;
                    let result = mcp.call("subagent", assign_args(task)).unwrap();
                    if let Err(why) = note_assign(&result, task, &mut worker, &mut answered) {
                        refused.push(why);
                    }
                }
                killer.join().unwrap();
            }
            // The controller itself: `ferry herd assign` as nobody.
            _ => {
                let task = next;
                next += 1;
                let child = cli_assign(task).spawn().unwrap();
                let killer = kill_after(child.id(), random.delay(cli_span));
                killer.join().unwrap();
                let out = child.wait_with_output().unwrap();
                if out.status.success() {
                    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
                    let pid = answer["worker"]["pid"].as_u64().unwrap();
                    worker = pid;
                    answered.push((format!("task {task}"), pid));
                } else if out.status.code().is_some() {
                    refused.push(String::from_utf8_lossy(&out.stdout).into_owned());
                }
            }
        }
        for why in refused {
            // What runs of the herd's, for whoever reads the failure.
            let ps = Command::new("ps")
                .args(["-eo", "pid,ppid,stat,etimes,comm,args"])
                .output()
                .unwrap();
            let ps: Vec<String> = String::from_utf8_lossy(&ps.stdout)
                .lines()
                .filter(|l| l.contains("sleep 600") || l.contains("herd"))
                .map(String::from)
                .collect();
            report.violation(
                kill,
                format!("an assign was refused after a kill (target {target}): {why}; {ps:#?}"),
            );
        }

        // Every envelope whole and once; every answered task where its answer said.
        let held = read_mailboxes(&herd_dir);
        for bad in &held.bad {
            report.violation(kill, format!("{bad} is no whole envelope"));
        }
        for (task, to) in &held.tasks {
            if to.len() > 1 {
                report.violation(
                    kill,
                    format!("{task} was delivered {} times: {to:?}", to.len()),
                );
            }
        }
        for (task, pid) in std::mem::take(&mut answered) {
            match held.tasks.get(&task).map(Vec::as_slice) {
                Some([to]) if *to == format!("idle#{pid}") => report.completed += 1,
                Some(to) => {
                    report.violation(kill, format!("{task} went to {to:?}, not idle#{pid}"))
                }
                None => report.violation(kill, format!("{task} was answered and is lost")),
            }
        }
        left = held.temporaries.len();
        // The herd takes the next assign, and says which worker holds the label now.
        let mut mcp = McpHttp::open(&server, &harness).unwrap();
        let task = next;
        next += 1;
        let result = mcp.call("subagent", assign_args(task)).unwrap();
        if let Err(why) = note_assign(&result, task, &mut worker, &mut answered) {
            report.violation(kill, format!("the next assign failed: {why}"));
        }
    }
    // The temporaries of killed writers go once stale: at the herd's next opening, and
    // at the gateway's next start for the records beside them.
    age_temporaries(&server.data);
    age(&temporaries(&herd_dir), Duration::from_secs(120));
    server.restart();
    let mut mcp = McpHttp::open(&server, &harness).unwrap();
    let status = mcp.call("subagent", json!({"action": "status"})).unwrap();
    assert!(!is_error(&status), "{}", text_of(&status));
    let remaining = swept(&server.data);
    report.fact(format!(
        "the gateway killed {} times, the worker {}, the controller process {}",
        by_target[0], by_target[1], by_target[2]
    ));
    report.temporaries(left, remaining);
    let _ = mcp.call("subagent", json!({"action": "stop", "label": "idle"}));
    report.finish();
}

// ---------------------------------------------------------------------------------------
// 6. A metadata migration
// ---------------------------------------------------------------------------------------

/// Rows planted in the SQLite file, so that the copy takes a while.
const AUDIT_ROWS: usize = 1500;
const CHAT_ROWS: usize = 300;

/// Each table's rows in `db`.
fn table_counts(db: &ferry_sql::Db, tables: &[String]) -> BTreeMap<String, i64> {
    tables
        .iter()
        .map(|t| {
            let n: Option<i64> = db
                .row(&format!("SELECT COUNT(*) FROM {t}"), params![], |r| {
                    r.get(0)
                })
                .unwrap();
            (t.clone(), n.unwrap_or(0))
        })
        .collect()
}

#[test]
fn a_metadata_migration_killed_midway_completes_when_run_again() {
    let mut random = Random::seeded("metadata migration");
    let mut server = Server::start();
    assert!(
        server.ferry(&["person", "add", "ann"]).status.success(),
        "a person"
    );
    server.kill();
    let file = server.data.join(".ferry").join(ferry_site::DB_FILE);
    {
        let db = rusqlite::Connection::open(&file).unwrap();
        db.execute_batch(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {AUDIT_ROWS})
             INSERT INTO audit (at_ms, person, token_kind, action, path, outcome)
             SELECT i, 'me', 'person', 'upload', 'public/f' || i || '.txt', 'ok' FROM n;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {CHAT_ROWS})
             INSERT INTO chat_messages (person, project, role, text, attachments, created)
             SELECT 'me', '', 'user', 'message ' || i, '[]', i FROM n;"
        ))
        .unwrap();
    }
    let sqlite = ferry_sql::Db::sqlite(&file).unwrap();
    let tables: Vec<String> = sqlite
        .rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             AND name != 'schema_version' ORDER BY name",
            params![],
            |r| r.get(0),
        )
        .unwrap();
    let want = table_counts(&sqlite, &tables);
    drop(sqlite);
    let note = server.data.join(".ferry/metadata-moved");
    let migrate = |url: &str| {
        let mut command = server.ferry_on_site();
        command
            .args(["site", "migrate-metadata", "--to", url])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    // The state of PostgreSQL after a run: each table's rows, or none when it has none.
    let pg_counts = |url: &str| -> Option<BTreeMap<String, i64>> {
        let db = ferry_sql::Db::postgres(url, None).unwrap();
        let present: Vec<String> = db
            .rows(
                "SELECT CAST(table_name AS TEXT) FROM information_schema.tables \
                 WHERE table_schema = current_schema()",
                params![],
                |r| r.get(0),
            )
            .unwrap();
        let ours: Vec<String> = tables
            .iter()
            .filter(|t| present.contains(t))
            .cloned()
            .collect();
        (!ours.is_empty()).then(|| table_counts(&db, &ours))
    };
    // One database, emptied again before each run.
    let db = ferry_sql::testing::PostgresDatabase::create();
    let empty = || {
        let target = ferry_sql::Db::postgres(db.url(), None).unwrap();
        target
            .execute("DROP SCHEMA public CASCADE", params![])
            .unwrap();
        target.execute("CREATE SCHEMA public", params![]).unwrap();
        let _ = std::fs::remove_file(&note);
    };
    let started = Instant::now();
    let out = migrate(db.url()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let span = span_of(started.elapsed());
    let mut report = Report::new("metadata migration", "migrations completed");
    let (mut none, mut schema_only, mut whole, mut before_kill) = (0, 0, 0, 0);
    for kill in 0..kills() {
        empty();
        let child = migrate(db.url()).spawn().unwrap();
        let killer = kill_after(child.id(), random.delay(span));
        killer.join().unwrap();
        let out = child.wait_with_output().unwrap();
        report.kills += 1;
        if out.status.success() {
            before_kill += 1;
        } else if out.status.code().is_some() {
            report.violation(kill, format!("the first run failed: {out:?}"));
        }

        // All of the copy or none of it, never part.
        let noted = note.exists();
        match pg_counts(db.url()) {
            None => none += 1,
            Some(counts) if counts.values().all(|n| *n == 0) => schema_only += 1,
            Some(counts) if counts.len() == want.len() && counts == want => whole += 1,
            Some(counts) => report.violation(
                kill,
                format!("PostgreSQL holds part of the copy: {counts:?}"),
            ),
        }
        // The SQLite site goes on until the copy is whole, and is refused once it is.
        let opened = server.ferry(&["person", "list"]);
        if noted == opened.status.success() {
            report.violation(
                kill,
                format!(
                    "the note is {}there, and the SQLite site {}opens",
                    if noted { "" } else { "not " },
                    if opened.status.success() {
                        ""
                    } else {
                        "no longer "
                    }
                ),
            );
        }
        if noted && pg_counts(db.url()).as_ref() != Some(&want) {
            report.violation(
                kill,
                "the SQLite site is refused, and the copy is not whole",
            );
        }

        // Running it again completes it, every count matching.
        let again = migrate(db.url()).output().unwrap();
        if !again.status.success() {
            report.violation(
                kill,
                format!(
                    "running it again failed: {}",
                    String::from_utf8_lossy(&again.stderr)
                ),
            );
        } else if pg_counts(db.url()).as_ref() != Some(&want) || !note.exists() {
            report.violation(kill, "running it again did not complete the copy");
        } else {
            // The site on PostgreSQL is the site it was: its people.
            let people = server
                .ferry_on_site()
                .env(support::METADATA_URL, db.url())
                .args(["person", "list"])
                .output()
                .unwrap();
            let listed = String::from_utf8_lossy(&people.stdout);
            if !people.status.success() || !listed.contains("ann") || !listed.contains("me") {
                report.violation(kill, format!("the site on PostgreSQL lists {listed:?}"));
            }
            report.completed += 1;
        }
    }
    empty();
    report.fact(format!(
        "{before_kill} finished before their kill; after the kills PostgreSQL held nothing \
         {none} times, the schema alone {schema_only} times, the whole copy {whole} times"
    ));
    server.restart();
    let (status, body) = get_json(&server.url("/v1/files"), &server.token);
    assert_eq!(status, 200, "{body}");
    report.finish();
}
