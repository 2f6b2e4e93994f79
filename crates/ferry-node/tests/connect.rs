//! `ferry node run`'s dialer against a gateway in this process (a WebSocket server doing
//! what the gateway's endpoint does: `gateway_handshake`, then `Link::spawn`): a call
//! served by the node host, reconnecting after a dropped link and a restarted server,
//! a revocation ending the run, and `wss://` with a self-signed certificate, pinned or
//! not. Plus the pure parts: URLs and the ws:// address rule, pins, the backoff.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::connect::backoff::{self, BACKOFF_FIRST, BACKOFF_MAX, Backoff};
use ferry_node::connect::{CertPin, Dialer, Exit, Failure, GatewayUrl, is_private, run_until};
use ferry_node::frame::{ErrorBody, FRAME_HEADER_BYTES, FRAME_MAX_BYTES, Frame, Kind, RequestBody};
use ferry_node::handshake::{VerifiedNode, gateway_handshake, gateway_handshake_admitting};
use ferry_node::host::NodeHost;
use ferry_node::mux::{LinkConfig, Role};
use ferry_node::settings::{Flags, Settings};
use ferry_node::{Identity, Link, NodeError};
use futures_util::future::ready;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

// ------------------------------------------------------------------ the in-process gateway

/// What the test gateway does once a node connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    /// Handshake, then keep the link.
    Serve,
    /// Refuse the hello with `node_revoked` (during the handshake).
    RevokeInHandshake,
    /// Welcome, then close the link with `node_revoked` on stream 0 (right after).
    RevokeAfterWelcome,
    /// Welcome, then a text message: a breach.
    TextAfterWelcome,
    /// Welcome, then a WebSocket ping; the link is kept only once its pong came.
    PingAfterWelcome,
    /// Welcome, then one binary message of this many bytes (a data frame for a call the
    /// node refuses, which its link drops or discards), then keep the link.
    MessageAfterWelcome(usize),
}

struct Gateway {
    address: SocketAddr,
    /// Each node that passed the handshake, with the gateway's end of its link.
    nodes: mpsc::UnboundedReceiver<(VerifiedNode, Link)>,
    /// Cancelled to stop listening and close every link.
    stopping: CancellationToken,
    /// Handshakes that passed, whatever came after.
    handshakes: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Gateway {
    async fn start(behaviour: Behaviour, tls: Option<tokio_rustls::TlsAcceptor>) -> Gateway {
        Gateway::start_on("127.0.0.1:0".parse().unwrap(), behaviour, tls).await
    }

    async fn start_on(
        address: SocketAddr,
        behaviour: Behaviour,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Gateway {
        let listener = TcpListener::bind(address).await.unwrap();
        let address = listener.local_addr().unwrap();
        let (tx, nodes) = mpsc::unbounded_channel();
        let stopping = CancellationToken::new();
        let stop = stopping.clone();
        let handshakes = Arc::new(AtomicUsize::new(0));
        let count = handshakes.clone();
        let task = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((tcp, _)) = accepted else {
                    return;
                };
                let tx = tx.clone();
                let tls = tls.clone();
                let stop = stop.clone();
                let count = count.clone();
                tokio::spawn(async move {
                    let gw = Served {
                        behaviour,
                        tx,
                        stop,
                        count,
                    };
                    match tls {
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(tcp).await else {
                                return;
                            };
                            serve_one(stream, gw).await;
                        }
                        None => serve_one(tcp, gw).await,
                    }
                });
            }
        });
        Gateway {
            address,
            nodes,
            stopping,
            handshakes,
            task,
        }
    }

    fn url(&self, scheme: &str, host: &str) -> String {
        format!("{scheme}://{host}:{}", self.address.port())
    }

    async fn next_node(&mut self) -> (VerifiedNode, Link) {
        tokio::time::timeout(WAIT, self.nodes.recv())
            .await
            .expect("a node connects in time")
            .expect("the gateway is running")
    }

    /// Stops listening and closes every link, as a gateway that stops does.
    async fn stop(self) {
        self.stopping.cancel();
        let _ = self.task.await;
    }
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(FRAME_MAX_BYTES))
        .max_frame_size(Some(FRAME_MAX_BYTES))
}

fn adapt<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    ws: WebSocketStream<S>,
) -> (
    impl Sink<Bytes, Error = WsError> + Send + Unpin + 'static,
    impl Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
) {
    let (sink, stream) = ws.split();
    adapt_parts(sink, stream)
}

/// Link messages over the two halves of a WebSocket (owned, or borrowed for a while).
fn adapt_parts<Si, St>(
    sink: Si,
    stream: St,
) -> (
    impl Sink<Bytes, Error = WsError> + Unpin,
    impl Stream<Item = Result<Bytes, String>> + Unpin,
)
where
    Si: Sink<Message, Error = WsError> + Unpin,
    St: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let sink = sink.with(|bytes: Bytes| ready(Ok::<_, WsError>(Message::Binary(bytes))));
    let stream = stream.filter_map(|message| {
        ready(match message {
            Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
            Ok(Message::Text(_)) => Some(Err("text".to_string())),
            Ok(_) => None,
            Err(e) => Some(Err(e.to_string())),
        })
    });
    (sink, stream)
}

fn revoked_frame() -> Bytes {
    let body = ErrorBody {
        code: Code::NodeRevoked,
        message: "node 0123 is revoked".into(),
    };
    Frame::control(Kind::Error, 0, true, &body).encode()
}

