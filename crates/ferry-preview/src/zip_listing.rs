//! Preview of zip containers (zip, docx, xlsx, pptx, odt, jar…): the member list.

use std::io::{Read, Seek};

use zip::ZipArchive;

use crate::docx::first_paragraph;
use crate::error::PreviewError;
use crate::limits::{
    ARCHIVE_MEMBERS_SHOWN_MAX, DOCX_XML_READ_MAX_BYTES, PARAGRAPH_SHOWN_MAX_CHARS,
};
use crate::wording::{count, grouped, human_bytes, shown_name, shown_on_one_line};

/// The part of a DOCX that holds the body text.
const DOCX_BODY_MEMBER: &str = "word/document.xml";

/// The preview of a zip container; `label` names the format ("zip archive",
/// "Office Open XML Document"…), `is_docx` asks for the first paragraph too.
pub(crate) fn preview_zip<R: Read + Seek>(
    reader: &mut R,
    label: &str,
    is_docx: bool,
) -> Result<String, PreviewError> {
    reader.rewind()?;
    let mut archive =
        ZipArchive::new(reader).map_err(|error| PreviewError::damaged("zip", error))?;
    let member_count = archive.len();
    // Sizes come from the central directory, so summing them reads no data.
    let declared_total: u64 = (0..member_count)
        .filter_map(|index| archive.by_index_data(index).ok())
        .fold(0, |total, entry| total.saturating_add(entry.size()));
    let mut out = format!(
        "{label} (zip container), {}, {} uncompressed.",
        count(member_count as u64, "member", "members"),
        human_bytes(declared_total)
    );

    if is_docx && let Some(paragraph) = docx_first_paragraph(&mut archive) {
        out.push_str("\nFirst paragraph: ");
        out.push_str(&shown_on_one_line(&paragraph, PARAGRAPH_SHOWN_MAX_CHARS));
    }

    out.push_str("\n\n");
    for index in 0..member_count.min(ARCHIVE_MEMBERS_SHOWN_MAX) {
        let line = match archive.by_index_data(index) {
            Ok(entry) => {
                let name = shown_name(&String::from_utf8_lossy(entry.name_raw()));
                let lock = if entry.encrypted() {
                    " (encrypted)"
                } else {
                    ""
                };
                if entry.is_dir() {
                    format!("{name} (folder)")
                } else {
                    format!("{name}  {}{lock}", human_bytes(entry.size()))
                }
            }
            Err(error) => format!("(unreadable entry: {error})"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    let unlisted = member_count.saturating_sub(ARCHIVE_MEMBERS_SHOWN_MAX);
    if unlisted > 0 {
        out.push_str(&format!("… and {} more\n", grouped(unlisted as u64)));
    }
    Ok(out)
}

/// The first paragraph with text, if the body can be read within bounds.
fn docx_first_paragraph<R: Read + Seek>(archive: &mut ZipArchive<R>) -> Option<String> {
    let member = archive.by_name(DOCX_BODY_MEMBER).ok()?;
    let mut xml = Vec::new();
    // Bounded: a zip bomb would otherwise inflate without end.
    member
        .take(DOCX_XML_READ_MAX_BYTES)
        .read_to_end(&mut xml)
        .ok()?;
    first_paragraph(&String::from_utf8_lossy(&xml))
}
