//! A change of several files (`file_edit`): their bytes go into temporaries the acting
//! process made, and the files are placed all or none. Here a placement fails after the
//! first file landed, for real (the second temporary is swapped for another file, as a
//! person's process could), and the first file gets its previous content back.

use std::path::Path;
use std::sync::Arc;

use ferry_exec::ops::{Executor, RunSettings, SandboxKind};
use ferry_exec::{Access, Change, Requester, Scope, Tree};

fn requester(home: &Path, access: Access) -> Arc<Requester> {
    let home = home.canonicalize().unwrap();
    let tree = Tree {
        path: home.clone(),
        writable: true,
    };
    let base = home.parent().unwrap().to_path_buf();
    let scope = Scope::new(base.clone(), home, vec![tree], access).unwrap();
    let run = RunSettings {
        user: "ann".into(),
        full_output_dir: base.join("out"),
        sandbox: SandboxKind::None,
        network: false,
        output_ttl_secs: 60,
        output_max_bytes: 1024,
    };
    Arc::new(Requester::InProcess(Executor::new(scope, run, None)))
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(ferry_fs::TEMP_PREFIX))
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn a_failed_placement_puts_back_what_was_already_placed() {
    for access in [Access::Confined, Access::AsPerson] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(home.join("a.txt"), "old a").unwrap();
        std::fs::write(home.join("b.txt"), "old b").unwrap();
        let mut change = Change::new(requester(&home, access));
        change
            .stage("a.txt", None)
            .unwrap()
            .write(b"new a")
            .unwrap();
        change
            .stage("new.txt", None)
            .unwrap()
            .write(b"new")
            .unwrap();
        let before = temporaries(&home);
        change
            .stage("b.txt", None)
            .unwrap()
            .write(b"new b")
            .unwrap();
        // The last temporary is swapped for another file under its name.
        let swapped = temporaries(&home)
            .into_iter()
            .find(|t| !before.contains(t))
            .unwrap();
        std::fs::remove_file(home.join(&swapped)).unwrap();
        std::fs::write(home.join(&swapped), "planted").unwrap();
        let err = change.commit().unwrap_err();
        assert_eq!(err.code, "path_escapes", "{err}");
        assert!(
            err.message.starts_with("b.txt: "),
            "the failure names its file: {err}"
        );
        assert_eq!(read(&home.join("a.txt")), "old a", "{access:?}");
        assert_eq!(read(&home.join("b.txt")), "old b");
        assert!(!home.join("new.txt").exists(), "a new file is taken back");
        // The temporaries are removed by name, the planted one too: such names are ferry's.
        assert!(temporaries(&home).is_empty(), "{:?}", temporaries(&home));
    }
}

#[test]
fn a_file_changed_since_it_was_read_refuses_the_whole_change() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("a.txt"), "a").unwrap();
    std::fs::write(home.join("b.txt"), "b").unwrap();
    let mut change = Change::new(requester(&home, Access::Confined));
    let a_sha = ferry_fs::sha256_hex(b"a");
    change
        .stage("a.txt", Some(a_sha))
        .unwrap()
        .write(b"A")
        .unwrap();
    let stale = ferry_fs::sha256_hex(b"what b was");
    change
        .stage("b.txt", Some(stale))
        .unwrap()
        .write(b"B")
        .unwrap();
    let err = change.commit().unwrap_err();
    assert_eq!(err.code, "changed_meanwhile");
    assert_eq!(
        (read(&home.join("a.txt")), read(&home.join("b.txt"))),
        ("a".into(), "b".into())
    );
    assert!(temporaries(&home).is_empty());
}

#[test]
fn as_the_person_a_write_makes_its_folders_and_lands_where_a_link_points() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join("real")).unwrap();
    std::fs::write(home.join("real/notes.md"), "old").unwrap();
    std::os::unix::fs::symlink("real/notes.md", home.join("notes.md")).unwrap();
    let requester = requester(&home, Access::AsPerson);
    let mut change = Change::new(requester.clone());
    change
        .stage("notes.md", None)
        .unwrap()
        .write(b"new")
        .unwrap();
    change
        .stage("deep/er/file.txt", None)
        .unwrap()
        .write(b"deep")
        .unwrap();
    let written = change.commit().unwrap();
    assert!(home.join("notes.md").is_symlink(), "the link stays a link");
    assert_eq!(read(&home.join("real/notes.md")), "new");
    assert_eq!(read(&home.join("deep/er/file.txt")), "deep");
    assert_eq!(written[1].size, 4);
    assert_eq!(written[1].sha256, ferry_fs::sha256_hex(b"deep"));
    // Dropped before commit: nothing lands, nothing is left.
    let mut change = Change::new(requester);
    change
        .stage("dropped.txt", None)
        .unwrap()
        .write(b"x")
        .unwrap();
    drop(change);
    assert!(!home.join("dropped.txt").exists());
    assert!(temporaries(&home).is_empty());
}

