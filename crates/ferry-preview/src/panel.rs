//! What the Files panel shows of a file a person clicked: the same detection and the
//! same bounded readers as `file_preview`, but as data a page lays out (text, table
//! rows, archive members, an image) rather than sentences for a model.

use std::io::{BufReader, Read, Seek};

use image::ImageDecoder;
use image::metadata::Orientation;
use serde::Serialize;
use zip::ZipArchive;

use crate::detect::{self, Delimiter, Detected, Kind};
use crate::error::PreviewError;
use crate::hash;
use crate::limits::{
    IMAGE_INPUT_MAX_BYTES, IMAGE_PIXELS_MAX, PANEL_CELL_MAX_CHARS, PANEL_HASH_MAX_BYTES,
    PANEL_MEMBERS_MAX, PANEL_PDF_TEXT_MAX_BYTES, PANEL_TABLE_COLUMNS_MAX, PANEL_TABLE_ROWS_MAX,
    PANEL_TEXT_MAX_BYTES,
};
use crate::pdf::{self, PdfSummary};
use crate::pdf_render::PdfRenderer;
use crate::raster::{self, ModelImage, RenderTarget, format_label};
use crate::read::{decode_head, read_head};
use crate::table::sniff_separator;
use crate::wording::{grouped, sentence, shown_name, shown_on_one_line};

/// The Files panel's preview of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanelPreview {
    /// Media type detected from the content (from the name only for text subtypes).
    pub media_type: String,
    /// The format's name, as people call it ("Portable Document Format").
    pub format: String,
    /// Size in bytes.
    pub size: u64,
    /// Lowercase hex SHA-256 of the whole content; null over `PANEL_HASH_MAX_BYTES`.
    #[schema(required = true)]
    pub sha256: Option<String>,
    /// What the content shows, by kind.
    #[serde(flatten)]
    pub content: PanelContent,
}

/// The part of a preview that depends on the kind of file.
// Each variant renames its own fields: the OpenAPI derive does not read serde's
// `rename_all_fields`, and would describe them in snake_case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum PanelContent {
    /// A file of 0 bytes.
    Empty,
    /// Text (JSON, Markdown, code, SVG source…): its head.
    #[serde(rename_all = "camelCase")]
    Text {
        /// At most `PANEL_TEXT_MAX_BYTES` from the start, line ends as LF.
        text: String,
        /// Whether the file goes on past `text`.
        truncated: bool,
        /// Whether some bytes were not UTF-8 (shown as U+FFFD).
        invalid_utf8: bool,
    },
    /// Delimited text (CSV, TSV): the first rows, the header row first.
    #[serde(rename_all = "camelCase")]
    Table {
        /// The field separator found: `,`, `;` or a tab.
        separator: String,
        /// At most `PANEL_TABLE_ROWS_MAX` rows of at most `PANEL_TABLE_COLUMNS_MAX` cells.
        rows: Vec<Vec<String>>,
        /// Whether rows or columns were left out.
        truncated: bool,
    },
    /// A raster image; the picture itself is a second request.
    #[serde(rename_all = "camelCase")]
    Image {
        /// Width of the image as shown (after its EXIF rotation), in pixels.
        width: u32,
        /// Height of the image as shown, in pixels.
        height: u32,
        /// Whether a scaled rendering can be asked for.
        has_image: bool,
        /// Why there is no rendering, when there is none.
        #[schema(required = true)]
        note: Option<String>,
    },
    /// A PDF: page count, the first page's text; the page drawn is a second request.
    #[serde(rename_all = "camelCase")]
    Pdf {
        /// Pages in the document; null when it is encrypted.
        #[schema(required = true)]
        pages: Option<u64>,
        /// The first page's text, at most `PANEL_PDF_TEXT_MAX_BYTES`.
        text: String,
        /// Whether the first page's text was cut.
        text_truncated: bool,
        /// Whether the document needs a password.
        encrypted: bool,
        /// Whether a drawing of the first page can be asked for.
        has_image: bool,
        /// What could not be read, if anything.
        #[schema(required = true)]
        note: Option<String>,
    },
    /// A zip container (zip, docx, xlsx, pptx, odt…): its members.
    #[serde(rename_all = "camelCase")]
    Archive {
        /// Members in the archive's directory.
        member_count: u64,
        /// The first `PANEL_MEMBERS_MAX` members, in directory order.
        members: Vec<ArchiveMember>,
        /// Whether members were left out.
        truncated: bool,
    },
    /// Anything else, or content that is not what it claims: type, size and hash only.
    #[serde(rename_all = "camelCase")]
    File {
        /// Why nothing more is shown, when the content could not be read.
        #[schema(required = true)]
        note: Option<String>,
    },
}

