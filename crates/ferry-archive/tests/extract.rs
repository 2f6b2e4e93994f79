//! Confined extraction: exactly the plan, fresh and private, and nothing left on failure.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::*;
use ferry_archive::{PlanOptions, extract};
use ferry_codes::Code;
use ferry_fs::Dir;

fn scratch() -> (tempfile::TempDir, Dir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Dir::open_ambient(tmp.path()).unwrap();
    (tmp, dir)
}

/// Every path under `root`, relative, sorted, folders with a trailing `/`.
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let rel = entry
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if entry.file_type().unwrap().is_dir() {
                out.push(format!("{rel}/"));
                stack.push(entry.path());
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn writes_exactly_the_plan_private_and_fresh() {
    let mut setuid = header(b"run.sh", b'0', 2);
    setuid[100..108].copy_from_slice(b"0006777\0");
    seal(&mut setuid);
    let mut sticky_dir = header(b"open/", b'5', 0);
    sticky_dir[100..108].copy_from_slice(b"0001777\0");
    seal(&mut sticky_dir);
    let tar = Tar::new()
        .entry(sticky_dir, b"")
        .entry(setuid, b"#!")
        .file("deep/er/f.txt", b"hello")
        .file("line\nbreak", b"x")
        .end();
    let plan = plan(&tar).unwrap();
    let (tmp, parent) = scratch();
    let done = extract(&tar[..], &plan, &parent, "out").unwrap();
    assert_eq!((done.files, done.bytes), (3, 8));
    let out = tmp.path().join("out");
    assert_eq!(
        tree(&out),
        [
            "deep/",
            "deep/er/",
            "deep/er/f.txt",
            "line\nbreak",
            "open/",
            "run.sh"
        ]
    );
    assert_eq!(fs::read(out.join("deep/er/f.txt")).unwrap(), b"hello");
    assert_eq!(mode(&out), 0o700);
    assert_eq!(mode(&out.join("open")), 0o700, "no sticky bit");
    assert_eq!(mode(&out.join("deep/er")), 0o700);
    assert_eq!(mode(&out.join("run.sh")), 0o600, "no setuid, no exec");
    let me = fs::metadata(tmp.path()).unwrap().uid();
    assert_eq!(
        fs::metadata(out.join("run.sh")).unwrap().uid(),
        me,
        "no owner change"
    );
}

#[test]
fn the_destination_must_not_exist() {
    let tar = Tar::new().file("a", b"x").end();
    let plan = plan(&tar).unwrap();
    let (tmp, parent) = scratch();
    fs::create_dir(tmp.path().join("taken")).unwrap();
    fs::write(tmp.path().join("taken/keep"), b"mine").unwrap();
    let err = extract(&tar[..], &plan, &parent, "taken").unwrap_err();
    assert_eq!(err.code(), Code::Exists);
    assert_eq!(
        fs::read(tmp.path().join("taken/keep")).unwrap(),
        b"mine",
        "left alone"
    );
    // A symlink at the name is not followed either.
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), tmp.path().join("link")).unwrap();
    let err = extract(&tar[..], &plan, &parent, "link").unwrap_err();
    assert_eq!(err.code(), Code::Exists);
    assert!(fs::read_dir(elsewhere.path()).unwrap().next().is_none());
    for bad in ["a/b", "..", "", "."] {
        assert!(extract(&tar[..], &plan, &parent, bad).is_err(), "{bad:?}");
    }
}

#[test]
fn an_archive_changed_since_its_plan_writes_nothing() {
    let planned = Tar::new().file("a", b"1").file("b", b"22").end();
    let plan = plan(&planned).unwrap();
    let renamed = Tar::new().file("a", b"1").file("c", b"22").end();
    let hostile = Tar::new().file("a", b"1").file("../b", b"22").end();
    let resized = Tar::new().file("a", b"1").file("b", b"333").end();
    let retyped = Tar::new().file("a", b"1").dir("b/").end();
    let longer = Tar::new()
        .file("a", b"1")
        .file("b", b"22")
        .file("c", b"")
        .end();
    let shorter = Tar::new().file("a", b"1").end();
    let reordered = Tar::new().file("b", b"22").file("a", b"1").end();
    let damaged = Tar::new().file("a", b"1").bytes;
    for (what, tar, code) in [
        ("renamed", &renamed, Code::MalformedArchive),
        ("hostile", &hostile, Code::PathEscapes),
        ("resized", &resized, Code::MalformedArchive),
        ("retyped", &retyped, Code::MalformedArchive),
        ("longer", &longer, Code::MalformedArchive),
        ("shorter", &shorter, Code::MalformedArchive),
        ("reordered", &reordered, Code::MalformedArchive),
        ("damaged", &damaged, Code::MalformedArchive),
    ] {
        let (tmp, parent) = scratch();
        let err = extract(&tar[..], &plan, &parent, "out").unwrap_err();
        assert_eq!(err.code(), code, "{what}");
        assert!(
            tree(tmp.path()).is_empty(),
            "{what}: {:?}",
            tree(tmp.path())
        );
    }
}

#[test]
fn a_failure_midway_removes_everything_written() {
    let planned = Tar::new()
        .file("one/a", &[1u8; 5000])
        .file("two/b", &[2u8; 5000])
        .file("three", b"x")
        .end();
    let plan = plan(&planned).unwrap();
    // The stream ends inside the second file's bytes.
    let cut = &planned[..512 + 5120 + 512 + 1000];
    let (tmp, parent) = scratch();
    let err = extract(cut, &plan, &parent, "out").unwrap_err();
    assert_eq!(err.code(), Code::MalformedArchive);
    assert!(tree(tmp.path()).is_empty(), "{:?}", tree(tmp.path()));
}

#[test]
fn extraction_keeps_the_caps_of_its_plan() {
    let tar = Tar::new().file("a", b"x").end();
    let small = PlanOptions {
        limits: ferry_archive::Limits {
            archive_max_bytes: tar.len() as u64,
            ..Default::default()
        },
        ..PlanOptions::default()
    };
    let plan = plan_with(&tar, &small).unwrap();
    let mut padded = tar.clone();
    padded.extend_from_slice(&[0u8; 512]);
    let (tmp, parent) = scratch();
    let err = extract(&padded[..], &plan, &parent, "out").unwrap_err();
    assert_eq!(err.code(), Code::TooLarge);
    assert!(tree(tmp.path()).is_empty());
}

#[test]
fn implicit_and_explicit_folders_meet_without_conflict() {
    let tar = Tar::new()
        .file("d/x", b"1")
        .dir("d/")
        .dir("e/")
        .file("e/y", b"2")
        .end();
    let plan = plan(&tar).unwrap();
    let (tmp, parent) = scratch();
    extract(&tar[..], &plan, &parent, "out").unwrap();
    assert_eq!(tree(&tmp.path().join("out")), ["d/", "d/x", "e/", "e/y"]);
}
