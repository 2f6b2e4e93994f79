//! Bounded capture of one output stream, and the full-output file.
//!
//! Memory holds at most the visible cap of each stream. Once a stream outgrows it, the
//! stream is streamed into an unlinked spool file (capped); only when the command is
//! done is the named `run-<random>.log` assembled from both streams.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ferry_fs::{Dir, EntryKind, Follow, FsError};

/// Saved output files are `run-<random>.log`.
const SAVED_PREFIX: &str = "run-";
const SAVED_SUFFIX: &str = ".log";
/// Each run's private `TMPDIR` is `tmp-<random>`.
pub(crate) const RUN_TMP_PREFIX: &str = "tmp-";

/// One stream's bytes: the visible head in memory, the rest on disk.
pub(crate) struct Capture {
    name: &'static str,
    visible: Vec<u8>,
    visible_max: usize,
    total: u64,
    spool: Spool,
}

enum Spool {
    /// The stream still fits in `visible`.
    Unneeded,
    Saving {
        file: File,
        saved: u64,
    },
    Failed(io::Error),
}

/// Where spools and the full-output file go, and how much of a stream they keep.
pub(crate) struct SaveTo<'a> {
    pub dir: &'a Path,
    pub max_bytes: u64,
}

impl Capture {
    pub(crate) fn new(name: &'static str, visible_max: usize) -> Capture {
        Capture {
            name,
            visible: Vec::new(),
            visible_max,
            total: 0,
            spool: Spool::Unneeded,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8], to: &SaveTo) {
        let was_over = self.overflowed();
        self.total += data.len() as u64;
        let shown = (self.visible_max - self.visible.len()).min(data.len());
        self.visible.extend_from_slice(&data[..shown]);
        if !self.overflowed() {
            return;
        }
        if !was_over {
            // Everything before this chunk is in `visible`: the spool starts with it.
            self.spool = match open_spool(to.dir) {
                Ok(file) => Spool::Saving { file, saved: 0 },
                Err(e) => Spool::Failed(e),
            };
            save(&mut self.spool, &self.visible, to.max_bytes);
        }
        save(&mut self.spool, &data[shown..], to.max_bytes);
    }

