//! Scaling and encoding so a rendering fits both its pixel and its byte budget.

use std::borrow::Cow;

use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, GenericImageView, RgbImage};

use super::ModelImage;
use super::fit::{fit_within, shrink};
use crate::error::PreviewError;
use crate::limits::{
    JPEG_QUALITY_STEPS, MODEL_IMAGE_MAX_BYTES, MODEL_IMAGE_MAX_SIDE_PIXELS, PANEL_IMAGE_MAX_BYTES,
    PANEL_IMAGE_MAX_SIDE_PIXELS, PNG_PREFERRED_MAX_PIXELS, SHRINK_STEP_KEEP_PERCENT,
    SHRINK_STEPS_MAX, THUMBNAIL_MAX_BYTES, THUMBNAIL_MAX_SIDE_PIXELS,
};

/// The bounds one rendering must meet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenderTarget {
    pub max_side_pixels: u32,
    pub max_bytes: usize,
    /// PNG only, never JPEG: what the Files panel shows.
    pub lossless: bool,
}

impl RenderTarget {
    /// What `image_read` hands to a model.
    pub(crate) const MODEL: Self = Self {
        max_side_pixels: MODEL_IMAGE_MAX_SIDE_PIXELS,
        max_bytes: MODEL_IMAGE_MAX_BYTES,
        lossless: false,
    };

    /// The small rendering attached to a preview.
    pub(crate) const THUMBNAIL: Self = Self {
        max_side_pixels: THUMBNAIL_MAX_SIDE_PIXELS,
        max_bytes: THUMBNAIL_MAX_BYTES,
        lossless: false,
    };

    /// The image the Files panel shows beside the tree.
    pub(crate) const PANEL: Self = Self {
        max_side_pixels: PANEL_IMAGE_MAX_SIDE_PIXELS,
        max_bytes: PANEL_IMAGE_MAX_BYTES,
        lossless: true,
    };
}

/// Scales `source` to fit `target` and encodes it, lowering the JPEG quality
/// and then the size until the encoding fits.
pub(crate) fn render(
    source: &DynamicImage,
    target: RenderTarget,
) -> Result<ModelImage, PreviewError> {
    let (source_width, source_height) = source.dimensions();
    let (mut width, mut height) = fit_within(source_width, source_height, target.max_side_pixels);
    for _ in 0..SHRINK_STEPS_MAX {
        let scaled = scale(source, width, height);
        if let Some((mime, bytes)) = encode_within(&scaled, target)? {
            return Ok(ModelImage {
                mime,
                bytes,
                width,
                height,
                source_width,
                source_height,
            });
        }
        let smaller = shrink(width, height, SHRINK_STEP_KEEP_PERCENT);
        if smaller == (width, height) {
            break;
        }
        (width, height) = smaller;
    }
    Err(PreviewError::CannotFit {
        limit_bytes: target.max_bytes,
    })
}

fn scale(source: &DynamicImage, width: u32, height: u32) -> Cow<'_, DynamicImage> {
    if (width, height) == source.dimensions() {
        Cow::Borrowed(source)
    } else if width.saturating_mul(2) <= source.width() {
        // Box averaging: fast on large reductions, where it also aliases least.
        Cow::Owned(source.thumbnail_exact(width, height))
    } else {
        Cow::Owned(source.resize_exact(width, height, FilterType::Triangle))
    }
}

/// PNG when transparency matters or the image is small, else JPEG at falling
/// qualities; `None` when nothing fits `max_bytes` at this size.
fn encode_within(
    image: &DynamicImage,
    target: RenderTarget,
) -> Result<Option<(&'static str, Vec<u8>)>, PreviewError> {
    let max_bytes = target.max_bytes;
    let transparent = uses_transparency(image);
    let pixels = u64::from(image.width()) * u64::from(image.height());
    if target.lossless || transparent || pixels <= PNG_PREFERRED_MAX_PIXELS {
        let png = encode_png(image, transparent)?;
        if png.len() <= max_bytes {
            return Ok(Some(("image/png", png)));
        }
        if target.lossless {
            return Ok(None);
        }
    }
    let opaque = flatten_onto_white(image);
    for quality in JPEG_QUALITY_STEPS {
        let jpeg = encode_jpeg(&opaque, quality)?;
        if jpeg.len() <= max_bytes {
            return Ok(Some(("image/jpeg", jpeg)));
        }
    }
    Ok(None)
}

