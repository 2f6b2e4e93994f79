//! The multiplexer over an in-memory duplex: calls, bodies both ways, a large transfer
//! beside a small call, cancellation, flow control, heartbeats, caps, and a peer that
//! breaks the protocol.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{RawPeer, config, drain, linked, raw_peer};
use ferry_codes::Code;
use ferry_node::frame::{
    ErrorBody, FRAME_DATA_MAX_BYTES, Frame, Kind, RequestBody, ResponseBody, WindowBody,
};
use ferry_node::mux::{DATA_FRAME_OVERHEAD_BYTES, Handler, Role, STREAM_WINDOW_BYTES, handler};
use ferry_node::{Call, Incoming, Link, NodeError};
use serde_json::json;
use tokio::sync::mpsc;

const CHUNK_BYTES: usize = 64 * 1024;
/// Bytes the `count` command has handed to its writer (one test uses it).
static COUNTED: AtomicU64 = AtomicU64::new(0);
const MIB: u64 = 1024 * 1024;

/// What the test node serves; `stopped` hears how each long command ended.
fn node_handler(stopped: mpsc::UnboundedSender<String>) -> Handler {
    handler(move |incoming: Incoming| {
        let stopped = stopped.clone();
        async move {
            let Incoming {
                command,
                args,
                mut body,
                reply,
            } = incoming;
            match command.as_str() {
                "echo" => reply.ok(args).unwrap(),
                "big" => {
                    let total = args["bytes"].as_u64().unwrap();
                    let mut writer = reply.stream(json!({"size": total})).unwrap();
                    let chunk = Bytes::from(vec![7u8; CHUNK_BYTES]);
                    let mut sent = 0u64;
                    while sent < total {
                        let n = (total - sent).min(CHUNK_BYTES as u64) as usize;
                        if let Err(e) = writer.send(chunk.slice(..n)).await {
                            let _ = stopped.send(e.code().as_str().to_owned());
                            return;
                        }
                        sent += n as u64;
                    }
                    writer.finish().await.unwrap();
                    let _ = stopped.send("finished".into());
                }
                "forever" => {
                    let cancel = reply.cancellation();
                    let mut writer = reply.stream(json!({})).unwrap();
                    let chunk = Bytes::from(vec![1u8; CHUNK_BYTES]);
                    loop {
                        if let Err(e) = writer.send(chunk.clone()).await {
                            assert!(cancel.is_cancelled());
                            let _ = stopped.send(e.code().as_str().to_owned());
                            return;
                        }
                    }
                }
                "hold" => {
                    reply.cancellation().cancelled().await;
                    let _ = stopped.send("released".into());
                }
                "push" => {
                    let mut total = 0u64;
                    let mut sum = 0u64;
                    while let Some(piece) = body.next().await {
                        let piece = piece.unwrap();
                        total += piece.len() as u64;
                        sum += piece.iter().map(|&b| u64::from(b)).sum::<u64>();
                    }
                    reply.ok(json!({"bytes": total, "sum": sum})).unwrap();
                }
                "fail" => reply.fail(NodeError::Remote {
                    code: Code::NotFound,
                    message: "no such file".into(),
                }),
                "count" => {
                    let mut writer = reply.stream(json!({})).unwrap();
                    let chunk = Bytes::from(vec![2u8; CHUNK_BYTES]);
                    while writer.send(chunk.clone()).await.is_ok() {
                        COUNTED.fetch_add(CHUNK_BYTES as u64, Ordering::SeqCst);
                    }
                }
                "forget" => drop(reply),
                // Answers at once and reads none of the body.
                "early" => reply.ok(json!("early")).unwrap(),
                _ => reply.fail(NodeError::Remote {
                    code: Code::NotFound,
                    message: format!("no command {command}"),
                }),
            }
        }
    })
}

fn nodes() -> (
    ferry_node::Link,
    ferry_node::Link,
    mpsc::UnboundedReceiver<String>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (gateway, node) = linked(node_handler(tx));
    (gateway, node, rx)
}

#[tokio::test]
async fn a_call_gets_its_answer() {
    let (gateway, _node, _) = nodes();
    let response = gateway
        .call("echo", json!({"path": "/data/a"}))
        .await
        .unwrap();
    assert_eq!(response.result, json!({"path": "/data/a"}));
    let mut body = response.body;
    assert!(body.next().await.is_none());
    assert_eq!(gateway.open_streams(), 0);
}

