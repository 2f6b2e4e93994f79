//! Content-addressed blobs through `object_store`: `blobs/<sha256>`, written once.
//!
//! A put cannot know its key before it has read every byte, so it streams into a
//! temporary object (`tmp/<random>`) while hashing and counting, then places it at its
//! key with a create-once copy (a hard link on the local file system): a blob that is there already is kept, never
//! rewritten. Readers of `blobs/` therefore never see a partial blob, and a crash mid-put
//! leaves only a temporary, which the sweeper removes.
//!
//! Two backends keep this one API: the local file system (`.ferry/media/`), and an S3
//! bucket (spec scale S-STORE, see `s3.rs`). On S3, placing is a server-side copy made
//! only when the key is missing: content-addressed, two puts racing to place the same
//! key write the same bytes, so the store need not offer a conditional copy (Garage does
//! not), and `local_path` answers `None`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{CopyMode, CopyOptions, ObjectStore, ObjectStoreExt, WriteMultipart};
use sha2::{Digest, Sha256};

use crate::MediaError;

/// Bytes buffered before one part is handed to the store: the put's memory is about
/// this times [`PARTS_IN_FLIGHT_MAX`], whatever the blob's size.
const PART_BYTES: usize = 1024 * 1024;
/// Parts written concurrently before the put waits for one to finish.
const PARTS_IN_FLIGHT_MAX: usize = 2;

const BLOBS: &str = "blobs";
const TEMPORARIES: &str = "tmp";
const TRASH: &str = "trash";

/// Content that has been streamed into a temporary object, not yet placed. Dropped
/// without [`Blobs::settle`] or [`Blobs::discard`] (a put whose caller gave up), it
/// removes its temporary.
#[derive(Debug)]
pub struct Staged {
    temporary: Path,
    leftover: Leftover,
    /// Lowercase hex SHA-256 of the content.
    pub sha256: String,
    /// Bytes of content.
    pub size: u64,
}

/// Removes a put's temporary from the store when the put is dropped midway:
/// the future of a put can be dropped at any await (a cancelled call), and neither the
/// temporary nor the multipart writer's staging files (`<name>#<part>`) may stay.
#[derive(Debug)]
struct Leftover {
    dir: PathBuf,
    name: String,
    /// On S3, the store to delete `tmp/<name>` from (the staging aborts its own upload).
    remote: Option<Arc<dyn ObjectStore>>,
    armed: bool,
}

impl Leftover {
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Leftover {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(store) = self.remote.take() {
            let temporary = Path::from(format!("{TEMPORARIES}/{}", self.name));
            // A drop cannot wait; what a stopping runtime leaves, the sweep removes.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { ignore_not_found(store.delete(&temporary).await) });
            }
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let staging = name
                .strip_prefix(self.name.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('#'));
            if staging {
                // Best effort: what stays is swept once it has sat idle.
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// The sha256 of a put's content as its source computed it, set once the source has
/// yielded its last byte (see [`Blobs::stage_hashed`]).
pub type KnownDigest = Arc<OnceLock<[u8; 32]>>;

/// Whether placing made the blob or found it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// The blob did not exist; the temporary became it.
    New,
    /// A blob with this content existed and was kept, not rewritten.
    Existing,
}

/// A blob in the store.
#[derive(Debug, Clone)]
pub struct BlobMeta {
    /// Its sha256, which is its key.
    pub sha256: String,
    /// When it was written.
    pub modified: SystemTime,
}

/// The blob side of the media store.
#[derive(Debug, Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    backend: Backend,
    /// A folder on this machine: the blobs themselves on the local backend, and on
    /// either the trees `dir_fetch` extracts (see `trees.rs`).
    pub(crate) root: PathBuf,
}

#[derive(Debug, Clone)]
enum Backend {
    Local(Arc<LocalFileSystem>),
    S3 {
        s3: Arc<object_store::aws::AmazonS3>,
        bucket: String,
        /// Where this site's keys live in the bucket.
        prefix: Path,
    },
}

impl Blobs {
    /// Blobs on the local file system under `dir` (made if missing, mode 0700).
    pub fn local(dir: &FsPath) -> Result<Blobs, MediaError> {
        std::fs::create_dir_all(dir)?;
        // Fetched bytes are the agents' and their people's, not the machine's. Only a
        // folder open to others is changed: its owner may be another account (host mode
        // hands `.ferry/` to the service), and a correct folder needs no change.
        if std::fs::metadata(dir)?.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let local = Arc::new(LocalFileSystem::new_with_prefix(dir)?.with_fsync(true));
        Ok(Blobs {
            store: local.clone(),
            backend: Backend::Local(local),
            root: dir.to_owned(),
        })
    }

