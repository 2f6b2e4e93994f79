//! Pairing administration (spec nodes N-ADMIN) through the real binary: `ferry node
//! list|approve|revoke` on the data dir and the admin's HTTP routes of a running gateway.
//!
//! Until the link endpoint exists, nodes come in the way the link will record them: a
//! hello given to the site's own `record_hello`, from this test, on the same data dir.

mod support;

use ferry_site::NodeHello;
use serde_json::{Value, json};
use support::{Server, assert_error, client, get_json, json_answer, post_json};

/// Records a hello from the key whose hex digits are all `digit`; returns the node id.
fn hello(server: &Server, digit: char, name: &str, commands: &[&str]) -> String {
    let site = server.site();
    let hello = NodeHello {
        id: std::iter::repeat_n(digit, 20).collect(),
        public_key: std::iter::repeat_n(digit, 64).collect(),
        name: name.into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: commands.iter().map(|c| c.to_string()).collect(),
    };
    site.record_hello(&hello).unwrap().id
}

/// `ferry node ARGS…` on the server's data dir: exit code and stdout lines as JSON.
fn node(server: &Server, args: &[&str]) -> (i32, Vec<Value>) {
    let mut all = vec!["node"];
    all.extend(args);
    let out = server.ferry(&all);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    (out.status.code().unwrap(), lines)
}

#[test]
fn the_cli_lists_approves_and_revokes() {
    let server = Server::start();
    let (code, lines) = node(&server, &["list"]);
    assert_eq!((code, lines.len()), (0, 0));

    let a = hello(&server, 'a', "box", &["dir.list", "file.fetch"]);
    let b = hello(&server, 'b', "box", &["dir.list"]);
    let (code, lines) = node(&server, &["list"]);
    assert_eq!(code, 0);
    assert_eq!(
        lines.len(),
        2,
        "a new key with a known name is a second node"
    );
    let first = &lines[0];
    for key in [
        "id",
        "name",
        "state",
        "platform",
        "shell",
        "advertisedCommands",
        "approvedCommands",
        "connected",
    ] {
        assert!(first.get(key).is_some(), "{key} missing from {first}");
    }
    assert_eq!(first["id"], a.as_str());
    assert_eq!(first["state"], "pending");
    assert_eq!(first["connected"], false);

    let (code, lines) = node(&server, &["approve", &a, "--commands", "file.fetch"]);
    assert_eq!(code, 0);
    assert_eq!(lines[0]["state"], "approved");
    assert_eq!(lines[0]["approvedCommands"], json!(["file.fetch"]));

    // An upgrade: the new command waits, the approved one still serves.
    hello(
        &server,
        'a',
        "box",
        &["dir.list", "file.fetch", "terminal.upload"],
    );
    let (_, lines) = node(&server, &["list"]);
    assert_eq!(
        lines[0]["pendingCommands"],
        json!(["dir.list", "terminal.upload"])
    );
    let (code, lines) = node(&server, &["approve", &a]);
    assert_eq!(code, 0);
    assert_eq!(
        lines[0]["approvedCommands"],
        json!(["dir.list", "file.fetch", "terminal.upload"])
    );

    let (code, lines) = node(
        &server,
        &["approve", &b, "--commands", "dir.list,file.push"],
    );
    assert_eq!(code, 1);
    assert_eq!(lines[0]["error"]["code"], "command_not_advertised");

    let (code, lines) = node(&server, &["revoke", &b]);
    assert_eq!((code, lines[0]["state"].as_str()), (0, Some("revoked")));
    let (code, lines) = node(&server, &["approve", &b]);
    assert_eq!(
        (code, lines[0]["error"]["code"].as_str()),
        (1, Some("node_revoked"))
    );

    for bad in ["ffffffffffffffffffff", "../etc", "X"] {
        for args in [vec!["approve", bad], vec!["revoke", bad]] {
            let (code, lines) = node(&server, &args);
            assert_eq!(code, 1, "{args:?}");
            assert_eq!(lines[0]["error"]["code"], "unknown_node", "{args:?}");
        }
    }

    // The gateway sees what the commands decided, at once.
    let (status, body) = get_json(&server.url("/v1/nodes"), &server.token);
    assert_eq!(status, 200);
    let states: Vec<&str> = body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["approved", "revoked"]);
}

#[test]
fn the_http_routes_answer_admins_only() {
    let server = Server::start();
    let id = hello(&server, 'c', "lab", &["dir.list"]);
    let person = server.add_person("ann");

    let (status, body) = get_json(&server.url("/v1/nodes"), &person);
    assert_error(status, &body, 404, "no_route");
    // Another method, and no token at all, are answered as a path that is not there,
    // headers too: an `Allow` would tell that the route exists.
    for path in ["/v1/nodes", "/metrics", &format!("/v1/nodes/{id}/approve")] {
        for token in [Some(person.as_str()), None] {
            let mut request = client().put(server.url(path));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let hidden = request.send().unwrap();
            assert_eq!(hidden.status(), 404, "PUT {path}");
            assert!(
                hidden.headers().get("allow").is_none(),
                "PUT {path} tells its methods: {:?}",
                hidden.headers().get("allow")
            );
        }
    }
    let (status, body) = post_json(
        &server,
        &person,
        &format!("/v1/nodes/{id}/approve"),
        &json!({}),
    );
    assert_error(status, &body, 404, "no_route");

    let (status, body) = post_json(
        &server,
        &server.token,
        &format!("/v1/nodes/{id}/approve"),
        &json!({"commands": ["dir.list"]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "approved");
    let (_, lines) = node(&server, &["list"]);
    assert_eq!(lines[0]["approvedCommands"], json!(["dir.list"]));

    let (status, body) = json_answer(
        client()
            .delete(server.url(&format!("/v1/nodes/{id}")))
            .bearer_auth(&server.token)
            .send()
            .unwrap(),
    );
    assert_eq!((status, body["state"].as_str()), (200, Some("revoked")));
    let (_, lines) = node(&server, &["list"]);
    assert_eq!(lines[0]["state"], "revoked");
}
