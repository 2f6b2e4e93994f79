//! T-FLOW end to end (spec tools.md): an agent drafts in tmp/, builds with
//! `terminal_run`, moves the result to artifacts/, delivers it; `GET /v1/artifacts`
//! lists both, and the member sees the file in the Files panel's listing. The agent
//! speaks MCP over the gateway's `/mcp` with a harness token.

mod support;

use serde_json::{Value, json};
use support::mcp::{self, call, is_error, text_of};
use support::{Options, Server, get_json, list_files, listed_paths};

fn gateway() -> (Server, String) {
    let server = Server::start_with(Options {
        as_nobody: true,
        ..Options::default()
    });
    let out = server.ferry(&["token", "create", "me", "--kind", "harness"]);
    assert!(out.status.success(), "{out:?}");
    let harness = support::last_line(&out);
    (server, harness)
}

fn session(server: &Server, token: &str, elicitation: Option<&str>, steps: Vec<Value>) -> Value {
    mcp::drive(&json!({
        "server": mcp::http(&server.url("/mcp"), token),
        "elicitation": elicitation,
        "steps": steps,
        "timeout_secs": 120,
    }))
}

#[test]
fn draft_build_move_deliver_and_the_member_sees_it() {
    let (server, harness) = gateway();
    let data = server.data.canonicalize().unwrap();
    let tmp = data.join("private/people/me/tmp/q3-report");
    let artifacts = data.join("private/people/me/artifacts/q3-report");
    let out = session(
        &server,
        &harness,
        None,
        vec![
            call(
                "file_write",
                json!({"path": tmp.join("draft.md"), "content": "# Q3\ndraft numbers\n"}),
            ),
            call(
                "terminal_run",
                json!({
                    "command": format!("sed s/draft/final/ draft.md > report.md && mkdir -p {0} && mv report.md {0}/", artifacts.display()),
                    "cwd": tmp,
                }),
            ),
            call(
                "file_deliver",
                json!({"paths": [artifacts.join("report.md")]}),
            ),
        ],
    );
    let r = out["results"].as_array().unwrap();
    for (i, result) in r.iter().enumerate() {
        assert!(!is_error(result), "step {i}: {result}");
    }
    assert_eq!(r[1]["structuredContent"]["exitCode"], 0, "{}", r[1]);
    let delivered = text_of(&r[2]);
    assert!(
        delivered.contains("📎 report.md — public/attachments/report.md"),
        "{delivered}"
    );
    let final_text = "# Q3\nfinal numbers\n";
    let sha = support::sha256_hex(final_text.as_bytes());

    let (status, manifest) = get_json(&server.url("/v1/artifacts"), &server.token);
    assert_eq!(status, 200, "{manifest}");
    let records = manifest["artifacts"].as_array().unwrap();
    let artifact = records
        .iter()
        .find(|a| a["kind"] == "artifact")
        .unwrap_or_else(|| panic!("no artifact record: {manifest}"));
    assert_eq!(artifact["slug"], "q3-report");
    assert_eq!(
        artifact["path"], "private/people/me/artifacts/q3-report/report.md",
        "workspace-relative, never where the site lives on the host"
    );
    assert_eq!(artifact["sha256"], sha);
    assert_eq!(artifact["size"], final_text.len());
    assert!(support::is_rfc3339(artifact["created"].as_str().unwrap()));
    let delivery = records.iter().find(|a| a["kind"] == "delivery").unwrap();
    assert_eq!(delivery["deliveredAs"], "public/attachments/report.md");
    assert_eq!(delivery["sha256"], sha);

    let listing = list_files(&server, &server.token, None);
    assert!(
        listed_paths(&listing).contains(&"public/attachments/report.md".to_owned()),
        "{listing}"
    );
    let body = support::client()
        .get(server.url("/v1/files/content?path=public/attachments/report.md"))
        .bearer_auth(&server.token)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(body, final_text);

    // A second listing of the manifest records nothing twice.
    let (_, again) = get_json(&server.url("/v1/artifacts"), &server.token);
    assert_eq!(again["artifacts"].as_array().unwrap().len(), records.len());
}

