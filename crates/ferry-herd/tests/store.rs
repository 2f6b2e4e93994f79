//! Worker records, the herd's lock, process liveness, results and prompt snapshots,
//! attacked for real: racing creators, garbage records, planted links, killed holders.

use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ferry_codes::Code;
use ferry_config::limits::{
    HERD_LOCK_WAIT, HERD_PROMPT_MAX_BYTES, HERD_RESULT_MAX_BYTES, HERD_RESULT_PREVIEW_BYTES,
};
use ferry_fs::Dir;
use ferry_herd::result::{bounded, persist_output, persist_result};
use ferry_herd::snapshot::{PROMPT_FILE, remove_snapshot, write_snapshot};
use ferry_herd::state::{self, State, WorkerRecord, Workers};

/// Set in a copy of this test binary that takes the lock of the herd it names.
const HOLD_LOCK_OF: &str = "FERRY_HERD_TEST_HOLD_LOCK_OF";

fn folder() -> (tempfile::TempDir, Dir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Dir::open_ambient(tmp.path()).unwrap();
    (tmp, dir)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

static KEY: std::sync::LazyLock<ferry_herd::keys::WorkerKey> =
    std::sync::LazyLock::new(ferry_herd::keys::WorkerKey::random);

fn record(label: &str) -> WorkerRecord {
    WorkerRecord {
        label: label.into(),
        agent: "reviewer".into(),
        generation: 1,
        state: State::Starting,
        pid: None,
        start_ticks: None,
        cwd: "/home/alice".into(),
        read_only: false,
        snapshot: None,
        exit: None,
        result_path: None,
        reason: None,
        output_path: None,
        created_at: "2026-01-01T00:00:00Z".into(),
        mac: None,
        read_through: 0,
        updated_at: "2026-01-01T00:00:00Z".into(),
    }
}

// ------------------------------------------------------------------ worker records

#[test]
fn a_record_is_created_once_saved_loaded_listed_and_removed() {
    let (tmp, herd) = folder();
    let workers = Workers::open(&herd).unwrap();
    assert_eq!(mode(&tmp.path().join("workers")), 0o700);
    assert_eq!(workers.load("a").unwrap(), None);
    assert!(workers.create(&mut record("a"), &KEY).unwrap());
    assert!(
        !workers.create(&mut record("a"), &KEY).unwrap(),
        "nothing replaced"
    );
    assert_eq!(mode(&tmp.path().join("workers/a.json")), 0o600);
    let mut a = workers.load("a").unwrap().unwrap();
    assert!(a.verifies(&KEY), "signed");
    assert!(
        !a.verifies(&ferry_herd::keys::WorkerKey::random()),
        "by that key alone"
    );
    a.mac = None;
    assert_eq!(a, record("a"));
    a.state = State::Running;
    a.pid = Some(42);
    workers.save(&mut a, &KEY).unwrap();
    assert_ne!(a.updated_at, record("a").updated_at, "updated now");
    assert_eq!(workers.load("a").unwrap().unwrap(), a);
    assert!(workers.create(&mut record("b"), &KEY).unwrap());
    let labels: Vec<String> = workers
        .list()
        .unwrap()
        .into_iter()
        .map(|r| r.label)
        .collect();
    assert_eq!(labels, ["a", "b"]);
    workers.remove("a").unwrap();
    workers.remove("a").unwrap();
    assert_eq!(workers.load("a").unwrap(), None);
    assert_eq!(
        names(&tmp.path().join("workers")),
        ["b.json"],
        "no temporary left"
    );
    for bad in ["", "../x", ".hidden", "a/b"] {
        assert_eq!(workers.load(bad).unwrap_err().code, Code::InvalidRequest);
        assert_eq!(
            workers.create(&mut record(bad), &KEY).unwrap_err().code,
            Code::InvalidRequest
        );
    }
}

#[test]
fn two_creators_racing_for_one_label_one_wins() {
    let (_tmp, herd) = folder();
    let workers = Arc::new(Workers::open(&herd).unwrap());
    for round in 0..20 {
        let label = format!("w{round}");
        let start = Arc::new(Barrier::new(2));
        let racers: Vec<_> = ["left", "right"]
            .into_iter()
            .map(|agent| {
                let (workers, start, label) = (workers.clone(), start.clone(), label.clone());
                std::thread::spawn(move || {
                    let mut mine = record(&label);
                    mine.agent = agent.into();
                    start.wait();
                    (agent, workers.create(&mut mine, &KEY).unwrap())
                })
            })
            .collect();
        let results: Vec<(&str, bool)> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let winners: Vec<&str> = results.iter().filter(|r| r.1).map(|r| r.0).collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        assert_eq!(workers.load(&label).unwrap().unwrap().agent, winners[0]);
    }
}

#[test]
fn a_garbage_or_oversized_record_is_an_error_naming_its_label_and_left_out_of_the_list() {
    let (tmp, herd) = folder();
    let workers = Workers::open(&herd).unwrap();
    assert!(workers.create(&mut record("good"), &KEY).unwrap());
    let dir = tmp.path().join("workers");
    let valid = serde_json::to_vec(&record("big")).unwrap();
    let padded = |len: usize| {
        let mut bytes = valid.clone();
        bytes.resize(len, b' ');
        bytes
    };
    std::fs::write(dir.join("garbage.json"), b"{\"label\":").unwrap();
    std::fs::write(
        dir.join("other.json"),
        serde_json::to_vec(&record("good")).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("stray.txt"), b"x").unwrap();
    symlink(dir.join("good.json"), dir.join("linked.json")).unwrap();
    for (label, want) in [
        ("garbage", "not valid"),
        ("other", "names the label"),
        ("linked", "symbolic link"),
    ] {
        let e = workers.load(label).unwrap_err();
        assert!(
            e.message.contains(label) && e.message.contains(want),
            "{e:?}"
        );
    }
    // The cap of 64 KiB: at it and under, a record; one byte more, an error.
    for (len, ok) in [
        (64 * 1024 - 1, true),
        (64 * 1024, true),
        (64 * 1024 + 1, false),
    ] {
        std::fs::write(dir.join("big.json"), padded(len)).unwrap();
        let loaded = workers.load("big");
        assert_eq!(loaded.is_ok(), ok, "{len}: {loaded:?}");
        if let Err(e) = loaded {
            assert!(e.message.contains("big"), "{e:?}");
        }
    }
    let labels: Vec<String> = workers
        .list()
        .unwrap()
        .into_iter()
        .map(|r| r.label)
        .collect();
    assert_eq!(labels, ["good"]);
    // A link planted at a record's name is never written through.
    let outside = tmp.path().join("outside.json");
    std::fs::write(&outside, b"keep").unwrap();
    symlink(&outside, dir.join("planted.json")).unwrap();
    let e = workers.save(&mut record("planted"), &KEY).unwrap_err();
    assert_eq!(e.code, Code::PathEscapes, "{e:?}");
    workers.remove("planted").unwrap();
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
}

// ------------------------------------------------------------------------ the lock

/// The holding side of [`a_lock_held_elsewhere_is_busy_and_free_once_its_holder_is_killed`].
#[test]
fn lock_holding_process() {
    let Some(path) = std::env::var_os(HOLD_LOCK_OF) else {
        return;
    };
    let herd = Dir::open_ambient(Path::new(&path)).unwrap();
    let _lock = state::lock(&herd).unwrap();
    println!("locked");
    std::thread::sleep(Duration::from_secs(600));
}

/// The holding process, killed however the test ends.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_second_holder_waits_for_the_first() {
    let (tmp, herd) = folder();
    let first = state::lock(&herd).unwrap();
    assert_eq!(mode(&tmp.path().join(".lock")), 0o600);
    let herd_path = tmp.path().to_path_buf();
    let second = std::thread::spawn(move || {
        let herd = Dir::open_ambient(&herd_path).unwrap();
        let started = Instant::now();
        let lock = state::lock(&herd).unwrap();
        (started.elapsed(), lock)
    });
    std::thread::sleep(Duration::from_millis(400));
    drop(first);
    let (waited, _second) = second.join().unwrap();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < HERD_LOCK_WAIT, "{waited:?}");
}

