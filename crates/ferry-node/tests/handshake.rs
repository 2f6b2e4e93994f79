//! The handshake: a valid proof passes; a replayed, foreign, truncated or altered one
//! fails; a malformed hello is refused; and the exchange over a link, both ways.

mod common;

use std::time::Duration;

use ferry_codes::Code;
use ferry_node::Identity;
use ferry_node::NodeError;
use ferry_node::frame::{ErrorBody, Frame, Kind};
use ferry_node::handshake::{
    COMMANDS, Challenge, Hello, NodeInfo, PROOF_CONTEXT, Proof, gateway_handshake,
    gateway_handshake_admitting, node_handshake, prove, signed_message, verify,
};

const TIMEOUT: Duration = Duration::from_secs(2);

fn info(name: &str) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: COMMANDS.iter().map(|c| c.to_string()).collect(),
    }
}

fn bad_proof(hello: &Hello, challenge: &Challenge, proof: &Proof) {
    let e = verify(hello, challenge, proof).expect_err("refused");
    assert_eq!(e.code(), Code::BadProof, "{e}");
}

#[test]
fn a_valid_proof_passes() {
    let identity = Identity::generate();
    let hello = Hello::new(&identity, info("build-box"));
    let challenge = Challenge::fresh("gateway-1/conn-7");
    let proof = prove(&identity, &hello, &challenge).unwrap();
    let node = verify(&hello, &challenge, &proof).unwrap();
    assert_eq!(node.id, identity.node_id());
    assert_eq!(node.public_key, identity.public_key());
    assert_eq!(node.info, info("build-box"));
}

#[test]
fn challenges_are_fresh() {
    assert_ne!(Challenge::fresh("s").nonce, Challenge::fresh("s").nonce);
    assert_eq!(Challenge::fresh("s").nonce.len(), 64);
}

#[test]
fn a_proof_replayed_for_another_challenge_fails() {
    let identity = Identity::generate();
    let hello = Hello::new(&identity, info("n"));
    let first = Challenge::fresh("session-a");
    let proof = prove(&identity, &hello, &first).unwrap();
    bad_proof(&hello, &Challenge::fresh("session-a"), &proof);
    // The same nonce in another session is another challenge too.
    let other_session = Challenge {
        nonce: first.nonce.clone(),
        session: "session-b".into(),
    };
    bad_proof(&hello, &other_session, &proof);
}

#[test]
fn a_proof_by_another_key_for_the_same_name_fails() {
    let victim = Identity::generate();
    let attacker = Identity::generate();
    // The attacker claims the victim's name and public key, and signs with its own key.
    let hello = Hello::new(&victim, info("prod-db"));
    let challenge = Challenge::fresh("s");
    let forged = prove(&attacker, &hello, &challenge).unwrap();
    bad_proof(&hello, &challenge, &forged);
}

#[test]
fn a_proof_for_another_name_fails() {
    let identity = Identity::generate();
    let challenge = Challenge::fresh("s");
    let proof = prove(
        &identity,
        &Hello::new(&identity, info("laptop")),
        &challenge,
    )
    .unwrap();
    bad_proof(&Hello::new(&identity, info("prod-db")), &challenge, &proof);
}

#[test]
fn truncated_or_altered_signatures_fail() {
    let identity = Identity::generate();
    let hello = Hello::new(&identity, info("n"));
    let challenge = Challenge::fresh("s");
    let good = prove(&identity, &hello, &challenge).unwrap().signature;
    for cut in [0, 1, 2, 64, 126, 127] {
        bad_proof(
            &hello,
            &challenge,
            &Proof {
                signature: good[..cut].to_string(),
            },
        );
    }
    bad_proof(
        &hello,
        &challenge,
        &Proof {
            signature: format!("{good}00"),
        },
    );
    bad_proof(
        &hello,
        &challenge,
        &Proof {
            signature: good.to_uppercase(),
        },
    );
    // Every digit altered in turn.
    for at in 0..good.len() {
        let mut digits: Vec<u8> = good.clone().into_bytes();
        digits[at] = if digits[at] == b'0' { b'1' } else { b'0' };
        let altered = String::from_utf8(digits).unwrap();
        bad_proof(&hello, &challenge, &Proof { signature: altered });
    }
}

