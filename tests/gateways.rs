//! Two gateways on one site (spec scale S-GATEWAYS), each a real `ferry serve` on the same
//! data dir, sharing one PostgreSQL database (`FERRY_TEST_POSTGRES_URL`) and one Garage
//! bucket for the media (`FERRY_TEST_S3_*`; `.ci/run` starts both): what one learns, the
//! other sees at once, and starting, stopping or crashing one takes nothing the other
//! holds.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ferry_media::testing::S3Bucket;
use ferry_site::ApprovalOutcome;
use ferry_sql::testing::PostgresDatabase;
use futures_util::StreamExt;
use serde_json::{Value, json};
use support::{
    METADATA_URL, Options, Server, SseStream, client, get_json, last_line, open_events, post_json,
    upload,
};

/// The stores a site of several gateways shares: a PostgreSQL database for its
/// metadata and a Garage bucket for its media, and the environment naming them.
fn shared_stores() -> (PostgresDatabase, Vec<(String, String)>) {
    let db = PostgresDatabase::create();
    let mut env = vec![(METADATA_URL.to_owned(), db.url().to_owned())];
    env.extend(S3Bucket::create().env());
    (db, env)
}

/// Gateway A on a fresh site with its shared stores, and B beside it.
fn pair() -> (PostgresDatabase, Server, Server) {
    let (db, env) = shared_stores();
    let a = Server::start_with(Options {
        env,
        ..Options::default()
    });
    let b = a.start_beside();
    (db, a, b)
}

/// The next event named `name` within `wait`.
fn next_event(stream: &mut SseStream, name: &str, wait: Duration) -> Option<Value> {
    let deadline = Instant::now() + wait;
    loop {
        let event = stream.next(deadline.saturating_duration_since(Instant::now()))?;
        if event.event == name {
            return Some(event.json());
        }
    }
}

#[test]
fn an_upload_through_one_reaches_a_page_on_the_other() {
    let (_db, a, b) = pair();
    let mut page_on_b = open_events(&b, &b.token);
    let (status, body) = upload(&a, &a.token, "report.txt", b"quarterly", None);
    assert_eq!(status, 201, "{body}");
    let event = next_event(&mut page_on_b, "files", Duration::from_secs(10)).unwrap_or_else(|| {
        panic!(
            "the page on B did not hear of the upload through A; A: {}\nB: {}",
            a.log(),
            b.log()
        )
    });
    assert_eq!(event["project"], Value::Null);
    assert_eq!(event["paths"], json!(["public/report.txt"]));
    // And B serves the file A wrote.
    let (status, listing) = get_json(&b.url("/v1/files"), &b.token);
    assert_eq!(status, 200);
    assert!(listing.to_string().contains("report.txt"), "{listing}");
}

#[test]
fn a_token_revoked_on_the_site_is_refused_by_both_at_the_next_request() {
    let (_db, a, b) = pair();
    let ann = a.add_person("ann");
    for g in [&a, &b] {
        assert_eq!(get_json(&g.url("/v1/me"), &ann).0, 200);
    }
    let prefix = &ann[..12];
    let revoked = a.ferry(&["token", "revoke", prefix]);
    assert!(revoked.status.success(), "{}", last_line(&revoked));
    for g in [&a, &b] {
        assert_eq!(get_json(&g.url("/v1/me"), &ann).0, 401);
    }
}

/// Gateway B remembers the token, and is stalled (SIGSTOP) while it is revoked: it hears
/// nothing and renews nothing. The revoke still returns, and once B goes on, its next
/// request with the token is refused.
#[test]
fn a_gateway_stalled_through_a_revoke_refuses_the_token_when_it_goes_on() {
    let (_db, a, b) = pair();
    let ann = a.add_person("ann");
    for _ in 0..3 {
        assert_eq!(get_json(&b.url("/v1/me"), &ann).0, 200);
    }
    {
        let _stalled = Stopped::new(&b);
        let revoked = a.ferry(&["token", "revoke", &ann[..12]]);
        assert!(revoked.status.success(), "{}", last_line(&revoked));
    }
    assert_eq!(get_json(&b.url("/v1/me"), &ann).0, 401);
}

