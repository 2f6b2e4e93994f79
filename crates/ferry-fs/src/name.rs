//! Safe names for uploads and deliveries (spec core C-NAME), and the names people type
//! for folders and renames (M-DAILY).

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

use crate::FsError;

/// The longest name, in bytes, that `safe_name` returns (the usual file-system limit).
pub const NAME_MAX_BYTES: usize = 255;

/// Turns an outside name (an upload's filename, a URL segment) into one safe file name.
///
/// Keeps the base name, NFC-normalizes it, folds every run of characters other than
/// letters, digits, `.`, `_` and `-` into one `_`, drops leading dots, and shortens the
/// stem to fit [`NAME_MAX_BYTES`]. Refuses with [`FsError::UnsafeName`] what is left empty,
/// `.` or `..`.
pub fn safe_name(input: &str) -> Result<String, FsError> {
    let base = input.rsplit(['/', '\\']).next().unwrap_or("");
    let mut folded = String::with_capacity(base.len());
    let mut in_run = false;
    for c in base.nfc() {
        if c.is_alphanumeric() || matches!(c, '.' | '_' | '-') {
            folded.push(c);
            in_run = false;
        } else if !in_run {
            folded.push('_');
            in_run = true;
        }
    }
    let trimmed = folded.trim_start_matches('.');
    let name = shorten(trimmed, NAME_MAX_BYTES);
    if name.is_empty() || name == "." || name == ".." {
        return Err(FsError::UnsafeName(input.to_owned()));
    }
    Ok(name)
}

/// Cuts the stem (never the extension) on a character boundary until the name fits.
fn shorten(name: &str, max_bytes: usize) -> String {
    if name.len() <= max_bytes {
        return name.to_owned();
    }
    let (stem, ext) = match name.rfind('.') {
        // An extension longer than the budget is not worth keeping whole.
        Some(dot) if dot > 0 && name.len() - dot < max_bytes / 2 => name.split_at(dot),
        _ => (name, ""),
    };
    let mut cut = max_bytes - ext.len();
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{}", &stem[..cut], ext)
}

/// Where the characters that stand for raw bytes begin: byte `b` (0x80–0xFF) is
/// `U+10FF00 + b`, the last 128 code points of the last private-use plane.
const BYTE_CHAR_BASE: u32 = 0x10_FF00;

/// The character that stands for byte `b` (0x80–0xFF) of a name.
fn byte_char(b: u8) -> char {
    char::from_u32(BYTE_CHAR_BASE + u32::from(b)).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The byte a character stands for, if it is one of the 128 byte characters.
fn char_byte(c: char) -> Option<u8> {
    let b = u32::from(c).checked_sub(BYTE_CHAR_BASE)?;
    (0x80..=0xFF).contains(&b).then_some(b as u8)
}

/// A name read from disk as text that names the same entry when given back: UTF-8 names
/// are unchanged; a byte that does not decode, and each byte of a character that is
/// itself one of the byte characters, becomes its byte character. One to one, so a
/// listing's path always leads to the entry it shows.
pub fn name_from_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes)
        && !text.chars().any(|c| char_byte(c).is_some())
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() * 2);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if char_byte(c).is_some() {
                let mut buf = [0u8; 4];
                out.extend(c.encode_utf8(&mut buf).bytes().map(byte_char));
            } else {
                out.push(c);
            }
        }
        out.extend(chunk.invalid().iter().copied().map(byte_char));
    }
    Cow::Owned(out)
}

/// The bytes on disk of a name or path written as [`name_from_bytes`] writes it.
pub(crate) fn name_to_bytes(name: &str) -> Cow<'_, [u8]> {
    if !name.chars().any(|c| char_byte(c).is_some()) {
        return Cow::Borrowed(name.as_bytes());
    }
    let mut out = Vec::with_capacity(name.len());
    for c in name.chars() {
        match char_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
        }
    }
    Cow::Owned(out)
}