/// What one connection of the test gateway works with.
struct Served {
    behaviour: Behaviour,
    tx: mpsc::UnboundedSender<(VerifiedNode, Link)>,
    stop: CancellationToken,
    count: Arc<AtomicUsize>,
}

async fn serve_one<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: S, gw: Served) {
    let Served {
        behaviour,
        tx,
        stop,
        count,
    } = gw;
    let Ok(ws) = tokio_tungstenite::accept_async_with_config(io, Some(ws_config())).await else {
        return;
    };
    if matches!(
        behaviour,
        Behaviour::TextAfterWelcome | Behaviour::PingAfterWelcome
    ) {
        return serve_raw(
            ws,
            Served {
                behaviour,
                tx,
                stop,
                count,
            },
        )
        .await;
    }
    let (mut sink, mut stream) = adapt(ws);
    if behaviour == Behaviour::RevokeInHandshake {
        // As the gateway does: the refusal comes in place of the welcome.
        let refused = gateway_handshake_admitting(&mut sink, &mut stream, "test/gw", WAIT, |_| {
            ready(Err(NodeError::Remote {
                code: Code::NodeRevoked,
                message: "node 0123 is revoked".into(),
            }))
        })
        .await;
        assert!(refused.is_err());
        return;
    }
    let Ok(node) = gateway_handshake(&mut sink, &mut stream, "test/gw", WAIT).await else {
        return;
    };
    count.fetch_add(1, Ordering::SeqCst);
    match behaviour {
        Behaviour::RevokeAfterWelcome => {
            let _ = sink.send(revoked_frame()).await;
            let _ = sink.close().await;
            return;
        }
        Behaviour::MessageAfterWelcome(size) => {
            // A valid frame up to the limit; past it, bytes no frame may have.
            let payload = size.min(FRAME_MAX_BYTES) - FRAME_HEADER_BYTES;
            // A call with a body on an id the link below will not reach for a while: the
            // node refuses the command, and the data that follows is late, not a breach.
            let request = RequestBody {
                command: "none".into(),
                args: serde_json::json!({}),
            };
            let _ = sink
                .send(Frame::control(Kind::Request, 1001, false, &request).encode())
                .await;
            let frame = Frame::data(1001, Bytes::from(vec![7u8; payload]), false);
            let mut message = frame.encode().to_vec();
            message.resize(size, 7);
            let _ = sink.send(Bytes::from(message)).await;
        }
        _ => {}
    }
    let link = Link::spawn(sink, stream, LinkConfig::new(Role::Gateway), None);
    let _ = tx.send((node, link.clone()));
    tokio::select! {
        _ = link.closed() => {}
        () = stop.cancelled() => link.close(),
    }
}

/// The code the node host answers a command no node serves with.
async fn answer_of_host(link: &Link) -> Code {
    match link.call("no.such.command", json!({})).await {
        Ok(response) => panic!("answered {:?}", response.result),
        Err(e) => e.code(),
    }
}

/// The behaviours that need the WebSocket itself after the handshake.
async fn serve_raw<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    ws: WebSocketStream<S>,
    gw: Served,
) {
    let Served {
        behaviour,
        tx,
        stop,
        count,
    } = gw;
    let (mut raw_sink, mut raw_stream) = ws.split();
    let handshake = {
        let (mut sink, mut stream) = adapt_parts(&mut raw_sink, &mut raw_stream);
        gateway_handshake(&mut sink, &mut stream, "test/gw", WAIT).await
    };
    let Ok(node) = handshake else { return };
    count.fetch_add(1, Ordering::SeqCst);
    if behaviour == Behaviour::TextAfterWelcome {
        let _ = raw_sink.send(Message::Text("hello".into())).await;
        // Wait for the node to hang up.
        while let Some(Ok(_)) = raw_stream.next().await {}
        return;
    }
    raw_sink
        .send(Message::Ping(Bytes::from_static(b"are you there")))
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(WAIT, raw_stream.next()).await {
            Ok(Some(Ok(Message::Pong(payload)))) => {
                assert_eq!(&payload[..], b"are you there");
                break;
            }
            // Heartbeats may come first.
            Ok(Some(Ok(Message::Binary(_)))) => continue,
            other => panic!("no pong: {other:?}"),
        }
    }
    let (sink, stream) = adapt_parts(raw_sink, raw_stream);
    let link = Link::spawn(sink, stream, LinkConfig::new(Role::Gateway), None);
    let _ = tx.send((node, link.clone()));
    tokio::select! {
        _ = link.closed() => {}
        () = stop.cancelled() => link.close(),
    }
}

// ----------------------------------------------------------------------------- settings

/// Settings with the state folder `node` under `parent` (made 0700 on first use).
fn settings(gateway: &str, parent: &Path, pin: Option<String>) -> Settings {
    let flags = Flags {
        gateway: Some(gateway.into()),
        name: Some("test-node".into()),
        state: Some(parent.join("node")),
        gateway_cert_sha256: pin,
        ..Flags::default()
    };
    Settings::resolve(flags, |_| None).unwrap()
}

struct Running {
    shutdown: CancellationToken,
    task: JoinHandle<Exit>,
}

impl Running {
    fn start(settings: Settings) -> Running {
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move { run_until(&settings, token).await });
        Running { shutdown, task }
    }

    async fn exit(self) -> Exit {
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("run ends in time")
            .unwrap()
    }

    async fn stop(self) -> Exit {
        self.shutdown.cancel();
        self.exit().await
    }
}

