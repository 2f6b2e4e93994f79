//! A text's skeleton: one ASCII byte per visible character that could be part of a
//! marker, each with the byte range of the character it came from.

use unicode_normalization::UnicodeNormalization;

/// Stands for a character that can be no part of a marker.
const OTHER: u8 = 0;

pub(crate) struct Skeleton {
    /// Upper-case ASCII letters, `<`, `>`, or [`OTHER`].
    bytes: Vec<u8>,
    /// For each byte, the range in the text of the character it came from.
    spans: Vec<(usize, usize)>,
}

impl Skeleton {
    pub(crate) fn of(text: &str) -> Skeleton {
        let mut skeleton = Skeleton {
            bytes: Vec::with_capacity(text.len()),
            spans: Vec::with_capacity(text.len()),
        };
        for (start, c) in text.char_indices() {
            let before = skeleton.bytes.len();
            push_look(c, &mut skeleton.bytes);
            let span = (start, start + c.len_utf8());
            let added = skeleton.bytes.len() - before;
            skeleton.spans.extend(std::iter::repeat_n(span, added));
        }
        skeleton
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the skeleton holds `word` at `at`.
    pub(crate) fn starts_with_at(&self, at: usize, word: &[u8]) -> bool {
        self.bytes[at..].starts_with(word)
    }

    /// The text's byte range covering skeleton bytes `at..at + len`.
    pub(crate) fn span(&self, at: usize, len: usize) -> (usize, usize) {
        (self.spans[at].0, self.spans[at + len - 1].1)
    }
}

/// Appends what `c` looks like in a marker to `out`: nothing (it shows nothing, or
/// separates), one or more of `<`, `>` and upper-case letters, or [`OTHER`].
fn push_look(c: char, out: &mut Vec<u8>) {
    if c.is_ascii() {
        match c {
            '<' | '>' => out.push(c as u8),
            '_' | '-' => {}
            c if c.is_ascii_whitespace() => {}
            '0' => out.push(b'O'),
            c if c.is_ascii_alphabetic() => out.push(c.to_ascii_uppercase() as u8),
            _ => out.push(OTHER),
        }
        return;
    }
    if c.is_whitespace() || shows_nothing(c) || separator(c) {
        return;
    }
    if let Some(brackets) = bracket(c) {
        return out.extend_from_slice(brackets.as_bytes());
    }
    if let Some(letter) = latin_look_alike(c) {
        return out.push(letter);
    }
    // Compatibility forms: full-width and mathematical letters, `＜`, ligatures.
    let folded: String = std::iter::once(c).nfkc().collect();
    if folded.is_ascii() && !folded.is_empty() {
        return folded.chars().for_each(|f| push_look(f, out));
    }
    out.push(OTHER);
}

/// Characters that show nothing by themselves: Unicode's default ignorables (zero-width
/// spaces and joiners, soft hyphens, direction marks, variation selectors, tags) and
/// combining marks, which only change the letter before them.
fn shows_nothing(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF
        // Combining marks.
        | 0x0300..=0x036F | 0x0483..=0x0489 | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF
        | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// Look-alikes of `_` and `-`, which separate a marker's words.
fn separator(c: char) -> bool {
    matches!(
        c,
        '‐' | '‑'
            | '‒'
            | '–'
            | '—'
            | '―'
            | '−'
            | '‗'
            | 'ˍ'
            | '＿'
            | '﹍'
            | '﹎'
            | '﹏'
            | '－'
            | '﹣'
            | '⁃'
    )
}

/// Characters that look like one or more angle brackets.
fn bracket(c: char) -> Option<&'static str> {
    Some(match c {
        '‹' | '＜' | '﹤' | '\u{2329}' | '\u{3008}' | '⟨' | '❮' | '˂' | '⋖' | '≺' | 'ᐸ' | 'ᚲ'
        | '❬' | '❰' | '⦉' | '⦑' | '⧼' | '˱' | '⊲' | '⪡' | '⩽' | '≤' | '⧀' => {
            "<"
        }
        '›' | '＞' | '﹥' | '\u{232A}' | '\u{3009}' | '⟩' | '❯' | '˃' | '⋗' | '≻' | 'ᐳ' | '❭'
        | '❱' | '⦊' | '⦒' | '⧽' | '˲' | '⊳' | '⪢' | '⩾' | '≥' | '⧁' => ">",
        '«' | '≪' | '⟪' | '《' | '⪻' => "<<",
        '»' | '≫' | '⟫' | '》' | '⪼' => ">>",
        '⋘' | '⫷' => "<<<",
        '⋙' | '⫸' => ">>>",
        _ => return None,
    })
}

/// Letters of other scripts that look like the Latin letters markers are spelled with.
fn latin_look_alike(c: char) -> Option<u8> {
    Some(match c {
        'А' | 'а' | 'Α' | 'α' | 'ɑ' | 'ᴀ' | 'Ꭺ' | 'ꓮ' => b'A',
        'С' | 'с' | 'Ϲ' | 'ϲ' | 'ᴄ' | 'Ꮯ' | 'ꓚ' | 'ℂ' => b'C',
        'Ԁ' | 'ԁ' | 'ᴅ' | 'Ꭰ' | 'ꓓ' => b'D',
        'Е' | 'е' | 'Ε' | 'ε' | 'ᴇ' | 'Ꭼ' | 'ꓰ' | 'Ѐ' | 'Ё' | 'ѐ' | 'ё' => b'E',
        'ʟ' | 'Ꮮ' | 'ꓡ' | 'ӏ' | 'Ӏ' => b'L',
        'Ν' | 'ɴ' | 'ꓠ' => b'N',
        'О' | 'о' | 'Ο' | 'ο' | 'ᴏ' | 'Օ' | 'օ' | 'ꓳ' | 'σ' => b'O',
        'ʀ' | 'Ꭱ' | 'ꓣ' => b'R',
        'Т' | 'т' | 'Τ' | 'τ' | 'ᴛ' | 'Ꭲ' | 'ꓔ' => b'T',
        'Х' | 'х' | 'Χ' | 'χ' | 'ꓫ' | 'ⅹ' => b'X',
        _ => return None,
    })
}