#[test]
fn a_request_waiting_on_one_is_answered_through_the_other() {
    let (_db, a, b) = pair();
    // The tool's side, as A's agent tools run it: the request and the wait.
    let site = a.site();
    let id = site
        .request_approval("me", "file_delete", "public/old.txt", "delete old.txt?")
        .unwrap();
    let waiter = std::thread::spawn(move || {
        site.wait_for_approval(&id.clone(), Duration::from_secs(30))
            .map(|outcome| (id, outcome))
    });
    // The person's answer goes to B.
    let (status, body) = get_json(&b.url("/v1/interactions"), &b.token);
    assert_eq!(status, 200);
    let pending = body["interactions"][0]["id"].as_str().unwrap().to_owned();
    let (status, body) = post_json(
        &b,
        &b.token,
        &format!("/v1/approvals/{pending}"),
        &json!({"approve": true}),
    );
    assert_eq!(status, 200, "{body}");
    let (id, outcome) = waiter.join().unwrap().unwrap();
    assert_eq!(id, pending);
    assert_eq!(outcome, ApprovalOutcome::Approved);
}

#[test]
fn restarting_one_revokes_nothing_the_other_holds() {
    let (_db, mut a, b) = pair();
    let site = b.site();
    let gateways = site.gateways().unwrap();
    assert_eq!(gateways.len(), 2, "{gateways:?}");
    // Which row is B's: the one at B's address.
    let b_id = gateways
        .iter()
        .find(|(_, address)| *address == b.addr)
        .map(|(id, _)| id.clone())
        .expect("B is registered at its address");
    let held_by_b = site.create_relay_token("me", &b_id).unwrap();
    a.restart();
    a.kill();
    a.restart();
    assert!(site.authenticate(&held_by_b).unwrap().is_some());
    assert_eq!(get_json(&b.url("/v1/me"), &b.token).0, 200);
    // Stopping B (SIGTERM) ends what B held, and only that.
    let mut b = b;
    // SAFETY: a signal to a child process this test started.
    unsafe { libc::kill(b.pid() as i32, libc::SIGTERM) };
    assert!(
        b.exit_within(Duration::from_secs(40)).is_some(),
        "B did not stop"
    );
    assert!(
        site.authenticate(&held_by_b).unwrap().is_none(),
        "B's relay token outlived B"
    );
    assert!(site.authenticate(&a.token).unwrap().is_some());
    assert_eq!(get_json(&a.url("/v1/me"), &a.token).0, 200);
}

#[test]
fn killing_one_mid_upload_leaves_the_other_serving_and_nothing_partial() {
    let (_db, mut a, b) = pair();
    // A multipart upload that stops halfway, then A is killed.
    let mut raw = TcpStream::connect(&a.addr).unwrap();
    let boundary = "xBOUNDARYx";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"half.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    );
    let length = head.len() + 4 * 1024 * 1024 + boundary.len() + 8;
    write!(
        raw,
        "POST /v1/media HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {length}\r\n\r\n{head}",
        a.addr, a.token
    )
    .unwrap();
    raw.write_all(&vec![b'x'; 1024 * 1024]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    a.kill();
    // The client's upload fails: the connection is gone, no success was answered.
    let _ = raw.write_all(&vec![b'x'; 1024 * 1024]);
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut raw, &mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains(" 201 "),
        "a killed gateway answered the upload"
    );
    // B serves on, and nothing of the half upload is visible.
    let (status, listing) = get_json(&b.url("/v1/files"), &b.token);
    assert_eq!(status, 200);
    assert!(!listing.to_string().contains("half"), "{listing}");
    let (status, body) = upload(&b, &b.token, "whole.txt", b"all of it", None);
    assert_eq!(status, 201, "{body}");
    let ready = client().get(b.url("/readyz")).send().unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    // Nor does any temporary of the killed upload show through B.
    let listed = walk(&b.workspace("me", None));
    assert!(
        listed
            .iter()
            .all(|p| !p.contains("half") && !p.contains(".ferry-tmp")),
        "{listed:?}"
    );
}

