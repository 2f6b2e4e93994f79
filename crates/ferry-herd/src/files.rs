//! H-FILES: the files a message names, resolved, read as the person, each once, and
//! embedded whole or referenced by canonical path.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use ferry_codes::Code;
use ferry_config::limits::{HERD_FILES_MAX, MAILBOX_MAX_BYTES};

use crate::HerdError;
use crate::envelope::{Envelope, FileItem};
use crate::reader::{Reader, absolute_from, canonical_path};

/// One message file, opened and canonical.
#[derive(Debug)]
pub struct Opened {
    /// The canonical absolute path it was opened through.
    pub path: PathBuf,
    /// The open file, read through this handle only.
    pub file: File,
    /// Its size when opened.
    pub size: u64,
}

/// Resolves `paths` (relative ones from `cwd`), opens each through `reader` and
/// canonicalizes it; the first occurrence of a canonical file wins. One missing,
/// broken, unreadable or non-regular path rejects them all, naming the path as given.
pub fn open_all(
    paths: &[String],
    cwd: &Path,
    reader: &dyn Reader,
) -> Result<Vec<Opened>, HerdError> {
    if paths.len() > HERD_FILES_MAX {
        return Err(HerdError::invalid(format!(
            "{} files are named; a message names at most {HERD_FILES_MAX}",
            paths.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut opened = Vec::new();
    for given in paths {
        let one = open_one(given, cwd, reader).map_err(|e| e.context(format!("{given:?}")))?;
        // A later occurrence of a file already named is dropped, closing its handle.
        if seen.insert(one.path.clone()) {
            opened.push(one);
        }
    }
    Ok(opened)
}

fn open_one(given: &str, cwd: &Path, reader: &dyn Reader) -> Result<Opened, HerdError> {
    if given.is_empty() {
        return Err(HerdError::new(Code::BadPath, "the path is empty"));
    }
    if given.contains('\0') {
        return Err(HerdError::new(Code::BadPath, "the path holds a NUL byte"));
    }
    let file = reader.open(&absolute_from(cwd, given))?;
    let path = canonical_path(&file)?;
    // The envelope spells paths as JSON strings, so a link to a name that is not UTF-8
    // cannot be named in it.
    if path.to_str().is_none() {
        return Err(HerdError::new(
            Code::BadPath,
            "the file's canonical path is not valid UTF-8",
        ));
    }
    let size = file.metadata()?.len();
    Ok(Opened { path, file, size })
}

/// Fills `envelope.files` from `opened`, in order: a file is embedded when it is strict
/// UTF-8 without NUL and the serialized envelope with it still fits the mailbox;
/// otherwise it is referenced by path and observed size. The envelope is sized as it is
/// (its text, addresses and `seq` as they will be sent). Never reads more of a file than
/// could still fit.
pub fn attach(envelope: &mut Envelope, opened: Vec<Opened>) -> Result<(), HerdError> {
    let before = envelope.files.len();
    let mut sizer = Sizer::new(envelope);
    // Every file still to come is counted as a reference, so that embedding an earlier
    // one never takes the room a later one needs to be named at all.
    let references: Vec<FileItem> = opened.iter().map(|o| reference(&o.path, o.size)).collect();
    let lengths: Vec<usize> = references.iter().map(json_len).collect();
    let mut reserved: usize = lengths.iter().sum();
    if sizer.len_with(reserved, lengths.len()) > MAILBOX_MAX_BYTES {
        return refuse(envelope, before, references);
    }
    for (index, one) in opened.into_iter().enumerate() {
        reserved -= lengths[index];
        let after = lengths.len() - index - 1;
        let item = match embed_or_refer(one, sizer.room(reserved, after)) {
            Ok(item) => item,
            Err(e) => {
                // Nothing half done is left behind: the caller's envelope is as it was.
                envelope.files.truncate(before);
                return Err(e);
            }
        };
        sizer.push(&item);
        envelope.files.push(item);
    }
    if sizer.len > MAILBOX_MAX_BYTES {
        // Only a file that changed size while this ran gets here: its reference came out
        // longer than the one reserved for it.
        return refuse(envelope, before, Vec::new());
    }
    Ok(())
}

/// `check_fits`'s refusal of the envelope with `items` added, the envelope then put back
/// as it was.
fn refuse(envelope: &mut Envelope, before: usize, items: Vec<FileItem>) -> Result<(), HerdError> {
    envelope.files.extend(items);
    let refused = envelope.check_fits();
    envelope.files.truncate(before);
    refused.and(Err(HerdError::invalid(
        "the message does not fit a mailbox with its files",
    )))
}

/// The item for `one`, whose JSON may take at most `slack` bytes.
fn embed_or_refer(one: Opened, slack: usize) -> Result<FileItem, HerdError> {
    let path = one.path.to_string_lossy().into_owned();
    // The item with empty content: what embedding costs before the text itself, which
    // serializes to at least its own length.
    let empty = FileItem {
        path: path.clone(),
        size: one.size,
        embedded: true,
        content: Some(String::new()),
    };
    let overhead = json_len(&empty);
    let Some(room) = slack.checked_sub(overhead) else {
        return Ok(reference_str(path, one.size));
    };
    if one.size > room as u64 {
        return Ok(reference_str(path, one.size));
    }
    // One byte more than could fit tells a file that grew since it was opened.
    let mut bytes = Vec::with_capacity(one.size as usize);
    (&one.file)
        .take(room as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| HerdError::from(e).context(format!("reading {path}")))?;
    if bytes.len() > room {
        let now = one.file.metadata().map_or(0, |m| m.len());
        return Ok(reference_str(path, now.max(bytes.len() as u64)));
    }
    let size = bytes.len() as u64;
    let text = match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => text,
        _ => return Ok(reference_str(path, size)),
    };
    let item = FileItem {
        path,
        size,
        embedded: true,
        content: Some(text),
    };
    if json_len(&item) <= slack {
        Ok(item)
    } else {
        Ok(reference_str(item.path, size))
    }
}

fn reference(path: &Path, size: u64) -> FileItem {
    reference_str(path.to_string_lossy().into_owned(), size)
}

fn reference_str(path: String, size: u64) -> FileItem {
    FileItem {
        path,
        size,
        embedded: false,
        content: None,
    }
}

/// The envelope's serialized length kept as files are added, each item sized on its own:
/// an item in `files` adds its own JSON and, after the first, one comma.
struct Sizer {
    /// Bytes of the envelope as it stands.
    len: usize,
    /// Items already in its `files`.
    items: usize,
}

impl Sizer {
    fn new(envelope: &Envelope) -> Sizer {
        Sizer {
            len: envelope.serialized_len(),
            items: envelope.files.len(),
        }
    }

    /// The comma the next item needs.
    fn separator(&self) -> usize {
        usize::from(self.items > 0)
    }

    /// The length with `count` more items of `bytes` bytes in all.
    fn len_with(&self, bytes: usize, count: usize) -> usize {
        match count {
            0 => self.len,
            _ => self.len + self.separator() + bytes + (count - 1),
        }
    }

    /// Bytes the next item's JSON may take, with `count` items of `bytes` bytes in all
    /// still to follow it.
    fn room(&self, bytes: usize, count: usize) -> usize {
        MAILBOX_MAX_BYTES.saturating_sub(self.len + self.separator() + bytes + count)
    }

    fn push(&mut self, item: &FileItem) {
        self.len += self.separator() + json_len(item);
        self.items += 1;
    }
}

/// Bytes `value` takes serialized exactly as the envelope serializes it, counted as
/// serde_json writes them, with nothing allocated for the text.
fn json_len(value: &FileItem) -> usize {
    let mut counter = Counter(0);
    // Writing to a counter cannot fail, nor can serializing plain strings and numbers.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
