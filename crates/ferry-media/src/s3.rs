//! The S3 side of [`crate::Blobs`] (spec scale S-STORE): the client, the staging upload
//! and reads of a byte range.
//!
//! A put streams into `tmp/<random>`: held in memory up to [`PART_BYTES`] and written
//! with one PUT, or beyond that as a multipart upload of [`PART_BYTES`] parts,
//! at most [`PARTS_IN_FLIGHT_MAX`] at once, so a put's memory is bounded whatever its
//! size. The multipart upload's id is kept, so a put that fails or is dropped midway
//! aborts it rather than leave parts in the bucket.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, MultipartId, ObjectStoreExt, PutPayload, RetryConfig,
};
use tokio::task::JoinHandle;

use crate::MediaError;

/// Bytes of one multipart part (S3 wants at least 5 MiB for every part but the last),
/// and the most content written with one PUT: above it, multipart (spec S-STORE).
pub const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts uploading at once before the put waits for one to finish.
const PARTS_IN_FLIGHT_MAX: usize = 2;
/// Bytes fetched at a time by [`ObjectReader`] (the sniffer reads a few small ranges).
const READ_AHEAD_BYTES: u64 = 64 * 1024;

/// The client for the bucket `[media]` names, its keys from the configuration (which
/// takes them from the environment).
pub(crate) fn client(media: &ferry_config::MediaConfig) -> Result<AmazonS3, MediaError> {
    // rustls is built with ring only; the S3 client's TLS asks for the process's provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let setting = |value: &Option<String>, what: &str| {
        value.clone().ok_or_else(|| {
            MediaError::Io(std::io::Error::other(format!(
                "[media] {what} is not set for the S3 store"
            )))
        })
    };
    let options = ClientOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        // A part is 8 MiB: 30 s is 280 KB/s at the least, and a store that accepts a
        // connection and never answers is told within that.
        .with_timeout(Duration::from_secs(30));
    // A store that is down is told within seconds (`/readyz`, a put's error), not after
    // the client's default three minutes of retries.
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 3,
        retry_timeout: Duration::from_secs(20),
    };
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(setting(&media.bucket, "bucket")?)
        .with_region(&media.region)
        .with_access_key_id(setting(&media.access_key_id, "access_key_id")?)
        .with_secret_access_key(setting(&media.secret_access_key, "secret_access_key")?)
        .with_client_options(options)
        .with_retry(retry);
    if let Some(endpoint) = &media.endpoint {
        // A self-hosted store (Garage, MinIO) is addressed by path, not by a bucket's
        // own host name, and may be plain HTTP on a private network.
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    Ok(builder.build()?)
}

/// A staging upload to `tmp/<random>` in progress.
pub(crate) struct Staging {
    s3: Arc<AmazonS3>,
    path: Path,
    /// What has not yet made a part (or, before the first part, the whole content).
    pending: Vec<Bytes>,
    pending_bytes: usize,
    upload: Option<MultipartId>,
    parts: Vec<PartId>,
    in_flight: FuturesOrdered<JoinHandle<object_store::Result<PartId>>>,
    finished: bool,
}

impl Staging {
    pub(crate) fn new(s3: Arc<AmazonS3>, path: Path) -> Self {
        Staging {
            s3,
            path,
            pending: Vec::new(),
            pending_bytes: 0,
            upload: None,
            parts: Vec::new(),
            in_flight: FuturesOrdered::new(),
            finished: false,
        }
    }

    /// Adds `chunk`, sending every part it completes (and waiting while too many are in
    /// flight). A full buffer is sent only once more content follows it, so content of
    /// exactly [`PART_BYTES`] is still one PUT.
    pub(crate) async fn write(&mut self, mut chunk: Bytes) -> Result<(), MediaError> {
        while !chunk.is_empty() {
            if self.pending_bytes == PART_BYTES {
                self.send_part().await?;
            }
            let room = PART_BYTES - self.pending_bytes;
            let piece = chunk.split_to(room.min(chunk.len()));
            self.pending_bytes += piece.len();
            self.pending.push(piece);
        }
        Ok(())
    }

