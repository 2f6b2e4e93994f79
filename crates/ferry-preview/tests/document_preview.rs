//! Previews of PDFs, zip containers and tar archives, sound and broken.

mod fixtures;

use fixtures::{docx, gzip, pdf, preview_of, tar, zip};

#[test]
fn pdf_gives_page_count_and_first_page_text() {
    let preview = preview_of(&pdf(&["Quarterly report", "Second page"]), "report.pdf");
    assert_eq!(preview.media_type, "application/pdf");
    let text = &preview.text;
    assert!(text.starts_with("PDF document, 2 pages."), "{text}");
    assert!(text.contains("Quarterly report"), "{text}");
    assert!(!text.contains("Second page"), "only the first page: {text}");
}

#[test]
fn a_truncated_pdf_is_reported_not_fatal() {
    let whole = pdf(&["Hello"]);
    for cut in [whole.len() / 2, 40, 9] {
        let preview = preview_of(&whole[..cut], "cut.pdf");
        assert_eq!(preview.media_type, "application/pdf");
        assert!(
            preview.text.contains("PDF") && !preview.text.is_empty(),
            "{cut}: {}",
            preview.text
        );
    }
}

#[test]
fn garbage_after_a_pdf_signature_is_damaged() {
    let mut bytes = b"%PDF-1.7\n".to_vec();
    bytes.extend((0..5000u32).map(|i| (i * 31 % 256) as u8));
    let preview = preview_of(&bytes, "garbage.pdf");
    assert!(
        preview.text.contains("damaged or truncated"),
        "{}",
        preview.text
    );
}

#[test]
fn hostile_pdf_nesting_does_not_crash() {
    let mut bytes = b"%PDF-1.4\n1 0 obj\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'[', 200_000));
    bytes.extend_from_slice(b"\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n");
    let preview = preview_of(&bytes, "deep.pdf");
    assert_eq!(preview.media_type, "application/pdf");
    assert!(
        preview.text.contains("No page could be found") || preview.text.contains("damaged"),
        "{}",
        preview.text
    );
}

#[test]
fn docx_is_told_from_zip_and_lists_members() {
    let preview = preview_of(&docx(&["Dear reader,", "Second paragraph."]), "letter.docx");
    assert_eq!(
        preview.media_type,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    );
    let text = &preview.text;
    assert!(text.contains("(zip container), 3 members"), "{text}");
    assert!(text.contains("First paragraph: Dear reader,"), "{text}");
    assert!(text.contains("word/document.xml"), "{text}");
    assert!(text.contains("[Content_Types].xml"), "{text}");
}

#[test]
fn docx_content_is_judged_by_content_not_name() {
    let preview = preview_of(&docx(&["x"]), "renamed.bin");
    assert_eq!(
        preview.media_type,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    );
}

#[test]
fn plain_zip_lists_members_with_sizes_and_caps_the_list() {
    let names: Vec<String> = (0..60).map(|i| format!("data/file-{i:02}.txt")).collect();
    let content = vec![b'x'; 2048];
    let members: Vec<(&str, &[u8])> = names
        .iter()
        .map(|name| (name.as_str(), content.as_slice()))
        .collect();
    let preview = preview_of(&zip(&members), "bundle.zip");
    assert_eq!(preview.media_type, "application/zip");
    let text = &preview.text;
    assert!(
        text.starts_with("Zip archive (zip container), 60 members, 120.0 KiB uncompressed."),
        "{text}"
    );
    assert!(text.contains("data/file-00.txt  2.0 KiB"), "{text}");
    assert!(text.contains("data/file-49.txt"), "{text}");
    assert!(!text.contains("data/file-50.txt"), "{text}");
    assert!(text.contains("… and 10 more"), "{text}");
}

#[test]
fn a_truncated_zip_is_reported_not_fatal() {
    let whole = zip(&[("a.txt", b"hello hello hello"), ("b.txt", b"world")]);
    let preview = preview_of(&whole[..whole.len() - 30], "cut.zip");
    assert!(
        preview.text.contains("damaged or truncated"),
        "{}",
        preview.text
    );
    assert!(preview.text.contains("zip"), "{}", preview.text);
}