// ------------------------------------------------------------------------- over the link

#[tokio::test]
async fn the_node_connects_and_serves_calls_through_its_host() {
    let mut gateway = Gateway::start(Behaviour::Serve, None).await;
    let state = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let shared_dir = shared.path().canonicalize().unwrap();
    std::fs::write(shared_dir.join("hello.txt"), b"hello").unwrap();
    let settings = Settings::resolve(
        Flags {
            gateway: Some(gateway.url("ws", "127.0.0.1")),
            name: Some("test-node".into()),
            state: Some(state.path().join("node")),
            allow_read: Some(vec![format!("{}/**", shared_dir.display())]),
            ..Flags::default()
        },
        |_| None,
    )
    .unwrap();
    let running = Running::start(settings.clone());
    let (node, link) = gateway.next_node().await;
    let identity = Identity::load_or_create(&settings.state_dir).unwrap();
    assert_eq!(node.id, identity.node_id());
    assert_eq!(node.info.name, "test-node");
    assert_eq!(node.info.platform, std::env::consts::OS);
    assert_eq!(node.info.shell, "sh");
    let host = settings.host();
    assert_eq!(node.info.commands, host.commands());

    // The node's host serves the gateway's calls over the real link, under the node's
    // own policy.
    let file = format!("{}/hello.txt", shared_dir.display());
    let stat = link
        .call("file.stat", json!({ "path": file }))
        .await
        .map(|r| r.result)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stat["size"], 5, "{stat}");
    assert_eq!(stat["kind"], "file", "{stat}");
    let outside = link
        .call("file.stat", json!({ "path": "/etc/passwd" }))
        .await;
    let Err(e) = outside.map(|r| r.result) else {
        panic!("the node's policy lets nothing else be read")
    };
    assert_eq!(e.code(), Code::PathDenied, "{e}");
    assert_eq!(answer_of_host(&link).await, Code::UnknownCommand);
    assert_eq!(running.stop().await, Exit::Stopped);
    // Stopping closed the link cleanly: a close, not a broken connection.
    let closed = tokio::time::timeout(WAIT, link.closed()).await.unwrap();
    assert_eq!(closed.code(), Code::NodeOffline);
    assert!(
        closed.to_string().contains("the other end closed the link"),
        "{closed}"
    );
    gateway.stop().await;
}

#[tokio::test]
async fn the_node_reconnects_after_the_gateway_drops_the_link() {
    let mut gateway = Gateway::start(Behaviour::Serve, None).await;
    let state = tempfile::tempdir().unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        state.path(),
        None,
    ));
    let (first, link) = gateway.next_node().await;
    link.close();
    drop(link);
    let (second, link) = gateway.next_node().await;
    assert_eq!(second.id, first.id);
    assert!(link.is_open());
    // And once more, to see it is a loop and not a single retry.
    link.close();
    drop(link);
    let (third, _link) = gateway.next_node().await;
    assert_eq!(third.id, first.id);
    assert_eq!(running.stop().await, Exit::Stopped);
    gateway.stop().await;
}

#[tokio::test]
async fn the_node_reconnects_after_the_gateway_restarts_on_the_same_port() {
    let mut gateway = Gateway::start(Behaviour::Serve, None).await;
    let address = gateway.address;
    let state = tempfile::tempdir().unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        state.path(),
        None,
    ));
    let (first, _link) = gateway.next_node().await;
    gateway.stop().await;
    // Down long enough for several refused attempts.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut gateway = Gateway::start_on(address, Behaviour::Serve, None).await;
    let (again, link) = gateway.next_node().await;
    assert_eq!(again.id, first.id);
    assert_eq!(answer_of_host(&link).await, Code::UnknownCommand);
    assert_eq!(running.stop().await, Exit::Stopped);
    gateway.stop().await;
}

#[tokio::test]
async fn a_revocation_during_the_handshake_ends_the_run() {
    let gateway = Gateway::start(Behaviour::RevokeInHandshake, None).await;
    let state = tempfile::tempdir().unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        state.path(),
        None,
    ));
    let exit = running.exit().await;
    assert_eq!(exit, Exit::Revoked("node 0123 is revoked".into()));
    assert_eq!(exit.status(), 4);
    assert!(exit.to_string().contains("identity.key"), "{exit}");
    gateway.stop().await;
}

#[tokio::test]
async fn a_revocation_right_after_the_welcome_ends_the_run() {
    let gateway = Gateway::start(Behaviour::RevokeAfterWelcome, None).await;
    let state = tempfile::tempdir().unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        state.path(),
        None,
    ));
    let exit = running.exit().await;
    assert_eq!(exit, Exit::Revoked("node 0123 is revoked".into()));
    assert_eq!(exit.status(), 4);
    gateway.stop().await;
}

#[tokio::test]
async fn an_unusable_state_folder_ends_the_run_with_status_2() {
    let gateway = Gateway::start(Behaviour::Serve, None).await;
    let parent = tempfile::tempdir().unwrap();
    let state = parent.path().join("node");
    std::fs::create_dir(&state).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        parent.path(),
        None,
    ));
    let exit = running.exit().await;
    assert_eq!(exit.status(), 2);
    assert!(exit.to_string().contains("chmod 700"), "{exit}");
    gateway.stop().await;
}

