//! [`MediaStore`]: blobs and records together.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream};
use tokio::io::AsyncRead;

use crate::blob::KnownDigest;
use crate::{Blobs, MediaError, MediaId, MediaRecord, MediaRecords, MediaSource};

/// Bytes read from a caller's reader at a time.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The media store of a site.
#[derive(Clone)]
pub struct MediaStore {
    pub(crate) blobs: Blobs,
    pub(crate) records: Arc<dyn MediaRecords>,
    ttl: Duration,
    max_bytes: u64,
    pub(crate) grace: Duration,
}

impl MediaStore {
    /// A store over `blobs` and `records`, whose records expire `ttl` after they are made
    /// and whose puts take at most `max_bytes`.
    pub fn new(
        blobs: Blobs,
        records: Arc<dyn MediaRecords>,
        ttl: Duration,
        max_bytes: u64,
    ) -> Self {
        MediaStore {
            blobs,
            records,
            ttl,
            max_bytes,
            grace: Duration::from_secs(ferry_config::limits::MEDIA_BLOB_GRACE_SECS),
        }
    }

    /// The same store with another cap on one put (file_fetch passes its `maxBytes`).
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The same store with another grace period for young unreferenced blobs (tests of
    /// the sweep's ordering set it to zero).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The blobs underneath.
    pub fn blobs(&self) -> &Blobs {
        &self.blobs
    }

    /// Stores what `reader` yields, named `original_name` at its source.
    pub async fn put<R>(
        &self,
        reader: R,
        original_name: &str,
        source: MediaSource,
    ) -> Result<MediaRecord, MediaError>
    where
        R: AsyncRead + Send,
    {
        let stream = tokio_util::io::ReaderStream::with_capacity(reader, READ_CHUNK_BYTES);
        self.put_stream(stream, original_name, source).await
    }

    /// Stores what `content` yields, named `original_name` at its source.
    ///
    /// The blob is placed before the record is inserted, so a crash leaves at worst a
    /// blob without a record (swept after the grace period), never a record without
    /// its blob.
    pub async fn put_stream<S>(
        &self,
        content: S,
        original_name: &str,
        source: MediaSource,
    ) -> Result<MediaRecord, MediaError>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send,
    {
        self.put_stream_with(content, None, original_name, source)
            .await
    }

    /// [`MediaStore::put_stream`] of content whose source hashes what it yields itself
    /// (a checked body from a node): `digest` names the blob and nothing is hashed again
    /// (see [`Blobs::stage_hashed`]).
    pub async fn put_stream_hashed<S>(
        &self,
        content: S,
        digest: KnownDigest,
        original_name: &str,
        source: MediaSource,
    ) -> Result<MediaRecord, MediaError>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send,
    {
        self.put_stream_with(content, Some(digest), original_name, source)
            .await
    }

    async fn put_stream_with<S>(
        &self,
        content: S,
        digest: Option<KnownDigest>,
        original_name: &str,
        source: MediaSource,
    ) -> Result<MediaRecord, MediaError>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send,
    {
        // Checked before any byte is read: a refused put leaves nothing.
        let max_bytes = ferry_fs::PATH_MAX_BYTES;
        if original_name.len() > max_bytes || source.path.len() > max_bytes {
            return Err(MediaError::NameTooLong { max_bytes });
        }
        let staged = match digest {
            Some(digest) => {
                self.blobs
                    .stage_hashed(content, self.max_bytes, digest)
                    .await?
            }
            None => self.blobs.stage(content, self.max_bytes).await?,
        };
        // New or found there, the blob is placed; either way the record comes next.
        if let Err(e) = self.blobs.place(&staged).await {
            let _ = self.blobs.discard(staged).await;
            return Err(e);
        }
        let result = self.record(&staged, original_name, source).await;
        // The temporary is kept until the record is in: see `Blobs::settle`.
        self.blobs.settle(staged).await?;
        result
    }

    async fn record(
        &self,
        staged: &crate::blob::Staged,
        original_name: &str,
        source: MediaSource,
    ) -> Result<MediaRecord, MediaError> {
        let sniffed = self.sniff(staged, original_name).await?;
        let created = seconds(SystemTime::now());
        let record = MediaRecord {
            id: MediaId::issue(original_name, &sniffed.extension),
            original_name: kept_text(original_name),
            source: MediaSource {
                path: kept_text(&source.path),
                ..source
            },
            size: staged.size,
            sha256: staged.sha256.clone(),
            media_type: sniffed.media_type,
            created,
            expires: created.saturating_add(self.ttl.as_secs() as i64),
            local_path: None,
            location: None,
        };
        self.records.insert(&record)?;
        Ok(self.located(record))
    }

    /// The one sniffer, on the put's own temporary (it reads the end too: office
    /// documents are told from zip by their central directory). In a bucket it reads
    /// through ranged GETs, a few small ones.
    async fn sniff(
        &self,
        staged: &crate::blob::Staged,
        original_name: &str,
    ) -> Result<ferry_preview::Sniffed, MediaError> {
        let name = original_name.to_owned();
        let sniffed = match (
            self.blobs.staged_path(staged),
            self.blobs.staged_reader(staged),
        ) {
            (Some(path), _) => {
                tokio::task::spawn_blocking(move || {
                    ferry_preview::sniff(&mut std::fs::File::open(path)?, &name)
                })
                .await
            }
            (None, Some(mut reader)) => {
                tokio::task::spawn_blocking(move || ferry_preview::sniff(&mut reader, &name)).await
            }
            (None, None) => return Err(MediaError::BlobMissing(staged.sha256.clone())),
        };
        Ok(sniffed.map_err(|e| MediaError::Io(std::io::Error::other(e)))??)
    }

    /// The live record of `id`: a value that is not an id, an id never issued here, or
    /// one past its expiry, is `unknown_media_id`.
    pub fn get(&self, id: &str) -> Result<MediaRecord, MediaError> {
        let parsed = MediaId::parse(id)?;
        match self.records.get(&parsed)? {
            Some(record) if record.expires > seconds(SystemTime::now()) => Ok(self.located(record)),
            _ => Err(MediaError::UnknownMediaId(id.to_owned())),
        }
    }

    /// [`MediaStore::open`] for an agent of `person`: an id another person's agent
    /// brought in is `unknown_media_id` to it, as an id never issued here would be.
    pub async fn open_as(
        &self,
        id: &str,
        person: &str,
    ) -> Result<(MediaRecord, BoxStream<'static, std::io::Result<Bytes>>), MediaError> {
        let record = self.get(id)?;
        if record
            .source
            .person
            .as_deref()
            .is_some_and(|owner| owner != person)
        {
            return Err(MediaError::UnknownMediaId(id.to_owned()));
        }
        let bytes = self.blobs.get(&record.sha256).await?;
        Ok((record, bytes))
    }

    /// The live record of `id` and its bytes, streamed.
    pub async fn open(
        &self,
        id: &str,
    ) -> Result<(MediaRecord, BoxStream<'static, std::io::Result<Bytes>>), MediaError> {
        let record = self.get(id)?;
        let bytes = self.blobs.get(&record.sha256).await?;
        Ok((record, bytes))
    }

    /// Every record, oldest first, expired ones included until the sweep.
    pub fn list(&self) -> Result<Vec<MediaRecord>, MediaError> {
        Ok(self
            .records
            .list()?
            .into_iter()
            .map(|r| self.located(r))
            .collect())
    }

    fn located(&self, mut record: MediaRecord) -> MediaRecord {
        record.local_path = self.blobs.local_path(&record.sha256);
        record.location = Some(self.blobs.location(&record.sha256));
        record
    }
}

/// Seconds since the epoch (0 for a clock before it).
pub(crate) fn seconds(time: SystemTime) -> i64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A name or path as the records keep it: a NUL (which no file system allows in a name,
/// and no metadata engine stores in text alike) becomes U+FFFD; everything else stays.
fn kept_text(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}
