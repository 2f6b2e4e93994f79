//! The one error type of this crate.

use std::io;

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

    /// Even the smallest rendering tried is over the byte budget.
    #[error("the image could not be made to fit in {limit_bytes} bytes")]
    CannotFit {
        /// The byte budget of the rendering.
        limit_bytes: usize,
    },
}

impl PreviewError {
    /// A stable snake_case code for the error, for the `{"error":{"code":…}}` envelope.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Io(_) => "io_error",
            Self::TooLarge { .. } => "file_too_large",
            Self::NotAnImage { .. } => "not_an_image",
            Self::UnsupportedImageFormat { .. } => "unsupported_image_format",
            Self::ImageTooLarge { .. } => "image_too_large",
            Self::Damaged { .. } => "damaged_file",
            Self::Encode(_) => "image_encode_failed",
            Self::CannotFit { .. } => "image_cannot_fit",
        }
    }

    pub(crate) fn damaged(format: &'static str, reason: impl ToString) -> Self {
        Self::Damaged {
            format,
            reason: reason.to_string(),
        }
    }
}
