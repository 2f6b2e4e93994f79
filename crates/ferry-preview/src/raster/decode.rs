//! Decoding within the byte, pixel and memory limits.

use std::io::{self, BufRead, Seek};

use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, Limits};

use super::format_label;
use crate::error::PreviewError;
use crate::limits::{IMAGE_DECODE_MAX_ALLOC_BYTES, IMAGE_INPUT_MAX_BYTES, IMAGE_PIXELS_MAX};
use crate::wording::grouped;

/// Refuses image files too large to decode, before any byte is read.
pub(crate) fn check_input_size(size: u64) -> Result<(), PreviewError> {
    if size > IMAGE_INPUT_MAX_BYTES {
        return Err(PreviewError::TooLarge {
            purpose: "decoding an image",
            size,
            limit: IMAGE_INPUT_MAX_BYTES,
        });
    }
    Ok(())
}

/// Reads the image header only; the decoder it returns has its limits set.
pub(crate) fn open_decoder<'a, R: BufRead + Seek + 'a>(
    reader: R,
    format: ImageFormat,
) -> Result<impl ImageDecoder + 'a, PreviewError> {
    let mut limits = Limits::default();
    limits.max_alloc = Some(IMAGE_DECODE_MAX_ALLOC_BYTES);
    let mut image_reader = ImageReader::with_format(reader, format);
    image_reader.limits(limits);
    image_reader
        .into_decoder()
        .map_err(|error| from_image_error(format, error))
}

/// Decodes the pixels after checking the declared size, and turns the image
/// upright as its EXIF orientation says.
pub(crate) fn decode(
    mut decoder: impl ImageDecoder,
    format: ImageFormat,
) -> Result<DynamicImage, PreviewError> {
    let (width, height) = decoder.dimensions();
    if width == 0 || height == 0 {
        return Err(PreviewError::damaged(
            format_label(format),
            format!("the header declares {width}×{height} pixels"),
        ));
    }
    let pixels = u64::from(width) * u64::from(height);
    if pixels > IMAGE_PIXELS_MAX {
        return Err(PreviewError::ImageTooLarge {
            detail: format!(
                "{width}×{height} is {} pixels, over the {}-pixel limit",
                grouped(pixels),
                grouped(IMAGE_PIXELS_MAX)
            ),
        });
    }
    // A broken EXIF block is no reason to refuse the picture itself.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let mut image =
        DynamicImage::from_decoder(decoder).map_err(|error| from_image_error(format, error))?;
    image.apply_orientation(orientation);
    Ok(image)
}

fn from_image_error(format: ImageFormat, error: ImageError) -> PreviewError {
    let label = format_label(format);
    match error {
        ImageError::IoError(io_error) if io_error.kind() == io::ErrorKind::UnexpectedEof => {
            PreviewError::damaged(label, "the data ends too early")
        }
        ImageError::IoError(io_error) => PreviewError::Io(io_error),
        ImageError::Limits(limit) => PreviewError::ImageTooLarge {
            detail: limit.to_string(),
        },
        other => PreviewError::damaged(label, other),
    }
}