#[tokio::test]
async fn a_failure_keeps_its_code_and_a_forgotten_reply_is_internal() {
    let (gateway, _node, _) = nodes();
    let Err(e) = gateway.call("fail", json!({})).await else {
        panic!("no error")
    };
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(e.to_string(), "no such file");
    let Err(e) = gateway.call("forget", json!({})).await else {
        panic!("no error")
    };
    assert_eq!(e.code(), Code::Internal);
}

#[tokio::test]
async fn a_request_body_streams_to_the_node() {
    let (gateway, _node, _) = nodes();
    let mut call = gateway.open("push", json!({}), true).unwrap();
    let mut writer = call.take_body().unwrap();
    let piece = Bytes::from(vec![3u8; 1024 * 1024 + 17]);
    for _ in 0..5 {
        writer.send(piece.clone()).await.unwrap();
    }
    writer.finish().await.unwrap();
    let response = call.response().await.unwrap();
    let total = 5 * (1024 * 1024 + 17u64);
    assert_eq!(response.result, json!({"bytes": total, "sum": 3 * total}));
}

/// The property that matters: a 16 MiB answer in flight does not hold a small call back.
#[tokio::test]
async fn a_small_call_passes_a_16_mib_transfer_in_flight() {
    let (gateway, _node, mut stopped) = nodes();
    let total = 16 * MIB;
    let big = gateway.call("big", json!({"bytes": total})).await.unwrap();
    let (progress_tx, mut progress) = tokio::sync::watch::channel(0u64);
    let reader = tokio::spawn(async move {
        let mut body = big.body;
        let mut got = 0u64;
        while let Some(piece) = body.next().await {
            got += piece.unwrap().len() as u64;
            progress_tx.send_replace(got);
            // A slow reader: the transfer takes a while, as over a real network.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        got
    });
    progress.wait_for(|&got| got > 0).await.unwrap();
    let started = Instant::now();
    let small = gateway.call("echo", json!({"small": true})).await.unwrap();
    let elapsed = started.elapsed();
    let got_then = *progress.borrow();
    assert_eq!(small.result, json!({"small": true}));
    assert!(
        got_then < total,
        "the big transfer was already done ({got_then} bytes)"
    );
    assert!(
        elapsed < Duration::from_millis(500),
        "the small call took {elapsed:?}"
    );
    assert_eq!(reader.await.unwrap(), total);
    assert_eq!(stopped.recv().await.unwrap(), "finished");
}

#[tokio::test]
async fn dropping_the_body_cancels_and_the_node_stops() {
    let (gateway, node, mut stopped) = nodes();
    let response = gateway.call("forever", json!({})).await.unwrap();
    let mut body = response.body;
    body.next().await.unwrap().unwrap();
    drop(body);
    let how = tokio::time::timeout(Duration::from_secs(2), stopped.recv()).await;
    assert_eq!(how.unwrap().unwrap(), Code::CallCancelled.as_str());
    // Both ends forget the stream, and the link carries on.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(gateway.open_streams(), 0);
    assert_eq!(node.open_streams(), 0);
    assert!(gateway.call("echo", json!(1)).await.is_ok());
}

#[tokio::test]
async fn dropping_a_call_before_its_answer_cancels_it() {
    let (gateway, node, mut stopped) = nodes();
    let call = gateway.open("hold", json!({}), false).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(node.open_streams(), 1);
    drop(call);
    let how = tokio::time::timeout(Duration::from_secs(2), stopped.recv()).await;
    assert_eq!(how.unwrap().unwrap(), "released");
    assert_eq!(node.open_streams(), 0);
}

#[tokio::test]
async fn a_call_on_a_link_that_is_down_fails_at_once_with_node_offline() {
    let (gateway, node, _) = nodes();
    let held = gateway.open("hold", json!({}), false).unwrap();
    node.close();
    let e = gateway.closed().await;
    assert_eq!(e.code(), Code::NodeOffline);
    // The call in flight fails too.
    let e = held.response().await.err().unwrap();
    assert_eq!(e.code(), Code::NodeOffline);
    let started = Instant::now();
    let e = gateway.call("echo", json!({})).await.err().unwrap();
    assert_eq!(e.code(), Code::NodeOffline);
    assert!(started.elapsed() < Duration::from_millis(20));
    assert_eq!(e.code().status(), 503);
}

#[tokio::test]
async fn a_silent_link_is_declared_dead() {
    let (link, mut peer) = raw_peer(config(Role::Gateway), None);
    // The peer reads but never sends, not even a heartbeat.
    let reading =
        tokio::spawn(async move { while peer.next(Duration::from_secs(5)).await.is_some() {} });
    let started = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(3), link.closed())
        .await
        .unwrap();
    assert_eq!(e.code(), Code::NodeOffline);
    assert!(e.to_string().contains("brought nothing"), "{e}");
    assert!(started.elapsed() >= Duration::from_millis(450));
    reading.abort();
}