#[test]
fn a_lock_held_elsewhere_is_busy_and_free_once_its_holder_is_killed() {
    let (tmp, herd) = folder();
    let mut holder = Holder(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lock_holding_process",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(HOLD_LOCK_OF, tmp.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let holder = &mut holder.0;
    // The test harness prints its own lines around the holder's.
    let said = std::io::BufReader::new(holder.stdout.take().unwrap());
    let locked = std::io::BufRead::lines(said).any(|line| line.unwrap().ends_with("locked"));
    assert!(locked);
    let started = Instant::now();
    let e = state::lock(&herd).unwrap_err();
    assert_eq!(e.code, Code::HerdBusy, "{e:?}");
    assert!(started.elapsed() >= HERD_LOCK_WAIT);
    holder.kill().unwrap();
    holder.wait().unwrap();
    let started = Instant::now();
    let _lock = state::lock(&herd).unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_link_or_fifo_planted_at_the_lock_is_refused() {
    let (tmp, herd) = folder();
    let outside = tmp.path().join("outside");
    std::fs::write(&outside, b"keep").unwrap();
    symlink(&outside, tmp.path().join(".lock")).unwrap();
    let e = state::lock(&herd).unwrap_err();
    assert_eq!(e.code, Code::PathEscapes, "{e:?}");
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    std::fs::remove_file(tmp.path().join(".lock")).unwrap();
    let status = Command::new("mkfifo")
        .arg(tmp.path().join(".lock"))
        .status()
        .unwrap();
    assert!(status.success());
    let e = state::lock(&herd).unwrap_err();
    assert_eq!(e.code, Code::NotAFile, "{e:?}");
}

// -------------------------------------------------------------------- liveness

#[test]
fn a_running_child_is_alive_and_a_zombie_or_reaped_one_is_not() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let ticks = state::start_ticks(pid).unwrap();
    assert!(state::alive(pid, ticks));
    assert!(
        !state::alive(pid, ticks + 1),
        "a reused pid starts at another time"
    );
    child.kill().unwrap();
    // Dead but not yet reaped: a zombie.
    let deadline = Instant::now() + Duration::from_secs(5);
    while state::alive(pid, ticks) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!state::alive(pid, ticks), "a zombie is not alive");
    assert_eq!(
        state::start_ticks(pid),
        Some(ticks),
        "still listed until reaped"
    );
    child.wait().unwrap();
    assert_eq!(state::start_ticks(pid), None);
    assert!(!state::alive(pid, ticks));
    assert_eq!(state::start_ticks(0), None);
}