#[tokio::test]
async fn a_text_message_from_the_gateway_closes_the_link_and_the_node_dials_again() {
    let gateway = Gateway::start(Behaviour::TextAfterWelcome, None).await;
    let state = tempfile::tempdir().unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        state.path(),
        None,
    ));
    // The gateway only waits for the node to hang up after its text: a node that took
    // the text would never come back for a second and third handshake.
    let deadline = tokio::time::Instant::now() + WAIT;
    while gateway.handshakes.load(Ordering::SeqCst) < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node never hung up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(running.stop().await, Exit::Stopped);
    gateway.stop().await;
}

#[tokio::test]
async fn the_node_answers_websocket_pings() {
    let mut gateway = Gateway::start(Behaviour::PingAfterWelcome, None).await;
    let state = tempfile::tempdir().unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        state.path(),
        None,
    ));
    // Reported only once the pong came back.
    let (_node, link) = gateway.next_node().await;
    assert_eq!(answer_of_host(&link).await, Code::UnknownCommand);
    assert_eq!(running.stop().await, Exit::Stopped);
    gateway.stop().await;
}

#[tokio::test]
async fn a_message_up_to_one_frame_is_taken_and_one_byte_more_ends_the_link() {
    for size in [FRAME_MAX_BYTES - 1, FRAME_MAX_BYTES] {
        let mut gateway = Gateway::start(Behaviour::MessageAfterWelcome(size), None).await;
        let state = tempfile::tempdir().unwrap();
        let running = Running::start(settings(
            &gateway.url("ws", "127.0.0.1"),
            state.path(),
            None,
        ));
        let (_node, link) = gateway.next_node().await;
        // The same link still serves (the message was taken, not refused).
        assert_eq!(answer_of_host(&link).await, Code::UnknownCommand, "{size}");
        assert!(link.is_open(), "{size}");
        assert!(gateway.nodes.try_recv().is_err(), "{size}: no second link");
        assert_eq!(running.stop().await, Exit::Stopped);
        gateway.stop().await;
    }
    let mut gateway =
        Gateway::start(Behaviour::MessageAfterWelcome(FRAME_MAX_BYTES + 1), None).await;
    let state = tempfile::tempdir().unwrap();
    let running = Running::start(settings(
        &gateway.url("ws", "127.0.0.1"),
        state.path(),
        None,
    ));
    let (first, link) = gateway.next_node().await;
    // The node's WebSocket refused the message: the link ends and the node dials again.
    let closed = tokio::time::timeout(WAIT, link.closed()).await.unwrap();
    assert_eq!(closed.code(), Code::NodeOffline);
    let (second, _link) = gateway.next_node().await;
    assert_eq!(second.id, first.id);
    assert_eq!(running.stop().await, Exit::Stopped);
    gateway.stop().await;
}

// ----------------------------------------------------------------------------------- wss

struct SelfSigned {
    acceptor: tokio_rustls::TlsAcceptor,
    sha256: String,
}

fn self_signed() -> SelfSigned {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let der = certified.cert.der().clone();
    let sha256 = ferry_node::connect::tls::cert_sha256(der.as_ref());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .unwrap();
    SelfSigned {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        sha256,
    }
}

async fn dial_once(settings: &Settings) -> Result<String, Failure> {
    let identity = Identity::load_or_create(&settings.state_dir).unwrap();
    let host = NodeHost::new(settings.policy.clone());
    let connection = Dialer::new(settings).connect(&identity, &host).await?;
    Ok(connection.node_id().to_owned())
}

#[tokio::test]
async fn wss_with_the_right_pin_connects() {
    let cert = self_signed();
    let mut gateway = Gateway::start(Behaviour::Serve, Some(cert.acceptor)).await;
    let state = tempfile::tempdir().unwrap();
    // Upper case with colons, as fingerprints are often printed.
    let spelled = cert
        .sha256
        .to_ascii_uppercase()
        .as_bytes()
        .chunks(2)
        .map(|pair| std::str::from_utf8(pair).unwrap())
        .collect::<Vec<_>>()
        .join(":");
    let settings = settings(
        &gateway.url("wss", "localhost"),
        state.path(),
        Some(spelled),
    );
    let node_id = dial_once(&settings).await.unwrap();
    let (node, _link) = gateway.next_node().await;
    assert_eq!(node.id, node_id);

    // And `run` keeps the link over TLS the same way.
    let running = Running::start(settings);
    let (again, link) = gateway.next_node().await;
    assert_eq!(again.id, node_id);
    assert_eq!(answer_of_host(&link).await, Code::UnknownCommand);
    assert_eq!(running.stop().await, Exit::Stopped);
    gateway.stop().await;
}

#[tokio::test]
async fn wss_without_a_pin_refuses_a_self_signed_certificate_and_names_its_sha256() {
    let cert = self_signed();
    let gateway = Gateway::start(Behaviour::Serve, Some(cert.acceptor)).await;
    let state = tempfile::tempdir().unwrap();
    let settings = settings(&gateway.url("wss", "localhost"), state.path(), None);
    let Err(Failure::Retry(why)) = dial_once(&settings).await else {
        panic!("a self-signed certificate is refused without a pin")
    };
    assert!(why.contains("--gateway-cert-sha256"), "{why}");
    assert!(why.contains(&cert.sha256), "{why}");
    gateway.stop().await;
}

