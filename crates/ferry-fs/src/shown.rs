//! Names and paths as a person is shown them.
//!
//! A file name may hold characters that change how the text around it reads without
//! being seen themselves: a right-to-left override turns `invoice_\u{202E}fdp.exe` into
//! what looks like `invoice_exe.pdf`, a newline makes one notice look like two, a
//! zero-width space hides inside a familiar name, and a division slash draws a folder
//! that does not exist. [`shown_name`] spells each such character as a visible marker,
//! `⟨U+202E⟩`, so what a person reads is what is there. The web client's `format.js`
//! makes exactly the same characters visible; keep the two lists equal.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is spelled as a marker when shown: controls, bidirectional formatting,
/// invisible characters, and look-alikes of `/` and `\`.
pub fn is_hidden_or_spoofing(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Bidirectional marks, embeddings, overrides and isolates.
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            // Invisible: soft hyphen, grapheme joiner, fillers, zero-width characters,
            // line and paragraph separators, word joiner and invisible operators,
            // deprecated format characters, byte order mark, annotation marks, musical
            // formatting, tags.
            | '\u{00AD}' | '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
            | '\u{180E}' | '\u{200B}'..='\u{200D}' | '\u{2028}' | '\u{2029}'
            | '\u{2060}'..='\u{2064}' | '\u{206A}'..='\u{206F}' | '\u{3164}' | '\u{FEFF}'
            | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}' | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E007F}'
            // Blanks that pass for nothing or for a plain space: the ogham space mark,
            // typographic spaces, the narrow and the mathematical space, the ideographic
            // space, the braille blank.
            | '\u{1680}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
            | '\u{2800}'
            // Look-alikes of the path separator `/` and of `\`, the combining overlays
            // that draw one over a letter included.
            | '\u{2044}' | '\u{2215}' | '\u{2571}' | '\u{29F8}' | '\u{FF0F}'
            | '\u{0337}' | '\u{0338}'
            | '\u{2216}' | '\u{2572}' | '\u{29F5}' | '\u{29F9}' | '\u{FE68}' | '\u{FF3C}'
            | '\u{20E5}'
        )
}

/// `text` with every character of [`is_hidden_or_spoofing`] spelled as `⟨U+XXXX⟩`;
/// text without one comes back borrowed, unchanged.
pub fn shown_name(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden_or_spoofing) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_hidden_or_spoofing(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "⟨U+{:04X}⟩", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spoofing_characters_become_markers() {
        assert_eq!(
            shown_name("invoice_\u{202E}fdp.exe"),
            "invoice_⟨U+202E⟩fdp.exe"
        );
        assert_eq!(
            shown_name("a\nb\r\tc\u{0}"),
            "a⟨U+000A⟩b⟨U+000D⟩⟨U+0009⟩c⟨U+0000⟩"
        );
        assert_eq!(
            shown_name("re\u{200B}port\u{FEFF}.pdf"),
            "re⟨U+200B⟩port⟨U+FEFF⟩.pdf"
        );
        assert_eq!(
            shown_name("public\u{2215}attachments\u{2044}x"),
            "public⟨U+2215⟩attachments⟨U+2044⟩x"
        );
        assert_eq!(shown_name("\u{E0041}"), "⟨U+E0041⟩");
        assert_eq!(shown_name("\u{85}"), "⟨U+0085⟩", "C1 controls too");
        // Blanks that read as nothing or as a plain space, and a slash drawn over a letter.
        assert_eq!(
            shown_name("a\u{2800}b\u{3000}c\u{1680}d\u{2009}e"),
            "a⟨U+2800⟩b⟨U+3000⟩c⟨U+1680⟩d⟨U+2009⟩e"
        );
        assert_eq!(shown_name("pub\u{0338}lic"), "pub⟨U+0338⟩lic");
    }

    #[test]
    fn ordinary_names_are_left_alone() {
        for name in [
            "report.pdf",
            "Q2 report (final).pdf",
            "relatório.pdf",
            "תקציב.xlsx",
            "报告.docx",
            "notes 😀.md",
            "no\u{00A0}break.txt",
        ] {
            assert!(
                matches!(shown_name(name), Cow::Borrowed(n) if n == name),
                "{name}"
            );
        }
    }

    proptest! {
        #[test]
        fn shown_text_holds_no_hidden_character_and_shows_again_unchanged(input in "\\PC{0,64}|[\\x00-\\x1f\u{202a}-\u{202e}\u{200b}-\u{200d}a/]{0,32}") {
            let shown = shown_name(&input).into_owned();
            prop_assert!(!shown.chars().any(is_hidden_or_spoofing));
            prop_assert_eq!(shown_name(&shown).into_owned(), shown.clone());
        }
    }
}
