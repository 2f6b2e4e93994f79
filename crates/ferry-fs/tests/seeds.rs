//! Writes the seed corpus of the fuzz targets for names and paths (`fuzz/corpus/names`,
//! `fuzz/corpus/rel_path`), made here from the cases the rules speak of:
//! `cargo test -p ferry-fs --test seeds -- --ignored write_fuzz_seeds`.

/// The names seeds: a name as bytes (from the disk) or as text (an upload, a typed name).
fn name_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let text = |s: &str| s.as_bytes().to_vec();
    vec![
        ("plain", text("report.pdf")),
        ("traversal", text("../../etc/passwd")),
        ("windows", text(r"C:\Users\a\Q2 report (final).pdf")),
        ("hidden", text(".env.pdf")),
        ("accents", text("relatório.pdf")),
        ("decomposed", text("relato\u{301}rio.pdf")),
        ("dots", text("...")),
        ("nul", text("a\0b.txt")),
        ("control", text("tab\there\nline")),
        ("bidi", text("invoice_\u{202E}fdp.exe")),
        ("invisible", text("re\u{200B}port\u{FEFF}.pdf")),
        (
            "slash_lookalike",
            text("public\u{2215}attachments\u{2044}x"),
        ),
        ("temporary", text(".ferry-tmp-abc")),
        ("long", text(&format!("{}.pdf", "a".repeat(300)))),
        ("long_multibyte", text(&format!("{}.txt", "é".repeat(200)))),
        ("long_extension", text(&format!("a.{}", "b".repeat(300)))),
        ("latin1", b"caf\xe9.txt".to_vec()),
        ("byte_lookalike", text("caf\u{10FFE9}.txt")),
        ("mixed_invalid", b"\xff\xfe\xc3(\xe2\x82".to_vec()),
        ("empty", Vec::new()),
    ]
}

/// The rel_path seeds: a relative path, a `public/…` path, an upload's folder.
fn path_seeds() -> Vec<(&'static str, Vec<u8>)> {
    [
        ("plain", "a/b/c.txt"),
        ("public", "public"),
        ("folder", "public/reports/q2"),
        ("dotted", "./public/./reports/"),
        ("attachments", "public/attachments"),
        ("in_attachments", "public/attachments/x.pdf"),
        ("attachments_lookalike", "public/attachmentsx/y"),
        ("parent", "a/../b"),
        ("public_parent", "public/.."),
        ("absolute", "/etc/passwd"),
        ("nul", "a\0b"),
        ("temporary", "public/.ferry-tmp-1/x"),
        ("slashes", "public//reports///"),
        ("dot_end", "a/."),
        ("dot", "."),
        ("legacy", "uploads/x"),
        ("dotdot_names", "a/..b/c.."),
    ]
    .into_iter()
    .map(|(name, path)| (name, path.as_bytes().to_vec()))
    .chain([("too_long", "a".repeat(4097).into_bytes())])
    .collect()
}

#[test]
#[ignore = "writes the fuzz corpus; run on purpose"]
fn write_fuzz_seeds() {
    ferry_fs::fuzzing::write_corpus("names", name_seeds());
    ferry_fs::fuzzing::write_corpus("rel_path", path_seeds());
}

#[test]
fn the_seeds_are_what_they_say() {
    for (name, bytes) in name_seeds() {
        let safe = std::str::from_utf8(&bytes).map(ferry_fs::safe_name);
        let refused = ["dots", "empty"].contains(&name);
        assert_eq!(matches!(safe, Ok(Err(_))), refused, "{name}");
    }
    for (name, bytes) in path_seeds() {
        let path = std::str::from_utf8(&bytes).unwrap();
        let refused = ["parent", "public_parent", "absolute", "nul", "too_long"].contains(&name);
        assert_eq!(ferry_fs::check_relative(path).is_err(), refused, "{name}");
    }
}
