//! H-MAIL's envelope: one message, one JSON object, one file in a mailbox.

use ferry_config::limits::MAILBOX_MAX_BYTES;
use serde::{Deserialize, Serialize};

use crate::HerdError;
use crate::keys::{MAC_HEX_LEN, WorkerKey};

/// The only envelope version there is.
pub const ENVELOPE_VERSION: u32 = 1;
/// The controller's address in `from` and `to`.
pub const OWNER: &str = "owner";

/// What a message is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The controller's assignment (`assign`).
    Task,
    /// More direction from the controller (`steer`).
    Steer,
    /// The controller's answer to a question (`reply`).
    Reply,
    /// A worker's question to its controller (`ask_owner`).
    Question,
    /// A worker's finished output (`complete`); its `resultPath` names the whole of it.
    Completion,
}

impl Kind {
    /// The spelling on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Task => "task",
            Kind::Steer => "steer",
            Kind::Reply => "reply",
            Kind::Question => "question",
            Kind::Completion => "completion",
        }
    }
}

/// One message file: its canonical path, its observed size, and its text when embedded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileItem {
    /// The canonical absolute path the file was read through.
    pub path: String,
    /// Bytes observed when it was read (for a reference: its size then).
    pub size: u64,
    /// Whether `content` holds the whole file.
    pub embedded: bool,
    /// The whole file, strict UTF-8 without NUL; only when `embedded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// One message (H-MAIL).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Envelope {
    /// [`ENVELOPE_VERSION`].
    pub version: u32,
    /// 26 characters of base32: unique across every mailbox.
    pub id: String,
    /// Its number in the recipient's mailbox, from 1, in the order delivered.
    pub seq: u64,
    /// What it is for.
    pub kind: Kind,
    /// Who sent it: [`OWNER`], or a worker's address (`<label>#<id>`).
    pub from: String,
    /// Who it is for, spelled as `from` is.
    pub to: String,
    /// The message itself.
    pub text: String,
    /// Its evidence (H-FILES), each file once.
    pub files: Vec<FileItem>,
    /// When it was sent, RFC 3339 UTC.
    pub sent_at: String,
    /// A completion's persisted output (H-RESULT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_path: Option<String>,
    /// HMAC-SHA256 (hex) of the envelope without it, under the worker generation's key
    /// (keys.rs): who may write the mailbox is not who may speak for a worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// A worker's address: its label and the id of the process that runs it, so that a
/// message to an earlier worker under the same label can be told apart.
pub fn worker_address(label: &str, id: u32) -> String {
    format!("{label}#{id}")
}

impl Envelope {
    /// A new envelope, its id drawn now, its `seq` still 0 (the mailbox numbers it).
    pub fn new(kind: Kind, from: String, to: String, text: String) -> Envelope {
        Envelope {
            version: ENVELOPE_VERSION,
            id: ferry_fs::random_base32::<16>()[..26].to_owned(),
            seq: 0,
            kind,
            from,
            to,
            text,
            files: Vec::new(),
            sent_at: ferry_site::rfc3339(std::time::SystemTime::now()),
            result_path: None,
            // Room for the MAC from the start, so that sizing counts it.
            mac: Some("0".repeat(MAC_HEX_LEN)),
        }
    }

    /// Signs the envelope, as it is now, with `key`.
    pub fn seal(&mut self, key: &WorkerKey) {
        self.mac = None;
        let bytes = self.to_bytes();
        self.mac = Some(key.sign(&bytes));
    }

    /// Whether the envelope was signed, as it is, with `key`.
    pub fn verifies(&self, key: &WorkerKey) -> bool {
        let Some(mac) = &self.mac else {
            return false;
        };
        let mut bare = self.clone();
        bare.mac = None;
        key.verifies(&bare.to_bytes(), mac)
    }

    /// The label and process id of a worker's address (`<label>#<id>`).
    pub fn worker_of(address: &str) -> Option<(&str, u32)> {
        let (label, id) = address.split_once('#')?;
        Some((label, id.parse().ok()?))
    }

    /// The serialized envelope, as it is written to the mailbox.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain strings, numbers and booleans: serializing them cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Bytes the serialized envelope takes.
    pub fn serialized_len(&self) -> usize {
        self.to_bytes().len()
    }

    /// Refuses an envelope over [`MAILBOX_MAX_BYTES`] with `invalid_request`.
    pub fn check_fits(&self) -> Result<(), HerdError> {
        let len = self.serialized_len();
        if len > MAILBOX_MAX_BYTES {
            return Err(HerdError::invalid(format!(
                "the message is {len} bytes as an envelope; a mailbox holds at most \
                 {MAILBOX_MAX_BYTES} (the limit counts embedded files: name fewer files, or \
                 shorten the text)"
            )));
        }
        Ok(())
    }

    /// Reads an envelope from a mailbox file, trusting nothing: at most
    /// [`MAILBOX_MAX_BYTES`], strict JSON of exactly this shape, version 1, absolute
    /// paths, and an embedded file's content its whole size and free of NUL.
    pub fn parse(bytes: &[u8]) -> Result<Envelope, HerdError> {
        if bytes.len() > MAILBOX_MAX_BYTES {
            return Err(HerdError::invalid(format!(
                "the envelope is {} bytes, over the mailbox limit of {MAILBOX_MAX_BYTES}",
                bytes.len()
            )));
        }
        let envelope: Envelope = serde_json::from_slice(bytes)
            .map_err(|e| HerdError::invalid(format!("the envelope is not valid: {e}")))?;
        envelope.validate()?;
        Ok(envelope)
    }

    fn validate(&self) -> Result<(), HerdError> {
        let bad = |why: &str| {
            Err(HerdError::invalid(format!(
                "the envelope is not valid: {why}"
            )))
        };
        if self.version != ENVELOPE_VERSION {
            return bad("its version is not 1");
        }
        if self.id.len() != 26
            || !self
                .id
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'))
        {
            return bad("its id is not 26 characters of base32");
        }
        if self.seq == 0 {
            return bad("it has no sequence number");
        }
        for text in [&self.from, &self.to, &self.text, &self.sent_at] {
            if text.contains('\0') {
                return bad("it holds a NUL character");
            }
        }
        if let Some(mac) = &self.mac
            && (mac.len() != MAC_HEX_LEN || !mac.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return bad("its MAC is not 64 hex digits");
        }
        for file in &self.files {
            if !file.path.starts_with('/') || file.path.contains('\0') {
                return bad("a file's path is not absolute");
            }
            match (&file.content, file.embedded) {
                (Some(content), true)
                    if content.len() as u64 == file.size && !content.contains('\0') => {}
                (None, false) => {}
                _ => return bad("an embedded file's content is not the whole file"),
            }
        }
        Ok(())
    }
}
