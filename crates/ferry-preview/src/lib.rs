//! Describes a file for a language model: its type, size, SHA-256, a short
//! text preview and, for images, a small rendering.
//!
//! Every function works on a file the caller has already opened (through a
//! confined handle, possibly as another user): this crate never opens a path.
//! Inputs are hostile: every read is bounded, parsers that could run away are
//! capped, and no input makes these functions panic.

mod budget;
mod detect;
mod docx;
mod error;
mod hash;
mod json;
pub mod limits;
mod panel;
mod pdf;
mod pdf_render;
mod raster;
mod read;
mod table;
mod tar_listing;
mod text;
mod wording;
mod zip_listing;

use std::fs::File;
use std::io::{BufReader, Read, Seek};

pub use budget::TRUNCATION_NOTE;
pub use error::PreviewError;
pub use limits::{
    IMAGE_INPUT_MAX_BYTES, IMAGE_PIXELS_MAX, MODEL_IMAGE_MAX_BYTES, MODEL_IMAGE_MAX_SIDE_PIXELS,
    PREVIEW_TEXT_MAX_BYTES, THUMBNAIL_MAX_SIDE_PIXELS,
};
pub use panel::{ArchiveMember, PanelContent, PanelPreview, panel_image, panel_preview};
pub use pdf_render::{PdfRenderer, render_in_this_process};
pub use raster::ModelImage;

use detect::{DOCX_MEDIA_TYPE, Detected, Kind};
use raster::{RenderTarget, format_label};
use wording::sentence;

/// What `file_preview` tells a model about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// Media type detected from the content (from the name only for text subtypes).
    pub media_type: String,
    /// Size in bytes, as given by the caller.
    pub size: u64,
    /// Lowercase hex SHA-256 of the whole content.
    pub sha256: String,
    /// The model-facing description, at most `PREVIEW_TEXT_MAX_BYTES` bytes.
    pub text: String,
    /// A small rendering, for images this crate can decode.
    pub image: Option<ModelImage>,
}

/// The media type of `reader`'s content, the one `file_preview` reports and a download's
/// `Content-Type` carries: judged by content, by `name` only for text subtypes. Text that
/// is valid UTF-8 says so with `; charset=utf-8`. The reader is left at its start.
pub fn content_type<R: Read + Seek>(reader: &mut R, name: &str) -> std::io::Result<String> {
    Ok(sniff(reader, name)?.media_type)
}

/// What the one sniffer says of some content: the media type [`content_type`] gives and
/// the extension that type is saved under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sniffed {
    /// The media type, exactly as [`content_type`] spells it.
    pub media_type: String,
    /// The extension for the detected format, without the dot (`txt`, `png`, `docx`,
    /// `zip`, `bin`…), never taken from the name.
    pub extension: String,
}

/// Sniffs `reader` once for both its media type and its extension. The reader is left at
/// its start.
pub fn sniff<R: Read + Seek>(reader: &mut R, name: &str) -> std::io::Result<Sniffed> {
    let detected = detect::detect(reader, name)?;
    reader.rewind()?;
    let media_type = if detected.utf8_text {
        format!("{}; charset=utf-8", detected.media_type)
    } else {
        detected.media_type
    };
    Ok(Sniffed {
        media_type,
        extension: detected.extension,
    })
}

/// Whether `content` (of a file named `name`) is text by the one sniffer: plain text,
/// a table or JSON, as `file_preview` would show it as text. Empty content is not. A
/// search reads only the files this says are text.
pub fn is_text(content: &[u8], name: &str) -> bool {
    let mut reader = std::io::Cursor::new(content);
    matches!(
        detect::detect(&mut reader, name).map(|d| d.kind),
        Ok(Kind::Text | Kind::Table { .. } | Kind::Json)
    )
}

/// Describes `file` (named `name`, `size` bytes long) for a model.
pub fn preview(file: &mut File, name: &str, size: u64) -> Result<Preview, PreviewError> {
    preview_reader(file, name, size)
}

/// Decodes the image in `file` and renders it within `MODEL_IMAGE_MAX_SIDE_PIXELS`
/// square and `MODEL_IMAGE_MAX_BYTES`, as PNG or JPEG.
pub fn model_image(file: &mut File, size: u64) -> Result<ModelImage, PreviewError> {
    model_image_reader(file, size)
}

