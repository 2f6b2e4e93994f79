//! The result's limit at −1, exactly and +1, with a limit small enough to test.

use super::*;

fn results() -> (tempfile::TempDir, Dir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Dir::open_ambient(tmp.path()).unwrap();
    (tmp, dir)
}

fn files_in(tmp: &tempfile::TempDir) -> Vec<String> {
    std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_result_at_its_limit_is_kept_and_one_byte_more_leaves_nothing() {
    let max = 1000u64;
    for size in [max - 1, max] {
        let (tmp, dir) = results();
        let body = vec![b'x'; size as usize];
        let kept = persist_within(&dir, tmp.path(), "w", 1, &mut &body[..], max).unwrap();
        assert_eq!(kept.size, size);
        assert_eq!(std::fs::read(&kept.path).unwrap(), body);
    }
    let (tmp, dir) = results();
    let body = vec![b'x'; max as usize + 1];
    let e = persist_within(&dir, tmp.path(), "w", 1, &mut &body[..], max).unwrap_err();
    assert_eq!(e.code, ferry_codes::Code::TooLarge, "{e:?}");
    assert_eq!(files_in(&tmp), Vec::<String>::new());
}

#[test]
fn the_preview_drops_a_character_the_bound_cuts_and_replaces_invalid_bytes() {
    let bound = HERD_RESULT_PREVIEW_BYTES;
    // "é" is two bytes: its first byte is the last one the preview holds.
    let mut text = "a".repeat(bound - 1);
    text.push('é');
    assert_eq!(
        preview_text(&text.as_bytes()[..bound], true),
        "a".repeat(bound - 1)
    );
    // Not cut: an incomplete sequence at the end is bad input, shown as such.
    assert_eq!(preview_text(b"ab\xc3", false), "ab\u{fffd}");
    assert_eq!(preview_text(b"a\xffb", true), "a\u{fffd}b");
    assert_eq!(preview_text(b"a\x80", true), "a\u{fffd}");
}