#[test]
fn a_command_name_with_spaces_and_parentheses_is_read_past() {
    let tmp = tempfile::tempdir().unwrap();
    // The kernel names a process after the file it ran: here, a link to sleep.
    let sleep = ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap();
    let odd = tmp.path().join("a) 1 2 (b c)");
    symlink(sleep, &odd).unwrap();
    let mut child = Command::new(&odd).arg("30").spawn().unwrap();
    let pid = child.id();
    // Named so once the exec is done, which a loaded machine may show a moment later.
    let read_stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stat = read_stat();
    while !stat.contains("(a) 1 2 (b c))") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        stat = read_stat();
    }
    assert!(stat.contains("(a) 1 2 (b c))"), "{stat}");
    let field22: u64 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(state::start_ticks(pid), Some(field22));
    assert!(state::alive(pid, field22));
    child.kill().unwrap();
    child.wait().unwrap();
}

// ------------------------------------------------------------------------ results

#[test]
fn a_result_is_kept_whole_in_a_private_file_with_a_bounded_preview() {
    let (tmp, results) = folder();
    let text = "é".repeat(HERD_RESULT_PREVIEW_BYTES); // twice the preview's bytes
    let kept = persist_result(&results, tmp.path(), "w", 3, &mut text.as_bytes()).unwrap();
    let name = kept.path.file_name().unwrap().to_str().unwrap();
    let random = name
        .strip_prefix("w-3-")
        .unwrap()
        .strip_suffix(".md")
        .unwrap();
    assert_eq!(random.len(), 16, "{name}");
    assert_eq!(kept.path.parent().unwrap(), tmp.path());
    assert_eq!(mode(&kept.path), 0o600);
    assert_eq!(std::fs::read_to_string(&kept.path).unwrap(), text);
    assert_eq!(kept.size, text.len() as u64);
    assert_eq!(kept.preview, "é".repeat(HERD_RESULT_PREVIEW_BYTES / 2));
    assert!(kept.cut);
    // A short one is its own preview.
    let short = persist_result(&results, tmp.path(), "w", 3, &mut &b"done\xff"[..]).unwrap();
    assert_eq!((short.preview.as_str(), short.cut), ("done\u{fffd}", false));
    assert_ne!(short.path, kept.path);
    let e = persist_result(&results, tmp.path(), "../x", 1, &mut &b""[..]).unwrap_err();
    assert_eq!(e.code, Code::InvalidRequest);
}

