//! The terminal commands a node serves (spec N-TERM), as they travel on the link.
//!
//! | command | args | answer head | request body | answer body |
//! |---|---|---|---|---|
//! | `terminal.open` | [`TerminalOpenArgs`] | [`TerminalOpenHead`] | [`Message`]s: input, resize | [`Message`]s: output, then exit |
//! | `terminal.upload` | [`TerminalUploadArgs`] | [`TerminalUploadHead`] | checked: the file's bytes | none |
//!
//! A terminal is one long call: the gateway's request body carries what the person types
//! and each resize, the node's answer body carries what the shell prints and, last, how
//! it exited. Both are sequences of [`Message`]s, so a resize never has to be told apart
//! from typed bytes. The link's flow control is the back-pressure: a page that reads
//! slowly stops the gateway reading, the node's window fills, and the shell blocks on its
//! writes; a person pasting a gigabyte waits on the shell reading it.
//!
//! The terminal ends when the gateway ends its request body, gives the call up, or the link
//! dies: the node then ends the shell's whole process group.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::NodeError;

/// Opens the node's shell in a PTY.
pub const TERMINAL_OPEN: &str = "terminal.open";
/// Stages one file for the terminal.
pub const TERMINAL_UPLOAD: &str = "terminal.upload";

/// Most columns or rows of a terminal; 0 is refused too.
pub const TERMINAL_SIZE_MAX: u16 = 1000;
/// Most bytes of one message's payload: what one input or output message carries.
pub const MESSAGE_PAYLOAD_MAX_BYTES: usize = 64 * 1024;
/// Most bytes of one staged upload (spec N-TERM: 16 MiB per file).
pub const UPLOAD_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// How long a staged upload is kept before the node removes it.
pub const UPLOAD_KEEP_SECS: u64 = 24 * 60 * 60;

/// `terminal.open`: a shell of `cols` × `rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalOpenArgs {
    /// Columns, 1 to [`TERMINAL_SIZE_MAX`].
    pub cols: u16,
    /// Rows, 1 to [`TERMINAL_SIZE_MAX`].
    pub rows: u16,
}

/// The head of a `terminal.open` answer; the output follows as [`Message`]s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalOpenHead {
    /// The shell's program name, as the node's hello advertised it.
    pub shell: String,
    /// The shell's process id (it leads its own process group).
    pub pid: u32,
}

/// `terminal.upload`: stage the request's checked body as a file called `name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalUploadArgs {
    /// The file's name: one path component, as the person's file had it.
    pub name: String,
}

/// The answer of `terminal.upload`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalUploadHead {
    /// The staged file's absolute path on the node.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: String,
}

/// Checks a terminal size.
pub fn check_size(cols: u16, rows: u16) -> Result<(), String> {
    let fits = |n: u16| (1..=TERMINAL_SIZE_MAX).contains(&n);
    if fits(cols) && fits(rows) {
        Ok(())
    } else {
        Err(format!(
            "a terminal is 1 to {TERMINAL_SIZE_MAX} columns by 1 to {TERMINAL_SIZE_MAX} rows, \
             not {cols} × {rows}"
        ))
    }
}

/// One message of a terminal's body: `[kind: u8][length: u32 big-endian][payload]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Bytes typed into the terminal (gateway → node) or printed by it (node → gateway),
    /// 1 to [`MESSAGE_PAYLOAD_MAX_BYTES`].
    Data(Bytes),
    /// The terminal's new size (gateway → node); payload: cols, rows as u16 big-endian.
    Resize {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// How the shell ended (node → gateway, last): its exit code, or 128 + the signal
    /// that ended it; payload: i32 big-endian.
    Exit(i32),
}

const KIND_DATA: u8 = 1;
const KIND_RESIZE: u8 = 2;
const KIND_EXIT: u8 = 3;
const HEADER_BYTES: usize = 5;

impl Message {
    /// The message as it travels.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        match self {
            Message::Data(bytes) => {
                out.put_u8(KIND_DATA);
                out.put_u32(bytes.len() as u32);
                out.put_slice(bytes);
            }
            Message::Resize { cols, rows } => {
                out.put_u8(KIND_RESIZE);
                out.put_u32(4);
                out.put_u16(*cols);
                out.put_u16(*rows);
            }
            Message::Exit(code) => {
                out.put_u8(KIND_EXIT);
                out.put_u32(4);
                out.put_i32(*code);
            }
        }
        out.freeze()
    }
}

/// Reads [`Message`]s out of a body that arrives in pieces of any size.
#[derive(Default)]
pub struct MessageDecoder {
    pending: BytesMut,
}

impl MessageDecoder {
    /// A decoder with nothing pending.
    pub fn new() -> MessageDecoder {
        MessageDecoder::default()
    }

    /// Adds a piece of the body.
    pub fn push(&mut self, piece: &[u8]) {
        self.pending.extend_from_slice(piece);
    }

