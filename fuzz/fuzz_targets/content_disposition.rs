//! `Content-Disposition` both ways: built for a download from any name a file may have,
//! and read from any header a delivered URL's server answers with (M-DELIVER). What is
//! built is a valid header that reads back as the very name; what is read is a name.
#![no_main]

use ferry_gateway::fuzzing::{
    choose_name, content_disposition, filename_from_content_disposition, filename_from_url,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Any header a server sends.
    if let Some(name) = filename_from_content_disposition(data) {
        assert!(!name.is_empty());
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(name) = filename_from_url(text) {
        assert!(!name.is_empty());
    }
    let chosen = choose_name(None, Some(data), text, "0123456789abcdef");
    assert!(!chosen.is_empty());

    // A download of a file named `text`: visible ASCII and spaces only, so any client
    // and proxy carries it, and read back it is the name exactly.
    let header = content_disposition(text);
    assert!(
        header.bytes().all(|b| b == b' ' || b.is_ascii_graphic()),
        "{header:?}"
    );
    let expected = (!text.is_empty()).then(|| text.to_owned());
    assert_eq!(
        filename_from_content_disposition(header.as_bytes()),
        expected
    );
    // A client that knows only `filename` gets an ASCII stand-in of as many characters.
    let (plain, extended) = header.split_once("; filename*=").unwrap();
    assert!(extended.starts_with("UTF-8''"));
    let fallback = filename_from_content_disposition(plain.as_bytes());
    assert_eq!(
        fallback.as_ref().map(|f| f.chars().count()),
        expected.as_ref().map(|t| t.chars().count())
    );
    if let Some(fallback) = fallback {
        assert!(
            fallback
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        );
    }
});
