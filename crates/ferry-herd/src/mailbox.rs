//! H-MAIL's mailboxes: one folder per recipient, one atomically written file per
//! envelope, numbered in order, each read once.
//!
//! `<mailbox>/new/<seq, 20 digits>.json` are unread, `cur/` read, `rejected/` what was
//! found there and refused (garbage, links, over the limit), kept for a person to look at.
//!
//! Writers serialize on an `flock` of `new/` so that two of them never pick one number;
//! the no-replace rename still decides a collision with anyone who did not take it.
//! Readers claim an envelope by renaming it from `new/` into `cur/` without replacing, so
//! exactly one reader gets each. An envelope moves only `new/` → `cur/` → `rejected/`, and
//! the next number is counted in that order, so a number in flight is never missed.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferry_codes::Code;
use ferry_config::limits::{HERD_INBOX_WAIT_MAX_SECS, MAILBOX_MAX_BYTES};
use ferry_fs::{AtomicWriter, Dir, EntryKind, Follow, FsError};

use crate::HerdError;
use crate::dirs::PRIVATE_DIR_MODE;
use crate::envelope::Envelope;
use crate::keys::WorkerKey;

/// Unread envelopes.
const NEW: &str = "new";
/// Envelopes already taken.
const CUR: &str = "cur";
/// What was found in the mailbox and refused.
const REJECTED: &str = "rejected";
/// Digits in an envelope's file name: every `u64` fits.
const SEQ_DIGITS: usize = 20;
/// How often [`Mailbox::wait_next`] looks again.
const POLL: Duration = Duration::from_millis(60);
/// Numbers tried by one delivery before giving up: each failure means someone took a
/// number while this writer held the lock, which only a writer ignoring it can do.
/// The last is 2^15 past the count.
const DELIVERY_ATTEMPTS: usize = 16;

/// One recipient's mailbox.
#[derive(Debug)]
pub struct Mailbox {
    dir: Dir,
    path: PathBuf,
    new: Dir,
    cur: Dir,
    rejected: Dir,
}

impl Mailbox {
    /// Makes (or opens) the mailbox `name` in `parent` (0700 folders), which is at `parent_path`.
    pub fn create(parent: &Dir, parent_path: &Path, name: &str) -> Result<Mailbox, HerdError> {
        check_component(name)?;
        let path = parent_path.join(name);
        let context = |e: FsError| HerdError::from(e).context(format!("mailbox {name}"));
        let dir = make_private_dir(parent, name).map_err(context)?;
        for sub in [NEW, CUR, REJECTED] {
            make_private_dir(&dir, sub).map_err(context)?;
        }
        Mailbox::from_dir(dir, path)
    }

    /// Opens the existing mailbox at `path` (absolute), as the process may.
    pub fn open(path: &Path) -> Result<Mailbox, HerdError> {
        let dir = Dir::open_path(path)
            .map_err(|e| HerdError::from(e).context(format!("mailbox {}", path.display())))?;
        Mailbox::from_dir(dir, path.to_path_buf())
    }

    fn from_dir(dir: Dir, path: PathBuf) -> Result<Mailbox, HerdError> {
        let open = |sub: &str| {
            dir.open_dir(sub, Follow::Never).map_err(|e| {
                HerdError::from(e).context(format!("mailbox {} folder {sub}", path.display()))
            })
        };
        Ok(Mailbox {
            new: open(NEW)?,
            cur: open(CUR)?,
            rejected: open(REJECTED)?,
            dir,
            path,
        })
    }

    /// Its absolute path (`FERRY_HERD_MAILBOX`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Delivers `envelope`: numbers it (its `seq` set to the next free number), refuses
    /// it if it then does not fit [`MAILBOX_MAX_BYTES`](ferry_config::limits::MAILBOX_MAX_BYTES),
    /// and writes it atomically without replacing anything, signed with `key` (the
    /// worker generation's it is to or from). Returns its `seq`.
    pub fn deliver(&self, envelope: &mut Envelope, key: &WorkerKey) -> Result<u64, HerdError> {
        let unnumbered = envelope.seq;
        let result = self.deliver_numbered(envelope, key);
        if result.is_err() {
            envelope.seq = unnumbered;
        }
        result
    }

