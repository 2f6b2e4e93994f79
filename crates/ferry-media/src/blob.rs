//! Content-addressed blobs through `object_store`: `blobs/<sha256>`, written once.
//!
//! A put cannot know its key before it has read every byte, so it streams into a
//! temporary object (`tmp/<random>`) while hashing and counting, then places it at its
//! key with a create-once copy (a hard link on the local file system): a blob that is there already is kept, never
//! rewritten. Readers of `blobs/` therefore never see a partial blob, and a crash mid-put
//! leaves only a temporary, which the sweeper removes.
//!
//! Only the local file system is wired today. The S3 backend (spec scale S-STORE) keeps
//! this API: its put will finish the multipart upload with `PutMode::Create` at the key
//! instead of renaming, and `local_path` will answer `None`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, ObjectStore, ObjectStoreExt, RenameOptions, RenameTargetMode,
    WriteMultipart,
};
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

/// Removes a put's temporary from the local file system when the put is dropped midway:
/// the future of a put can be dropped at any await (a cancelled call), and neither the
/// temporary nor the multipart writer's staging files (`<name>#<part>`) may stay.
#[derive(Debug)]
struct Leftover {
    dir: PathBuf,
    name: String,
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
    local: Arc<LocalFileSystem>,
    pub(crate) root: PathBuf,
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
            local,
            root: dir.to_owned(),
        })
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
            armed: true,
        };
        let upload = self.store.put_multipart(&temporary).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
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
            if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT_MAX).await {
                break Some(e.into());
            }
            writer.put(chunk);
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
                // The abort removes the staging file; its own failure adds nothing to `e`.
                let _ = writer.abort().await;
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
        match self
            .store
            .copy_opts(&staged.temporary, &blob_key(&staged.sha256), copy_once())
            .await
        {
            Ok(()) => Ok(Placed::New),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(Placed::Existing),
            Err(e) => Err(e.into()),
        }
    }

    /// After the put has recorded the blob: puts it back from the temporary if a sweep
    /// took it meanwhile, then drops the temporary. (The sweeper's side is in `sweep.rs`.)
    pub async fn settle(&self, staged: Staged) -> Result<(), MediaError> {
        if !self.exists(&staged.sha256).await? {
            match self
                .store
                .copy_opts(&staged.temporary, &blob_key(&staged.sha256), copy_once())
                .await
            {
                Ok(()) | Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
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
        match self.store.head(&blob_key(sha256)).await {
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
        self.local.path_to_filesystem(&staged.temporary).ok()
    }

    /// Where the blob's bytes live on this machine (the local backend's `localPath`).
    pub fn local_path(&self, sha256: &str) -> Option<PathBuf> {
        self.local.path_to_filesystem(&blob_key(sha256)).ok()
    }

    /// Every blob, with its write time.
    pub async fn list(&self) -> Result<Vec<BlobMeta>, MediaError> {
        self.list_under(BLOBS).await
    }

    /// Blobs a sweep moved aside and had not yet dropped or put back.
    pub(crate) async fn trashed(&self) -> Result<Vec<BlobMeta>, MediaError> {
        self.list_under(TRASH).await
    }

    async fn list_under(&self, prefix: &str) -> Result<Vec<BlobMeta>, MediaError> {
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
                is_sha256_hex(&sha256).then_some(BlobMeta { sha256, modified })
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
        match self
            .store
            .rename_opts(&from, &blob_key(sha256), create_once())
            .await
        {
            Ok(()) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => self.drop_trashed(sha256).await,
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a trashed blob.
    pub(crate) async fn drop_trashed(&self, sha256: &str) -> Result<(), MediaError> {
        ignore_not_found(
            self.store
                .delete(&Path::from(format!("{TRASH}/{sha256}")))
                .await,
        )
    }

    /// Removes temporaries older than `cutoff`: what puts that crashed left. The local
    /// backend's listing hides its multipart staging files, so they are read here.
    pub(crate) fn remove_stale_temporaries(&self, cutoff: SystemTime) -> Result<usize, MediaError> {
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

fn create_once() -> RenameOptions {
    RenameOptions {
        target_mode: RenameTargetMode::Create,
        ..Default::default()
    }
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
