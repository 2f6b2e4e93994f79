//! Trees fetched from nodes (spec N-TOOLS `dir_fetch`): each is extracted beside the
//! blobs into `dir-fetch-<media id>/`, the folder of the archive's own media record, and
//! lives as long as that record does.
//!
//! Extraction writes into `.tmp-dir-fetch-<media id>` and renames it into place once
//! complete, so a tree is either whole or absent; the sweeper removes the folders of
//! records that are gone and temporaries a crash left.

use std::path::PathBuf;
use std::time::SystemTime;

use ferry_fs::Dir;

use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::{MediaError, MediaId, MediaRecord, MediaStore};

/// The name of a tree's folder before its media id.
pub const TREE_PREFIX: &str = "dir-fetch-";
/// The name of a tree's folder while it is being extracted, before its media id.
pub const TREE_TEMPORARY_PREFIX: &str = ".tmp-dir-fetch-";
/// An archive copied out of a bucket to be extracted, before a random part; a
/// temporary like the others, which the sweep removes if a crash left it.
const ARCHIVE_COPY_PREFIX: &str = ".tmp-dir-fetch-archive-";

/// A file of this machine holding a record's bytes, for code that needs a file (the
/// archive planner reads an archive twice): the blob itself on the local backend, or a
/// copy under the trees' folder, removed when this is dropped.
pub struct LocalCopy {
    path: PathBuf,
    copied: Option<(Dir, String)>,
}

impl LocalCopy {
    /// Where the bytes are.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for LocalCopy {
    fn drop(&mut self) {
        if let Some((dir, name)) = &self.copied {
            // Best effort: a copy left behind is a stale temporary for the sweep.
            let _ = dir.remove(name);
        }
    }
}

impl MediaStore {
    /// The folder trees are extracted into (the local backend's root), open.
    pub fn trees(&self) -> Result<Dir, MediaError> {
        Ok(Dir::open_ambient(&self.blobs.root)?)
    }

    /// The bytes of `record` in a file of this machine (see [`LocalCopy`]), copied out of
    /// the bucket as they stream, when they live in one.
    pub async fn local_copy(&self, record: &MediaRecord) -> Result<LocalCopy, MediaError> {
        if let Some(path) = self.blobs.local_path(&record.sha256) {
            return Ok(LocalCopy { path, copied: None });
        }
        let name = format!("{ARCHIVE_COPY_PREFIX}{}", ferry_fs::random_hex::<16>());
        let path = self.blobs.root.join(&name);
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await?;
        let copy = LocalCopy {
            path,
            copied: Some((self.trees()?, name)),
        };
        let mut bytes = self.blobs.get(&record.sha256).await?;
        while let Some(chunk) = bytes.next().await {
            file.write_all(&chunk?).await?;
        }
        file.flush().await?;
        Ok(copy)
    }

    /// Where the tree of `id` lives, whether or not it exists.
    pub fn tree_path(&self, id: &MediaId) -> PathBuf {
        self.blobs
            .root
            .join(format!("{TREE_PREFIX}{}", id.as_str()))
    }

    /// Forgets the record `id` (its blob goes with the next sweep if nothing else
    /// references it), and its tree if it has one; `false` if there was no record.
    pub fn remove(&self, id: &MediaId) -> Result<bool, MediaError> {
        let removed = self.records.delete(id)?;
        match self
            .trees()?
            .remove(&format!("{TREE_PREFIX}{}", id.as_str()))
        {
            Ok(()) | Err(ferry_fs::FsError::NotFound) => Ok(removed),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the trees whose record is no longer live, and extraction temporaries
    /// untouched since before `stale`; says how many of each.
    pub(crate) fn sweep_trees(
        &self,
        now: SystemTime,
        stale: SystemTime,
    ) -> Result<(usize, usize), MediaError> {
        let trees = self.trees()?;
        let (mut gone, mut temporaries) = (0, 0);
        for entry in trees.entries()? {
            let name = entry.name;
            if let Some(id) = name.strip_prefix(TREE_PREFIX) {
                let live = MediaId::parse(id)
                    .ok()
                    .and_then(|id| self.records.get(&id).ok().flatten())
                    .is_some_and(|r| r.expires > crate::store::seconds(now));
                if !live {
                    trees.remove(&name)?;
                    gone += 1;
                }
            } else if name.starts_with(TREE_TEMPORARY_PREFIX) && entry.meta.mtime < stale {
                trees.remove(&name)?;
                temporaries += 1;
            }
        }
        Ok((gone, temporaries))
    }
}
