//! Preview of tar and gzip files: the archive listing, from headers only.
//! Nothing is ever unpacked.

use std::io::{self, BufReader, Read, Seek};

use flate2::bufread::MultiGzDecoder;
use tar::{Archive, EntryType};

use crate::error::PreviewError;
use crate::limits::{ARCHIVE_MEMBERS_SHOWN_MAX, TAR_SCAN_MAX_BYTES};
use crate::wording::{count, grouped, human_bytes, shown_name};

/// Size of one tar header block.
const TAR_BLOCK_BYTES: usize = 512;
/// Where a ustar (POSIX or GNU) header keeps its magic.
const USTAR_MAGIC_OFFSET: usize = 257;
const USTAR_MAGIC: &[u8] = b"ustar";

/// The preview of an uncompressed tar file.
pub(crate) fn preview_tar<R: Read + Seek>(reader: &mut R) -> Result<String, PreviewError> {
    reader.rewind()?;
    list_tar(BufReader::new(reader), "tar archive", "tar")
}

/// The preview of a gzip file: a listing when it holds a tar, else a note.
pub(crate) fn preview_gzip<R: Read + Seek>(reader: &mut R) -> Result<String, PreviewError> {
    reader.rewind()?;
    let mut first_block = Vec::with_capacity(TAR_BLOCK_BYTES);
    let mut decoder = MultiGzDecoder::new(BufReader::new(&mut *reader));
    decoder
        .by_ref()
        .take(TAR_BLOCK_BYTES as u64)
        .read_to_end(&mut first_block)
        .map_err(gzip_error)?;
    let holds_tar = first_block.get(USTAR_MAGIC_OFFSET..USTAR_MAGIC_OFFSET + USTAR_MAGIC.len())
        == Some(USTAR_MAGIC);
    if !holds_tar {
        let original_name = decoder
            .header()
            .and_then(|header| header.filename())
            .map(|name| {
                format!(
                    " (original name \"{}\")",
                    shown_name(&String::from_utf8_lossy(name))
                )
            })
            .unwrap_or_default();
        return Ok(format!(
            "gzip-compressed data{original_name}. It does not hold a tar archive, so no listing is shown."
        ));
    }
    drop(decoder);
    reader.rewind()?;
    let decoder = MultiGzDecoder::new(BufReader::new(reader));
    list_tar(decoder, "tar archive, gzip-compressed", "gzip")
}

fn gzip_error(error: io::Error) -> PreviewError {
    match error.kind() {
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => {
            PreviewError::damaged("gzip", error)
        }
        _ => PreviewError::Io(error),
    }
}

/// Lists entries from `stream`, reading at most `TAR_SCAN_MAX_BYTES` of it.
fn list_tar<R: Read>(
    stream: R,
    label: &str,
    damaged_format: &'static str,
) -> Result<String, PreviewError> {
    let mut archive = Archive::new(stream.take(TAR_SCAN_MAX_BYTES));
    let mut lines = Vec::new();
    let mut entry_count = 0u64;
    let mut total_size = 0u64;
    let mut stopped_by = None;
    let entries = archive
        .entries()
        .map_err(|error| PreviewError::damaged(damaged_format, error))?;
    for entry in entries {
        match entry {
            Ok(entry) => {
                entry_count += 1;
                total_size = total_size.saturating_add(entry.size());
                if lines.len() < ARCHIVE_MEMBERS_SHOWN_MAX {
                    lines.push(describe_entry(&entry));
                }
            }
            Err(error) => {
                stopped_by = Some(error);
                break;
            }
        }
    }
    let scan_exhausted = archive.into_inner().limit() == 0;
    let mut out = match (stopped_by, scan_exhausted) {
        (None, false) => format!(
            "{label}, {}, {} in files.",
            count(entry_count, "entry", "entries"),
            human_bytes(total_size)
        ),
        (_, true) => format!(
            "{label}, at least {} (listing stopped after reading {}).",
            count(entry_count, "entry", "entries"),
            human_bytes(TAR_SCAN_MAX_BYTES)
        ),
        (Some(_), false) if entry_count == 0 => {
            return Err(PreviewError::damaged(damaged_format, "no readable entry"));
        }
        (Some(error), false) => format!(
            "{label}, damaged or truncated after {}: {error}.",
            count(entry_count, "entry", "entries"),
        ),
    };
    out.push_str("\n\n");
    for line in &lines {
        out.push_str(line);
        out.push('\n');
    }
    let unlisted = entry_count.saturating_sub(lines.len() as u64);
    if unlisted > 0 {
        out.push_str(&format!("… and {} more\n", grouped(unlisted)));
    }
    Ok(out)
}

fn describe_entry<R: Read>(entry: &tar::Entry<'_, R>) -> String {
    let path = shown_name(&String::from_utf8_lossy(&entry.path_bytes()));
    let link = || {
        entry
            .link_name_bytes()
            .map(|target| shown_name(&String::from_utf8_lossy(&target)))
            .unwrap_or_default()
    };
    match entry.header().entry_type() {
        EntryType::Directory => format!("{path} (folder)"),
        EntryType::Symlink => format!("{path} -> {}", link()),
        EntryType::Link => format!("{path} (hard link to {})", link()),
        EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
            format!("{path}  {}", human_bytes(entry.size()))
        }
        _ => format!("{path} (special file)"),
    }
}
