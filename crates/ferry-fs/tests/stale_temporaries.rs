//! `Dir::remove_stale_temporaries`: what writers that died left goes, at any depth;
//! a temporary still being written, one claimed, any other file, and anything behind a
//! link stay.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

use ferry_fs::{Dir, TEMP_PREFIX};

fn write_aged(path: &Path, age: Duration) {
    let file = File::create(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

#[test]
fn stale_temporaries_go_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let hour = Duration::from_secs(3600);
    let stale = |dir: &str, n: &str| root.join(dir).join(format!("{TEMP_PREFIX}{n}"));
    write_aged(&stale("", "top"), hour);
    write_aged(&stale("a/b/c", "deep"), hour);
    write_aged(&stale("a", "young"), Duration::ZERO);
    write_aged(&stale("a/b", "claimed"), hour);
    write_aged(&root.join("a/old-but-ordinary.txt"), hour);
    std::fs::create_dir(stale("a", "folder")).unwrap();
    // Behind a link: never reached.
    write_aged(&outside.join(format!("{TEMP_PREFIX}outside")), hour);
    std::os::unix::fs::symlink(&outside, root.join("a/link")).unwrap();

    let dir = Dir::open_ambient(&root).unwrap();
    let cutoff = SystemTime::now() - Duration::from_secs(600);
    let claimed = format!("{TEMP_PREFIX}claimed");
    let removed = dir
        .remove_stale_temporaries(cutoff, |name| name == claimed)
        .unwrap();
    assert_eq!(removed, 2);
    assert!(!stale("", "top").exists() && !stale("a/b/c", "deep").exists());
    for left in [
        stale("a", "young"),
        stale("a/b", "claimed"),
        stale("a", "folder"),
        root.join("a/old-but-ordinary.txt"),
        outside.join(format!("{TEMP_PREFIX}outside")),
    ] {
        assert!(left.exists(), "{} went", left.display());
    }
    // Claimed no longer, it goes too.
    assert_eq!(dir.remove_stale_temporaries(cutoff, |_| false).unwrap(), 1);
}