#[test]
fn file_deliver_names_files_safely_and_checks_every_source_first() {
    let (server, harness) = gateway();
    let home = server.data.join("home/me");
    let out = session(
        &server,
        &harness,
        None,
        vec![
            call(
                "file_write",
                json!({"path": "Q2 report (final).txt", "content": "q2\n"}),
            ),
            call(
                "file_deliver",
                json!({"paths": ["Q2 report (final).txt", "missing.txt"]}),
            ),
            call("file_deliver", json!({"paths": ["Q2 report (final).txt"]})),
            call("file_deliver", json!({"paths": ["memory"]})),
            call("file_deliver", json!({"paths": []})),
            call(
                "file_deliver",
                json!({"paths": ["Q2 report (final).txt"], "project": "nope"}),
            ),
        ],
    );
    let r = out["results"].as_array().unwrap();
    assert!(is_error(&r[1]));
    assert!(
        !home
            .join("public/attachments/Q2_report_final_.txt")
            .exists()
            || !is_error(&r[2])
    );
    assert!(!is_error(&r[2]), "{}", r[2]);
    assert!(
        text_of(&r[2])
            .contains("📎 Q2_report_final_.txt — public/attachments/Q2_report_final_.txt")
    );
    assert_eq!(
        std::fs::read_to_string(home.join("public/attachments/Q2_report_final_.txt")).unwrap(),
        "q2\n"
    );
    assert_eq!(r[3]["structuredContent"]["error"]["code"], "not_a_file");
    assert!(is_error(&r[4]));
    assert_eq!(
        r[5]["structuredContent"]["error"]["code"],
        "unknown_project"
    );
}

#[test]
fn mcp_over_http_needs_a_harness_token() {
    let (server, harness) = gateway();
    let out = session(&server, &harness, None, vec![mcp::list_tools()]);
    assert_eq!(out["results"][0].as_array().unwrap().len(), 12);
    assert!(
        out["initialize"]["instructions"]
            .as_str()
            .unwrap()
            .contains("public/attachments/")
    );
    for token in [server.token.as_str(), "fy_not_a_token", ""] {
        let refused = mcp::try_drive(&json!({
            "server": mcp::http(&server.url("/mcp"), token),
            "elicitation": null,
            "steps": [mcp::list_tools()],
            "timeout_secs": 20,
        }));
        assert!(refused.is_err(), "token {token:?} was let in: {refused:?}");
    }
    // A browser on another origin is refused.
    let response = support::client()
        .post(server.url("/mcp"))
        .bearer_auth(&harness)
        .header("Origin", "http://evil.example")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .unwrap();
    assert_eq!(response.status(), 403);
}

