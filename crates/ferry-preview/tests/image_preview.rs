//! Image previews and `model_image`.

mod fixtures;

use std::time::Instant;

use ferry_preview::{IMAGE_INPUT_MAX_BYTES, MODEL_IMAGE_MAX_BYTES, PreviewError};
use fixtures::{
    encode, file_with, gradient, model_image_of, png, png_declaring, preview_of, reopen,
    translucent,
};
use image::ImageFormat;

fn decode(bytes: &[u8]) -> image::DynamicImage {
    image::load_from_memory(bytes).unwrap()
}

#[test]
fn png_preview_has_size_and_a_thumbnail() {
    let preview = preview_of(&png(1024, 768), "shot.png");
    assert_eq!(preview.media_type, "image/png");
    assert!(
        preview.text.starts_with("PNG image, 1024 × 768 pixels."),
        "{}",
        preview.text
    );
    let thumbnail = preview.image.expect("a rendering");
    assert_eq!((thumbnail.width, thumbnail.height), (512, 384));
    assert_eq!(
        (thumbnail.source_width, thumbnail.source_height),
        (1024, 768)
    );
    let decoded = decode(&thumbnail.bytes);
    assert_eq!((decoded.width(), decoded.height()), (512, 384));
    assert!(thumbnail.bytes.len() <= ferry_preview::limits::THUMBNAIL_MAX_BYTES);
}

#[test]
fn jpeg_gif_and_webp_are_rendered() {
    let image = gradient(300, 200);
    for (format, label, media_type) in [
        (ImageFormat::Jpeg, "JPEG", "image/jpeg"),
        (ImageFormat::Gif, "GIF", "image/gif"),
        (ImageFormat::WebP, "WebP", "image/webp"),
    ] {
        let preview = preview_of(&encode(&image, format), "picture");
        assert_eq!(preview.media_type, media_type);
        assert!(
            preview
                .text
                .starts_with(&format!("{label} image, 300 × 200 pixels.")),
            "{}",
            preview.text
        );
        let thumbnail = preview.image.expect("a rendering");
        assert_eq!(
            (thumbnail.width, thumbnail.height),
            (300, 200),
            "never upscaled"
        );
    }
}

#[test]
fn a_truncated_png_is_described_without_a_rendering() {
    let mut bytes = png(400, 300);
    bytes.truncate(bytes.len() / 2);
    let preview = preview_of(&bytes, "cut.png");
    assert_eq!(preview.media_type, "image/png");
    assert!(
        preview.text.starts_with("PNG image, 400 × 300 pixels."),
        "{}",
        preview.text
    );
    assert!(
        preview.text.contains("damaged or truncated"),
        "{}",
        preview.text
    );
    assert!(preview.image.is_none());

    let error = model_image_of(&bytes).unwrap_err();
    assert_eq!(error.code(), "damaged_file", "{error}");
}

#[test]
fn a_png_that_is_only_a_signature_is_damaged() {
    let preview = preview_of(b"\x89PNG\r\n\x1a\n", "stub.png");
    assert!(
        preview.text.contains("damaged or truncated"),
        "{}",
        preview.text
    );
    let error = model_image_of(b"\x89PNG\r\n\x1a\n").unwrap_err();
    assert_eq!(error.code(), "damaged_file", "{error}");
}

#[test]
fn a_pixel_bomb_is_refused_from_its_header() {
    let bomb = png_declaring(20_000, 20_000);
    let started = Instant::now();
    let error = model_image_of(&bomb).unwrap_err();
    assert_eq!(error.code(), "image_too_large", "{error}");
    assert!(error.to_string().contains("20000×20000"), "{error}");
    assert!(started.elapsed().as_secs() < 2, "refused before decoding");

    let preview = preview_of(&bomb, "bomb.png");
    assert!(
        preview.text.contains("too large to decode"),
        "{}",
        preview.text
    );
}

#[test]
fn the_pixel_limit_is_inclusive() {
    // 10,000 × 10,000 is exactly the limit: accepted as far as the pixel
    // check goes (and then found to hold no data); one more row is refused.
    let at_limit = model_image_of(&png_declaring(10_000, 10_000)).unwrap_err();
    assert_eq!(at_limit.code(), "damaged_file", "{at_limit}");
    let over = model_image_of(&png_declaring(10_000, 10_001)).unwrap_err();
    assert_eq!(over.code(), "image_too_large", "{over}");
}

