//! Records of work in flight, kept in a folder of the node's state folder, so that at its
//! next start a node finds what a predecessor killed midway left undone.
//!
//! Each record is written aside and renamed into place with an `flock` already held, and
//! stays locked by the process doing the work for as long as it runs; it goes (before
//! its lock) once the work is done. A record nobody holds is one a dead process left. A
//! record seen under its aside name was being written when its process died.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use rustix::fs::FlockOperation;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A record being written starts so; the work it would name had not begun.
pub(super) const UNFINISHED_PREFIX: &str = ".record-";
/// A record is far smaller than this; anything longer is not one.
const RECORD_MAX_BYTES: u64 = 16 * 1024;

/// The records of one kind of work, in one folder of the state folder.
#[derive(Clone, Debug)]
pub(super) struct Journal {
    dir: PathBuf,
    /// A record's name ends so (each kind of work its own, so none reads another's).
    suffix: &'static str,
}

/// One piece of work in flight: its record stays, locked, until this is dropped.
#[derive(Debug)]
pub(super) struct Held {
    record: PathBuf,
    /// Holds the record's lock.
    file: Option<File>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // The record goes before its lock: a sweep never finds it unheld and still there.
        if let Some(file) = self.file.take() {
            let _ = std::fs::remove_file(&self.record);
            drop(file);
        }
    }
}

#[cfg(test)]
impl Held {
    /// Lets go of the record's lock and leaves the record, as a process that died would.
    pub(super) fn abandon(mut self) {
        self.file = None;
    }
}

impl Journal {
    /// The records kept in `dir` (made, 0700, when the first is written), named
    /// `<random id><suffix>`.
    pub(super) fn new(dir: PathBuf, suffix: &'static str) -> Journal {
        Journal { dir, suffix }
    }

    /// Writes `record` down, locked until the returned value is dropped.
    pub(super) fn begin<T: Serialize>(&self, record: &T) -> std::io::Result<Held> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let id = ferry_fs::random_hex::<16>();
        let unfinished = self.dir.join(format!("{UNFINISHED_PREFIX}{id}"));
        let placed = self.dir.join(format!("{id}{}", self.suffix));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&unfinished)?;
        // Locked before it can be seen under its own name, for as long as the work runs.
        let written = rustix::fs::flock(&file, FlockOperation::LockExclusive)
            .map_err(std::io::Error::from)
            .and_then(|()| serde_json::to_vec(record).map_err(std::io::Error::other))
            .and_then(|bytes| file.write_all(&bytes))
            .and_then(|()| std::fs::rename(&unfinished, &placed));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&unfinished);
            return Err(e);
        }
        Ok(Held {
            record: placed,
            file: Some(file),
        })
    }

    /// Hands each record no live process holds to `undo` (`None`: one that cannot be
    /// read, or was still being written), then removes it, unless `undo` answers `false`
    /// (to be tried again at the next start). Records a live process holds are left.
    pub(super) fn sweep<T: DeserializeOwned>(&self, mut undo: impl FnMut(Option<T>) -> bool) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let finished = name.ends_with(self.suffix) && !name.starts_with(UNFINISHED_PREFIX);
            if !finished && !name.starts_with(UNFINISHED_PREFIX) {
                continue;
            }
            let path = entry.path();
            let Ok(file) = File::open(&path) else {
                continue;
            };
            // Held: its work is still running (in another process of this state folder).
            if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
                continue;
            }
            let record = if finished { read(file) } else { None };
            if undo(record) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// The record in `file`, if it is one.
fn read<T: DeserializeOwned>(file: File) -> Option<T> {
    let mut bytes = Vec::new();
    file.take(RECORD_MAX_BYTES).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}
