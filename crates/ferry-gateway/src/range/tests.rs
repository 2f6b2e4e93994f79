use super::*;

use RangeRequest::{Full, Partial, Unsatisfiable};

fn range(header: &str, len: u64) -> RangeRequest {
    parse_range(Some(header), len)
}

fn part(start: u64, end_inclusive: u64) -> RangeRequest {
    Partial {
        start,
        end_inclusive,
    }
}

#[test]
fn absent_header_is_full() {
    assert_eq!(parse_range(None, 0), Full);
    assert_eq!(parse_range(None, 10), Full);
}

#[test]
fn bounded_ranges() {
    assert_eq!(range("bytes=0-0", 10), part(0, 0));
    assert_eq!(range("bytes=0-9", 10), part(0, 9));
    assert_eq!(range("bytes=2-5", 10), part(2, 5));
    assert_eq!(range("bytes=9-9", 10), part(9, 9));
    assert_eq!(range("bytes=3-3", 10), part(3, 3));
}

#[test]
fn end_is_clamped() {
    assert_eq!(range("bytes=5-100", 10), part(5, 9));
    assert_eq!(range("bytes=0-18446744073709551615", 10), part(0, 9));
    assert_eq!(range("bytes=0-0", 1), part(0, 0));
    assert_eq!(range("bytes=0-5", 1), part(0, 0));
}

#[test]
fn open_ranges() {
    assert_eq!(range("bytes=0-", 10), part(0, 9));
    assert_eq!(range("bytes=9-", 10), part(9, 9));
    assert_eq!(range("bytes=0-", 1), part(0, 0));
}

#[test]
fn suffix_ranges() {
    assert_eq!(range("bytes=-1", 10), part(9, 9));
    assert_eq!(range("bytes=-3", 10), part(7, 9));
    assert_eq!(range("bytes=-10", 10), part(0, 9));
    assert_eq!(range("bytes=-500", 10), part(0, 9));
    assert_eq!(range("bytes=-18446744073709551615", 10), part(0, 9));
    assert_eq!(range("bytes=-1", 1), part(0, 0));
    assert_eq!(range("bytes=-0", 10), Unsatisfiable);
}

#[test]
fn start_past_the_end_is_unsatisfiable() {
    assert_eq!(range("bytes=10-", 10), Unsatisfiable);
    assert_eq!(range("bytes=10-20", 10), Unsatisfiable);
    assert_eq!(range("bytes=1-", 1), Unsatisfiable);
    assert_eq!(
        range("bytes=18446744073709551615-", u64::MAX),
        Unsatisfiable
    );
}

#[test]
fn huge_lengths() {
    assert_eq!(
        range("bytes=18446744073709551614-", u64::MAX),
        part(u64::MAX - 1, u64::MAX - 1)
    );
    assert_eq!(
        range("bytes=-2", u64::MAX),
        part(u64::MAX - 2, u64::MAX - 1)
    );
    assert_eq!(range("bytes=0-", u64::MAX), part(0, u64::MAX - 1));
}

#[test]
fn empty_file() {
    for header in [
        "bytes=0-",
        "bytes=0-0",
        "bytes=0-10",
        "bytes=-1",
        "bytes=-0",
        "bytes=5-",
    ] {
        assert_eq!(range(header, 0), Unsatisfiable, "{header}");
    }
    for header in [
        "bytes=5-2",
        "bytes=abc",
        "items=0-1",
        "bytes=0-1,2-3",
        "bytes=-",
    ] {
        assert_eq!(range(header, 0), Full, "{header}");
    }
}

#[test]
fn invalid_is_ignored() {
    for header in [
        "",
        "bytes",
        "bytes=",
        "bytes=,",
        "bytes=-",
        "bytes=5-2",
        "bytes=1-0",
        "bytes=a-b",
        "bytes=1-b",
        "bytes=a-",
        "bytes=-a",
        "bytes=+1-2",
        "bytes=1-+2",
        "bytes=-+2",
        "bytes=--1",
        "bytes=1-2-3",
        "bytes=0x1-2",
        "bytes=1.5-2",
        "bytes=1 2-3",
        "bytes 0-1",
        "=0-1",
        "0-1",
        "bytes=٣-4",
    ] {
        assert_eq!(range(header, 10), Full, "{header:?}");
    }
}

#[test]
fn overflow_is_ignored() {
    for header in [
        "bytes=18446744073709551616-",
        "bytes=0-18446744073709551616",
        "bytes=-18446744073709551616",
        "bytes=99999999999999999999999999-99999999999999999999999999",
    ] {
        assert_eq!(range(header, 10), Full, "{header}");
    }
}

#[test]
fn leading_zeros_are_fine() {
    assert_eq!(
        range("bytes=0000000000000000000000002-0005", 10),
        part(2, 5)
    );
}

#[test]
fn other_units_are_ignored() {
    assert_eq!(range("items=0-1", 10), Full);
    assert_eq!(range("none", 10), Full);
    assert_eq!(range("bytesx=0-1", 10), Full);
}

#[test]
fn unit_is_case_insensitive() {
    assert_eq!(range("BYTES=0-1", 10), part(0, 1));
    assert_eq!(range("Bytes=0-1", 10), part(0, 1));
}

#[test]
fn whitespace_is_tolerated() {
    assert_eq!(range("  bytes = 2 - 5  ", 10), part(2, 5));
    assert_eq!(range("bytes=\t-3\t", 10), part(7, 9));
    assert_eq!(range("bytes= 4 -", 10), part(4, 9));
}

