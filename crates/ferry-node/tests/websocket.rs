//! The link over a real WebSocket on loopback (tokio-tungstenite on both ends): the
//! handshake, a small call beside a large transfer, and a message past the frame limit
//! refused by the WebSocket itself.

use std::time::Duration;

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::frame::FRAME_MAX_BYTES;
use ferry_node::handshake::{COMMANDS, NodeInfo, gateway_handshake, node_handshake};
use ferry_node::mux::{LinkConfig, Role, handler};
use ferry_node::{Identity, Incoming, Link};
use futures_util::future::ready;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

const TIMEOUT: Duration = Duration::from_secs(5);
const FETCH_BYTES: usize = 6 * 1024 * 1024 + 3;

/// The WebSocket refuses a message past one frame before reading it whole.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(FRAME_MAX_BYTES))
        .max_frame_size(Some(FRAME_MAX_BYTES))
}

/// The binary messages of a WebSocket as the link takes them: text is a breach, control
/// messages are the WebSocket's own business.
fn adapt(
    ws: WebSocketStream<TcpStream>,
) -> (
    impl Sink<Bytes, Error = WsError> + Send + Unpin + 'static,
    impl Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
) {
    let (sink, stream) = ws.split();
    let sink = sink.with(|bytes: Bytes| ready(Ok::<_, WsError>(Message::Binary(bytes))));
    let stream = stream.filter_map(|message| {
        ready(match message {
            Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
            Ok(Message::Text(_)) => Some(Err("a text message on the node link".to_string())),
            Ok(_) => None,
            Err(e) => Some(Err(e.to_string())),
        })
    });
    (sink, stream)
}

fn pattern(at: usize) -> u8 {
    (at % 251) as u8
}

async fn serve_node(incoming: Incoming) {
    let Incoming { command, reply, .. } = incoming;
    match command.as_str() {
        "file.stat" => reply.ok(json!({"size": FETCH_BYTES})).unwrap(),
        "file.fetch" => {
            let mut writer = reply.stream(json!({"size": FETCH_BYTES})).unwrap();
            let mut at = 0;
            while at < FETCH_BYTES {
                let n = (FETCH_BYTES - at).min(100_000);
                let piece: Vec<u8> = (at..at + n).map(pattern).collect();
                writer.send(Bytes::from(piece)).await.unwrap();
                at += n;
            }
            writer.finish().await.unwrap();
        }
        _ => unreachable!(),
    }
}

async fn listener() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/v1/nodes/connect", listener.local_addr().unwrap());
    (listener, url)
}

#[tokio::test]
async fn the_link_works_over_a_websocket() {
    let (listener, url) = listener().await;
    let gateway = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = tokio_tungstenite::accept_async_with_config(tcp, Some(ws_config()))
            .await
            .unwrap();
        let (mut sink, mut stream) = adapt(ws);
        let node = gateway_handshake(&mut sink, &mut stream, "gw/ws", TIMEOUT)
            .await
            .unwrap();
        (
            node,
            Link::spawn(sink, stream, LinkConfig::new(Role::Gateway), None),
        )
    });

    let identity = Identity::generate();
    let node_id = identity.node_id();
    let tcp = TcpStream::connect(url.trim_start_matches("ws://").split('/').next().unwrap())
        .await
        .unwrap();
    let (ws, _) = tokio_tungstenite::client_async_with_config(url.as_str(), tcp, Some(ws_config()))
        .await
        .unwrap();
    let (mut sink, mut stream) = adapt(ws);
    let info = NodeInfo {
        name: "loopback".into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: COMMANDS.iter().map(|c| c.to_string()).collect(),
    };
    let welcome = node_handshake(&mut sink, &mut stream, &identity, info, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(welcome.node_id, node_id);
    let _node = Link::spawn(
        sink,
        stream,
        LinkConfig::new(Role::Node),
        Some(handler(serve_node)),
    );

    let (verified, gateway) = gateway.await.unwrap();
    assert_eq!(verified.id, node_id);

    let mut fetch = gateway
        .call("file.fetch", json!({"path": "/data/big"}))
        .await
        .unwrap();
    assert_eq!(fetch.result["size"], FETCH_BYTES);
    let first = fetch.body.next().await.unwrap().unwrap();
    // A small call while the fetch is under way.
    let stat = gateway
        .call("file.stat", json!({"path": "/data/big"}))
        .await
        .unwrap();
    assert_eq!(stat.result["size"], FETCH_BYTES);
    let mut at = 0;
    let mut check = |piece: &Bytes| {
        for &byte in piece.iter() {
            assert_eq!(byte, pattern(at), "byte {at}");
            at += 1;
        }
    };
    check(&first);
    while let Some(piece) = fetch.body.next().await {
        check(&piece.unwrap());
    }
    assert_eq!(at, FETCH_BYTES);
}

#[tokio::test]
async fn a_message_past_the_frame_limit_ends_the_link() {
    let (listener, url) = listener().await;
    let gateway = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = tokio_tungstenite::accept_async_with_config(tcp, Some(ws_config()))
            .await
            .unwrap();
        let (sink, stream) = adapt(ws);
        let link = Link::spawn(sink, stream, LinkConfig::new(Role::Gateway), None);
        link.closed().await
    });
    let tcp = TcpStream::connect(url.trim_start_matches("ws://").split('/').next().unwrap())
        .await
        .unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(url.as_str(), tcp)
        .await
        .unwrap();
    let _ = ws
        .send(Message::Binary(Bytes::from(vec![1u8; FRAME_MAX_BYTES + 1])))
        .await;
    let e = tokio::time::timeout(TIMEOUT, gateway)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.code(), Code::NodeOffline);
    assert!(e.to_string().contains("failed"), "{e}");
}