#[test]
fn a_folder_moved_away_before_placing_keeps_no_temporary() {
    for made_again in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join("sub")).unwrap();
        let mut change = Change::new(requester(&home, Access::AsPerson));
        change
            .stage("sub/a.txt", None)
            .unwrap()
            .write(b"a")
            .unwrap();
        std::fs::rename(home.join("sub"), home.join("sub.old")).unwrap();
        if made_again {
            std::fs::create_dir(home.join("sub")).unwrap();
            change.commit().unwrap();
            assert_eq!(read(&home.join("sub/a.txt")), "a");
        } else {
            assert_eq!(change.commit().unwrap_err().code, "not_found");
        }
        assert!(
            temporaries(&home.join("sub.old")).is_empty(),
            "{made_again}"
        );
        assert!(
            std::fs::read_dir(home.join("sub.old"))
                .unwrap()
                .next()
                .is_none()
        );
    }
}

/// Two editors of one file at once, each reading it, adding its own line and placing
/// the result with the content it read as the expectation, retrying when told the file
/// changed: every change that was answered as placed is in the file at the end.
#[test]
fn concurrent_changes_of_one_file_lose_nothing_they_report_as_placed() {
    const ROUNDS: usize = 100;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("log.txt"), "").unwrap();
    let requester = requester(&home, Access::Confined);
    let editors: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let (requester, path) = (requester.clone(), home.join("log.txt"));
            std::thread::spawn(move || {
                let mut placed = Vec::new();
                for round in 0..ROUNDS {
                    let line = format!("{who}{round}\n");
                    for _attempt in 0..1000 {
                        let before = std::fs::read(&path).unwrap();
                        let mut after = before.clone();
                        after.extend_from_slice(line.as_bytes());
                        let mut change = Change::new(requester.clone());
                        let expect = Some(ferry_fs::sha256_hex(&before));
                        change
                            .stage("log.txt", expect)
                            .unwrap()
                            .write(&after)
                            .unwrap();
                        match change.commit() {
                            Ok(_) => {
                                placed.push(line.clone());
                                break;
                            }
                            Err(e) => assert_eq!(e.code, "changed_meanwhile", "{e}"),
                        }
                    }
                }
                placed
            })
        })
        .collect();
    let placed: Vec<String> = editors
        .into_iter()
        .flat_map(|editor| editor.join().unwrap())
        .collect();
    let text = read(&home.join("log.txt"));
    assert_eq!(placed.len(), 2 * ROUNDS);
    for line in &placed {
        assert!(
            text.contains(line.as_str()),
            "{line:?} was answered as placed but is lost"
        );
    }
    assert!(temporaries(&home).is_empty());
}

/// A place the system made (a pick's folder, `public/attachments/`) is reached with no
/// link followed even as the person: a link the person's agent planted there cannot send
/// the file elsewhere (here: into a folder everyone reads).
#[test]
fn a_link_planted_at_a_system_place_is_refused_as_the_person_too() {
    use ferry_exec::ops::{Op, Reply};
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(home.join("public")).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, home.join("tmp/picks")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, home.join("public/attachments")).unwrap();
    std::fs::write(home.join("a.txt"), "a").unwrap();
    let requester = requester(&home, Access::AsPerson);
    let mut change = Change::in_system_place(requester.clone());
    let err = change.stage("tmp/picks/p1/f.txt", None).unwrap_err();
    assert_eq!(err.code, "path_escapes", "{err}");
    drop(change);
    let deliver = Op::Deliver {
        from: "a.txt".into(),
        to_dir: home.join("public/attachments").display().to_string(),
        max_bytes: 1024,
    };
    let err = requester.execute(deliver).err().unwrap();
    assert_eq!(err.code, "path_escapes", "{err}");
    assert!(
        std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "nothing went through"
    );
    // The tools' own writes, as the person, still go where the person could write.
    let mut change = Change::new(requester.clone());
    change
        .stage("tmp/picks/mine.txt", None)
        .unwrap()
        .write(b"m")
        .unwrap();
    change.commit().unwrap();
    assert_eq!(read(&elsewhere.join("mine.txt")), "m");
    // Without the links, the system places work as the person.
    std::fs::remove_file(home.join("tmp/picks")).unwrap();
    std::fs::remove_file(home.join("public/attachments")).unwrap();
    let mut change = Change::in_system_place(requester.clone());
    change
        .stage("tmp/picks/p1/f.txt", None)
        .unwrap()
        .write(b"f")
        .unwrap();
    change.commit().unwrap();
    assert_eq!(read(&home.join("tmp/picks/p1/f.txt")), "f");
    let deliver = Op::Deliver {
        from: "a.txt".into(),
        to_dir: home.join("public/attachments").display().to_string(),
        max_bytes: 1024,
    };
    assert!(matches!(
        requester.execute(deliver).unwrap().0,
        Reply::Written(_)
    ));
    assert_eq!(read(&home.join("public/attachments/a.txt")), "a");
}