#[test]
fn the_signed_bytes_are_domain_separated_and_unambiguous() {
    let key = Identity::generate().public_key();
    let nonce = [7u8; 32];
    let message = signed_message(&nonce, "ab", &key, "c");
    assert!(message.starts_with(PROOF_CONTEXT));
    // Moving a byte between session and name changes what is signed.
    assert_ne!(message, signed_message(&nonce, "a", &key, "bc"));
}

/// A change that spoils a hello.
type Spoil = Box<dyn Fn(&mut Hello)>;

#[test]
fn malformed_hellos_are_refused() {
    let identity = Identity::generate();
    let good = Hello::new(&identity, info("node-1.lab_a"));
    let cases: Vec<(&str, Spoil)> = vec![
        ("empty name", Box::new(|h| h.name.clear())),
        ("long name", Box::new(|h| h.name = "a".repeat(65))),
        ("name with a quote", Box::new(|h| h.name = "a\"b".into())),
        ("name with a marker", Box::new(|h| h.name = "a>>>".into())),
        ("name with a newline", Box::new(|h| h.name = "a\nb".into())),
        ("name with a space", Box::new(|h| h.name = "a b".into())),
        (
            "name starting with a dot",
            Box::new(|h| h.name = ".a".into()),
        ),
        ("unicode name", Box::new(|h| h.name = "nöde".into())),
        ("platform", Box::new(|h| h.platform = "Linux".into())),
        ("empty shell", Box::new(|h| h.shell.clear())),
        ("shell path", Box::new(|h| h.shell = "/bin/bash".into())),
        (
            "command not a word",
            Box::new(|h| h.commands.push("Shell Exec!".into())),
        ),
        (
            "command twice",
            Box::new(|h| h.commands.push("dir.list".into())),
        ),
        ("short key", Box::new(|h| h.public_key.truncate(62))),
        (
            "uppercase key",
            Box::new(|h| h.public_key = h.public_key.to_uppercase()),
        ),
        (
            "not a point",
            Box::new(|h| h.public_key = format!("02{}", "ff".repeat(31))),
        ),
        // The identity point has small order: any "signature" by it is worthless.
        (
            "weak key",
            Box::new(|h| h.public_key = format!("01{}", "00".repeat(31))),
        ),
    ];
    for (what, spoil) in cases {
        let mut hello = good.clone();
        spoil(&mut hello);
        let challenge = Challenge::fresh("s");
        let proof = prove(&identity, &hello, &challenge).unwrap();
        let e = verify(&hello, &challenge, &proof).expect_err(what);
        assert_eq!(e.code(), Code::BadHello, "{what}: {e}");
    }
    // A command this gateway does not know is left out, the others kept.
    let mut newer = good.clone();
    newer.commands.push("shell.exec".into());
    let challenge = Challenge::fresh("s");
    let proof = prove(&identity, &newer, &challenge).unwrap();
    let node = verify(&newer, &challenge, &proof).unwrap();
    assert_eq!(node.info.commands, good.commands);
    // Fewer commands are fine: a node serves what its owner allows.
    let mut few = good.clone();
    few.commands = vec!["file.stat".into()];
    let challenge = Challenge::fresh("s");
    let proof = prove(&identity, &few, &challenge).unwrap();
    assert!(verify(&few, &challenge, &proof).is_ok());
}

#[test]
fn hellos_with_unknown_fields_are_refused() {
    let json = r#"{"name":"n","platform":"linux","shell":"bash","commands":[],"publicKey":"00","admin":true}"#;
    assert!(serde_json::from_str::<Hello>(json).is_err());
}

#[tokio::test]
async fn the_handshake_over_a_link() {
    let ((mut g_tx, mut g_rx), (mut n_tx, mut n_rx)) = common::duplex();
    let identity = Identity::generate();
    let expected = identity.node_id();
    let node = tokio::spawn(async move {
        node_handshake(&mut n_tx, &mut n_rx, &identity, info("lab"), TIMEOUT).await
    });
    let verified = gateway_handshake(&mut g_tx, &mut g_rx, "gw/1", TIMEOUT)
        .await
        .unwrap();
    assert_eq!(verified.id, expected);
    assert_eq!(verified.info.name, "lab");
    assert_eq!(node.await.unwrap().unwrap().node_id, expected);
}

