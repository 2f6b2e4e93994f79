//! `ferry node run`: dials the gateway, proves the node's identity, serves the gateway's
//! calls with the node host, and dials again whenever the link is lost (spec N-LINK).
//!
//! Every failure to connect (refused, TLS, the WebSocket upgrade, the handshake) and every
//! lost link is logged once with its reason and retried after a backoff with jitter.
//! The node stops only on settings that cannot work (exit 2), a signal (exit 0, after
//! closing the link), or the gateway's word that the node is revoked (exit 4).

pub mod address;
pub mod backoff;
pub mod tls;
mod websocket;

use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_codes::Code;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

pub use address::{GatewayUrl, is_private};
use backoff::{Backoff, STABLE_LINK};
use futures_util::StreamExt;
pub use tls::CertPin;
use websocket::{Io, LastWord, Remains};

use crate::handshake::node_handshake;
use crate::host::NodeHost;
use crate::mux::{LinkConfig, Role};
use crate::settings::Settings;
use crate::{Identity, Link, NodeError};

/// How long the TCP connection, TLS and the WebSocket upgrade may take together.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long each step of the link's handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a closing link may take to say goodbye before the node exits anyway.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why `run` ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop (a signal); the link was closed.
    Stopped,
    /// The settings or the state folder cannot work; retrying would not help.
    Unusable(String),
    /// The gateway said this node is revoked; it needs a new key to pair again.
    Revoked(String),
}

impl Exit {
    /// The process's exit status: 0 stopped, 2 unusable, 4 revoked.
    pub fn status(&self) -> u8 {
        match self {
            Exit::Stopped => 0,
            Exit::Unusable(_) => 2,
            Exit::Revoked(_) => 4,
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Stopped => f.write_str("stopped"),
            Exit::Unusable(why) => f.write_str(why),
            Exit::Revoked(why) => write!(
                f,
                "the gateway revoked this node ({why}); to pair again, move the state folder's \
                 identity.key away and ask an admin to approve the new node"
            ),
        }
    }
}

/// Why one attempt to connect failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Worth another try after a backoff.
    Retry(String),
    /// The settings must change first.
    Fatal(String),
    /// The gateway refused the node as revoked.
    Revoked(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Retry(why) | Failure::Fatal(why) | Failure::Revoked(why) => f.write_str(why),
        }
    }
}

/// Dials the gateway of some settings; made once, used for every attempt.
pub struct Dialer {
    settings: Settings,
    trust: Option<tls::Trust>,
}

impl Dialer {
    /// A dialer for `settings`; for `wss://` the system's roots are loaded now, once.
    pub fn new(settings: &Settings) -> Dialer {
        let trust = settings.gateway.is_tls().then(|| {
            let (trust, notes) = tls::Trust::new(settings.pin);
            notes.iter().for_each(log);
            trust
        });
        Dialer {
            settings: settings.clone(),
            trust,
        }
    }

    /// One attempt: resolve, connect, TLS, WebSocket, handshake; then the link runs,
    /// serving the gateway's calls with `host`.
    pub async fn connect(
        &self,
        identity: &Identity,
        host: &NodeHost,
    ) -> Result<Connection, Failure> {
        let url = &self.settings.gateway;
        let addresses = url.resolve().await.map_err(|e| match e {
            address::Resolve::Failed(why) => Failure::Retry(why),
            address::Resolve::Refused(why) => Failure::Fatal(why),
        })?;
        let ws = tokio::time::timeout(DIAL_TIMEOUT, self.open(&addresses))
            .await
            .map_err(|_| {
                Failure::Retry(format!(
                    "{url} did not answer within {} s",
                    DIAL_TIMEOUT.as_secs()
                ))
            })??;
        let (mut sink, mut stream, last_word, remains) = websocket::adapt(ws);
        let info = self.settings.info.clone();
        let welcome = node_handshake(&mut sink, &mut stream, identity, info, HANDSHAKE_TIMEOUT)
            .await
            .map_err(|e| match e {
                NodeError::Remote {
                    code: Code::NodeRevoked,
                    message,
                } => Failure::Revoked(message),
                e => Failure::Retry(format!("the handshake failed: {e}")),
            })?;
        let link = Link::spawn(
            sink,
            stream,
            LinkConfig::new(Role::Node),
            Some(host.handler()),
        );
        Ok(Connection {
            link,
            node_id: welcome.node_id,
            last_word,
            remains,
        })
    }

    async fn open(
        &self,
        addresses: &[SocketAddr],
    ) -> Result<tokio_tungstenite::WebSocketStream<Box<dyn Io>>, Failure> {
        let url = &self.settings.gateway;
        let tcp = connect_any(addresses).await.map_err(Failure::Retry)?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match &self.trust {
            Some(trust) => Box::new(
                trust
                    .handshake(tcp, url.host())
                    .await
                    .map_err(Failure::Retry)?,
            ),
            None => Box::new(tcp),
        };
        let (ws, _) = tokio_tungstenite::client_async_with_config(
            url.connect_url(),
            io,
            Some(websocket::ws_config()),
        )
        .await
        .map_err(|e| {
            Failure::Retry(format!(
                "the WebSocket to {} failed: {e}",
                url.connect_url()
            ))
        })?;
        Ok(ws)
    }
}

