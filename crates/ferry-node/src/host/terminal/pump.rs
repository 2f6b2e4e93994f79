//! The two pumps of a terminal: the shell's output to the gateway, the gateway's input to
//! the shell. Each moves one chunk at a time and takes the next only once the last is
//! through, so back-pressure reaches from the page to the shell in both directions and a
//! terminal holds one chunk each way.

use std::sync::Arc;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::pty::{self, Started};
use crate::terminal::{MESSAGE_PAYLOAD_MAX_BYTES, Message, MessageDecoder, check_size};
use crate::{DataReader, DataWriter, NodeError};

/// Most bytes sent while draining what the shell printed before it exited: a job still
/// printing after the shell's exit must not keep the terminal open.
const DRAIN_MAX_BYTES: usize = 1024 * 1024;

/// How the output pump ended.
pub(super) enum OutputEnd {
    /// Every process closed the PTY, or the drain asked for is done: the writer may still
    /// send the exit.
    Ended,
    /// Asked to stop at once; a message may have been cut midway.
    Aborted,
    /// A send failed: the call was given up or the link lost.
    Lost,
}

/// Sends what the shell prints, in [`Message::Data`] chunks, until the PTY ends. Once
/// `drain` fires, sends only what is there already (up to [`DRAIN_MAX_BYTES`]); once
/// `abort` fires, stops at once. Gives the writer back.
pub(super) async fn output(
    started: Arc<Started>,
    mut writer: DataWriter,
    drain: CancellationToken,
    abort: CancellationToken,
) -> (DataWriter, OutputEnd) {
    let mut buf = vec![0u8; MESSAGE_PAYLOAD_MAX_BYTES];
    let mut drained = 0usize;
    loop {
        let read = if drain.is_cancelled() {
            match started.io.read_now(&mut buf) {
                Ok(Some(n)) if drained < DRAIN_MAX_BYTES => Ok(n),
                _ => return (writer, OutputEnd::Ended),
            }
        } else {
            tokio::select! {
                biased;
                () = abort.cancelled() => return (writer, OutputEnd::Aborted),
                () = drain.cancelled() => continue,
                read = started.io.read(&mut buf) => read,
            }
        };
        let n = match read {
            Ok(0) | Err(_) => return (writer, OutputEnd::Ended),
            Ok(n) => n,
        };
        if drain.is_cancelled() {
            drained += n;
        }
        let message = Message::Data(Bytes::copy_from_slice(&buf[..n])).encode();
        tokio::select! {
            biased;
            () = abort.cancelled() => return (writer, OutputEnd::Aborted),
            sent = writer.send(message) => {
                if sent.is_err() {
                    return (writer, OutputEnd::Lost);
                }
            }
        }
    }
}

/// How the input pump ended.
pub(super) enum InputEnd {
    /// The gateway ended its body: it closed the terminal.
    Closed,
    /// The gateway broke the message format (or sent an `Exit`, or a size out of range).
    Breach(NodeError),
    /// The body failed: the call was given up or the link lost.
    Lost,
    /// Asked to stop, or the PTY no longer takes input.
    Stopped,
}

/// Writes what the gateway types into the PTY and applies its resizes, until its body ends
/// or `stop` fires. Gives the body's reader back: dropping it unfinished would give the
/// whole call up.
pub(super) async fn input(
    started: Arc<Started>,
    mut body: DataReader,
    stop: CancellationToken,
) -> (DataReader, InputEnd) {
    let mut decoder = MessageDecoder::new();
    loop {
        loop {
            let message = match decoder.next_message() {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(e) => return (body, InputEnd::Breach(e)),
            };
            match apply(&started, message, &stop).await {
                Ok(true) => {}
                Ok(false) => return (body, InputEnd::Stopped),
                Err(e) => return (body, InputEnd::Breach(e)),
            }
        }
        let piece = tokio::select! {
            biased;
            () = stop.cancelled() => return (body, InputEnd::Stopped),
            piece = body.next() => piece,
        };
        match piece {
            Some(Ok(bytes)) => decoder.push(&bytes),
            Some(Err(_)) => return (body, InputEnd::Lost),
            None if decoder.is_mid_message() => {
                let cut = NodeError::BadFrame(
                    "the terminal's input ended midway through a message".into(),
                );
                return (body, InputEnd::Breach(cut));
            }
            None => return (body, InputEnd::Closed),
        }
    }
}

/// Applies one message of the gateway's; `Ok(false)` when the pump should stop (asked to,
/// or the PTY refuses input).
async fn apply(
    started: &Started,
    message: Message,
    stop: &CancellationToken,
) -> Result<bool, NodeError> {
    match message {
        Message::Data(bytes) => {
            tokio::select! {
                biased;
                () = stop.cancelled() => Ok(false),
                written = started.io.write_all(&bytes) => Ok(written.is_ok()),
            }
        }
        Message::Resize { cols, rows } => {
            check_size(cols, rows).map_err(NodeError::BadFrame)?;
            let master = started.master.lock().unwrap_or_else(|e| e.into_inner());
            // A PTY that cannot be resized any more is one whose shell is gone.
            Ok(master.resize(pty::size(cols, rows)).is_ok())
        }
        Message::Exit(_) => Err(NodeError::BadFrame(
            "the gateway sent a terminal an exit message; only the node says how a shell \
             ended"
                .into(),
        )),
    }
}
