//! Preview of a PDF: page count and the text of the first page.

use std::io::{Read, Seek};
use std::thread;

use lopdf::{Document, LoadOptions};

use crate::error::PreviewError;
use crate::limits::{
    PDF_INPUT_MAX_BYTES, PDF_PARSER_STACK_BYTES, PDF_STREAM_DECOMPRESSED_MAX_BYTES,
};
use crate::wording::count;

/// What the PDF parser found.
#[derive(Debug)]
pub(crate) enum PdfSummary {
    Encrypted,
    Parsed {
        pages: u64,
        /// The first page's text, or why it could not be extracted.
        first_page_text: Result<String, String>,
    },
}

/// The preview of a PDF file.
pub(crate) fn preview_pdf<R: Read + Seek>(
    reader: &mut R,
    size: u64,
) -> Result<String, PreviewError> {
    Ok(match summarize(reader, size)? {
        PdfSummary::Encrypted => {
            "PDF document, encrypted: it needs a password, so its pages cannot be read.".to_owned()
        }
        PdfSummary::Parsed {
            pages,
            first_page_text,
        } => {
            let mut out = format!("PDF document, {}.", count(pages, "page", "pages"));
            match first_page_text {
                _ if pages == 0 => out.push_str("\nNo page could be found in it."),
                Ok(text) if text.trim().is_empty() => out.push_str(
                    "\nThe first page has no extractable text (it may be a scanned image).",
                ),
                Ok(text) => {
                    out.push_str("\nText of the first page:\n\n");
                    out.push_str(text.trim());
                }
                Err(reason) => out.push_str(&format!(
                    "\nThe text of the first page could not be extracted ({reason})."
                )),
            }
            out
        }
    })
}

/// The page count and first page's text of the PDF in `reader`, `size` bytes long.
pub(crate) fn summarize<R: Read + Seek>(
    reader: &mut R,
    size: u64,
) -> Result<PdfSummary, PreviewError> {
    parse_isolated(read_pdf(reader, size)?)
}

/// The whole PDF, which every PDF parser here needs in memory, within
/// `PDF_INPUT_MAX_BYTES`.
pub(crate) fn read_pdf<R: Read + Seek>(reader: &mut R, size: u64) -> Result<Vec<u8>, PreviewError> {
    if size > PDF_INPUT_MAX_BYTES {
        return Err(PreviewError::TooLarge {
            purpose: "opening a PDF",
            size,
            limit: PDF_INPUT_MAX_BYTES,
        });
    }
    reader.rewind()?;
    let mut bytes = Vec::new();
    reader.take(PDF_INPUT_MAX_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Parses on a thread of its own: a large stack keeps lopdf's recursive
/// parser away from the caller's stack limit, and a panic inside the library
/// on a hostile file ends that thread, not the caller.
fn parse_isolated(bytes: Vec<u8>) -> Result<PdfSummary, PreviewError> {
    thread::scope(|scope| {
        let parser = thread::Builder::new()
            .name("pdf-preview".to_owned())
            .stack_size(PDF_PARSER_STACK_BYTES)
            .spawn_scoped(scope, || parse(&bytes))?;
        parser
            .join()
            .unwrap_or_else(|_| Err(PreviewError::damaged("PDF", "the PDF parser failed on it")))
    })
}

fn parse(bytes: &[u8]) -> Result<PdfSummary, PreviewError> {
    let options = LoadOptions {
        max_decompressed_size: Some(PDF_STREAM_DECOMPRESSED_MAX_BYTES),
        ..LoadOptions::default()
    };
    let document = match Document::load_mem_with_options(bytes, options) {
        Ok(document) => document,
        Err(
            lopdf::Error::Decryption(_)
            | lopdf::Error::InvalidPassword
            | lopdf::Error::UnsupportedSecurityHandler(_),
        ) => {
            return Ok(PdfSummary::Encrypted);
        }
        Err(error) => return Err(PreviewError::damaged("PDF", error)),
    };
    if document.is_encrypted() {
        return Ok(PdfSummary::Encrypted);
    }
    let pages = document.get_pages();
    let first_page_text = match pages.keys().next() {
        None => Ok(String::new()),
        Some(&first) => document
            .extract_text_with_limit(&[first], PDF_STREAM_DECOMPRESSED_MAX_BYTES)
            .map_err(|error| error.to_string()),
    };
    Ok(PdfSummary::Parsed {
        pages: pages.len() as u64,
        first_page_text,
    })
}
