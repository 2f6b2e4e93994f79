//! Every cap of C-ARCHIVE at limit−1, limit and limit+1, with the shipped limits where a
//! test can afford them and with small ones otherwise.

mod common;

use common::*;
use ferry_archive::{Limits, PlanOptions};
use ferry_codes::Code;
use ferry_config::limits::*;

const MIB: u64 = 1024 * 1024;

fn with(limits: Limits) -> PlanOptions {
    PlanOptions {
        limits,
        ..PlanOptions::default()
    }
}

/// `Ok` when admitted, else the refusal's code.
fn outcome(bytes: &[u8], options: &PlanOptions) -> Result<(), Code> {
    ferry_archive::plan(bytes, options)
        .map(|_| ())
        .map_err(|e| e.code())
}

#[test]
fn the_shipped_limits_are_the_specified_ones() {
    let limits = Limits::default();
    assert_eq!(limits.archive_max_bytes, 16 * MIB);
    assert_eq!(limits.max_descendants, 5000);
    assert_eq!(limits.entry_max_bytes, 16 * MIB);
    assert_eq!(limits.unpacked_max_bytes, 64 * MIB);
    assert_eq!(limits.pax_max_bytes, ARCHIVE_PAX_MAX_BYTES);
    assert_eq!(limits.long_name_max_bytes, ARCHIVE_LONG_NAME_MAX_BYTES);
}

/// A tar of exactly `len` bytes (a multiple of 512 at least 2048, plus any zeros).
fn tar_of_len(len: usize) -> Vec<u8> {
    let mut tar = Tar::new().file("f", &vec![1u8; 512]).end();
    tar.resize(len, 0);
    tar
}

#[test]
fn archive_bytes_at_the_shipped_cap() {
    let cap = ARCHIVE_MAX_BYTES as usize;
    let big_file = cap - 3 * 512;
    let exact = Tar::new().file("big", &vec![7u8; big_file]).end();
    assert_eq!(exact.len(), cap);
    assert_eq!(outcome(&exact, &PlanOptions::default()), Ok(()));
    let mut under = exact.clone();
    under.truncate(cap - 1024);
    under.resize(cap - 1, 0);
    assert_eq!(outcome(&under, &PlanOptions::default()), Ok(()));
    let mut over = exact;
    over.push(0);
    assert_eq!(outcome(&over, &PlanOptions::default()), Err(Code::TooLarge));
}

#[test]
fn archive_bytes_count_what_arrives_compressed_or_not() {
    let tar = tar_of_len(4096);
    let cap = |n: usize| {
        with(Limits {
            archive_max_bytes: n as u64,
            ..Limits::default()
        })
    };
    assert_eq!(outcome(&tar, &cap(4095)), Err(Code::TooLarge));
    assert_eq!(outcome(&tar, &cap(4096)), Ok(()));
    assert_eq!(outcome(&tar, &cap(4097)), Ok(()));
    let gz = gzip(&tar);
    assert!(gz.len() < 4096);
    assert_eq!(outcome(&gz, &cap(gz.len() - 1)), Err(Code::TooLarge));
    assert_eq!(outcome(&gz, &cap(gz.len())), Ok(()));
    assert_eq!(outcome(&gz, &cap(gz.len() + 1)), Ok(()));
}

#[test]
fn a_gzip_bomb_stops_at_the_unpacked_cap() {
    // 1 GiB of zeros claimed by one file: refused at its header, nothing inflated.
    let header_only = Tar::new().raw(&header(b"bomb", b'0', 1 << 30)).bytes;
    let err = plan(&gzip(&header_only)).unwrap_err();
    assert_eq!(err.code(), Code::TooLarge);
    assert!(err.to_string().contains("per file"), "{err}");
}

fn files(count: usize, dir: &str) -> Vec<u8> {
    let mut tar = Tar::new();
    for i in 0..count {
        tar = tar.file(&format!("{dir}{i}"), b"");
    }
    tar.end()
}

