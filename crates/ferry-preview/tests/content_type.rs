//! A download's `Content-Type` and `file_preview`'s type come from one sniffer.

mod fixtures;

use std::io::Seek;

use fixtures::{docx, file_with, gzip, pdf, png, preview_of, reopen, tar, zip};

/// One file of each kind the detector tells apart, some with names that lie.
fn samples() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty.txt", Vec::new()),
        ("notes.txt", b"plain words\n".to_vec()),
        ("notes.png", b"plain text behind an image name\n".to_vec()),
        ("table.csv", b"a,b\n1,2\n".to_vec()),
        ("table.tsv", b"a\tb\n1\t2\n".to_vec()),
        ("data.json", br#"{"a": [1, 2]}"#.to_vec()),
        ("page.md", b"# Title\n".to_vec()),
        ("latin1.txt", b"caf\xe9\n".to_vec()),
        ("photo.png", png(3, 2)),
        ("photo.txt", png(3, 2)),
        ("doc.pdf", pdf(&["first page"])),
        ("archive.zip", zip(&[("a.txt", b"a")])),
        ("letter.docx", docx(&["Dear reader"])),
        ("letter.zip", docx(&["Dear reader"])),
        ("bundle.tar", tar(&[("a.txt", b"a")])),
        ("bundle.tar.gz", gzip(&tar(&[("a.txt", b"a")]))),
        ("blob.bin", (0..=255u8).cycle().take(4096).collect()),
        ("blob.txt", vec![0, 1, 2, 3, 0, 0, 7]),
    ]
}

#[test]
fn content_type_and_preview_name_the_same_type() {
    for (name, bytes) in samples() {
        let (fixture, _) = file_with(&bytes);
        let mut file = reopen(&fixture);
        let content_type = ferry_preview::content_type(&mut file, name).unwrap();
        let essence = content_type.split(';').next().unwrap().trim();
        assert_eq!(essence, preview_of(&bytes, name).media_type, "{name}");
        assert_eq!(file.stream_position().unwrap(), 0, "{name}: rewound");
    }
}

#[test]
fn only_utf8_text_claims_a_charset() {
    let type_of = |name: &str, bytes: &[u8]| {
        let (fixture, _) = file_with(bytes);
        ferry_preview::content_type(&mut reopen(&fixture), name).unwrap()
    };
    assert_eq!(type_of("a.txt", b"hello\n"), "text/plain; charset=utf-8");
    assert_eq!(type_of("a.csv", b"a,b\n"), "text/csv; charset=utf-8");
    // Named text but not UTF-8: the type, with no claim about the encoding.
    assert_eq!(type_of("a.txt", b"caf\xe9\n"), "text/plain");
    assert_eq!(type_of("a.png", &png(1, 1)), "image/png");
}

/// C-MEDIA's extensions come from the detected format, never from the name.
#[test]
fn the_extension_is_the_detected_formats() {
    let expected = [
        ("empty.txt", "txt"),
        ("notes.txt", "txt"),
        ("notes.png", "txt"),
        ("table.csv", "txt"),
        ("table.tsv", "txt"),
        ("data.json", "txt"),
        ("page.md", "txt"),
        ("latin1.txt", "txt"),
        ("photo.png", "png"),
        ("photo.txt", "png"),
        ("doc.pdf", "pdf"),
        ("archive.zip", "zip"),
        ("letter.docx", "docx"),
        ("letter.zip", "docx"),
        ("bundle.tar", "tar"),
        ("bundle.tar.gz", "gz"),
        ("blob.bin", "bin"),
        ("blob.txt", "bin"),
    ];
    let samples = samples();
    assert_eq!(samples.len(), expected.len());
    for ((name, bytes), (expected_name, extension)) in samples.iter().zip(expected) {
        assert_eq!(*name, expected_name);
        let (fixture, _) = file_with(bytes);
        let mut file = reopen(&fixture);
        let sniffed = ferry_preview::sniff(&mut file, name).unwrap();
        assert_eq!(sniffed.extension, extension, "{name}");
        assert_eq!(file.stream_position().unwrap(), 0, "{name}");
        let mut again = reopen(&fixture);
        let content_type = ferry_preview::content_type(&mut again, name).unwrap();
        assert_eq!(sniffed.media_type, content_type, "{name}");
    }
}

#[test]
fn a_python_source_is_saved_as_text() {
    let source = b"import torch\nprint('train')\n";
    let (fixture, _) = file_with(source);
    let sniffed = ferry_preview::sniff(&mut reopen(&fixture), "train.py").unwrap();
    assert_eq!(sniffed.extension, "txt");
}