    /// The next whole message, `None` until one has arrived; a message that breaks the
    /// format is a `bad_frame` (the body cannot be read past it).
    pub fn next_message(&mut self) -> Result<Option<Message>, NodeError> {
        if self.pending.len() < HEADER_BYTES {
            return Ok(None);
        }
        let kind = self.pending[0];
        let len = u32::from_be_bytes([
            self.pending[1],
            self.pending[2],
            self.pending[3],
            self.pending[4],
        ]) as usize;
        let fixed = match kind {
            KIND_DATA if (1..=MESSAGE_PAYLOAD_MAX_BYTES).contains(&len) => None,
            KIND_DATA => {
                return Err(NodeError::BadFrame(format!(
                    "a terminal data message of {len} bytes (1 to {MESSAGE_PAYLOAD_MAX_BYTES})"
                )));
            }
            KIND_RESIZE | KIND_EXIT => Some(4),
            other => {
                return Err(NodeError::BadFrame(format!(
                    "a terminal message of unknown kind {other}"
                )));
            }
        };
        if fixed.is_some_and(|want| want != len) {
            return Err(NodeError::BadFrame(format!(
                "a terminal message of kind {kind} with {len} bytes, not 4"
            )));
        }
        if self.pending.len() < HEADER_BYTES + len {
            return Ok(None);
        }
        self.pending.advance(HEADER_BYTES);
        let mut payload = self.pending.split_to(len).freeze();
        Ok(Some(match kind {
            KIND_DATA => Message::Data(payload),
            KIND_RESIZE => Message::Resize {
                cols: payload.get_u16(),
                rows: payload.get_u16(),
            },
            _ => Message::Exit(payload.get_i32()),
        }))
    }

    /// Whether a message was begun but not finished (a body that ends here is cut short).
    pub fn is_mid_message(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8], piece: usize) -> Result<Vec<Message>, NodeError> {
        let mut decoder = MessageDecoder::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            decoder.push(chunk);
            while let Some(message) = decoder.next_message()? {
                out.push(message);
            }
        }
        assert!(!decoder.is_mid_message());
        Ok(out)
    }

    #[test]
    fn messages_survive_any_split() {
        let messages = vec![
            Message::Data(Bytes::from_static(b"echo hi\r")),
            Message::Resize {
                cols: 120,
                rows: 40,
            },
            Message::Data(Bytes::from(vec![7u8; MESSAGE_PAYLOAD_MAX_BYTES])),
            Message::Exit(-1),
        ];
        let wire: Vec<u8> = messages.iter().flat_map(|m| m.encode().to_vec()).collect();
        for piece in [1, 2, 5, 7, 4096, wire.len()] {
            assert_eq!(
                decode_all(&wire, piece).unwrap(),
                messages,
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn data_is_1_to_64_kib() {
        let header = |len: u32| {
            let mut b = vec![KIND_DATA];
            b.extend_from_slice(&len.to_be_bytes());
            b
        };
        for len in [0u32, MESSAGE_PAYLOAD_MAX_BYTES as u32 + 1, u32::MAX] {
            let mut decoder = MessageDecoder::new();
            decoder.push(&header(len));
            assert!(decoder.next_message().is_err(), "{len}");
        }
        for len in [
            1u32,
            MESSAGE_PAYLOAD_MAX_BYTES as u32 - 1,
            MESSAGE_PAYLOAD_MAX_BYTES as u32,
        ] {
            let mut wire = header(len);
            wire.resize(HEADER_BYTES + len as usize, b'x');
            let got = decode_all(&wire, 4096).unwrap();
            assert!(matches!(&got[..], [Message::Data(b)] if b.len() == len as usize));
        }
    }

    #[test]
    fn a_bad_kind_or_length_is_a_bad_frame() {
        for wire in [
            vec![9u8, 0, 0, 0, 0],
            vec![KIND_RESIZE, 0, 0, 0, 5, 0, 1, 0, 1, 0],
            vec![KIND_EXIT, 0, 0, 0, 3, 0, 0, 0],
        ] {
            let mut decoder = MessageDecoder::new();
            decoder.push(&wire);
            assert!(
                matches!(decoder.next_message(), Err(NodeError::BadFrame(_))),
                "{wire:?}"
            );
        }
    }

    #[test]
    fn sizes_are_1_to_1000() {
        for ok in [(1, 1), (80, 24), (999, 999), (1000, 1000)] {
            assert!(check_size(ok.0, ok.1).is_ok(), "{ok:?}");
        }
        for bad in [
            (0, 0),
            (0, 24),
            (80, 0),
            (1001, 24),
            (80, 1001),
            (u16::MAX, 1),
        ] {
            assert!(check_size(bad.0, bad.1).is_err(), "{bad:?}");
        }
    }
}