/// Connects to the first of `addresses` that answers.
async fn connect_any(addresses: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut errors = Vec::new();
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => errors.push(format!("{address}: {e}")),
        }
    }
    Err(format!("cannot connect to {}", errors.join("; ")))
}

/// A link that passed the handshake.
pub struct Connection {
    link: Link,
    node_id: String,
    last_word: LastWord,
    remains: Remains,
}

impl Connection {
    /// The running link.
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// The node's id, as the gateway welcomed it.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Waits until the link is down: `Err` with the gateway's sentence when it closed the
    /// link saying the node is revoked, else why the link went.
    pub async fn closed(&self) -> Result<NodeError, String> {
        let cause = self.link.closed().await;
        match self.last_word.get() {
            Some(body) if body.code == Code::NodeRevoked => Err(body.message),
            _ => Ok(cause),
        }
    }

    /// Closes the link the WebSocket way: sends the close, then reads until the gateway
    /// answers it (or [`CLOSE_TIMEOUT`] passes), so the gateway sees a clean end.
    pub async fn close(self) {
        self.link.close();
        drop(self.link);
        let Remains {
            sink_done,
            stream_back,
        } = self.remains;
        let goodbye = async {
            let _ = sink_done.await;
            if let Ok(mut stream) = stream_back.await {
                // What the gateway still sends is no longer served: only its close counts.
                while let Some(Ok(_)) = stream.next().await {}
            }
        };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, goodbye).await;
    }
}

/// Runs the node until a signal (SIGINT or SIGTERM), a revocation or unusable settings.
pub async fn run(settings: Settings) -> Exit {
    let shutdown = CancellationToken::new();
    let signals = match watch_signals(shutdown.clone()) {
        Ok(task) => task,
        Err(e) => return Exit::Unusable(format!("cannot watch for signals: {e}")),
    };
    let exit = run_until(&settings, shutdown).await;
    signals.abort();
    exit
}

fn watch_signals(shutdown: CancellationToken) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => log("interrupted; closing the link"),
            _ = terminate.recv() => log("terminated; closing the link"),
        }
        shutdown.cancel();
    }))
}

/// Runs the node until `shutdown` is cancelled, a revocation or unusable settings.
pub async fn run_until(settings: &Settings, shutdown: CancellationToken) -> Exit {
    let identity = match Identity::load_or_create(&settings.state_dir) {
        Ok(identity) => identity,
        Err(e) => return Exit::Unusable(e.to_string()),
    };
    let host = settings.host();
    // What pushes and terminals of a node killed midway left, before anything else is
    // served.
    let sweeping = host.clone();
    let swept =
        tokio::task::spawn_blocking(move || (sweeping.sweep_pushes(), sweeping.sweep_terminals()))
            .await;
    let (files, sessions) = swept.unwrap_or_default();
    if files > 0 {
        log(format!(
            "removed {files} unfinished files that pushes left when this node last stopped"
        ));
    }
    if sessions > 0 {
        let sessions = match sessions {
            1 => "1 terminal session whose processes".to_owned(),
            n => format!("{n} terminal sessions whose processes"),
        };
        log(format!(
            "ended {sessions} outlived this node when it last stopped"
        ));
    }
    // Staged uploads older than a day go, now and every hour, whatever the link does.
    let _sweeper = {
        let host = host.clone();
        AbortOnDrop(tokio::spawn(async move { host.sweep_uploads().await }))
    };
    let dialer = Dialer::new(settings);
    let mut backoff = Backoff::new();
    let gateway = &settings.gateway;
    loop {
        log(format!("connecting to {gateway}"));
        let attempt = tokio::select! {
            () = shutdown.cancelled() => return Exit::Stopped,
            attempt = dialer.connect(&identity, &host) => attempt,
        };
        let reason = match attempt {
            Ok(connection) => {
                say(format_args!(
                    "connected to {gateway} as {} (name {})",
                    connection.node_id(),
                    settings.info.name
                ));
                log(format!("link up as node {}", connection.node_id()));
                let up_since = Instant::now();
                let closed = tokio::select! {
                    () = shutdown.cancelled() => {
                        connection.close().await;
                        return Exit::Stopped;
                    }
                    closed = connection.closed() => closed,
                };
                if up_since.elapsed() >= STABLE_LINK {
                    backoff.reset();
                }
                match closed {
                    Err(revoked) => return Exit::Revoked(revoked),
                    Ok(NodeError::Offline(reason)) => format!("link lost: {reason}"),
                    Ok(cause) => format!("link lost: {cause}"),
                }
            }
            Err(Failure::Retry(why)) => format!("cannot connect: {why}"),
            Err(Failure::Fatal(why)) => return Exit::Unusable(why),
            Err(Failure::Revoked(why)) => return Exit::Revoked(why),
        };
        let delay = backoff.next_delay(u64::from_le_bytes(ferry_fs::random_bytes::<8>()));
        log(format!(
            "{reason}; trying again in {:.1} s",
            delay.as_secs_f64()
        ));
        tokio::select! {
            () = shutdown.cancelled() => return Exit::Stopped,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Aborts a task when dropped: the node's background work ends with `run_until`.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One line on stdout. A closed stdout (the reader went away) must not stop the node,
/// so a failed write is let go, as `println!` would not.
fn say(line: impl fmt::Display) {
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// One line on stderr about the link's state; a failed write is let go, as in [`say`].
fn log(line: impl fmt::Display) {
    let _ = writeln!(std::io::stderr(), "ferry node: {line}");
}