/// An alpha channel that is fully opaque everywhere changes nothing.
fn uses_transparency(image: &DynamicImage) -> bool {
    image.color().has_alpha() && image.pixels().any(|(_, _, pixel)| pixel.0[3] < u8::MAX)
}

fn encode_png(image: &DynamicImage, transparent: bool) -> Result<Vec<u8>, PreviewError> {
    // Eight bits per channel is all a model looks at, and halves 16-bit images.
    let eight_bit = if transparent {
        DynamicImage::ImageRgba8(image.to_rgba8())
    } else {
        DynamicImage::ImageRgb8(image.to_rgb8())
    };
    let mut out = Vec::new();
    eight_bit
        .write_with_encoder(PngEncoder::new(&mut out))
        .map_err(|error| PreviewError::Encode(error.to_string()))?;
    Ok(out)
}

fn encode_jpeg(image: &RgbImage, quality: u8) -> Result<Vec<u8>, PreviewError> {
    let mut out = Vec::new();
    image
        .write_with_encoder(JpegEncoder::new_with_quality(&mut out, quality))
        .map_err(|error| PreviewError::Encode(error.to_string()))?;
    Ok(out)
}

/// JPEG has no alpha: composite onto white, as most viewers show transparency.
fn flatten_onto_white(image: &DynamicImage) -> RgbImage {
    if !image.color().has_alpha() {
        return image.to_rgb8();
    }
    let rgba = image.to_rgba8();
    RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [red, green, blue, alpha] = rgba.get_pixel(x, y).0;
        let over_white = |channel: u8| {
            let alpha = u32::from(alpha);
            let blended = (u32::from(channel) * alpha + 255 * (255 - alpha) + 127) / 255;
            u8::try_from(blended).unwrap_or(u8::MAX)
        };
        image::Rgb([over_white(red), over_white(green), over_white(blue)])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgba, RgbaImage};

    #[test]
    fn transparent_images_stay_png() {
        let image = DynamicImage::ImageRgba8(RgbaImage::from_pixel(600, 600, Rgba([9, 9, 9, 10])));
        let rendered = render(&image, RenderTarget::THUMBNAIL).unwrap();
        assert_eq!(rendered.mime, "image/png");
        assert_eq!((rendered.width, rendered.height), (512, 512));
    }

    #[test]
    fn large_opaque_images_become_jpeg() {
        let image = DynamicImage::ImageRgba8(RgbaImage::from_pixel(600, 400, Rgba([9, 9, 9, 255])));
        let rendered = render(&image, RenderTarget::THUMBNAIL).unwrap();
        assert_eq!(rendered.mime, "image/jpeg");
        assert_eq!((rendered.width, rendered.height), (512, 341));
        assert_eq!((rendered.source_width, rendered.source_height), (600, 400));
    }

    #[test]
    fn noise_that_does_not_fit_is_shrunk_until_it_does() {
        // Pseudo-random noise compresses badly in both PNG and JPEG.
        let mut state = 0x2545_f491_u32;
        let noise = RgbaImage::from_fn(400, 400, |_, _| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let [a, b, c, d] = state.to_le_bytes();
            Rgba([a, b, c, d | 1])
        });
        let target = RenderTarget {
            max_side_pixels: 400,
            max_bytes: 40 * 1024,
            lossless: false,
        };
        let rendered = render(&DynamicImage::ImageRgba8(noise), target).unwrap();
        assert!(rendered.bytes.len() <= target.max_bytes);
        assert!(rendered.width < 400);
    }

    #[test]
    fn flattening_blends_onto_white() {
        let half = DynamicImage::ImageRgba8(RgbaImage::from_pixel(1, 1, Rgba([0, 0, 0, 128])));
        assert_eq!(flatten_onto_white(&half).get_pixel(0, 0).0, [127, 127, 127]);
        let clear = DynamicImage::ImageRgba8(RgbaImage::from_pixel(1, 1, Rgba([0, 0, 0, 0])));
        assert_eq!(
            flatten_onto_white(&clear).get_pixel(0, 0).0,
            [255, 255, 255]
        );
    }
}
