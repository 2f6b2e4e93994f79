//! Bounded reads shared by the per-format previews.

use std::io::{self, Read, Seek};

/// Up to `max_bytes` from the start of `reader`.
pub(crate) fn read_head<R: Read + Seek>(reader: &mut R, max_bytes: u64) -> io::Result<Vec<u8>> {
    reader.rewind()?;
    let mut head = Vec::new();
    reader.take(max_bytes).read_to_end(&mut head)?;
    Ok(head)
}

/// The head of a file as text.
pub(crate) struct DecodedHead {
    /// Lossy UTF-8, line endings turned into LF.
    pub text: String,
    /// Whether some bytes were not valid UTF-8 (shown as U+FFFD).
    pub had_invalid_utf8: bool,
}

/// Decodes a head read with [`read_head`]; a char cut in half by the read
/// limit is dropped rather than reported as invalid.
pub(crate) fn decode_head(head: &[u8], is_whole_file: bool) -> DecodedHead {
    let usable = if is_whole_file {
        head
    } else {
        &head[..complete_utf8_prefix_len(head)]
    };
    let had_invalid_utf8 = std::str::from_utf8(usable).is_err();
    let lossy = String::from_utf8_lossy(usable);
    let text = lossy.strip_prefix('\u{feff}').unwrap_or(&lossy);
    DecodedHead {
        text: text.replace("\r\n", "\n"),
        had_invalid_utf8,
    }
}

/// Length of `bytes` without a trailing, incomplete UTF-8 sequence.
fn complete_utf8_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(error) if error.error_len().is_none() => error.valid_up_to(),
        // An invalid byte earlier on: look only at the last few bytes, where a
        // cut could have split a char.
        Err(_) => {
            let tail_start = bytes.len().saturating_sub(3);
            (tail_start..bytes.len())
                .find(|&start| {
                    let lead = bytes[start];
                    let needed = utf8_sequence_len(lead);
                    needed > bytes.len() - start
                })
                .unwrap_or(bytes.len())
        }
    }
}

/// Bytes in the UTF-8 sequence that starts with `lead` (1 for anything else).
pub(crate) fn utf8_sequence_len(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_a_char_split_by_the_read_limit() {
        let bytes = "hé".as_bytes();
        let cut = &bytes[..bytes.len() - 1];
        let decoded = decode_head(cut, false);
        assert_eq!(decoded.text, "h");
        assert!(!decoded.had_invalid_utf8);
    }

    #[test]
    fn a_split_char_at_the_end_of_the_file_is_invalid() {
        let bytes = "hé".as_bytes();
        let decoded = decode_head(&bytes[..bytes.len() - 1], true);
        assert!(decoded.had_invalid_utf8);
    }

    #[test]
    fn invalid_bytes_are_reported_and_replaced() {
        let decoded = decode_head(b"caf\xe9 ok \xe2\x82", false);
        assert!(decoded.had_invalid_utf8);
        assert_eq!(decoded.text, "caf\u{fffd} ok ");
    }

    #[test]
    fn crlf_and_bom_are_normalised() {
        let decoded = decode_head("\u{feff}a\r\nb\r\n".as_bytes(), true);
        assert_eq!(decoded.text, "a\nb\n");
    }
}
