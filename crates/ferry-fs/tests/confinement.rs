//! C-PATH and C-ATOMIC against a real file system, through both resolvers.

use std::io::Read;
use std::os::unix::fs::symlink;
use std::sync::Mutex;

use ferry_fs::{AtomicWriter, Dir, EntryKind, Follow, FsError, set_openat2_enabled};

/// The resolver switch is process-wide; tests that flip it take turns.
static RESOLVER: Mutex<()> = Mutex::new(());

fn each_resolver(check: impl Fn()) {
    let _guard = RESOLVER.lock().unwrap_or_else(|e| e.into_inner());
    for openat2 in [true, false] {
        set_openat2_enabled(openat2);
        check();
    }
    set_openat2_enabled(true);
}

struct Tree {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

/// root/ (the handle) with a secret outside it and links of every kind inside it.
fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "secret").unwrap();
    std::fs::write(root.join("sub/inner.txt"), "inner").unwrap();
    symlink(&outside, root.join("out-dir")).unwrap();
    symlink(outside.join("secret"), root.join("out-file")).unwrap();
    symlink("sub/inner.txt", root.join("in-file")).unwrap();
    symlink("sub", root.join("in-dir")).unwrap();
    symlink("../../outside/secret", root.join("sub/rel-escape")).unwrap();
    Tree {
        _tmp: tmp,
        root,
        outside,
    }
}

fn read(dir: &Dir, rel: &str, follow: Follow) -> Result<String, FsError> {
    let mut text = String::new();
    dir.open_file(rel, follow)?
        .read_to_string(&mut text)
        .unwrap();
    Ok(text)
}

#[test]
fn reads_never_leave_the_handle() {
    each_resolver(|| {
        let t = tree();
        let dir = Dir::open_ambient(&t.root).unwrap();
        for rel in [
            "out-file",
            "out-dir/secret",
            "sub/rel-escape",
            "../outside/secret",
            "/etc/passwd",
        ] {
            for follow in [Follow::Never, Follow::Beneath] {
                let got = read(&dir, rel, follow);
                assert!(
                    matches!(got, Err(FsError::PathEscapes)),
                    "{rel} {follow:?}: {got:?}"
                );
            }
        }
        assert_eq!(read(&dir, "sub/inner.txt", Follow::Never).unwrap(), "inner");
    });
}

