//! Checked bodies: file bytes followed by a trailer of their length and sha256.
//!
//! The sender hashes and counts as the bytes go and appends
//! [`TRAILER_BYTES`] (length, 8 bytes big-endian, then the 32-byte digest); the
//! receiver holds the last [`TRAILER_BYTES`] back, so it never hands out a trailer as
//! content, counts and hashes what it does hand out, and at the end compares the two.
//! A sender that lies about either, or stops short, is caught before the bytes are
//! taken as a file. The length is checked against a cap while the body arrives, so a
//! body past the cap is refused at the first byte over it, not at the end.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use sha2::{Digest, Sha256};

use crate::{DataReader, DataWriter, NodeError};

/// Bytes of the trailer: the length (u64, big-endian) and the sha256.
pub const TRAILER_BYTES: usize = 8 + 32;

/// What a verified body held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    /// Its length.
    pub size: u64,
    /// Its sha256.
    pub sha256: [u8; 32],
}

impl Verified {
    /// The digest as lowercase hex.
    pub fn sha256_hex(&self) -> String {
        ferry_fs::hex(&self.sha256)
    }
}

/// Sends a checked body.
pub struct CheckedWriter {
    inner: DataWriter,
    hasher: Sha256,
    size: u64,
}

impl CheckedWriter {
    /// Wraps the writer of a stream's body.
    pub fn new(inner: DataWriter) -> CheckedWriter {
        CheckedWriter {
            inner,
            hasher: Sha256::new(),
            size: 0,
        }
    }

    /// Sends `bytes` of content.
    pub async fn send(&mut self, bytes: Bytes) -> Result<(), NodeError> {
        self.hasher.update(&bytes);
        self.size += bytes.len() as u64;
        self.inner.send(bytes).await
    }

    /// Sends the trailer and ends the body; says what was sent.
    pub async fn finish(mut self) -> Result<Verified, NodeError> {
        let verified = Verified {
            size: self.size,
            sha256: self.hasher.finalize().into(),
        };
        let mut trailer = BytesMut::with_capacity(TRAILER_BYTES);
        trailer.extend_from_slice(&verified.size.to_be_bytes());
        trailer.extend_from_slice(&verified.sha256);
        self.inner.send(trailer.freeze()).await?;
        self.inner.finish().await?;
        Ok(verified)
    }

    /// Ends the stream with an error instead.
    pub fn fail(self, error: NodeError) {
        self.inner.fail(error);
    }

    /// Resolves when the other end gives the stream up or the link dies.
    pub async fn cancelled(&self) {
        self.inner.cancelled().await;
    }
}

/// Receives a checked body, at most `max_bytes` of content.
pub struct CheckedReader {
    inner: DataReader,
    max_bytes: u64,
    /// The last bytes received, which may be the trailer: never more than
    /// [`TRAILER_BYTES`] once a chunk has been handled.
    held: BytesMut,
    /// Content ready to hand out.
    ready: VecDeque<Bytes>,
    hasher: Sha256,
    size: u64,
    outcome: Option<Result<Verified, NodeError>>,
}

impl CheckedReader {
    /// Wraps the reader of a stream's body.
    pub fn new(inner: DataReader, max_bytes: u64) -> CheckedReader {
        CheckedReader {
            inner,
            max_bytes,
            held: BytesMut::new(),
            ready: VecDeque::new(),
            hasher: Sha256::new(),
            size: 0,
            outcome: None,
        }
    }

    /// The next piece of content; `None` once the body ended and its trailer matched
    /// (then [`CheckedReader::verified`] says what it held). An error ends the body.
    pub async fn next(&mut self) -> Option<Result<Bytes, NodeError>> {
        loop {
            if let Some(bytes) = self.ready.pop_front() {
                return Some(Ok(bytes));
            }
            match &self.outcome {
                Some(Ok(_)) => return None,
                Some(Err(e)) => return Some(Err(e.clone())),
                None => {}
            }
            match self.inner.next().await {
                Some(Ok(bytes)) => {
                    if let Err(e) = self.take(bytes) {
                        self.outcome = Some(Err(e.clone()));
                        return Some(Err(e));
                    }
                }
                Some(Err(e)) => {
                    self.outcome = Some(Err(e.clone()));
                    return Some(Err(e));
                }
                None => {
                    let outcome = self.check_trailer();
                    self.outcome = Some(outcome);
                }
            }
        }
    }

    /// What the body held, once [`CheckedReader::next`] has returned `None`.
    pub fn verified(&self) -> Option<Verified> {
        match &self.outcome {
            Some(Ok(v)) => Some(*v),
            _ => None,
        }
    }

    /// Takes one chunk: all but the last [`TRAILER_BYTES`] seen so far become content.
    fn take(&mut self, bytes: Bytes) -> Result<(), NodeError> {
        let content = if bytes.len() >= TRAILER_BYTES {
            // The held bytes are content now; the chunk's tail is the new hold.
            let held = std::mem::take(&mut self.held).freeze();
            let mut bytes = bytes;
            let tail = bytes.split_off(bytes.len() - TRAILER_BYTES);
            self.held.extend_from_slice(&tail);
            [held, bytes]
        } else {
            self.held.extend_from_slice(&bytes);
            let excess = self.held.len().saturating_sub(TRAILER_BYTES);
            [self.held.split_to(excess).freeze(), Bytes::new()]
        };
        for piece in content {
            if piece.is_empty() {
                continue;
            }
            self.size += piece.len() as u64;
            if self.size > self.max_bytes {
                return Err(NodeError::TooLarge(self.max_bytes));
            }
            self.hasher.update(&piece);
            self.ready.push_back(piece);
        }
        Ok(())
    }

    fn check_trailer(&mut self) -> Result<Verified, NodeError> {
        if self.held.len() != TRAILER_BYTES {
            return Err(NodeError::Mismatch(format!(
                "the body ended after {} bytes, without its length and sha256",
                self.size + self.held.len() as u64
            )));
        }
        let stated_size = u64::from_be_bytes(self.held[..8].try_into().expect("8 bytes"));
        let stated_sha: [u8; 32] = self.held[8..].try_into().expect("32 bytes");
        let sha256: [u8; 32] = std::mem::take(&mut self.hasher).finalize().into();
        if stated_size != self.size {
            return Err(NodeError::Mismatch(format!(
                "the body said it held {stated_size} bytes but held {}",
                self.size
            )));
        }
        if stated_sha != sha256 {
            return Err(NodeError::Mismatch(format!(
                "the body's sha256 is {} but it said {}",
                ferry_fs::hex(&sha256),
                ferry_fs::hex(&stated_sha)
            )));
        }
        Ok(Verified {
            size: self.size,
            sha256,
        })
    }
}
