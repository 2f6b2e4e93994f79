//! Target dimensions: fit within a square, keep the aspect ratio, never upscale.

/// The largest size with the aspect ratio of `width`×`height` whose sides are
/// at most `max_side`; the source size itself when it already fits.
pub(crate) fn fit_within(width: u32, height: u32, max_side: u32) -> (u32, u32) {
    let longer = width.max(height);
    if longer <= max_side {
        return (width, height);
    }
    let scale = |side: u32| -> u32 {
        // Rounded to nearest, in integers so 6000×4000 → 2000×1333 exactly.
        let scaled =
            (u64::from(side) * u64::from(max_side) + u64::from(longer) / 2) / u64::from(longer);
        u32::try_from(scaled).unwrap_or(max_side).clamp(1, max_side)
    };
    (scale(width), scale(height))
}

/// `width`×`height` with each side kept at `keep_percent` (at least one pixel).
pub(crate) fn shrink(width: u32, height: u32, keep_percent: u32) -> (u32, u32) {
    let side = |value: u32| {
        let kept = u64::from(value) * u64::from(keep_percent) / 100;
        u32::try_from(kept).unwrap_or(value).max(1)
    };
    (side(width), side(height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landscape_and_portrait_fit_the_square() {
        assert_eq!(fit_within(6000, 4000, 2000), (2000, 1333));
        assert_eq!(fit_within(4000, 6000, 2000), (1333, 2000));
        assert_eq!(fit_within(2001, 2001, 2000), (2000, 2000));
    }

    #[test]
    fn never_upscales() {
        assert_eq!(fit_within(10, 20, 2000), (10, 20));
        assert_eq!(fit_within(2000, 2000, 2000), (2000, 2000));
    }

    #[test]
    fn extreme_ratios_keep_one_pixel() {
        assert_eq!(fit_within(100_000, 1, 2000), (2000, 1));
        assert_eq!(fit_within(u32::MAX, u32::MAX, 2000), (2000, 2000));
    }

    #[test]
    fn shrinking_stops_at_one_pixel() {
        assert_eq!(shrink(2000, 1333, 75), (1500, 999));
        assert_eq!(shrink(1, 1, 75), (1, 1));
    }
}
