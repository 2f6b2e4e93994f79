//! Reading what a node answers: heads parsed strictly, checked bodies as a byte stream
//! for the media store, and listings as bounded JSON lines. A node is hostile here like
//! any other input: nothing it says is used before it is checked.

use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use ferry_codes::Code;
use ferry_media::blob::KnownDigest;
use ferry_node::checked::CheckedReader;
use ferry_node::{DataReader, NodeError};
use futures_util::Stream;
use serde::de::DeserializeOwned;

use crate::ToolError;

/// The head of a node's answer to `command`, parsed strictly.
pub(crate) fn head<T: DeserializeOwned>(
    command: &str,
    value: serde_json::Value,
) -> Result<T, ToolError> {
    serde_json::from_value(value).map_err(|e| {
        ToolError::new(
            Code::BadFrame,
            format!("the node's answer to {command} does not parse: {e}"),
        )
    })
}

/// How long a node call may bring nothing.
pub(crate) const STALL: std::time::Duration =
    std::time::Duration::from_secs(ferry_config::limits::NODE_STALL_SECS);

/// `next`, or a [`NodeError::Stalled`] when the node brings nothing for [`STALL`].
pub(crate) async fn stalling<T>(
    next: impl Future<Output = Option<Result<T, NodeError>>>,
) -> Option<Result<T, NodeError>> {
    tokio::time::timeout(STALL, next)
        .await
        .unwrap_or(Some(Err(NodeError::Stalled(STALL))))
}

/// The error that ended a node's body, kept for the tool's answer: the media store
/// sees only that its source failed.
#[derive(Clone, Default)]
pub(crate) struct Failure(Arc<Mutex<Option<NodeError>>>);

impl Failure {
    fn set(&self, error: NodeError) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
    }

    /// The node's error if the body failed, else `other`.
    pub fn or(&self, other: impl Into<ToolError>) -> ToolError {
        match self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(error) => error.into(),
            None => other.into(),
        }
    }
}

/// A checked body as a stream of content for the media store. With `exact`, the body
/// must hold exactly that many bytes (the size the node's head stated): fewer or more
/// fails the stream before it ends, so nothing is recorded. Once the body has ended and
/// matched its trailer, `digest` holds the sha256 the reader computed over exactly what
/// the stream yielded, so the store need not hash it again
/// ([`ferry_media::MediaStore::put_stream_hashed`]).
pub(crate) fn content(
    reader: CheckedReader,
    exact: Option<u64>,
    failure: Failure,
    digest: KnownDigest,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send {
    struct State {
        reader: CheckedReader,
        seen: u64,
        exact: Option<u64>,
        failure: Failure,
        digest: KnownDigest,
        done: bool,
    }
    let fail = |state: &mut State, error: NodeError| {
        let message = error.to_string();
        state.failure.set(error);
        state.done = true;
        Err(std::io::Error::other(message))
    };
    let state = State {
        reader,
        seen: 0,
        exact,
        failure,
        digest,
        done: false,
    };
    futures_util::stream::unfold(state, move |mut state| async move {
        if state.done {
            return None;
        }
        match stalling(state.reader.next()).await {
            Some(Ok(bytes)) => {
                state.seen += bytes.len() as u64;
                if let Some(stated) = state.exact
                    && state.seen > stated
                {
                    let error = NodeError::Mismatch(format!(
                        "the node said the file has {stated} bytes and sent more"
                    ));
                    return Some((fail(&mut state, error), state));
                }
                Some((Ok(bytes), state))
            }
            // Past the size the node stated: the node lied, not the caller.
            Some(Err(NodeError::TooLarge(stated))) if state.exact.is_some() => {
                let error = NodeError::Mismatch(format!(
                    "the node said the file has {stated} bytes and sent more"
                ));
                Some((fail(&mut state, error), state))
            }
            Some(Err(error)) => Some((fail(&mut state, error), state)),
            None => match state.exact {
                Some(stated) if state.seen != stated => {
                    let error = NodeError::Mismatch(format!(
                        "the node said the file has {stated} bytes and sent {}",
                        state.seen
                    ));
                    Some((fail(&mut state, error), state))
                }
                _ => {
                    if let Some(verified) = state.reader.verified() {
                        // Set once: the stream ends here and is never polled again.
                        let _ = state.digest.set(verified.sha256);
                    }
                    None
                }
            },
        }
    })
}

/// A listing's body: at most `max_lines` JSON lines of at most `max_line_bytes` each,
/// parsed strictly; a node that sends more, longer or broken lines breaks the call.
pub(crate) async fn lines<T: DeserializeOwned>(
    mut body: DataReader,
    max_lines: usize,
    max_line_bytes: usize,
) -> Result<Vec<T>, ToolError> {
    let broken = |why: String| ToolError::new(Code::BadFrame, format!("the node's listing {why}"));
    let mut items = Vec::new();
    let mut line = BytesMut::new();
    while let Some(piece) = stalling(body.next()).await {
        let mut piece = piece?;
        while !piece.is_empty() {
            let end = piece.iter().position(|b| *b == b'\n');
            let take = end.unwrap_or(piece.len());
            if line.len() + take > max_line_bytes {
                return Err(broken(format!("has a line over {max_line_bytes} bytes")));
            }
            line.extend_from_slice(&piece.split_to(take));
            if end.is_some() {
                bytes::Buf::advance(&mut piece, 1);
                if items.len() == max_lines {
                    return Err(broken(format!(
                        "has more than the {max_lines} entries asked for"
                    )));
                }
                let item = serde_json::from_slice(&line)
                    .map_err(|e| broken(format!("has an entry that does not parse: {e}")))?;
                items.push(item);
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        return Err(broken("ends in the middle of a line".into()));
    }
    Ok(items)
}