/// Zeros, `len` of them, made as they are read: nothing of the size is allocated.
struct Zeros {
    left: u64,
}

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.left as usize);
        buf[..n].fill(0);
        self.left -= n as u64;
        Ok(n)
    }
}

#[test]
fn a_result_of_exactly_the_limit_is_kept_and_one_byte_more_leaves_nothing() {
    let (tmp, results) = folder();
    let mut source = Zeros {
        left: HERD_RESULT_MAX_BYTES,
    };
    let kept = persist_result(&results, tmp.path(), "w", 1, &mut source).unwrap();
    assert_eq!(kept.size, HERD_RESULT_MAX_BYTES);
    assert_eq!(
        std::fs::metadata(&kept.path).unwrap().len(),
        HERD_RESULT_MAX_BYTES
    );
    std::fs::remove_file(&kept.path).unwrap();
    let mut source = Zeros {
        left: HERD_RESULT_MAX_BYTES + 1,
    };
    let e = persist_result(&results, tmp.path(), "w", 1, &mut source).unwrap_err();
    assert_eq!(e.code, Code::TooLarge, "{e:?}");
    assert!(names(tmp.path()).is_empty(), "no result, no temporary");
}

#[test]
fn a_long_answer_is_saved_privately_and_text_is_bounded_on_a_character() {
    let (tmp, results) = folder();
    let path = persist_output(&results, tmp.path(), "{\"long\":true}").unwrap();
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("output-") && name.ends_with(".json"),
        "{name}"
    );
    assert_eq!(mode(&path), 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"long\":true}");

    let text = "ab€"; // € is three bytes, at 2..5
    assert_eq!(bounded(text, 5), ("ab€", false));
    assert_eq!(bounded(text, 6), ("ab€", false));
    assert_eq!(bounded(text, 4), ("ab", true));
    assert_eq!(bounded(text, 3), ("ab", true));
    assert_eq!(bounded(text, 2), ("ab", true));
    assert_eq!(bounded(text, 0), ("", true));
}

// ---------------------------------------------------------------------- snapshots