#[test]
fn model_image_scales_6000_by_4000_to_2000_by_1333() {
    let source = png(6000, 4000);
    let started = Instant::now();
    let rendered = model_image_of(&source).unwrap();
    let elapsed = started.elapsed();
    assert_eq!((rendered.width, rendered.height), (2000, 1333));
    assert_eq!(
        (rendered.source_width, rendered.source_height),
        (6000, 4000)
    );
    assert!(rendered.bytes.len() <= MODEL_IMAGE_MAX_BYTES);
    assert_eq!(rendered.mime, "image/jpeg", "large and opaque");
    let decoded = decode(&rendered.bytes);
    assert_eq!((decoded.width(), decoded.height()), (2000, 1333));
    if !cfg!(debug_assertions) {
        assert!(elapsed.as_secs_f64() < 5.0, "took {elapsed:?}");
    }
}

#[test]
fn model_image_keeps_small_images_as_they_are() {
    let rendered = model_image_of(&png(120, 80)).unwrap();
    assert_eq!((rendered.width, rendered.height), (120, 80));
    assert_eq!(rendered.mime, "image/png", "small images stay lossless");
}

#[test]
fn model_image_keeps_transparency_in_png() {
    let rendered = model_image_of(&encode(&translucent(900, 700), ImageFormat::Png)).unwrap();
    assert_eq!(rendered.mime, "image/png");
    let decoded = decode(&rendered.bytes);
    assert!(decoded.color().has_alpha());
}

#[test]
fn model_image_refuses_what_is_not_an_image() {
    let error = model_image_of(&fixtures::pdf(&["Hello"])).unwrap_err();
    assert_eq!(error.code(), "not_an_image");
    assert_eq!(
        error.to_string(),
        "not an image (detected application/pdf); use file_preview"
    );
    let empty = model_image_of(b"").unwrap_err();
    assert_eq!(empty.code(), "not_an_image");
}

#[test]
fn model_image_names_formats_it_cannot_decode() {
    // A little-endian TIFF header: an image, but not one of the decoded formats.
    let mut tiff = b"II*\x00\x08\x00\x00\x00".to_vec();
    tiff.extend_from_slice(&[0; 64]);
    let error = model_image_of(&tiff).unwrap_err();
    assert_eq!(error.code(), "unsupported_image_format", "{error}");
    assert!(
        error
            .to_string()
            .starts_with("image/tiff images cannot be decoded"),
        "{error}"
    );

    let preview = preview_of(&tiff, "scan.tif");
    assert_eq!(preview.media_type, "image/tiff");
    assert!(
        preview.text.contains("Only PNG, JPEG, GIF and WebP"),
        "{}",
        preview.text
    );
}

/// A valid PNG padded with zeros to `len` bytes; decoders stop at IEND.
fn padded_png(len: u64) -> (tempfile::NamedTempFile, u64) {
    let (fixture, _) = file_with(&png(64, 48));
    fixture.as_file().set_len(len).unwrap();
    (fixture, len)
}

#[test]
fn the_input_size_limit_is_inclusive() {
    for (len, accepted) in [
        (IMAGE_INPUT_MAX_BYTES - 1, true),
        (IMAGE_INPUT_MAX_BYTES, true),
        (IMAGE_INPUT_MAX_BYTES + 1, false),
    ] {
        let (fixture, size) = padded_png(len);
        let result = ferry_preview::model_image(&mut reopen(&fixture), size);
        match (accepted, result) {
            (true, Ok(rendered)) => assert_eq!((rendered.width, rendered.height), (64, 48)),
            (false, Err(error @ PreviewError::TooLarge { .. })) => {
                assert_eq!(error.code(), "file_too_large")
            }
            (_, other) => panic!("{len} bytes: unexpected {other:?}"),
        }
    }
}

#[test]
fn an_image_over_the_input_limit_is_previewed_from_its_header() {
    let (fixture, size) = padded_png(IMAGE_INPUT_MAX_BYTES + 1);
    let preview = ferry_preview::preview(&mut reopen(&fixture), "huge.png", size).unwrap();
    assert!(
        preview.text.starts_with("PNG image, 64 × 48 pixels."),
        "{}",
        preview.text
    );
    assert!(
        preview.text.contains("over the 67,108,864-byte limit"),
        "{}",
        preview.text
    );
    assert!(preview.image.is_none());
}
