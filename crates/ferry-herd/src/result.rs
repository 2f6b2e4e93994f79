//! H-RESULT: a completion's whole output kept at a private path, and text bounded.

use std::io::Read;
use std::path::{Path, PathBuf};

use ferry_config::limits::{HERD_RESULT_MAX_BYTES, HERD_RESULT_PREVIEW_BYTES};
use ferry_fs::{AtomicWriter, Dir, FsError};

use crate::{HerdError, check_label};

/// Bytes read from a completion's source at a time.
const CHUNK_BYTES: usize = 64 * 1024;

/// A completion's output, persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Persisted {
    /// Its absolute path (`resultPath`), a 0600 file.
    pub path: PathBuf,
    /// Bytes in it.
    pub size: u64,
    /// Its first [`HERD_RESULT_PREVIEW_BYTES`](ferry_config::limits::HERD_RESULT_PREVIEW_BYTES)
    /// as text (invalid UTF-8 replaced, a character cut by the bound dropped).
    pub preview: String,
    /// Whether the preview is shorter than the output.
    pub cut: bool,
}

/// Persists all of `source` as a new 0600 file `<label>-<generation>-<random>.md` in
/// `results` (at `results_path`), atomically; over
/// [`HERD_RESULT_MAX_BYTES`](ferry_config::limits::HERD_RESULT_MAX_BYTES) it is
/// `too_large` and leaves nothing.
pub fn persist_result(
    results: &Dir,
    results_path: &Path,
    label: &str,
    generation: u64,
    source: &mut dyn Read,
) -> Result<Persisted, HerdError> {
    persist_within(
        results,
        results_path,
        label,
        generation,
        source,
        HERD_RESULT_MAX_BYTES,
    )
}

/// [`persist_result`] with a limit of `max_bytes`.
fn persist_within(
    results: &Dir,
    results_path: &Path,
    label: &str,
    generation: u64,
    source: &mut dyn Read,
    max_bytes: u64,
) -> Result<Persisted, HerdError> {
    check_label(label)?;
    let name = format!(
        "{label}-{generation}-{}.md",
        ferry_fs::random_base32::<10>()
    );
    let mut writer = AtomicWriter::create(results, &name)?.limit(max_bytes);
    let mut head = Vec::with_capacity(HERD_RESULT_PREVIEW_BYTES);
    let mut chunk = vec![0u8; CHUNK_BYTES];
    loop {
        let n = match source.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(HerdError::from(e).context("reading the completion's output")),
        };
        let bytes = &chunk[..n];
        let room = HERD_RESULT_PREVIEW_BYTES - head.len();
        head.extend_from_slice(&bytes[..n.min(room)]);
        // A run of zeros becomes a hole: the file reads the same, and a flood of them
        // costs no disk.
        let written = if bytes.iter().all(|&b| b == 0) {
            writer.write_hole(n as u64)
        } else {
            writer.write(bytes)
        };
        written.map_err(|e| too_large_or(e, max_bytes))?;
    }
    let size = writer.size();
    writer
        .commit_new_or_replace(false)
        .map_err(|e| HerdError::from(e).context("saving the completion's output"))?;
    results.sync()?;
    let cut = size > head.len() as u64;
    Ok(Persisted {
        path: results_path.join(name),
        size,
        preview: preview_text(&head, cut),
        cut,
    })
}

/// The failure of a write into a result, said in the terms of a result.
fn too_large_or(e: FsError, max_bytes: u64) -> HerdError {
    match e {
        FsError::TooLarge(_) => HerdError::new(
            ferry_codes::Code::TooLarge,
            format!("the completion's output is over {max_bytes} bytes; nothing was saved"),
        ),
        e => HerdError::from(e).context("saving the completion's output"),
    }
}

/// `head` as text: invalid UTF-8 replaced, and, when the output goes on past it, the
/// character the bound cut in half dropped.
fn preview_text(head: &[u8], cut: bool) -> String {
    let mut text = String::with_capacity(head.len());
    let mut chunks = head.utf8_chunks().peekable();
    while let Some(chunk) = chunks.next() {
        text.push_str(chunk.valid());
        let invalid = chunk.invalid();
        if invalid.is_empty() {
            continue;
        }
        let last = chunks.peek().is_none();
        // An incomplete sequence at the very end is a character the bound cut.
        let truncated = std::str::from_utf8(invalid).is_err_and(|e| e.error_len().is_none());
        if !(last && cut && truncated) {
            text.push(char::REPLACEMENT_CHARACTER);
        }
    }
    text
}

/// Persists an answer too long to show (`output-<random>.json`, 0600) and returns its
/// path (`fullOutputPath`).
pub fn persist_output(
    results: &Dir,
    results_path: &Path,
    text: &str,
) -> Result<PathBuf, HerdError> {
    let name = format!("output-{}.json", ferry_fs::random_base32::<10>());
    let saving = |e: FsError| HerdError::from(e).context("saving the whole answer");
    let mut writer = AtomicWriter::create(results, &name).map_err(saving)?;
    writer.write(text.as_bytes()).map_err(saving)?;
    writer.commit_new_or_replace(false).map_err(saving)?;
    results.sync().map_err(saving)?;
    Ok(results_path.join(name))
}

/// `text` cut to at most `max` bytes on a character boundary, and whether it was cut.
pub fn bounded(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

#[cfg(test)]
#[path = "result_tests.rs"]
mod tests;
