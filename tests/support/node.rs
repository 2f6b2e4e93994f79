//! Nodes for the end-to-end tests: a real `ferry node run` process (its stdout lines,
//! its stderr kept for failure messages, signals, and its exit; killed on drop), and a
//! node the test plays itself over a real WebSocket to `/v1/nodes/connect`.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_node::frame::FRAME_MAX_BYTES;
use ferry_node::handshake::{COMMANDS, NodeInfo, node_handshake};
use ferry_node::mux::{Handler, LinkConfig, Role};
use ferry_node::{Identity, Link, NodeError};
use futures_util::future::ready;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::{Server, get_json};

/// How long a node played by a test waits for the gateway's handshake frames.
pub const WAIT: Duration = Duration::from_secs(10);

/// The node's WebSocket to the gateway.
pub type Ws = WebSocketStream<TcpStream>;

/// A runtime for a test that plays one end of a link beside the blocking harness.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A refused upgrade's status and JSON body (the gateway answers every refusal in JSON).
pub fn refused_upgrade(
    response: tokio_tungstenite::tungstenite::http::Response<Option<Vec<u8>>>,
) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.body().clone().unwrap_or_default();
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("status {status}: not JSON ({e}): {body:?}"));
    (status, body)
}

/// Opens the WebSocket of `/v1/nodes/connect`; the HTTP answer when the upgrade is refused.
pub async fn open(server_addr: &str) -> Result<Ws, (u16, Value)> {
    open_from(server_addr, std::net::Ipv4Addr::LOCALHOST).await
}

/// [`open`] from the loopback address `source` (any of 127.0.0.0/8), as another machine.
pub async fn open_from(server_addr: &str, source: std::net::Ipv4Addr) -> Result<Ws, (u16, Value)> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from((source, 0)))
        .unwrap();
    let tcp = socket.connect(server_addr.parse().unwrap()).await.unwrap();
    let url = format!("ws://{server_addr}/v1/nodes/connect");
    let config = WebSocketConfig::default()
        .max_message_size(Some(FRAME_MAX_BYTES))
        .max_frame_size(Some(FRAME_MAX_BYTES));
    match tokio_tungstenite::client_async_with_config(url.as_str(), tcp, Some(config)).await {
        Ok((ws, _)) => Ok(ws),
        Err(WsError::Http(response)) => Err(refused_upgrade(*response)),
        Err(e) => panic!("the upgrade failed: {e}"),
    }
}

/// The sending half of a node's socket: one binary message per frame.
pub trait FrameSink: Sink<Bytes, Error = WsError> + Send + Unpin + 'static {}
impl<T: Sink<Bytes, Error = WsError> + Send + Unpin + 'static> FrameSink for T {}

/// The receiving half of a node's socket: its binary messages.
pub trait FrameStream: Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static {}
impl<T: Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static> FrameStream for T {}

/// The binary messages of the socket as the link takes them.
pub fn adapt(ws: Ws) -> (impl FrameSink, impl FrameStream) {
    let (sink, stream) = ws.split();
    let sink = sink.with(|bytes: Bytes| ready(Ok::<_, WsError>(Message::Binary(bytes))));
    let stream = stream.filter_map(|message| {
        ready(match message {
            Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
            Ok(Message::Text(_)) => Some(Err("a text message".to_string())),
            Ok(_) => None,
            Err(e) => Some(Err(e.to_string())),
        })
    });
    (sink, stream)
}

/// A node named `name` serving the five transfer commands, as its hello tells it.
pub fn info(name: &str) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: COMMANDS[..5].iter().map(|c| c.to_string()).collect(),
    }
}

/// Dials as `identity` named `name`, serving nothing: the node's end of the link, or
/// the refusal.
pub async fn dial(addr: &str, identity: &Identity, name: &str) -> Result<Link, NodeError> {
    dial_serving(addr, identity, info(name), None).await
}

/// Dials as `identity` saying `info`, and serves the gateway's calls with `handler`.
pub async fn dial_serving(
    addr: &str,
    identity: &Identity,
    info: NodeInfo,
    handler: Option<Handler>,
) -> Result<Link, NodeError> {
    let (sink, stream) = handshake(addr, identity, info).await?;
    Ok(Link::spawn(
        sink,
        stream,
        LinkConfig::new(Role::Node),
        handler,
    ))
}

