//! The handshake that opens a link: the node says who it is and proves it holds its key.
//!
//! ```text
//! node    → gateway  Hello     {name, platform, shell, commands, publicKey}
//! gateway → node     Challenge {nonce, session}        a fresh 32-byte nonce per link
//! node    → gateway  Proof     {signature}             over signed_message(...)
//! gateway → node     Welcome   {nodeId}                or an Error on stream 0
//! ```
//!
//! The gateway keeps no secret of the node: it learns the public key from the hello and
//! checks the signature with it; pairing then decides whether that key is trusted.

use std::time::Duration;

use bytes::Bytes;
use ed25519_dalek::{Signature, VerifyingKey};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde::{Deserialize, Serialize};

use crate::frame::{ErrorBody, Frame, Kind};
use crate::{Identity, NodeError};

/// The commands a node may advertise, in the spec's order.
pub const COMMANDS: &[&str] = &[
    "dir.list",
    "file.stat",
    "file.fetch",
    "file.push",
    "dir.fetch",
    "terminal.open",
    "terminal.upload",
];

/// What every signature of the handshake starts with, so a proof made here can never pass
/// for a signature of anything else the key might sign, and the reverse.
pub const PROOF_CONTEXT: &[u8] = b"ferry node link v1: proof of identity\0";
/// Bytes of the gateway's challenge nonce.
pub const NONCE_BYTES: usize = 32;
/// Most bytes of the gateway's session data in a challenge.
pub const SESSION_MAX_BYTES: usize = 256;
/// Most bytes of a node's name, platform or shell.
pub const HELLO_FIELD_MAX_BYTES: usize = 64;

/// What the node tells about itself, before it is encoded in a hello.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// The name the admin knows the node by (`[A-Za-z0-9][A-Za-z0-9._-]*`).
    pub name: String,
    /// Its platform, e.g. `linux`, `macos`, `windows`.
    pub platform: String,
    /// Its default shell's program name, e.g. `bash`, `pwsh`.
    pub shell: String,
    /// The commands it serves (a subset of [`COMMANDS`]).
    pub commands: Vec<String>,
}

/// The node's first frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Hello {
    /// See [`NodeInfo::name`].
    pub name: String,
    /// See [`NodeInfo::platform`].
    pub platform: String,
    /// See [`NodeInfo::shell`].
    pub shell: String,
    /// See [`NodeInfo::commands`].
    pub commands: Vec<String>,
    /// The node's ed25519 public key, 64 lowercase hex digits.
    pub public_key: String,
}

impl Hello {
    /// The hello of `identity` describing itself as `info`.
    pub fn new(identity: &Identity, info: NodeInfo) -> Hello {
        Hello {
            name: info.name,
            platform: info.platform,
            shell: info.shell,
            commands: info.commands,
            public_key: ferry_fs::hex(identity.public_key().as_bytes()),
        }
    }
}

/// The gateway's challenge: a fresh nonce and the session data it binds the proof to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Challenge {
    /// 32 random bytes, 64 lowercase hex digits; never used twice.
    pub nonce: String,
    /// Chosen by the gateway (its id and this connection's, say), at most
    /// [`SESSION_MAX_BYTES`]: a proof for one session is worthless in another.
    pub session: String,
}

impl Challenge {
    /// A challenge with a fresh random nonce.
    pub fn fresh(session: impl Into<String>) -> Challenge {
        Challenge {
            nonce: ferry_fs::random_hex::<NONCE_BYTES>(),
            session: session.into(),
        }
    }
}

/// The node's answer to a challenge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proof {
    /// The ed25519 signature over [`signed_message`], 128 lowercase hex digits.
    pub signature: String,
}

/// The gateway's word that the proof passed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Welcome {
    /// The node's id, as the gateway derived it from the key.
    pub node_id: String,
}

/// A node whose proof the gateway verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedNode {
    /// Its id (derived from `public_key`).
    pub id: String,
    /// Its public key, which pairing records.
    pub public_key: VerifyingKey,
    /// What it said about itself, checked.
    pub info: NodeInfo,
}

/// The bytes the node signs:
/// `PROOF_CONTEXT || nonce (32) || be32(len session) || session || public key (32) ||
/// be32(len name) || name`. Lengths prefix the variable fields, so no two different
/// (session, name) pairs give the same bytes.
pub fn signed_message(
    nonce: &[u8; NONCE_BYTES],
    session: &str,
    key: &VerifyingKey,
    name: &str,
) -> Vec<u8> {
    let mut message =
        Vec::with_capacity(PROOF_CONTEXT.len() + 32 + 4 + session.len() + 32 + 4 + name.len());
    message.extend_from_slice(PROOF_CONTEXT);
    message.extend_from_slice(nonce);
    message.extend_from_slice(&(session.len() as u32).to_be_bytes());
    message.extend_from_slice(session.as_bytes());
    message.extend_from_slice(key.as_bytes());
    message.extend_from_slice(&(name.len() as u32).to_be_bytes());
    message.extend_from_slice(name.as_bytes());
    message
}

