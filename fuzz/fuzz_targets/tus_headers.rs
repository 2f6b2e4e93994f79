//! A resumable upload's headers (tus 1.0 at `/v1/uploads`): any `Tus-Resumable`,
//! `Upload-Length`, `Upload-Metadata`, `Upload-Offset` and `Upload-Checksum`, in any
//! number and spelling. What a creation declares fits the largest file and names a
//! file; a number read is the header's digits; a checksum read was asked for as sha256.
#![no_main]

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use ferry_gateway::fuzzing::{TUS_HEADERS, tus_headers};
use libfuzzer_sys::fuzz_target;

/// The headers a byte picks, so most inputs speak of what the readers read; the picks
/// past them name a header the readers ignore.
fn name_of(pick: u8) -> HeaderName {
    let name = TUS_HEADERS
        .get(usize::from(pick) % (TUS_HEADERS.len() + 1))
        .copied()
        .unwrap_or("x-other");
    HeaderName::from_static(name)
}

fuzz_target!(|data: &[u8]| {
    // Eight bytes of the largest file, then headers, 0xff between them: each a byte
    // picking its name, then its value.
    if data.len() < 8 {
        return;
    }
    let (max, rest) = data.split_at(8);
    let max = u64::from_le_bytes(max.try_into().unwrap());
    let mut headers = HeaderMap::new();
    for header in rest.split(|&b| b == 0xff) {
        let Some((&pick, value)) = header.split_first() else {
            continue;
        };
        let name = name_of(pick);
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.append(name, value);
        }
    }
    let read = tus_headers(&headers, max);
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(read.version.is_ok(), text("tus-resumable") == Some("1.0.0"));
    if let Ok((length, name, _project, folder)) = &read.creation {
        assert!(*length <= max, "{length} over {max}");
        assert!(!name.is_empty());
        assert!(!headers.contains_key("upload-defer-length"));
        assert_ne!(folder.as_deref(), Some("public"));
        let digits = text("upload-length").unwrap();
        assert_eq!(digits.parse::<u64>().ok(), Some(*length));
    }
    if let Ok(Some(offset)) = read.offset {
        let digits = text("upload-offset").unwrap();
        assert!(digits.bytes().all(|b| b.is_ascii_digit()));
        assert_eq!(digits.parse::<u64>().ok(), Some(offset));
    }
    if let Ok(Some(_)) = read.checksum {
        let value = text("upload-checksum").unwrap();
        assert!(
            value
                .get(..6)
                .is_some_and(|a| a.eq_ignore_ascii_case("sha256"))
        );
    }
});