#[tokio::test]
async fn an_idle_link_lives_on_heartbeats() {
    let (gateway, node, _) = nodes();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(gateway.is_open() && node.is_open());
    assert!(gateway.call("echo", json!({})).await.is_ok());
}

#[tokio::test]
async fn calls_past_the_cap_are_busy_at_once() {
    let (tx, _stopped) = mpsc::unbounded_channel();
    let ((g_tx, g_rx), (n_tx, n_rx)) = common::duplex();
    let mut gateway_config = config(Role::Gateway);
    gateway_config.max_streams = 2;
    let gateway = ferry_node::Link::spawn(g_tx, g_rx, gateway_config, None);
    let _node = ferry_node::Link::spawn(n_tx, n_rx, config(Role::Node), Some(node_handler(tx)));
    let first = gateway.open("hold", json!({}), false).unwrap();
    let _second = gateway.open("hold", json!({}), false).unwrap();
    let Err(e) = gateway.open("hold", json!({}), false) else {
        panic!("not busy")
    };
    assert_eq!(e.code(), Code::LinkBusy);
    drop(first);
    assert!(gateway.open("hold", json!({}), false).is_ok());
}

#[tokio::test]
async fn a_peer_past_the_serving_cap_is_told_busy() {
    let (tx, _stopped) = mpsc::unbounded_channel();
    let mut served = config(Role::Gateway);
    served.max_streams = 2;
    let (link, mut peer) = raw_peer(served, Some(node_handler(tx)));
    for id in [2, 4, 6] {
        let request = RequestBody {
            command: "hold".into(),
            args: json!({}),
        };
        peer.send(Frame::control(Kind::Request, id, true, &request))
            .await;
    }
    let frame = peer.next(Duration::from_secs(2)).await.unwrap();
    assert_eq!((frame.kind, frame.stream), (Kind::Error, 6));
    assert_eq!(frame.body::<ErrorBody>().unwrap().code, Code::LinkBusy);
    assert!(link.is_open());
}

/// The peer asks for a large answer and never grants window: what arrives stays within
/// the window, then more comes only as much as is granted.
#[tokio::test]
async fn a_sender_never_has_more_than_the_window_in_flight() {
    let (tx, _stopped) = mpsc::unbounded_channel();
    // The peer sends no heartbeats: the link must not time out while the test waits.
    let mut patient = config(Role::Gateway);
    patient.heartbeat_timeout = Duration::from_secs(30);
    let (_link, mut peer) = raw_peer(patient, Some(node_handler(tx)));
    let request = RequestBody {
        command: "big".into(),
        args: json!({"bytes": 8 * MIB}),
    };
    peer.send(Frame::control(Kind::Request, 2, true, &request))
        .await;
    let head = peer.next(Duration::from_secs(2)).await.unwrap();
    assert_eq!(head.kind, Kind::Response);
    let mut charged = 0u64;
    while let Some(frame) = peer.next(Duration::from_millis(300)).await {
        assert_eq!(frame.kind, Kind::Data);
        charged += frame.payload.len() as u64 + u64::from(DATA_FRAME_OVERHEAD_BYTES);
    }
    assert!(
        charged <= u64::from(STREAM_WINDOW_BYTES),
        "{charged} bytes in flight"
    );
    assert!(
        charged > u64::from(STREAM_WINDOW_BYTES) / 2,
        "only {charged} bytes sent"
    );
    // Granting what arrived lets about as much again through, no more.
    let grant = charged as u32;
    peer.send(Frame::control(
        Kind::Window,
        2,
        false,
        &WindowBody { grant },
    ))
    .await;
    let mut more = 0u64;
    while let Some(frame) = peer.next(Duration::from_millis(300)).await {
        more += frame.payload.len() as u64 + u64::from(DATA_FRAME_OVERHEAD_BYTES);
    }
    assert!(
        more > 0 && more <= u64::from(grant),
        "{more} after a grant of {grant}"
    );
}