/// One member of an archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveMember {
    /// The member's name, cut and with control characters made visible.
    pub name: String,
    /// Its uncompressed size in bytes, as the directory declares it.
    pub size: u64,
    /// Whether it is a folder.
    pub dir: bool,
    /// Whether it is encrypted.
    pub encrypted: bool,
}

/// The Files panel's preview of `reader` (named `name`, `size` bytes long).
pub fn panel_preview<R: Read + Seek>(
    reader: &mut R,
    name: &str,
    size: u64,
) -> Result<PanelPreview, PreviewError> {
    let sha256 = if size <= PANEL_HASH_MAX_BYTES {
        Some(hash::sha256_hex(reader)?)
    } else {
        None
    };
    let detected = detect::detect(reader, name)?;
    let content = match content(reader, &detected, size) {
        Ok(content) => content,
        Err(PreviewError::Io(error)) => return Err(PreviewError::Io(error)),
        // Not what it claims, or too large to open: type, size, hash and the reason.
        Err(problem) => PanelContent::File {
            note: Some(sentence(&problem.to_string())),
        },
    };
    Ok(PanelPreview {
        media_type: detected.media_type,
        format: detected.format_name,
        size,
        sha256,
        content,
    })
}

/// The picture the Files panel shows of `reader`: an image scaled to
/// `PANEL_IMAGE_MAX_SIDE_PIXELS`, or a PDF's first page drawn by `renderer`, as PNG.
pub fn panel_image<R: Read + Seek>(
    reader: &mut R,
    name: &str,
    size: u64,
    renderer: &PdfRenderer,
) -> Result<ModelImage, PreviewError> {
    let detected = detect::detect(reader, name)?;
    match detected.kind {
        Kind::Raster(format) => {
            raster::check_input_size(size)?;
            reader.rewind()?;
            let decoder = raster::open_decoder(BufReader::new(&mut *reader), format)?;
            let image = raster::decode(decoder, format)?;
            raster::render(&image, RenderTarget::PANEL)
        }
        Kind::Pdf => renderer.render(pdf::read_pdf(reader, size)?),
        _ => Err(PreviewError::NoImage {
            media_type: detected.media_type,
        }),
    }
}

fn content<R: Read + Seek>(
    reader: &mut R,
    detected: &Detected,
    size: u64,
) -> Result<PanelContent, PreviewError> {
    Ok(match detected.kind {
        Kind::Empty => PanelContent::Empty,
        Kind::Text | Kind::Json => text(reader, size)?,
        Kind::Table { delimiter } => table(reader, size, delimiter)?,
        Kind::Raster(format) => image_header(reader, format, size)?,
        Kind::Pdf => pdf_content(reader, size)?,
        Kind::Zip => archive(reader)?,
        Kind::OtherImage => PanelContent::File {
            note: Some(format!(
                "{} images cannot be shown here; PNG, JPEG, GIF and WebP can.",
                detected.format_name
            )),
        },
        Kind::Tar | Kind::Gzip | Kind::Binary => PanelContent::File { note: None },
    })
}

fn text<R: Read + Seek>(reader: &mut R, size: u64) -> Result<PanelContent, PreviewError> {
    let max = PANEL_TEXT_MAX_BYTES as u64;
    let head = read_head(reader, max)?;
    let decoded = decode_head(&head, size <= max);
    Ok(PanelContent::Text {
        text: decoded.text,
        truncated: size > max,
        invalid_utf8: decoded.had_invalid_utf8,
    })
}