#[test]
fn links_inside_follow_only_when_asked() {
    each_resolver(|| {
        let t = tree();
        let dir = Dir::open_ambient(&t.root).unwrap();
        assert_eq!(read(&dir, "in-file", Follow::Beneath).unwrap(), "inner");
        assert_eq!(
            read(&dir, "in-dir/inner.txt", Follow::Beneath).unwrap(),
            "inner"
        );
        assert!(dir.open_dir("in-dir", Follow::Beneath).is_ok());
        assert!(matches!(
            read(&dir, "in-file", Follow::Never),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(
            read(&dir, "in-dir/inner.txt", Follow::Never),
            Err(FsError::PathEscapes)
        ));
    });
}

#[test]
fn writes_refuse_links_at_every_component() {
    each_resolver(|| {
        let t = tree();
        let dir = Dir::open_ambient(&t.root).unwrap();
        // A link as the parent, inside or outside, and as the target name.
        assert!(matches!(
            dir.open_dir("out-dir", Follow::Never),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(
            dir.open_dir("in-dir", Follow::Never),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(
            AtomicWriter::create(&dir, "out-file"),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(
            AtomicWriter::create(&dir, "in-file"),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(
            dir.create_dir("out-dir/new", 0o700),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(
            dir.create_dir_all("out-dir/a/b", 0o700),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(
            dir.rename("sub/inner.txt", "out-dir/stolen", false),
            Err(FsError::PathEscapes)
        ));
        assert_eq!(
            std::fs::read_to_string(t.outside.join("secret")).unwrap(),
            "secret"
        );
        assert_eq!(std::fs::read_dir(&t.outside).unwrap().count(), 1);
    });
}

#[test]
fn remove_takes_the_link_not_its_target() {
    each_resolver(|| {
        let t = tree();
        let dir = Dir::open_ambient(&t.root).unwrap();
        dir.remove("out-dir").unwrap();
        dir.remove("out-file").unwrap();
        assert!(t.outside.join("secret").exists());
        // A tree holding a link out: the link goes, the outside stays.
        std::fs::create_dir_all(t.root.join("tree/deep")).unwrap();
        symlink(&t.outside, t.root.join("tree/deep/link")).unwrap();
        dir.remove("tree").unwrap();
        assert!(!t.root.join("tree").exists());
        assert!(t.outside.join("secret").exists());
    });
}

#[test]
fn atomic_write_appears_whole_or_not_at_all() {
    let t = tree();
    let dir = Dir::open_ambient(&t.root).unwrap();
    std::fs::write(t.root.join("doc.txt"), "old").unwrap();

    let mut w = AtomicWriter::create(&dir, "doc.txt").unwrap();
    w.write(b"new contents").unwrap();
    assert_eq!(
        std::fs::read_to_string(t.root.join("doc.txt")).unwrap(),
        "old"
    );
    drop(w);
    assert_eq!(
        std::fs::read_to_string(t.root.join("doc.txt")).unwrap(),
        "old"
    );
    assert!(no_temporaries(&dir));

    let mut w = AtomicWriter::create(&dir, "doc.txt").unwrap().limit(4);
    w.write(b"1234").unwrap();
    assert!(matches!(w.write(b"5"), Err(FsError::TooLarge(4))));
    drop(w);
    assert_eq!(
        std::fs::read_to_string(t.root.join("doc.txt")).unwrap(),
        "old"
    );
    assert!(no_temporaries(&dir));

    let mut w = AtomicWriter::create(&dir, "doc.txt").unwrap();
    w.write(b"abc").unwrap();
    let written = w.commit().unwrap();
    assert_eq!(written.size, 3);
    assert_eq!(
        written.sha256_hex(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        std::fs::read_to_string(t.root.join("doc.txt")).unwrap(),
        "abc"
    );
    assert!(no_temporaries(&dir));
}

#[test]
fn a_link_planted_during_a_write_is_refused_at_commit() {
    let t = tree();
    let dir = Dir::open_ambient(&t.root).unwrap();
    let mut w = AtomicWriter::create(&dir, "late.txt").unwrap();
    w.write(b"data").unwrap();
    symlink(t.outside.join("secret"), t.root.join("late.txt")).unwrap();
    assert!(matches!(w.commit(), Err(FsError::PathEscapes)));
    assert_eq!(
        std::fs::read_to_string(t.outside.join("secret")).unwrap(),
        "secret"
    );
    assert!(no_temporaries(&dir));
}

#[test]
fn listing_shows_links_as_links() {
    let t = tree();
    let dir = Dir::open_ambient(&t.root).unwrap();
    let mut entries = dir.entries().unwrap();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let kinds: Vec<_> = entries
        .iter()
        .map(|e| (e.name.as_str(), e.meta.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("in-dir", EntryKind::Symlink),
            ("in-file", EntryKind::Symlink),
            ("out-dir", EntryKind::Symlink),
            ("out-file", EntryKind::Symlink),
            ("sub", EntryKind::Dir),
        ]
    );
}

#[test]
fn a_fifo_does_not_hang_an_open() {
    let t = tree();
    let dir = Dir::open_ambient(&t.root).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        t.root.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(matches!(
        dir.open_file("pipe", Follow::Never),
        Err(FsError::NotRegular)
    ));
    assert!(matches!(
        AtomicWriter::create(&dir, "pipe"),
        Err(FsError::NotRegular)
    ));
}

fn no_temporaries(dir: &Dir) -> bool {
    dir.entries()
        .unwrap()
        .iter()
        .all(|e| !ferry_fs::is_temporary(&e.name))
}

#[test]
fn file_bytes_counts_apparent_sizes_once_and_follows_no_link() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    std::fs::write(root.join("one"), [1u8; 10]).unwrap();
    std::fs::write(root.join("a/b/c/deep"), [1u8; 100]).unwrap();
    // Sparse: counted at its length, so it cannot hide from a quota.
    std::fs::File::create(root.join("a/sparse"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    std::fs::hard_link(root.join("one"), root.join("a/one-again")).unwrap();
    std::fs::write(root.join(".ferry-tmp-abc"), [1u8; 1000]).unwrap();
    std::fs::write(tmp.path().join("outside"), [1u8; 5000]).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("outside"), root.join("link")).unwrap();
    std::os::unix::fs::symlink(tmp.path(), root.join("dirlink")).unwrap();
    let dir = Dir::open_ambient(&root).unwrap();
    assert_eq!(dir.file_bytes().unwrap(), 10 + 100 + (1 << 30));
}

#[test]
fn the_folders_a_write_made_go_back_only_while_empty_and_only_those_it_made() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("was-there")).unwrap();
    let dir = Dir::open_ambient(tmp.path()).unwrap();
    let (_, made) = dir
        .create_dir_all_made("was-there/a/b/c", 0o700, None)
        .unwrap();
    assert!(!made.is_empty());
    // Another writer's file lands in `a/b` meanwhile: `c` goes, `b` and `a` stay.
    std::fs::write(tmp.path().join("was-there/a/b/theirs"), "x").unwrap();
    made.remove_empty();
    assert!(!tmp.path().join("was-there/a/b/c").exists());
    assert!(tmp.path().join("was-there/a/b/theirs").exists());

    let (_, made) = dir
        .create_dir_all_made("was-there/d/e", 0o700, None)
        .unwrap();
    made.remove_empty();
    assert!(!tmp.path().join("was-there/d").exists());
    assert!(
        tmp.path().join("was-there").is_dir(),
        "a folder it did not make went"
    );
    // Nothing made: nothing to take back.
    let (_, made) = dir.create_dir_all_made("was-there/a", 0o700, None).unwrap();
    assert!(made.is_empty());
}