#[tokio::test]
async fn wss_with_a_wrong_pin_is_refused() {
    let cert = self_signed();
    let other = self_signed();
    let gateway = Gateway::start(Behaviour::Serve, Some(cert.acceptor)).await;
    let state = tempfile::tempdir().unwrap();
    let settings = settings(
        &gateway.url("wss", "localhost"),
        state.path(),
        Some(other.sha256.clone()),
    );
    let Err(Failure::Retry(why)) = dial_once(&settings).await else {
        panic!("a certificate other than the pinned one is refused")
    };
    assert!(why.contains(&cert.sha256), "{why}");
    assert!(why.contains(&other.sha256), "{why}");
    gateway.stop().await;
}

/// Presents one certificate while signing with another key: a server that copied a
/// gateway's certificate but does not hold its key.
#[derive(Debug)]
struct BorrowedCertificate(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for BorrowedCertificate {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

#[tokio::test]
async fn wss_with_the_pinned_certificate_but_another_key_is_refused() {
    let shown = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let held = rcgen::KeyPair::generate().unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = provider
        .key_provider
        .load_private_key(rustls::pki_types::PrivateKeyDer::Pkcs8(
            held.serialize_der().into(),
        ))
        .unwrap();
    let certified = rustls::sign::CertifiedKey::new(vec![shown.cert.der().clone()], key);
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(BorrowedCertificate(Arc::new(certified))));
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let gateway = Gateway::start(Behaviour::Serve, Some(acceptor)).await;
    let state = tempfile::tempdir().unwrap();
    let pin = ferry_node::connect::tls::cert_sha256(shown.cert.der().as_ref());
    let settings = settings(&gateway.url("wss", "localhost"), state.path(), Some(pin));
    let Err(Failure::Retry(why)) = dial_once(&settings).await else {
        panic!("a handshake not signed with the pinned certificate's key is refused")
    };
    assert!(why.contains("TLS failed"), "{why}");
    assert_eq!(gateway.handshakes.load(Ordering::SeqCst), 0);
    gateway.stop().await;
}

#[tokio::test]
async fn wss_to_a_plain_websocket_fails_and_is_retried() {
    let gateway = Gateway::start(Behaviour::Serve, None).await;
    let state = tempfile::tempdir().unwrap();
    let settings = settings(
        &gateway.url("wss", "localhost"),
        state.path(),
        Some("00".repeat(32)),
    );
    let Err(Failure::Retry(why)) = dial_once(&settings).await else {
        panic!("TLS to a plain server fails")
    };
    assert!(why.contains("TLS"), "{why}");
    gateway.stop().await;
}

#[tokio::test]
async fn nobody_listening_is_a_failure_to_retry() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let state = tempfile::tempdir().unwrap();
    let settings = settings(&format!("ws://{address}"), state.path(), None);
    let Err(Failure::Retry(why)) = dial_once(&settings).await else {
        panic!("a refused connection is retried")
    };
    assert!(why.contains(&address.to_string()), "{why}");
}

// ------------------------------------------------------------------- URLs and addresses

#[test]
fn the_endpoint_is_appended_to_the_base_url() {
    for (base, connect) in [
        (
            "ws://127.0.0.1:8080",
            "ws://127.0.0.1:8080/v1/nodes/connect",
        ),
        (
            "ws://127.0.0.1:8080/",
            "ws://127.0.0.1:8080/v1/nodes/connect",
        ),
        (
            "ws://10.1.2.3:1/ferry",
            "ws://10.1.2.3:1/ferry/v1/nodes/connect",
        ),
        (
            "ws://10.1.2.3:1/ferry/",
            "ws://10.1.2.3:1/ferry/v1/nodes/connect",
        ),
        (
            "wss://gw.example.org",
            "wss://gw.example.org/v1/nodes/connect",
        ),
        (
            "WSS://GW.example.org:8443/",
            "wss://gw.example.org:8443/v1/nodes/connect",
        ),
        ("ws://[::1]:9", "ws://[::1]:9/v1/nodes/connect"),
        ("ws://localhost:9", "ws://localhost:9/v1/nodes/connect"),
    ] {
        let url = GatewayUrl::parse(base).unwrap_or_else(|e| panic!("{base}: {e}"));
        assert_eq!(url.connect_url(), connect, "{base}");
    }
    let url = GatewayUrl::parse("wss://gw.example.org").unwrap();
    assert_eq!((url.port(), url.is_tls()), (443, true));
    let url = GatewayUrl::parse("ws://10.0.0.1").unwrap();
    assert_eq!((url.port(), url.is_tls()), (80, false));
}

#[test]
fn every_other_form_of_url_is_refused_with_its_reason() {
    for (url, why) in [
        ("http://10.0.0.1:80", "ws:// or wss://"),
        ("https://gw.example.org", "ws:// or wss://"),
        ("10.0.0.1:80", "ws:// or wss://"),
        ("", "ws:// or wss://"),
        ("ws://user@10.0.0.1:80", "user name or password"),
        ("wss://user:secret@gw.example.org", "user name or password"),
        ("ws://:secret@10.0.0.1", "user name or password"),
        ("ws://10.0.0.1:80/?token=1", "query"),
        ("ws://10.0.0.1:80/?", "query"),
        ("wss://gw.example.org/#top", "fragment"),
        ("ws://10.0.0.1:80/a b", "space or a control character"),
        ("ws://10.0.0.1:80/\n", "space or a control character"),
        ("ws://10.0.0.1:99999", "does not parse"),
        ("ws://", "does not parse"),
        ("ws://8.8.8.8:80", "use wss://"),
        ("ws://[2001:db8::1]:80", "use wss://"),
        ("ws://[::ffff:8.8.8.8]:80", "use wss://"),
    ] {
        let e = GatewayUrl::parse(url).unwrap_err();
        assert!(e.contains(why), "{url:?}: {e}");
    }
}

