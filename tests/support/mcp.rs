//! Talking MCP to a server through a client ferry did not write: the official MCP Python
//! SDK, run by `tests/mcp/driver.py` in the venv that `tests/mcp/setup` creates. A test
//! describes a session as JSON (which server, how to answer elicitations, which steps),
//! [`drive`] runs it and returns what the client saw; `driver.py` documents both shapes.
//!
//! ```ignore
//! let out = mcp::drive(&json!({
//!     "server": mcp::ferry_stdio(&data, "alice"),
//!     "elicitation": "accept",
//!     "steps": [mcp::list_tools(), mcp::call("file_read", json!({"path": "notes.txt"}))],
//! }));
//! assert_eq!(mcp::text_of(&out["results"][1]), "1\thello");
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The driver's own default limit for a whole session (`timeout_secs`).
const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/mcp/`: the driver, the test server and the venv.
pub fn mcp_dir() -> PathBuf {
    repo_root().join("tests").join("mcp")
}

/// The venv's Python, which has the SDK; panics, saying how to make it, when missing.
pub fn python() -> PathBuf {
    let python = mcp_dir().join(".venv").join("bin").join("python");
    assert!(
        python.exists(),
        "the MCP client's Python environment is missing ({}): run tests/mcp/setup \
         (.ci/run does; it needs python3 with venv, or root to install python3-venv)",
        python.display()
    );
    python
}

/// Runs one driver session; `Err` carries the driver's explanation (its stderr) when
/// no session could be established: the server did not start, refused the connection or
/// the token, did not initialize, or the run timed out. Step failures are not errors:
/// they are in the output.
pub fn try_drive(input: &Value) -> Result<Value, String> {
    let python = python();
    let timeout = input["timeout_secs"]
        .as_f64()
        .unwrap_or(DEFAULT_TIMEOUT_SECS);
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    let mut child = Command::new(&python)
        .arg(mcp_dir().join("driver.py"))
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{} does not start ({e}): run tests/mcp/setup again",
                python.display()
            )
        });
    // Dropping stdin after the write ends the input. A driver that died before reading
    // it is reported below, with its stderr, so a failed write says nothing more.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes());
    // The driver keeps its own time; this only catches a driver that hangs regardless.
    let status = super::exit_within(&mut child, Duration::from_secs_f64(timeout + 30.0))
        .unwrap_or_else(|| {
            panic!(
                "the MCP driver did not exit within {timeout} s + 30 s; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            )
        });
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    // The server's log and the driver's notes; shown by the test harness on failure.
    if !stderr.is_empty() {
        eprintln!("--- MCP driver stderr ---\n{stderr}--- end ---");
    }
    if !status.success() {
        return Err(stderr);
    }
    Ok(serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("the MCP driver printed no JSON ({e}): {stdout:?}\nstderr:\n{stderr}")
    }))
}

/// [`try_drive`] that must establish a session; panics with the driver's stderr if not.
#[track_caller]
pub fn drive(input: &Value) -> Value {
    try_drive(input).unwrap_or_else(|stderr| panic!("the MCP session failed:\n{stderr}"))
}

/// A stdio server: `command[0]` run with the rest as arguments, with `env` added to the
/// SDK's small default environment (HOME, PATH, USER, ...), so no `FERRY_` variable of
/// the test's environment reaches it.
pub fn stdio(command: &[&str], env: &[(&str, &str)]) -> Value {
    let env: serde_json::Map<String, Value> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    json!({ "stdio": { "command": command, "env": env } })
}

/// `ferry mcp --data DATA --person PERSON` (the binary cargo built) as a stdio server.
pub fn ferry_stdio(data: &Path, person: &str) -> Value {
    let ferry = super::ferry_bin();
    stdio(
        &[
            ferry.to_str().unwrap(),
            "mcp",
            "--data",
            data.to_str().unwrap(),
            "--person",
            person,
        ],
        &[],
    )
}

/// A streamable HTTP server at `url`, every request carrying `Authorization: Bearer
/// <token>`.
pub fn http(url: &str, token: &str) -> Value {
    json!({ "http": { "url": url, "headers": { "Authorization": format!("Bearer {token}") } } })
}

/// Step: list every tool (all pages).
pub fn list_tools() -> Value {
    json!({ "op": "list_tools" })
}

/// Step: call tool `name` with `arguments`.
pub fn call(name: &str, arguments: Value) -> Value {
    json!({ "op": "call", "name": name, "arguments": arguments })
}

/// Step: wait `seconds` before the next step (the session stays open).
pub fn sleep(seconds: f64) -> Value {
    json!({ "op": "sleep", "seconds": seconds })
}

/// The tool named `name` in a `list_tools` result; panics, listing the names, if absent.
#[track_caller]
pub fn tool<'a>(tools: &'a Value, name: &str) -> &'a Value {
    let tools = tools
        .as_array()
        .unwrap_or_else(|| panic!("not a tool list: {tools}"));
    tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| {
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        panic!("no tool {name:?} among {names:?}")
    })
}

/// The `content` items of a tool result; panics, showing what came instead, when the
/// step's answer was not a tool result (a protocol or client error).
#[track_caller]
fn content_of(result: &Value) -> &Vec<Value> {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("expected a tool result, got {result}"))
}

/// The text of a tool result: its text items, joined by newlines.
#[track_caller]
pub fn text_of(result: &Value) -> String {
    content_of(result)
        .iter()
        .filter(|item| item["type"] == "text")
        .filter_map(|item| item["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a tool result has `isError: true` (absent means false).
#[track_caller]
pub fn is_error(result: &Value) -> bool {
    content_of(result);
    result["isError"].as_bool().unwrap_or(false)
}

/// The JSON-RPC error a step was answered with (`code`, `message`), if it was.
pub fn protocol_error(result: &Value) -> Option<(i64, String)> {
    let error = result.get("protocolError")?;
    Some((
        error["code"].as_i64().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default().to_owned(),
    ))
}