/// `/mcp` speaks JSON-RPC about what it cannot read, says which token it wants, and
/// answers to its own names only (issue 13's protocol fixes).
#[test]
fn mcp_over_http_speaks_json_rpc_and_answers_to_its_own_names() {
    let (server, harness) = gateway();
    let port = server
        .base
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let post = |token: &str, headers: &[(&str, String)], body: &str| {
        let mut request = support::client()
            .post(server.url("/mcp"))
            .bearer_auth(token)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.body(body.to_owned()).send().unwrap();
        let status = response.status().as_u16();
        let kind = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, kind, response.text().unwrap())
    };
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"test","version":"1"}}}"#;

    // Not JSON: the parse error; JSON but no message: the invalid request.
    for (body, code) in [
        ("{\"jsonrpc\":\"2.0\",", -32700),
        ("not json at all", -32700),
        ("", -32700),
        ("{}", -32600),
        ("[1, 2]", -32600),
        (
            "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"tools/list\"}",
            -32600,
        ),
    ] {
        let (status, kind, text) = post(&harness, &[], body);
        assert_eq!(status, 400, "{body:?}: {text}");
        assert!(kind.starts_with("application/json"), "{body:?}: {kind}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["jsonrpc"], "2.0", "{text}");
        assert_eq!(answer["id"], Value::Null, "{text}");
        assert_eq!(answer["error"]["code"], code, "{body:?}: {text}");
    }

    // A person's token is told which token /mcp takes.
    let (status, _, text) = post(&server.token, &[], initialize);
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("--kind harness"), "{text}");

    // Its own names, with an Origin or without one.
    for origin in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let (status, _, text) = post(&harness, &[("Origin", origin.clone())], initialize);
        assert_eq!(status, 200, "{origin}: {text}");
    }
    for origin in [
        "http://evil.example".to_owned(),
        format!("http://localhost:{}", port.parse::<u16>().unwrap() + 1),
    ] {
        let (status, _, text) = post(&harness, &[("Origin", origin.clone())], initialize);
        assert_eq!(status, 403, "{origin}: {text}");
        // In the one error shape, as every refusal of this API.
        let error: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(
            error["error"]["code"], "host_not_allowed",
            "{origin}: {text}"
        );
    }
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let (status, _, text) = post(&harness, &[("Host", host.clone())], initialize);
        assert_eq!(status, 200, "{host}: {text}");
    }
    // A rebinding page: another domain's name for the same address, and no Origin.
    for host in [
        format!("rebind.example:{port}"),
        "localhost.rebind.example".to_owned(),
    ] {
        let (status, _, text) = post(&harness, &[("Host", host.clone())], initialize);
        assert_eq!(status, 403, "{host}: {text}");
        assert!(text.contains("host_not_allowed"), "{text}");
    }

    // An unknown tool is JSON-RPC's invalid params, not a tool's failure.
    let out = session(
        &server,
        &harness,
        None,
        vec![call("file_frobnicate", json!({}))],
    );
    let (code, message) =
        mcp::protocol_error(&out["results"][0]).unwrap_or_else(|| panic!("{}", out["results"][0]));
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("no tool `file_frobnicate`"), "{message}");
}

#[test]
fn file_delete_and_file_pick_reach_the_person_through_the_web_client() {
    let (server, harness) = gateway();
    let home = server.data.join("home/me");
    let out = session(
        &server,
        &harness,
        None,
        vec![
            call("file_write", json!({"path": "old.txt", "content": "old"})),
            call("file_write", json!({"path": "keep.txt", "content": "keep"})),
            // No page open yet: nobody to ask.
            call("file_delete", json!({"path": "old.txt"})),
            call("file_pick", json!({"prompt": "Pick the CSV"})),
        ],
    );
    assert_eq!(
        out["results"][2]["structuredContent"]["error"]["code"],
        "no_approval_channel"
    );
    assert_eq!(
        out["results"][3]["structuredContent"]["error"]["code"],
        "no_pick_channel"
    );
    assert!(home.join("old.txt").exists());

    // The person opens the web client: its events stream is the channel.
    let events = open_page(&server);
    let person = support::answer_as_the_person(
        &server.base,
        &server.token,
        &[("old.txt", true), ("keep.txt", false)],
        ("sales data.csv", b"a,b\n1,2\n"),
    );
    let out = session(
        &server,
        &harness,
        None,
        vec![
            call("file_delete", json!({"path": "old.txt"})),
            call("file_delete", json!({"path": "keep.txt"})),
            call("file_pick", json!({"prompt": "Pick the CSV"})),
        ],
    );
    assert_eq!(person.join().unwrap(), 3);
    let r = out["results"].as_array().unwrap();
    assert!(!is_error(&r[0]), "{}", r[0]);
    assert!(!home.join("old.txt").exists());
    assert_eq!(
        r[1]["structuredContent"]["error"]["code"], "denied",
        "{}",
        r[1]
    );
    assert!(home.join("keep.txt").exists());
    assert!(!is_error(&r[2]), "{}", r[2]);
    let picked = r[2]["structuredContent"]["path"].as_str().unwrap();
    let picks = server
        .data
        .canonicalize()
        .unwrap()
        .join("private/people/me/tmp/picks");
    assert!(std::path::Path::new(picked).starts_with(&picks), "{picked}");
    assert!(picked.ends_with("sales_data.csv"), "{picked}");
    assert_eq!(std::fs::read(picked).unwrap(), b"a,b\n1,2\n");
    assert!(support::is_rfc3339(
        r[2]["structuredContent"]["expires"].as_str().unwrap()
    ));
    // The agent gets the workspace path and expiry only: the person's own path is not there.
    assert!(!text_of(&r[2]).contains("sales data"));
    // The agent reads it like any workspace file.
    let read = session(
        &server,
        &harness,
        None,
        vec![call("file_read", json!({"path": picked}))],
    );
    assert!(text_of(&read["results"][0]).contains("1,2"));
    drop(events);
}

