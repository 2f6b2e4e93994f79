//! The frame format of the node link: one frame per WebSocket binary message.
//!
//! ```text
//! offset  size  field
//!      0     1  version       FRAME_VERSION (1)
//!      1     1  kind          Kind, unknown values refused
//!      2     1  flags         bit 0 END (the sender's half of the stream ends here);
//!                             other bits must be 0
//!      3     1  reserved      must be 0
//!      4     4  stream id     u32, big-endian; 0 is the link itself
//!      8     4  payload len   u32, big-endian; must equal the bytes that follow
//!     12     …  payload       Data: raw bytes (at most FRAME_DATA_MAX_BYTES);
//!                             control kinds: compact JSON (at most
//!                             FRAME_CONTROL_MAX_BYTES), never file bytes
//! ```
//!
//! Every field is checked before anything is allocated for it: the whole message is
//! refused past [`FRAME_MAX_BYTES`], so a peer cannot make the decoder hold more than one
//! frame's worth, and the payload is a slice of the received message, never a copy.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::NodeError;

/// The version byte this build speaks.
pub const FRAME_VERSION: u8 = 1;
/// Bytes of the fixed header.
pub const FRAME_HEADER_BYTES: usize = 12;
/// Most file bytes one data frame carries.
pub const FRAME_DATA_MAX_BYTES: usize = 256 * 1024;
/// Most bytes of one control frame's JSON.
pub const FRAME_CONTROL_MAX_BYTES: usize = 64 * 1024;
/// Most bytes of one frame, header included: the WebSocket's own message limit should be
/// set to this, so an oversized message is refused before it is read whole.
pub const FRAME_MAX_BYTES: usize = FRAME_HEADER_BYTES + FRAME_DATA_MAX_BYTES;
/// Bytes the WebSocket under the link asks the socket for at a time. Its library zeroes
/// that much of its buffer before every read, even one that finds a keystroke or nothing
/// at all (128 KiB by default, the largest single cost of a keystroke's relay); a large
/// frame takes a few more reads instead.
pub const LINK_READ_BUFFER_BYTES: usize = 32 * 1024;

/// The END flag: the sender's half of the stream ends with this frame.
const FLAG_END: u8 = 0b0000_0001;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The node introduces itself (stream 0).
    Hello = 1,
    /// The gateway's fresh challenge (stream 0).
    Challenge = 2,
    /// The node's signature over the challenge (stream 0).
    Proof = 3,
    /// The gateway accepted the proof; the multiplexer starts (stream 0).
    Welcome = 4,
    /// A call: command and arguments.
    Request = 5,
    /// The answer's head: its result; data may follow.
    Response = 6,
    /// Raw bytes of a stream's body.
    Data = 7,
    /// A call failed (its stream), or the link did (stream 0): code and sentence.
    Error = 8,
    /// The caller gave up on the stream (empty payload).
    Cancel = 9,
    /// The receiver grants more bytes of its window.
    Window = 10,
    /// The link is alive (stream 0, empty payload).
    Heartbeat = 11,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Hello,
            2 => Kind::Challenge,
            3 => Kind::Proof,
            4 => Kind::Welcome,
            5 => Kind::Request,
            6 => Kind::Response,
            7 => Kind::Data,
            8 => Kind::Error,
            9 => Kind::Cancel,
            10 => Kind::Window,
            11 => Kind::Heartbeat,
            _ => return None,
        })
    }

    /// Whether the kind belongs to the link itself (stream 0) rather than a call.
    pub fn is_link_level(self) -> bool {
        matches!(
            self,
            Kind::Hello | Kind::Challenge | Kind::Proof | Kind::Welcome | Kind::Heartbeat
        )
    }

    /// Whether the payload must be empty.
    fn is_empty_payload(self) -> bool {
        matches!(self, Kind::Cancel | Kind::Heartbeat)
    }
}

/// One frame of the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What the frame is.
    pub kind: Kind,
    /// The stream it belongs to (0: the link itself).
    pub stream: u32,
    /// Whether the sender's half of the stream ends with it.
    pub end: bool,
    /// Raw bytes (data) or JSON (control).
    pub payload: Bytes,
}

impl Frame {
    /// A control frame whose payload is `body` as compact JSON.
    pub fn control<T: Serialize>(kind: Kind, stream: u32, end: bool, body: &T) -> Frame {
        // Serializing plain structs of strings and numbers into memory cannot fail.
        let json = serde_json::to_vec(body).expect("control payloads serialize");
        Frame {
            kind,
            stream,
            end,
            payload: Bytes::from(json),
        }
    }

