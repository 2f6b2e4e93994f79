//! Keeps every preview text within `PREVIEW_TEXT_MAX_BYTES`.

/// Appended when a preview was cut, so the model knows there is more.
pub const TRUNCATION_NOTE: &str = "\n… (truncated)";

/// Returns `text` unchanged when it fits in `max_bytes`; otherwise cuts it on a
/// char boundary (at a line end when one is near) and appends [`TRUNCATION_NOTE`],
/// the whole staying within `max_bytes`.
pub(crate) fn fit_to_budget(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut keep = max_bytes.saturating_sub(TRUNCATION_NOTE.len());
    while !text.is_char_boundary(keep) {
        keep -= 1;
    }
    // Whole lines read better than a line cut mid-word, unless that would
    // throw away more than half of what fits.
    if let Some(line_end) = text[..keep].rfind('\n')
        && line_end >= keep / 2
    {
        keep = line_end;
    }
    text.truncate(keep);
    text.push_str(TRUNCATION_NOTE);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::PREVIEW_TEXT_MAX_BYTES as MAX;

    #[test]
    fn below_and_at_the_limit_text_is_untouched() {
        for len in [MAX - 1, MAX] {
            let text = "a".repeat(len);
            assert_eq!(fit_to_budget(text.clone(), MAX), text);
        }
    }

    #[test]
    fn over_the_limit_text_is_cut_with_a_note() {
        let fitted = fit_to_budget("a".repeat(MAX + 1), MAX);
        assert!(fitted.len() <= MAX);
        assert!(fitted.ends_with(TRUNCATION_NOTE));
        assert!(fitted.starts_with("aaa"));
    }

    #[test]
    fn cuts_on_a_char_boundary() {
        // 3-byte chars put char boundaries at multiples of 3, never at the cut.
        for extra in 0..4 {
            let text = format!("{}{}", "x".repeat(extra), "€".repeat(MAX));
            let fitted = fit_to_budget(text, MAX);
            assert!(fitted.len() <= MAX);
            assert!(fitted.ends_with(TRUNCATION_NOTE));
        }
    }

    #[test]
    fn prefers_a_nearby_line_end() {
        let text = format!("{}\n{}", "a".repeat(MAX - 100), "b".repeat(200));
        let fitted = fit_to_budget(text, MAX);
        assert_eq!(
            fitted,
            format!("{}{TRUNCATION_NOTE}", "a".repeat(MAX - 100))
        );
    }

    #[test]
    fn a_tiny_budget_still_holds() {
        let fitted = fit_to_budget("hello world".to_owned(), 3);
        assert_eq!(fitted, TRUNCATION_NOTE);
    }
}