#[test]
fn multiple_ranges_are_served_whole() {
    assert_eq!(range("bytes=0-1,5-6", 10), Full);
    assert_eq!(range("bytes=0-1, -2", 10), Full);
    assert_eq!(range("bytes=20-30,40-50", 10), Full);
}

#[test]
fn empty_list_elements_are_skipped() {
    assert_eq!(range("bytes=0-1,", 10), part(0, 1));
    assert_eq!(range("bytes=, ,2-3", 10), part(2, 3));
}

#[test]
fn etag_is_strong_quoted_hex_and_stable() {
    let etag = etag_for(1234, 1_700_000_000_123_456_789, 42);
    assert_eq!(etag.len(), 34);
    assert!(etag.starts_with('"') && etag.ends_with('"'));
    assert!(
        etag[1..33]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // Pinned so that a change (which would invalidate every cache) is deliberate.
    assert_eq!(etag, PINNED_ETAG);
}

const PINNED_ETAG: &str = "\"88eb073745224c57f012d7daebb857fe\"";

#[test]
fn etag_depends_on_every_input() {
    let base = etag_for(10, 20, 30);
    assert_ne!(base, etag_for(11, 20, 30));
    assert_ne!(base, etag_for(10, 21, 30));
    assert_ne!(base, etag_for(10, 20, 31));
    assert_ne!(base, etag_for(10, -20, 30));
    assert_ne!(etag_for(0, 0, 0), etag_for(0, 0, 1));
    assert_ne!(etag_for(1, 0, 0), etag_for(0, 0, 1));
    let extreme = etag_for(u64::MAX, i128::MIN, u64::MAX);
    assert_eq!(extreme.len(), 34);
    assert_ne!(extreme, etag_for(u64::MAX, i128::MAX, u64::MAX));
}

#[test]
fn if_none_match() {
    let etag = etag_for(1, 2, 3);
    let other = etag_for(4, 5, 6);
    let weak = format!("W/{etag}");
    assert!(!if_none_match_hits(None, &etag));
    assert!(if_none_match_hits(Some("*"), &etag));
    assert!(if_none_match_hits(Some(" * "), &etag));
    assert!(if_none_match_hits(Some(&etag), &etag));
    assert!(if_none_match_hits(Some(&format!("  {etag}  ")), &etag));
    assert!(if_none_match_hits(Some(&weak), &etag), "weak comparison");
    assert!(if_none_match_hits(Some(&etag), &weak), "weak comparison");
    assert!(if_none_match_hits(Some(&format!("{other}, {etag}")), &etag));
    assert!(if_none_match_hits(Some(&format!("{other},{weak}")), &etag));
    assert!(if_none_match_hits(Some(&format!(",, {etag} ,")), &etag));
    assert!(!if_none_match_hits(Some(&other), &etag));
    assert!(!if_none_match_hits(
        Some(&format!("{other}, W/{other}")),
        &etag
    ));
    assert!(!if_none_match_hits(Some(""), &etag));
    assert!(!if_none_match_hits(Some("\"\""), &etag));
}

#[test]
fn if_none_match_unquoted_or_malformed_elements() {
    let etag = etag_for(1, 2, 3);
    let unquoted = etag.trim_matches('"');
    assert!(!if_none_match_hits(Some(unquoted), &etag));
    assert!(!if_none_match_hits(Some(&format!("w/{etag}")), &etag));
    assert!(!if_none_match_hits(Some("\"unterminated"), &etag));
    assert!(if_none_match_hits(Some(&format!("garbage, {etag}")), &etag));
    // The stray quote opens a tag that the first quote of ours closes, so
    // our tag is swallowed: no match (and no 304), which is the safe side.
    assert!(!if_none_match_hits(
        Some(&format!("\"unterminated, {etag}")),
        &etag
    ));
}

#[test]
fn if_none_match_comma_inside_a_tag() {
    assert!(if_none_match_hits(Some(r#""a,b", "c""#), r#""a,b""#));
    assert!(if_none_match_hits(Some(r#""a,b", "c""#), r#""c""#));
    assert!(!if_none_match_hits(Some(r#""a,b""#), r#""a""#));
    assert!(!if_none_match_hits(Some(r#""a,b""#), r#""b""#));
}

#[test]
fn if_range() {
    let etag = etag_for(1, 2, 3);
    let other = etag_for(4, 5, 6);
    assert!(if_range_allows(None, &etag));
    assert!(if_range_allows(Some(&etag), &etag));
    assert!(if_range_allows(Some(&format!(" {etag} ")), &etag));
    assert!(!if_range_allows(Some(&other), &etag));
    assert!(
        !if_range_allows(Some(&format!("W/{etag}")), &etag),
        "strong comparison"
    );
    assert!(
        !if_range_allows(Some(&etag), &format!("W/{etag}")),
        "strong comparison"
    );
    assert!(
        !if_range_allows(Some(&format!("{etag}, {etag}")), &etag),
        "a single tag only"
    );
    assert!(!if_range_allows(Some("*"), &etag));
    assert!(!if_range_allows(Some(""), &etag));
    assert!(!if_range_allows(Some(etag.trim_matches('"')), &etag));
}

#[test]
fn if_range_date_sends_the_whole_file() {
    let etag = etag_for(1, 2, 3);
    assert!(!if_range_allows(
        Some("Wed, 21 Oct 2015 07:28:00 GMT"),
        &etag
    ));
}
