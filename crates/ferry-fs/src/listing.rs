//! The names a listing shows, sorted, remembered for as long as their folder is unchanged.
//!
//! A paged listing (`dir_list`'s pages) would otherwise read and sort the whole folder
//! again for every page. A folder's names change only together with its modification and
//! change times (creating, removing or renaming an entry sets both), so the sorted names
//! are kept under the folder's device, inode and both times, and used again only while
//! all four are the same. That is exact with one care: the kernel stamps a change with a
//! clock that advances a tick (a few milliseconds) at a time, so a change made in the same
//! tick as the read could leave the stamps as they were. A folder is remembered only once
//! both stamps are [`SETTLED`] in the past; a change after the read then always moves
//! them. Whoever asks has opened the folder already: the names are the folder's, the same
//! for every caller that may open it.

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::FsError;
use crate::dir::{Dir, is_temporary};
use crate::name::name_from_bytes;

/// How long ago a folder's last change must be for its names to be remembered.
const SETTLED: Duration = Duration::from_secs(1);
/// Folders remembered at once, the most recently used kept.
const REMEMBERED_FOLDERS: usize = 8;
/// Bytes of names remembered at once; a folder with more is read every time.
const REMEMBERED_BYTES_MAX: usize = 8 * 1024 * 1024;

/// What a folder's names are remembered under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

struct Remembered {
    identity: Identity,
    names: Arc<[String]>,
    bytes: usize,
}

static REMEMBERED: Mutex<Vec<Remembered>> = Mutex::new(Vec::new());

impl Dir {
    /// The names of this folder a listing shows (temporaries left out), sorted by their
    /// bytes: read with one `getdents` pass, or as read before while the folder has not
    /// changed since (see the module's comment).
    pub fn listing_names(&self) -> Result<Arc<[String]>, FsError> {
        let before = identity(self)?;
        if let Some(names) = recall(&before) {
            return Ok(names);
        }
        let mut names = Vec::new();
        let mut bytes = 0;
        self.for_each_name(|name| {
            let name = name_from_bytes(name.to_bytes());
            if !is_temporary(&name) {
                bytes += name.len() + std::mem::size_of::<String>();
                names.push(name.into_owned());
            }
            Ok(())
        })?;
        names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        let names: Arc<[String]> = names.into();
        if settled(&before) && bytes <= REMEMBERED_BYTES_MAX && identity(self)? == before {
            remember(before, names.clone(), bytes);
        }
        Ok(names)
    }
}

fn identity(dir: &Dir) -> Result<Identity, FsError> {
    let stat = rustix::fs::fstat(dir.as_fd()).map_err(FsError::from_errno)?;
    Ok(Identity {
        dev: stat.st_dev,
        ino: stat.st_ino,
        mtime: (stat.st_mtime, stat.st_mtime_nsec as i64),
        ctime: (stat.st_ctime, stat.st_ctime_nsec as i64),
    })
}

/// Whether both stamps are far enough in the past that a later change must move them.
fn settled(identity: &Identity) -> bool {
    let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
        return false;
    };
    let limit = now.saturating_sub(SETTLED);
    let before_limit = |(secs, nanos): (i64, i64)| {
        let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
            // Before 1970: a clock set back; never trusted.
            return false;
        };
        Duration::new(secs, nanos.min(999_999_999)) < limit
    };
    before_limit(identity.mtime) && before_limit(identity.ctime)
}

fn recall(identity: &Identity) -> Option<Arc<[String]>> {
    let mut remembered = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner());
    let at = remembered.iter().position(|r| r.identity == *identity)?;
    // The most recently used goes last.
    let entry = remembered.remove(at);
    let names = entry.names.clone();
    remembered.push(entry);
    Some(names)
}

fn remember(identity: Identity, names: Arc<[String]>, bytes: usize) {
    let mut remembered = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner());
    // The same folder as it was before (other stamps) is of no more use.
    remembered.retain(|r| (r.identity.dev, r.identity.ino) != (identity.dev, identity.ino));
    remembered.push(Remembered {
        identity,
        names,
        bytes,
    });
    let mut total: usize = remembered.iter().map(|r| r.bytes).sum();
    while remembered.len() > REMEMBERED_FOLDERS || total > REMEMBERED_BYTES_MAX {
        total -= remembered.remove(0).bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn folder(names: usize) -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..names {
            fs::write(tmp.path().join(format!("f{i:03}")), b"x").unwrap();
        }
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        (tmp, dir)
    }

    /// The memory is one for the process: tests that fill it take turns.
    static TURNS: Mutex<()> = Mutex::new(());

    #[test]
    fn names_come_sorted_by_bytes_without_temporaries() {
        let (tmp, dir) = folder(0);
        for name in ["b", "a", "B", "é", "Z"] {
            fs::write(tmp.path().join(name), b"").unwrap();
        }
        fs::write(tmp.path().join(format!("{}x", crate::TEMP_PREFIX)), b"").unwrap();
        let names = dir.listing_names().unwrap();
        assert_eq!(&*names, ["B", "Z", "a", "b", "é"].map(String::from));
    }

    #[test]
    fn a_settled_folder_is_read_once_and_a_change_is_seen_at_once() {
        let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
        let (tmp, dir) = folder(3);
        // Just made: not settled, so read every time.
        let first = dir.listing_names().unwrap();
        assert!(!Arc::ptr_eq(&first, &dir.listing_names().unwrap()));
        std::thread::sleep(SETTLED + Duration::from_millis(100));
        let settled_names = dir.listing_names().unwrap();
        assert!(Arc::ptr_eq(&settled_names, &dir.listing_names().unwrap()));
        // Each kind of change is seen by the very next listing.
        fs::write(tmp.path().join("f999"), b"").unwrap();
        assert_eq!(dir.listing_names().unwrap().len(), 4);
        fs::rename(tmp.path().join("f000"), tmp.path().join("g000")).unwrap();
        assert_eq!(dir.listing_names().unwrap()[3], "g000");
        fs::remove_file(tmp.path().join("f001")).unwrap();
        assert_eq!(dir.listing_names().unwrap().len(), 3);
        // Stamps moved back to what they were (a clock set back, `touch -d`) change the
        // change time all the same.
        let identity_now = identity(&dir).unwrap();
        assert!(!settled(&identity_now));
        let moved = Identity {
            ctime: (identity_now.ctime.0 - 10, 1),
            ..identity_now
        };
        assert!(recall(&moved).is_none());
    }

    #[test]
    fn at_most_the_newest_folders_are_remembered() {
        let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
        let (_tmp, dir) = folder(1);
        let base = identity(&dir).unwrap();
        let names: Arc<[String]> = vec!["n".to_owned()].into();
        let of = |ino: u64| Identity {
            ino,
            mtime: (1, 0),
            ctime: (1, 0),
            ..base
        };
        for ino in 0..(REMEMBERED_FOLDERS as u64 + 2) {
            remember(of(1_000_000 + ino), names.clone(), 10);
        }
        assert!(recall(&of(1_000_000)).is_none());
        assert!(recall(&of(1_000_001)).is_none());
        assert!(recall(&of(1_000_002)).is_some());
        // A folder over the byte bound pushes out everything before it, itself too.
        remember(of(2_000_000), names.clone(), REMEMBERED_BYTES_MAX + 1);
        assert!(recall(&of(2_000_000)).is_none());
    }
}
