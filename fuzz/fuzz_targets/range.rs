//! Conditional and range requests (M-GET): any `Range`, `If-Range` and `If-None-Match`
//! against a file of any length. A range served lies within the file, and names the
//! same bytes when asked for again in its plainest spelling; the validators match only
//! what RFC 9110's comparisons allow.
#![no_main]

use ferry_gateway::fuzzing::{
    RangeRequest, etag_for, if_none_match_hits, if_range_allows, parse_range,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Eight bytes of length, then the three headers, 0xff between them.
    if data.len() < 8 {
        return;
    }
    let (len, rest) = data.split_at(8);
    let len = u64::from_le_bytes(len.try_into().unwrap());
    let mut headers = rest
        .split(|&b| b == 0xff)
        .map(|h| std::str::from_utf8(h).ok());
    let range = headers.next().flatten();
    let if_range = headers.next().flatten();
    let if_none_match = headers.next().flatten();

    assert_eq!(parse_range(None, len), RangeRequest::Full);
    if let Some(range) = range {
        match parse_range(Some(range), len) {
            RangeRequest::Partial {
                start,
                end_inclusive,
            } => {
                assert!(
                    start <= end_inclusive && end_inclusive < len,
                    "{range:?} of {len}"
                );
                let (unit, _) = range.split_once('=').unwrap();
                assert!(unit.trim().eq_ignore_ascii_case("bytes"), "{range:?}");
                // Asked for again in its plainest spelling: the same bytes.
                let plain = format!("bytes={start}-{end_inclusive}");
                assert_eq!(
                    parse_range(Some(&plain), len),
                    RangeRequest::Partial {
                        start,
                        end_inclusive
                    }
                );
                // And to the end as a suffix, when it runs to the end.
                if end_inclusive == len - 1 {
                    let suffix = format!("bytes=-{}", len - start);
                    assert_eq!(
                        parse_range(Some(&suffix), len),
                        RangeRequest::Partial {
                            start,
                            end_inclusive
                        }
                    );
                }
            }
            RangeRequest::Unsatisfiable => {
                let (unit, _) = range.split_once('=').unwrap();
                assert!(unit.trim().eq_ignore_ascii_case("bytes"), "{range:?}");
            }
            RangeRequest::Full => {}
        }
    }

    let etag = etag_for(len, i128::from(len) * 7, len ^ 0x5a5a);
    let opaque = &etag[1..etag.len() - 1];
    assert!(etag.len() == 34 && opaque.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(if_range_allows(None, &etag));
    assert!(if_range_allows(Some(&etag), &etag));
    assert!(
        !if_range_allows(Some(&format!("W/{etag}")), &etag),
        "weak never matches"
    );
    if let Some(if_range) = if_range {
        // The strong comparison: exactly the tag, whitespace aside.
        assert_eq!(
            if_range_allows(Some(if_range), &etag),
            if_range.trim() == etag,
            "{if_range:?}"
        );
    }

    assert!(!if_none_match_hits(None, &etag));
    assert!(if_none_match_hits(Some(&etag), &etag));
    assert!(if_none_match_hits(Some(&format!(" W/{etag} ")), &etag));
    assert!(if_none_match_hits(Some("*"), &etag));
    if let Some(list) = if_none_match {
        if if_none_match_hits(Some(list), &etag) {
            assert!(list.trim() == "*" || list.contains(&etag), "{list:?}");
        }
        // A tag after any list without quotes is still found.
        if !list.contains('"') {
            assert!(if_none_match_hits(Some(&format!("{list}, {etag}")), &etag));
        }
    }
});