fn table<R: Read + Seek>(
    reader: &mut R,
    size: u64,
    delimiter: Delimiter,
) -> Result<PanelContent, PreviewError> {
    let max = PANEL_TEXT_MAX_BYTES as u64;
    let whole = size <= max;
    let head = read_head(reader, max)?;
    let decoded = decode_head(&head, whole);
    let separator = match delimiter {
        Delimiter::Tab => b'\t',
        Delimiter::Sniffed => sniff_separator(&decoded.text),
    };
    let mut records = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(separator)
        .from_reader(decoded.text.as_bytes());
    let mut rows = Vec::new();
    let mut truncated = !whole;
    let mut record = csv::StringRecord::new();
    loop {
        match records.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            // Not CSV after all from here on: what came before still shows.
            Err(_) => {
                truncated = true;
                break;
            }
        }
        if rows.len() == PANEL_TABLE_ROWS_MAX {
            truncated = true;
            break;
        }
        truncated |= record.len() > PANEL_TABLE_COLUMNS_MAX;
        rows.push(
            record
                .iter()
                .take(PANEL_TABLE_COLUMNS_MAX)
                .map(|cell| shown_on_one_line(cell, PANEL_CELL_MAX_CHARS))
                .collect(),
        );
    }
    // The head was cut inside the file: its last row may be cut too.
    if !whole && rows.len() > 1 && rows.len() < PANEL_TABLE_ROWS_MAX {
        rows.pop();
    }
    Ok(PanelContent::Table {
        separator: char::from(separator).to_string(),
        rows,
        truncated,
    })
}

/// The image's size from its header; whether it can be decoded is decided from the
/// header too, without decoding it.
fn image_header<R: Read + Seek>(
    reader: &mut R,
    format: image::ImageFormat,
    size: u64,
) -> Result<PanelContent, PreviewError> {
    reader.rewind()?;
    let mut decoder = raster::open_decoder(BufReader::new(&mut *reader), format)?;
    let (mut width, mut height) = decoder.dimensions();
    let turned = matches!(
        decoder.orientation().unwrap_or(Orientation::NoTransforms),
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    );
    if turned {
        (width, height) = (height, width);
    }
    let pixels = u64::from(width) * u64::from(height);
    let note = if size > IMAGE_INPUT_MAX_BYTES {
        Some(format!(
            "The {} image is {} bytes, over the {}-byte limit for showing it.",
            format_label(format),
            grouped(size),
            grouped(IMAGE_INPUT_MAX_BYTES)
        ))
    } else if pixels == 0 {
        Some("The image declares no pixels.".to_owned())
    } else if pixels > IMAGE_PIXELS_MAX {
        Some(format!(
            "The image is {width} × {height}, {} pixels, over the {}-pixel limit for showing it.",
            grouped(pixels),
            grouped(IMAGE_PIXELS_MAX)
        ))
    } else {
        None
    };
    Ok(PanelContent::Image {
        width,
        height,
        has_image: note.is_none(),
        note,
    })
}

fn pdf_content<R: Read + Seek>(reader: &mut R, size: u64) -> Result<PanelContent, PreviewError> {
    Ok(match pdf::summarize(reader, size)? {
        PdfSummary::Encrypted => PanelContent::Pdf {
            pages: None,
            text: String::new(),
            text_truncated: false,
            encrypted: true,
            has_image: false,
            note: Some("The PDF is encrypted: it needs a password to be read.".to_owned()),
        },
        PdfSummary::Parsed {
            pages,
            first_page_text,
        } => {
            let (text, note) = match first_page_text {
                Ok(text) => (text.trim().to_owned(), None),
                Err(reason) => (
                    String::new(),
                    Some(format!(
                        "The text of the first page could not be extracted ({reason})."
                    )),
                ),
            };
            let (text, text_truncated) = cut_at_char(text, PANEL_PDF_TEXT_MAX_BYTES);
            PanelContent::Pdf {
                pages: Some(pages),
                text,
                text_truncated,
                encrypted: false,
                has_image: pages > 0,
                note,
            }
        }
    })
}

/// `text` cut to at most `max_bytes` on a char boundary, and whether it was cut.
fn cut_at_char(mut text: String, max_bytes: usize) -> (String, bool) {
    if text.len() <= max_bytes {
        return (text, false);
    }
    let mut keep = max_bytes;
    while !text.is_char_boundary(keep) {
        keep -= 1;
    }
    text.truncate(keep);
    (text, true)
}