#[test]
fn file_delete_asks_through_elicitation_over_http_too() {
    let (server, harness) = gateway();
    let home = server.data.join("home/me");
    let setup = session(
        &server,
        &harness,
        None,
        vec![
            call("file_write", json!({"path": "a.txt", "content": "a"})),
            call("file_write", json!({"path": "b.txt", "content": "b"})),
        ],
    );
    assert!(!is_error(&setup["results"][1]));
    let out = session(
        &server,
        &harness,
        Some("decline"),
        vec![call("file_delete", json!({"path": "a.txt"}))],
    );
    assert_eq!(
        out["results"][0]["structuredContent"]["error"]["code"], "denied",
        "{out}"
    );
    assert!(home.join("a.txt").exists());
    let out = session(
        &server,
        &harness,
        Some("accept"),
        vec![call("file_delete", json!({"path": "b.txt"}))],
    );
    assert!(!is_error(&out["results"][0]), "{out}");
    assert!(!home.join("b.txt").exists());
    assert_eq!(out["elicitations"].as_array().unwrap().len(), 1, "{out}");
}

/// Every string in `value`, keys included.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(strings(v)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Asserts that nothing in `value` names the site's folder on the host or is absolute.
fn assert_no_host_path(value: &Value, data: &std::path::Path, server: &Server) {
    let hosts = [
        data.to_str().unwrap().to_owned(),
        server.data.to_str().unwrap().to_owned(),
    ];
    for s in strings(value) {
        assert!(
            !hosts.iter().any(|h| s.contains(h.as_str())) && !s.starts_with('/'),
            "a host path reaches the person: {s:?} in {value}"
        );
    }
}

