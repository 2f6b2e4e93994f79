//! A tree made from the input, written by the tar writer, planned and extracted: what the
//! writer wrote is admitted as it was (or refused for a rule of names or a cap, never as
//! damaged), and extraction writes exactly those bytes.
#![no_main]

use ferry_archive::{EntryMeta, EntryType, PlanOptions, TarWriter};
use ferry_codes::Code;
use libfuzzer_sys::fuzz_target;

/// One entry of the tree: its name, and its bytes (`None` for a folder).
type Entry = (String, Option<Vec<u8>>);

/// Splits the input at 0xff bytes; each piece is a flags byte and a UTF-8 name.
fn tree(data: &[u8]) -> (bool, Vec<Entry>) {
    let gzip = data.first().is_some_and(|b| b & 1 == 1);
    let mut entries = Vec::new();
    for piece in data.split(|&b| b == 0xff).skip(1).take(64) {
        let Some((&flags, name)) = piece.split_first() else {
            continue;
        };
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let is_dir = flags & 0x80 != 0;
        let bytes = (!is_dir).then(|| vec![flags; usize::from(flags) * 7]);
        entries.push((name.to_owned(), bytes));
    }
    (gzip, entries)
}

fuzz_target!(|data: &[u8]| {
    let (gzip, entries) = tree(data);
    let mut writer = if gzip {
        TarWriter::gzip(Vec::new())
    } else {
        TarWriter::new(Vec::new())
    };
    let meta = EntryMeta {
        mtime: 0,
        mode: 0o7777,
    };
    let mut written = Vec::new();
    for (name, bytes) in entries {
        let added = match &bytes {
            None => writer.add_dir(&name, meta),
            Some(b) => writer.add_file(&name, b.len() as u64, meta, &b[..]),
        };
        match added {
            Ok(()) => written.push((name, bytes)),
            // The writer refuses names no archive should carry; nothing was written.
            Err(e) => assert_eq!(e.code(), Code::BadPath, "{e}"),
        }
    }
    let archive = writer.finish().unwrap();
    let plan = match ferry_archive::plan(&archive[..], &PlanOptions::default()) {
        Ok(plan) => plan,
        Err(e) => {
            let code = e.code();
            assert!(
                matches!(
                    code,
                    Code::NameCollision
                        | Code::PlatformName
                        | Code::TooManyEntries
                        | Code::TooLarge
                ),
                "the writer's own archive refused as {code}: {e}"
            );
            return;
        }
    };
    assert_eq!(plan.entries.len(), written.len());
    for (entry, (name, bytes)) in plan.entries.iter().zip(&written) {
        assert_eq!(&entry.path, name);
        let kind = if bytes.is_some() {
            EntryType::File
        } else {
            EntryType::Dir
        };
        assert_eq!(entry.kind, kind);
        assert_eq!(entry.size, bytes.as_ref().map_or(0, |b| b.len() as u64));
    }
    let tmp = tempfile::tempdir().unwrap();
    let parent = ferry_fs::Dir::open_ambient(tmp.path()).unwrap();
    ferry_archive::extract(&archive[..], &plan, &parent, "out").unwrap();
    for (name, bytes) in &written {
        let path = tmp.path().join("out").join(name);
        match bytes {
            Some(b) => assert_eq!(&std::fs::read(&path).unwrap(), b),
            None => assert!(path.is_dir()),
        }
    }
});
