//! Writes the seed corpus of the node link's fuzz target (`fuzz/corpus/node_frame`): a
//! frame of every kind with the body it carries, as the link sends it, and frames broken
//! in each header field: `cargo test -p ferry-node --test seeds -- --ignored write_fuzz_seeds`.

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::Identity;
use ferry_node::frame::{ErrorBody, Frame, Kind, RequestBody, ResponseBody, WindowBody};
use ferry_node::handshake::{Challenge, Hello, NodeInfo, Welcome, prove};
use serde_json::json;

fn frame_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let identity = Identity::generate();
    let hello = Hello::new(
        &identity,
        NodeInfo {
            name: "laptop-1".into(),
            platform: "linux".into(),
            shell: "bash".into(),
            commands: vec!["dir.list".into(), "file.fetch".into(), "x.new".into()],
        },
    );
    let challenge = Challenge {
        nonce: "0f".repeat(32),
        session: "gateway-1/connection-2".into(),
    };
    let proof = prove(&identity, &hello, &challenge).unwrap();
    let good = vec![
        ("hello", control(Kind::Hello, 0, false, &hello)),
        ("challenge", control(Kind::Challenge, 0, false, &challenge)),
        ("proof", control(Kind::Proof, 0, false, &proof)),
        (
            "welcome",
            control(
                Kind::Welcome,
                0,
                false,
                &Welcome {
                    node_id: identity.node_id(),
                },
            ),
        ),
        (
            "request",
            control(
                Kind::Request,
                1,
                false,
                &RequestBody {
                    command: "dir.list".into(),
                    args: json!({"path": "/home/ann", "after": null, "limit": 200}),
                },
            ),
        ),
        (
            "response",
            control(
                Kind::Response,
                1,
                false,
                &ResponseBody {
                    result: json!({"entries": [{"name": "a\u{e9}", "size": 3, "ratio": 0.5}]}),
                },
            ),
        ),
        (
            "error",
            control(
                Kind::Error,
                1,
                true,
                &ErrorBody {
                    code: Code::NotFound,
                    message: "no such file".into(),
                },
            ),
        ),
        (
            "link_error",
            control(
                Kind::Error,
                0,
                true,
                &ErrorBody {
                    code: Code::Internal,
                    message: "bye".into(),
                },
            ),
        ),
        (
            "window",
            control(Kind::Window, 1, false, &WindowBody { grant: 65536 }),
        ),
        (
            "data",
            Frame::data(1, Bytes::from_static(b"\x00\x01file bytes"), false)
                .encode()
                .to_vec(),
        ),
        (
            "data_end",
            Frame::data(1, Bytes::new(), true).encode().to_vec(),
        ),
        ("cancel", Frame::empty(Kind::Cancel, 1).encode().to_vec()),
        (
            "heartbeat",
            Frame::empty(Kind::Heartbeat, 0).encode().to_vec(),
        ),
    ];
    let broken = |name, at: usize, byte: u8| {
        let mut frame = Frame::data(1, Bytes::from_static(b"abc"), false)
            .encode()
            .to_vec();
        frame[at] = byte;
        (name, frame)
    };
    let mut seeds = good;
    seeds.extend([
        broken("bad_version", 0, 2),
        broken("bad_kind", 1, 12),
        broken("bad_flags", 2, 2),
        broken("bad_reserved", 3, 1),
        broken("bad_length", 11, 4),
        (
            "empty_data",
            Frame::data(1, Bytes::new(), false).encode().to_vec(),
        ),
        ("hello_on_a_stream", control(Kind::Hello, 3, false, &hello)),
        ("unknown_field", {
            let payload = br#"{"grant":1,"more":2}"#;
            Frame {
                kind: Kind::Window,
                stream: 1,
                end: false,
                payload: Bytes::from_static(payload),
            }
            .encode()
            .to_vec()
        }),
        ("short", vec![1, 7, 0]),
    ]);
    seeds
}

/// A control frame carrying `body`, as one message.
fn control<T: serde::Serialize>(kind: Kind, stream: u32, end: bool, body: &T) -> Vec<u8> {
    Frame::control(kind, stream, end, body).encode().to_vec()
}

#[test]
#[ignore = "writes the fuzz corpus; run on purpose"]
fn write_fuzz_seeds() {
    ferry_fs::fuzzing::write_corpus("node_frame", frame_seeds());
}

#[test]
fn the_seeds_are_what_they_say() {
    for (name, bytes) in frame_seeds() {
        let broken = name.starts_with("bad_")
            || ["empty_data", "hello_on_a_stream", "short"].contains(&name);
        let decoded = Frame::decode(Bytes::from(bytes));
        assert_eq!(decoded.is_err(), broken, "{name}: {decoded:?}");
    }
}
