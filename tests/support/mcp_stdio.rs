//! `ferry mcp` on stdio, spoken to line by line with no SDK between: for tests that kill
//! it, or break the disk under it, and read each answer as it came.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// `ferry mcp` on stdio, driven line by line.
pub struct McpProcess {
    pub child: Child,
    input: std::process::ChildStdin,
    output: BufReader<std::process::ChildStdout>,
    id: u64,
}

impl McpProcess {
    /// `ferry mcp` on the site `data` as the person `me`, started and initialized.
    pub fn start(data: &Path) -> McpProcess {
        let mut mcp = McpProcess::launch(McpProcess::command(data));
        mcp.initialize();
        mcp
    }

    /// The command [`McpProcess::start`] runs, for a test that changes it first.
    pub fn command(data: &Path) -> Command {
        let mut cmd = super::ferry_command();
        cmd.args(["mcp", "--data"])
            .arg(data)
            .args(["--person", "me"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        cmd
    }

    /// Starts `cmd` (a [`McpProcess::command`]); [`McpProcess::initialize`] is next.
    pub fn launch(mut cmd: Command) -> McpProcess {
        let mut child = cmd.spawn().unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        McpProcess {
            child,
            input,
            output,
            id: 0,
        }
    }

    /// Opens the session: `initialize`, then `notifications/initialized`.
    pub fn initialize(&mut self) {
        self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "tests", "version": "1"}}),
        )
        .expect("ferry mcp answers initialize");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .unwrap();
    }

    pub fn send(&mut self, message: &Value) -> std::io::Result<()> {
        writeln!(self.input, "{message}")?;
        self.input.flush()
    }

    /// The answer to one request; `None` once the process is gone.
    pub fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        self.id += 1;
        let id = self.id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .ok()?;
        loop {
            let mut line = String::new();
            if self.output.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let message: Value = serde_json::from_str(&line).ok()?;
            if message["id"] == id {
                return Some(message);
            }
        }
    }

    /// A tool call's result; `None` once the process is gone.
    pub fn call(&mut self, tool: &str, args: Value) -> Option<Value> {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
            .map(|m| m["result"].clone())
    }
}
