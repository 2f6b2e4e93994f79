//! The pushes in flight, written down in the node's state folder (`pushing/`), so that a
//! node killed while it wrote a file leaves no temporary past its next start (core
//! C-ATOMIC).
//!
//! A push writes a hidden temporary beside its target, anywhere the owner allows writes;
//! a node that dies midway leaves it there, and nothing else would ever look in that
//! folder again. So before a push makes its temporary it writes a record here naming
//! the folder (its canonical path, device and inode) and the temporary's name, and it
//! holds an `flock` on the record while it writes. The record goes once the file is
//! placed or the temporary removed. At its start the node removes, for every record no
//! live process holds, that temporary (if it is still there, in that same folder) and
//! then the record. Only the node's own temporaries go, never another writer's in the
//! same folder, and a folder since moved or replaced is left alone.

use std::os::fd::AsFd;
use std::path::Path;

use ferry_fs::{Dir, Follow, FsError, TEMP_PREFIX};
use serde::{Deserialize, Serialize};

use super::journal::{Held, Journal};
use super::resolve::root;

/// The folder of the records, in the node's state folder.
pub const PUSHING_DIR_NAME: &str = "pushing";

/// A record's name ends so.
const RECORD_SUFFIX: &str = ".push";

/// What a record says.
#[derive(Serialize, Deserialize)]
struct Record {
    /// The canonical path of the folder the temporary is in.
    folder: String,
    /// The folder's device and inode, when the record was written.
    dev: u64,
    ino: u64,
    /// The temporary's name in it.
    temp: String,
}

impl Record {
    /// Whether it names a temporary of ferry's in a folder given by its absolute path.
    fn is_ours(&self) -> bool {
        self.temp.starts_with(TEMP_PREFIX)
            && !self.temp.contains('/')
            && self.folder.starts_with('/')
    }
}

/// The records of one node's pushes, in `<state>/pushing/`.
#[derive(Clone, Debug)]
pub struct PushJournal {
    journal: Journal,
}

/// One push in flight: its record stays, locked, until this is dropped.
#[derive(Debug)]
pub(super) struct InFlight {
    _held: Held,
    /// The temporary's name, chosen before the record was written.
    pub temp: String,
}

#[cfg(test)]
impl InFlight {
    /// Lets go of the record's lock and leaves the record, as a node that died would.
    fn abandon(self) {
        self._held.abandon();
    }
}

impl PushJournal {
    /// The records kept in `state_dir`.
    pub fn new(state_dir: &Path) -> PushJournal {
        PushJournal {
            journal: Journal::new(state_dir.join(PUSHING_DIR_NAME), RECORD_SUFFIX),
        }
    }

    /// Writes down a push about to make a temporary in `folder` (its canonical path),
    /// open as `parent`: the record names the temporary's name it returns, and is
    /// locked until the returned value is dropped.
    pub(super) fn begin(&self, folder: &str, parent: &Dir) -> Result<InFlight, FsError> {
        let stat = rustix::fs::fstat(parent.as_fd()).map_err(errno)?;
        let temp = format!("{TEMP_PREFIX}{}", ferry_fs::random_base32::<10>());
        let record = Record {
            folder: folder.to_owned(),
            dev: stat.st_dev,
            ino: stat.st_ino,
            temp: temp.clone(),
        };
        Ok(InFlight {
            _held: self.journal.begin(&record)?,
            temp,
        })
    }

    /// Removes the temporaries of the pushes a node that died left, and their records;
    /// how many temporaries went. Records a live process holds are left; a record that
    /// cannot be read, or whose folder is gone or is another folder now, goes alone.
    pub fn sweep(&self) -> usize {
        let mut removed = 0;
        self.journal.sweep(|record: Option<Record>| {
            let Some(record) = record.filter(Record::is_ours) else {
                return true;
            };
            match remove_temporary(&record) {
                Ok(went) => {
                    removed += usize::from(went);
                    true
                }
                Err(e) => {
                    eprintln!(
                        "ferry node: removing the temporary {} a push left in {}: {e}",
                        record.temp, record.folder
                    );
                    false
                }
            }
        });
        removed
    }
}

