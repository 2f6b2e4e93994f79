//! The OpenAPI description at `/v1/openapi.json` (issue 15): generated from the
//! handlers, checked here against the running gateway's real routes, and then used by
//! schemathesis (`tests/openapi/.venv`, pinned and hashed; `tests/openapi/setup`) to send
//! generated and hostile requests to every operation. A run passes only when no answer is
//! a 5xx, every answer's status, content type, headers and body are the ones described,
//! input outside the description is refused with a 4xx, and no route answers without
//! the token it requires.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{Options, Server};

/// The operations the spec names (members.md, tools.md, nodes.md, scale.md), each of
/// which must be described: the description may hold more, never fewer.
const SPEC_ROUTES: &[(&str, &str)] = &[
    ("delete", "/v1/files"),
    ("delete", "/v1/nodes/{id}"),
    ("delete", "/v1/shares/{id}"),
    ("get", "/healthz"),
    ("get", "/metrics"),
    ("get", "/readyz"),
    ("get", "/v1/artifacts"),
    ("get", "/v1/audit"),
    ("get", "/v1/chat/history"),
    ("get", "/v1/events"),
    ("get", "/v1/files"),
    ("get", "/v1/files/archive"),
    ("get", "/v1/files/content"),
    ("get", "/v1/files/preview"),
    ("get", "/v1/files/search"),
    ("get", "/v1/nodes"),
    ("get", "/v1/nodes/{id}/terminal"),
    ("get", "/v1/projects"),
    ("get", "/v1/trash"),
    ("post", "/v1/chat"),
    ("post", "/v1/deliveries"),
    ("post", "/v1/files/mkdir"),
    ("post", "/v1/files/move"),
    ("post", "/v1/media"),
    ("post", "/v1/nodes/{id}/approve"),
    ("post", "/v1/nodes/{id}/terminal/upload"),
    ("post", "/v1/projects"),
    ("post", "/v1/shares"),
    ("post", "/v1/trash/{id}/restore"),
];

const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];

/// Every `(method, path)` the description holds.
fn operations(description: &Value) -> BTreeMap<(String, String), Value> {
    let mut found = BTreeMap::new();
    for (path, item) in description["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(operation) = item.get(*method) {
                found.insert((method.to_string(), path.clone()), operation.clone());
            }
        }
    }
    found
}

fn description(server: &Server) -> Value {
    // No token: the description is public, like the page that uses it.
    let response = reqwest::blocking::get(server.url("/v1/openapi.json")).unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    response.json().unwrap()
}

#[test]
fn the_description_names_every_route_the_spec_names_each_once_and_well_formed() {
    let server = Server::start();
    let description = description(&server);
    assert_eq!(description["openapi"], "3.1.0");
    let operations = operations(&description);
    for (method, path) in SPEC_ROUTES {
        assert!(
            operations.contains_key(&(method.to_string(), path.to_string())),
            "the description leaves out {} {path}",
            method.to_uppercase()
        );
    }
    let mut ids = BTreeSet::new();
    for ((method, path), operation) in &operations {
        let id = operation["operationId"].as_str().unwrap_or_default();
        assert!(!id.is_empty(), "{method} {path} has no operationId");
        assert!(ids.insert(id.to_owned()), "operationId {id} is used twice");
        assert!(
            operation["tags"].as_array().is_some_and(|t| !t.is_empty()),
            "{method} {path} has no tag"
        );
        let responses = operation["responses"].as_object().unwrap();
        assert!(
            responses
                .keys()
                .any(|status| status.starts_with(['1', '2', '3'])),
            "{method} {path} describes no answer but errors"
        );
        assert_eq!(
            responses["default"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Error",
            "{method} {path} does not describe its errors"
        );
    }
    // Every reference resolves.
    let text = description.to_string();
    let schemas = description["components"]["schemas"].as_object().unwrap();
    for reference in text.split("\"#/components/schemas/").skip(1) {
        let name = &reference[..reference.find('"').unwrap()];
        assert!(
            schemas.contains_key(name),
            "{name} is referred to, not described"
        );
    }
}

/// Each described operation is a real route of the running gateway: a request for it,
/// with its path parameters filled in and no body, is answered by the operation itself
/// (a refusal of the request is fine) and never by the router's "no such route" or "not
/// that method". The other direction, that every route served is described, holds by
/// construction: routes are registered only from their descriptions
/// (`crates/ferry-gateway/tests/routes_described.rs`).
#[test]
fn every_described_operation_is_a_route_the_gateway_serves() {
    let server = Server::start();
    let description = description(&server);
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap();
    for ((method, path), operation) in operations(&description) {
        // The gateways' own route answers anyone but another gateway of the site as a
        // route that does not exist, by design; tests/gateways.rs uses it for real.
        if operation["tags"][0] == "internal" {
            continue;
        }
        let url = server.url(&path.replace(['{', '}'], ""));
        let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        // The first start's token is an admin's, which the node routes show themselves to.
        let response = client
            .request(method.clone(), &url)
            .bearer_auth(&server.token)
            .send()
            .unwrap();
        let status = response.status();
        let json = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
        // Only an error's JSON is read: an event stream the route opens never ends.
        let body = if json {
            response.text().unwrap_or_default()
        } else {
            String::new()
        };
        let code = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
            .unwrap_or_default();
        assert!(
            code != "no_route" && code != "method_not_allowed",
            "{method} {path} is described, but the gateway has no such route: {status} {body}"
        );
    }
}

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/openapi")
}

