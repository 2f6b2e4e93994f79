//! Damaged archives: every one refused as `malformed_archive`, none panics.

mod common;

use common::*;
use ferry_codes::Code;

#[test]
fn a_bad_checksum_is_malformed() {
    let mut h = header(b"a", b'0', 0);
    h[148] = if h[148] == b'1' { b'2' } else { b'1' };
    let tar = Tar::new().entry(h, b"").end();
    let err = plan(&tar).unwrap_err();
    assert_eq!(err.code(), Code::MalformedArchive);
    assert!(err.to_string().contains("checksum"), "{err}");
    // One flipped bit anywhere in the header is seen.
    for i in [0, 99, 100, 124, 156, 257, 345, 511] {
        let mut h = header(b"a", b'0', 0);
        h[i] ^= 0x01;
        let tar = Tar::new().entry(h, b"").end();
        assert_eq!(refusal(&tar), Code::MalformedArchive, "byte {i}");
    }
}

#[test]
fn old_signed_checksums_are_accepted() {
    let mut h = header("é".as_bytes(), b'0', 0);
    h[148..156].fill(b' ');
    let signed: i64 = h.iter().map(|&x| i64::from(x as i8)).sum();
    h[148..156].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
    let tar = Tar::new().entry(h, b"").end();
    assert!(plan(&tar).is_ok());
}

#[test]
fn bad_octal_is_malformed() {
    for (range, bytes) in [
        (124..136, &b"0000000000x\0"[..]),
        (124..136, b"00000000009\0"),
        (124..136, b"12 34\0\0\0\0\0\0\0"),
        (100..108, b"0000x44\0"),
        (136..148, b"1400000000-\0"),
        (148..156, b"abcdef\0 "),
    ] {
        let mut h = header(b"a", b'0', 0);
        h[range.clone()].copy_from_slice(bytes);
        if range.start != 148 {
            common::seal(&mut h);
        }
        let tar = Tar::new().entry(h, b"").end();
        assert_eq!(
            refusal(&tar),
            Code::MalformedArchive,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn a_size_past_the_end_is_malformed() {
    let mut tar = Tar::new().entry(header(b"a", b'0', 10_000), b"short").bytes;
    tar.truncate(512 + 512);
    let err = plan(&tar).unwrap_err();
    assert_eq!(err.code(), Code::MalformedArchive);
    // Even with an end marker after it, the claimed size eats it and then passes the end.
    let tar = Tar::new().raw(&header(b"a", b'0', 10_000)).end();
    assert_eq!(refusal(&tar), Code::MalformedArchive);
    // A huge size in base-256 is refused by the cap first, before reading anything.
    let mut h = header(b"a", b'0', 0);
    h[124..136].copy_from_slice(&[0x80, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff]);
    common::seal(&mut h);
    assert_eq!(refusal(&Tar::new().raw(&h).end()), Code::TooLarge);
}

#[test]
fn a_truncated_stream_is_malformed() {
    let whole = Tar::new().file("a", &[1u8; 1000]).file("b", b"x").end();
    for cut in [1, 100, 511, 512, 513, 1024, 1536, 1537, 2048, 2560] {
        let code = refusal(&whole[..cut]);
        assert_eq!(code, Code::MalformedArchive, "cut at {cut}");
    }
    // The end marker alone is an empty archive; one zero block then the end is accepted.
    assert!(plan(&whole[..whole.len() - 512]).is_ok());
    assert!(plan(&[0u8; 1024]).unwrap().entries.is_empty());
    assert_eq!(refusal(b""), Code::MalformedArchive);
    // A truncated gzip stream is damaged, not merely short.
    let gz = gzip(&whole);
    assert_eq!(refusal(&gz[..gz.len() / 2]), Code::MalformedArchive);
    assert_eq!(
        refusal(&gz[..gz.len() - 4]),
        Code::MalformedArchive,
        "CRC or length lost"
    );
}

#[test]
fn broken_pax_is_malformed() {
    for records in [
        &b"99 path=a\n"[..],
        b"5 path=a\n",
        b"nonsense",
        b"10 path=a",
        b"9 noequal\n",
        b"11 size=-1\n",
        b"11 size=zz\n",
        b"30 size=999999999999999999999\n",
    ] {
        let tar = Tar::new().pax_raw(records).file("a", b"").end();
        assert_eq!(
            refusal(&tar),
            Code::MalformedArchive,
            "{:?}",
            String::from_utf8_lossy(records)
        );
    }
}

#[test]
fn metadata_records_must_lead_to_one_entry() {
    let dangling = Tar::new().pax(&[("path", b"x")]).end();
    assert_eq!(refusal(&dangling), Code::MalformedArchive);
    let two_pax = Tar::new()
        .pax(&[("path", b"x")])
        .pax(&[("path", b"y")])
        .file("a", b"")
        .end();
    assert_eq!(refusal(&two_pax), Code::MalformedArchive);
    let two_long = Tar::new()
        .long_name(b"x")
        .long_name(b"y")
        .file("a", b"")
        .end();
    assert_eq!(refusal(&two_long), Code::MalformedArchive);
    let dangling_long = Tar::new().long_name(b"x").end();
    assert_eq!(refusal(&dangling_long), Code::MalformedArchive);
}

#[test]
fn a_folder_with_content_is_malformed() {
    let tar = Tar::new().entry(header(b"d/", b'5', 3), b"abc").end();
    assert_eq!(refusal(&tar), Code::MalformedArchive);
}

#[test]
fn only_zeros_may_follow_the_end_marker() {
    let mut tar = Tar::new().file("a", b"").end();
    tar.extend_from_slice(&[0u8; 8192]);
    assert!(plan(&tar).is_ok(), "a writer's record padding");
    tar.extend_from_slice(b"garbage");
    assert_eq!(refusal(&tar), Code::MalformedArchive);
    let mut gz = gzip(&Tar::new().file("a", b"").end());
    gz.extend_from_slice(b"not gzip");
    assert_eq!(refusal(&gz), Code::MalformedArchive);
    // A zero block followed by a header is not an end.
    let mut hidden = Tar::new().file("a", b"").bytes;
    hidden.extend_from_slice(&[0u8; 512]);
    hidden.extend(Tar::new().file("../evil", b"").end());
    assert_eq!(refusal(&hidden), Code::MalformedArchive);
}

#[test]
fn not_a_tar_is_malformed() {
    for bytes in [&b"hello world"[..], &[0x1f, 0x8b], &[0x1f], &[0xffu8; 4096]] {
        let code = refusal(bytes);
        assert_eq!(code, Code::MalformedArchive, "{bytes:?}");
    }
}