#[test]
fn artifacts_approvals_and_elicitations_name_no_host_path() {
    let (server, harness) = gateway();
    let data = server.data.canonicalize().unwrap();
    let artifact = data.join("private/people/me/artifacts/q4/report.md");
    let spoof = "public/attachments/invoice_\u{202E}fdp.exe";
    let out = session(
        &server,
        &harness,
        Some("accept"),
        vec![
            call("file_write", json!({"path": artifact, "content": "# Q4\n"})),
            call("file_deliver", json!({"paths": [artifact]})),
            call("file_write", json!({"path": spoof, "content": "MZ"})),
            call("file_delete", json!({"path": spoof})),
            call("file_delete", json!({"path": artifact})),
        ],
    );
    for (i, result) in out["results"].as_array().unwrap().iter().enumerate() {
        assert!(!is_error(result), "step {i}: {result}");
    }
    // The client shows the question to a person: relative, and the override visible.
    let asked = &out["elicitations"][0];
    assert_no_host_path(asked, &data, &server);
    let message = asked["message"].as_str().unwrap();
    assert!(
        message.contains("public/attachments/invoice_⟨U+202E⟩fdp.exe")
            && !message.contains('\u{202E}'),
        "{message}"
    );
    assert!(
        message.ends_with("(2 bytes) from your workspace."),
        "{message}"
    );
    let private = &out["elicitations"][1];
    assert_no_host_path(private, &data, &server);
    assert_eq!(
        private["message"],
        "The agent asks to delete private/people/me/artifacts/q4/report.md (5 bytes) from your \
         private folder."
    );
    let described = asked["requestedSchema"]["properties"]["confirm"]["description"]
        .as_str()
        .unwrap();
    assert_eq!(described, "public/attachments/invoice_⟨U+202E⟩fdp.exe");

    let (status, manifest) = get_json(&server.url("/v1/artifacts"), &server.token);
    assert_eq!(status, 200, "{manifest}");
    assert_no_host_path(&manifest, &data, &server);
    let paths: Vec<&str> = manifest["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"private/people/me/artifacts/q4/report.md"),
        "{manifest}"
    );

    // Without elicitation the web client asks: its request names no host path either,
    // and its sentence shows the newline and the look-alike slash.
    let events = open_page(&server);
    let tricky = "public/attachments/notes\n📎 report\u{2215}final.pdf";
    let (base, token) = (server.base.clone(), server.token.clone());
    let person = std::thread::spawn(move || {
        let client = support::client();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let pending: Value = client
                .get(format!("{base}/v1/interactions"))
                .bearer_auth(&token)
                .send()
                .unwrap()
                .json()
                .unwrap();
            if let Some(item) = pending["interactions"].as_array().unwrap().first() {
                let id = item["id"].as_str().unwrap();
                let answer = client
                    .post(format!("{base}/v1/approvals/{id}"))
                    .bearer_auth(&token)
                    .json(&json!({"approve": true}))
                    .send()
                    .unwrap();
                assert_eq!(answer.status(), 200);
                return pending;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("no approval was asked within a minute");
    });
    let out = session(
        &server,
        &harness,
        None,
        vec![
            call("file_write", json!({"path": tricky, "content": "x"})),
            call("file_delete", json!({"path": tricky})),
        ],
    );
    let pending = person.join().unwrap();
    drop(events);
    assert!(!is_error(&out["results"][1]), "{}", out["results"][1]);
    assert!(!data.join("home/me").join(tricky).exists());
    assert_no_host_path(&pending, &data, &server);
    let item = &pending["interactions"][0];
    assert_eq!(
        item["subject"], tricky,
        "the subject is the exact relative path"
    );
    let summary = item["summary"].as_str().unwrap();
    assert!(
        summary.contains("notes⟨U+000A⟩📎 report⟨U+2215⟩final.pdf") && !summary.contains('\n'),
        "{summary}"
    );
}

/// A raw MCP client of `/mcp` on protocol 2025-06-18, where a session is named by the
/// `Mcp-Session-Id` header: the hostile side of the session tests.
struct RawSession<'a> {
    server: &'a Server,
    token: String,
    id: String,
}

const PROTOCOL: &str = "2025-06-18";

/// `method` on `/mcp` with `token` and, when given, a session header.
fn mcp_request(
    server: &Server,
    method: reqwest::Method,
    token: &str,
    session: Option<&str>,
    body: Option<&Value>,
) -> reqwest::blocking::Response {
    let mut request = support::client()
        .request(method, server.url("/mcp"))
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", PROTOCOL);
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    if let Some(body) = body {
        request = request
            .header("Content-Type", "application/json")
            .body(body.to_string());
    }
    request.send().unwrap()
}

/// The first JSON-RPC message of an SSE answer (priming events carry no data).
fn first_message(events: &mut support::SseStream) -> Value {
    loop {
        let event = events.expect_event(std::time::Duration::from_secs(30));
        if !event.data.is_empty() {
            return event.json();
        }
    }
}

