//! Bounded capture of one output stream, and the full-output file.
//!
//! Memory holds at most the visible cap of each stream. Once a stream outgrows it, the
//! stream is streamed into an unlinked spool file (capped); only when the command is
//! done is the named `run-<random>.log` assembled from both streams.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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

    /// Appends this stream's section to the full-output file; returns a note when the
    /// section lacks part of the stream.
    fn write_section(&mut self, out: &mut File) -> io::Result<Option<String>> {
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
        if saved == self.total {
            writeln!(out, "==== {}: {} bytes ====", self.name, self.total)?;
        } else {
            writeln!(
                out,
                "==== {}: {} bytes, the first {saved} saved ====",
                self.name, self.total
            )?;
        }
        match &mut self.spool {
            Spool::Unneeded => out.write_all(&self.visible)?,
            Spool::Saving { file, saved } => {
                file.rewind()?;
                // File to file: std uses copy_file_range, so the bytes stay in the kernel.
                let copied = io::copy(&mut file.take(*saved), out)?;
                if copied != *saved {
                    return Err(io::Error::other("the spool file shrank while copying"));
                }
            }
            Spool::Failed(_) => {}
        }
        // Sections are length-prefixed by their header; the newline only keeps a
        // `cat` of the file readable.
        out.write_all(b"\n")?;
        Ok(note)
    }
}

/// Writes the full-output file when either stream overflowed. Returns its path (if it
/// was written) and what it lacks.
pub(crate) fn write_full_output(
    streams: [&mut Capture; 2],
    dir: &Path,
) -> (Option<PathBuf>, Option<String>) {
    if !streams.iter().any(|s| s.overflowed()) {
        return (None, None);
    }
    let path = dir.join(format!("run-{}.log", random_hex()));
    let written = create_private(&path).and_then(|mut out| {
        let mut notes = Vec::new();
        for stream in streams {
            notes.extend(stream.write_section(&mut out)?);
        }
        Ok(notes)
    });
    match written {
        Ok(notes) if notes.is_empty() => (Some(path), None),
        Ok(notes) => (Some(path), Some(notes.join("; "))),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            (
                None,
                Some(format!("the full output could not be saved: {e}")),
            )
        }
    }
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
    let path = dir.join(format!(".spool-{}", random_hex()));
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

/// 16 lowercase hex digits from the OS random source.
pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