/// Every path under `dir`, relative.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    out
}

#[test]
fn readyz_names_postgresql_when_the_metadata_is_gone_and_healthz_still_answers() {
    let (db, a, b) = pair();
    for g in [&a, &b] {
        assert_eq!(client().get(g.url("/readyz")).send().unwrap().status(), 200);
    }
    // The database goes (its connections cut): both gateways say what is missing.
    drop(db);
    for g in [&a, &b] {
        let answer = client().get(g.url("/readyz")).send().unwrap();
        assert_eq!(answer.status().as_u16(), 503);
        let body: Value = answer.json().unwrap();
        assert_eq!(body["error"]["code"], "not_ready");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("PostgreSQL"), "{message}");
        assert!(!message.contains("password"), "{message}");
        assert_eq!(
            client().get(g.url("/healthz")).send().unwrap().status(),
            200
        );
    }
}

/// The metadata database stops taking connections while both gateways run (its
/// connections cut, new ones refused): requests answer `503 site_unavailable` with a
/// clear message rather than hanging or failing as the server's fault, and once the
/// database answers again they are served without a restart.
#[test]
fn requests_answer_503_while_the_metadata_is_down_and_recover_when_it_returns() {
    let (db, a, b) = pair();
    let admin = std::env::var(ferry_sql::testing::URL_VARIABLE).unwrap();
    let name = db.url().rsplit('/').next().unwrap().to_owned();
    let set_open = |open: bool| {
        ferry_sql::testing::admin_statement(
            &admin,
            &format!(
                "ALTER DATABASE {name} ALLOW_CONNECTIONS {open};
                 SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = '{name}' AND pid <> pg_backend_pid();"
            ),
        )
    };
    // status_within(gateway, status): the listing's answer, asked until it is `status`.
    let status_within = |g: &Server, want: u16| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = client()
                .get(g.url("/v1/files"))
                .bearer_auth(&g.token)
                .send();
            if let Ok(answer) = answer {
                let status = answer.status().as_u16();
                let retry = answer.headers().get("retry-after").cloned();
                let body: Value = answer.json().unwrap_or(Value::Null);
                if status == want {
                    return (body, retry);
                }
                assert!(
                    status == 200 || status == 503,
                    "neither served nor unavailable: {status} {body}\n{}",
                    g.log()
                );
            }
            assert!(Instant::now() < deadline, "no {want} within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    for g in [&a, &b] {
        status_within(g, 200);
    }
    set_open(false);
    for g in [&a, &b] {
        let (body, retry) = status_within(g, 503);
        assert_eq!(body["error"]["code"], "site_unavailable", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("metadata database"), "{message}");
        assert!(!message.contains("password"), "{message}");
        assert_eq!(retry.unwrap(), "1");
    }
    set_open(true);
    for g in [&a, &b] {
        status_within(g, 200);
    }
}