/// Dials `server` as `identity` (the node `id`) saying `info`, serves with `handler`,
/// and returns once the gateway shows the node connected.
pub fn connect_serving(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    identity: &Identity,
    id: &str,
    info: NodeInfo,
    handler: Handler,
) -> Link {
    let link = rt
        .block_on(dial_serving(&server.addr, identity, info, Some(handler)))
        .unwrap();
    wait_for_node(server, id, |n| n["connected"] == true);
    link
}

/// Dials and completes the handshake only: the socket's halves, for a test that writes
/// the frames after the welcome by hand.
pub async fn handshake(
    addr: &str,
    identity: &Identity,
    info: NodeInfo,
) -> Result<(impl FrameSink, impl FrameStream), NodeError> {
    let ws = open(addr).await.expect("the upgrade is taken");
    let (mut sink, mut stream) = adapt(ws);
    node_handshake(&mut sink, &mut stream, identity, info, WAIT).await?;
    Ok((sink, stream))
}

/// How long a node is given to say something, connect or exit.
pub const NODE_WAIT: Duration = Duration::from_secs(20);

/// `ferry node run ARGS…` with none of the caller's state or TLS variables.
pub fn node_command(args: &[&str]) -> Command {
    let mut command = Command::new(super::ferry_bin());
    command
        .args(["node", "run"])
        .args(args)
        .env_remove("XDG_STATE_HOME")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR");
    command
}

/// A running node.
pub struct NodeProcess {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl NodeProcess {
    /// Starts `ferry node run ARGS…` with `env` added.
    pub fn start(args: &[&str], env: &[(&str, &Path)]) -> NodeProcess {
        let mut command = node_command(args);
        for (key, value) in env {
            command.env(key, value);
        }
        NodeProcess::spawn(command)
    }

    /// Starts `command` (a node, perhaps run through `ip netns exec`).
    pub fn spawn(mut command: Command) -> NodeProcess {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let kept = stderr.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buffer) {
                if n == 0 {
                    return;
                }
                kept.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        NodeProcess {
            child,
            lines,
            stderr,
        }
    }

    /// The next stdout line, waiting without blocking an async runtime's thread.
    pub async fn line(&self) -> String {
        let deadline = Instant::now() + NODE_WAIT;
        loop {
            match self.lines.try_recv() {
                Ok(line) => return line,
                Err(std::sync::mpsc::TryRecvError::Empty) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("no line from the node ({e:?}); stderr: {}", self.stderr()),
            }
        }
    }

    /// The next stdout line, for tests without a runtime.
    pub fn line_blocking(&self) -> String {
        self.lines
            .recv_timeout(NODE_WAIT)
            .unwrap_or_else(|e| panic!("no line from the node ({e:?}); stderr: {}", self.stderr()))
    }

    /// The node's id, from the line it prints once connected (`connected to … as ID …`).
    pub fn connected_id(&self) -> String {
        let line = self.line_blocking();
        line.split(" as ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("{line}"))
            .to_owned()
    }

    /// What the node wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends `signal` to the node.
    pub fn signal(&self, signal: i32) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill has no memory effects; the pid is our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Waits for the node to exit.
    pub async fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + NODE_WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the node did not exit; stderr: {}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the node to exit, for tests without a runtime.
    pub fn exit_blocking(&mut self) -> ExitStatus {
        let deadline = Instant::now() + NODE_WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the node did not exit; stderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The node `id` as `GET /v1/nodes` shows it, once `check` holds.
pub fn wait_for_node(server: &Server, id: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + NODE_WAIT;
    loop {
        let (status, body) = get_json(&server.url("/v1/nodes"), &server.token);
        assert_eq!(status, 200, "{body}");
        let found = body["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .cloned();
        if let Some(node) = found
            && check(&node)
        {
            return node;
        }
        assert!(Instant::now() < deadline, "node {id}: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
