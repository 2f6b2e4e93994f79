use super::*;
use ferry_codes::Code;

fn code(raw: &str, kind: MemberKind, platform: Platform) -> Code {
    admit(raw.as_bytes(), kind, platform).unwrap_err().code()
}

#[test]
fn exact_names_are_kept() {
    for name in [
        "a",
        "a b/c",
        "relatório.pdf",
        "line\nbreak",
        "ü/日本語",
        "..a",
        "a..",
    ] {
        let got = admit(name.as_bytes(), MemberKind::File, Platform::Linux).unwrap();
        assert_eq!(got.as_deref(), Some(name));
    }
    let got = admit(b"./a/./b", MemberKind::File, Platform::Linux).unwrap();
    assert_eq!(got.as_deref(), Some("a/b"));
    let got = admit(b"dir/", MemberKind::Dir, Platform::Linux).unwrap();
    assert_eq!(got.as_deref(), Some("dir"));
    assert_eq!(
        admit(b"./", MemberKind::Dir, Platform::Linux).unwrap(),
        None
    );
}

#[test]
fn escapes_are_refused() {
    for name in [
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a//b",
        "",
        "a\0b",
        "dir/",
        ".",
    ] {
        assert_eq!(
            code(name, MemberKind::File, Platform::Linux),
            Code::PathEscapes,
            "{name:?}"
        );
    }
    assert_eq!(
        code("a//", MemberKind::Dir, Platform::Linux),
        Code::PathEscapes
    );
    assert_eq!(
        code("a\\b", MemberKind::File, Platform::Windows),
        Code::PathEscapes
    );
    assert!(admit(b"a\\b", MemberKind::File, Platform::Linux).is_ok());
}

#[test]
fn invalid_utf8_is_refused() {
    let err = admit(b"a\xffb", MemberKind::File, Platform::Linux).unwrap_err();
    assert_eq!(err.code(), Code::InvalidUnicode);
}

#[test]
fn windows_names_are_refused() {
    for name in [
        "CON",
        "con.txt",
        "Nul.tar.gz",
        "COM1",
        "lpt9.x",
        "dir/aux",
        "a.",
        "a ",
        "dir./b",
        "a<b",
        "a>b",
        "a:b",
        "a\"b",
        "a|b",
        "a?b",
        "a*b",
        "a\u{1}b",
        "a\tb",
        "con .txt",
        "COM0",
        "lpt0.txt",
        "COM¹",
        "com².log",
        "LPT³",
        "CONIN$",
        "conout$.txt",
    ] {
        assert_eq!(
            code(name, MemberKind::File, Platform::Windows),
            Code::PlatformName,
            "{name:?}"
        );
        // Linux takes every one of them as it is.
        assert!(admit(name.as_bytes(), MemberKind::File, Platform::Linux).is_ok());
    }
    for name in ["console", "com10", "lpt", "a.b", "COM0x", "auxiliary.txt"] {
        assert!(
            admit(name.as_bytes(), MemberKind::File, Platform::Windows).is_ok(),
            "{name:?}"
        );
    }
}

#[test]
fn lengths_are_bounded_not_cut() {
    let long_component = "a".repeat(NAME_MAX_BYTES);
    assert!(admit(long_component.as_bytes(), MemberKind::File, Platform::Linux).is_ok());
    let too_long = "a".repeat(NAME_MAX_BYTES + 1);
    assert_eq!(
        code(&too_long, MemberKind::File, Platform::Linux),
        Code::PlatformName
    );
    let deep = vec!["a"; PATH_MAX_BYTES / 2].join("/");
    assert!(admit(deep.as_bytes(), MemberKind::File, Platform::Linux).is_ok());
    let deeper = format!("{deep}/bb");
    assert_eq!(
        code(&deeper, MemberKind::File, Platform::Linux),
        Code::PlatformName
    );
}

#[test]
fn byte_characters_are_refused() {
    assert_eq!(
        code("a\u{10FF80}", MemberKind::File, Platform::Linux),
        Code::PlatformName
    );
    assert!(admit("a\u{10FF7F}".as_bytes(), MemberKind::File, Platform::Linux).is_ok());
    assert_eq!(
        code("d/.ferry-tmp-abc", MemberKind::File, Platform::Linux),
        Code::PlatformName
    );
}

#[test]
fn collision_keys() {
    assert_ne!(
        Platform::Linux.collision_key("A"),
        Platform::Linux.collision_key("a")
    );
    assert_eq!(
        Platform::Windows.collision_key("Dir/A.TXT"),
        Platform::Windows.collision_key("dir/a.txt")
    );
    let nfd = "cafe\u{301}";
    let nfc = "caf\u{e9}";
    assert_ne!(
        Platform::Windows.collision_key(nfd),
        Platform::Windows.collision_key(nfc)
    );
    assert_eq!(
        Platform::Macos.collision_key(nfd),
        Platform::Macos.collision_key("CAF\u{c9}")
    );
}

#[test]
fn parents_shortest_first() {
    assert_eq!(parents("a/b/c").collect::<Vec<_>>(), ["a", "a/b"]);
    assert_eq!(parents("a").count(), 0);
}