/// A name a person typed for a new folder or a rename (M-DAILY): any one path component,
/// NFC-normalized, spaces, accents and parentheses kept. Refused: an empty name, `.`,
/// `..`, a `/`, a control character (NUL included), a leading `.ferry-tmp` (the prefix of
/// ferry's own temporaries) and more than [`NAME_MAX_BYTES`] bytes once normalized.
pub fn typed_name(input: &str) -> Result<String, FsError> {
    let refuse = |why| {
        Err(FsError::UnusableName {
            name: input.to_owned(),
            why,
        })
    };
    let name: String = input.nfc().collect();
    if name.is_empty() {
        return refuse("it is empty");
    }
    if name == "." || name == ".." {
        return refuse("`.` and `..` name the folder itself and its parent");
    }
    if name.contains('/') {
        return refuse("a name cannot hold `/`");
    }
    if name.chars().any(char::is_control) {
        return refuse("a name cannot hold control characters (NUL, tabs, line breaks)");
    }
    if crate::is_temporary(&name) {
        return refuse("names starting with `.ferry-tmp` are ferry's own temporaries");
    }
    if name.len() > NAME_MAX_BYTES {
        return refuse("a name is at most 255 bytes");
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_name_keeps_what_people_type_and_refuses_what_cannot_be_a_name() {
        for (typed, kept) in [
            ("Reports 2026", "Reports 2026"),
            ("Q2 (final) – résumé", "Q2 (final) – résumé"),
            ("e\u{301}te\u{301}", "\u{e9}t\u{e9}"),
            (" leading space", " leading space"),
            (".hidden", ".hidden"),
            ("...", "..."),
        ] {
            assert_eq!(typed_name(typed).unwrap(), kept, "{typed:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a\0b",
            "tab\there",
            "line\nbreak",
            "\u{85}",
            ".ferry-tmp-x",
        ] {
            assert!(
                matches!(typed_name(bad), Err(FsError::UnusableName { .. })),
                "{bad:?}"
            );
        }
        // The limit, in bytes once normalized: 255 kept, 256 refused.
        assert_eq!(typed_name(&"a".repeat(255)).unwrap().len(), 255);
        assert!(typed_name(&"a".repeat(256)).is_err());
        assert_eq!(typed_name(&"é".repeat(127)).unwrap().len(), 254);
        assert!(
            typed_name(&"e\u{301}".repeat(128)).is_err(),
            "256 bytes once composed"
        );
    }
    use proptest::prelude::*;

    fn ok(input: &str) -> String {
        safe_name(input).unwrap()
    }

    #[test]
    fn spec_examples() {
        assert_eq!(ok("../../etc/passwd"), "passwd");
        assert_eq!(
            ok(r"C:\Users\a\Q2 report (final).pdf"),
            "Q2_report_final_.pdf"
        );
        assert_eq!(ok(".env.pdf"), "env.pdf");
        assert_eq!(ok("relatório.pdf"), "relatório.pdf");
        assert!(matches!(safe_name("..."), Err(FsError::UnsafeName(_))));
        assert_eq!(ok("a\u{0000}b.txt"), "a_b.txt");
    }

    #[test]
    fn refusals() {
        for bad in ["", ".", "..", "a/", "dir\\", "/", "....", "../.."] {
            assert!(safe_name(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn nfc_normalizes_decomposed_input() {
        // "o" followed by a combining acute accent becomes the single code point.
        assert_eq!(ok("relato\u{301}rio.pdf"), "relatório.pdf");
    }

    #[test]
    fn runs_fold_to_one_underscore() {
        assert_eq!(ok("a  \t$$b.txt"), "a_b.txt");
        assert_eq!(ok("<script>.md"), "_script_.md");
        assert_eq!(ok("a\nb"), "a_b");
    }

    #[test]
    fn long_names_keep_their_extension() {
        let at_limit = format!("{}.pdf", "a".repeat(NAME_MAX_BYTES - 4));
        assert_eq!(ok(&at_limit), at_limit);
        let over = format!("{}.pdf", "a".repeat(NAME_MAX_BYTES - 3));
        let got = ok(&over);
        assert_eq!(got.len(), NAME_MAX_BYTES);
        assert!(got.ends_with(".pdf"));
        let under = format!("{}.pdf", "a".repeat(NAME_MAX_BYTES - 5));
        assert_eq!(ok(&under), under);
    }

    #[test]
    fn shortening_respects_char_boundaries() {
        let name = format!("{}.txt", "é".repeat(200));
        let got = ok(&name);
        assert!(got.len() <= NAME_MAX_BYTES);
        assert!(got.ends_with(".txt"));
    }

    #[test]
    fn names_that_are_not_utf8_round_trip_and_utf8_ones_stay_as_they_are() {
        for text in ["report.pdf", "relatório.pdf", "a%ffb", "", "\u{10FF7F}"] {
            assert_eq!(name_from_bytes(text.as_bytes()), text);
        }
        assert_eq!(name_from_bytes(b"caf\xe9.txt"), "caf\u{10FFE9}.txt");
        // A byte character already in a name is written byte by byte, so it cannot be
        // taken for the raw byte it stands for.
        let lookalike = "caf\u{10FFE9}.txt";
        assert_ne!(name_from_bytes(lookalike.as_bytes()), lookalike);
    }

    proptest! {
        #[test]
        fn any_bytes_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let text = name_from_bytes(&bytes).into_owned();
            let back = name_to_bytes(&text).into_owned();
            prop_assert_eq!(&back, &bytes);
            let again = name_from_bytes(&back).into_owned();
            prop_assert_eq!(again, text);
        }

        #[test]
        fn result_is_always_one_safe_component(input in "\\PC{0,300}") {
            if let Ok(name) = safe_name(&input) {
                prop_assert!(!name.is_empty() && name.len() <= NAME_MAX_BYTES);
                prop_assert!(!name.contains(['/', '\\', '\0']));
                prop_assert!(!name.starts_with('.'));
                prop_assert_eq!(safe_name(&name).unwrap(), name.clone());
            }
        }
    }
}
