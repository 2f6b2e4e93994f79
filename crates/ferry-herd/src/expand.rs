//! H-DEF's `@file` expansion: a worker generation's system prompt.
//!
//! An included file's text takes the place of its reference line, wrapped so that the
//! model sees where it came from:
//!
//! ```text
//! <file path="/canonical/path/of/policy.md">
//! …the file's text, as it is…
//! </file>
//! ```
//!
//! `</file>` always starts a line of its own (a newline is written before it), and the
//! replaced line's own line ending follows it. The path is written as a JSON string (quotes, backslashes and control characters
//! escaped), so no file name can end the tag early.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use ferry_codes::Code;
use ferry_config::limits::HERD_PROMPT_MAX_BYTES;

use crate::HerdError;
use crate::definition::Definition;
use crate::reader::{Reader, canonical_path};

/// A worker generation's system prompt, and the canonical files it took in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// The expanded body, then the shared worker guidance.
    pub text: String,
    /// The canonical files whose text was included, in body order.
    pub included: Vec<PathBuf>,
}

/// Expands `definition`'s body once, in order: each line that is, trimmed, exactly
/// `@./rel`, `@../rel` or `@/abs` is replaced by that file's text (resolved from the
/// definition's folder, read through `reader`), every other line kept as it is. A file
/// in `skip` (the caller's `files`, canonical) or already included is omitted; included
/// files are not scanned for references. `guidance` follows the body.
pub fn build_prompt(
    definition: &Definition,
    skip: &[PathBuf],
    guidance: &str,
    reader: &dyn Reader,
) -> Result<Prompt, HerdError> {
    let folder = definition.path.parent().unwrap_or(Path::new("/"));
    let pieces = open_references(definition, folder, skip, reader)?;
    let separator = separator(&definition.body, guidance);
    // Every size is known before any file is read, so a huge one is refused unread.
    let mut planned_rest: u64 = pieces.iter().map(Piece::planned_len).sum::<u64>()
        + (separator.len() + guidance.len()) as u64;
    if planned_rest > HERD_PROMPT_MAX_BYTES as u64 {
        return Err(too_large(&format!("{planned_rest} bytes")));
    }
    let mut text = String::with_capacity(planned_rest as usize);
    let mut included = Vec::new();
    for piece in pieces {
        planned_rest -= piece.planned_len();
        match piece {
            Piece::Text(line) => text.push_str(line),
            Piece::File(file) => {
                let header = header(&file.path);
                let wrapper = header.len() + FOOTER.len() + file.ending.len();
                let room = (HERD_PROMPT_MAX_BYTES as u64)
                    .saturating_sub((text.len() + wrapper) as u64 + planned_rest);
                let content = read_text(&file, room)?;
                text.push_str(&header);
                text.push_str(&content);
                text.push_str(FOOTER);
                text.push_str(file.ending);
                included.push(file.path);
            }
        }
    }
    text.push_str(separator);
    text.push_str(guidance);
    if text.len() > HERD_PROMPT_MAX_BYTES {
        // Only files that grew while this ran get here.
        return Err(too_large(&format!("{} bytes", text.len())));
    }
    Ok(Prompt { text, included })
}

/// The end of an included file's wrapper, on a line of its own.
const FOOTER: &str = "\n</file>";

/// A line of the body as it will be written: kept, or a file taking its place.
enum Piece<'a> {
    Text(&'a str),
    File(Included<'a>),
}

/// A referenced file, opened.
struct Included<'a> {
    /// As written in the body, for messages.
    reference: &'a str,
    path: PathBuf,
    file: File,
    size: u64,
    /// The replaced line's own line ending.
    ending: &'a str,
}

impl Piece<'_> {
    /// Bytes it will take if every file keeps the size it was opened with.
    fn planned_len(&self) -> u64 {
        match self {
            Piece::Text(line) => line.len() as u64,
            Piece::File(file) => {
                let wrapper = header(&file.path).len() + FOOTER.len() + file.ending.len();
                wrapper as u64 + file.size
            }
        }
    }
}

/// The body's lines, each reference opened: the first occurrence of a canonical file
/// wins, and a file the caller attached (`skip`) leaves its reference line out.
fn open_references<'a>(
    definition: &'a Definition,
    folder: &Path,
    skip: &[PathBuf],
    reader: &dyn Reader,
) -> Result<Vec<Piece<'a>>, HerdError> {
    let mut taken: HashSet<PathBuf> = skip.iter().cloned().collect();
    let mut pieces = Vec::new();
    for (number, line) in definition.body.split_inclusive('\n').enumerate() {
        let Some(reference) = reference_of(line) else {
            pieces.push(Piece::Text(line));
            continue;
        };
        let named = |e: HerdError| {
            e.context(format!(
                "the reference {reference:?} on line {} of the agent definition {}",
                number + 1,
                definition.path.display()
            ))
        };
        let file = reader
            .open(&crate::reader::absolute_from(folder, reference))
            .map_err(named)?;
        let path = canonical_path(&file).map_err(named)?;
        if !taken.insert(path.clone()) {
            continue;
        }
        let size = file.metadata().map_err(|e| named(e.into()))?.len();
        let ending = &line[line.trim_end_matches(['\r', '\n']).len()..];
        pieces.push(Piece::File(Included {
            reference,
            path,
            file,
            size,
            ending,
        }));
    }
    Ok(pieces)
}

/// The reference a line is, when its trimmed text is exactly `@./rel`, `@../rel` or
/// `@/abs` with something after the prefix; `@alice` and text around a reference are
/// no reference.
fn reference_of(line: &str) -> Option<&str> {
    let trimmed = line.trim();
    let path = trimmed.strip_prefix('@')?;
    let rest = ["./", "../", "/"]
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix))?;
    (!rest.is_empty()).then_some(path)
}

/// The wrapper's opening line for the file at `path`.
fn header(path: &Path) -> String {
    let quoted = serde_json::to_string(&path.to_string_lossy()).unwrap_or_default();
    format!("<file path={quoted}>\n")
}

/// What goes between the body and the guidance: a blank line, when both have text.
fn separator(body: &str, guidance: &str) -> &'static str {
    match (body.is_empty() || guidance.is_empty(), body.ends_with('\n')) {
        (true, _) => "",
        (false, true) => "\n",
        (false, false) => "\n\n",
    }
}

/// The whole text of `file`, strict UTF-8 without NUL, at most `room` bytes.
fn read_text(file: &Included<'_>, room: u64) -> Result<String, HerdError> {
    let name = || {
        format!(
            "the file {} (from {:?})",
            file.path.display(),
            file.reference
        )
    };
    let mut bytes = Vec::with_capacity(file.size.min(room) as usize);
    (&file.file)
        .take(room + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| HerdError::from(e).context(format!("reading {}", name())))?;
    if bytes.len() as u64 > room {
        return Err(too_large(&format!(
            "larger still: {} grew while it was read",
            name()
        )));
    }
    match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => Ok(text),
        _ => Err(HerdError::new(
            Code::NotText,
            format!(
                "{} is not text (strict UTF-8 without NUL), so it cannot be part of a \
                 system prompt",
                name()
            ),
        )),
    }
}

/// The prompt would be `how` big (a length, or why it is over).
fn too_large(how: &str) -> HerdError {
    HerdError::new(
        Code::TooLarge,
        format!(
            "the system prompt would be {how} with its @file references and the worker \
             guidance; it may be at most {HERD_PROMPT_MAX_BYTES} bytes"
        ),
    )
}