fn archive<R: Read + Seek>(reader: &mut R) -> Result<PanelContent, PreviewError> {
    reader.rewind()?;
    let archive = ZipArchive::new(reader).map_err(|error| PreviewError::damaged("zip", error))?;
    let member_count = archive.len();
    let mut members = Vec::with_capacity(member_count.min(PANEL_MEMBERS_MAX));
    for index in 0..member_count.min(PANEL_MEMBERS_MAX) {
        // The directory alone is read: no member is inflated.
        let Ok(entry) = archive.by_index_data(index) else {
            continue;
        };
        members.push(ArchiveMember {
            name: shown_name(&String::from_utf8_lossy(entry.name_raw())),
            size: entry.size(),
            dir: entry.is_dir(),
            encrypted: entry.encrypted(),
        });
    }
    Ok(PanelContent::Archive {
        member_count: member_count as u64,
        truncated: member_count > members.len(),
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn look(bytes: &[u8], name: &str) -> PanelPreview {
        panel_preview(&mut Cursor::new(bytes.to_vec()), name, bytes.len() as u64).unwrap()
    }

    #[test]
    fn text_below_at_and_over_the_limit() {
        for (len, truncated) in [
            (PANEL_TEXT_MAX_BYTES - 1, false),
            (PANEL_TEXT_MAX_BYTES, false),
            (PANEL_TEXT_MAX_BYTES + 1, true),
        ] {
            let preview = look(&vec![b'a'; len], "a.txt");
            let PanelContent::Text {
                text,
                truncated: cut,
                ..
            } = preview.content
            else {
                panic!("{preview:?}");
            };
            assert_eq!(cut, truncated, "{len}");
            assert_eq!(text.len(), len.min(PANEL_TEXT_MAX_BYTES));
        }
    }

    #[test]
    fn csv_becomes_rows_with_quotes_respected() {
        let preview = look(b"name,note\n\"Doe, J\",\"x\"\nRoe,y\n", "people.csv");
        assert_eq!(
            preview.content,
            PanelContent::Table {
                separator: ",".to_owned(),
                rows: vec![
                    vec!["name".to_owned(), "note".to_owned()],
                    vec!["Doe, J".to_owned(), "x".to_owned()],
                    vec!["Roe".to_owned(), "y".to_owned()],
                ],
                truncated: false,
            }
        );
    }

    #[test]
    fn table_rows_below_at_and_over_the_limit() {
        for (rows, truncated) in [
            (PANEL_TABLE_ROWS_MAX - 1, false),
            (PANEL_TABLE_ROWS_MAX, false),
            (PANEL_TABLE_ROWS_MAX + 1, true),
        ] {
            let csv: String = (0..rows).map(|i| format!("{i},x\n")).collect();
            let PanelContent::Table {
                rows: shown,
                truncated: cut,
                ..
            } = look(csv.as_bytes(), "t.csv").content
            else {
                panic!("not a table");
            };
            assert_eq!(cut, truncated, "{rows}");
            assert_eq!(shown.len(), rows.min(PANEL_TABLE_ROWS_MAX));
        }
    }

    #[test]
    fn unknown_binary_is_a_file_with_its_hash() {
        let preview = look(&[0, 1, 2, 3, 0, 0xff], "x.bin");
        assert_eq!(preview.content, PanelContent::File { note: None });
        assert_eq!(preview.sha256.unwrap().len(), 64);
    }

    #[test]
    fn a_damaged_zip_is_a_file_with_a_note() {
        let preview = look(b"PK\x03\x04 not really a zip", "a.zip");
        let PanelContent::File { note: Some(note) } = preview.content else {
            panic!("{preview:?}");
        };
        assert!(note.contains("zip"), "{note}");
    }

    #[test]
    fn serializes_flat_with_a_kind() {
        let json = serde_json::to_value(look(b"hello", "a.txt")).unwrap();
        assert_eq!(json["kind"], "text");
        assert_eq!(json["text"], "hello");
        assert_eq!(json["invalidUtf8"], false);
        assert_eq!(json["size"], 5);
    }
}
