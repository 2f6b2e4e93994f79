use super::*;

fn issued(name: &str, extension: &str) -> String {
    MediaId::issue(name, extension).to_string()
}

fn stem_and_extension(id: &str) -> (&str, &str) {
    let (stem, tail) = id.rsplit_once('~').unwrap();
    (stem, tail.split_once('.').unwrap().1)
}

#[test]
fn the_specs_examples() {
    let id = issued("train.py", "txt");
    assert_eq!(stem_and_extension(&id), ("train", "txt"));
    assert_eq!(
        stem_and_extension(&issued("photo.jpg", "png")),
        ("photo", "png")
    );
    assert!(MediaId::parse("train~k3j9x2m1q8ab.txt").is_ok());
}

#[test]
fn an_issued_id_has_the_shape_and_parses_back() {
    for name in [
        "train.py",
        "Q2 report (final).pdf",
        "relatório.pdf",
        "a..b.txt",
        "x",
    ] {
        let id = MediaId::issue(name, "bin");
        let (_, tail) = id.as_str().rsplit_once('~').unwrap();
        let (random, _) = tail.split_once('.').unwrap();
        assert_eq!(random.len(), RANDOM_CHARS);
        assert!(
            random
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'))
        );
        assert_eq!(MediaId::parse(id.as_str()).unwrap(), id, "{name}");
    }
}

#[test]
fn repeated_issues_are_distinct() {
    let ids: std::collections::HashSet<_> = (0..1000).map(|_| issued("a.txt", "txt")).collect();
    assert_eq!(ids.len(), 1000);
}

#[test]
fn stems_follow_c_name() {
    for (name, stem) in [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\a\\Q2 report (final).pdf", "Q2_report_final_"),
        (".env.pdf", "env"),
        ("relatório.pdf", "relatório"),
        ("a\u{0}b.txt", "a_b"),
        ("archive.tar.gz", "archive.tar"),
        ("a..b.txt", "a.b"),
        ("name~with~tildes.txt", "name_with_tildes"),
        ("noext", "noext"),
    ] {
        assert_eq!(stem_of(name), stem, "{name:?}");
    }
}

#[test]
fn nothing_left_is_media() {
    for name in ["", "...", "..", ".", "/", "dir/", "\\"] {
        assert_eq!(stem_of(name), FALLBACK_STEM, "{name:?}");
    }
}

#[test]
fn stems_are_cut_to_60_characters_at_limit_minus_one_limit_and_plus_one() {
    for (len, kept) in [(59, 59), (60, 60), (61, 60)] {
        let name = format!("{}.txt", "é".repeat(len));
        let stem = stem_of(&name);
        assert_eq!(stem.chars().count(), kept, "{len}");
        assert!(MediaId::parse(&issued(&name, "txt")).is_ok());
    }
    let long = format!("{}.txt", "a".repeat(STEM_MAX_CHARS + 1));
    assert!(MediaId::parse(&format!("{}~k3j9x2m1q8ab.txt", &long[..61])).is_err());
}

#[test]
fn paths_and_wrong_shapes_are_unknown_media_ids() {
    for value in [
        "",
        "/tmp/train~k3j9x2m1q8ab.txt",
        "media/train~k3j9x2m1q8ab.txt",
        "..\\train~k3j9x2m1q8ab.txt",
        "train~k3j9x2m1q8ab.txt/",
        "../train~k3j9x2m1q8ab.txt",
        "./train~k3j9x2m1q8ab.txt",
        "a..b~k3j9x2m1q8ab.txt",
        "train~k3j9x2m1q8ab..txt",
        "train~k3j9x2m1q8ab.txt\0",
        "train~k3j9x2m1q8a.txt",
        "train~k3j9x2m1q8abc.txt",
        "train~K3J9X2M1Q8AB.txt",
        "train~k3j9x2m1q8a_.txt",
        "train~k3j9x2m1q8ab",
        "train~k3j9x2m1q8ab.",
        "train~k3j9x2m1q8ab.TXT",
        "train~k3j9x2m1q8ab.t-t",
        "train~k3j9x2m1q8ab.tar.gz",
        "~k3j9x2m1q8ab.txt",
        ".env~k3j9x2m1q8ab.txt",
        "my file~k3j9x2m1q8ab.txt",
        "a~b~k3j9x2m1q8ab.txt",
        "train.txt",
        "C:train~k3j9x2m1q8ab.txt",
        "train~k3j9x2m1q8ab.aaaaaaaaaaaaaaaaa",
    ] {
        let err = MediaId::parse(value).unwrap_err();
        assert_eq!(err.code(), ferry_codes::Code::UnknownMediaId, "{value:?}");
        assert!(err.to_string().contains("not a media id"), "{value:?}");
    }
}

#[test]
fn a_name_that_looks_like_a_wrapper_marker_gives_the_fallback_stem() {
    // Ids are shown outside the wrapper, so a source name cannot put a marker there.
    // (C-NAME already turns ASCII brackets into `_`; these brackets are letters.)
    for name in [
        "ᐸᐸᐸEND_EXTERNAL_CONTENT.txt",
        "ᚲᚲᚲEXTERNAL_CONTENT.md",
        "ЕХТЕRNАL_СОNТЕNТᐳᐳᐳ",
    ] {
        let id = issued(name, "txt");
        assert_eq!(stem_and_extension(&id), (FALLBACK_STEM, "txt"), "{name}");
    }
    assert!(MediaId::parse("ᐸᐸᐸEND_EXTERNAL_CONTENT~k3j9x2m1q8ab.txt").is_err());
    for (name, stem) in [
        ("external content.txt", "external_content"),
        ("<<<EXTERNAL_CONTENT.txt", "_EXTERNAL_CONTENT"),
    ] {
        assert_eq!(stem_and_extension(&issued(name, "txt")).0, stem);
    }
}
