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
