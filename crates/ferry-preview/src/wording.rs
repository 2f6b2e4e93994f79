//! Small helpers that turn numbers and names into the words of a preview.

use crate::limits::NAME_SHOWN_MAX_CHARS;

/// `1234567` → `"1,234,567"`: long counts are easier to read grouped.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `count(1, "line", "lines")` → `"1 line"`, `count(3, …)` → `"3 lines"`.
pub(crate) fn count(n: u64, singular: &str, plural: &str) -> String {
    let noun = if n == 1 { singular } else { plural };
    format!("{} {noun}", grouped(n))
}

/// A size in binary units with one decimal, as people read file sizes.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Cuts a name from an untrusted source to a readable length and makes
/// control characters visible, so one member cannot flood or garble the preview.
pub(crate) fn shown_name(name: &str) -> String {
    shown_on_one_line(name, NAME_SHOWN_MAX_CHARS)
}

/// `text` on one line: at most `max_chars` characters, control characters escaped.
pub(crate) fn shown_on_one_line(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for (i, ch) in text.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        if ch.is_control() {
            out.extend(ch.escape_default());
        } else {
            out.push(ch);
        }
    }
    out
}

/// Turns an error message into a sentence of the preview text.
pub(crate) fn sentence(message: &str) -> String {
    let mut chars = message.chars();
    let Some(first) = chars.next() else {
        return String::new();
    };
    let mut out: String = first.to_uppercase().chain(chars).collect();
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn counts_with_plural() {
        assert_eq!(count(1, "line", "lines"), "1 line");
        assert_eq!(count(0, "line", "lines"), "0 lines");
        assert_eq!(count(2500, "row", "rows"), "2,500 rows");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
        assert_eq!(human_bytes(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn names_are_cut_and_made_visible() {
        assert_eq!(shown_name("a\nb"), "a\\nb");
        let long = "x".repeat(NAME_SHOWN_MAX_CHARS + 10);
        let shown = shown_name(&long);
        assert_eq!(shown.chars().count(), NAME_SHOWN_MAX_CHARS + 1);
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn sentences_start_upper_and_end_with_a_period() {
        assert_eq!(sentence("the file is damaged"), "The file is damaged.");
        assert_eq!(sentence("done."), "Done.");
        assert_eq!(sentence(""), "");
    }
}