#[test]
fn descendants_at_the_shipped_cap() {
    let options = PlanOptions::default();
    assert_eq!(outcome(&files(4999, ""), &options), Ok(()));
    let plan = ferry_archive::plan(&files(5000, "")[..], &options).unwrap();
    assert_eq!(plan.descendants, 5000);
    assert_eq!(
        outcome(&files(5001, ""), &options),
        Err(Code::TooManyEntries)
    );
}

#[test]
fn implicit_parents_count_toward_the_cap_once_each() {
    let options = PlanOptions::default();
    let under = ferry_archive::plan(&files(4998, "d/")[..], &options).unwrap();
    assert_eq!(under.descendants, 4999);
    // 4999 files and their one implicit folder: 5000.
    let plan = ferry_archive::plan(&files(4999, "d/")[..], &options).unwrap();
    assert_eq!(plan.descendants, 5000);
    assert_eq!(plan.entries.len(), 4999);
    assert_eq!(
        outcome(&files(5000, "d/"), &options),
        Err(Code::TooManyEntries)
    );
    // Deep names: every level is a descendant.
    let small = |n| {
        with(Limits {
            max_descendants: n,
            ..Limits::default()
        })
    };
    let deep = Tar::new().file("a/b/c/d/e", b"").file("a/b/x", b"").end();
    assert_eq!(outcome(&deep, &small(5)), Err(Code::TooManyEntries));
    assert_eq!(outcome(&deep, &small(6)), Ok(()));
    assert_eq!(outcome(&deep, &small(7)), Ok(()));
}

#[test]
fn entry_bytes_at_the_cap() {
    let small = with(Limits {
        entry_max_bytes: 1000,
        ..Limits::default()
    });
    for (size, expected) in [(999, Ok(())), (1000, Ok(())), (1001, Err(Code::TooLarge))] {
        let tar = Tar::new().file("f", &vec![0u8; size]).end();
        assert_eq!(outcome(&tar, &small), expected, "{size}");
    }
    // The shipped cap, through gzip (16 MiB of zeros inflate from a few KiB).
    let cap = ARCHIVE_ENTRY_MAX_BYTES as usize;
    let exact = gzip(&Tar::new().file("f", &vec![0u8; cap]).end());
    assert_eq!(outcome(&exact, &PlanOptions::default()), Ok(()));
    let over = gzip(&Tar::new().raw(&header(b"f", b'0', cap as u64 + 1)).bytes);
    assert_eq!(outcome(&over, &PlanOptions::default()), Err(Code::TooLarge));
}

#[test]
fn unpacked_bytes_at_the_cap() {
    let small = with(Limits {
        unpacked_max_bytes: 1200,
        ..Limits::default()
    });
    for (last, expected) in [(399, Ok(())), (400, Ok(())), (401, Err(Code::TooLarge))] {
        let tar = Tar::new()
            .file("a", &[0u8; 400])
            .file("b", &[0u8; 400])
            .file("c", &vec![0u8; last])
            .end();
        assert_eq!(outcome(&tar, &small), expected, "{last}");
    }
    let err = ferry_archive::plan(
        &Tar::new().file("a", &[0u8; 1201]).end()[..],
        &with(Limits {
            unpacked_max_bytes: 1200,
            entry_max_bytes: 2000,
            ..Limits::default()
        }),
    )
    .unwrap_err();
    assert!(err.to_string().contains("unpacks to more than"), "{err}");
}

/// PAX records of exactly `len` bytes: one record, or two where one cannot have that
/// length (a record of 1000 bytes would need a length that is both 3 and 4 digits long).
fn pax_of_len(len: usize) -> Vec<u8> {
    let one = |n: usize| {
        (n.saturating_sub(30)..n)
            .map(|v| record("comment", &vec![b'c'; v]))
            .find(|r| r.len() == n)
    };
    one(len)
        .or_else(|| Some([one(12)?, one(len - 12)?].concat()))
        .unwrap_or_else(|| panic!("no records of {len} bytes"))
}