#[test]
fn tar_lists_entries_from_headers() {
    let bytes = tar(&[("docs/a.txt", b"alpha"), ("docs/b.md", &[b'b'; 3000])]);
    let preview = preview_of(&bytes, "bundle.tar");
    assert_eq!(preview.media_type, "application/x-tar");
    let text = &preview.text;
    assert!(text.starts_with("tar archive, 4 entries"), "{text}");
    assert!(text.contains("docs/ (folder)"), "{text}");
    assert!(text.contains("docs/a.txt  5 B"), "{text}");
    assert!(text.contains("docs/b.md  2.9 KiB"), "{text}");
    assert!(text.contains("latest -> docs/"), "{text}");
}

#[test]
fn tar_gz_is_listed_through_the_compression() {
    let bytes = gzip(&tar(&[("docs/a.txt", b"alpha")]));
    let preview = preview_of(&bytes, "bundle.tar.gz");
    assert_eq!(preview.media_type, "application/gzip");
    let text = &preview.text;
    assert!(
        text.starts_with("tar archive, gzip-compressed, 3 entries"),
        "{text}"
    );
    assert!(text.contains("docs/a.txt  5 B"), "{text}");
}

#[test]
fn many_tar_entries_are_capped() {
    let names: Vec<String> = (0..120).map(|i| format!("f{i:03}")).collect();
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|name| (name.as_str(), &b"x"[..]))
        .collect();
    let preview = preview_of(&gzip(&tar(&files)), "many.tgz");
    assert!(preview.text.contains("122 entries"), "{}", preview.text);
    assert!(preview.text.contains("… and 72 more"), "{}", preview.text);
}

#[test]
fn a_truncated_tar_gz_is_reported_not_fatal() {
    let names: Vec<String> = (0..40).map(|i| format!("f{i:03}")).collect();
    let noise: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|name| (name.as_str(), noise.as_slice()))
        .collect();
    let whole = gzip(&tar(&files));
    let preview = preview_of(&whole[..whole.len() / 2], "cut.tar.gz");
    assert!(
        preview.text.contains("damaged or truncated"),
        "{}",
        preview.text
    );

    let header_only = preview_of(&whole[..12], "stub.tar.gz");
    assert!(
        header_only.text.contains("damaged or truncated"),
        "{}",
        header_only.text
    );
}

#[test]
fn gzip_without_tar_says_so() {
    let preview = preview_of(&gzip(b"just some text, compressed\n"), "notes.txt.gz");
    assert_eq!(preview.media_type, "application/gzip");
    assert!(
        preview.text.contains("does not hold a tar archive"),
        "{}",
        preview.text
    );
}

#[test]
fn a_pdf_over_the_size_limit_is_not_opened() {
    use ferry_preview::limits::PDF_INPUT_MAX_BYTES;
    let (fixture, _) = fixtures::file_with(&pdf(&["Hello"]));
    fixture.as_file().set_len(PDF_INPUT_MAX_BYTES + 1).unwrap();
    let mut file = fixtures::reopen(&fixture);
    let preview = ferry_preview::preview(&mut file, "big.pdf", PDF_INPUT_MAX_BYTES + 1).unwrap();
    assert_eq!(preview.media_type, "application/pdf");
    assert!(
        preview.text.contains("limit for opening a PDF"),
        "{}",
        preview.text
    );
}

#[test]
fn a_long_first_paragraph_leaves_room_for_the_member_list() {
    let long = "word ".repeat(5000);
    let preview = preview_of(&docx(&[&long]), "long.docx");
    assert!(
        preview.text.contains("First paragraph: word word"),
        "{}",
        preview.text
    );
    assert!(
        preview.text.contains("word/document.xml"),
        "{}",
        preview.text
    );
    assert!(!preview.text.ends_with(ferry_preview::TRUNCATION_NOTE));
}