/// The operations schemathesis leaves alone, each with why: streams or protocol
/// upgrades a request/answer fuzzer cannot end, and the gateways' own signed route; each
/// has its own suite.
const NOT_FUZZED: &[(&str, &str)] = &[
    (
        "^/v1/events$",
        "an event stream that stays open: tests/events.rs",
    ),
    (
        "^/v1/chat$",
        "answers an event stream relayed from the agent harness: tests/chat.rs",
    ),
    (
        "^/mcp$",
        "MCP over streamable HTTP: the official conformance suite, tests/mcp_conformance.rs",
    ),
    (
        "^/v1/nodes/connect$",
        "the node link's WebSocket: tests/node_link.rs, tests/node_misbehaving.rs",
    ),
    (
        "^/v1/nodes/\\{id\\}/terminal$",
        "a terminal's WebSocket: tests/node_terminal.rs",
    ),
    (
        "^/internal/",
        "between the gateways of a site, signed; anyone else is answered as by a route \
         that does not exist: tests/gateways.rs",
    ),
];

/// What one schemathesis run did.
struct Run {
    examples: u64,
    output: String,
}

/// Runs schemathesis against `server` as `token`, on the operations whose path matches
/// `paths` (a regular expression), and fails the test on any finding.
fn schemathesis(server: &Server, token: &str, paths: &str, max_examples: u32) -> Run {
    let st = suite_dir().join(".venv/bin/st");
    assert!(
        st.exists(),
        "schemathesis is not installed ({}): run tests/openapi/setup (.ci/run does)",
        st.display()
    );
    let work = tempfile::tempdir().unwrap();
    let mut command = Command::new(&st);
    command
        .current_dir(work.path())
        .env("PYTHONPATH", suite_dir())
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .arg("--config-file")
        .arg(suite_dir().join("schemathesis.toml"))
        .arg("--no-color")
        .arg("run")
        .arg(server.url("/v1/openapi.json"))
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--include-path-regex", paths])
        .args(["--max-examples", &max_examples.to_string()])
        // The same cases on every run; FERRY_SCHEMATHESIS_SEED explores others.
        .args([
            "--seed",
            &std::env::var("FERRY_SCHEMATHESIS_SEED").unwrap_or_else(|_| "20261207".into()),
        ])
        .args(["--workers", "2", "--request-timeout", "30"])
        // Which checks run, and where they differ: tests/openapi/schemathesis.toml.
        .args(["--continue-on-failure", "--warnings", "off"]);
    // One pattern: given several times, schemathesis keeps only the last.
    let not_fuzzed: Vec<&str> = NOT_FUZZED.iter().map(|(pattern, _why)| *pattern).collect();
    command.args(["--exclude-path-regex", &not_fuzzed.join("|")]);
    let output = command.output().expect("schemathesis runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "schemathesis found answers outside the description, or server errors:\n{text}\n\
         server log:\n{}",
        server.log()
    );
    // "Test cases:\n  N generated, N passed, ..."
    let examples = text
        .split("generated")
        .next()
        .and_then(|head| head.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of test cases in schemathesis's output:\n{text}"));
    Run {
        examples,
        output: text,
    }
}

/// A server with room for schemathesis's requests: rates that would refuse most of a
/// run's uploads with 429 are raised, so the uploads' own handling is what gets tested
/// (the 429 itself is tests/rate_limits.rs's).
fn fuzzed_server() -> Server {
    Server::start_with(Options {
        config_toml: Some(
            "[limits]\nuploads_per_minute = 0\ndeliveries_per_minute = 0\ntool_calls_per_minute = 0\n"
                .into(),
        ),
        ..Options::default()
    })
}

#[test]
fn schemathesis_finds_nothing_as_a_person() {
    let server = fuzzed_server();
    let token = server.add_person("sam");
    // Something to find: a file, a folder and a project of the person's.
    let client = reqwest::blocking::Client::new();
    let form = reqwest::blocking::multipart::Form::new().part(
        "file",
        reqwest::blocking::multipart::Part::bytes(b"hello".to_vec()).file_name("notes.txt"),
    );
    let uploaded = client
        .post(server.url("/v1/media"))
        .bearer_auth(&token)
        .multipart(form)
        .send()
        .unwrap();
    assert!(
        uploaded.status().is_success(),
        "{}",
        uploaded.text().unwrap()
    );
    let run = schemathesis(&server, &token, ".*", 100);
    eprintln!("schemathesis as a person: {} test cases", run.examples);
    eprintln!("{}", run.output);
    for (pattern, why) in NOT_FUZZED {
        eprintln!("not fuzzed: {pattern}: {why}");
    }
}

#[test]
fn schemathesis_finds_nothing_on_the_harness_route_with_a_harness_token() {
    let server = fuzzed_server();
    server.add_person("sam");
    let token = server.create_token("sam", "harness");
    let run = schemathesis(&server, &token, "^/v1/deliveries$", 100);
    eprintln!("schemathesis as a harness: {} test cases", run.examples);
}

#[test]
fn schemathesis_finds_nothing_on_the_admin_routes_with_an_admin_token() {
    let server = fuzzed_server();
    let run = schemathesis(
        &server,
        &server.token,
        "^/(v1/nodes|metrics|healthz|readyz)",
        60,
    );
    eprintln!("schemathesis as an admin: {} test cases", run.examples);
}
