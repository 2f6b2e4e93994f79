//! The first paragraph of a WordprocessingML body, without an XML library:
//! only `<w:p>`, `<w:t>`, `<w:tab/>` and `<w:br/>` matter for plain text.

/// Text of the first paragraph that has any, from `word/document.xml`.
pub(crate) fn first_paragraph(xml: &str) -> Option<String> {
    let mut paragraph = String::new();
    let mut in_paragraph = false;
    let mut in_text_run = false;
    let mut rest = xml;
    while let Some(open) = rest.find('<') {
        if in_text_run {
            paragraph.push_str(&unescape(&rest[..open]));
        }
        let after_open = &rest[open + 1..];
        let close = after_open.find('>')?;
        let tag = &after_open[..close];
        rest = &after_open[close + 1..];

        let self_closing = tag.ends_with('/');
        let name = tag
            .trim_end_matches('/')
            .split(|c: char| c.is_ascii_whitespace())
            .next()
            .unwrap_or_default();
        match name {
            "w:p" if !self_closing => {
                in_paragraph = true;
                paragraph.clear();
            }
            "/w:p" => {
                in_paragraph = false;
                if !paragraph.trim().is_empty() {
                    return Some(paragraph.trim().to_owned());
                }
            }
            "w:t" if in_paragraph && !self_closing => in_text_run = true,
            "/w:t" => in_text_run = false,
            "w:tab" if in_paragraph => paragraph.push('\t'),
            "w:br" if in_paragraph => paragraph.push('\n'),
            _ => {}
        }
    }
    None
}

/// Resolves the five predefined XML entities and numeric references.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let Some(semicolon) = after.find(';') else {
            out.push_str(&rest[amp..]);
            return out;
        };
        let entity = &after[..semicolon];
        match resolve_entity(entity) {
            Some(ch) => out.push(ch),
            None => {
                out.push('&');
                out.push_str(entity);
                out.push(';');
            }
        }
        rest = &after[semicolon + 1..];
    }
    out.push_str(rest);
    out
}

fn resolve_entity(entity: &str) -> Option<char> {
    match entity {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let number = entity.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_empty_paragraphs_and_joins_runs() {
        let xml = r#"<w:document><w:body><w:p/><w:p><w:pPr/></w:p>
            <w:p><w:r><w:t>Hello</w:t></w:r><w:r><w:t xml:space="preserve"> big &amp; </w:t><w:tab/><w:t>world</w:t></w:r></w:p>
            <w:p><w:r><w:t>second</w:t></w:r></w:p></w:body></w:document>"#;
        assert_eq!(first_paragraph(xml).as_deref(), Some("Hello big & \tworld"));
    }

    #[test]
    fn ignores_tags_that_only_start_like_a_paragraph() {
        let xml = "<w:p><w:proofErr/><w:pPr><w:pStyle w:val=\"x\"/></w:pPr><w:r><w:t>ok</w:t></w:r></w:p>";
        assert_eq!(first_paragraph(xml).as_deref(), Some("ok"));
    }

    #[test]
    fn malformed_input_gives_none_not_a_panic() {
        assert_eq!(first_paragraph(""), None);
        assert_eq!(first_paragraph("<w:p><w:t>cut"), None);
        assert_eq!(first_paragraph("<<<>>>&&&;;"), None);
        assert_eq!(
            first_paragraph("<w:p><w:t>é&#xFFFFFFFF;&#12;&bogus;&"),
            None
        );
    }

    #[test]
    fn resolves_entities() {
        assert_eq!(
            unescape("a&lt;b&gt;&#65;&#x42;&unknown;&"),
            "a<b>AB&unknown;&"
        );
    }
}