impl<'a> RawSession<'a> {
    /// Opens a session (initialize, then initialized) that offers elicitation.
    fn open(server: &'a Server, token: &str) -> RawSession<'a> {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw", "version": "1"},
        }});
        let response = mcp_request(server, reqwest::Method::POST, token, None, Some(&init));
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let answer = first_message(&mut support::SseStream::new(response));
        assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        let session = RawSession {
            server,
            token: token.to_owned(),
            id,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(session.post(&initialized).status(), 202);
        session
    }

    fn post(&self, body: &Value) -> reqwest::blocking::Response {
        mcp_request(
            self.server,
            reqwest::Method::POST,
            &self.token,
            Some(&self.id),
            Some(body),
        )
    }

    /// Sends request `id` and returns its answer stream.
    fn request(&self, id: i64, method: &str, params: Value) -> support::SseStream {
        let response =
            self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        assert_eq!(response.status(), 200, "{method}");
        support::SseStream::new(response)
    }

    fn call(&self, id: i64, name: &str, arguments: Value) -> Value {
        let answer = first_message(&mut self.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        ));
        assert!(answer["result"].is_object(), "{name}: {answer}");
        answer["result"].clone()
    }
}

/// What the server answers `token` for `method` on session `session`: status and body.
fn on_session(
    server: &Server,
    method: reqwest::Method,
    token: &str,
    session: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let response = mcp_request(server, method, token, Some(session), body);
    (response.status().as_u16(), response.text().unwrap())
}

#[test]
fn an_mcp_session_answers_only_the_token_that_opened_it() {
    let (server, _) = gateway();
    server.add_person("alice");
    server.add_person("bob");
    let alice = server.create_token("alice", "harness");
    let bob = server.create_token("bob", "harness");
    // Another harness token of alice herself is another principal.
    let alice_other = server.create_token("alice", "harness");
    // The CLI ran as root; the gateway runs as nobody, on a site that is theirs.
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{0}:{0}", support::NOBODY)])
        .arg(&server.data)
        .status()
        .unwrap();
    assert!(status.success());
    let precious = server.home("alice").join("precious.txt");

    let session = RawSession::open(&server, &alice);
    let wrote = session.call(
        2,
        "file_write",
        json!({"path": "precious.txt", "content": "keep me"}),
    );
    assert_eq!(wrote["isError"], false, "{wrote}");
    assert!(precious.exists(), "{wrote}");

    // alice's agent asks to delete; the question waits on her call's stream.
    let mut delete = session.request(
        3,
        "tools/call",
        json!({"name": "file_delete", "arguments": {"path": "precious.txt"}}),
    );
    let question = first_message(&mut delete);
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let question_id = question["id"].clone();
    let approve = json!({"jsonrpc": "2.0", "id": question_id,
                         "result": {"action": "accept", "content": {"confirm": true}}});

    // What a session nobody opened is answered: the answer every foreign request gets.
    let never = "0b6a4d2e-9a39-4c57-8d0e-5a1f00c0ffee";
    let unknown = on_session(&server, reqwest::Method::GET, &bob, never, None);
    assert_eq!(unknown, (404, "Not Found: Session not found".to_owned()));
    let tools_call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                            "params": {"name": "file_delete", "arguments": {"path": "precious.txt"}}});
    for intruder in [&bob, &alice_other] {
        for (method, body) in [
            // (a) answering alice's pending question: approving the delete
            (reqwest::Method::POST, Some(&approve)),
            // (b) opening her session's stream
            (reqwest::Method::GET, None),
            // (c) ending her session
            (reqwest::Method::DELETE, None),
            // (d) calling a tool in her session
            (reqwest::Method::POST, Some(&tools_call)),
        ] {
            let answer = on_session(&server, method.clone(), intruder, &session.id, body);
            assert_eq!(answer, unknown, "{method} by another token");
        }
    }
    assert!(precious.exists(), "a foreign answer deleted alice's file");

    // alice's own session still works, and her own answer is the one that counts.
    let declined = json!({"jsonrpc": "2.0", "id": question_id, "result": {"action": "decline"}});
    assert_eq!(session.post(&declined).status(), 202);
    let result = first_message(&mut delete);
    assert_eq!(
        result["result"]["structuredContent"]["error"]["code"], "denied",
        "{result}"
    );
    assert!(precious.exists());
    let tools = first_message(&mut session.request(4, "tools/list", json!({})));
    assert_eq!(
        tools["result"]["tools"].as_array().unwrap().len(),
        12,
        "{tools}"
    );

    // A revoked token is refused on its own session.
    let other_session = RawSession::open(&server, &alice_other);
    let out = server.ferry(&["token", "revoke", &alice_other[..12]]);
    assert!(out.status.success(), "{out:?}");
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
    let (status, _) = on_session(
        &server,
        reqwest::Method::POST,
        &alice_other,
        &other_session.id,
        Some(&list),
    );
    assert_eq!(status, 401);

    // A session alice ends is forgotten: even she cannot use it again.
    let (status, _) = on_session(&server, reqwest::Method::DELETE, &alice, &session.id, None);
    assert_eq!(status, 202);
    let after = on_session(
        &server,
        reqwest::Method::POST,
        &alice,
        &session.id,
        Some(&list),
    );
    assert_eq!(after, unknown);

    // No level the server logs at by default shows a session id.
    let log = server.log();
    for id in [&session.id, &other_session.id] {
        assert!(
            !log.contains(id.as_str()),
            "the log shows session {id}:\n{log}"
        );
    }
}

