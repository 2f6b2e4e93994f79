//! Checked bodies over a real link: an honest body verifies; a body that lies about its
//! length or sha256, stops short, or runs past the receiver's cap is refused.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::linked;
use ferry_codes::Code;
use ferry_node::checked::{CheckedReader, CheckedWriter, TRAILER_BYTES};
use ferry_node::mux::handler;
use ferry_node::{Incoming, Link};
use serde_json::json;
use sha2::{Digest, Sha256};

/// A node whose `send` command answers `args.bytes` bytes as a checked body, or, for
/// `raw`, sends the hex-decoded `args.raw` as the body exactly as given.
fn node() -> (Link, Link) {
    linked(handler(|incoming: Incoming| async move {
        let Incoming { args, reply, .. } = incoming;
        let mut writer = reply.stream(json!({})).unwrap();
        if let Some(raw) = args["raw"].as_str() {
            let bytes = hex_decode(raw);
            writer.send(Bytes::from(bytes)).await.unwrap();
            writer.finish().await.unwrap();
            return;
        }
        let total = args["bytes"].as_u64().unwrap() as usize;
        let mut writer = CheckedWriter::new(writer);
        // Several chunks of uneven sizes, some shorter than the trailer.
        let content = pattern(total);
        for piece in content.chunks(7919).flat_map(|c| c.chunks(5000)) {
            writer.send(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        writer.finish().await.unwrap();
    }))
}

fn hex_decode(text: &str) -> Vec<u8> {
    data_encoding::HEXLOWER.decode(text.as_bytes()).unwrap()
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

async fn receive(gateway: &Link, args: serde_json::Value, max: u64) -> Result<Vec<u8>, Code> {
    let response = gateway.call("send", args).await.map_err(|e| e.code())?;
    let mut reader = CheckedReader::new(response.body, max);
    let mut got = Vec::new();
    while let Some(piece) = reader.next().await {
        got.extend_from_slice(&piece.map_err(|e| e.code())?);
    }
    let verified = reader.verified().expect("verified after the end");
    assert_eq!(verified.size, got.len() as u64);
    assert_eq!(verified.sha256, <[u8; 32]>::from(Sha256::digest(&got)));
    Ok(got)
}

fn body_with_trailer(content: &[u8], size: u64, sha: [u8; 32]) -> String {
    let mut raw = BytesMut::from(content);
    raw.put_u64(size);
    raw.put_slice(&sha);
    data_encoding::HEXLOWER.encode(&raw)
}

#[tokio::test]
async fn honest_bodies_of_every_shape_verify() {
    let (gateway, _node) = node();
    for n in [
        0,
        1,
        TRAILER_BYTES - 1,
        TRAILER_BYTES,
        TRAILER_BYTES + 1,
        5000,
        300_000,
    ] {
        let got = receive(&gateway, json!({"bytes": n}), 1 << 20)
            .await
            .unwrap();
        assert_eq!(got, pattern(n), "{n} bytes");
    }
}

#[tokio::test]
async fn the_cap_admits_its_limit_and_refuses_one_byte_more() {
    let (gateway, _node) = node();
    let limit = 100_000u64;
    for (n, ok) in [(limit - 1, true), (limit, true), (limit + 1, false)] {
        let got = receive(&gateway, json!({"bytes": n}), limit).await;
        match ok {
            true => assert_eq!(got.unwrap().len() as u64, n),
            false => assert_eq!(got.unwrap_err(), Code::TooLarge),
        }
    }
}

#[tokio::test]
async fn a_body_that_lies_about_its_length_or_digest_is_refused() {
    let (gateway, _node) = node();
    let content = pattern(1000);
    let sha: [u8; 32] = Sha256::digest(&content).into();
    let liar = body_with_trailer(&content, 999, sha);
    assert_eq!(
        receive(&gateway, json!({"raw": liar}), 1 << 20)
            .await
            .unwrap_err(),
        Code::TransferMismatch
    );
    let mut wrong = sha;
    wrong[0] ^= 1;
    let liar = body_with_trailer(&content, 1000, wrong);
    assert_eq!(
        receive(&gateway, json!({"raw": liar}), 1 << 20)
            .await
            .unwrap_err(),
        Code::TransferMismatch
    );
    let honest = body_with_trailer(&content, 1000, sha);
    assert_eq!(
        receive(&gateway, json!({"raw": honest}), 1 << 20)
            .await
            .unwrap(),
        content
    );
}

#[tokio::test]
async fn a_body_without_its_trailer_is_refused() {
    let (gateway, _node) = node();
    for n in [0usize, 10, TRAILER_BYTES - 1] {
        let raw = data_encoding::HEXLOWER.encode(&pattern(n));
        assert_eq!(
            receive(&gateway, json!({"raw": raw}), 1 << 20)
                .await
                .unwrap_err(),
            Code::TransferMismatch,
            "{n} bytes"
        );
    }
}
