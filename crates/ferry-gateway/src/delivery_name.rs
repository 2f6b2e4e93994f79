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
mod tests {
    use super::*;

    fn cd(header: &str) -> Option<String> {
        filename_from_content_disposition(header.as_bytes())
    }

    #[test]
    fn quoted_name_with_semicolon() {
        assert_eq!(
            cd(r#"attachment; filename="a;b.pdf""#).as_deref(),
            Some("a;b.pdf")
        );
    }

    #[test]
    fn quoted_name_with_escaped_quote_and_backslash() {
        assert_eq!(
            cd(r#"attachment; filename="say \"hi\" \\ there.txt""#).as_deref(),
            Some(r#"say "hi" \ there.txt"#)
        );
    }

    #[test]
    fn token_name_and_other_params() {
        assert_eq!(
            cd("attachment; filename=report.pdf; size=12").as_deref(),
            Some("report.pdf")
        );
        assert_eq!(
            cd("inline;filename=report.pdf").as_deref(),
            Some("report.pdf")
        );
    }

    #[test]
    fn semicolon_and_param_name_inside_another_quoted_value() {
        assert_eq!(
            cd(r#"attachment; foo="x; filename=evil.exe"; filename=good.txt"#).as_deref(),
            Some("good.txt")
        );
    }

    #[test]
    fn whitespace_and_case_tolerant() {
        assert_eq!(
            cd("  Attachment ;  FileName  =  \"a b.pdf\"  ; ").as_deref(),
            Some("a b.pdf")
        );
        assert_eq!(
            cd("attachment;\tFILENAME* = utf-8''x.txt").as_deref(),
            Some("x.txt")
        );
    }

    #[test]
    fn extended_name_wins_in_either_order() {
        let expected = Some("relatório.pdf");
        assert_eq!(
            cd(r#"attachment; filename="relatorio.pdf"; filename*=UTF-8''relat%C3%B3rio.pdf"#)
                .as_deref(),
            expected
        );
        assert_eq!(
            cd(r#"attachment; filename*=UTF-8''relat%C3%B3rio.pdf; filename="relatorio.pdf""#)
                .as_deref(),
            expected
        );
    }

    #[test]
    fn extended_name_with_language_and_lowercase_charset() {
        assert_eq!(
            cd("attachment; filename*=utf-8'pt-BR'relat%C3%B3rio%20final.pdf").as_deref(),
            Some("relatório final.pdf")
        );
    }

    #[test]
    fn extended_name_quoted_by_a_lenient_server() {
        assert_eq!(
            cd(r#"attachment; filename*="UTF-8''a%20b.txt""#).as_deref(),
            Some("a b.txt")
        );
    }

    #[test]
    fn extended_name_iso_8859_1() {
        assert_eq!(
            cd("attachment; filename*=ISO-8859-1''caf%E9.txt").as_deref(),
            Some("café.txt")
        );
        assert_eq!(
            cd("attachment; filename*=iso-8859-1'fr'%C0%20la%20carte").as_deref(),
            Some("À la carte")
        );
    }

    #[test]
    fn raw_utf8_in_quoted_filename() {
        assert_eq!(
            cd("attachment; filename=\"relatório.pdf\"").as_deref(),
            Some("relatório.pdf")
        );
    }

    #[test]
    fn invalid_utf8_in_filename_is_none() {
        assert_eq!(
            filename_from_content_disposition(b"attachment; filename=\"caf\xe9.txt\""),
            None
        );
    }

    #[test]
    fn malformed_extended_name_falls_back_to_filename() {
        for header in [
            "attachment; filename*=UTF-8''bad%ZZ.txt; filename=plain.txt",
            "attachment; filename*=UTF-8''bad%4; filename=plain.txt",
            "attachment; filename*=UTF-8''%FF%FE.txt; filename=plain.txt",
            "attachment; filename*=KOI8-R''%C1.txt; filename=plain.txt",
            "attachment; filename*=no-quotes.txt; filename=plain.txt",
            "attachment; filename*=UTF-8''; filename=plain.txt",
        ] {
            assert_eq!(cd(header).as_deref(), Some("plain.txt"), "{header}");
        }
    }

    #[test]
    fn malformed_or_empty_is_none() {
        for header in [
            "",
            "attachment",
            "attachment;",
            "attachment; filename=",
            "attachment; filename=\"\"",
            "attachment; filename=\"unterminated.txt",
            "attachment; filename*=UTF-8''bad%ZZ",
            "attachment; filename*=UTF-8''%C3",
            "attachment; name=\"field\"",
            "attachment; =x.txt",
        ] {
            assert_eq!(cd(header), None, "{header}");
        }
    }

    #[test]
    fn unterminated_quote_hides_the_rest() {
        assert_eq!(
            cd("attachment; foo=\"x; filename=evil.txt"),
            None,
            "a filename inside an unterminated quoted string is not a parameter"
        );
    }

    #[test]
    fn first_occurrence_wins() {
        assert_eq!(
            cd("attachment; filename=a.txt; filename=b.txt").as_deref(),
            Some("a.txt")
        );
    }

    #[test]
    fn url_last_segment() {
        assert_eq!(
            filename_from_url("https://example.com/files/report.pdf").as_deref(),
            Some("report.pdf")
        );
        assert_eq!(
            filename_from_url("http://example.com/report.pdf?x=1&y=/z.txt#frag/w.txt").as_deref(),
            Some("report.pdf")
        );
    }

    #[test]
    fn url_percent_decoded() {
        assert_eq!(
            filename_from_url("https://example.com/relat%C3%B3rio.pdf").as_deref(),
            Some("relatório.pdf")
        );
        assert_eq!(
            filename_from_url("https://example.com/a%20b.txt").as_deref(),
            Some("a b.txt")
        );
        assert_eq!(
            filename_from_url("https://example.com/a b.txt").as_deref(),
            Some("a b.txt")
        );
    }

    #[test]
    fn url_encoded_slash_is_decoded_raw() {
        assert_eq!(
            filename_from_url("https://example.com/dir/a%2Fb.txt").as_deref(),
            Some("a/b.txt")
        );
    }

    #[test]
    fn url_without_a_name() {
        for url in [
            "https://example.com",
            "https://example.com/",
            "https://example.com/files/",
            "https://example.com/files/?name=a.txt",
            "https://example.com/#a.txt",
            "https://example.com/a/%2e%2e",
            "https://example.com/%FF.bin",
            "ftp://example.com/a.txt",
            "file:///etc/passwd",
            "/relative/a.txt",
            "a.txt",
            "",
        ] {
            assert_eq!(filename_from_url(url), None, "{url}");
        }
    }

    #[test]
    fn fallback() {
        assert_eq!(fallback_name("0123456789abcdef"), "attachment-01234567");
        assert_eq!(fallback_name("abc"), "attachment-abc");
    }

    #[test]
    fn choose_name_order() {
        let cd = Some(&b"attachment; filename=\"from-cd.txt\""[..]);
        let url = "https://example.com/from-url.txt";
        let id = "deadbeefcafe";
        assert_eq!(choose_name(Some("given.txt"), cd, url, id), "given.txt");
        assert_eq!(choose_name(Some(""), cd, url, id), "from-cd.txt");
        assert_eq!(choose_name(None, cd, url, id), "from-cd.txt");
        assert_eq!(
            choose_name(None, Some(b"attachment"), url, id),
            "from-url.txt"
        );
        assert_eq!(choose_name(None, None, url, id), "from-url.txt");
        assert_eq!(
            choose_name(None, None, "https://example.com/", id),
            "attachment-deadbeef"
        );
    }
}
