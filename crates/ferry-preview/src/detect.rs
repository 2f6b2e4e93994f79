//! What a file is, judged by its content first and by its name only for text.

use std::io::{self, Read, Seek};

use file_format::FileFormat;
use image::ImageFormat;

use crate::limits::DETECT_HEAD_MAX_BYTES;
use crate::read::read_head;

/// How a file will be previewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Empty,
    Text,
    Table {
        delimiter: Delimiter,
    },
    Json,
    /// An image this crate can decode and render.
    Raster(ImageFormat),
    /// An image in a format this crate cannot decode.
    OtherImage,
    Pdf,
    /// Any zip container: plain zip, office documents, jars, epubs…
    Zip,
    Tar,
    Gzip,
    Binary,
}

/// The separator of a delimited-text table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delimiter {
    /// Comma-separated by name; the header row decides between `,` and `;`.
    Sniffed,
    Tab,
}

/// The outcome of detection.
#[derive(Debug, Clone)]
pub(crate) struct Detected {
    pub media_type: String,
    /// Human name of the format, e.g. "Portable Network Graphics".
    pub format_name: String,
    pub kind: Kind,
    /// The content was sniffed as UTF-8 text (not only named as text).
    pub utf8_text: bool,
    /// The extension the content's format takes, without the dot: `txt` for any text
    /// and for an empty file, `bin` for binary of unknown type.
    pub extension: String,
}

/// Media type of Office Open XML word-processing documents.
pub(crate) const DOCX_MEDIA_TYPE: &str =
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/// Local file header, empty archive and spanned archive signatures.
const ZIP_MAGICS: [&[u8]; 3] = [b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"];

/// Detects by content; `name` is consulted only to name a text subtype
/// (CSV, JSON, Markdown…) that content alone cannot tell from plain text.
pub(crate) fn detect<R: Read + Seek>(reader: &mut R, name: &str) -> io::Result<Detected> {
    reader.rewind()?;
    let format = FileFormat::from_reader(&mut *reader)?;
    let head = read_head(reader, DETECT_HEAD_MAX_BYTES)?;
    let detected_type = format.media_type().to_owned();
    let format_name = if format == FileFormat::ArbitraryBinaryData {
        "Binary data of unknown type".to_owned()
    } else {
        format.name().to_owned()
    };

    let sniffed_text = format == FileFormat::PlainText;
    let by_content = |kind| Detected {
        media_type: detected_type.clone(),
        format_name: format_name.clone(),
        kind,
        utf8_text: sniffed_text,
        extension: extension_of(format, kind),
    };
    if format == FileFormat::Empty || head.is_empty() {
        return Ok(by_content(Kind::Empty));
    }
    // Zip containers come first: some of their media types end in +xml and
    // would otherwise pass for text.
    if ZIP_MAGICS.iter().any(|magic| head.starts_with(magic)) {
        // The sniffer gives up on a zip whose directory is cut off; the
        // signature still says zip, and the listing will say what is wrong.
        let media_type = if format == FileFormat::ArbitraryBinaryData {
            "application/zip".to_owned()
        } else {
            detected_type
        };
        return Ok(Detected {
            media_type,
            format_name,
            kind: Kind::Zip,
            utf8_text: false,
            extension: extension_of(format, Kind::Zip),
        });
    }
    let kind = match detected_type.as_str() {
        "application/pdf" => Some(Kind::Pdf),
        "application/x-tar" => Some(Kind::Tar),
        "application/gzip" => Some(Kind::Gzip),
        media_type if media_type.starts_with("image/") && !is_textual(media_type) => {
            Some(match ImageFormat::from_mime_type(media_type) {
                Some(format) if is_decodable(format) => Kind::Raster(format),
                _ => Kind::OtherImage,
            })
        }
        _ => None,
    };
    if let Some(kind) = kind {
        return Ok(by_content(kind));
    }

    // The sniffer only accepts valid UTF-8 without control characters; text in
    // another encoding, or with a stray escape code, still deserves a text
    // preview when its name says text and it holds no NUL byte.
    let text_by_name = format == FileFormat::ArbitraryBinaryData && !head.contains(&0);
    let name_type = textual_type_by_name(name);
    if sniffed_text || (text_by_name && name_type.is_some()) {
        let media_type = name_type.unwrap_or_else(|| detected_type.clone());
        let kind = text_kind(&media_type);
        return Ok(Detected {
            media_type,
            format_name: format_name.clone(),
            kind,
            utf8_text: sniffed_text,
            extension: extension_of(format, kind),
        });
    }
    if is_textual(&detected_type) {
        let kind = text_kind(&detected_type);
        return Ok(by_content(kind));
    }
    Ok(by_content(Kind::Binary))
}

/// The extension a detected format is saved under. Text is `txt` whatever its name says
/// (a `.py` or `.json` source is still text by content), and so is an empty file; a zip
/// the sniffer could not read further stays `zip`; unknown binary is `bin`.
fn extension_of(format: FileFormat, kind: Kind) -> String {
    match kind {
        Kind::Empty | Kind::Text | Kind::Table { .. } | Kind::Json => "txt".to_owned(),
        Kind::Zip if format == FileFormat::ArbitraryBinaryData => "zip".to_owned(),
        _ if format == FileFormat::ArbitraryBinaryData => "bin".to_owned(),
        _ => format.extension().to_owned(),
    }
}

/// The formats this crate decodes (the `image` features it enables).
fn is_decodable(format: ImageFormat) -> bool {
    matches!(
        format,
        ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP
    )
}

fn textual_type_by_name(name: &str) -> Option<String> {
    let guess = mime_guess::from_path(name).first()?;
    let essence = guess.essence_str();
    is_textual(essence).then(|| essence.to_owned())
}

/// Media types whose content is meant to be read as text.
fn is_textual(media_type: &str) -> bool {
    const TEXTUAL_APPLICATION_TYPES: [&str; 10] = [
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/x-sh",
        "application/toml",
        "application/yaml",
        "application/x-yaml",
        "application/sql",
    ];
    media_type.starts_with("text/")
        || media_type.ends_with("+xml")
        || media_type.ends_with("+json")
        || TEXTUAL_APPLICATION_TYPES.contains(&media_type)
}

fn text_kind(media_type: &str) -> Kind {
    match media_type {
        "text/csv" | "text/comma-separated-values" => Kind::Table {
            delimiter: Delimiter::Sniffed,
        },
        "text/tab-separated-values" => Kind::Table {
            delimiter: Delimiter::Tab,
        },
        "application/json" => Kind::Json,
        json if json.ends_with("+json") => Kind::Json,
        _ => Kind::Text,
    }
}
