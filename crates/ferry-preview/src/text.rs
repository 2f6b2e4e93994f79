//! Preview of plain text: a short summary, then the first lines.

use std::io::{self, Read, Seek};

use crate::limits::{TEXT_HEAD_READ_MAX_BYTES, TEXT_SCAN_MAX_BYTES};
use crate::read::{decode_head, read_head, utf8_sequence_len};
use crate::wording::{count, human_bytes};

/// What one bounded pass over a text file learned.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TextStats {
    pub lines: u64,
    pub crlf_line_ends: u64,
    pub lf_line_ends: u64,
    pub valid_utf8: bool,
    /// False when the scan stopped at `TEXT_SCAN_MAX_BYTES` before the end.
    pub scanned_whole_file: bool,
}

/// Counts lines and line endings and checks UTF-8 over at most `TEXT_SCAN_MAX_BYTES`.
pub(crate) fn scan_text<R: Read + Seek>(reader: &mut R, size: u64) -> io::Result<TextStats> {
    reader.rewind()?;
    let mut limited = reader.take(TEXT_SCAN_MAX_BYTES);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut utf8 = Utf8Validator::default();
    let mut stats = TextStats::default();
    let mut previous_byte = None;
    loop {
        let n = match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        let bytes = &chunk[..n];
        utf8.feed(bytes);
        for (i, &byte) in bytes.iter().enumerate() {
            if byte == b'\n' {
                let before = if i == 0 {
                    previous_byte
                } else {
                    Some(bytes[i - 1])
                };
                if before == Some(b'\r') {
                    stats.crlf_line_ends += 1;
                } else {
                    stats.lf_line_ends += 1;
                }
            }
        }
        previous_byte = bytes.last().copied();
    }
    stats.scanned_whole_file = size <= TEXT_SCAN_MAX_BYTES;
    stats.valid_utf8 = utf8.finish(stats.scanned_whole_file);
    let unterminated_last_line = previous_byte.is_some_and(|byte| byte != b'\n');
    stats.lines = stats.crlf_line_ends
        + stats.lf_line_ends
        + u64::from(unterminated_last_line && stats.scanned_whole_file);
    Ok(stats)
}

/// Checks UTF-8 across chunk boundaries without holding more than a few bytes.
#[derive(Default)]
struct Utf8Validator {
    /// Start of a char split by the previous chunk.
    carry: Vec<u8>,
    invalid: bool,
}

impl Utf8Validator {
    fn feed(&mut self, mut bytes: &[u8]) {
        if self.invalid {
            return;
        }
        if let Some(&lead) = self.carry.first() {
            let missing = utf8_sequence_len(lead).saturating_sub(self.carry.len());
            if bytes.len() < missing {
                self.carry.extend_from_slice(bytes);
                return;
            }
            self.carry.extend_from_slice(&bytes[..missing]);
            if std::str::from_utf8(&self.carry).is_err() {
                self.invalid = true;
                return;
            }
            self.carry.clear();
            bytes = &bytes[missing..];
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => {}
            // Only the start of a char is missing its end: keep it for the next chunk.
            Err(error) if error.error_len().is_none() => {
                self.carry.extend_from_slice(&bytes[error.valid_up_to()..]);
            }
            Err(_) => self.invalid = true,
        }
    }

    /// A char left incomplete is invalid only at the true end of the file.
    fn finish(&self, reached_end: bool) -> bool {
        !self.invalid && (self.carry.is_empty() || !reached_end)
    }
}

/// The preview of a text file.
pub(crate) fn preview_text<R: Read + Seek>(reader: &mut R, size: u64) -> io::Result<String> {
    let stats = scan_text(reader, size)?;
    let head = read_head(reader, TEXT_HEAD_READ_MAX_BYTES)?;
    let decoded = decode_head(&head, size <= TEXT_HEAD_READ_MAX_BYTES);
    let mut out = summary(&stats);
    out.push_str("\n\n");
    out.push_str(&decoded.text);
    Ok(out)
}

fn summary(stats: &TextStats) -> String {
    let scanned = human_bytes(TEXT_SCAN_MAX_BYTES);
    let mut out = if stats.valid_utf8 {
        "UTF-8 text".to_owned()
    } else {
        "Text that is not valid UTF-8 (perhaps another encoding; undecodable bytes show as \u{fffd})"
            .to_owned()
    };
    if stats.scanned_whole_file {
        out.push_str(&format!(", {}", count(stats.lines, "line", "lines")));
    } else {
        out.push_str(&format!(
            ", at least {} (counted in the first {scanned})",
            count(stats.lines, "line", "lines")
        ));
    }
    match (stats.crlf_line_ends, stats.lf_line_ends) {
        (0, _) => {}
        (_, 0) => out.push_str(", CRLF (Windows) line endings, shown below as LF"),
        _ => out.push_str(", mixed CRLF and LF line endings, shown below as LF"),
    }
    out.push('.');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn scan(bytes: &[u8]) -> TextStats {
        scan_text(&mut Cursor::new(bytes.to_vec()), bytes.len() as u64).unwrap()
    }

    #[test]
    fn counts_lines_with_and_without_final_newline() {
        assert_eq!(scan(b"").lines, 0);
        assert_eq!(scan(b"a").lines, 1);
        assert_eq!(scan(b"a\n").lines, 1);
        assert_eq!(scan(b"a\nb").lines, 2);
        assert_eq!(scan(b"\n\n").lines, 2);
    }

    #[test]
    fn tells_crlf_from_lf() {
        let stats = scan(b"a\r\nb\r\nc\n");
        assert_eq!((stats.crlf_line_ends, stats.lf_line_ends), (2, 1));
    }

    #[test]
    fn utf8_checks_hold_across_chunk_boundaries() {
        // Put a 4-byte char across every possible split of the 64 KiB chunk.
        for offset in 1..4 {
            let mut bytes = vec![b'a'; 64 * 1024 - offset];
            bytes.extend_from_slice("😀".as_bytes());
            bytes.extend_from_slice(b"tail");
            assert!(scan(&bytes).valid_utf8, "offset {offset}");
            let mut broken = bytes.clone();
            let at = 64 * 1024 - offset + 1;
            broken[at] = b'x';
            assert!(!scan(&broken).valid_utf8, "offset {offset}");
        }
    }

    #[test]
    fn an_incomplete_char_at_the_end_is_invalid() {
        assert!(!scan(&"é".as_bytes()[..1]).valid_utf8);
        assert!(!scan(b"ok \xff").valid_utf8);
        assert!(scan("ok é".as_bytes()).valid_utf8);
    }

    #[test]
    fn a_crlf_split_across_chunks_still_counts_as_crlf() {
        let mut bytes = vec![b'a'; 64 * 1024 - 1];
        bytes.extend_from_slice(b"\r\n");
        let stats = scan(&bytes);
        assert_eq!((stats.crlf_line_ends, stats.lf_line_ends), (1, 0));
    }
}
