//! Previews of text, tables, JSON, empty and unknown files.

mod fixtures;

use ferry_preview::{PREVIEW_TEXT_MAX_BYTES, TRUNCATION_NOTE};
use fixtures::preview_of;

#[test]
fn plain_text_shows_line_count_and_head() {
    let preview = preview_of(b"first line\nsecond line\nthird", "notes.txt");
    assert_eq!(preview.media_type, "text/plain");
    assert_eq!(preview.size, 28);
    assert!(
        preview.text.starts_with("UTF-8 text, 3 lines."),
        "{}",
        preview.text
    );
    assert!(preview.text.ends_with("first line\nsecond line\nthird"));
    assert!(preview.image.is_none());
}

#[test]
fn sha256_covers_the_whole_file() {
    let preview = preview_of(b"abc", "abc.txt");
    assert_eq!(
        preview.sha256,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn crlf_line_endings_are_noted_and_normalised() {
    let preview = preview_of(b"alpha\r\nbeta\r\ngamma\r\n", "windows.txt");
    assert!(preview.text.contains("3 lines"), "{}", preview.text);
    assert!(preview.text.contains("CRLF"), "{}", preview.text);
    assert!(preview.text.ends_with("alpha\nbeta\ngamma\n"));
    assert!(!preview.text.contains('\r'));
}

#[test]
fn text_in_another_encoding_is_flagged() {
    // "café" in Latin-1: invalid UTF-8, so content sniffing calls it binary,
    // but the name says text and there is no NUL byte.
    let preview = preview_of(b"caf\xe9 au lait\n", "menu.txt");
    assert_eq!(preview.media_type, "text/plain");
    assert!(preview.text.contains("not valid UTF-8"), "{}", preview.text);
    assert!(preview.text.contains("caf\u{fffd} au lait"));
}

#[test]
fn markdown_is_named_by_its_extension() {
    let preview = preview_of(b"# Title\n\nBody\n", "README.md");
    assert_eq!(preview.media_type, "text/markdown");
    assert!(preview.text.contains("# Title"));
}

#[test]
fn csv_shows_header_shape_and_rows() {
    let mut csv = String::from("id,name,city\n");
    for i in 0..100 {
        csv.push_str(&format!("{i},\"Person, {i}\",Town {i}\n"));
    }
    let preview = preview_of(csv.as_bytes(), "people.csv");
    assert_eq!(preview.media_type, "text/csv");
    let text = &preview.text;
    assert!(text.contains("comma-separated"), "{text}");
    assert!(text.contains("3 columns"), "{text}");
    assert!(text.contains("100 data rows"), "{text}");
    assert!(text.contains("Columns: id | name | city"), "{text}");
    assert!(text.contains("19,\"Person, 19\",Town 19"), "{text}");
    assert!(
        !text.contains("Town 20\n"),
        "only the first rows are shown: {text}"
    );
}

#[test]
fn semicolon_csv_is_sniffed() {
    let preview = preview_of(b"a;b;c;d\n1;2;3;4\n", "export.csv");
    assert!(
        preview.text.contains("semicolon-separated"),
        "{}",
        preview.text
    );
    assert!(preview.text.contains("4 columns"), "{}", preview.text);
    assert!(preview.text.contains("1 data row "), "{}", preview.text);
}

#[test]
fn tsv_uses_tabs() {
    let preview = preview_of(b"x\ty\n1\t2\n3\t4\n", "grid.tsv");
    assert_eq!(preview.media_type, "text/tab-separated-values");
    assert!(preview.text.contains("tab-separated"), "{}", preview.text);
    assert!(preview.text.contains("2 columns"), "{}", preview.text);
    assert!(preview.text.contains("2 data rows"), "{}", preview.text);
}

#[test]
fn json_object_lists_top_level_keys() {
    let preview = preview_of(
        br#"{"name": "ferry", "tags": ["a", "b"], "nested": {"deep": true}}"#,
        "config.json",
    );
    assert_eq!(preview.media_type, "application/json");
    assert!(
        preview
            .text
            .starts_with(r#"JSON object with 3 keys: "name", "tags", "nested"."#),
        "{}",
        preview.text
    );
    assert!(preview.text.contains(r#""deep": true"#));
}

#[test]
fn json_array_gives_its_length() {
    let preview = preview_of(b"[1, 2, {\"x\": [3]}]", "list.json");
    assert!(
        preview.text.starts_with("JSON array with 3 elements."),
        "{}",
        preview.text
    );
}

#[test]
fn broken_json_says_where() {
    let preview = preview_of(b"{\"a\": 1,,}", "broken.json");
    assert!(
        preview.text.starts_with("Not valid JSON:"),
        "{}",
        preview.text
    );
    assert!(preview.text.contains("line 1"), "{}", preview.text);
}

#[test]
fn empty_file() {
    let preview = preview_of(b"", "empty.txt");
    assert_eq!(preview.media_type, "application/x-empty");
    assert_eq!(preview.size, 0);
    assert_eq!(preview.text, "The file is empty (0 bytes).");
    assert_eq!(
        preview.sha256,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn unknown_binary_is_described_not_dumped() {
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    let preview = preview_of(&bytes, "blob.txt");
    assert_eq!(preview.media_type, "application/octet-stream");
    assert!(
        preview.text.contains("cannot be previewed as text"),
        "{}",
        preview.text
    );
    assert!(preview.text.len() < 200);
}

/// The text of a preview of `body` (one line, no newline), and where the body starts in it.
fn preview_of_one_line(len: usize) -> (String, usize) {
    let preview = preview_of("a".repeat(len).as_bytes(), "line.txt");
    let body_start = preview.text.find("\n\n").map(|at| at + 2).unwrap();
    (preview.text, body_start)
}

#[test]
fn preview_text_is_cut_only_over_the_budget() {
    // The summary line does not change length for bodies of 4-digit sizes,
    // so the body can be sized to end exactly at the budget.
    let (_, summary_len) = preview_of_one_line(8000);
    let exact_fit = PREVIEW_TEXT_MAX_BYTES - summary_len;

    let (below, _) = preview_of_one_line(exact_fit - 1);
    assert_eq!(below.len(), PREVIEW_TEXT_MAX_BYTES - 1);
    assert!(!below.ends_with(TRUNCATION_NOTE));

    let (at, _) = preview_of_one_line(exact_fit);
    assert_eq!(at.len(), PREVIEW_TEXT_MAX_BYTES);
    assert!(!at.ends_with(TRUNCATION_NOTE));

    let (over, _) = preview_of_one_line(exact_fit + 1);
    assert!(over.len() <= PREVIEW_TEXT_MAX_BYTES);
    assert!(
        over.ends_with(TRUNCATION_NOTE),
        "{}",
        &over[over.len() - 40..]
    );
}

#[test]
fn a_large_text_file_stays_within_budget_and_counts_lines() {
    let mut text = String::new();
    for i in 0..50_000 {
        text.push_str(&format!("line number {i} with some words é\n"));
    }
    let preview = preview_of(text.as_bytes(), "big.log");
    assert!(preview.text.len() <= PREVIEW_TEXT_MAX_BYTES);
    assert!(
        preview.text.contains("50,000 lines"),
        "{}",
        &preview.text[..100]
    );
    assert!(preview.text.ends_with(TRUNCATION_NOTE));
    // Cut at a line end: the last shown line is whole.
    let shown = preview.text.strip_suffix(TRUNCATION_NOTE).unwrap();
    assert!(shown.ends_with(" é"), "{}", &shown[shown.len() - 40..]);
}
