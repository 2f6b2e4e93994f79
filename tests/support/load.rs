//! The load harness's own tools (issue 15): the open-files limit of this process, the
//! gateway's memory as the kernel counts it, latency figures, and async clients for the
//! many-at-once parts (event streams and MCP sessions over streamable HTTP), so that
//! hundreds of them share a runtime instead of holding a thread each.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use super::{SseEvent, SseLines};

/// Raises this process's soft limit on open files to at least `want`; panics, saying
/// what to raise, when the hard limit is lower. A gateway started afterwards inherits
/// the limits (and raises its own soft limit to its hard one).
pub fn open_files_at_least(want: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current.is_none_or(|soft| soft >= want) {
        return;
    }
    if let Some(hard) = now.maximum {
        assert!(
            hard >= want,
            "the load tests need {want} open files and the hard limit is {hard}: raise it \
             (ulimit -Hn {want}, or the container's nofile limit)"
        );
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(want),
            maximum: now.maximum,
        },
    )
    .unwrap_or_else(|e| panic!("raising the open-files limit to {want}: {e}"));
}

/// A field of `/proc/<pid>/status` in KiB (`VmHWM`, the peak resident set; `VmRSS`).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading the status of process {pid}: {e}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in the status of process {pid}:\n{status}"))
}

/// The peak resident set of process `pid` so far, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM")
}

/// What a scenario reports.
pub struct Figures {
    pub scenario: &'static str,
    /// What completed, said with its count ("1000 uploads").
    pub completed: String,
    /// The gateway's resident set once started, before the load, in KiB.
    pub start_kib: u64,
    /// The gateway's peak resident set over the scenario, in KiB.
    pub peak_kib: u64,
    /// What the latencies are of ("upload", "tool call").
    pub measured: &'static str,
    pub latencies: Vec<Duration>,
}

impl Figures {
    /// The `p`-th percentile (0 < p ≤ 100) of the latencies, by nearest rank.
    pub fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        assert!(
            !sorted.is_empty(),
            "{}: nothing was measured",
            self.scenario
        );
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    /// Prints the figures (`cargo test -- --nocapture` shows them).
    pub fn print(&self) {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mib = |kib: u64| kib as f64 / 1024.0;
        println!(
            "load {}: {}; gateway RSS {:.1} MiB at start, peak {:.1} MiB; \
             {} latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {}",
            self.scenario,
            self.completed,
            mib(self.start_kib),
            mib(self.peak_kib),
            self.measured,
            ms(self.percentile(50.0)),
            ms(self.percentile(99.0)),
            ms(self.percentile(100.0)),
            self.latencies.len(),
        );
    }
}

/// An async client for many connections at once: no pooling limit, a generous timeout.
pub fn async_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A `text/event-stream` body read as it comes, on the caller's task.
pub struct EventReader {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buffer: Vec<u8>,
}

impl EventReader {
    pub fn new(response: reqwest::Response) -> EventReader {
        EventReader {
            body: Box::pin(response.bytes_stream()),
            buffer: Vec::new(),
        }
    }

    /// The next event (comment lines skipped; `message` when it names none); `Ok(None)`
    /// once the body ends.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, String> {
        let mut lines = SseLines::default();
        loop {
            let Some(end) = self.buffer.iter().position(|b| *b == b'\n') else {
                match self.body.next().await {
                    Some(Ok(chunk)) => {
                        self.buffer.extend_from_slice(&chunk);
                        continue;
                    }
                    Some(Err(e)) => return Err(format!("the event stream broke: {e}")),
                    None => return Ok(None),
                }
            };
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            if let Some(event) = lines.take(&line) {
                return Ok(Some(event));
            }
        }
    }
}

/// The MCP protocol version the sessions speak.
const MCP_VERSION: &str = "2025-06-18";

/// One MCP session at `/mcp` over streamable HTTP, spoken to with plain JSON-RPC: each
/// request a `POST`, answered in JSON or as an event stream carrying the answer.
pub struct McpSession {
    client: reqwest::Client,
    url: String,
    token: String,
    /// The `Mcp-Session-Id` the gateway gave at `initialize`.
    id: String,
    next: u64,
}

impl McpSession {
    /// `initialize`, then `notifications/initialized`, with the harness `token`.
    pub async fn open(
        client: &reqwest::Client,
        url: &str,
        token: &str,
    ) -> Result<McpSession, String> {
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": MCP_VERSION, "capabilities": {},
                       "clientInfo": {"name": "load", "version": "1"}},
        });
        let response = client
            .post(url)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let answer = answer_of(response, 0).await?;
        if answer["result"]["protocolVersion"].as_str().is_none() {
            return Err(format!("initialize was answered {answer}"));
        }
        let id = id.ok_or_else(|| format!("no Mcp-Session-Id with {answer}"))?;
        let session = McpSession {
            client: client.clone(),
            url: url.to_owned(),
            token: token.to_owned(),
            id,
            next: 1,
        };
        let response = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .map_err(|e| format!("notifications/initialized: {e}"))?;
        let status = response.status().as_u16();
        if status != 202 {
            let body = response.text().await.unwrap_or_default();
            return Err(format!("notifications/initialized: {status} {body}"));
        }
        Ok(session)
    }

    fn post(&self, message: &Value) -> reqwest::RequestBuilder {
        self.client
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", MCP_VERSION)
            .json(message)
    }

    /// The answer to one request (the whole JSON-RPC message).
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next;
        self.next += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = self
            .post(&message)
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        answer_of(response, id).await
    }

    /// A tool call's result; `Err` for a protocol error (a tool error is a result).
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        let answer = self
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await?;
        match answer.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(format!("{tool} was answered {answer}")),
        }
    }

    /// Ends the session (`DELETE /mcp`); the gateway's status.
    pub async fn close(self) -> Result<u16, String> {
        let response = self
            .client
            .delete(&self.url)
            .bearer_auth(&self.token)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", MCP_VERSION)
            .send()
            .await
            .map_err(|e| format!("DELETE /mcp: {e}"))?;
        Ok(response.status().as_u16())
    }
}

/// The JSON-RPC message answering request `id`, from a JSON body or from the events of
/// a stream (the gateway may send others first, and events without data).
async fn answer_of(response: reqwest::Response, id: u64) -> Result<Value, String> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if status != 200 {
        let body = response.text().await.unwrap_or_default();
        return Err(format!("status {status} ({content_type}): {body}"));
    }
    if content_type.starts_with("application/json") {
        return response
            .json()
            .await
            .map_err(|e| format!("the JSON answer does not read: {e}"));
    }
    if !content_type.starts_with("text/event-stream") {
        return Err(format!("an answer in {content_type:?}"));
    }
    let mut events = EventReader::new(response);
    loop {
        match events.next().await? {
            Some(event) => {
                let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                if message["id"] == id {
                    return Ok(message);
                }
            }
            None => return Err(format!("the stream ended before the answer to {id}")),
        }
    }
}

/// Lines of text numbered by `label` up to `bytes` long: a file's content that no other
/// label gives.
pub fn content(label: &str, bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 64);
    let mut line = 0u64;
    while out.len() < bytes {
        out.extend_from_slice(format!("{label} line {line:08}\n").as_bytes());
        line += 1;
    }
    out.truncate(bytes);
    out
}