    async fn send_part(&mut self) -> Result<(), MediaError> {
        let id = match &self.upload {
            Some(id) => id.clone(),
            None => {
                let id = self.s3.create_multipart(&self.path).await?;
                self.upload = Some(id.clone());
                id
            }
        };
        while self.in_flight.len() >= PARTS_IN_FLIGHT_MAX {
            self.collect_one().await?;
        }
        let payload: PutPayload = std::mem::take(&mut self.pending).into_iter().collect();
        self.pending_bytes = 0;
        let index = self.parts.len() + self.in_flight.len();
        let (s3, path) = (self.s3.clone(), self.path.clone());
        self.in_flight.push_back(tokio::spawn(async move {
            s3.put_part(&path, &id, index, payload).await
        }));
        Ok(())
    }

    async fn collect_one(&mut self) -> Result<(), MediaError> {
        if let Some(joined) = self.in_flight.next().await {
            let part = joined.map_err(|e| MediaError::Io(std::io::Error::other(e)))??;
            self.parts.push(part);
        }
        Ok(())
    }

    /// Writes what is left and completes the upload: the temporary is then whole.
    pub(crate) async fn finish(mut self) -> Result<(), MediaError> {
        if self.upload.is_none() {
            let payload: PutPayload = std::mem::take(&mut self.pending).into_iter().collect();
            self.s3.put(&self.path, payload).await?;
            self.finished = true;
            return Ok(());
        }
        if self.pending_bytes > 0 {
            self.send_part().await?;
        }
        while !self.in_flight.is_empty() {
            self.collect_one().await?;
        }
        let id = self.upload.clone().unwrap_or_default();
        let parts = std::mem::take(&mut self.parts);
        self.s3.complete_multipart(&self.path, &id, parts).await?;
        self.finished = true;
        Ok(())
    }
}

impl Drop for Staging {
    /// A staging that did not finish (an error, or a put dropped at an await) aborts its
    /// multipart upload, in the background since a drop cannot wait.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let Some(id) = self.upload.take() else {
            return;
        };
        let mut in_flight = std::mem::take(&mut self.in_flight);
        let (s3, path) = (self.s3.clone(), self.path.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // Parts still sending land first, so none arrives after the abort.
                while in_flight.next().await.is_some() {}
                if let Err(e) = s3.abort_multipart(&path, &id).await {
                    tracing::warn!("aborting the multipart upload of {path} failed: {e}");
                }
            });
        }
    }
}

/// `Read + Seek` over one object, through ranged GETs, for code that wants a file (the
/// sniffer). Runs on a blocking thread: each read it cannot answer from what it last
/// fetched waits on the runtime for the next range.
pub(crate) struct ObjectReader {
    s3: Arc<AmazonS3>,
    path: Path,
    size: u64,
    position: u64,
    runtime: tokio::runtime::Handle,
    /// The last range fetched, and where it starts.
    window: Bytes,
    window_start: u64,
}

impl ObjectReader {
    pub(crate) fn new(
        s3: Arc<AmazonS3>,
        path: Path,
        size: u64,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        ObjectReader {
            s3,
            path,
            size,
            position: 0,
            runtime,
            window: Bytes::new(),
            window_start: 0,
        }
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() || self.position >= self.size {
            return Ok(0);
        }
        let window_end = self.window_start + self.window.len() as u64;
        if !(self.window_start..window_end).contains(&self.position) {
            let end = self
                .size
                .min(self.position + READ_AHEAD_BYTES.max(buf.len() as u64));
            let range = self.position..end;
            let (s3, path) = (self.s3.clone(), self.path.clone());
            self.window = self
                .runtime
                .block_on(async move { s3.get_range(&path, range).await })
                .map_err(std::io::Error::other)?;
            self.window_start = self.position;
            if self.window.is_empty() {
                return Ok(0);
            }
        }
        let offset = (self.position - self.window_start) as usize;
        let available = &self.window[offset..];
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.position += n as u64;
        Ok(n)
    }
}

impl Seek for ObjectReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(n) => self.size.checked_add_signed(n),
            SeekFrom::Current(n) => self.position.checked_add_signed(n),
        };
        self.position = target.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the object",
            )
        })?;
        Ok(self.position)
    }
}