fn errno(e: rustix::io::Errno) -> FsError {
    FsError::from_raw_os_error(e.raw_os_error())
}

/// Removes the temporary `record` names, if its folder is still the one it was and the
/// temporary is still there; whether one went.
fn remove_temporary(record: &Record) -> Result<bool, FsError> {
    let mut dir = root()?;
    for name in record.folder.split('/').filter(|c| !c.is_empty()) {
        dir = match dir.open_dir(name, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound | FsError::PathEscapes | FsError::NotADirectory) => {
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
    }
    let stat = rustix::fs::fstat(dir.as_fd()).map_err(errno)?;
    if (stat.st_dev, stat.st_ino) != (record.dev, record.ino) {
        return Ok(false);
    }
    match dir.metadata(&record.temp) {
        Ok(meta) if meta.kind == ferry_fs::EntryKind::File => {}
        Ok(_) | Err(FsError::NotFound) => return Ok(false),
        Err(e) => return Err(e),
    }
    ferry_fs::remove_temporary(&dir, &record.temp)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &Path) -> Dir {
        Dir::open_ambient(path).unwrap()
    }

    #[test]
    fn the_temporary_of_a_push_that_died_goes_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = std::fs::canonicalize(tmp.path()).unwrap().join("inbox");
        std::fs::create_dir(&folder).unwrap();
        let journal = PushJournal::new(&tmp.path().join("state"));
        let parent = open(&folder);
        let folder_path = folder.to_str().unwrap();

        // A push that died: its record and its temporary stay, no process holds them.
        let died = journal.begin(folder_path, &parent).unwrap();
        let left = died.temp.clone();
        std::fs::write(folder.join(&left), b"half a file").unwrap();
        died.abandon();
        // A push still running: its record is held.
        let running = journal.begin(folder_path, &parent).unwrap();
        std::fs::write(folder.join(&running.temp), b"being written").unwrap();
        // Another writer's temporary, and a file of the owner's.
        let foreign = format!("{TEMP_PREFIX}someone-else");
        std::fs::write(folder.join(&foreign), b"not ours").unwrap();
        std::fs::write(folder.join("report.txt"), b"the owner's").unwrap();
        // A record being written when its node died: no temporary was made yet.
        std::fs::write(
            tmp.path()
                .join("state")
                .join(PUSHING_DIR_NAME)
                .join(format!("{}0123", crate::host::journal::UNFINISHED_PREFIX)),
            b"{\"fol",
        )
        .unwrap();

        assert_eq!(journal.sweep(), 1);
        assert!(!folder.join(&left).exists());
        assert!(folder.join(&running.temp).exists());
        assert!(folder.join(&foreign).exists());
        assert!(folder.join("report.txt").exists());
        let records = |dir: &Path| std::fs::read_dir(dir).unwrap().count();
        let state = tmp.path().join("state").join(PUSHING_DIR_NAME);
        assert_eq!(records(&state), 1, "only the running push's record stays");

        // Once the running push ends, its record goes with it.
        let temp = running.temp.clone();
        drop(running);
        assert_eq!(records(&state), 0);
        assert_eq!(journal.sweep(), 0);
        assert!(folder.join(temp).exists(), "the push removes its own");
    }

    #[test]
    fn a_folder_moved_or_replaced_since_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let folder = base.join("inbox");
        std::fs::create_dir(&folder).unwrap();
        let journal = PushJournal::new(&base.join("state"));
        let died = journal
            .begin(folder.to_str().unwrap(), &open(&folder))
            .unwrap();
        let name = died.temp.clone();
        died.abandon();
        // The folder went elsewhere, and another took its path with a file of that name.
        std::fs::rename(&folder, base.join("moved")).unwrap();
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join(&name), b"another folder's").unwrap();

        assert_eq!(journal.sweep(), 0);
        assert!(folder.join(&name).exists());
        assert_eq!(
            std::fs::read_dir(base.join("state").join(PUSHING_DIR_NAME))
                .unwrap()
                .count(),
            0,
            "the record went"
        );
    }
}