/// `initialize` on `/mcp` with `token`, without a session: status, session id, and the
/// JSON body of a refusal.
fn initialize(server: &Server, token: &str) -> (u16, Option<String>, Value) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }});
    let response = mcp_request(server, reqwest::Method::POST, token, None, Some(&init));
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|id| id.to_str().unwrap().to_owned());
    let status = response.status().as_u16();
    if status == 200 {
        return (status, id, Value::Null);
    }
    let (status, body) = support::json_answer(response);
    (status, id, body)
}

#[test]
fn an_mcp_token_holds_at_most_thirty_two_sessions_and_a_closed_one_frees_its_place() {
    const MAX: usize = 32;
    let (server, harness) = gateway();
    let other = server.create_token("me", "harness");
    // limit − 1 and limit are opened …
    let sessions: Vec<RawSession> = (0..MAX)
        .map(|_| RawSession::open(&server, &harness))
        .collect();
    // … limit + 1 is refused in the one error shape, and makes no session.
    let (status, id, body) = initialize(&server, &harness);
    support::assert_error(status, &body, 429, "too_many_sessions");
    assert_eq!(id, None, "a refused initialize named a session");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("DELETE"), "{message}");
    // Every session still answers, and another token of the same person is not held up.
    let tools = first_message(&mut sessions[0].request(2, "tools/list", json!({})));
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    let others: Vec<RawSession> = (0..2).map(|_| RawSession::open(&server, &other)).collect();

    // A DELETE frees one place, and only one.
    let (status, _) = on_session(
        &server,
        reqwest::Method::DELETE,
        &harness,
        &sessions[MAX - 1].id,
        None,
    );
    assert_eq!(status, 202);
    let (status, id, body) = initialize(&server, &harness);
    assert_eq!(status, 200, "{body}");
    assert!(id.is_some());
    let (status, _, body) = initialize(&server, &harness);
    support::assert_error(status, &body, 429, "too_many_sessions");
    drop(others);
}