#[test]
fn ws_goes_to_loopback_and_private_ranges_only() {
    let admitted = [
        "127.0.0.1",
        "127.255.255.254",
        "10.0.0.0",
        "10.255.255.255",
        "172.16.0.0",
        "172.31.255.255",
        "192.168.0.0",
        "192.168.255.255",
        "100.64.0.0",
        "100.127.255.255",
        "::1",
        "fc00::",
        "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "fe80::",
        "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "::ffff:10.1.2.3",
        "::ffff:127.0.0.1",
    ];
    let refused = [
        "0.0.0.0",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.0",
        "126.255.255.255",
        "128.0.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.167.255.255",
        "192.169.0.0",
        "100.63.255.255",
        "100.128.0.0",
        "169.254.1.1",
        "255.255.255.255",
        "::",
        "::2",
        "2001:db8::1",
        "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "fe00::",
        "fec0::",
        "ff02::1",
        "::ffff:8.8.8.8",
    ];
    for ip in admitted {
        let ip: IpAddr = ip.parse().unwrap();
        assert!(is_private(ip), "{ip} is private");
        let host = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        GatewayUrl::parse(&format!("ws://{host}:1")).unwrap();
    }
    for ip in refused {
        let ip: IpAddr = ip.parse().unwrap();
        assert!(!is_private(ip), "{ip} is not private");
        let host = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        let e = GatewayUrl::parse(&format!("ws://{host}:1")).unwrap_err();
        assert!(e.contains("use wss://"), "{ip}: {e}");
        // wss:// goes anywhere.
        GatewayUrl::parse(&format!("wss://{host}:1")).unwrap();
    }
}

#[tokio::test]
async fn a_name_is_checked_on_every_address_it_resolves_to() {
    // localhost resolves to loopback only: admitted, and dialled at what it resolved to.
    let url = GatewayUrl::parse("ws://localhost:9").unwrap();
    let addresses = url.resolve().await.unwrap();
    assert!(!addresses.is_empty());
    assert!(
        addresses.iter().all(|a| a.ip().is_loopback()),
        "{addresses:?}"
    );
    let url = GatewayUrl::parse("ws://no-such-host.invalid:9").unwrap();
    assert!(url.resolve().await.is_err());
}

// ------------------------------------------------------------------------------ pins

#[test]
fn a_pin_is_64_hex_digits_in_any_case_with_colons_ignored() {
    let hex = "0123456789abcdef".repeat(4);
    let pin = CertPin::parse(&hex).unwrap();
    assert_eq!(pin.hex(), hex);
    assert_eq!(CertPin::parse(&hex.to_ascii_uppercase()).unwrap(), pin);
    let colons: Vec<&str> = (0..32).map(|i| &hex[i * 2..i * 2 + 2]).collect();
    assert_eq!(CertPin::parse(&colons.join(":")).unwrap(), pin);
    assert_eq!(CertPin::parse(&format!(":{hex}:")).unwrap(), pin);
    for bad in [
        "",
        &hex[..63],
        &format!("{hex}0"),
        &format!("{}g", &hex[..63]),
        &format!("{} ", &hex[..63]),
        &format!("{}-", &hex[..63]),
        &"é".repeat(32),
    ] {
        let e = CertPin::parse(bad).unwrap_err();
        assert!(e.contains("--gateway-cert-sha256"), "{bad:?}: {e}");
    }
}

// --------------------------------------------------------------------------- backoff

#[test]
fn the_backoff_doubles_from_half_a_second_to_thirty() {
    let ceilings: Vec<u64> = (1..=10)
        .map(|n| backoff::ceiling(n).as_millis() as u64)
        .collect();
    assert_eq!(
        ceilings,
        [
            500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000
        ]
    );
    assert_eq!(backoff::ceiling(u32::MAX), BACKOFF_MAX);
    assert_eq!(backoff::ceiling(1), BACKOFF_FIRST);
}

#[test]
fn the_wait_is_jittered_within_the_ceiling() {
    let ceiling = Duration::from_millis(2000);
    for random in [0, 1, 1999, 2000, 2001, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
        assert!(backoff::jittered(ceiling, random) <= ceiling, "{random}");
    }
    assert_eq!(backoff::jittered(ceiling, 0), Duration::ZERO);
    assert_eq!(backoff::jittered(ceiling, 2000), ceiling);
    assert_eq!(backoff::jittered(ceiling, 2001), Duration::ZERO);
    // Random inputs spread over the whole range.
    let waits: std::collections::BTreeSet<Duration> = (0..64)
        .map(|_| backoff::jittered(ceiling, u64::from_le_bytes(ferry_fs::random_bytes::<8>())))
        .collect();
    assert!(waits.len() > 32, "{waits:?}");
}

#[test]
fn the_sequence_is_bounded_and_starts_again_after_a_reset() {
    let mut backoff = Backoff::new();
    let mut total = Duration::ZERO;
    for n in 1..=100u32 {
        let wait = backoff.next_delay(u64::MAX);
        assert!(wait <= BACKOFF_MAX);
        assert_eq!(wait, backoff::jittered(backoff::ceiling(n), u64::MAX));
        total += wait;
    }
    assert!(total <= BACKOFF_MAX * 100);
    assert_eq!(backoff.failures(), 100);
    backoff.reset();
    assert_eq!(backoff.failures(), 0);
    assert!(backoff.next_delay(u64::MAX) <= BACKOFF_FIRST);
}