/// The node's proof for `challenge`, as the node `hello` introduced.
pub fn prove(
    identity: &Identity,
    hello: &Hello,
    challenge: &Challenge,
) -> Result<Proof, NodeError> {
    let nonce = decode_nonce(challenge)?;
    let message = signed_message(
        &nonce,
        &challenge.session,
        &identity.public_key(),
        &hello.name,
    );
    Ok(Proof {
        signature: ferry_fs::hex(&identity.sign(&message).to_bytes()),
    })
}

/// Checks `hello`, then that `proof` is the signature of its key over `challenge`.
pub fn verify(
    hello: &Hello,
    challenge: &Challenge,
    proof: &Proof,
) -> Result<VerifiedNode, NodeError> {
    let info = check_hello(hello)?;
    let key = decode_key(&hello.public_key)?;
    let nonce = decode_nonce(challenge)?;
    let signature = decode_fixed::<64>(&proof.signature)
        .map(|bytes| Signature::from_bytes(&bytes))
        .ok_or_else(|| {
            NodeError::BadProof("the signature is not 128 lowercase hex digits".into())
        })?;
    let message = signed_message(&nonce, &challenge.session, &key, &hello.name);
    // Strict verification refuses malleable signatures and small-order keys.
    key.verify_strict(&message, &signature).map_err(|_| {
        NodeError::BadProof("the signature is not the node key's over this challenge".into())
    })?;
    Ok(VerifiedNode {
        id: crate::identity::node_id(&key),
        public_key: key,
        info,
    })
}

fn check_hello(hello: &Hello) -> Result<NodeInfo, NodeError> {
    check_word("name", &hello.name, |b| {
        b.is_ascii_alphanumeric() || b"._-".contains(&b)
    })?;
    if !hello.name.as_bytes()[0].is_ascii_alphanumeric() {
        return Err(NodeError::BadHello(
            "the name must start with a letter or digit".into(),
        ));
    }
    check_word("platform", &hello.platform, |b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
    })?;
    check_word("shell", &hello.shell, |b| {
        b.is_ascii_alphanumeric() || b"._-".contains(&b)
    })?;
    let mut seen = Vec::new();
    let mut known = Vec::new();
    for command in &hello.commands {
        check_word("command", command, |b| {
            b.is_ascii_lowercase() || b == b'.' || b == b'_'
        })?;
        if seen.contains(&command) {
            return Err(NodeError::BadHello(format!(
                "command {command} is advertised twice"
            )));
        }
        seen.push(command);
        // A command this gateway does not know is left out of what the node may serve,
        // so a newer node still pairs with an older gateway and the new command waits.
        if COMMANDS.contains(&command.as_str()) {
            known.push(command.clone());
        }
    }
    Ok(NodeInfo {
        name: hello.name.clone(),
        platform: hello.platform.clone(),
        shell: hello.shell.clone(),
        commands: known,
    })
}

fn check_word(what: &str, value: &str, allowed: impl Fn(u8) -> bool) -> Result<(), NodeError> {
    if value.is_empty() || value.len() > HELLO_FIELD_MAX_BYTES {
        return Err(NodeError::BadHello(format!(
            "the {what} must have 1 to {HELLO_FIELD_MAX_BYTES} bytes"
        )));
    }
    if !value.bytes().all(allowed) {
        return Err(NodeError::BadHello(format!(
            "the {what} {:?} has a character it may not",
            truncated(value)
        )));
    }
    Ok(())
}

/// A hostile value, cut short for a message.
fn truncated(value: &str) -> String {
    value.chars().take(HELLO_FIELD_MAX_BYTES).collect()
}

fn decode_key(hex: &str) -> Result<VerifyingKey, NodeError> {
    let bytes = decode_fixed::<32>(hex).ok_or_else(|| {
        NodeError::BadHello("the public key is not 64 lowercase hex digits".into())
    })?;
    let key = VerifyingKey::from_bytes(&bytes)
        .map_err(|_| NodeError::BadHello("the public key is not an ed25519 point".into()))?;
    if key.is_weak() {
        return Err(NodeError::BadHello(
            "the public key is a weak (small-order) key".into(),
        ));
    }
    Ok(key)
}

fn decode_nonce(challenge: &Challenge) -> Result<[u8; NONCE_BYTES], NodeError> {
    if challenge.session.len() > SESSION_MAX_BYTES {
        return Err(NodeError::frame(format!(
            "the challenge's session is over {SESSION_MAX_BYTES} bytes"
        )));
    }
    decode_fixed::<NONCE_BYTES>(&challenge.nonce)
        .ok_or_else(|| NodeError::frame("the challenge's nonce is not 64 lowercase hex digits"))
}

fn decode_fixed<const N: usize>(hex: &str) -> Option<[u8; N]> {
    if hex.len() != N * 2 {
        return None;
    }
    data_encoding::HEXLOWER
        .decode(hex.as_bytes())
        .ok()?
        .try_into()
        .ok()
}