    /// Blobs in the S3 bucket `media` names, every key under `prefix/` (a site's own
    /// name: sites may share a bucket, and one's sweep never meets another's blobs);
    /// `dir` (made if missing, mode 0700) holds what must be local: the trees `dir_fetch`
    /// extracts. Nothing is asked of the store yet: a store that is down is told by the
    /// first call (and `/readyz`).
    pub fn s3(
        dir: &FsPath,
        media: &ferry_config::MediaConfig,
        prefix: &str,
    ) -> Result<Blobs, MediaError> {
        let mut blobs = Blobs::local(dir)?;
        let s3 = Arc::new(crate::s3::client(media)?);
        let prefix = Path::from(prefix);
        blobs.store = Arc::new(object_store::prefix::PrefixStore::new(
            s3.clone(),
            prefix.clone(),
        ));
        blobs.backend = Backend::S3 {
            s3,
            bucket: media.bucket.clone().unwrap_or_default(),
            prefix,
        };
        Ok(blobs)
    }

    /// `key` in the bucket itself, for the calls made on the S3 client directly.
    fn in_bucket(prefix: &Path, key: &Path) -> Path {
        prefix.parts().chain(key.parts()).collect()
    }

    /// Whether the store answers: the folder can be read, or the bucket is reachable
    /// with these keys (a key that is not there is an answer).
    pub async fn check(&self) -> Result<(), MediaError> {
        match &self.backend {
            Backend::Local(_) => {
                std::fs::read_dir(&self.root)?;
                Ok(())
            }
            Backend::S3 { .. } => {
                match self.store.head(&Path::from("ferry-readiness-probe")).await {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Streams `content` into a temporary, hashing as it goes; more than `max_bytes`
    /// bytes is [`MediaError::TooLarge`] and leaves nothing behind.
    pub async fn stage<S>(&self, content: S, max_bytes: u64) -> Result<Staged, MediaError>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send,
    {
        self.stage_with(content, max_bytes, None).await
    }

    /// Streams `content` into a temporary without hashing it: `digest` is the sha256 of
    /// exactly what `content` yields, which its source sets once it has yielded the last
    /// byte (a checked body verified against its trailer). A stream that ends without
    /// setting it fails the put and leaves nothing behind.
    pub async fn stage_hashed<S>(
        &self,
        content: S,
        max_bytes: u64,
        digest: KnownDigest,
    ) -> Result<Staged, MediaError>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send,
    {
        self.stage_with(content, max_bytes, Some(digest)).await
    }

    async fn stage_with<S>(
        &self,
        content: S,
        max_bytes: u64,
        known: Option<KnownDigest>,
    ) -> Result<Staged, MediaError>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send,
    {
        let name = ferry_fs::random_hex::<16>();
        let temporary = Path::from(format!("{TEMPORARIES}/{name}"));
        let leftover = Leftover {
            dir: self.root.join(TEMPORARIES),
            name,
            remote: matches!(self.backend, Backend::S3 { .. }).then(|| self.store.clone()),
            armed: true,
        };
        let mut writer = match &self.backend {
            Backend::Local(_) => {
                let upload = self.store.put_multipart(&temporary).await?;
                Writer::Local(WriteMultipart::new_with_chunk_size(upload, PART_BYTES))
            }
            Backend::S3 { s3, prefix, .. } => Writer::S3(crate::s3::Staging::new(
                s3.clone(),
                Blobs::in_bucket(prefix, &temporary),
            )),
        };
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut content = std::pin::pin!(content);
        let failure = loop {
            let chunk = match content.next().await {
                None => break None,
                Some(Err(e)) => break Some(MediaError::Source(e)),
                Some(Ok(chunk)) => chunk,
            };
            size += chunk.len() as u64;
            if size > max_bytes {
                break Some(MediaError::TooLarge { max_bytes });
            }
            if known.is_none() {
                hasher.update(&chunk);
            }
            if let Err(e) = writer.write(chunk).await {
                break Some(e);
            }
        };
        let sha256: Result<[u8; 32], MediaError> = match (failure, known) {
            (Some(e), _) => Err(e),
            (None, None) => Ok(hasher.finalize().into()),
            (None, Some(known)) => known.get().copied().ok_or_else(|| {
                MediaError::Source(std::io::Error::other(
                    "the source ended without the digest of what it yielded",
                ))
            }),
        };
        let sha256 = match sha256 {
            Ok(sha256) => sha256,
            Err(e) => {
                // The abort removes the staging; its own failure adds nothing to `e`.
                writer.abort().await;
                return Err(e);
            }
        };
        writer.finish().await?;
        Ok(Staged {
            leftover,
            temporary,
            sha256: ferry_fs::hex(&sha256),
            size,
        })
    }

    /// Places `staged` at its key, create-once. The temporary stays until
    /// [`Blobs::settle`]: until the put has recorded the blob, it is the put's only way
    /// to put the blob back should a sweep take it meanwhile.
    pub async fn place(&self, staged: &Staged) -> Result<Placed, MediaError> {
        self.copy_once(&staged.temporary, &blob_key(&staged.sha256))
            .await
    }

    /// Copies `from` to `to` unless `to` exists. The local backend links, failing if
    /// `to` exists; on S3 the copy is made after a look finds `to` missing, which two
    /// copies of the same content may both pass: both write the same bytes.
    async fn copy_once(&self, from: &Path, to: &Path) -> Result<Placed, MediaError> {
        if let Backend::S3 { .. } = self.backend {
            if self.exists_at(to).await? {
                return Ok(Placed::Existing);
            }
            self.store.copy(from, to).await?;
            return Ok(Placed::New);
        }
        match self.store.copy_opts(from, to, copy_once()).await {
            Ok(()) => Ok(Placed::New),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(Placed::Existing),
            Err(e) => Err(e.into()),
        }
    }

    /// After the put has recorded the blob: puts it back from the temporary if a sweep
    /// took it meanwhile, then drops the temporary. (The sweeper's side is in `sweep.rs`.)
    pub async fn settle(&self, staged: Staged) -> Result<(), MediaError> {
        self.copy_once(&staged.temporary, &blob_key(&staged.sha256))
            .await?;
        self.discard(staged).await
    }

    /// Removes a staged temporary.
    pub async fn discard(&self, mut staged: Staged) -> Result<(), MediaError> {
        ignore_not_found(self.store.delete(&staged.temporary).await)?;
        staged.leftover.disarm();
        Ok(())
    }

    /// Whether the blob for `sha256` is in the store.
    pub async fn exists(&self, sha256: &str) -> Result<bool, MediaError> {
        self.exists_at(&blob_key(sha256)).await
    }

    async fn exists_at(&self, key: &Path) -> Result<bool, MediaError> {
        match self.store.head(key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The blob's bytes, streamed. A blob a sweep has just moved aside is read where
    /// it is: while a record references it, that sweep puts it back rather than drop it
    /// (see `sweep.rs`), and an open file reads on whatever happens to its name.
    pub async fn get(
        &self,
        sha256: &str,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, MediaError> {
        // A third look: a sweep that put it back between the first two.
        let trashed = Path::from(format!("{TRASH}/{sha256}"));
        for key in [blob_key(sha256), trashed, blob_key(sha256)] {
            match self.store.get(&key).await {
                Ok(result) => {
                    return Ok(result.into_stream().map_err(std::io::Error::other).boxed());
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(MediaError::BlobMissing(sha256.to_owned()))
    }

    /// Where a staged temporary lives on this machine: the put reads it (to sniff) rather
    /// than the blob, which a sweep may move until the put has recorded it.
    pub fn staged_path(&self, staged: &Staged) -> Option<PathBuf> {
        match &self.backend {
            Backend::Local(local) => local.path_to_filesystem(&staged.temporary).ok(),
            Backend::S3 { .. } => None,
        }
    }

    /// A reader of a staged temporary kept in a bucket, for a blocking thread of the
    /// current runtime; `None` on the local backend (see [`Blobs::staged_path`]).
    pub(crate) fn staged_reader(&self, staged: &Staged) -> Option<crate::s3::ObjectReader> {
        match &self.backend {
            Backend::Local(_) => None,
            Backend::S3 { s3, prefix, .. } => Some(crate::s3::ObjectReader::new(
                s3.clone(),
                Blobs::in_bucket(prefix, &staged.temporary),
                staged.size,
                tokio::runtime::Handle::current(),
            )),
        }
    }

    /// Where the blob's bytes live on this machine (the local backend's `localPath`);
    /// `None` for a bucket.
    pub fn local_path(&self, sha256: &str) -> Option<PathBuf> {
        match &self.backend {
            Backend::Local(local) => local.path_to_filesystem(&blob_key(sha256)).ok(),
            Backend::S3 { .. } => None,
        }
    }

    /// Where the blob's bytes live, for people: a path on this machine, or
    /// `s3://<bucket>/blobs/<sha256>`.
    pub fn location(&self, sha256: &str) -> String {
        match &self.backend {
            Backend::Local(local) => local
                .path_to_filesystem(&blob_key(sha256))
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            Backend::S3 { bucket, prefix, .. } => format!(
                "s3://{bucket}/{}",
                Blobs::in_bucket(prefix, &blob_key(sha256))
            ),
        }
    }

    /// Every blob, with its write time.
    pub async fn list(&self) -> Result<Vec<BlobMeta>, MediaError> {
        self.list_under(BLOBS, is_sha256_hex).await
    }

    /// The object store underneath, for tests that play a crash (a key left where a
    /// put or a sweep stopped).
    #[doc(hidden)]
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// Every key in the store, sorted: blobs, temporaries and trashed blobs alike (what
    /// an operator or a test looks at to see nothing is left behind).
    pub async fn keys(&self) -> Result<Vec<String>, MediaError> {
        let metas: Vec<_> = self.store.list(None).try_collect().await?;
        let mut keys: Vec<String> = metas.into_iter().map(|m| m.location.to_string()).collect();
        keys.sort();
        Ok(keys)
    }

    /// Blobs a sweep moved aside and had not yet dropped or put back.
    pub(crate) async fn trashed(&self) -> Result<Vec<BlobMeta>, MediaError> {
        self.list_under(TRASH, is_sha256_hex).await
    }

    /// The objects under `prefix` whose names `ours` accepts (the field `sha256` holds
    /// the name).
    async fn list_under(
        &self,
        prefix: &str,
        ours: fn(&str) -> bool,
    ) -> Result<Vec<BlobMeta>, MediaError> {
        let metas: Vec<_> = self
            .store
            .list(Some(&Path::from(prefix)))
            .try_collect()
            .await?;
        Ok(metas
            .into_iter()
            .filter_map(|meta| {
                let sha256 = meta.location.filename()?.to_owned();
                let modified = SystemTime::UNIX_EPOCH
                    + std::time::Duration::from_millis(
                        meta.last_modified.timestamp_millis().max(0) as u64,
                    );
                ours(&sha256).then_some(BlobMeta { sha256, modified })
            })
            .collect())
    }

    /// Moves a blob out of `blobs/` into `trash/`; `false` if it was not there.
    pub(crate) async fn move_to_trash(&self, sha256: &str) -> Result<bool, MediaError> {
        let to = Path::from(format!("{TRASH}/{sha256}"));
        match self.store.rename(&blob_key(sha256), &to).await {
            Ok(()) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Puts a trashed blob back (create-once: a blob placed meanwhile wins, the trashed
    /// copy, equal by its hash, is dropped).
    pub(crate) async fn restore(&self, sha256: &str) -> Result<(), MediaError> {
        let from = Path::from(format!("{TRASH}/{sha256}"));
        self.copy_once(&from, &blob_key(sha256)).await?;
        self.drop_trashed(sha256).await
    }

    /// Deletes a trashed blob.
    pub(crate) async fn drop_trashed(&self, sha256: &str) -> Result<(), MediaError> {
        ignore_not_found(
            self.store
                .delete(&Path::from(format!("{TRASH}/{sha256}")))
                .await,
        )
    }

    /// Removes temporaries older than `cutoff`: what puts that crashed left.
    pub(crate) async fn remove_stale_temporaries(
        &self,
        cutoff: SystemTime,
    ) -> Result<usize, MediaError> {
        if let Backend::Local(_) = self.backend {
            return self.remove_stale_local_temporaries(cutoff);
        }
        let mut removed = 0;
        for temporary in self.list_under(TEMPORARIES, |_| true).await? {
            if temporary.modified < cutoff {
                let key = Path::from(format!("{TEMPORARIES}/{}", temporary.sha256));
                ignore_not_found(self.store.delete(&key).await)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The local backend's listing hides its multipart staging files, so the folder is
    /// read here.
    fn remove_stale_local_temporaries(&self, cutoff: SystemTime) -> Result<usize, MediaError> {
        let dir = self.root.join(TEMPORARIES);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let mut removed = 0;
        for entry in entries {
            let entry = entry?;
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                // A put that finished meanwhile dropped its own temporary.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            if meta.is_file() && meta.modified()? < cutoff {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(removed)
    }
}

fn blob_key(sha256: &str) -> Path {
    Path::from(format!("{BLOBS}/{sha256}"))
}

fn copy_once() -> CopyOptions {
    CopyOptions {
        mode: CopyMode::Create,
        ..Default::default()
    }
}

fn ignore_not_found(result: object_store::Result<()>) -> Result<(), MediaError> {
    match result {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The only keys this store makes under `blobs/`; anything else there is not ours.
pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Where a put's content goes while it is staged.
enum Writer {
    Local(WriteMultipart),
    S3(crate::s3::Staging),
}

impl Writer {
    async fn write(&mut self, chunk: Bytes) -> Result<(), MediaError> {
        match self {
            Writer::Local(writer) => {
                writer.wait_for_capacity(PARTS_IN_FLIGHT_MAX).await?;
                writer.put(chunk);
                Ok(())
            }
            Writer::S3(staging) => staging.write(chunk).await,
        }
    }

    async fn finish(self) -> Result<(), MediaError> {
        match self {
            Writer::Local(writer) => {
                writer.finish().await?;
                Ok(())
            }
            Writer::S3(staging) => staging.finish().await,
        }
    }

    /// Drops what was staged; on S3 the staging's drop aborts its upload.
    async fn abort(self) {
        if let Writer::Local(writer) = self {
            let _ = writer.abort().await;
        }
    }
}
