//! Names from outside (C-NAME): any bytes as a file name from the disk, and any text as
//! an uploaded file's name, a typed name and a name shown to a person. What is accepted
//! keeps every rule of a name, and what is made safe stays as it is when made safe again.
#![no_main]

use ferry_fs::{FsError, NAME_MAX_BYTES, is_hidden_or_spoofing, is_temporary};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Bytes from the disk: a name that is not UTF-8 round-trips exactly.
    let text = ferry_fs::name_from_bytes(data);
    assert_eq!(&*ferry_fs::fuzzing::name_to_bytes(&text), data);
    if let Ok(utf8) = std::str::from_utf8(data) {
        // UTF-8 stays as it is, unless it holds the characters that stand for bytes.
        let stands_for_bytes = utf8
            .chars()
            .any(|c| (0x10_FF80..=0x10_FFFF).contains(&u32::from(c)));
        assert_eq!(text == utf8, !stands_for_bytes, "{utf8:?}");
    }
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };

    // An upload's name: one safe component, or `unsafe_name`.
    match ferry_fs::safe_name(input) {
        Ok(name) => {
            assert!(!name.is_empty() && name.len() <= NAME_MAX_BYTES, "{name:?}");
            assert!(
                name != "." && name != ".." && !name.starts_with('.'),
                "{name:?}"
            );
            assert!(
                name.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-')),
                "{name:?}"
            );
            assert_eq!(
                ferry_fs::safe_name(&name).unwrap(),
                name,
                "not a fixed point"
            );
        }
        Err(e) => assert!(matches!(e, FsError::UnsafeName(_)), "{e:?}"),
    }

    // A name a person typed (a new folder, a rename): kept as typed, or refused.
    match ferry_fs::typed_name(input) {
        Ok(name) => {
            assert!(!name.is_empty() && name.len() <= NAME_MAX_BYTES, "{name:?}");
            assert!(name != "." && name != "..", "{name:?}");
            assert!(
                !name.contains('/') && !name.chars().any(char::is_control),
                "{name:?}"
            );
            assert!(!is_temporary(&name), "{name:?}");
            assert_eq!(
                ferry_fs::typed_name(&name).unwrap(),
                name,
                "not a fixed point"
            );
        }
        Err(e) => assert!(matches!(e, FsError::UnusableName { .. }), "{e:?}"),
    }

    // A name shown to a person: nothing hidden or spoofing is left in it, and a name
    // with none is shown as it is.
    let shown = ferry_fs::shown_name(input);
    assert!(!shown.chars().any(is_hidden_or_spoofing), "{shown:?}");
    if !input.chars().any(is_hidden_or_spoofing) {
        assert_eq!(shown, input);
    }
});