    /// A frame with an empty payload (cancel, heartbeat).
    pub fn empty(kind: Kind, stream: u32) -> Frame {
        Frame {
            kind,
            stream,
            end: false,
            payload: Bytes::new(),
        }
    }

    /// A data frame; `bytes` must be at most [`FRAME_DATA_MAX_BYTES`].
    pub fn data(stream: u32, bytes: Bytes, end: bool) -> Frame {
        debug_assert!(bytes.len() <= FRAME_DATA_MAX_BYTES);
        Frame {
            kind: Kind::Data,
            stream,
            end,
            payload: bytes,
        }
    }

    /// The frame as one binary message.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(FRAME_HEADER_BYTES + self.payload.len());
        out.put_u8(FRAME_VERSION);
        out.put_u8(self.kind as u8);
        out.put_u8(if self.end { FLAG_END } else { 0 });
        out.put_u8(0);
        out.put_u32(self.stream);
        // A payload is at most FRAME_MAX_BYTES, far below u32::MAX.
        out.put_u32(self.payload.len() as u32);
        out.put_slice(&self.payload);
        out.freeze()
    }

    /// Decodes one binary message, refusing anything that is not exactly one valid frame.
    pub fn decode(message: Bytes) -> Result<Frame, NodeError> {
        if message.len() > FRAME_MAX_BYTES {
            return Err(NodeError::frame(format!(
                "a message of {} bytes is over the {FRAME_MAX_BYTES}-byte frame limit",
                message.len()
            )));
        }
        if message.len() < FRAME_HEADER_BYTES {
            return Err(NodeError::frame(format!(
                "a message of {} bytes is shorter than the {FRAME_HEADER_BYTES}-byte header",
                message.len()
            )));
        }
        let header = &message[..FRAME_HEADER_BYTES];
        if header[0] != FRAME_VERSION {
            return Err(NodeError::frame(format!(
                "frame version {} is not spoken here (this build speaks {FRAME_VERSION})",
                header[0]
            )));
        }
        let kind = Kind::from_byte(header[1])
            .ok_or_else(|| NodeError::frame(format!("frame kind {} is unknown", header[1])))?;
        let flags = header[2];
        if flags & !FLAG_END != 0 {
            return Err(NodeError::frame(format!(
                "unknown frame flags {flags:#04x}"
            )));
        }
        if header[3] != 0 {
            return Err(NodeError::frame("the reserved header byte is not 0"));
        }
        let stream = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let declared = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as usize;
        let actual = message.len() - FRAME_HEADER_BYTES;
        if declared != actual {
            return Err(NodeError::frame(format!(
                "the header declares {declared} payload bytes and {actual} follow"
            )));
        }
        let limit = match kind {
            Kind::Data => FRAME_DATA_MAX_BYTES,
            _ if kind.is_empty_payload() => 0,
            _ => FRAME_CONTROL_MAX_BYTES,
        };
        if actual > limit {
            return Err(NodeError::frame(format!(
                "a {kind:?} frame of {actual} payload bytes is over its {limit}-byte limit"
            )));
        }
        // An error may end the link (stream 0) or one call; everything else belongs to one.
        if kind != Kind::Error && kind.is_link_level() != (stream == 0) {
            return Err(NodeError::frame(format!(
                "a {kind:?} frame cannot be on stream {stream}"
            )));
        }
        if kind == Kind::Data && actual == 0 && flags & FLAG_END == 0 {
            // An empty data frame carries nothing but work for the receiver.
            return Err(NodeError::frame("an empty data frame without END"));
        }
        Ok(Frame {
            kind,
            stream,
            end: flags & FLAG_END != 0,
            payload: message.slice(FRAME_HEADER_BYTES..),
        })
    }

    /// The control payload as `T`, refusing unknown fields and anything that is not JSON.
    pub fn body<T: DeserializeOwned>(&self) -> Result<T, NodeError> {
        serde_json::from_slice(&self.payload)
            .map_err(|e| NodeError::frame(format!("a {:?} frame's payload: {e}", self.kind)))
    }
}

/// The payload of a request frame.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestBody {
    /// The command asked for, e.g. `file.fetch`.
    pub command: String,
    /// Its arguments.
    pub args: serde_json::Value,
}

/// The payload of a response frame.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseBody {
    /// The command's result (data, if any, follows in data frames).
    pub result: serde_json::Value,
}

/// The payload of an error frame.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// The failure's code (an unknown spelling is refused).
    pub code: ferry_codes::Code,
    /// A sentence a person can act on.
    pub message: String,
}

/// The payload of a window frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowBody {
    /// Bytes of window the receiver gives back.
    pub grant: u32,
}
