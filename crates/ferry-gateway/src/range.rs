//! Conditional and range requests for downloads (M-GET): `Range`, `ETag`,
//! `If-None-Match` and `If-Range` (RFC 9110 §13 and §14).

use sha2::{Digest, Sha256};

/// What to answer to a `Range` header for a representation of a known length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeRequest {
    /// No usable range: send the whole representation (`200`).
    Full,
    /// Send bytes `start..=end_inclusive` (`206`); always within the file.
    Partial {
        /// The first byte sent.
        start: u64,
        /// The last byte sent.
        end_inclusive: u64,
    },
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
mod tests;
