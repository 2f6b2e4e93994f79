//! What the requester's operations say about files: plain data that crosses the
//! worker's socket.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::UNIX_EPOCH;

use ferry_fs::EntryKind;
use serde::{Deserialize, Serialize};

/// Metadata of one file or folder.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileInfo {
    /// The absolute path (for a listing entry: its name).
    pub path: String,
    /// Whether it is a file, a folder, a link or something else.
    pub kind: Kind,
    /// Its length in bytes, as the file system reports it.
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: i64,
    /// Permission bits.
    pub mode: u32,
}

/// What kind of entry a [`FileInfo`] describes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link, described itself rather than its target.
    Symlink,
    /// A device, socket or pipe: nothing the tools read or write.
    Other,
}

/// A file that was written: where, how big, its sha256 (hex).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct WrittenFile {
    /// The absolute path the file now has.
    pub path: String,
    /// Bytes in the file as written.
    pub size: u64,
    /// The SHA-256 of the content, as lowercase hex, for a later write to check against.
    pub sha256: String,
}

/// What a confined handle read of `path`.
pub(crate) fn info_from(path: String, meta: &ferry_fs::Metadata) -> FileInfo {
    FileInfo {
        path,
        kind: match meta.kind {
            EntryKind::File => Kind::File,
            EntryKind::Dir => Kind::Dir,
            EntryKind::Symlink => Kind::Symlink,
            _ => Kind::Other,
        },
        size: meta.size,
        mtime: unix_secs(meta.mtime),
        mode: meta.mode & 0o7777,
    }
}

pub(crate) fn info_of(path: &Path, meta: &std::fs::Metadata) -> FileInfo {
    let ft = meta.file_type();
    FileInfo {
        path: path.display().to_string(),
        kind: if ft.is_file() {
            Kind::File
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_symlink() {
            Kind::Symlink
        } else {
            Kind::Other
        },
        size: meta.len(),
        mtime: meta.mtime(),
        mode: meta.permissions().mode() & 0o7777,
    }
}

fn unix_secs(t: std::time::SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}