// -------------------------------------------------------------------------- settings

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
}

/// A state folder (0700) holding `node.toml` with `text` (mode 0600).
fn state_with_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = state.join("node.toml");
    std::fs::write(&file, text).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    (dir, state)
}

fn resolve(flags: Flags) -> Result<Settings, String> {
    Settings::resolve(flags, env_of(&[])).map_err(|e| e.to_string())
}

fn in_state(state: &Path) -> Flags {
    Flags {
        state: Some(state.to_path_buf()),
        name: Some("box".into()),
        ..Flags::default()
    }
}

#[test]
fn the_file_gives_every_key_and_a_flag_replaces_its_key() {
    use ferry_node::policy::Access;
    let pin = "ab".repeat(32);
    let (_dir, state) = state_with_file(&format!(
        "gateway = \"wss://gw.example.org\"\nname = \"from-file\"\n\
         allow_read = [\"/a/**\", \"/c/**\"]\nallow_write = [\"/a/in/**\"]\n\
         deny = [\"/c/private/**\"]\nfollow_symlinks = true\ngateway_cert_sha256 = \"{pin}\"\n"
    ));
    let from_file = resolve(Flags {
        state: Some(state.clone()),
        ..Flags::default()
    })
    .unwrap();
    assert_eq!(
        from_file.gateway.connect_url(),
        "wss://gw.example.org/v1/nodes/connect"
    );
    assert_eq!(from_file.info.name, "from-file");
    assert!(from_file.policy.follow_symlinks);
    assert_eq!(from_file.pin.unwrap().hex(), pin);
    let rules = &from_file.policy.rules;
    assert!(rules.allows(Access::Read, "/a/x"));
    assert!(rules.allows(Access::Read, "/c/x"));
    assert!(!rules.allows(Access::Read, "/c/private/x"));
    assert!(rules.allows(Access::Write, "/a/in/x"));
    assert!(from_file.warnings().is_empty());

    // A list flag replaces the file's list (never appends); the others stay.
    let flagged = resolve(Flags {
        state: Some(state.clone()),
        name: Some("from-flag".into()),
        allow_read: Some(vec!["/c/**".into()]),
        gateway: Some("ws://10.0.0.9:7".into()),
        gateway_cert_sha256: None,
        ..Flags::default()
    });
    // The file's pin stays, and a pin needs wss://.
    assert!(flagged.unwrap_err().contains("wss://"));
    let (_dir, state) = state_with_file(
        "gateway = \"wss://gw.example.org\"\nallow_read = [\"/a/**\", \"/c/**\"]\n\
         deny = [\"/c/private/**\"]\n",
    );
    let flagged = resolve(Flags {
        state: Some(state),
        name: Some("from-flag".into()),
        allow_read: Some(vec!["/c/**".into()]),
        gateway: Some("ws://10.0.0.9:7".into()),
        follow_symlinks: Some(true),
        ..Flags::default()
    })
    .unwrap();
    assert_eq!(flagged.info.name, "from-flag");
    assert_eq!(
        flagged.gateway.connect_url(),
        "ws://10.0.0.9:7/v1/nodes/connect"
    );
    assert!(flagged.policy.follow_symlinks);
    let rules = &flagged.policy.rules;
    assert!(
        !rules.allows(Access::Read, "/a/x"),
        "replaced, not appended"
    );
    assert!(rules.allows(Access::Read, "/c/x"));
    assert!(
        !rules.allows(Access::Read, "/c/private/x"),
        "the file's deny stays"
    );
}

#[test]
fn the_file_is_parsed_strictly() {
    for (text, named) in [
        ("allow_reads = [\"/a/**\"]\n", "allow_reads"),
        ("[nodes]\ngateway = \"ws://10.0.0.1\"\n", "nodes"),
        ("allow_read = \"/a/**\"\n", "allow_read"),
        ("follow_symlinks = \"yes\"\n", "follow_symlinks"),
        ("gateway = \n", "gateway"),
    ] {
        let (_dir, state) = state_with_file(text);
        let e = resolve(in_state(&state)).unwrap_err();
        assert!(e.contains("node.toml"), "{text:?}: {e}");
        assert!(e.contains(named), "{text:?}: {e}");
    }
}

#[test]
fn a_bad_glob_from_the_file_or_a_flag_is_named() {
    let (_dir, state) = state_with_file("gateway = \"ws://127.0.0.1:9\"\ndeny = [\"/x/{a,b\"]\n");
    let e = resolve(in_state(&state)).unwrap_err();
    assert!(e.contains("/x/{a,b"), "{e}");
    // The flag replaces the bad list, and the node can start.
    let mut flags = in_state(&state);
    flags.deny = Some(vec!["/x/**".into()]);
    resolve(flags).unwrap();
    let mut flags = in_state(&state);
    flags.deny = Some(vec!["/x/**".into()]);
    flags.allow_read = Some(vec!["x/**".into()]);
    assert!(resolve(flags).unwrap_err().contains("\"x/**\""));
}

