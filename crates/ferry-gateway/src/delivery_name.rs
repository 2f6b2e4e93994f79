//! Naming a delivered file (M-DELIVER).
//!
//! A delivery is named from, in order: the explicit `filename` of the request,
//! the response's `Content-Disposition`, the last segment of the URL, and
//! finally `attachment-<short id>`. Everything here returns the *raw* name; the
//! caller makes it safe (C-NAME) before it touches the file system.

use percent_encoding::percent_decode_str;

/// The name of a delivery, in the order of M-DELIVER: the explicit name (an
/// empty one counts as absent), else the `Content-Disposition` of the response,
/// else the last segment of `url`, else `attachment-<first 8 chars of random_id>`.
///
/// The result is raw: it may still be refused or rewritten by C-NAME.
pub fn choose_name(
    explicit: Option<&str>,
    content_disposition: Option<&[u8]>,
    url: &str,
    random_id: &str,
) -> String {
    if let Some(name) = explicit.filter(|name| !name.is_empty()) {
        return name.to_owned();
    }
    content_disposition
        .and_then(filename_from_content_disposition)
        .or_else(|| filename_from_url(url))
        .unwrap_or_else(|| fallback_name(random_id))
}

/// `attachment-<first 8 characters of id_hex>` (the whole id if it is shorter).
pub fn fallback_name(id_hex: &str) -> String {
    let short: String = id_hex.chars().take(8).collect();
    format!("attachment-{short}")
}

/// The last path segment of an absolute `http(s)` URL, percent-decoded as UTF-8.
///
/// The query and the fragment are ignored. `None` for another scheme, a
/// relative or unparseable URL, an empty path, a path ending in `/`, or a
/// segment that does not decode to UTF-8. An encoded slash (`a%2Fb`) is decoded
/// (`a/b`); C-NAME later keeps only the part after it.
pub fn filename_from_url(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let last = url.path_segments()?.next_back()?;
    if last.is_empty() {
        return None;
    }
    let name = percent_decode_str(last).decode_utf8().ok()?;
    (!name.is_empty()).then(|| name.into_owned())
}

/// The file name carried by a `Content-Disposition` value (RFC 6266).
///
/// `filename*` (RFC 8187: `charset'[language]'percent-encoded`, charset
/// `UTF-8` or `ISO-8859-1`, case-insensitive) wins over `filename` (a token or
/// a quoted-string with backslash escapes). A `filename*` that cannot be
/// decoded is ignored in favour of `filename`. Parameter names are
/// case-insensitive; whitespace around names, `=` and values is tolerated, and
/// `;` inside quoted strings is part of the value. The first occurrence of a
/// parameter counts. RFC 2231 continuations (`filename*0=`) are not supported.
///
/// `None` if neither parameter yields a non-empty, valid UTF-8 name.
pub fn filename_from_content_disposition(header: &[u8]) -> Option<String> {
    let params = parse_params(header);
    let find = |wanted: &[u8]| {
        params
            .iter()
            .find(|(name, _)| name.as_slice() == wanted)
            .map(|(_, value)| value.as_slice())
    };
    let extended = find(b"filename*").and_then(decode_ext_value);
    extended.or_else(|| {
        let value = find(b"filename")?;
        let name = String::from_utf8(value.to_vec()).ok()?;
        (!name.is_empty()).then_some(name)
    })
}

fn is_ows(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

fn trim_ows(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&byte| !is_ows(byte))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|&byte| !is_ows(byte))
        .map_or(start, |last| last + 1);
    &bytes[start..end]
}

/// The `name=value` parameters of a header value such as
/// `attachment; filename="a;b.pdf"; size=3`, names lowercased, quoted values
/// unescaped. Bare items without `=` (the disposition type) are skipped. An
/// unterminated quoted string ends the parse (nothing after it is trusted).
fn parse_params(header: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut params = Vec::new();
    let len = header.len();
    let mut i = 0;
    while i < len {
        while i < len && (header[i] == b';' || is_ows(header[i])) {
            i += 1;
        }
        if i >= len {
            break;
        }
        let name_start = i;
        while i < len && header[i] != b'=' && header[i] != b';' {
            i += 1;
        }
        let name = trim_ows(&header[name_start..i]).to_ascii_lowercase();
        if i >= len || header[i] == b';' {
            continue;
        }
        i += 1; // '='
        while i < len && is_ows(header[i]) {
            i += 1;
        }
        let value = if i < len && header[i] == b'"' {
            i += 1;
            let mut value = Vec::new();
            let mut closed = false;
            while i < len {
                match header[i] {
                    b'\\' if i + 1 < len => {
                        value.push(header[i + 1]);
                        i += 2;
                    }
                    b'"' => {
                        i += 1;
                        closed = true;
                        break;
                    }
                    byte => {
                        value.push(byte);
                        i += 1;
                    }
                }
            }
            if !closed {
                break;
            }
            // Anything between the closing quote and the next ';' is ignored.
            while i < len && header[i] != b';' {
                i += 1;
            }
            value
        } else {
            let start = i;
            while i < len && header[i] != b';' {
                i += 1;
            }
            trim_ows(&header[start..i]).to_vec()
        };
        if !name.is_empty() {
            params.push((name, value));
        }
    }
    params
}

/// Decodes an RFC 8187 `ext-value`: `charset'[language]'percent-encoded`.
/// `None` for an unknown charset, a malformed escape, invalid UTF-8 or an
/// empty result.
fn decode_ext_value(value: &[u8]) -> Option<String> {
    let mut parts = value.splitn(3, |&byte| byte == b'\'');
    let charset = trim_ows(parts.next()?);
    let _language = parts.next()?;
    let bytes = strict_percent_decode(parts.next()?)?;
    let name = if charset.eq_ignore_ascii_case(b"utf-8") {
        String::from_utf8(bytes).ok()?
    } else if charset.eq_ignore_ascii_case(b"iso-8859-1") {
        bytes.into_iter().map(char::from).collect()
    } else {
        return None;
    };
    (!name.is_empty()).then_some(name)
}

/// Percent-decoding that refuses a `%` not followed by two hex digits.
fn strict_percent_decode(input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' {
            let high = hex_value(*input.get(i + 1)?)?;
            let low = hex_value(*input.get(i + 2)?)?;
            out.push(high << 4 | low);
            i += 3;
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
    Some(out)
}

fn hex_value(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|digit| u8::try_from(digit).ok())
}

#[cfg(test)]
mod tests;
