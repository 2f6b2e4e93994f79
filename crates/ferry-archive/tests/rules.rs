//! Every rule of C-ARCHIVE, each attacked with a tar built for it.

mod common;

use common::*;
use ferry_archive::{EntryType, PathPolicy, PlanOptions, Platform};
use ferry_codes::Code;

fn on(platform: Platform) -> PlanOptions {
    PlanOptions {
        platform,
        ..PlanOptions::default()
    }
}

fn policy(allow: &[&str], deny: &[&str]) -> PlanOptions {
    PlanOptions {
        policy: PathPolicy::new(allow, deny).unwrap(),
        ..PlanOptions::default()
    }
}

#[test]
fn a_plain_tree_is_admitted_in_archive_order() {
    let tar = Tar::new()
        .dir("docs/")
        .file("docs/a.txt", b"hello")
        .file("b/c/d.bin", &[7u8; 700])
        .end();
    let plan = plan(&tar).unwrap();
    assert_eq!(paths(&plan), ["docs", "docs/a.txt", "b/c/d.bin"]);
    assert_eq!(plan.entries[0].kind, EntryType::Dir);
    assert_eq!(plan.entries[1].size, 5);
    assert_eq!(plan.entries[2].size, 700);
    // docs, docs/a.txt, b, b/c, b/c/d.bin: the implicit b and b/c counted once each.
    assert_eq!(plan.descendants, 5);
    assert_eq!(plan.total_bytes(), 705);
}

#[test]
fn gzip_is_detected_by_its_magic() {
    let tar = Tar::new().file("a", b"x").end();
    let plan = plan(&gzip(&tar)).unwrap();
    assert_eq!(paths(&plan), ["a"]);
}

#[test]
fn only_files_and_folders_are_supported() {
    for (flag, what) in [
        (b'1', "hard link"),
        (b'2', "symbolic link"),
        (b'3', "character device"),
        (b'4', "block device"),
        (b'6', "FIFO"),
        (b'7', "contiguous"),
        (b'S', "sparse"),
        (b'K', "long link"),
        (b'D', "directory dump"),
        (b'V', "volume label"),
        (b'M', "multi-volume"),
        (b'Z', "unknown"),
        (b'A', "unknown"),
    ] {
        let tar = Tar::new().file("ok", b"").typed("thing", flag).end();
        let err = plan(&tar).unwrap_err();
        assert_eq!(err.code(), Code::UnsupportedEntry, "{}", flag as char);
        assert!(err.to_string().contains(what), "{err}");
    }
}

#[test]
fn pax_links_and_sparse_files_are_unsupported() {
    let link = Tar::new()
        .pax(&[("linkpath", b"/etc/passwd")])
        .file("a", b"")
        .end();
    assert_eq!(refusal(&link), Code::UnsupportedEntry);
    let sparse = Tar::new()
        .pax(&[("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0")])
        .file("a", b"")
        .end();
    assert_eq!(refusal(&sparse), Code::UnsupportedEntry);
    let global = Tar::new().global(&[("path", b"x")]).file("a", b"").end();
    assert_eq!(refusal(&global), Code::UnsupportedEntry);
    // A global header that only comments (as `git archive` writes) is harmless.
    let comment = Tar::new()
        .global(&[("comment", b"abc123")])
        .file("a", b"")
        .end();
    assert_eq!(paths(&plan(&comment).unwrap()), ["a"]);
}

#[test]
fn traversal_and_absolute_names_escape() {
    for name in [
        "../evil",
        "a/../../evil",
        "a/..",
        "..",
        "/etc/passwd",
        "//x",
        "a//b",
        "a/b/",
    ] {
        let tar = Tar::new().file(name, b"x").end();
        assert_eq!(refusal(&tar), Code::PathEscapes, "{name:?}");
    }
    let dir = Tar::new().dir("../up/").end();
    assert_eq!(refusal(&dir), Code::PathEscapes);
    // The same names, spelled by a PAX record or a GNU long name, are no different.
    let pax = Tar::new()
        .pax(&[("path", b"../evil")])
        .file("fine", b"")
        .end();
    assert_eq!(refusal(&pax), Code::PathEscapes);
    let gnu = Tar::new().long_name(b"/abs").file("fine", b"").end();
    assert_eq!(refusal(&gnu), Code::PathEscapes);
    let nul = Tar::new().pax(&[("path", b"a\0b")]).file("fine", b"").end();
    assert_eq!(refusal(&nul), Code::PathEscapes);
    let empty = Tar::new().raw_file(b"", b"").end();
    assert_eq!(refusal(&empty), Code::PathEscapes);
}

#[test]
fn backslashes_escape_on_windows_only() {
    for name in ["a\\..\\..\\evil", "C:\\x", "dir\\f"] {
        let tar = Tar::new().file(name, b"x").end();
        assert_eq!(
            refusal_with(&tar, &on(Platform::Windows)),
            Code::PathEscapes,
            "{name:?}"
        );
        assert!(plan(&tar).is_ok(), "{name:?} is a plain name on Linux");
    }
}