#[test]
fn a_file_others_may_change_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, state) = state_with_file("gateway = \"ws://127.0.0.1:9\"\n");
    let file = state.join("node.toml");
    for mode in [0o620, 0o602, 0o666] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = resolve(in_state(&state)).unwrap_err();
        assert!(e.contains("chmod go-w"), "{mode:o}: {e}");
    }
    // Readable by others is no risk to the policy: taken.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    resolve(in_state(&state)).unwrap();
    // Someone else's file is not this node's settings.
    std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
    let e = resolve(in_state(&state)).unwrap_err();
    assert!(e.contains("uid 65534"), "{e}");
}

#[test]
fn a_file_that_is_not_a_small_regular_file_is_refused_without_hanging() {
    let (_dir, state) = state_with_file("");
    let file = state.join("node.toml");
    std::fs::remove_file(&file).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .unwrap();
    assert!(made.success());
    let e = resolve(in_state(&state)).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    std::fs::remove_file(&file).unwrap();

    // Exactly at the size limit it is read; one byte more is refused.
    use ferry_node::settings::SETTINGS_FILE_MAX_BYTES;
    let head = "gateway = \"ws://127.0.0.1:9\"\n";
    for (size, taken) in [
        (SETTINGS_FILE_MAX_BYTES - 1, true),
        (SETTINGS_FILE_MAX_BYTES, true),
        (SETTINGS_FILE_MAX_BYTES + 1, false),
    ] {
        let comment = "#".repeat(size as usize - head.len() - 1);
        let (_dir, state) = state_with_file(&format!("{head}{comment}\n"));
        let result = resolve(in_state(&state));
        assert_eq!(result.is_ok(), taken, "{size}: {:?}", result.err());
    }
}

#[test]
fn a_pin_needs_wss_and_must_be_a_sha256() {
    let dir = tempfile::tempdir().unwrap();
    let flags = |gateway: &str, pin: &str| Flags {
        gateway: Some(gateway.into()),
        gateway_cert_sha256: Some(pin.into()),
        ..in_state(&dir.path().join("node"))
    };
    let e = resolve(flags("ws://127.0.0.1:9", &"ab".repeat(32))).unwrap_err();
    assert!(e.contains("wss://"), "{e}");
    let e = resolve(flags("wss://gw.example.org", "abcd")).unwrap_err();
    assert!(e.contains("--gateway-cert-sha256"), "{e}");
    resolve(flags("wss://gw.example.org", &"AB:".repeat(32))).unwrap();
}

#[test]
fn without_a_gateway_the_node_says_how_to_give_one() {
    let dir = tempfile::tempdir().unwrap();
    let e = resolve(in_state(&dir.path().join("node"))).unwrap_err();
    assert!(e.contains("--gateway"), "{e}");
}

#[test]
fn the_state_folder_defaults_to_the_xdg_state_home_then_home() {
    let flags = || Flags {
        gateway: Some("ws://127.0.0.1:9".into()),
        name: Some("box".into()),
        ..Flags::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_str().unwrap();
    let xdg = format!("{base}/xdg");
    let settings =
        Settings::resolve(flags(), env_of(&[("XDG_STATE_HOME", &xdg), ("HOME", base)])).unwrap();
    assert_eq!(settings.state_dir, dir.path().join("xdg/ferry-node"));
    // A relative XDG_STATE_HOME is ignored, as the specification says.
    for xdg in ["relative/state", ""] {
        let settings =
            Settings::resolve(flags(), env_of(&[("XDG_STATE_HOME", xdg), ("HOME", base)])).unwrap();
        assert_eq!(
            settings.state_dir,
            dir.path().join(".local/state/ferry-node")
        );
    }
    let e = Settings::resolve(flags(), env_of(&[("HOME", "not/absolute")])).unwrap_err();
    assert!(e.to_string().contains("--state"), "{e}");
}

#[test]
fn the_hello_defaults_to_the_host_name_and_the_shell_of_shell() {
    let dir = tempfile::tempdir().unwrap();
    let flags = || Flags {
        gateway: Some("ws://127.0.0.1:9".into()),
        state: Some(dir.path().join("node")),
        ..Flags::default()
    };
    let settings = Settings::resolve(flags(), env_of(&[("SHELL", "/usr/bin/zsh")])).unwrap();
    let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(settings.info.name, host_name.trim_end());
    assert_eq!(settings.info.shell, "zsh");
    assert_eq!(settings.info.platform, std::env::consts::OS);
    let settings = Settings::resolve(flags(), env_of(&[])).unwrap();
    assert_eq!(settings.info.shell, "sh");
    // Nothing allowed: started all the same, with a warning.
    assert!(settings.warnings()[0].contains("refuse every transfer"));
}

#[test]
fn a_name_the_gateway_would_refuse_stops_the_node_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let longest = "n".repeat(64);
    for (name, ok) in [
        ("box-1.lan_2", true),
        (longest.as_str(), true),
        (&"n".repeat(65), false),
        ("-box", false),
        ("my box", false),
        ("", false),
        ("bøx", false),
    ] {
        let flags = Flags {
            gateway: Some("ws://127.0.0.1:9".into()),
            state: Some(dir.path().join("node")),
            name: Some(name.into()),
            ..Flags::default()
        };
        let result = Settings::resolve(flags, env_of(&[]));
        assert_eq!(result.is_ok(), ok, "{name:?}: {:?}", result.err());
        if let Err(e) = result {
            assert!(e.to_string().contains("name"), "{e}");
        }
    }
}
