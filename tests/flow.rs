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
    assert_eq!(out["results"][0].as_array().unwrap().len(), 11);
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
    let events = support::client()
        .get(server.url("/v1/events"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(events.status(), 200);
    std::thread::sleep(std::time::Duration::from_secs(1));
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
    let events = support::client()
        .get(server.url("/v1/events"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(events.status(), 200);
    std::thread::sleep(std::time::Duration::from_secs(1));
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