#[tokio::test]
async fn a_verified_node_the_gateway_refuses_gets_the_refusal_in_place_of_the_welcome() {
    let ((mut g_tx, mut g_rx), (mut n_tx, mut n_rx)) = common::duplex();
    let identity = Identity::generate();
    let expected = identity.node_id();
    let node = tokio::spawn(async move {
        node_handshake(&mut n_tx, &mut n_rx, &identity, info("lab"), TIMEOUT).await
    });
    let refused = gateway_handshake_admitting(&mut g_tx, &mut g_rx, "gw/1", TIMEOUT, |node| {
        // Asked only about a node whose proof passed.
        assert_eq!(node.id, expected);
        async {
            Err(NodeError::Remote {
                code: Code::NodeRevoked,
                message: "this node was revoked".into(),
            })
        }
    })
    .await;
    assert_eq!(refused.unwrap_err().code(), Code::NodeRevoked);
    let Err(e) = node.await.unwrap() else {
        panic!("the node was welcomed")
    };
    assert_eq!(e.code(), Code::NodeRevoked);
    assert_eq!(e.to_string(), "this node was revoked");
}

#[tokio::test]
async fn an_impostor_is_refused_and_told_why() {
    let ((mut g_tx, mut g_rx), (mut n_tx, mut n_rx)) = common::duplex();
    let gateway =
        tokio::spawn(async move { gateway_handshake(&mut g_tx, &mut g_rx, "gw/1", TIMEOUT).await });
    use futures_util::{SinkExt, StreamExt};
    let victim = Identity::generate();
    let attacker = Identity::generate();
    let hello = Hello::new(&victim, info("prod"));
    n_tx.send(Frame::control(Kind::Hello, 0, false, &hello).encode())
        .await
        .unwrap();
    let challenge: Challenge = Frame::decode(n_rx.next().await.unwrap().unwrap())
        .unwrap()
        .body()
        .unwrap();
    let forged = prove(&attacker, &hello, &challenge).unwrap();
    n_tx.send(Frame::control(Kind::Proof, 0, false, &forged).encode())
        .await
        .unwrap();
    let e = gateway.await.unwrap().expect_err("refused");
    assert_eq!(e.code(), Code::BadProof);
    let told = Frame::decode(n_rx.next().await.unwrap().unwrap()).unwrap();
    assert_eq!((told.kind, told.stream), (Kind::Error, 0));
    assert_eq!(told.body::<ErrorBody>().unwrap().code, Code::BadProof);
}

#[tokio::test]
async fn a_silent_or_wrong_first_frame_ends_the_handshake() {
    // Silence: the gateway gives up after its timeout with node_offline.
    let ((mut g_tx, mut g_rx), _node_end) = common::duplex();
    let e = gateway_handshake(&mut g_tx, &mut g_rx, "s", Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NodeOffline);
    // A request before the hello.
    let ((mut g_tx, mut g_rx), (mut n_tx, _n_rx)) = common::duplex();
    use futures_util::SinkExt;
    n_tx.send(Frame::empty(Kind::Heartbeat, 0).encode())
        .await
        .unwrap();
    let e = gateway_handshake(&mut g_tx, &mut g_rx, "s", TIMEOUT)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::BadFrame);
}

#[tokio::test]
async fn a_bad_hello_is_told_bad_hello_before_any_challenge() {
    let ((mut g_tx, mut g_rx), (mut n_tx, mut n_rx)) = common::duplex();
    let gateway =
        tokio::spawn(async move { gateway_handshake(&mut g_tx, &mut g_rx, "gw", TIMEOUT).await });
    let identity = Identity::generate();
    let e = node_handshake(&mut n_tx, &mut n_rx, &identity, info("a\"b"), TIMEOUT)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::BadHello, "{e}");
    assert_eq!(gateway.await.unwrap().unwrap_err().code(), Code::BadHello);
}
