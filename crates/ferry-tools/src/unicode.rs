//! Text that is not Unicode, in a message from the client.
//!
//! JSON may spell a lone UTF-16 surrogate (`"\ud800"`), and a client may send bytes that
//! are not UTF-8 at all; the JSON parser rejects either, and the MCP transport then drops
//! the whole message, leaving the client waiting for an answer that never comes. So each
//! message from stdio is first cleaned: every such spelling becomes U+FDD0, a Unicode
//! noncharacter (reserved for exactly this internal use), and a tool whose arguments
//! hold one refuses with an error the model can act on.

use serde_json::Value;

/// Stands where the client sent text that is not Unicode.
pub const NOT_UNICODE: char = '\u{FDD0}';
const NOT_UNICODE_ESCAPE: &[u8] = b"\\uFDD0";

/// One message line with every lone surrogate escape and invalid UTF-8 sequence
/// replaced by [`NOT_UNICODE`]; a clean line comes back unchanged.
pub fn clean_line(line: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let text = match std::str::from_utf8(line) {
        Ok(text) if !text.contains("\\u") && !text.contains("\\U") => {
            return std::borrow::Cow::Borrowed(line);
        }
        Ok(_) => line.to_vec(),
        Err(_) => String::from_utf8_lossy(line)
            .replace('\u{FFFD}', &NOT_UNICODE.to_string())
            .into_bytes(),
    };
    std::borrow::Cow::Owned(replace_lone_surrogates(&text))
}

fn replace_lone_surrogates(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'\\' {
            out.push(text[i]);
            i += 1;
            continue;
        }
        match hex_escape(text, i) {
            Some(0xD800..=0xDBFF) => {
                match hex_escape(text, i + 6) {
                    // A proper pair: keep both halves.
                    Some(0xDC00..=0xDFFF) => {
                        out.extend_from_slice(&text[i..i + 12]);
                        i += 12;
                    }
                    _ => {
                        out.extend_from_slice(NOT_UNICODE_ESCAPE);
                        i += 6;
                    }
                }
            }
            Some(0xDC00..=0xDFFF) => {
                out.extend_from_slice(NOT_UNICODE_ESCAPE);
                i += 6;
            }
            Some(_) => {
                out.extend_from_slice(&text[i..i + 6]);
                i += 6;
            }
            // Any other escape (`\\`, `\"`, `\n`…): copy both bytes, so an escaped
            // backslash is never read as the start of another escape.
            None => {
                out.extend_from_slice(&text[i..(i + 2).min(text.len())]);
                i += 2;
            }
        }
    }
    out
}

/// The code unit of a `\uXXXX` escape at `at`.
fn hex_escape(text: &[u8], at: usize) -> Option<u32> {
    let escape = text.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(&escape[2..]).ok()?, 16).ok()
}

/// Whether any string in `value` (keys included) holds [`NOT_UNICODE`].
pub(crate) fn holds_not_unicode(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains(NOT_UNICODE),
        Value::Array(items) => items.iter().any(holds_not_unicode),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.contains(NOT_UNICODE) || holds_not_unicode(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaned(line: &str) -> String {
        String::from_utf8(clean_line(line.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn lone_surrogates_become_the_noncharacter_and_pairs_stay() {
        assert_eq!(cleaned(r#"{"a":"x\ud800y"}"#), r#"{"a":"x\uFDD0y"}"#);
        assert_eq!(cleaned(r#"{"a":"\udc00"}"#), r#"{"a":"\uFDD0"}"#);
        assert_eq!(
            cleaned(r#"{"a":"\ud83d\ude00"}"#),
            r#"{"a":"\ud83d\ude00"}"#
        );
        assert_eq!(
            cleaned(r#"{"a":"\\ud800"}"#),
            r#"{"a":"\\ud800"}"#,
            "an escaped backslash"
        );
        assert_eq!(cleaned(r#"{"a":"\u00e9\n"}"#), r#"{"a":"\u00e9\n"}"#);
        let value: Value = serde_json::from_slice(&clean_line(br#"{"a":"\ud800"}"#)).unwrap();
        assert!(holds_not_unicode(&value));
    }

    #[test]
    fn invalid_utf8_becomes_the_noncharacter() {
        let line = b"{\"a\":\"caf\xe9\"}";
        let value: Value = serde_json::from_slice(&clean_line(line)).unwrap();
        assert_eq!(value["a"], "caf\u{FDD0}");
        assert!(matches!(
            clean_line(b"{\"a\":1}"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
