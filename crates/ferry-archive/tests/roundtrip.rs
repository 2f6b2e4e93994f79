//! The tar writer's own archives, read back by the planner and the extractor; and no
//! input, however broken, panics the planner.

mod common;

use std::fs;
use std::io::Read;

use common::*;
use ferry_archive::{EntryMeta, EntryType, PlanOptions, TarWriter, extract};
use ferry_codes::Code;
use ferry_fs::Dir;
use proptest::prelude::*;

/// A tree to archive: folders (ending in `/`) and files with their bytes.
fn names() -> Vec<(String, Vec<u8>)> {
    let long_component = "l".repeat(200);
    let over_255 = format!("{}/{}/{}", "p".repeat(120), "q".repeat(120), "r".repeat(60));
    let deep = (0..60)
        .map(|i| format!("d{i}"))
        .collect::<Vec<_>>()
        .join("/");
    let pax_only = format!("{}/{}", "x".repeat(160), "y".repeat(150));
    vec![
        ("unicode/".into(), vec![]),
        ("unicode/relatório ñ 日本語 🚀.txt".into(), b"u".to_vec()),
        ("unicode/cafe\u{301}".into(), b"nfd kept".to_vec()),
        ("new\nline".into(), b"n".to_vec()),
        (format!("{long_component}.bin"), vec![9u8; 1000]),
        (over_255.clone(), vec![1u8; 513]),
        (format!("{deep}/"), vec![]),
        (format!("{deep}/leaf"), b"deep".to_vec()),
        (pax_only, b"pax".to_vec()),
        ("empty".into(), vec![]),
        (format!("{}/", "e".repeat(250)), vec![]),
        ("c".repeat(100), b"fills the name field".to_vec()),
        (
            format!("{}/{}", "p".repeat(155), "q".repeat(100)),
            b"fills both".to_vec(),
        ),
        ("exact512".into(), vec![5u8; 512]),
    ]
}

fn write_tree(tree: &[(String, Vec<u8>)], gzip: bool) -> Vec<u8> {
    let meta = EntryMeta {
        mtime: 1_700_000_000,
        mode: 0o4755,
    };
    let mut writer = if gzip {
        TarWriter::gzip(Vec::new())
    } else {
        TarWriter::new(Vec::new())
    };
    for (name, data) in tree {
        match name.strip_suffix('/') {
            Some(dir) => writer.add_dir(dir, meta).unwrap(),
            None => writer
                .add_file(name, data.len() as u64, meta, &data[..])
                .unwrap(),
        }
    }
    writer.finish().unwrap()
}

#[test]
fn the_writers_archives_plan_and_extract_exactly() {
    let tree = names();
    for gzip in [false, true] {
        let bytes = write_tree(&tree, gzip);
        let plan = ferry_archive::plan(&bytes[..], &PlanOptions::default()).unwrap();
        let expected: Vec<&str> = tree.iter().map(|(n, _)| n.trim_end_matches('/')).collect();
        assert_eq!(paths(&plan), expected);
        for ((name, data), entry) in tree.iter().zip(&plan.entries) {
            let kind = if name.ends_with('/') {
                EntryType::Dir
            } else {
                EntryType::File
            };
            assert_eq!(
                (entry.kind, entry.size),
                (kind, data.len() as u64),
                "{name:?}"
            );
        }
        let tmp = tempfile::tempdir().unwrap();
        let parent = Dir::open_ambient(tmp.path()).unwrap();
        extract(&bytes[..], &plan, &parent, "out").unwrap();
        for (name, data) in &tree {
            let path = tmp.path().join("out").join(name.trim_end_matches('/'));
            if name.ends_with('/') {
                assert!(path.is_dir(), "{name:?}");
            } else {
                assert_eq!(&fs::read(&path).unwrap(), data, "{name:?}");
            }
        }
    }
}

#[test]
fn the_tar_crate_reads_the_writers_archives_alike() {
    let tree = names();
    let bytes = write_tree(&tree, false);
    let mut archive = tar::Archive::new(&bytes[..]);
    let mut seen = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        assert_eq!(entry.header().mode().unwrap(), 0o755, "never setuid");
        seen.push((path, data));
    }
    assert_eq!(seen, tree);
}

#[test]
fn a_file_that_grew_or_shrank_is_refused() {
    let mut writer = TarWriter::new(Vec::new());
    let err = writer
        .add_file("shrank", 10, EntryMeta::default(), &b"12345"[..])
        .unwrap_err();
    assert_eq!(err.code(), Code::ChangedMeanwhile);
    assert!(err.to_string().contains("only 5"), "{err}");
    let mut writer = TarWriter::new(Vec::new());
    let err = writer
        .add_file("grew", 3, EntryMeta::default(), &b"12345"[..])
        .unwrap_err();
    assert_eq!(err.code(), Code::ChangedMeanwhile);
    let mut writer = TarWriter::new(Vec::new());
    writer
        .add_file("exact", 5, EntryMeta::default(), &b"12345"[..])
        .unwrap();
}

#[test]
fn the_writer_refuses_names_the_planner_would_not_admit() {
    for bad in ["", "/abs", "a//b", "../x", "a/./b", "a/", "a\0b"] {
        let mut writer = TarWriter::new(Vec::new());
        let err = writer
            .add_file(bad, 0, EntryMeta::default(), &b""[..])
            .unwrap_err();
        assert_eq!(err.code(), Code::BadPath, "{bad:?}");
        let err = writer.add_dir(bad, EntryMeta::default()).unwrap_err();
        assert_eq!(err.code(), Code::BadPath, "{bad:?}");
    }
}

fn tree_strategy() -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
    let component = "[a-zA-Z0-9 ._\u{e9}\u{65e5}\n-]{1,40}".prop_filter("not a dot name", |c| {
        c != "." && c != ".." && !c.starts_with(".ferry-tmp-")
    });
    let path = prop::collection::vec(component, 1..8).prop_map(|c| c.join("/"));
    prop::collection::btree_map(path, prop::collection::vec(any::<u8>(), 0..600), 1..12)
        .prop_map(|map| map.into_iter().collect::<Vec<_>>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any tree of files the writer takes comes back from the planner as it went in,
    /// unless two of its names are a file and a folder at one place.
    #[test]
    fn random_trees_round_trip(tree in tree_strategy()) {
        let bytes = write_tree(&tree, false);
        match ferry_archive::plan(&bytes[..], &PlanOptions::default()) {
            Ok(plan) => {
                let names: Vec<&str> = tree.iter().map(|(n, _)| n.as_str()).collect();
                prop_assert_eq!(paths(&plan), names);
            }
            Err(e) => prop_assert_eq!(e.code(), Code::NameCollision),
        }
    }

    /// Random bytes never panic the planner.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = ferry_archive::plan(&bytes[..], &PlanOptions::default());
        let _ = ferry_archive::plan(&gzip(&bytes)[..], &PlanOptions::default());
    }

    /// A valid archive with bytes flipped or cut never panics the planner, and is
    /// refused or admitted with names that pass every rule.
    #[test]
    fn damaged_archives_never_panic(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = write_tree(&names(), false);
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let len = bytes.len();
        bytes.truncate(len - cut.index(len / 4));
        if let Ok(plan) = ferry_archive::plan(&bytes[..], &PlanOptions::default()) {
            for entry in &plan.entries {
                prop_assert!(!entry.path.split('/').any(|c| c.is_empty() || c == ".."));
            }
        }
    }
}