#[test]
fn dot_components_are_dropped_and_the_root_is_no_entry() {
    let tar = Tar::new().dir("./").dir("./a/").file("./a/./b", b"x").end();
    let plan = plan(&tar).unwrap();
    assert_eq!(paths(&plan), ["a", "a/b"]);
    assert_eq!(plan.descendants, 2);
    let file_as_root = Tar::new().file(".", b"x").end();
    assert_eq!(refusal(&file_as_root), Code::PathEscapes);
}

#[test]
fn names_keep_their_exact_bytes() {
    let names = [
        "relatório.pdf",
        "line\nbreak",
        "tab\there",
        "日本/語",
        " lead",
        "trail ",
    ];
    let mut tar = Tar::new();
    for name in names {
        tar = tar.file(name, b"x");
    }
    assert_eq!(paths(&plan(&tar.end()).unwrap()), names);
    let nfd = "cafe\u{301}";
    let tar = Tar::new().file(nfd, b"").end();
    assert_eq!(paths(&plan(&tar).unwrap()), [nfd], "never normalized");
}

#[test]
fn invalid_utf8_is_refused() {
    let tar = Tar::new().raw_file(b"caf\xe9", b"").end();
    assert_eq!(refusal(&tar), Code::InvalidUnicode);
    let pax = Tar::new()
        .pax(&[("path", b"\xff\xfe")])
        .file("ok", b"")
        .end();
    assert_eq!(refusal(&pax), Code::InvalidUnicode);
}

#[test]
fn pax_path_overrides_and_gnu_long_names_are_honoured() {
    let long = format!("{}/{}", "d".repeat(150), "f".repeat(200));
    let pax = Tar::new()
        .pax(&[("path", long.as_bytes())])
        .file("short-name-ignored", b"abc")
        .end();
    let plan_pax = plan(&pax).unwrap();
    assert_eq!(paths(&plan_pax), [long.as_str()]);
    assert_eq!(plan_pax.descendants, 2);
    let gnu = Tar::new()
        .long_name(long.as_bytes())
        .file("ignored", b"abc")
        .end();
    assert_eq!(paths(&plan(&gnu).unwrap()), [long.as_str()]);
    // The ustar prefix field joins the name.
    let mut h = header(b"name", b'0', 0);
    h[345..351].copy_from_slice(b"prefix");
    common::seal(&mut h);
    let ustar = Tar::new().entry(h, b"").end();
    assert_eq!(paths(&plan(&ustar).unwrap()), ["prefix/name"]);
    // PAX size overrides the header's.
    let sized = Tar::new()
        .pax(&[("size", b"3")])
        .entry(header(b"s", b'0', 0), b"xyz")
        .end();
    assert_eq!(plan(&sized).unwrap().entries[0].size, 3);
}

#[test]
fn the_same_name_twice_collides() {
    let twice = Tar::new().file("a", b"1").file("a", b"2").end();
    assert_eq!(refusal(&twice), Code::NameCollision);
    let dir_twice = Tar::new().dir("d/").dir("d/").end();
    assert_eq!(refusal(&dir_twice), Code::NameCollision);
    let dotted = Tar::new().file("a", b"1").file("./a", b"2").end();
    assert_eq!(refusal(&dotted), Code::NameCollision);
    // A folder's header after its children made it implicit is the same folder.
    let late_dir = Tar::new().file("d/x", b"").dir("d/").end();
    assert_eq!(plan(&late_dir).unwrap().descendants, 2);
}

#[test]
fn a_file_and_a_folder_at_one_name_collide() {
    let file_then_child = Tar::new().file("a", b"").file("a/b", b"").end();
    assert_eq!(refusal(&file_then_child), Code::NameCollision);
    let child_then_file = Tar::new().file("a/b", b"").file("a", b"").end();
    assert_eq!(refusal(&child_then_file), Code::NameCollision);
    let dir_then_file = Tar::new().dir("a/").file("a", b"").end();
    assert_eq!(refusal(&dir_then_file), Code::NameCollision);
}

#[test]
fn case_and_normalization_collide_where_the_destination_folds_them() {
    let case = Tar::new().file("Readme", b"").file("README", b"").end();
    let parents = Tar::new().file("Dir/a", b"").file("dir/b", b"").end();
    let nfc_nfd = Tar::new()
        .file("caf\u{e9}", b"")
        .file("cafe\u{301}", b"")
        .end();
    let sharp = Tar::new().file("STRASSE", b"").file("strasse", b"").end();
    for tar in [&case, &parents, &sharp] {
        assert!(plan(tar).is_ok(), "Linux keeps them apart");
        assert_eq!(
            refusal_with(tar, &on(Platform::Windows)),
            Code::NameCollision
        );
        assert_eq!(refusal_with(tar, &on(Platform::Macos)), Code::NameCollision);
    }
    assert!(plan(&nfc_nfd).is_ok());
    assert!(
        plan_with(&nfc_nfd, &on(Platform::Windows)).is_ok(),
        "Windows does not normalize"
    );
    assert_eq!(
        refusal_with(&nfc_nfd, &on(Platform::Macos)),
        Code::NameCollision
    );
}