#[test]
fn pax_headers_at_the_cap() {
    let cap = ARCHIVE_PAX_MAX_BYTES as usize;
    for (len, expected) in [
        (cap - 1, Ok(())),
        (cap, Ok(())),
        (cap + 1, Err(Code::TooLarge)),
    ] {
        let records = pax_of_len(len);
        assert_eq!(records.len(), len);
        let tar = Tar::new().pax_raw(&records).file("a", b"").end();
        assert_eq!(outcome(&tar, &PlanOptions::default()), expected, "{len}");
    }
    // A claimed size far past the cap is refused before anything is allocated or read.
    let claimed = Tar::new()
        .raw(&header(b"././@PaxHeader", b'x', 1 << 40))
        .bytes;
    assert_eq!(
        outcome(&claimed, &PlanOptions::default()),
        Err(Code::TooLarge)
    );
}

#[test]
fn gnu_long_names_at_the_cap() {
    let cap = ARCHIVE_LONG_NAME_MAX_BYTES as usize;
    for (len, expected) in [
        (cap - 1, Ok(())),
        (cap, Ok(())),
        (cap + 1, Err(Code::TooLarge)),
    ] {
        // The name ends at its first NUL; the record is padded to `len` with NULs.
        let mut data = b"short".to_vec();
        data.resize(len, 0);
        let tar = Tar::new()
            .entry(header(b"././@LongLink", b'L', len as u64), &data)
            .file("ignored", b"")
            .end();
        assert_eq!(outcome(&tar, &PlanOptions::default()), expected, "{len}");
    }
    let claimed = Tar::new()
        .raw(&header(b"././@LongLink", b'L', 1 << 40))
        .bytes;
    assert_eq!(
        outcome(&claimed, &PlanOptions::default()),
        Err(Code::TooLarge)
    );
}

/// A gzip tar of files of zeros of the given sizes, streamed through the writer.
fn zeros_gz(sizes: &[u64]) -> Vec<u8> {
    use std::io::Read;
    let mut writer = ferry_archive::TarWriter::gzip(Vec::new());
    for (i, &size) in sizes.iter().enumerate() {
        let data = std::io::repeat(0).take(size);
        writer
            .add_file(&format!("z{i}"), size, Default::default(), data)
            .unwrap();
    }
    writer.finish().unwrap()
}

#[test]
fn unpacked_bytes_at_the_shipped_cap() {
    let entry = ARCHIVE_ENTRY_MAX_BYTES;
    assert_eq!(ARCHIVE_UNPACKED_MAX_BYTES, 4 * entry);
    let options = PlanOptions::default();
    let under = zeros_gz(&[entry, entry, entry, entry - 1]);
    assert_eq!(outcome(&under, &options), Ok(()));
    let exact = zeros_gz(&[entry, entry, entry, entry]);
    assert_eq!(outcome(&exact, &options), Ok(()));
    let over = zeros_gz(&[entry, entry, entry, entry, 1]);
    assert_eq!(outcome(&over, &options), Err(Code::TooLarge));
}

#[test]
fn metadata_records_count_as_unpacked_bytes() {
    let small = with(Limits {
        unpacked_max_bytes: 1200,
        ..Limits::default()
    });
    let records = pax_of_len(1000);
    for (file, expected) in [(199, Ok(())), (200, Ok(())), (201, Err(Code::TooLarge))] {
        let tar = Tar::new()
            .pax_raw(&records)
            .file("a", &vec![0u8; file])
            .end();
        assert_eq!(outcome(&tar, &small), expected, "{file}");
    }
    // A record alone past the cap is refused before it is read.
    let tar = Tar::new().pax_raw(&pax_of_len(1201)).file("a", b"").end();
    assert_eq!(outcome(&tar, &small), Err(Code::TooLarge));
}