/// An agent on gateway B uses a node whose link gateway A holds: the call goes to A
/// through the gateways' internal route, and fetch, push and a tree's fetch work as on A.
#[test]
fn an_agent_on_one_gateway_uses_a_node_linked_to_the_other() {
    use support::mcp;
    use support::node::{NodeProcess, wait_for_node};

    let (_db, env) = shared_stores();
    let tmp = tempfile::tempdir().unwrap();
    let srv = tmp.path().join("srv");
    std::fs::create_dir_all(srv.join("inbox")).unwrap();
    let srv = std::fs::canonicalize(srv).unwrap();
    let state = tmp.path().join("node-state");
    let id = ferry_node::Identity::load_or_create(&state)
        .unwrap()
        .node_id();
    let config = format!(
        "[nodes.\"{id}\"]\npersons = [\"me\"]\nallow_read = [\"{srv}/**\"]\nallow_write = [\"{srv}/**\"]\n",
        srv = srv.display()
    );
    let a = Server::start_with(Options {
        config_toml: Some(config),
        env,
        ..Options::default()
    });
    let b = a.start_beside();
    let mut command = support::ferry_command();
    command.args([
        "node",
        "run",
        "--gateway",
        &format!("ws://{}", a.addr),
        "--name",
        "build-box",
        "--state",
        state.to_str().unwrap(),
        "--allow-read",
        &format!("{}/**", srv.display()),
        "--allow-write",
        &format!("{}/inbox/**", srv.display()),
    ]);
    let node = NodeProcess::spawn(command);
    assert!(node.line_blocking().starts_with("connected to "));
    wait_for_node(&a, &id, |n| n["connected"] == true);
    let approved = a.ferry(&["node", "approve", &id]);
    assert!(approved.status.success());
    // B shows the node connected, through A.
    wait_for_node(&b, &id, |n| n["connected"] == true);

    let harness = b.create_token("me", "harness");
    let call_on = |gateway: &Server, name: &str, args: Value| -> Value {
        let out = mcp::drive(&json!({
            "server": mcp::http(&gateway.url("/mcp"), &harness),
            "steps": [mcp::call(name, args)],
            "timeout_secs": 120,
        }));
        let result = out["results"][0].clone();
        assert!(!mcp::is_error(&result), "{name}: {}", mcp::text_of(&result));
        result
    };
    let on_b = |name: &str, args: Value| call_on(&b, name, args);
    std::fs::write(srv.join("notes.txt"), "from far away\n").unwrap();
    let fetched = on_b(
        "file_fetch",
        json!({"node": "build-box", "path": format!("{}/notes.txt", srv.display())}),
    );
    let out = &fetched["structuredContent"];
    assert_eq!(out["inline"], true);
    assert!(mcp::text_of(&fetched).contains("from far away"));
    // In the bucket, not on this machine.
    assert_eq!(out["localPath"], Value::Null);

    // Media fetched through A is pushed through B by its id: the bytes are in the
    // bucket both share.
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(srv.join("big.bin"), &big).unwrap();
    let fetched = call_on(
        &a,
        "file_fetch",
        json!({"node": "build-box", "path": format!("{}/big.bin", srv.display())}),
    );
    let media_id = fetched["structuredContent"]["mediaId"]
        .as_str()
        .unwrap()
        .to_owned();
    on_b(
        "file_push",
        json!({"node": "build-box", "path": format!("{}/inbox/big.bin", srv.display()), "sourceMediaId": media_id}),
    );
    assert!(std::fs::read(srv.join("inbox/big.bin")).unwrap() == big);
    let media_id = out["mediaId"].as_str().unwrap().to_owned();
    on_b(
        "file_push",
        json!({"node": "build-box", "path": format!("{}/inbox/copy.txt", srv.display()), "sourceMediaId": media_id}),
    );
    assert_eq!(
        std::fs::read(srv.join("inbox/copy.txt")).unwrap(),
        b"from far away\n"
    );
    for i in 0..12 {
        let dir = srv.join(format!("tree/d{}", i % 3));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    let tree = on_b(
        "dir_fetch",
        json!({"node": "build-box", "path": format!("{}/tree", srv.display())}),
    );
    assert_eq!(tree["structuredContent"]["fileCount"], 12);

    // Each call recorded once, by the gateway that made it.
    let out = a.ferry(&["audit", "--person", "me"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for (action, times) in [("node_fetch", 2), ("node_push", 2), ("dir_fetch", 1)] {
        let n = text
            .lines()
            .filter(|l| l.contains(&format!("\"action\":\"{action}\"")))
            .count();
        assert_eq!(n, times, "{action}: {text}");
    }

    // A forged call to the internal route is a route that does not exist.
    let forged = client()
        .post(a.url("/internal/v1/node-call"))
        .header("x-ferry-gateway-signature", "00".repeat(32))
        .body(r#"{"person":"me","tool":"file_push","args":{},"at":0,"nonce":"x"}"#)
        .send()
        .unwrap();
    assert_eq!(forged.status().as_u16(), 404);

    // A holder that is stopped, not crashed, still takes connections (the kernel does),
    // but B gives its call up once A's mark stops moving, rather than wait on it for as
    // long as it stays stopped.
    let stopped = Stopped::new(&a);
    let out = mcp::drive(&json!({
        "server": mcp::http(&b.url("/mcp"), &harness),
        "steps": [mcp::call("dir_list", json!({"node": "build-box", "path": srv}))],
        "timeout_secs": 120,
    }));
    drop(stopped);
    let result = &out["results"][0];
    assert!(mcp::is_error(result), "{out}");
    assert!(mcp::text_of(result).contains("stopped answering"), "{out}");
    drop(node);
}

/// A gateway stopped with SIGSTOP for as long as this lives, and let go on with SIGCONT
/// when it drops (a test that fails midway must not leave it stopped).
struct Stopped(u32);

impl Stopped {
    fn new(server: &Server) -> Stopped {
        unsafe { libc::kill(server.pid() as i32, libc::SIGSTOP) };
        Stopped(server.pid())
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// A resumable upload is written by one gateway at a time: while a part streams through
/// A, a part sent to B is `423 upload_locked`; afterwards B takes the upload on from
/// where A left it, and the placed file is exactly the bytes whose sha256 is reported.
#[test]
fn one_resumable_upload_is_written_through_one_gateway_at_a_time() {
    use sha2::{Digest, Sha256};
    let (_db, a, b) = pair();
    let whole: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    let created = client()
        .post(a.url("/v1/uploads"))
        .bearer_auth(&a.token)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Length", whole.len().to_string())
        .header(
            "Upload-Metadata",
            format!("filename {}", data_encoding::BASE64.encode(b"race.txt")),
        )
        .send()
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let at = created.headers()["location"].to_str().unwrap().to_owned();
    // A's part: its head and the first half, then it waits with the rest unsent.
    let mut slow = TcpStream::connect(&a.addr).unwrap();
    write!(
        slow,
        "PATCH {at} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nTus-Resumable: 1.0.0\r\n\
         Upload-Offset: 0\r\nContent-Type: application/offset+octet-stream\r\n\
         Content-Length: 1000000\r\n\r\n",
        a.addr, a.token
    )
    .unwrap();
    slow.write_all(&whole[..500_000]).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let patch = |g: &Server, offset: usize, bytes: &[u8]| {
        client()
            .patch(g.url(&at))
            .bearer_auth(&g.token)
            .header("Tus-Resumable", "1.0.0")
            .header("Upload-Offset", offset.to_string())
            .header("Content-Type", "application/offset+octet-stream")
            .body(bytes.to_vec())
            .send()
            .unwrap()
    };
    // Other bytes through B, while A writes: refused.
    let other = vec![b'!'; 1_000_000];
    let refused = patch(&b, 0, &other);
    assert_eq!(refused.status().as_u16(), 423, "{:?}", refused.text());
    // A's part ends.
    slow.write_all(&whole[500_000..1_000_000]).unwrap();
    let mut answer = [0u8; 512];
    let n = std::io::Read::read(&mut slow, &mut answer).unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 204"));
    // B takes it on from A's offset, and completes it.
    let stale = patch(&b, 0, &other[..10]);
    assert_eq!(stale.status().as_u16(), 409, "{:?}", stale.text());
    let done = patch(&b, 1_000_000, &whole[1_000_000..]);
    assert_eq!(done.status().as_u16(), 204, "{:?}", done.text());
    let reported = done.headers()["ferry-sha256"].to_str().unwrap().to_owned();
    let placed = std::fs::read(b.workspace("me", None).join("public/race.txt")).unwrap();
    assert_eq!(placed, whole);
    assert_eq!(
        reported,
        data_encoding::HEXLOWER.encode(&Sha256::digest(&placed))
    );
}

#[test]
fn event_streams_end_when_their_token_is_revoked() {
    let (_db, a, b) = pair();
    let ann = a.add_person("ann");
    let mut on_a = open_events(&a, &ann);
    let mut on_b = open_events(&b, &ann);
    let revoked = a.ferry(&["token", "revoke", &ann[..12]]);
    assert!(revoked.status.success());
    // Within the check interval (5 s), both streams end.
    for stream in [&mut on_a, &mut on_b] {
        let deadline = Instant::now() + Duration::from_secs(12);
        while stream.ended().is_none() && Instant::now() < deadline {
            let _ = stream.next(Duration::from_millis(200));
        }
        assert!(
            stream.ended().is_some(),
            "the stream stayed open after the revoke"
        );
    }
}

/// A herd started through A is steered, watched and stopped through B: the herd lives in
/// the person's folder on the data dir both share, and its worker is a process of the
/// site, not of the gateway that started it.
#[test]
fn a_herd_started_through_one_is_steered_through_the_other() {
    use support::mcp;
    let (_db, env) = shared_stores();
    let a = Server::start_with(Options {
        as_nobody: true,
        env,
        ..Options::default()
    });
    let agents = a.data.join("home/me/.ferry-herd/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("idle.md"),
        "---\nname: idle\ndescription: waits\ncommand: sleep 600\n---\nWait.\n",
    )
    .unwrap();
    let harness = last_line(&a.ferry(&["token", "create", "me", "--kind", "harness"]));
    let status = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&a.data)
        .status()
        .unwrap();
    assert!(status.success());
    let b = a.start_beside();
    let subagent = |gateway: &Server, args: Value| -> Value {
        let out = mcp::drive(&json!({
            "server": mcp::http(&gateway.url("/mcp"), &harness),
            "steps": [mcp::call("subagent", args)],
            "timeout_secs": 60,
        }));
        let result = &out["results"][0];
        serde_json::from_str(&mcp::text_of(result)).unwrap_or_else(|_| panic!("{result}"))
    };
    let started = subagent(
        &a,
        json!({"action": "assign", "agent": "idle", "task": "wait"}),
    );
    let pid = started["worker"]["pid"].as_u64().unwrap() as u32;
    // The supervisor holds none of the service's secrets in its environment (it takes
    // its configuration on its standard input), so no worker can read them there.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.contains("PATH="), "{environ}");
    for secret in ["FERRY_METADATA__URL", "FERRY_MEDIA__SECRET_ACCESS_KEY"] {
        assert!(!environ.contains(secret), "{secret} in {environ}");
    }
    let steered = subagent(
        &b,
        json!({"action": "steer", "label": "idle", "message": "still waiting"}),
    );
    assert!(steered.get("error").is_none(), "{steered}");
    for gateway in [&a, &b] {
        let status = subagent(gateway, json!({"action": "status"}));
        let worker = status["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["label"] == "idle")
            .unwrap_or_else(|| panic!("{status}"))
            .clone();
        assert_eq!(worker["pid"], pid, "{status}");
        assert_eq!(worker["unread"], 2, "the task and the steer: {status}");
    }
    let stopped = subagent(&b, json!({"action": "stop", "label": "idle"}));
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while support::herd::running(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!support::herd::running(pid), "the worker ended");
}

/// An admin's terminal on a node linked to A, opened, typed in, reattached and uploaded
/// to through B: B relays each request to A with the admin's own token, and A's answers
/// (refusals included) come back as they were.
#[test]
fn a_terminal_on_a_node_linked_to_one_is_used_through_the_other() {
    use support::node::{NodeProcess, wait_for_node};
    use support::terminal::{Auth, open, output_until, ready, type_in};

    let (_db, env) = shared_stores();
    let a = Server::start_with(Options {
        env,
        ..Options::default()
    });
    let b = a.start_beside();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let state = tmp.path().join("node-state");
    let gateway = format!("ws://{}", a.addr);
    let node = NodeProcess::start(
        &[
            "--gateway",
            &gateway,
            "--name",
            "shell-box",
            "--state",
            state.to_str().unwrap(),
        ],
        &[
            ("SHELL", std::path::Path::new("/bin/bash")),
            ("HOME", &home),
        ],
    );
    let id = node.connected_id();
    wait_for_node(&a, &id, |n| n["connected"] == true);
    assert!(a.ferry(&["node", "approve", &id]).status.success());
    wait_for_node(&b, &id, |n| n["connected"] == true);
    let path = |query: &str| format!("/v1/nodes/{id}/terminal?{query}");

    // A refusal before the upgrade is A's, as A gives it.
    let refused = client()
        .get(b.url(&path("cols=0&rows=24")))
        .bearer_auth(&b.token)
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let body: Value = refused.json().unwrap();
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");
    // Anyone but an admin hears of no such route, from B itself.
    let person = last_line(&a.ferry(&["token", "create", "me", "--kind", "person"]));
    let hidden = client()
        .get(b.url(&path("cols=80&rows=24")))
        .bearer_auth(&person)
        .send()
        .unwrap();
    assert_eq!(hidden.status().as_u16(), 404);

    let rt = support::node::runtime();
    rt.block_on(async {
        let (mut page, protocol) = open(
            &b.addr,
            &path("cols=80&rows=24"),
            Auth::Protocol(&b.token),
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}; node: {}", node.stderr()));
        assert_eq!(protocol.as_deref(), Some("ferry.terminal.v1"));
        let session = ready(&mut page).await;
        type_in(&mut page, b"echo relayed-$((6*7))\r").await;
        output_until(&mut page, b"relayed-42").await;
        // A reload through B reattaches to the same shell, its screen replayed.
        drop(page);
        let (mut page, _) = open(
            &b.addr,
            &path(&format!("cols=80&rows=24&session={session}")),
            Auth::Protocol(&b.token),
            &[],
        )
        .await
        .unwrap();
        assert_eq!(ready(&mut page).await, session);
        output_until(&mut page, b"relayed-42").await;
    });

    // A dropped file, staged on the node through B.
    let form = reqwest::blocking::multipart::Form::new().part(
        "file",
        reqwest::blocking::multipart::Part::bytes(b"dropped through B".to_vec())
            .file_name("a b.txt"),
    );
    let uploaded = client()
        .post(b.url(&format!("/v1/nodes/{id}/terminal/upload")))
        .bearer_auth(&b.token)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(uploaded.status().as_u16(), 200);
    let answer: Value = uploaded.json().unwrap();
    let staged = answer["files"][0]["path"].as_str().unwrap();
    assert_eq!(std::fs::read(staged).unwrap(), b"dropped through B");
    assert!(
        answer["files"][0]["quoted"]
            .as_str()
            .unwrap()
            .contains("a b.txt")
    );

    rt.block_on(async {
        let (mut page, _) = open(
            &b.addr,
            &path("cols=80&rows=24"),
            Auth::Protocol(&b.token),
            &[],
        )
        .await
        .unwrap();
        ready(&mut page).await;

        // A stops (not crashed): a page relayed to it ends when A falls silent, and a
        // new one is refused once A's mark stops moving; neither waits for A.
        let stopped = Stopped::new(&a);
        let page_ends = async {
            while let Some(Ok(message)) = page.next().await {
                if matches!(message, tokio_tungstenite::tungstenite::Message::Close(_)) {
                    break;
                }
            }
        };
        let refused = async {
            open(
                &b.addr,
                &path("cols=80&rows=24"),
                Auth::Protocol(&b.token),
                &[],
            )
            .await
        };
        let bound = Duration::from_secs(150);
        let (ended, refused) = tokio::join!(
            tokio::time::timeout(bound, page_ends),
            tokio::time::timeout(bound, refused)
        );
        drop(stopped);
        assert!(ended.is_ok(), "the relayed page outlived A's silence");
        match refused.expect("a terminal on a stopped holder was not refused") {
            Err((status, body)) => {
                assert_eq!(status, 503, "{body}");
                assert_eq!(body["error"]["code"], "node_offline", "{body}");
            }
            Ok(_) => panic!("a terminal opened on a stopped holder"),
        }
    });
    drop(node);
}

/// A gateway whose metadata is reached over verified TLS (its name and the run's own CA,
/// see `.ci/postgres`) serves as any other, and so do the commands beside it.
#[test]
fn a_gateway_reaches_its_metadata_over_verified_tls() {
    let db = PostgresDatabase::create();
    let ca = std::env::var("FERRY_TEST_POSTGRES_CA")
        .expect("FERRY_TEST_POSTGRES_CA: the test server's CA (.ci/postgres start sets it)");
    let url = format!("{}?sslmode=verify-full&sslrootcert={ca}", db.url());
    let server = Server::start_with(Options {
        env: vec![(METADATA_URL.to_owned(), url)],
        ..Options::default()
    });
    let (status, _) = upload(&server, &server.token, "over-tls.txt", b"sealed\n", None);
    assert_eq!(status, 201);
    let ready = client().get(server.url("/readyz")).send().unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let out = server.ferry(&["site", "check"]);
    assert!(out.status.success(), "{out:?}");
}

/// One JSON-RPC message posted to `/mcp` of `server`, in `session` when given: the
/// status, the session id answered, and the message answered (from JSON or from the
/// event stream), if any.
fn mcp_post(
    server: &Server,
    token: &str,
    session: Option<&str>,
    message: &Value,
) -> (u16, Option<String>, Option<Value>) {
    let mut request = client()
        .post(server.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(message);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let answer = request.send().unwrap();
    let status = answer.status().as_u16();
    let id = answer
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = answer.text().unwrap();
    let body = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .find_map(|data| serde_json::from_str::<Value>(data.trim()).ok());
    (status, id, body)
}

/// An MCP `initialize` request.
fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "balanced", "version": "1"}}})
}

/// An MCP session opened through one gateway goes on through the other (a harness
/// behind a balancer needs no sticky sessions): its messages are relayed to the
/// gateway holding it, which answers them, and closing it through the other closes it
/// there. A session whose holder is stopped is answered as gone, so the client opens a
/// new one.
#[test]
fn an_mcp_session_opened_on_one_goes_on_through_the_other() {
    let (_db, a, b) = pair();
    let harness = a.create_token("me", "harness");
    std::fs::write(a.home("me").join("hello.txt"), "hi\n").unwrap();
    let (status, session, answer) = mcp_post(&a, &harness, None, &initialize());
    assert_eq!(status, 200, "{answer:?}");
    let session = session.expect("a session id");
    let (status, _, _) = mcp_post(
        &b,
        &harness,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(status, 202);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "dir_list", "arguments": {"path": "."}}});
    let (status, _, answer) = mcp_post(&b, &harness, Some(&session), &call);
    assert_eq!(status, 200);
    let answer = answer.expect("an answer");
    assert_eq!(answer["id"], 2, "{answer}");
    assert!(
        answer["result"].to_string().contains("hello.txt"),
        "{answer}"
    );

    // Another token cannot use it through either gateway.
    let other = a.create_token("me", "harness");
    for gateway in [&a, &b] {
        let (status, _, _) = mcp_post(gateway, &other, Some(&session), &call);
        assert_eq!(status, 404);
    }

    // Closed through B, it is gone on A.
    let closed = client()
        .delete(b.url("/mcp"))
        .bearer_auth(&harness)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let (status, _, _) = mcp_post(&a, &harness, Some(&session), &call);
    assert_eq!(status, 404);

    // A holder that is stopped: its session is answered as gone, within seconds.
    let (_, session, _) = mcp_post(&a, &harness, None, &initialize());
    let session = session.unwrap();
    let stopped = Stopped::new(&a);
    let (status, _, _) = mcp_post(&b, &harness, Some(&session), &call);
    drop(stopped);
    assert_eq!(status, 404);
}
