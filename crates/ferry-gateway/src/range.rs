//! Conditional and range requests for downloads (M-GET): `Range`, `ETag`,
//! `If-None-Match` and `If-Range` (RFC 9110 §13 and §14).

use sha2::{Digest, Sha256};

/// What to answer to a `Range` header for a representation of a known length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeRequest {
    /// No usable range: send the whole representation (`200`).
    Full,
    /// Send bytes `start..=end_inclusive` (`206`); always within the file.
    Partial { start: u64, end_inclusive: u64 },
    /// The range starts past the end (`416` with `Content-Range: bytes */len`).
    Unsatisfiable,
}

/// Interprets a `Range` header holding a single byte range (RFC 9110 §14.1.2):
/// `bytes=a-b`, `bytes=a-` and the suffix form `bytes=-n`.
///
/// - The end is clamped to `len - 1`; a start at or past `len` (so any range on
///   an empty file), and the suffix `-0`, are [`RangeRequest::Unsatisfiable`].
/// - An absent or syntactically invalid header (including `bytes=5-2` and
///   numbers that overflow `u64`), and a unit other than `bytes`, are ignored
///   as the RFC allows: [`RangeRequest::Full`].
/// - Several ranges (`bytes=0-1,5-6`) also give [`RangeRequest::Full`]: the
///   whole representation is served instead of `multipart/byteranges`.
///
/// The unit is case-insensitive and whitespace around the parts is tolerated.
pub fn parse_range(header: Option<&str>, len: u64) -> RangeRequest {
    match header.and_then(single_byte_range) {
        None => RangeRequest::Full,
        Some(spec) => resolve(spec, len),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeSpec {
    /// `a-b`, with `a <= b`.
    Bounded { first: u64, last: u64 },
    /// `a-`
    From { first: u64 },
    /// `-n`
    Suffix { length: u64 },
}

/// The one range of a valid `bytes=` header; `None` when the header should be
/// ignored (another unit, bad syntax, overflow, zero or several ranges).
fn single_byte_range(header: &str) -> Option<RangeSpec> {
    let (unit, set) = header.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    // Empty list elements are allowed by the list syntax (RFC 9110 §5.6.1).
    let mut specs = set
        .split(',')
        .map(str::trim)
        .filter(|spec| !spec.is_empty());
    let spec = specs.next()?;
    if specs.next().is_some() {
        return None;
    }
    let (first, last) = spec.split_once('-')?;
    match (first.trim(), last.trim()) {
        ("", "") => None,
        ("", length) => Some(RangeSpec::Suffix {
            length: decimal(length)?,
        }),
        (first, "") => Some(RangeSpec::From {
            first: decimal(first)?,
        }),
        (first, last) => {
            let (first, last) = (decimal(first)?, decimal(last)?);
            (first <= last).then_some(RangeSpec::Bounded { first, last })
        }
    }
}

/// ASCII digits only (no sign), within `u64`.
fn decimal(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn resolve(spec: RangeSpec, len: u64) -> RangeRequest {
    let Some(last_byte) = len.checked_sub(1) else {
        return RangeRequest::Unsatisfiable;
    };
    match spec {
        RangeSpec::Bounded { first, .. } | RangeSpec::From { first } if first >= len => {
            RangeRequest::Unsatisfiable
        }
        RangeSpec::Bounded { first, last } => RangeRequest::Partial {
            start: first,
            end_inclusive: last.min(last_byte),
        },
        RangeSpec::From { first } => RangeRequest::Partial {
            start: first,
            end_inclusive: last_byte,
        },
        RangeSpec::Suffix { length: 0 } => RangeRequest::Unsatisfiable,
        RangeSpec::Suffix { length } => RangeRequest::Partial {
            start: len - length.min(len),
            end_inclusive: last_byte,
        },
    }
}

/// A strong ETag, `"<32 hex digits>"`, for a file of this length, modification
/// time and inode. Stable across processes and versions of Rust (SHA-256 of the
/// fixed-width values), and it does not reveal the inode number.
pub fn etag_for(len: u64, mtime_nanos: i128, inode: u64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"ferry-etag-v1\0");
    hasher.update(len.to_le_bytes());
    hasher.update(mtime_nanos.to_le_bytes());
    hasher.update(inode.to_le_bytes());
    let digest = hasher.finalize();
    format!("\"{}\"", ferry_fs::hex(&digest[..16]))
}

/// Whether `If-None-Match` matches `etag`, so a `GET` should answer `304`.
///
/// `*` matches (the file exists). Otherwise the header is a list of entity
/// tags compared with the weak comparison (RFC 9110 §13.1.2): `W/"x"` matches
/// `"x"`. Malformed list elements are skipped. An absent header never matches.
pub fn if_none_match_hits(header: Option<&str>, etag: &str) -> bool {
    let Some(header) = header else {
        return false;
    };
    let header = header.trim();
    if header == "*" {
        return true;
    }
    let Some(own) = whole_entity_tag(etag) else {
        return false;
    };
    entity_tags(header)
        .iter()
        .any(|tag| tag.opaque == own.opaque)
}

/// Whether a `Range` may be honoured given `If-Range` (RFC 9110 §13.1.5).
///
/// Absent: yes. An entity tag: only if it matches `etag` with the strong
/// comparison (neither is weak, the opaque tags are equal). The date form is
/// not evaluated and counts as not matching, so the whole file is sent: always
/// correct, merely less economical than comparing it with `Last-Modified`.
/// Anything malformed also counts as not matching.
pub fn if_range_allows(header: Option<&str>, etag: &str) -> bool {
    let Some(header) = header else {
        return true;
    };
    match (whole_entity_tag(header), whole_entity_tag(etag)) {
        (Some(theirs), Some(own)) => !theirs.weak && !own.weak && theirs.opaque == own.opaque,
        _ => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntityTag<'a> {
    weak: bool,
    /// The tag between the quotes.
    opaque: &'a str,
}

/// An entity tag at the start of `input`, and what follows it.
fn split_entity_tag(input: &str) -> Option<(EntityTag<'_>, &str)> {
    let (weak, rest) = match input.strip_prefix("W/") {
        Some(rest) => (true, rest),
        None => (false, input),
    };
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    Some((
        EntityTag {
            weak,
            opaque: &rest[..end],
        },
        &rest[end + 1..],
    ))
}

/// `input` (surrounding whitespace aside) is exactly one entity tag.
fn whole_entity_tag(input: &str) -> Option<EntityTag<'_>> {
    match split_entity_tag(input.trim())? {
        (tag, "") => Some(tag),
        _ => None,
    }
}

/// The entity tags of a comma-separated list. A comma may occur inside a
/// quoted tag, so the list is scanned rather than split; an element that does
/// not start with a tag is skipped up to the next comma.
fn entity_tags(list: &str) -> Vec<EntityTag<'_>> {
    let mut tags = Vec::new();
    let mut rest = list;
    loop {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        if rest.is_empty() {
            return tags;
        }
        match split_entity_tag(rest) {
            Some((tag, after)) => {
                tags.push(tag);
                rest = after;
            }
            None => rest = rest.find(',').map_or("", |comma| &rest[comma..]),
        }
    }
}

#[cfg(test)]
mod tests {
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
}
