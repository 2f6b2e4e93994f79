//! MCP message cleaning (T-MCP, `ferry mcp` over stdio): each line a client sends is
//! cleaned of text that is not Unicode before the JSON parser sees it. A cleaned line is
//! UTF-8, cleaning it again changes nothing, a line that already parses is left exactly
//! as it is, and a message whose only fault was such text parses, with the fault marked
//! where a tool refuses it.
#![no_main]

use std::borrow::Cow;

use ferry_tools::fuzzing::{clean_line, holds_not_unicode};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// A JSON message whose one string holds `data` as it stands: `\uXXXX` escapes kept (lone
/// surrogates too), bytes that are not UTF-8 kept, anything else escaped as JSON needs.
fn message(data: &[u8]) -> Vec<u8> {
    let mut line = br#"{"jsonrpc":"2.0","id":1,"params":{"text":""#.to_vec();
    let mut i = 0;
    while i < data.len() {
        let b = data[i];
        let escape = data
            .get(i..i + 6)
            .filter(|e| e[0] == b'\\' && e[1] == b'u' && e[2..].iter().all(u8::is_ascii_hexdigit));
        if let Some(escape) = escape {
            line.extend_from_slice(escape);
            i += 6;
            continue;
        }
        match b {
            b'"' => line.extend_from_slice(b"\\\""),
            b'\\' => line.extend_from_slice(b"\\\\"),
            0..=0x1f => line.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => line.push(b),
        }
        i += 1;
    }
    line.extend_from_slice(b"\"}}\n");
    line
}

fuzz_target!(|data: &[u8]| {
    // Any line.
    let cleaned = clean_line(data);
    let text = std::str::from_utf8(&cleaned).expect("a cleaned line is UTF-8");
    assert_eq!(
        &*clean_line(text.as_bytes()),
        text.as_bytes(),
        "cleaned twice"
    );
    if let Ok(raw) = std::str::from_utf8(data)
        && !raw.contains("\\u")
        && !raw.contains("\\U")
    {
        assert!(matches!(cleaned, Cow::Borrowed(_)));
    }
    if serde_json::from_slice::<Value>(data).is_ok() {
        assert_eq!(&*cleaned, data, "a line that parses is left as it is");
    }

    // A message whose only fault may be text that is not Unicode.
    let line = message(data);
    let cleaned = clean_line(&line);
    let value: Value = serde_json::from_slice(&cleaned)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&cleaned)));
    match serde_json::from_slice::<Value>(&line) {
        Ok(original) => assert_eq!(value, original),
        Err(_) => assert!(holds_not_unicode(&value), "the fault is not marked"),
    }
});
