//! Media records (spec core C-MEDIA): what the store knows of each id, kept in the
//! site's metadata database behind [`MediaRecords`].

use std::path::PathBuf;

use serde::Serialize;

use crate::{MediaError, MediaId};

/// Where the bytes came from: a node and the canonical path there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MediaSource {
    /// The node's id, or `None` for bytes given to the gateway itself.
    pub node: Option<String>,
    /// The canonical path on the node (or the name it was given under).
    pub path: String,
    /// The person whose agent brought the bytes in: only that person's agents may use
    /// the id. `None` for bytes an operator put (`ferry media put`), any person's.
    pub person: Option<String>,
}

/// One media record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaRecord {
    /// The id callers use.
    #[serde(serialize_with = "as_text")]
    pub id: MediaId,
    /// The name the source had, as given (it may be anything).
    pub original_name: String,
    /// Where the bytes came from.
    pub source: MediaSource,
    /// Bytes.
    pub size: u64,
    /// Lowercase hex SHA-256, which is also the blob's key.
    pub sha256: String,
    /// The detected media type (the one sniffer's).
    pub media_type: String,
    /// Seconds since the epoch when it was stored.
    pub created: i64,
    /// Seconds since the epoch after which the record is gone.
    pub expires: i64,
    /// Where the bytes live on this machine, for the local backend; filled in by the
    /// store, never stored (the site folder may move).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_path: Option<PathBuf>,
    /// Where the bytes live, for people: `localPath`, or `s3://<bucket>/blobs/<sha256>`;
    /// filled in by the store, never stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

fn as_text<S: serde::Serializer>(id: &MediaId, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(id.as_str())
}

/// Where records are kept. Every call is a short indexed query, so the trait is
/// synchronous; the database behind it serializes writers.
pub trait MediaRecords: Send + Sync {
    /// Adds a record; its id is fresh.
    fn insert(&self, record: &MediaRecord) -> Result<(), MediaError>;
    /// The record with this id, expired or not.
    fn get(&self, id: &MediaId) -> Result<Option<MediaRecord>, MediaError>;
    /// Every record, oldest first.
    fn list(&self) -> Result<Vec<MediaRecord>, MediaError>;
    /// Records whose expiry is at or before `now` (seconds since the epoch).
    fn expired(&self, now: i64) -> Result<Vec<MediaRecord>, MediaError>;
    /// Removes a record; `false` if there was none.
    fn delete(&self, id: &MediaId) -> Result<bool, MediaError>;
    /// Whether any record points at the blob `sha256`.
    fn references(&self, sha256: &str) -> Result<bool, MediaError>;
}
