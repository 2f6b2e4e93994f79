//! Decoding images within bounds and rendering them small enough for a model.

mod decode;
mod encode;
mod fit;

pub(crate) use decode::{check_input_size, decode, open_decoder};
pub(crate) use encode::{RenderTarget, render};

use std::fmt;

/// An encoded image ready to hand to a model.
#[derive(Clone, PartialEq, Eq)]
pub struct ModelImage {
    /// `image/png` or `image/jpeg`.
    pub mime: &'static str,
    /// The encoded image.
    pub bytes: Vec<u8>,
    /// Width of the encoded image, in pixels.
    pub width: u32,
    /// Height of the encoded image, in pixels.
    pub height: u32,
    /// Width of the decoded source (after EXIF rotation), in pixels.
    pub source_width: u32,
    /// Height of the decoded source (after EXIF rotation), in pixels.
    pub source_height: u32,
}

// Printing megabytes of image data would bury everything else in a log.
impl fmt::Debug for ModelImage {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ModelImage")
            .field("mime", &self.mime)
            .field("bytes", &format_args!("[{} bytes]", self.bytes.len()))
            .field("width", &self.width)
            .field("height", &self.height)
            .field("source_width", &self.source_width)
            .field("source_height", &self.source_height)
            .finish()
    }
}

/// A short label for an image format, as people name it.
pub(crate) fn format_label(format: image::ImageFormat) -> &'static str {
    match format {
        image::ImageFormat::Png => "PNG",
        image::ImageFormat::Jpeg => "JPEG",
        image::ImageFormat::Gif => "GIF",
        image::ImageFormat::WebP => "WebP",
        _ => "image",
    }
}