#[test]
fn a_snapshot_is_private_and_removed_whole() {
    let (tmp, snapshots) = folder();
    let shot = write_snapshot(&snapshots, tmp.path(), "w", "be brief").unwrap();
    let random = shot.name.strip_prefix("w-").unwrap();
    assert_eq!(random.len(), 16);
    assert_eq!(shot.dir, tmp.path().join(&shot.name));
    assert_eq!(shot.prompt, shot.dir.join(PROMPT_FILE));
    assert_eq!(mode(&shot.dir), 0o700);
    assert_eq!(mode(&shot.prompt), 0o600);
    assert_eq!(std::fs::read_to_string(&shot.prompt).unwrap(), "be brief");
    assert_eq!(names(&shot.dir), [PROMPT_FILE], "no temporary left");
    let other = write_snapshot(&snapshots, tmp.path(), "w", "be brief").unwrap();
    assert_ne!(other.name, shot.name);
    remove_snapshot(&snapshots, &shot.name).unwrap();
    assert!(!shot.dir.exists());
    remove_snapshot(&snapshots, &shot.name).unwrap();
    assert!(other.prompt.exists());
    assert!(write_snapshot(&snapshots, tmp.path(), "../w", "x").is_err());
}

#[test]
fn a_prompt_of_exactly_the_limit_is_written_and_one_byte_more_leaves_nothing() {
    let (tmp, snapshots) = folder();
    for len in [HERD_PROMPT_MAX_BYTES - 1, HERD_PROMPT_MAX_BYTES] {
        let shot = write_snapshot(&snapshots, tmp.path(), "w", &"p".repeat(len)).unwrap();
        assert_eq!(std::fs::metadata(&shot.prompt).unwrap().len(), len as u64);
        remove_snapshot(&snapshots, &shot.name).unwrap();
    }
    let over = "p".repeat(HERD_PROMPT_MAX_BYTES + 1);
    let e = write_snapshot(&snapshots, tmp.path(), "w", &over).unwrap_err();
    assert_eq!(e.code, Code::TooLarge, "{e:?}");
    assert!(names(tmp.path()).is_empty(), "no folder, no temporary");
}

#[test]
fn a_name_that_is_not_a_snapshots_is_refused() {
    let (tmp, snapshots) = folder();
    std::fs::create_dir(tmp.path().join("keep")).unwrap();
    for bad in [
        "keep",
        "..",
        "../keep",
        "w-",
        "w-abcdefghijklmno",
        "w-abcdefghijklmnopq",
        "w-ABCDEFGHIJKLMNOP",
        "w-abcdefghijklmno1",
        "-abcdefghijklmnop",
        ".w-abcdefghijklmnop",
        "w/x-abcdefghijklmnop",
    ] {
        let e = remove_snapshot(&snapshots, bad).unwrap_err();
        assert_eq!(e.code, Code::InvalidRequest, "{bad}");
    }
    assert!(tmp.path().join("keep").exists());
}

#[test]
fn a_link_planted_in_a_snapshot_is_removed_and_its_target_untouched() {
    let (tmp, snapshots) = folder();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("precious"), b"keep").unwrap();
    let shot = write_snapshot(&snapshots, tmp.path(), "w", "p").unwrap();
    symlink(outside.join("precious"), shot.dir.join("link")).unwrap();
    symlink(&outside, shot.dir.join("folder-link")).unwrap();
    // The prompt itself swapped for a link to the same file.
    std::fs::remove_file(&shot.prompt).unwrap();
    symlink(outside.join("precious"), &shot.prompt).unwrap();
    remove_snapshot(&snapshots, &shot.name).unwrap();
    assert!(!shot.dir.exists());
    assert_eq!(std::fs::read(outside.join("precious")).unwrap(), b"keep");
    assert_eq!(names(&outside), ["precious"]);
    // The whole snapshot folder swapped for a link: the link goes, not its target.
    let shot = write_snapshot(&snapshots, tmp.path(), "w", "p").unwrap();
    std::fs::remove_dir_all(&shot.dir).unwrap();
    symlink(&outside, &shot.dir).unwrap();
    remove_snapshot(&snapshots, &shot.name).unwrap();
    assert!(std::fs::symlink_metadata(&shot.dir).is_err());
    assert_eq!(names(&outside), ["precious"]);
}