    pub(crate) fn overflowed(&self) -> bool {
        self.total > self.visible_max as u64
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The visible text; a character the cap cut in two is dropped, not mangled.
    pub(crate) fn text(&self) -> String {
        let bytes = if self.overflowed() {
            without_partial_char(&self.visible)
        } else {
            &self.visible
        };
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// This stream's section header, the bytes it saves, and a note when that is not
    /// all of the stream.
    fn plan(&self) -> (String, u64, Option<String>) {
        let (saved, note) = match &self.spool {
            Spool::Unneeded => (self.total, None),
            Spool::Saving { saved, .. } if *saved == self.total => (*saved, None),
            Spool::Saving { saved, .. } => (
                *saved,
                Some(format!(
                    "{}: only the first {saved} of {} bytes were saved (the cap per stream)",
                    self.name, self.total
                )),
            ),
            Spool::Failed(e) => (0, Some(format!("{} could not be saved: {e}", self.name))),
        };
        let header = if saved == self.total {
            format!("==== {}: {} bytes ====\n", self.name, self.total)
        } else {
            format!(
                "==== {}: {} bytes, the first {saved} saved ====\n",
                self.name, self.total
            )
        };
        (header, saved, note)
    }

    /// Bytes this stream's section takes in the full-output file.
    fn section_bytes(&self) -> u64 {
        let (header, saved, _) = self.plan();
        // The newline after the section only keeps a `cat` of the file readable.
        header.len() as u64 + saved + 1
    }

    /// Appends this stream's section to the full-output file; returns a note when the
    /// section lacks part of the stream.
    fn write_section(&mut self, out: &mut File) -> io::Result<Option<String>> {
        let (header, saved, note) = self.plan();
        out.write_all(header.as_bytes())?;
        match &mut self.spool {
            Spool::Unneeded => out.write_all(&self.visible)?,
            Spool::Saving { file, .. } => {
                file.rewind()?;
                // File to file: std uses copy_file_range, so the bytes stay in the kernel.
                let copied = io::copy(&mut file.take(saved), out)?;
                if copied != saved {
                    return Err(io::Error::other("the spool file shrank while copying"));
                }
            }
            Spool::Failed(_) => {}
        }
        out.write_all(b"\n")?;
        Ok(note)
    }
}

/// Writes the full-output file when either stream overflowed, removing the oldest saved
/// files so that all of them stay within `keep_max_bytes` (a file larger than that is not
/// saved). Returns its path (if it was written) and what it lacks or what made room.
///
/// `dir` is the folder opened, `reach` the path through which it is written (see run.rs's
/// `OutputDir`).
pub(crate) fn write_full_output(
    streams: [&mut Capture; 2],
    dir: &Dir,
    reach: &Path,
    keep_max_bytes: u64,
) -> (Option<PathBuf>, Option<String>) {
    if !streams.iter().any(|s| s.overflowed()) {
        return (None, None);
    }
    let size: u64 = streams.iter().map(|s| s.section_bytes()).sum();
    if size > keep_max_bytes {
        return (
            None,
            Some(format!(
                "the full output ({size} bytes) was not saved: it is larger than the {} bytes \
                 this person may keep as saved output ([exec] output_max_bytes)",
                keep_max_bytes
            )),
        );
    }
    let mut notes = Vec::new();
    match make_room(dir, size, keep_max_bytes) {
        Ok((0, _)) => {}
        Ok((count, bytes)) => notes.push(format!(
            "to stay within the {} bytes of saved output this person may keep, the {count} \
             oldest saved output file(s) ({bytes} bytes) were removed",
            keep_max_bytes
        )),
        Err(e) => {
            return (
                None,
                Some(format!(
                    "the full output was not saved: older saved output could not be counted: {e}"
                )),
            );
        }
    }
    let path = reach.join(format!(
        "{SAVED_PREFIX}{}{SAVED_SUFFIX}",
        ferry_fs::random_hex::<8>()
    ));
    let written = create_private(&path).and_then(|mut out| {
        for stream in streams {
            notes.extend(stream.write_section(&mut out)?);
        }
        Ok(())
    });
    match written {
        Ok(()) if notes.is_empty() => (Some(path), None),
        Ok(()) => (Some(path), Some(notes.join("; "))),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            notes.push(format!("the full output could not be saved: {e}"));
            (None, Some(notes.join("; ")))
        }
    }
}

/// The saved output folder, opened without following a link at any component of its
/// path, so that removing old files can never reach into a folder a link points to;
/// `None` when it does not exist yet.
fn open_output_dir(dir: &Path) -> io::Result<Option<Dir>> {
    let rel = dir
        .strip_prefix("/")
        .map_err(|_| io::Error::other("the saved output folder must be an absolute path"))?;
    let rel = rel
        .to_str()
        .ok_or_else(|| io::Error::other("the saved output folder is not UTF-8"))?;
    match Dir::open_ambient(Path::new("/")).and_then(|root| root.open_dir(rel, Follow::Never)) {
        Ok(dir) => Ok(Some(dir)),
        Err(FsError::NotFound) => Ok(None),
        Err(e) => Err(io::Error::other(format!(
            "the saved output folder {} cannot be used: {e}",
            dir.display()
        ))),
    }
}

/// The saved output files in `dir` (regular files only), with their times, names and
/// apparent sizes, oldest first.
fn saved_files(dir: &Dir) -> io::Result<Vec<(SystemTime, String, u64)>> {
    let mut files: Vec<_> = dir
        .entries()
        .map_err(io::Error::other)?
        .into_iter()
        .filter(|e| {
            e.meta.kind == EntryKind::File
                && e.name.starts_with(SAVED_PREFIX)
                && e.name.ends_with(SAVED_SUFFIX)
        })
        .map(|e| (e.meta.mtime, e.name, e.meta.size))
        .collect();
    files.sort();
    Ok(files)
}

/// Removes one entry of `dir` (a folder with all it holds); one already gone is fine.
fn remove(dir: &Dir, name: &str) -> io::Result<()> {
    match dir.remove(name) {
        Ok(()) | Err(FsError::NotFound) => Ok(()),
        Err(e) => Err(io::Error::other(e)),
    }
}

/// Removes the oldest saved files until `size` more fits in `max_bytes`; returns how
/// many files and bytes went.
fn make_room(dir: &Dir, size: u64, max_bytes: u64) -> io::Result<(usize, u64)> {
    let files = saved_files(dir)?;
    let mut kept: u64 = files.iter().map(|(_, _, len)| len).sum();
    let (mut count, mut bytes) = (0, 0);
    for (_, name, len) in files {
        if kept + size <= max_bytes {
            break;
        }
        remove(dir, &name)?;
        kept -= len;
        count += 1;
        bytes += len;
    }
    Ok((count, bytes))
}

/// Removes saved output older than `ttl`, and run folders older than that (left by a run
/// that died). Returns how many were removed.
pub fn sweep_saved_output(dir: &Path, ttl: Duration) -> io::Result<usize> {
    match open_output_dir(dir)? {
        Some(dir) => sweep_dir(&dir, ttl),
        None => Ok(0),
    }
}

/// [`sweep_saved_output`] on the folder already open.
pub(crate) fn sweep_dir(dir: &Dir, ttl: Duration) -> io::Result<usize> {
    let Some(cutoff) = SystemTime::now().checked_sub(ttl) else {
        return Ok(0);
    };
    let mut removed = 0;
    for (modified, name, _) in saved_files(dir)? {
        if modified < cutoff {
            remove(dir, &name)?;
            removed += 1;
        }
    }
    for entry in dir.entries().map_err(io::Error::other)? {
        // A live run is younger than the longest timeout, far younger than any TTL.
        if entry.meta.kind == EntryKind::Dir
            && entry.name.starts_with(RUN_TMP_PREFIX)
            && entry.meta.mtime < cutoff
        {
            remove(dir, &entry.name)?;
            removed += 1;
        }
    }
    Ok(removed)
}

fn save(spool: &mut Spool, data: &[u8], max_bytes: u64) {
    let Spool::Saving { file, saved } = spool else {
        return;
    };
    let room = max_bytes.saturating_sub(*saved);
    let take = (data.len() as u64).min(room) as usize;
    if take == 0 {
        return;
    }
    match file.write_all(&data[..take]) {
        Ok(()) => *saved += take as u64,
        // A full disk must not fail the command, which has run already: stop saving.
        Err(e) => *spool = Spool::Failed(e),
    }
}

/// A private, already-unlinked file: nothing is left behind if the run dies midway.
fn open_spool(dir: &Path) -> io::Result<File> {
    let path = dir.join(format!(".spool-{}", ferry_fs::random_hex::<8>()));
    let file = create_private(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// `bytes` without a trailing, incomplete UTF-8 sequence.
fn without_partial_char(bytes: &[u8]) -> &[u8] {
    let n = bytes.len();
    for back in 1..=n.min(4) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: the character starts further back
        }
        let len = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        return if back < len {
            &bytes[..n - back]
        } else {
            bytes
        };
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_character_is_dropped_whole() {
        let euro = "€".as_bytes(); // 3 bytes
        assert_eq!(without_partial_char(b"ab"), b"ab");
        assert_eq!(without_partial_char(&[b'a', euro[0]]), b"a");
        assert_eq!(without_partial_char(&[b'a', euro[0], euro[1]]), b"a");
        assert_eq!(without_partial_char("a€".as_bytes()), "a€".as_bytes());
        assert_eq!(without_partial_char(b""), b"");
        // Invalid bytes are not "partial": lossy decoding shows them.
        assert_eq!(without_partial_char(&[0x80, 0x80]), &[0x80, 0x80]);
    }

    #[test]
    fn visible_text_is_capped_and_lossy() {
        let dir = tempfile::tempdir().unwrap();
        let to = SaveTo {
            dir: dir.path(),
            max_bytes: 100,
        };
        let mut c = Capture::new("stdout", 5);
        c.push("aaaa€".as_bytes(), &to);
        assert_eq!(c.text(), "aaaa");
        assert!(c.overflowed());

        let mut c = Capture::new("stdout", 5);
        c.push(&[b'a', 0xFF, b'b'], &to);
        assert_eq!(c.text(), "a\u{FFFD}b");
        assert!(!c.overflowed());
    }
}
