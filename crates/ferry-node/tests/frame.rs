//! The frame format: every field checked, limits at −1/=/+1, no panic on any input.

use bytes::{BufMut, Bytes, BytesMut};
use ferry_codes::Code;
use ferry_node::frame::{
    ErrorBody, FRAME_CONTROL_MAX_BYTES, FRAME_DATA_MAX_BYTES, FRAME_HEADER_BYTES, FRAME_MAX_BYTES,
    FRAME_VERSION, Frame, Kind, RequestBody, WindowBody,
};
use proptest::prelude::*;
use serde_json::json;

/// A message with the given header fields and payload, valid or not.
fn message(
    version: u8,
    kind: u8,
    flags: u8,
    reserved: u8,
    stream: u32,
    declared: u32,
    payload: &[u8],
) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u8(version);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_u8(reserved);
    out.put_u32(stream);
    out.put_u32(declared);
    out.put_slice(payload);
    out.freeze()
}

fn refused(message: Bytes) -> String {
    let e = Frame::decode(message).expect_err("refused");
    assert_eq!(e.code(), Code::BadFrame);
    e.to_string()
}

#[test]
fn every_kind_round_trips() {
    let frames = [
        Frame::control(Kind::Hello, 0, false, &json!({"name": "a"})),
        Frame::control(Kind::Challenge, 0, false, &json!({})),
        Frame::control(Kind::Proof, 0, false, &json!({})),
        Frame::control(Kind::Welcome, 0, false, &json!({})),
        Frame::control(
            Kind::Request,
            7,
            true,
            &RequestBody {
                command: "file.stat".into(),
                args: json!({"path": "/x"}),
            },
        ),
        Frame::control(Kind::Response, 7, false, &json!({"result": 1})),
        Frame::data(7, Bytes::from_static(b"\x00\xffbytes"), true),
        Frame::control(
            Kind::Error,
            7,
            true,
            &ErrorBody {
                code: Code::NotFound,
                message: "gone".into(),
            },
        ),
        Frame::control(
            Kind::Error,
            0,
            true,
            &ErrorBody {
                code: Code::BadFrame,
                message: "bye".into(),
            },
        ),
        Frame::empty(Kind::Cancel, 7),
        Frame::control(Kind::Window, 7, false, &WindowBody { grant: 42 }),
        Frame::empty(Kind::Heartbeat, 0),
    ];
    for frame in frames {
        let encoded = frame.encode();
        assert_eq!(encoded[0], FRAME_VERSION);
        assert_eq!(encoded.len(), FRAME_HEADER_BYTES + frame.payload.len());
        assert_eq!(Frame::decode(encoded).unwrap(), frame);
    }
}

#[test]
fn data_frames_at_the_limit() {
    for (len, ok) in [
        (FRAME_DATA_MAX_BYTES - 1, true),
        (FRAME_DATA_MAX_BYTES, true),
        (FRAME_DATA_MAX_BYTES + 1, false),
    ] {
        let payload = vec![9u8; len];
        let m = message(
            FRAME_VERSION,
            Kind::Data as u8,
            0,
            0,
            3,
            len as u32,
            &payload,
        );
        assert_eq!(Frame::decode(m).is_ok(), ok, "{len}");
    }
    assert_eq!(FRAME_MAX_BYTES, FRAME_HEADER_BYTES + FRAME_DATA_MAX_BYTES);
}

#[test]
fn control_frames_at_the_limit() {
    for (len, ok) in [
        (FRAME_CONTROL_MAX_BYTES - 1, true),
        (FRAME_CONTROL_MAX_BYTES, true),
        (FRAME_CONTROL_MAX_BYTES + 1, false),
    ] {
        let payload = vec![b' '; len];
        let m = message(
            FRAME_VERSION,
            Kind::Request as u8,
            0,
            0,
            3,
            len as u32,
            &payload,
        );
        assert_eq!(Frame::decode(m).is_ok(), ok, "{len}");
    }
}

#[test]
fn a_message_over_the_frame_limit_is_refused_before_its_header_is_read() {
    // Even a header that claims a small payload: the message size alone decides.
    let m = message(
        FRAME_VERSION,
        Kind::Data as u8,
        0,
        0,
        3,
        1,
        &vec![0u8; FRAME_DATA_MAX_BYTES + 1],
    );
    assert!(refused(m).contains("frame limit"));
}