/// A `fetch` call of `link` that the raw `peer` has answered with a head (and a body to
/// follow): its stream id, and the call.
async fn answered_fetch(link: &Link, peer: &mut RawPeer) -> (u32, Call) {
    let call = link.open("fetch", json!({}), false).unwrap();
    let id = call.id();
    peer.next(Duration::from_secs(1)).await.unwrap(); // the request
    peer.send(Frame::control(
        Kind::Response,
        id,
        false,
        &ResponseBody { result: json!({}) },
    ))
    .await;
    (id, call)
}

/// A reader gives window back in batches of a quarter window, never a grant per small
/// frame (a keystroke's echo would cost a window frame each way), and it never holds back
/// more than a batch, so a sender that fills its window with small frames is given room.
#[tokio::test]
async fn window_comes_back_in_batches_of_a_quarter() {
    const PIECE: usize = 1000;
    let batch = u64::from(STREAM_WINDOW_BYTES) / 4;
    let cost = (PIECE + DATA_FRAME_OVERHEAD_BYTES as usize) as u64;
    // The peer sends no heartbeats: the link must not time out while the test runs.
    let mut patient = config(Role::Gateway);
    patient.heartbeat_timeout = Duration::from_secs(30);
    let (link, mut peer) = raw_peer(patient, None);
    let (id, call) = answered_fetch(&link, &mut peer).await;
    let mut body = call.response().await.unwrap().body;
    let piece = Bytes::from(vec![b'k'; PIECE]);
    // Everything a full window holds, each piece read as it comes, as a terminal would.
    let pieces = u64::from(STREAM_WINDOW_BYTES) / cost;
    let mut held = 0u64;
    let mut granted = 0u64;
    for _ in 0..pieces {
        peer.send(Frame::data(id, piece.clone(), false)).await;
        assert_eq!(body.next().await.unwrap().unwrap().len(), PIECE);
        held += cost;
        if held >= batch {
            let frame = peer.next(Duration::from_secs(2)).await;
            let frame = frame.expect("a grant once a batch is taken");
            assert_eq!((frame.kind, frame.stream), (Kind::Window, id));
            assert_eq!(u64::from(frame.body::<WindowBody>().unwrap().grant), held);
            granted += held;
            held = 0;
        } else if let Some(frame) = peer.next(Duration::from_millis(1)).await {
            panic!("a {:?} frame with only {held} bytes taken", frame.kind);
        }
    }
    assert!(granted >= pieces * cost - batch, "granted {granted}");
    assert!(link.is_open());
}

#[tokio::test]
async fn data_past_the_window_closes_the_link_with_bad_frame() {
    let (link, mut peer) = raw_peer(config(Role::Gateway), None);
    let (id, _call) = answered_fetch(&link, &mut peer).await;
    let piece = Bytes::from(vec![0u8; FRAME_DATA_MAX_BYTES]);
    for _ in 0..5 {
        peer.send_raw(Frame::data(id, piece.clone(), false).encode())
            .await;
    }
    let e = tokio::time::timeout(Duration::from_secs(2), link.closed())
        .await
        .unwrap();
    assert!(e.to_string().contains("window"), "{e}");
    // The peer is told why on stream 0.
    let last = peer.next(Duration::from_secs(1)).await.unwrap();
    assert_eq!((last.kind, last.stream), (Kind::Error, 0));
    assert_eq!(last.body::<ErrorBody>().unwrap().code, Code::BadFrame);
}