// --------------------------------------------------------------------------- over a link

/// Receives the next frame, within `timeout`.
async fn next_frame<St, E>(stream: &mut St, timeout: Duration) -> Result<Frame, NodeError>
where
    St: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    match tokio::time::timeout(timeout, stream.next()).await {
        Err(_) => Err(NodeError::Offline(format!(
            "the handshake took over {} s",
            timeout.as_secs()
        ))),
        Ok(None) => Err(NodeError::Offline(
            "the link closed during the handshake".into(),
        )),
        Ok(Some(Err(e))) => Err(NodeError::Offline(format!(
            "the link failed during the handshake: {e}"
        ))),
        Ok(Some(Ok(message))) => Frame::decode(message),
    }
}

/// The frame if it is of `kind`; an error frame is the other side's refusal.
fn expect(frame: Frame, kind: Kind) -> Result<Frame, NodeError> {
    if frame.kind == kind {
        return Ok(frame);
    }
    if frame.kind == Kind::Error {
        let body: ErrorBody = frame.body()?;
        return Err(NodeError::Remote {
            code: body.code,
            message: body.message,
        });
    }
    Err(NodeError::frame(format!(
        "expected a {kind:?} frame, got {:?}",
        frame.kind
    )))
}

async fn send<Si>(sink: &mut Si, frame: Frame) -> Result<(), NodeError>
where
    Si: Sink<Bytes> + Unpin,
    Si::Error: std::fmt::Display,
{
    sink.send(frame.encode())
        .await
        .map_err(|e| NodeError::Offline(format!("the link failed during the handshake: {e}")))
}

/// The node's side: hello, proof, welcome. The link is then ready for the multiplexer.
pub async fn node_handshake<Si, St, E>(
    sink: &mut Si,
    stream: &mut St,
    identity: &Identity,
    info: NodeInfo,
    timeout: Duration,
) -> Result<Welcome, NodeError>
where
    Si: Sink<Bytes> + Unpin,
    Si::Error: std::fmt::Display,
    St: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let hello = Hello::new(identity, info);
    send(sink, Frame::control(Kind::Hello, 0, false, &hello)).await?;
    let challenge: Challenge =
        expect(next_frame(stream, timeout).await?, Kind::Challenge)?.body()?;
    let proof = prove(identity, &hello, &challenge)?;
    send(sink, Frame::control(Kind::Proof, 0, false, &proof)).await?;
    let welcome: Welcome = expect(next_frame(stream, timeout).await?, Kind::Welcome)?.body()?;
    if welcome.node_id != identity.node_id() {
        return Err(NodeError::frame("the gateway welcomed another node id"));
    }
    Ok(welcome)
}

/// The gateway's side: reads the hello, challenges with `session`, verifies the proof and
/// welcomes the node; a node that fails is told why on stream 0.
pub async fn gateway_handshake<Si, St, E>(
    sink: &mut Si,
    stream: &mut St,
    session: &str,
    timeout: Duration,
) -> Result<VerifiedNode, NodeError>
where
    Si: Sink<Bytes> + Unpin,
    Si::Error: std::fmt::Display,
    St: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    gateway_handshake_admitting(sink, stream, session, timeout, |_| async { Ok(()) }).await
}

/// Like [`gateway_handshake`], but asks `admit` about the verified node before welcoming
/// it: a refusal (a revoked node, too many pending ones) reaches the node in place of the
/// welcome, as an error on stream 0 with the refusal's code, which `node_handshake`
/// returns as [`NodeError::Remote`].
pub async fn gateway_handshake_admitting<Si, St, E, A, Fut>(
    sink: &mut Si,
    stream: &mut St,
    session: &str,
    timeout: Duration,
    admit: A,
) -> Result<VerifiedNode, NodeError>
where
    Si: Sink<Bytes> + Unpin,
    Si::Error: std::fmt::Display,
    St: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
    A: FnOnce(&VerifiedNode) -> Fut,
    Fut: Future<Output = Result<(), NodeError>>,
{
    let result = async {
        let hello: Hello = expect(next_frame(stream, timeout).await?, Kind::Hello)?.body()?;
        check_hello(&hello)?;
        let challenge = Challenge::fresh(session);
        send(sink, Frame::control(Kind::Challenge, 0, false, &challenge)).await?;
        let proof: Proof = expect(next_frame(stream, timeout).await?, Kind::Proof)?.body()?;
        let node = verify(&hello, &challenge, &proof)?;
        admit(&node).await?;
        Ok::<_, NodeError>(node)
    }
    .await;
    match result {
        Ok(node) => {
            let welcome = Welcome {
                node_id: node.id.clone(),
            };
            send(sink, Frame::control(Kind::Welcome, 0, false, &welcome)).await?;
            Ok(node)
        }
        Err(error) => {
            let body = ErrorBody {
                code: error.code(),
                message: error.to_string(),
            };
            let _ = send(sink, Frame::control(Kind::Error, 0, true, &body)).await;
            Err(error)
        }
    }
}