fn preview_reader<R: Read + Seek>(
    reader: &mut R,
    name: &str,
    size: u64,
) -> Result<Preview, PreviewError> {
    let sha256 = hash::sha256_hex(reader)?;
    let detected = detect::detect(reader, name)?;
    let (text, image) = match describe(reader, &detected, size) {
        Ok(described) => described,
        Err(PreviewError::Io(error)) => return Err(PreviewError::Io(error)),
        // The content is not what it claims, or is too large to open: the
        // model still gets the type, size and hash, and the reason.
        Err(problem) => (sentence(&problem.to_string()), None),
    };
    Ok(Preview {
        media_type: detected.media_type,
        size,
        sha256,
        text: budget::fit_to_budget(text, PREVIEW_TEXT_MAX_BYTES),
        image,
    })
}

/// The preview text, and a rendering for images.
fn describe<R: Read + Seek>(
    reader: &mut R,
    detected: &Detected,
    size: u64,
) -> Result<(String, Option<ModelImage>), PreviewError> {
    let text = match detected.kind {
        Kind::Raster(format) => return describe_image(reader, format, size),
        Kind::Empty => "The file is empty (0 bytes).".to_owned(),
        Kind::Text => text::preview_text(reader, size)?,
        Kind::Table { delimiter } => table::preview_table(reader, size, delimiter)?,
        Kind::Json => json::preview_json(reader, size)?,
        Kind::Pdf => pdf::preview_pdf(reader, size)?,
        Kind::Zip => {
            let is_docx = detected.media_type == DOCX_MEDIA_TYPE;
            let label = if detected.media_type == "application/zip" {
                "Zip archive"
            } else {
                detected.format_name.as_str()
            };
            zip_listing::preview_zip(reader, label, is_docx)?
        }
        Kind::Tar => tar_listing::preview_tar(reader)?,
        Kind::Gzip => tar_listing::preview_gzip(reader)?,
        Kind::OtherImage => format!(
            "{} ({}). Only PNG, JPEG, GIF and WebP images can be rendered here.",
            detected.format_name, detected.media_type
        ),
        Kind::Binary => format!(
            "{} ({}); its content cannot be previewed as text.",
            detected.format_name, detected.media_type
        ),
    };
    Ok((text, None))
}

/// Format and size from the header, then a rendering when decoding succeeds.
fn describe_image<R: Read + Seek>(
    reader: &mut R,
    format: image::ImageFormat,
    size: u64,
) -> Result<(String, Option<ModelImage>), PreviewError> {
    use image::ImageDecoder;

    reader.rewind()?;
    let decoder = raster::open_decoder(BufReader::new(&mut *reader), format)?;
    let (width, height) = decoder.dimensions();
    let mut text = format!("{} image, {width} × {height} pixels.", format_label(format));
    // The header is read whatever the size; decoding only within the limit.
    let rendered = raster::check_input_size(size)
        .and_then(|()| raster::decode(decoder, format))
        .and_then(|image| raster::render(&image, RenderTarget::THUMBNAIL));
    match rendered {
        Ok(thumbnail) => {
            text.push_str(&format!(
                " A {} × {} rendering is attached.",
                thumbnail.width, thumbnail.height
            ));
            Ok((text, Some(thumbnail)))
        }
        Err(PreviewError::Io(error)) => Err(PreviewError::Io(error)),
        Err(problem) => {
            text.push(' ');
            text.push_str(&sentence(&problem.to_string()));
            Ok((text, None))
        }
    }
}

fn model_image_reader<R: Read + Seek>(
    reader: &mut R,
    size: u64,
) -> Result<ModelImage, PreviewError> {
    raster::check_input_size(size)?;
    // The name plays no part: only the content decides what an image is.
    let detected = detect::detect(reader, "")?;
    let format = match detected.kind {
        Kind::Raster(format) => format,
        Kind::OtherImage => {
            return Err(PreviewError::UnsupportedImageFormat {
                media_type: detected.media_type,
            });
        }
        _ => {
            return Err(PreviewError::NotAnImage {
                detected: detected.media_type,
            });
        }
    };
    reader.rewind()?;
    let decoder = raster::open_decoder(BufReader::new(&mut *reader), format)?;
    let image = raster::decode(decoder, format)?;
    raster::render(&image, RenderTarget::MODEL)
}