#[test]
fn every_header_field_is_checked() {
    let ok = |m: Bytes| Frame::decode(m).is_ok();
    assert!(ok(message(1, 7, 1, 0, 3, 1, b"x")));
    assert!(refused(message(2, 7, 0, 0, 3, 1, b"x")).contains("version"));
    assert!(refused(message(0, 7, 0, 0, 3, 1, b"x")).contains("version"));
    for kind in [0u8, 12, 0x80, 0xff] {
        assert!(
            refused(message(1, kind, 0, 0, 3, 1, b"x")).contains("unknown"),
            "{kind}"
        );
    }
    for flags in [2u8, 0x80, 0xff] {
        assert!(
            refused(message(1, 7, flags, 0, 3, 1, b"x")).contains("flags"),
            "{flags}"
        );
    }
    assert!(refused(message(1, 7, 0, 1, 3, 1, b"x")).contains("reserved"));
    assert!(refused(message(1, 7, 0, 0, 3, 2, b"x")).contains("declares"));
    assert!(refused(message(1, 7, 0, 0, 3, 0, b"x")).contains("declares"));
    assert!(refused(message(1, 7, 0, 0, 3, u32::MAX, b"x")).contains("declares"));
    for short in 0..FRAME_HEADER_BYTES {
        let m = message(1, 7, 0, 0, 3, 0, b"").slice(..short);
        assert!(refused(m).contains("shorter"), "{short}");
    }
}

#[test]
fn streams_are_checked_against_the_kind() {
    // Link-level kinds live on stream 0, calls never do; an error may be either.
    for kind in [Kind::Hello, Kind::Challenge, Kind::Proof, Kind::Welcome] {
        assert!(
            Frame::decode(message(1, kind as u8, 0, 0, 1, 2, b"{}")).is_err(),
            "{kind:?}"
        );
        assert!(
            Frame::decode(message(1, kind as u8, 0, 0, 0, 2, b"{}")).is_ok(),
            "{kind:?}"
        );
    }
    assert!(Frame::decode(message(1, Kind::Heartbeat as u8, 0, 0, 5, 0, b"")).is_err());
    for kind in [Kind::Request, Kind::Response, Kind::Window] {
        assert!(
            Frame::decode(message(1, kind as u8, 0, 0, 0, 2, b"{}")).is_err(),
            "{kind:?}"
        );
    }
    assert!(Frame::decode(message(1, Kind::Data as u8, 0, 0, 0, 1, b"x")).is_err());
    assert!(Frame::decode(message(1, Kind::Cancel as u8, 0, 0, 0, 0, b"")).is_err());
    assert!(Frame::decode(message(1, Kind::Error as u8, 1, 0, 0, 2, b"{}")).is_ok());
}

#[test]
fn empty_kinds_carry_nothing_and_empty_data_must_end() {
    assert!(Frame::decode(message(1, Kind::Cancel as u8, 0, 0, 3, 1, b"x")).is_err());
    assert!(Frame::decode(message(1, Kind::Heartbeat as u8, 0, 0, 0, 2, b"{}")).is_err());
    assert!(refused(message(1, Kind::Data as u8, 0, 0, 3, 0, b"")).contains("empty data"));
    assert!(Frame::decode(message(1, Kind::Data as u8, 1, 0, 3, 0, b"")).is_ok());
}

#[test]
fn control_payloads_are_strict_json() {
    let decode = |payload: &[u8]| {
        let m = message(
            1,
            Kind::Window as u8,
            0,
            0,
            3,
            payload.len() as u32,
            payload,
        );
        Frame::decode(m).unwrap().body::<WindowBody>()
    };
    assert_eq!(decode(br#"{"grant":5}"#).unwrap(), WindowBody { grant: 5 });
    for bad in [
        &br#"{"grant":5,"more":1}"#[..],
        br#"{"grant":-1}"#,
        br#"{"grant":4294967296}"#,
        br#"{"grant":"5"}"#,
        br#"{}"#,
        b"not json",
        b"\xff\xfe",
    ] {
        let e = decode(bad).expect_err("refused");
        assert_eq!(e.code(), Code::BadFrame);
    }
    // An error frame with a code this build does not know is refused, not guessed at.
    let payload = br#"{"code":"no_such_code","message":"x"}"#;
    let m = message(1, Kind::Error as u8, 1, 0, 3, payload.len() as u32, payload);
    assert!(Frame::decode(m).unwrap().body::<ErrorBody>().is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random bytes never panic the decoder.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        if let Ok(frame) = Frame::decode(Bytes::from(bytes)) {
            let _ = frame.body::<serde_json::Value>();
            let _ = frame.body::<ErrorBody>();
        }
    }

    /// A valid header with random fields and payload either decodes to exactly what was
    /// sent or is refused; never a panic.
    #[test]
    fn random_headers_decode_exactly_or_are_refused(
        kind in 0u8..16, flags in 0u8..4, stream in any::<u32>(),
        payload in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let m = message(1, kind, flags, 0, stream, payload.len() as u32, &payload);
        if let Ok(frame) = Frame::decode(m.clone()) {
            prop_assert_eq!(frame.encode(), m);
        }
    }
}
