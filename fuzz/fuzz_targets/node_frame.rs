//! The node link's frames (spec nodes.md N-LINK): any binary message, as either side
//! receives it. A frame decoded is exactly one valid frame and encodes back to the very
//! bytes; a control body read from it is written back to the same body; a handshake
//! body either fails as itself or, proved by the node's own key, verifies, and no proof
//! but the node's own signature ever verifies.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use ferry_node::frame::{
    ErrorBody, FRAME_CONTROL_MAX_BYTES, FRAME_DATA_MAX_BYTES, Frame, Kind, RequestBody,
    ResponseBody, WindowBody,
};
use ferry_node::handshake::{COMMANDS, Challenge, Hello, Proof, Welcome, prove, verify};
use ferry_node::{Identity, NodeError};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn identity() -> &'static Identity {
    static IDENTITY: OnceLock<Identity> = OnceLock::new();
    IDENTITY.get_or_init(Identity::generate)
}

fn own_hello() -> Hello {
    Hello {
        name: "laptop".into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: vec!["dir.list".into()],
        public_key: ferry_fs::hex(identity().public_key().as_bytes()),
    }
}

fn own_challenge() -> Challenge {
    Challenge {
        nonce: "ab".repeat(32),
        session: "gateway-1/connection-2".into(),
    }
}

/// Whether `value` holds a number JSON may not read back bit for bit.
fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

/// The body of `frame` as `T`, if it is one; written into a frame again, it reads back
/// the same.
fn body<T>(frame: &Frame, exact: impl Fn(&T) -> bool) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let body: T = frame.body().ok()?;
    let again = Frame::control(frame.kind, frame.stream, frame.end, &body);
    if again.payload.len() <= FRAME_CONTROL_MAX_BYTES {
        let decoded = Frame::decode(again.encode()).expect("a frame written decodes");
        assert_eq!(decoded, again);
        if exact(&body) {
            assert_eq!(decoded.body::<T>().unwrap(), body);
        }
    }
    Some(body)
}

/// Every body of this type reads back bit for bit.
fn always<T>(_: &T) -> bool {
    true
}

fn check_hello(hello: Hello) {
    // The node's own key under whatever it says of itself.
    let hello = Hello {
        public_key: own_hello().public_key,
        ..hello
    };
    let challenge = own_challenge();
    let proof = prove(identity(), &hello, &challenge).unwrap();
    match verify(&hello, &challenge, &proof) {
        Ok(node) => {
            assert_eq!(node.info.name, hello.name);
            for word in [&hello.name, &hello.platform, &hello.shell] {
                assert!(
                    (1..=64).contains(&word.len()) && word.is_ascii(),
                    "{word:?}"
                );
            }
            assert!(hello.name.as_bytes()[0].is_ascii_alphanumeric());
            assert!(
                node.info
                    .commands
                    .iter()
                    .all(|c| COMMANDS.contains(&c.as_str()))
            );
            let mut seen = hello.commands.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), hello.commands.len(), "a command twice");
        }
        Err(e) => assert!(matches!(e, NodeError::BadHello(_)), "{e:?}"),
    }
}

fn check_challenge(challenge: &Challenge) {
    let hello = own_hello();
    match prove(identity(), &hello, challenge) {
        Ok(proof) => {
            verify(&hello, challenge, &proof).expect("the node's own proof verifies");
        }
        Err(e) => {
            assert!(matches!(e, NodeError::BadFrame(_)), "{e:?}");
            assert!(
                verify(
                    &hello,
                    challenge,
                    &Proof {
                        signature: "00".repeat(64)
                    }
                )
                .is_err()
            );
        }
    }
}

fn check_proof(proof: &Proof) {
    let (hello, challenge) = (own_hello(), own_challenge());
    let own = prove(identity(), &hello, &challenge).unwrap();
    match verify(&hello, &challenge, proof) {
        Ok(_) => assert_eq!(proof, &own, "a proof not the node's own verified"),
        Err(e) => assert!(matches!(e, NodeError::BadProof(_)), "{e:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = Frame::decode(Bytes::copy_from_slice(data)) else {
        return;
    };
    assert_eq!(&frame.encode()[..], data, "encodes back to the same bytes");
    let limit = match frame.kind {
        Kind::Data => FRAME_DATA_MAX_BYTES,
        Kind::Cancel | Kind::Heartbeat => 0,
        _ => FRAME_CONTROL_MAX_BYTES,
    };
    assert!(frame.payload.len() <= limit);
    if frame.kind != Kind::Error {
        assert_eq!(frame.kind.is_link_level(), frame.stream == 0);
    }
    match frame.kind {
        Kind::Request => {
            body::<RequestBody>(&frame, |b| !has_float(&b.args));
        }
        Kind::Response => {
            body::<ResponseBody>(&frame, |b| !has_float(&b.result));
        }
        Kind::Error => {
            body::<ErrorBody>(&frame, always);
        }
        Kind::Window => {
            body::<WindowBody>(&frame, always);
        }
        Kind::Welcome => {
            body::<Welcome>(&frame, always);
        }
        Kind::Hello => {
            if let Some(hello) = body::<Hello>(&frame, always) {
                check_hello(hello);
            }
        }
        Kind::Challenge => {
            if let Some(challenge) = body::<Challenge>(&frame, always) {
                check_challenge(&challenge);
            }
        }
        Kind::Proof => {
            if let Some(proof) = body::<Proof>(&frame, always) {
                check_proof(&proof);
            }
        }
        Kind::Data | Kind::Cancel | Kind::Heartbeat => {}
    }
});