#[tokio::test]
async fn late_frames_for_a_closed_stream_are_dropped() {
    let (link, mut peer) = raw_peer(config(Role::Gateway), None);
    // A call given up before its answer: what the peer sends for it afterwards is late.
    let call = link.open("fetch", json!({}), false).unwrap();
    let id = call.id();
    drop(call);
    peer.next(Duration::from_secs(1)).await.unwrap(); // the request
    for kind_frame in [
        Frame::data(id, Bytes::from_static(b"late"), true),
        Frame::control(Kind::Window, id, false, &WindowBody { grant: 5 }),
        Frame::empty(Kind::Cancel, id),
        Frame::control(Kind::Response, id, true, &ResponseBody { result: json!(1) }),
        Frame::control(
            Kind::Error,
            id,
            true,
            &ErrorBody {
                code: Code::NotFound,
                message: "x".into(),
            },
        ),
    ] {
        peer.send(kind_frame).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(link.is_open());
}

#[tokio::test]
async fn frames_for_a_stream_never_opened_close_the_link_with_bad_frame() {
    let response = |id: u32| {
        Frame::control(
            Kind::Response,
            id,
            false,
            &ResponseBody { result: json!(1) },
        )
    };
    let breaches: Vec<(&str, Frame)> = vec![
        ("a response on the next id of ours", response(3)),
        ("a response on an id far ahead", response(99)),
        ("a response on an id of the peer's", response(2)),
        (
            "data on the next id of ours",
            Frame::data(3, Bytes::from_static(b"x"), false),
        ),
        (
            "data on an id of the peer's it never opened a call on",
            Frame::data(998, Bytes::from_static(b"x"), false),
        ),
        (
            "a window grant on the next id of ours",
            Frame::control(Kind::Window, 3, false, &WindowBody { grant: 1 }),
        ),
        (
            "a window grant on an id of the peer's it never opened a call on",
            Frame::control(Kind::Window, 998, false, &WindowBody { grant: 1 }),
        ),
    ];
    for (what, frame) in breaches {
        let (link, mut peer) = raw_peer(config(Role::Gateway), None);
        // One call in flight, on id 1: ids past it were never opened.
        let call = link.open("fetch", json!({}), false).unwrap();
        assert_eq!(call.id(), 1);
        peer.next(Duration::from_secs(1)).await.unwrap(); // the request
        peer.send(frame).await;
        let e = tokio::time::timeout(Duration::from_secs(2), link.closed())
            .await
            .unwrap_or_else(|_| panic!("{what}: the link stayed up"));
        assert!(e.to_string().contains("never opened"), "{what}: {e}");
        let last = peer.next(Duration::from_secs(1)).await.unwrap();
        assert_eq!((last.kind, last.stream), (Kind::Error, 0), "{what}");
        assert_eq!(last.body::<ErrorBody>().unwrap().code, Code::BadFrame);
        // The call in flight fails at once.
        let answer = tokio::time::timeout(Duration::from_secs(1), call.response())
            .await
            .unwrap_or_else(|_| panic!("{what}: the call hangs"));
        assert_eq!(answer.err().unwrap().code(), Code::NodeOffline, "{what}");
    }
}

#[tokio::test]
async fn protocol_breaches_close_the_link() {
    let breaches: Vec<(&str, Vec<Frame>)> = vec![
        (
            "a request on an id of ours",
            vec![Frame::control(
                Kind::Request,
                3,
                true,
                &RequestBody {
                    command: "x".into(),
                    args: json!(null),
                },
            )],
        ),
        (
            "a hello after the handshake",
            vec![Frame::control(Kind::Hello, 0, false, &json!({}))],
        ),
        (
            "a second request on one stream",
            vec![
                Frame::control(
                    Kind::Request,
                    2,
                    false,
                    &RequestBody {
                        command: "x".into(),
                        args: json!(null),
                    },
                ),
                Frame::control(
                    Kind::Request,
                    2,
                    false,
                    &RequestBody {
                        command: "x".into(),
                        args: json!(null),
                    },
                ),
            ],
        ),
        (
            "a request with unknown fields",
            vec![Frame::control(
                Kind::Request,
                2,
                true,
                &json!({"command": "x", "args": 1, "extra": 2}),
            )],
        ),
    ];
    for (what, frames) in breaches {
        let (tx, _stopped) = mpsc::unbounded_channel();
        let (link, mut peer) = raw_peer(config(Role::Gateway), Some(node_handler(tx)));
        for frame in frames {
            peer.send(frame).await;
        }
        let e = tokio::time::timeout(Duration::from_secs(2), link.closed()).await;
        assert!(e.is_ok(), "{what}: the link stayed up");
    }
    // And a message that is not a frame at all.
    let (link, mut peer) = raw_peer(config(Role::Gateway), None);
    peer.send_raw(Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n"))
        .await;
    let e = tokio::time::timeout(Duration::from_secs(2), link.closed())
        .await
        .unwrap();
    assert_eq!(e.code(), Code::NodeOffline);
    assert!(e.to_string().contains("bad frame"), "{e}");
}

#[tokio::test]
async fn a_window_grant_for_more_than_was_sent_is_refused() {
    let (tx, _stopped) = mpsc::unbounded_channel();
    let (link, mut peer) = raw_peer(config(Role::Gateway), Some(node_handler(tx)));
    let request = RequestBody {
        command: "hold".into(),
        args: json!({}),
    };
    peer.send(Frame::control(Kind::Request, 2, true, &request))
        .await;
    peer.send(Frame::control(
        Kind::Window,
        2,
        false,
        &WindowBody { grant: u32::MAX },
    ))
    .await;
    let e = tokio::time::timeout(Duration::from_secs(2), link.closed())
        .await
        .unwrap();
    assert!(e.to_string().contains("grant"), "{e}");
}

/// Many transfers at once each finish whole; every stream's buffer is its window, so
/// what is held stays flat however large the transfers are.
#[tokio::test]
async fn concurrent_transfers_each_arrive_whole() {
    let (gateway, _node, _) = nodes();
    let gateway = Arc::new(gateway);
    let mut tasks = Vec::new();
    for i in 1..=8u64 {
        let gateway = gateway.clone();
        tasks.push(tokio::spawn(async move {
            let bytes = i * MIB + i;
            let mut response = gateway.call("big", json!({"bytes": bytes})).await.unwrap();
            assert_eq!(drain(&mut response.body).await.unwrap(), bytes);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(gateway.open_streams(), 0);
}

#[tokio::test]
async fn a_body_the_node_stops_reading_fails_the_writer_instead_of_hanging() {
    let (gateway, _node, _) = nodes();
    let mut call = gateway.open("early", json!({}), true).unwrap();
    let mut writer = call.take_body().unwrap();
    let response = call.response().await.unwrap();
    assert_eq!(response.result, json!("early"));
    let piece = Bytes::from(vec![0u8; 1024 * 1024]);
    let sent = tokio::time::timeout(Duration::from_secs(2), async {
        for _ in 0..16 {
            writer.send(piece.clone()).await?;
        }
        Ok::<_, NodeError>(())
    })
    .await
    .expect("the writer was left waiting for window");
    assert_eq!(sent.unwrap_err().code(), Code::CallCancelled);
}

#[tokio::test]
async fn letting_go_of_every_handle_closes_the_link() {
    let (gateway, node, _) = nodes();
    let clone = gateway.clone();
    drop(gateway);
    assert!(clone.is_open());
    drop(clone);
    let e = tokio::time::timeout(Duration::from_secs(2), node.closed())
        .await
        .unwrap();
    assert_eq!(e.code(), Code::NodeOffline);
}

/// A reader that stops reading holds the sender to one window: memory stays flat however
/// large the transfer, and nothing queues behind the window.
#[tokio::test]
async fn a_stalled_reader_holds_the_sender_to_one_window() {
    let (gateway, _node, _) = nodes();
    let response = gateway.call("count", json!({})).await.unwrap();
    let mut body = response.body;
    body.next().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = COUNTED.load(Ordering::SeqCst);
    let window = u64::from(STREAM_WINDOW_BYTES);
    assert!(
        sent <= window + CHUNK_BYTES as u64,
        "{sent} bytes sent to a stalled reader"
    );
    assert!(sent >= window / 2, "only {sent} bytes sent");
    // Reading on lets it go on.
    for _ in 0..64 {
        body.next().await.unwrap().unwrap();
    }
    assert!(COUNTED.load(Ordering::SeqCst) > sent);
}

/// Random frames (valid headers, random kinds, streams and payloads) thrown at a live link
/// never panic its tasks: the link either carries on or closes with a reason of its own.
#[test]
fn random_frames_never_break_the_link_unexpectedly() {
    use proptest::prelude::*;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let frame = (
        1u8..=11,
        0u32..8,
        any::<bool>(),
        prop_oneof![
            Just(b"{}".to_vec()),
            Just(br#"{"command":"echo","args":{}}"#.to_vec()),
            Just(br#"{"result":1}"#.to_vec()),
            Just(br#"{"grant":100}"#.to_vec()),
            Just(br#"{"code":"not_found","message":"x"}"#.to_vec()),
            Just(Vec::new()),
            proptest::collection::vec(any::<u8>(), 0..64),
        ],
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(200));
    runner
        .run(&proptest::collection::vec(frame, 1..12), |frames| {
            runtime.block_on(async {
                let (tx, _stopped) = mpsc::unbounded_channel();
                let (link, mut peer) = raw_peer(config(Role::Gateway), Some(node_handler(tx)));
                let _call = link.open("echo", json!({}), false);
                for (kind, stream, end, payload) in frames {
                    let mut header = vec![1u8, kind, u8::from(end), 0];
                    header.extend_from_slice(&stream.to_be_bytes());
                    header.extend_from_slice(&(payload.len() as u32).to_be_bytes());
                    header.extend_from_slice(&payload);
                    peer.send_raw(Bytes::from(header)).await;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                if !link.is_open() {
                    let cause = link.closed().await.to_string();
                    assert!(!cause.contains("stopped"), "{cause}");
                }
            });
            Ok(())
        })
        .unwrap();
}
