//! The one error type of this crate.

use std::io;

use ferry_codes::Code;

use crate::wording::grouped;

/// Why a file could not be previewed or rendered; each message is a sentence a model can act on.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// Reading the file failed.
    #[error("could not read the file: {0}")]
    Io(#[from] io::Error),

    /// The file is larger than what may be opened for this purpose.
    #[error(
        "the file is {} bytes, over the {}-byte limit for {purpose}",
        grouped(*size),
        grouped(*limit)
    )]
    TooLarge {
        /// What the file would have been opened for ("image decoding", …).
        purpose: &'static str,
        /// The file's size in bytes.
        size: u64,
        /// The most bytes allowed for that purpose.
        limit: u64,
    },

    /// `image_read` was asked for something that is not an image.
    #[error("not an image (detected {detected}); use file_preview")]
    NotAnImage {
        /// The media type the content was found to be.
        detected: String,
    },

    /// An image in a format this crate does not decode.
    #[error(
        "{media_type} images cannot be decoded here (PNG, JPEG, GIF and WebP can); use file_preview for its type and size"
    )]
    UnsupportedImageFormat {
        /// The image's media type.
        media_type: String,
    },

    /// The image declares more pixels, or needs more memory, than allowed.
    #[error("the image is too large to decode: {detail}")]
    ImageTooLarge {
        /// Which limit, and by how much.
        detail: String,
    },

    /// The content does not parse as the format it claims to be.
    #[error("the {format} data could not be read; the file may be damaged or truncated ({reason})")]
    Damaged {
        /// The format the content claimed ("PDF", "zip", …).
        format: &'static str,
        /// What the parser said.
        reason: String,
    },

    /// Encoding the rendering failed; not expected for any input.
    #[error("the image could not be encoded: {0}")]
    Encode(String),

    /// The file holds nothing to render as an image.
    #[error("{media_type} has no image to preview; its preview is text or a list")]
    NoImage {
        /// The media type the content was found to be.
        media_type: String,
    },

    /// Rendering a PDF page failed, ran out of its memory or time, or crashed.
    #[error("the first page could not be rendered ({reason})")]
    RenderFailed {
        /// What went wrong, in a few words.
        reason: String,
    },

    /// The process that renders PDF pages could not be started.
    #[error("PDF pages cannot be rendered on this server ({reason})")]
    RenderUnavailable {
        /// Why the process could not start.
        reason: String,
    },

    /// Even the smallest rendering tried is over the byte budget.
    #[error("the image could not be made to fit in {limit_bytes} bytes")]
    CannotFit {
        /// The byte budget of the rendering.
        limit_bytes: usize,
    },
}

impl PreviewError {
    /// The code this failure is answered with, over HTTP and MCP alike.
    pub fn code(&self) -> Code {
        match self {
            Self::Io(_) => Code::IoError,
            Self::TooLarge { .. } => Code::FileTooLarge,
            Self::NotAnImage { .. } => Code::NotAnImage,
            Self::UnsupportedImageFormat { .. } => Code::UnsupportedImageFormat,
            Self::ImageTooLarge { .. } => Code::ImageTooLarge,
            Self::Damaged { .. } => Code::DamagedFile,
            Self::Encode(_) => Code::ImageEncodeFailed,
            Self::CannotFit { .. } => Code::ImageCannotFit,
            Self::NoImage { .. } => Code::NoPreviewImage,
            Self::RenderFailed { .. } => Code::RenderFailed,
            Self::RenderUnavailable { .. } => Code::RenderUnavailable,
        }
    }

    pub(crate) fn damaged(format: &'static str, reason: impl ToString) -> Self {
        Self::Damaged {
            format,
            reason: reason.to_string(),
        }
    }
}