#[test]
fn windows_reserved_names_are_refused_not_repaired() {
    for name in [
        "CON",
        "con.txt",
        "dir/PRN.log",
        "Aux",
        "NUL.tar.gz",
        "COM1",
        "com9.x",
        "LPT1",
        "lpt9",
        "ends.",
        "ends ",
        "a<b",
        "a>b",
        "a:b",
        "a\"b",
        "a|b",
        "a?b",
        "a*b",
        "bell\u{7}",
        "dir./x",
    ] {
        let tar = Tar::new().file(name, b"").end();
        assert_eq!(
            refusal_with(&tar, &on(Platform::Windows)),
            Code::PlatformName,
            "{name:?}"
        );
        assert!(plan(&tar).is_ok(), "{name:?} exists on Linux");
    }
    let reserved_dir = Tar::new().dir("aux/").end();
    assert_eq!(
        refusal_with(&reserved_dir, &on(Platform::Windows)),
        Code::PlatformName
    );
    let implied = Tar::new().file("con/x", b"").end();
    assert_eq!(
        refusal_with(&implied, &on(Platform::Windows)),
        Code::PlatformName
    );
}

#[test]
fn the_policy_denies_any_name_implicit_parents_included() {
    let tar = Tar::new()
        .file("src/.git/config", b"")
        .file("src/main.rs", b"")
        .end();
    let err = plan_with(&tar, &policy(&[], &["**/.git"])).unwrap_err();
    assert_eq!(err.code(), Code::PathDenied);
    assert!(err.to_string().contains("src/.git"), "{err}");
    assert!(plan_with(&tar, &policy(&[], &["*.txt"])).is_ok());
    let explicit = Tar::new().file("a/secret.key", b"").end();
    assert_eq!(
        refusal_with(&explicit, &policy(&[], &["*.key"])),
        Code::PathDenied
    );
}

#[test]
fn apple_double_files_meet_the_policy_like_any_other() {
    let tar = Tar::new()
        .file("docs/a.txt", b"")
        .file("docs/._a.txt", b"")
        .end();
    assert_eq!(paths(&plan(&tar).unwrap()), ["docs/a.txt", "docs/._a.txt"]);
    assert_eq!(
        refusal_with(&tar, &policy(&[], &["**/._*"])),
        Code::PathDenied
    );
    // `*.txt` matches `._a.txt` too: an allow glob does not exempt it either way.
    assert!(plan_with(&tar, &policy(&["*.txt"], &[])).is_ok());
    assert_eq!(
        refusal_with(&tar, &policy(&["**/a.txt"], &[])),
        Code::PathDenied
    );
}

#[test]
fn allow_globs_admit_only_what_they_name() {
    let tar = Tar::new()
        .file("docs/a.txt", b"")
        .file("docs/b.md", b"")
        .end();
    let err = plan_with(&tar, &policy(&["*.txt"], &[])).unwrap_err();
    assert_eq!(err.code(), Code::PathDenied);
    assert!(err.to_string().contains("docs/b.md"));
    let txt = Tar::new().dir("docs/").file("docs/a.txt", b"").end();
    assert!(
        plan_with(&txt, &policy(&["*.txt"], &[])).is_ok(),
        "its folder holds an allowed file"
    );
    let empty_dir = Tar::new().file("a.txt", b"").dir("empty/").end();
    assert_eq!(
        refusal_with(&empty_dir, &policy(&["*.txt"], &[])),
        Code::PathDenied
    );
    assert!(plan_with(&empty_dir, &policy(&["*.txt", "empty"], &[])).is_ok());
    // Deny wins over allow.
    assert_eq!(
        refusal_with(&txt, &policy(&["**"], &["docs"])),
        Code::PathDenied
    );
}

#[test]
fn a_bad_glob_is_refused_with_a_clear_error() {
    let err = PathPolicy::new(["a[b"], [""; 0]).unwrap_err();
    assert_eq!(err.code(), Code::InvalidRequest);
    assert!(err.to_string().contains("a[b"));
}

#[test]
fn the_destination_itself_may_be_named_once() {
    let once = Tar::new().dir("./").file("a", b"").end();
    assert!(plan(&once).is_ok());
    // Entries that count toward no cap cannot be repeated without end.
    let twice = Tar::new().dir("./").file("a", b"").dir(".").end();
    assert_eq!(refusal(&twice), Code::NameCollision);
}