    fn deliver_numbered(&self, envelope: &mut Envelope, key: &WorkerKey) -> Result<u64, HerdError> {
        // A handle of its own: a lock is held by an open file description, and threads
        // sharing this mailbox share `self.new`'s.
        let new = self.dir.open_dir(NEW, Follow::Never)?;
        crate::state::flock_waiting(&new, "this mailbox's delivery lock")?;
        for attempt in 0..DELIVERY_ATTEMPTS {
            // After a collision, further ahead each time: a writer that ignores the
            // lock and keeps taking the next number is outrun, not waited for.
            let skip = (1u64 << attempt) - 1;
            let seq = self
                .next_seq(&new)?
                .checked_add(skip)
                .ok_or_else(numbers_used_up)?;
            envelope.seq = seq;
            envelope.seal(key);
            envelope.check_fits()?;
            let name = seq_name(seq);
            let mut writer = match AtomicWriter::create(&new, &name) {
                Ok(writer) => writer.limit(MAILBOX_MAX_BYTES as u64),
                // Something not an envelope holds the number: the next count passes it.
                Err(FsError::PathEscapes | FsError::IsDirectory | FsError::NotRegular) => {
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            writer.write(&envelope.to_bytes())?;
            match writer.commit_new_or_replace(false) {
                Ok(_) => {
                    new.sync()?;
                    return Ok(seq);
                }
                Err(FsError::Exists) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(HerdError::new(
            Code::HerdBusy,
            format!(
                "mailbox {}: {DELIVERY_ATTEMPTS} numbers in a row were taken while delivering; \
                 something writes into it without its lock",
                self.path.display()
            ),
        ))
    }

    /// One more than the highest number in `new` (this mailbox's `new/`), `cur/` and
    /// `rejected/`, counted in the order an envelope moves through them.
    fn next_seq(&self, new: &Dir) -> Result<u64, HerdError> {
        let mut highest = 0;
        for dir in [new, &self.cur, &self.rejected] {
            for name in dir.names()? {
                if let Some(seq) = parse_seq_name(&name) {
                    highest = highest.max(seq);
                }
            }
        }
        highest.checked_add(1).ok_or_else(numbers_used_up)
    }

    /// The lowest-numbered unread envelope, now marked read (exactly one reader gets
    /// it); what is not a valid envelope, or is one `accept` refuses (not signed by the
    /// worker it names, not addressed here), is moved to `rejected/` and skipped.
    pub fn take_next(
        &self,
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Result<Option<Envelope>, HerdError> {
        // One log line for the whole look, however many files a worker planted.
        let mut rejected = Rejections::new(&self.path);
        let mut unread = Vec::new();
        for name in self.new.names()? {
            match parse_seq_name(&name) {
                Some(seq) => unread.push((seq, name)),
                // A writer is still filling it; `sweep` removes it if that writer died.
                None if ferry_fs::is_temporary(&name) => {}
                None => self.reject(
                    &self.new,
                    &name,
                    "its name is not an envelope's",
                    &mut rejected,
                ),
            }
        }
        unread.sort_unstable();
        for (seq, name) in unread {
            match self.new.rename_to(&name, &self.cur, &name, false) {
                Ok(()) => {}
                // Another reader claimed it first.
                Err(FsError::NotFound) => continue,
                // Its number was read already: a second file under it is not the one sent.
                Err(FsError::Exists) => {
                    self.reject(
                        &self.new,
                        &name,
                        "an envelope of that number was read already",
                        &mut rejected,
                    );
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            match self.read_claimed(&name, seq) {
                Ok(envelope) if accept(&envelope) => {
                    return Ok(Some(envelope));
                }
                Ok(_) => self.reject(
                    &self.cur,
                    &name,
                    "it is not signed by the worker it names (another process wrote it)",
                    &mut rejected,
                ),
                Err(why) => self.reject(&self.cur, &name, &why, &mut rejected),
            }
        }
        Ok(None)
    }

    /// Reads the envelope just claimed as `cur/<name>`, trusting nothing in it.
    fn read_claimed(&self, name: &str, seq: u64) -> Result<Envelope, String> {
        let file = self
            .cur
            .open_file(name, Follow::Never)
            .map_err(|e| e.to_string())?;
        let meta = file.metadata().map_err(|e| e.to_string())?;
        // A second name would let a writer hand over a file it did not write.
        if meta.nlink() != 1 {
            return Err("it has other names (a hard link)".to_owned());
        }
        let mut bytes = Vec::new();
        file.take(MAILBOX_MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        let envelope = Envelope::parse(&bytes).map_err(|e| e.message)?;
        if envelope.seq != seq {
            return Err(format!("it says it is number {}", envelope.seq));
        }
        Ok(envelope)
    }

    /// Moves `name` out of `from` into `rejected/`, keeping it for a person; counted in
    /// `rejected`, which logs once.
    fn reject(&self, from: &Dir, name: &str, why: &str, rejected: &mut Rejections) {
        let mut moved = from.rename_to(name, &self.rejected, name, false);
        if matches!(moved, Err(FsError::Exists)) {
            let other = format!("{}.rejected", ferry_fs::random_base32::<10>());
            moved = from.rename_to(name, &self.rejected, &other, false);
        }
        let kept = matches!(moved, Ok(()) | Err(FsError::NotFound));
        rejected.add(name, why, kept);
    }

    /// [`Mailbox::take_next`], waiting up to `wait` for one to arrive (at most
    /// [`HERD_INBOX_WAIT_MAX_SECS`](ferry_config::limits::HERD_INBOX_WAIT_MAX_SECS)).
    pub fn wait_next(
        &self,
        wait: Duration,
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Result<Option<Envelope>, HerdError> {
        let wait = wait.min(Duration::from_secs(HERD_INBOX_WAIT_MAX_SECS));
        let deadline = Instant::now() + wait;
        loop {
            if let Some(envelope) = self.take_next(accept)? {
                return Ok(Some(envelope));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            std::thread::sleep(left.min(POLL));
        }
    }

    /// How many envelopes are unread.
    pub fn unread(&self) -> Result<usize, HerdError> {
        let names = self.new.names()?;
        Ok(names.iter().filter(|n| parse_seq_name(n).is_some()).count())
    }

    /// Removes temporaries a crashed writer left.
    pub fn sweep(&self) -> Result<(), HerdError> {
        for dir in [&self.new, &self.cur, &self.rejected] {
            crate::dirs::sweep_stale(dir)?;
        }
        Ok(())
    }

    /// Removes the whole mailbox (an `assign` rolled back).
    pub fn remove(self) -> Result<(), HerdError> {
        let (Some(parent_path), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return Err(HerdError::invalid(format!(
                "{} is not a mailbox's path",
                self.path.display()
            )));
        };
        let name = name.to_string_lossy();
        let parent = Dir::open_path(parent_path)?;
        // Only the folder this handle opened: a link or another folder put at its name
        // meanwhile stays.
        let here = self.dir.own_metadata()?;
        match parent.metadata(&name) {
            Ok(meta) if meta.kind == EntryKind::Dir && meta.inode == here.inode => {}
            Ok(_) | Err(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        match parent.remove(&name) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Makes the folder `name` (0700) in `parent` unless it is there, and opens it, never
/// through a link.
fn make_private_dir(parent: &Dir, name: &str) -> Result<Dir, FsError> {
    match parent.create_dir(name, PRIVATE_DIR_MODE) {
        Ok(()) | Err(FsError::Exists) => {}
        Err(e) => return Err(e),
    }
    parent.open_dir(name, Follow::Never)
}

/// A mailbox's name is one plain component.
fn check_component(name: &str) -> Result<(), HerdError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(HerdError::invalid(format!(
            "{name:?} cannot name a mailbox: one folder name is needed"
        )));
    }
    Ok(())
}

/// Someone put an envelope numbered near `u64::MAX` in the mailbox.
fn numbers_used_up() -> HerdError {
    HerdError::new(
        Code::Internal,
        "the mailbox's numbers are used up: a file numbered near the last one is in it",
    )
}

/// The file name of envelope `seq`.
fn seq_name(seq: u64) -> String {
    format!("{seq:0width$}.json", width = SEQ_DIGITS)
}

/// The number of an envelope's file name: exactly 20 digits and `.json`.
fn parse_seq_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    if digits.len() != SEQ_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The files one look at a mailbox set aside, logged as one line when the look is over:
/// a worker that plants thousands of files costs the log one line per look, not one per
/// file.
struct Rejections<'a> {
    mailbox: &'a Path,
    count: usize,
    not_moved: usize,
    first: Option<(String, String)>,
}

impl<'a> Rejections<'a> {
    fn new(mailbox: &'a Path) -> Rejections<'a> {
        Rejections {
            mailbox,
            count: 0,
            not_moved: 0,
            first: None,
        }
    }

    fn add(&mut self, name: &str, why: &str, kept: bool) {
        self.count += 1;
        if !kept {
            self.not_moved += 1;
        }
        self.first
            .get_or_insert_with(|| (name.escape_debug().to_string(), why.to_owned()));
    }
}

impl Drop for Rejections<'_> {
    fn drop(&mut self) {
        let Some((name, why)) = &self.first else {
            return;
        };
        tracing::warn!(
            mailbox = %self.mailbox.display(),
            count = self.count,
            not_moved = self.not_moved,
            first = %name,
            why = %why,
            "files in the mailbox were not valid envelopes; they are kept in rejected/"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_twenty_digits_and_json() {
        assert_eq!(seq_name(1), "00000000000000000001.json");
        assert_eq!(parse_seq_name(&seq_name(1)), Some(1));
        assert_eq!(parse_seq_name(&seq_name(u64::MAX)), Some(u64::MAX));
        for stray in [
            "0000000000000000001.json",
            "000000000000000000001.json",
            "00000000000000000001.json.tmp",
            "0000000000000000000a.json",
            "+0000000000000000001.json",
            "99999999999999999999.json",
            ".ferry-tmp-abc",
            "00000000000000000001",
        ] {
            assert_eq!(parse_seq_name(stray), None, "{stray}");
        }
    }
}
