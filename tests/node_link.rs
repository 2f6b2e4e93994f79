//! The gateway's end of the node link (spec nodes N-LINK, N-PAIR, N-ADMIN) through a real
//! `ferry serve`: nodes dial `/v1/nodes/connect` over a real WebSocket on loopback, driven
//! by this test with ferry-node's own handshake, and the admin watches them through the
//! HTTP routes and `ferry node list`.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::frame::{FRAME_MAX_BYTES, Frame, Kind};
use ferry_node::handshake::{Challenge, HELLO_FIELD_MAX_BYTES, Hello, Proof};
use ferry_node::{Identity, Link, NodeError};
use futures_util::{SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use support::node::{WAIT, Ws, adapt, dial, info, open, open_from};
use support::{Options, Server, client, get_json, json_answer};
use tokio_tungstenite::tungstenite::Message;

/// Whether the gateway still answers on `link`: it serves no command, so a call is
/// answered `not_found` by its end of the link.
async fn answers(link: &Link) -> bool {
    let call = tokio::time::timeout(WAIT, link.call("anything", json!({}))).await;
    matches!(
        call,
        Ok(Err(NodeError::Remote {
            code: Code::NotFound,
            ..
        }))
    )
}

/// Waits until `link` is closed; how long it took.
async fn closed_within(link: &Link, limit: Duration) -> Duration {
    let start = Instant::now();
    tokio::time::timeout(limit, link.closed())
        .await
        .unwrap_or_else(|_| panic!("the link is still open after {limit:?}"));
    start.elapsed()
}

/// `GET /v1/nodes` as the admin.
fn http_nodes(server: &Server) -> Vec<Value> {
    let (status, body) = get_json(&server.url("/v1/nodes"), &server.token);
    assert_eq!(status, 200, "{body}");
    body["nodes"].as_array().unwrap().clone()
}

/// `ferry node list` on the data dir.
fn cli_nodes(server: &Server) -> Vec<Value> {
    let out = server.ferry(&["node", "list"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn node_of<'a>(nodes: &'a [Value], id: &str) -> &'a Value {
    nodes
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("node {id} not in {nodes:?}"))
}

/// Polls `ferry node list` until node `id` shows `connected` as `want`.
fn cli_shows_connected(server: &Server, id: &str, want: bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        if node_of(&cli_nodes(server), id)["connected"] == want {
            return;
        }
        assert!(Instant::now() < deadline, "connected never became {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn http_delete(server: &Server, path: &str) -> (u16, Value) {
    json_answer(
        client()
            .delete(server.url(path))
            .bearer_auth(&server.token)
            .send()
            .unwrap(),
    )
}

fn http_approve(server: &Server, id: &str) -> Value {
    let (status, body) = json_answer(
        client()
            .post(server.url(&format!("/v1/nodes/{id}/approve")))
            .bearer_auth(&server.token)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn a_node_connects_pending_and_is_approved_while_connected() {
    let server = Server::start();
    let rt = support::node::runtime();
    let identity = Identity::generate();
    let id = identity.node_id();
    let link = rt
        .block_on(dial(&server.addr, &identity, "build-box"))
        .unwrap();

    // The node hears its welcome a moment before the gateway holds its link.
    support::node::wait_for_node(&server, &id, |n| n["connected"] == true);
    let nodes = http_nodes(&server);
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["id"], id.as_str());
    assert_eq!(nodes[0]["name"], "build-box");
    assert_eq!(nodes[0]["state"], "pending");
    assert_eq!(nodes[0]["connected"], true);
    cli_shows_connected(&server, &id, true);
    assert_eq!(node_of(&cli_nodes(&server), &id)["state"], "pending");
    // A pending node stays connected: its link works, it only serves nothing.
    assert!(rt.block_on(answers(&link)));

    let approved = http_approve(&server, &id);
    assert_eq!(approved["state"], "approved");
    assert_eq!(approved["connected"], true);
    assert_eq!(node_of(&cli_nodes(&server), &id)["state"], "approved");
    assert!(rt.block_on(answers(&link)));

    // The same name with another key: a second, pending node, connected too.
    let other = Identity::generate();
    let _other_link = rt
        .block_on(dial(&server.addr, &other, "build-box"))
        .unwrap();
    support::node::wait_for_node(&server, &other.node_id(), |n| n["connected"] == true);
    let nodes = http_nodes(&server);
    assert_eq!(nodes.len(), 2);
    let second = node_of(&nodes, &other.node_id());
    assert_eq!(second["name"], "build-box");
    assert_eq!(second["state"], "pending");
    assert_eq!(second["connected"], true);
    assert_eq!(node_of(&nodes, &id)["state"], "approved");

    // The node goes away: no longer connected, on both views.
    link.close();
    cli_shows_connected(&server, &id, false);
    assert_eq!(node_of(&http_nodes(&server), &id)["connected"], false);
}

#[test]
fn an_http_revoke_closes_the_link_at_once_and_the_node_is_refused_after() {
    let server = Server::start();
    let rt = support::node::runtime();
    let identity = Identity::generate();
    let id = identity.node_id();
    let link = rt.block_on(dial(&server.addr, &identity, "box")).unwrap();
    http_approve(&server, &id);
    let (status, body) = http_delete(&server, &format!("/v1/nodes/{id}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "revoked");
    assert_eq!(body["connected"], false);
    let took = rt.block_on(closed_within(&link, Duration::from_millis(200)));
    eprintln!("closed {took:?} after the revoke answered");
    cli_shows_connected(&server, &id, false);
    // Reconnecting: refused in place of the welcome, with the code the node exits on.
    let Err(e) = rt.block_on(dial(&server.addr, &identity, "box")) else {
        panic!("a revoked node was welcomed")
    };
    assert_eq!(e.code(), Code::NodeRevoked, "{e}");
    assert_eq!(node_of(&http_nodes(&server), &id)["connected"], false);
}

#[test]
fn a_cli_revoke_closes_the_link_within_two_seconds() {
    let server = Server::start();
    let rt = support::node::runtime();
    let identity = Identity::generate();
    let id = identity.node_id();
    let link = rt.block_on(dial(&server.addr, &identity, "box")).unwrap();
    http_approve(&server, &id);
    let revoked = server.ferry(&["node", "revoke", &id]);
    assert!(revoked.status.success(), "{revoked:?}");
    let took = rt.block_on(closed_within(&link, Duration::from_secs(2)));
    eprintln!("closed {took:?} after ferry node revoke");
    cli_shows_connected(&server, &id, false);
    let Err(e) = rt.block_on(dial(&server.addr, &identity, "box")) else {
        panic!("a revoked node was welcomed")
    };
    assert_eq!(e.code(), Code::NodeRevoked);
}

/// Plays the node's side by hand up to the proof, which `sign` makes from the challenge.
async fn handshake_by_hand(
    addr: &str,
    hello: &Hello,
    sign: impl FnOnce(&Challenge) -> Proof,
) -> Option<Frame> {
    let ws = open(addr).await.unwrap();
    let (mut sink, mut stream) = adapt(ws);
    sink.send(Frame::control(Kind::Hello, 0, false, hello).encode())
        .await
        .unwrap();
    let challenge = next_frame(&mut stream).await?;
    if challenge.kind != Kind::Challenge {
        return Some(challenge);
    }
    let challenge: Challenge = challenge.body().unwrap();
    sink.send(Frame::control(Kind::Proof, 0, false, &sign(&challenge)).encode())
        .await
        .unwrap();
    next_frame(&mut stream).await
}

async fn next_frame(
    stream: &mut (impl Stream<Item = Result<Bytes, String>> + Unpin),
) -> Option<Frame> {
    match tokio::time::timeout(WAIT, stream.next()).await {
        Ok(Some(Ok(message))) => Some(Frame::decode(message).unwrap()),
        _ => None,
    }
}

fn refusal_code(frame: Option<Frame>) -> Code {
    let frame = frame.expect("the gateway says why");
    assert_eq!(frame.kind, Kind::Error, "{frame:?}");
    let body: ferry_node::frame::ErrorBody = frame.body().unwrap();
    body.code
}

#[test]
fn bad_nodes_are_refused_and_nothing_is_recorded() {
    let server = Server::start();
    let rt = support::node::runtime();
    let identity = Identity::generate();
    let hello = Hello::new(&identity, info("box"));

    // A signature that is not the key's.
    let code = rt.block_on(handshake_by_hand(&server.addr, &hello, |_| Proof {
        signature: "ab".repeat(64),
    }));
    assert_eq!(refusal_code(code), Code::BadProof);
    // A proof made by another key for this hello.
    let thief = Identity::generate();
    let code = rt.block_on(handshake_by_hand(&server.addr, &hello, |challenge| {
        let stolen = Hello::new(&thief, info("box"));
        ferry_node::handshake::prove(&thief, &stolen, challenge).unwrap()
    }));
    assert_eq!(refusal_code(code), Code::BadProof);
    // A hello past its limits: a name one byte too long.
    let long = Hello {
        name: "n".repeat(HELLO_FIELD_MAX_BYTES + 1),
        ..hello.clone()
    };
    let code = rt.block_on(handshake_by_hand(&server.addr, &long, |_| unreachable!()));
    assert_eq!(refusal_code(code), Code::BadHello);
    assert!(http_nodes(&server).is_empty());

    // A text message, and a message past the frame limit: the link ends, nothing stays.
    for message in [
        Message::Text("hello".into()),
        Message::Binary(Bytes::from(vec![1u8; FRAME_MAX_BYTES + 1])),
    ] {
        let ended = rt.block_on(async {
            let mut ws = open(&server.addr).await.unwrap();
            let _ = ws.send(message).await;
            // The gateway closes: the stream ends or fails, and says nothing else.
            loop {
                match tokio::time::timeout(WAIT, ws.next()).await {
                    Err(_) => return false,
                    Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => return true,
                    Ok(Some(Ok(Message::Binary(b)))) => {
                        let frame = Frame::decode(b).unwrap();
                        assert_ne!(frame.kind, Kind::Challenge, "the handshake went on");
                    }
                    Ok(Some(Ok(_))) => {}
                }
            }
        });
        assert!(ended, "the gateway kept the socket");
    }
    assert!(http_nodes(&server).is_empty());

    // At the limit a name is taken (and one byte under it).
    for len in [HELLO_FIELD_MAX_BYTES - 1, HELLO_FIELD_MAX_BYTES] {
        let node = Identity::generate();
        rt.block_on(dial(&server.addr, &node, &"n".repeat(len)))
            .unwrap();
    }
    assert_eq!(http_nodes(&server).len(), 2);
}

#[test]
fn stalled_handshakes_are_bounded_and_time_out() {
    let server = Server::start();
    let rt = support::node::runtime();
    let started = Instant::now();
    let from = |n: u8| std::net::Ipv4Addr::new(127, 0, 0, n);
    // One source holds 8 handshakes at most: the 9th from it is refused, while another
    // source is still taken.
    let mut stalled: Vec<Ws> = rt.block_on(async {
        let mut stalled = Vec::new();
        for _ in 0..8 {
            stalled.push(open_from(&server.addr, from(2)).await.unwrap());
        }
        stalled
    });
    // A refusal to come back later, as JSON, saying why.
    let refused = |source: u8, why: &str| {
        let Err((status, body)) = rt.block_on(open_from(&server.addr, from(source))) else {
            panic!("a handshake past the bound was taken ({why})")
        };
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "too_many_handshakes", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{body}");
    };
    refused(2, "from this address");
    // 32 sockets that never say hello, from four sources, hold every handshake slot.
    rt.block_on(async {
        for source in 3..=5 {
            for _ in 0..8 {
                stalled.push(open_from(&server.addr, from(source)).await.unwrap());
            }
        }
    });
    assert_eq!(stalled.len(), 32);
    // The 33rd, from a fifth source.
    refused(6, "nodes are connecting already");
    // Once their deadline passes, the stalled ones are closed and a good node connects.
    let closed = rt.block_on(async {
        let mut closed = 0;
        for mut ws in stalled {
            let end = tokio::time::timeout(Duration::from_secs(15), async {
                loop {
                    match ws.next().await {
                        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                        Some(Ok(_)) => {}
                    }
                }
            })
            .await;
            if end.is_ok() {
                closed += 1;
            }
        }
        closed
    });
    assert_eq!(closed, 32);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(9), "closed after {waited:?}");
    let identity = Identity::generate();
    let link = rt.block_on(dial(&server.addr, &identity, "box")).unwrap();
    assert!(rt.block_on(answers(&link)));
    assert_eq!(http_nodes(&server).len(), 1);
}

#[test]
fn the_pending_cap_refuses_a_new_key_past_it_and_never_a_known_node() {
    const CAP: usize = 2;
    let server = Server::start_with(Options {
        env: vec![("FERRY_NODES__MAX_PENDING".into(), CAP.to_string())],
        ..Options::default()
    });
    let rt = support::node::runtime();
    let nodes: Vec<Identity> = (0..CAP + 2).map(|_| Identity::generate()).collect();
    // cap − 1 pending, then the cap: both taken.
    let mut links = Vec::new();
    for node in &nodes[..CAP] {
        links.push(rt.block_on(dial(&server.addr, node, "box")).unwrap());
    }
    assert_eq!(http_nodes(&server).len(), CAP);
    // cap + 1: refused with its code, nothing recorded.
    let Err(e) = rt.block_on(dial(&server.addr, &nodes[CAP], "box")) else {
        panic!("a node past the pending cap was welcomed")
    };
    assert_eq!(e.code(), Code::TooManyPendingNodes, "{e}");
    assert_eq!(http_nodes(&server).len(), CAP);
    // A known pending node reconnects at the cap.
    links.push(rt.block_on(dial(&server.addr, &nodes[0], "box")).unwrap());
    // Approving one makes room for a new key.
    http_approve(&server, &nodes[0].node_id());
    links.push(rt.block_on(dial(&server.addr, &nodes[CAP], "box")).unwrap());
    let Err(e) = rt.block_on(dial(&server.addr, &nodes[CAP + 1], "box")) else {
        panic!("a node past the pending cap was welcomed")
    };
    assert_eq!(e.code(), Code::TooManyPendingNodes);
    // An approved node is never refused by the cap.
    links.push(rt.block_on(dial(&server.addr, &nodes[0], "box")).unwrap());
    assert_eq!(http_nodes(&server).len(), CAP + 1);
}

#[test]
fn a_restart_clears_connected() {
    let mut server = Server::start();
    let rt = support::node::runtime();
    let identity = Identity::generate();
    let id = identity.node_id();
    let link = rt.block_on(dial(&server.addr, &identity, "box")).unwrap();
    cli_shows_connected(&server, &id, true);
    // Killed: the gateway has no chance to clear the mark itself.
    server.restart();
    assert_eq!(node_of(&cli_nodes(&server), &id)["connected"], false);
    assert_eq!(node_of(&http_nodes(&server), &id)["connected"], false);
    rt.block_on(closed_within(&link, WAIT));
}

#[test]
fn a_node_connecting_twice_keeps_only_its_newer_link() {
    let server = Server::start();
    let rt = support::node::runtime();
    let identity = Identity::generate();
    let id = identity.node_id();
    let older = rt.block_on(dial(&server.addr, &identity, "box")).unwrap();
    let newer = rt.block_on(dial(&server.addr, &identity, "box")).unwrap();
    rt.block_on(closed_within(&older, WAIT));
    assert!(rt.block_on(answers(&newer)));
    // The older link's end must not clear the newer one's mark.
    std::thread::sleep(Duration::from_millis(500));
    let nodes = http_nodes(&server);
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["connected"], true);
    cli_shows_connected(&server, &id, true);
    assert!(rt.block_on(answers(&newer)));
}

#[test]
fn the_connect_route_without_an_upgrade_is_a_json_4xx() {
    let server = Server::start();
    let (status, body) = json_answer(
        client()
            .get(server.url("/v1/nodes/connect"))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");
}

#[test]
fn print_config_shows_the_nodes_section() {
    let tmp = tempfile::tempdir().unwrap();
    let node = "0123456789abcdef0123";
    std::fs::write(
        tmp.path().join("ferry.toml"),
        format!("[nodes]\nmax_pending = 9\n[nodes.{node}]\nallow_read = [\"/srv/**\"]\npersons = [\"alice\"]\n"),
    )
    .unwrap();
    let out = support::ferry_command()
        .args(["serve", "--print-config", "--data"])
        .arg(tmp.path())
        .env("FERRY_NODES__FETCH_MAX_BYTES", "1000")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap();
    let value = |section: &str, key: &str| support::config_value(&printed, section, key);
    assert_eq!(
        value("nodes", "max_pending").as_deref(),
        Some("9"),
        "{printed}"
    );
    assert_eq!(value("nodes", "fetch_max_bytes").as_deref(), Some("1000"));
    assert_eq!(
        value("nodes", "push_max_bytes").as_deref(),
        Some("16777216")
    );
    assert_eq!(
        value(&format!("nodes.{node}"), "persons").as_deref(),
        Some("[\"alice\"]"),
        "{printed}"
    );
    // A table that names no node stops the start, naming it.
    std::fs::write(tmp.path().join("ferry.toml"), "[nodes.build-box]\n").unwrap();
    let out = support::ferry_command()
        .args(["serve", "--print-config", "--data"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("build-box"), "{stderr}");
}
