//! The MCP test driver itself (tests/support/mcp.rs, tests/mcp/driver.py), proven
//! against a server built on the SDK's own server (tests/mcp/echo_server.py), so a
//! failing MCP test of ferry points at ferry, not at the harness. Every kind of answer
//! the ferry tests rely on is covered: text and structured results, isError results,
//! JSON-RPC errors, image content, each elicitation answer, and streamable HTTP with a
//! bearer token.
//!
//! Needs tests/mcp/.venv (`tests/mcp/setup`; .ci/run runs it).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use support::mcp;

/// The echo server on stdio.
fn echo_stdio() -> Value {
    let script = mcp::mcp_dir().join("echo_server.py");
    mcp::stdio(
        &[mcp::python().to_str().unwrap(), script.to_str().unwrap()],
        &[],
    )
}

/// The echo server on streamable HTTP, requiring `token`; killed on drop.
struct EchoHttp {
    child: Child,
    url: String,
}

impl EchoHttp {
    fn start(token: &str) -> EchoHttp {
        let mut child = Command::new(mcp::python())
            .arg(mcp::mcp_dir().join("echo_server.py"))
            .args(["--http", "--token", token])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the echo server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_owned();
        assert!(
            url.starts_with("http://127.0.0.1:"),
            "the echo server printed {url:?}"
        );
        EchoHttp { child, url }
    }
}

impl Drop for EchoHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_kind_of_answer_over_stdio() {
    let out = mcp::drive(&json!({
        "server": echo_stdio(),
        "elicitation": null,
        "steps": [
            mcp::list_tools(),
            mcp::call("echo", json!({ "text": "hello" })),
            mcp::call("add", json!({ "a": 2, "b": 3 })),
            mcp::call("fail", json!({ "message": "no such file" })),
            mcp::call("refuse", json!({})),
            mcp::call("image", json!({})),
            mcp::sleep(0.1),
            mcp::call("whoami", json!({})),
        ],
    }));

    let init = &out["initialize"];
    assert_eq!(init["serverInfo"]["name"], "echo", "{init}");
    assert_eq!(
        init["instructions"],
        "Echoes what it is sent; the driver's tests use it."
    );
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert!(init["protocolVersion"].is_string(), "{init}");

    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 8, "one result per step: {out}");

    let echo = mcp::tool(&results[0], "echo");
    assert_eq!(echo["description"], "Returns `text` unchanged.");
    assert_eq!(echo["inputSchema"]["required"], json!(["text"]), "{echo}");
    mcp::tool(&results[0], "confirm");

    assert_eq!(mcp::text_of(&results[1]), "hello");
    assert!(!mcp::is_error(&results[1]));

    assert_eq!(results[2]["structuredContent"], json!({ "result": 5 }));

    assert!(mcp::is_error(&results[3]), "{}", results[3]);
    assert!(
        mcp::text_of(&results[3]).contains("no such file"),
        "{}",
        results[3]
    );
    assert_eq!(mcp::protocol_error(&results[3]), None);

    assert_eq!(
        mcp::protocol_error(&results[4]),
        Some((-32602, "refused at the protocol level".to_owned())),
        "{}",
        results[4]
    );

    let image = &results[5]["content"][0];
    assert_eq!(image["type"], "image", "{image}");
    assert_eq!(image["mimeType"], "image/png", "{image}");
    // base64 of the echo server's IMAGE_BYTES.
    assert_eq!(image["data"], "iVBORw0KGgpub3QgcmVhbGx5IGEgcGljdHVyZQ==");

    assert_eq!(results[6], Value::Null, "sleep has no result");
    assert_eq!(mcp::text_of(&results[7]), "none", "stdio has no headers");
    assert_eq!(out["elicitations"], json!([]));
}

#[test]
fn elicitation_each_answer() {
    let ask = [mcp::call(
        "confirm",
        json!({ "what": "deleting notes.txt" }),
    )];

    // No elicitation support declared: the server cannot ask, and says so.
    let out = mcp::drive(&json!({ "server": echo_stdio(), "elicitation": null, "steps": ask }));
    assert!(mcp::is_error(&out["results"][0]), "{out}");
    assert!(
        mcp::text_of(&out["results"][0]).contains("no approval channel"),
        "{out}"
    );
    assert_eq!(out["elicitations"], json!([]));

    // One session per answer, side by side: each starts two Python processes.
    let answers = [
        ("accept", "accept confirm=True"),
        ("decline", "decline"),
        ("cancel", "cancel"),
    ];
    let outs: Vec<Value> = std::thread::scope(|scope| {
        let sessions: Vec<_> = answers
            .iter()
            .map(|(answer, _)| {
                let input = json!({ "server": echo_stdio(), "elicitation": answer, "steps": ask });
                scope.spawn(move || mcp::drive(&input))
            })
            .collect();
        sessions.into_iter().map(|s| s.join().unwrap()).collect()
    });
    for ((answer, said), out) in answers.iter().zip(&outs) {
        assert_eq!(mcp::text_of(&out["results"][0]), *said, "{answer}: {out}");
        let asked = out["elicitations"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{answer}: {out}");
        assert_eq!(asked[0]["message"], "Approve deleting notes.txt?");
        assert_eq!(
            asked[0]["requestedSchema"]["properties"]["confirm"]["type"], "boolean",
            "{answer}: {out}"
        );
    }
}

#[test]
fn streamable_http_with_a_bearer_token() {
    let server = EchoHttp::start("s3cret");

    let out = mcp::drive(&json!({
        "server": mcp::http(&server.url, "s3cret"),
        "elicitation": "accept",
        "steps": [
            mcp::call("whoami", json!({})),
            mcp::call("confirm", json!({ "what": "it" })),
        ],
    }));
    assert_eq!(mcp::text_of(&out["results"][0]), "Bearer s3cret");
    assert_eq!(mcp::text_of(&out["results"][1]), "accept confirm=True");
    assert_eq!(out["elicitations"][0]["message"], "Approve it?");

    // A refused token is no session at all: the driver fails and says why.
    let refused = mcp::try_drive(&json!({
        "server": mcp::http(&server.url, "wrong"),
        "steps": [mcp::list_tools()],
    }));
    let stderr = refused.expect_err("a wrong token must not give a session");
    assert!(stderr.contains("did not initialize"), "{stderr}");
}

#[test]
fn a_server_that_does_not_start_is_a_clear_failure() {
    let refused = mcp::try_drive(&json!({
        "server": mcp::stdio(&["/nonexistent/mcp-server"], &[]),
        "steps": [],
    }));
    let stderr = refused.expect_err("no server, no session");
    assert!(stderr.contains("No such file"), "{stderr}");
}
