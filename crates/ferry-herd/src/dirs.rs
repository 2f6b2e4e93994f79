//! The folders of one person's herd (H-WHERE): `private/people/<p>/herd/`, 0700, with
//! `workers/`, `mailboxes/<label>/`, `results/` and `snapshots/`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ferry_fs::{Dir, EntryKind, Follow};

use crate::HerdError;

/// The mode of every herd folder: the person's alone.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Worker records.
pub const WORKERS: &str = "workers";
/// One mailbox per worker label, and the controller's.
pub const MAILBOXES: &str = "mailboxes";
/// Completions' outputs and oversized answers.
pub const RESULTS: &str = "results";
/// Prompt snapshots, each removed after its start attempt.
pub const SNAPSHOTS: &str = "snapshots";
/// The controller's mailbox in `mailboxes/`: `@` is never in a label.
pub const OWNER_MAILBOX: &str = "@owner";

/// A temporary older than this was left by a writer that died (a killed `complete` or
/// `assign`).
const STALE_TEMPORARY: Duration = Duration::from_secs(60);

/// Removes the stale temporaries in `dir` (never a folder, never through a link).
pub(crate) fn sweep_stale(dir: &Dir) -> Result<(), HerdError> {
    let now = SystemTime::now();
    for entry in dir.entries()? {
        let stale = now
            .duration_since(entry.meta.mtime)
            .is_ok_and(|age| age >= STALE_TEMPORARY);
        if ferry_fs::is_temporary(&entry.name) && stale && entry.meta.kind != EntryKind::Dir {
            ferry_fs::remove_temporary(dir, &entry.name)?;
        }
    }
    Ok(())
}

/// One herd's folder, open.
#[derive(Debug)]
pub struct HerdDirs {
    /// `herd/` itself, absolute.
    pub path: PathBuf,
    /// `herd/`, open.
    pub dir: Dir,
}

impl HerdDirs {
    /// Opens (making what is missing, 0700) the herd folder at `path`. With `from`, the
    /// path is reached beneath that folder (the data folder, the service's view) with no
    /// link followed; without, as the process may reach it (a worker, already the person).
    pub fn open(path: &Path, from: Option<(&Dir, &str)>) -> Result<HerdDirs, HerdError> {
        let dir = match from {
            Some((base, rel)) => base.create_dir_all(rel, PRIVATE_DIR_MODE)?,
            None => Dir::open_path(path)?,
        };
        for sub in [WORKERS, MAILBOXES, RESULTS, SNAPSHOTS] {
            match dir.create_dir(sub, PRIVATE_DIR_MODE) {
                Ok(()) | Err(ferry_fs::FsError::Exists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(HerdDirs {
            path: path.to_path_buf(),
            dir,
        })
    }

    /// Removes what dead writers left: stale temporaries in `results/` and in every
    /// mailbox (a worker killed mid-`complete` would otherwise keep up to 256 MiB each).
    pub fn sweep(&self) -> Result<(), HerdError> {
        sweep_stale(&self.sub(RESULTS)?)?;
        let mailboxes = self.sub(MAILBOXES)?;
        for name in mailboxes.names()? {
            if let Ok(mailbox) = crate::mailbox::Mailbox::open(&self.path_of(MAILBOXES).join(&name))
            {
                mailbox.sweep()?;
            }
        }
        Ok(())
    }

    /// A folder of the herd, open, never through a link.
    pub fn sub(&self, name: &str) -> Result<Dir, HerdError> {
        Ok(self.dir.open_dir(name, Follow::Never)?)
    }

    /// The absolute path of `name` in the herd.
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}