/// The person's web client, as far as the gateway can tell: its events stream, open (and
/// seen for a moment) until the answer is dropped.
fn open_page(server: &Server) -> reqwest::blocking::Response {
    let events = support::client()
        .get(server.url("/v1/events"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(events.status(), 200);
    std::thread::sleep(std::time::Duration::from_secs(1));
    events
}

/// One failure, one code: the member API and the tools at `/mcp` answer the same real
/// failure with the same code, whichever edge meets it.
#[test]
fn the_same_failure_has_the_same_code_over_http_and_mcp() {
    let server = Server::start_with(Options {
        as_nobody: true,
        config_toml: Some("[deliveries]\nmax_bytes = 1000\n".to_owned()),
        ..Options::default()
    });
    let harness =
        support::last_line(&server.ferry(&["token", "create", "me", "--kind", "harness"]));
    let member = server.create_token("me", "person");
    // The gateway makes the person's public/ (as its own user) on first use.
    list_files(&server, &member, None);
    let public = server.home("me").join("public");
    std::fs::create_dir_all(public.join("folder")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), public.join("out")).unwrap();
    std::fs::write(server.home("me").join("big.bin"), vec![b'b'; 1001]).unwrap();
    let peer = support::Peer::start(|_| support::Reply::ok(vec![b'b'; 1001]));

    let http = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
        let mut request = support::client()
            .request(method, server.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, body) = support::json_answer(request.send().unwrap());
        (status, support::error_code(&body).to_owned())
    };
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    let over_http = [
        http(
            post.clone(),
            "/v1/files/mkdir",
            &member,
            Some(json!({"path": "public/out/new"})),
        ),
        http(
            get.clone(),
            "/v1/files/content?path=public/missing.txt",
            &member,
            None,
        ),
        http(get, "/v1/files/content?path=public/folder", &member, None),
        http(
            post,
            "/v1/deliveries",
            &harness,
            Some(json!({"url": peer.url("/big.bin")})),
        ),
    ];
    let session = RawSession::open(&server, &harness);
    let over_mcp = [
        session.call(
            2,
            "file_write",
            json!({"path": "public/out/new.txt", "content": "x"}),
        ),
        session.call(3, "file_read", json!({"path": "public/missing.txt"})),
        session.call(4, "file_read", json!({"path": "public/folder"})),
        session.call(5, "file_deliver", json!({"paths": ["big.bin"]})),
    ];
    let expected = [
        (400, "path_escapes"),
        (404, "not_found"),
        (400, "is_directory"),
        (413, "too_large"),
    ];
    for ((expected, (status, http_code)), result) in expected.iter().zip(&over_http).zip(&over_mcp)
    {
        assert_eq!((*status, http_code.as_str()), *expected, "over HTTP");
        assert!(is_error(result), "{result}");
        assert_eq!(
            result["structuredContent"]["error"]["code"], expected.1,
            "over MCP: {result}"
        );
    }
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
}

/// A file's type is judged once (ferry-preview's detector): the download's
/// `Content-Type` and `file_preview`'s `mediaType` agree, names that lie included.
#[test]
fn a_download_and_file_preview_name_the_same_type() {
    let (server, harness) = gateway();
    let public = server.data.join("home/me/public");
    let png: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
        0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ];
    let files: [(&str, &[u8]); 9] = [
        ("notes.txt", b"plain words\n"),
        ("notes.png", b"plain text behind an image name\n"),
        ("table.csv", b"a,b\n1,2\n"),
        ("data.json", b"{\"a\": [1, 2]}"),
        ("page.md", b"# Title\n"),
        ("latin1.txt", b"caf\xe9\n"),
        ("photo.txt", png),
        ("doc.pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"),
        ("blob.bin", &[0, 1, 2, 3, 0, 0, 7, 255]),
    ];
    for (name, bytes) in files {
        support::write_file(&public.join(name), bytes);
        // As the server (nobody) would have written them.
        std::os::unix::fs::chown(public.join(name), Some(65534), Some(65534)).unwrap();
    }
    std::os::unix::fs::chown(&public, Some(65534), Some(65534)).unwrap();
    let steps = files
        .iter()
        .map(|(name, _)| call("file_preview", json!({"path": format!("public/{name}")})))
        .collect();
    let out = session(&server, &harness, None, steps);
    let previews = out["results"].as_array().unwrap();
    let http = support::client();
    for ((name, _), preview) in files.iter().zip(previews) {
        assert!(!is_error(preview), "{name}: {preview}");
        let response = http
            .get(server.url(&format!("/v1/files/content?path=public/{name}")))
            .bearer_auth(&server.token)
            .send()
            .unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        let essence = content_type.split(';').next().unwrap().trim();
        assert_eq!(
            preview["structuredContent"]["mediaType"], essence,
            "{name}: the download says {content_type}"
        );
    }
}
