//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/mcp-conformance/package-lock.json`) against a real gateway's `/mcp`: every
//! active server scenario passes, except those `tests/mcp-conformance/baseline.yml` lists
//! with their reasons, and a listed one that passes fails the run (spec tools.md T-MCP).
//!
//! The suite sends no token, so a small proxy of the test's own puts a harness token on
//! each request and passes everything else through; the gateway counts the proxy's
//! origin as its own, as an operator would a reverse proxy's. The suite's DNS-rebinding
//! scenario goes through it too: a foreign `Host` and `Origin` reach the gateway as sent.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use support::{Options, Server};

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-conformance")
}

/// The proxy, ended with the test.
struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_official_conformance_suite_passes_against_mcp() {
    let dir = suite_dir();
    let suite = dir.join("node_modules/.bin/conformance");
    assert!(
        suite.exists(),
        "the MCP conformance suite is not installed ({}): run `npm ci --prefix tests/mcp-conformance` (.ci/run does)",
        suite.display()
    );
    // The proxy's port is chosen first, so the gateway can be told its origin.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Server::start_with(Options {
        config_toml: Some(format!(
            "[tools]\nallowed_origins = [\"http://127.0.0.1:{port}\", \"http://localhost:{port}\"]\n"
        )),
        ..Options::default()
    });
    let token = server.create_token("me", "harness");
    let mut proxy = Command::new("node")
        .arg(dir.join("auth-proxy.mjs"))
        .env("FERRY_URL", format!("http://{}", server.addr))
        .env("FERRY_TOKEN", &token)
        .env("PROXY_PORT", port.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs the proxy (Node.js is needed for the conformance suite)");
    let mut first = String::new();
    BufReader::new(proxy.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _proxy = Proxy(proxy);
    assert_eq!(first.trim(), port.to_string(), "the proxy did not start");

    let results = tempfile::tempdir().unwrap();
    let out = Command::new(&suite)
        .current_dir(&dir)
        .args(["server", "--url", &format!("http://127.0.0.1:{port}/mcp")])
        .arg("--expected-failures")
        .arg(dir.join("baseline.yml"))
        .arg("--output-dir")
        .arg(results.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = text
        .find("=== SUMMARY ===")
        .map_or(text.as_str(), |at| &text[at..]);
    assert!(out.status.success(), "{summary}");
    // What the baseline does not excuse, each passed.
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        assert!(
            summary
                .lines()
                .any(|l| l.contains(&format!("✓ {scenario}:"))),
            "{scenario} did not pass:\n{summary}"
        );
    }
}
