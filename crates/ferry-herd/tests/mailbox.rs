//! H-MAIL's mailboxes, attacked for real: concurrent writers (threads and processes),
//! racing readers, and garbage, links, FIFOs, folders and oversized files planted in them.

use std::collections::HashSet;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime};

use ferry_codes::Code;
use ferry_config::limits::MAILBOX_MAX_BYTES;
use ferry_fs::Dir;
use ferry_herd::envelope::{Envelope, Kind, OWNER};
use ferry_herd::keys::WorkerKey;
use ferry_herd::mailbox::Mailbox;

/// Set in a copy of this test binary that delivers into the mailbox it names.
const DELIVER_TO: &str = "FERRY_HERD_TEST_DELIVER_TO";
/// What that copy puts before each envelope's number in its text.
const DELIVER_TAG: &str = "FERRY_HERD_TEST_DELIVER_TAG";
/// Envelopes each concurrent writer delivers.
const EACH: usize = 200;

/// One fixed key, the same in every process a test starts. (Signing itself is proven in
/// tests/herd.rs: an envelope or record written by another worker is refused.)
static KEY: std::sync::LazyLock<WorkerKey> = std::sync::LazyLock::new(|| {
    WorkerKey::from_hex("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef").unwrap()
});

fn signed(envelope: &Envelope) -> bool {
    envelope.verifies(&KEY)
}

fn envelope(text: &str) -> Envelope {
    Envelope::new(Kind::Steer, OWNER.into(), "w#1".into(), text.into())
}

/// A mailbox `w` in a fresh folder: the folder (kept alive), its path and the mailbox.
fn mailbox() -> (tempfile::TempDir, PathBuf, Mailbox) {
    let tmp = tempfile::tempdir().unwrap();
    let parent = Dir::open_ambient(tmp.path()).unwrap();
    let mailbox = Mailbox::create(&parent, tmp.path(), "w").unwrap();
    let path = tmp.path().join("w");
    (tmp, path, mailbox)
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn seq_file(seq: u64) -> String {
    format!("{seq:020}.json")
}

fn drain(mailbox: &Mailbox) -> Vec<Envelope> {
    let mut out = Vec::new();
    while let Some(e) = mailbox.take_next(&signed).unwrap() {
        out.push(e);
    }
    out
}

/// The delivering side of [`two_processes_deliver_at_once_and_no_number_is_taken_twice`].
#[test]
fn delivering_process() {
    let Some(path) = std::env::var_os(DELIVER_TO) else {
        return;
    };
    let tag = std::env::var(DELIVER_TAG).unwrap();
    let mailbox = Mailbox::open(Path::new(&path)).unwrap();
    for i in 0..EACH {
        mailbox
            .deliver(&mut envelope(&format!("{tag}-{i}")), &KEY)
            .unwrap();
    }
}

#[test]
fn a_new_mailbox_is_private_and_opens_from_its_path() {
    let (_tmp, path, mailbox) = mailbox();
    assert_eq!(mailbox.path(), path);
    for sub in ["", "new", "cur", "rejected"] {
        let mode = std::fs::metadata(path.join(sub))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o700, "{sub}");
    }
    assert_eq!(mailbox.deliver(&mut envelope("one"), &KEY).unwrap(), 1);
    // Made again: the one there is opened as it is.
    let parent = Dir::open_ambient(path.parent().unwrap()).unwrap();
    let again = Mailbox::create(&parent, path.parent().unwrap(), "w").unwrap();
    assert_eq!(again.unread().unwrap(), 1);
    // A worker opens its own from the path in its environment.
    let opened = Mailbox::open(&path).unwrap();
    assert_eq!(opened.unread().unwrap(), 1);
    assert_eq!(opened.take_next(&signed).unwrap().unwrap().text, "one");
    assert_eq!(mailbox.unread().unwrap(), 0);
}

#[test]
fn a_link_planted_at_the_mailbox_or_any_of_its_folders_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let parent_path = tmp.path().join("mailboxes");
    std::fs::create_dir(&parent_path).unwrap();
    let parent = Dir::open_ambient(&parent_path).unwrap();

    symlink(&elsewhere, parent_path.join("a")).unwrap();
    let e = Mailbox::create(&parent, &parent_path, "a").unwrap_err();
    assert_eq!(e.code, Code::PathEscapes, "{e:?}");
    for sub in ["new", "cur", "rejected"] {
        let label = format!("at-{sub}");
        std::fs::create_dir(parent_path.join(&label)).unwrap();
        symlink(&elsewhere, parent_path.join(&label).join(sub)).unwrap();
        let e = Mailbox::create(&parent, &parent_path, &label).unwrap_err();
        assert_eq!(e.code, Code::PathEscapes, "{sub}: {e:?}");
        let e = Mailbox::open(&parent_path.join(&label)).unwrap_err();
        assert_eq!(e.code, Code::PathEscapes, "{sub}: {e:?}");
    }
    assert!(
        names(&elsewhere).is_empty(),
        "nothing was made through a link"
    );
    for bad in ["", ".", "..", "a/b"] {
        let e = Mailbox::create(&parent, &parent_path, bad).unwrap_err();
        assert_eq!(e.code, Code::InvalidRequest, "{bad:?}");
    }
}

#[test]
fn envelopes_are_numbered_in_order_and_each_is_read_once() {
    let (_tmp, path, mailbox) = mailbox();
    for (i, text) in ["a", "b", "c"].into_iter().enumerate() {
        let mut e = envelope(text);
        assert_eq!(mailbox.deliver(&mut e, &KEY).unwrap(), i as u64 + 1);
        assert_eq!(e.seq, i as u64 + 1);
    }
    assert_eq!(names(&path.join("new")), [1, 2, 3].map(seq_file));
    assert_eq!(mailbox.unread().unwrap(), 3);
    let first = mailbox.take_next(&signed).unwrap().unwrap();
    assert_eq!((first.seq, first.text.as_str()), (1, "a"));
    assert_eq!(names(&path.join("cur")), [seq_file(1)]);
    assert_eq!(mailbox.unread().unwrap(), 2);
    let rest = drain(&mailbox);
    assert_eq!(rest.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(mailbox.take_next(&signed).unwrap(), None);
    // Numbers go on past what was read.
    assert_eq!(mailbox.deliver(&mut envelope("d"), &KEY).unwrap(), 4);
}

/// Every envelope read back whole, numbered 1..=n once each, texts exactly `expected`.
fn assert_all_delivered(mailbox: &Mailbox, expected: HashSet<String>) {
    let taken = drain(mailbox);
    let seqs: Vec<u64> = taken.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=expected.len() as u64).collect::<Vec<_>>());
    let texts: HashSet<String> = taken.into_iter().map(|e| e.text).collect();
    assert_eq!(texts, expected);
}

#[test]
fn two_threads_deliver_at_once_and_no_number_is_taken_twice() {
    let (_tmp, path, mailbox) = mailbox();
    let mailbox = Arc::new(mailbox);
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|tag| {
            let (mailbox, start) = (mailbox.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                (0..EACH)
                    .map(|i| {
                        mailbox
                            .deliver(&mut envelope(&format!("{tag}-{i}")), &KEY)
                            .unwrap()
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=2 * EACH as u64).collect::<Vec<_>>());
    assert_eq!(
        names(&path.join("new")).len(),
        2 * EACH,
        "no temporary left"
    );
    let expected = ["left", "right"]
        .iter()
        .flat_map(|tag| (0..EACH).map(move |i| format!("{tag}-{i}")))
        .collect();
    assert_all_delivered(&mailbox, expected);
}

#[test]
fn two_processes_deliver_at_once_and_no_number_is_taken_twice() {
    let (_tmp, path, mailbox) = mailbox();
    let children: Vec<_> = ["first", "second"]
        .into_iter()
        .map(|tag| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "delivering_process",
                    "--test-threads=1",
                    "--quiet",
                ])
                .env(DELIVER_TO, &path)
                .env(DELIVER_TAG, tag)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let expected = ["first", "second"]
        .iter()
        .flat_map(|tag| (0..EACH).map(move |i| format!("{tag}-{i}")))
        .collect();
    assert_all_delivered(&mailbox, expected);
}

#[test]
fn two_readers_racing_take_each_envelope_exactly_once() {
    let (_tmp, path, mailbox) = mailbox();
    for i in 0..2 * EACH {
        mailbox
            .deliver(&mut envelope(&format!("m{i}")), &KEY)
            .unwrap();
    }
    // Each reader has a mailbox of its own, as two processes would.
    let start = Arc::new(Barrier::new(2));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (path, start) = (path.clone(), start.clone());
            std::thread::spawn(move || {
                let reader = Mailbox::open(&path).unwrap();
                start.wait();
                drain(&reader)
                    .into_iter()
                    .map(|e| e.seq)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=2 * EACH as u64).collect::<Vec<_>>());
    assert!(names(&path.join("rejected")).is_empty());
    assert_eq!(names(&path.join("cur")).len(), 2 * EACH);
}

#[test]
fn writers_and_a_reader_at_once_lose_no_envelope_and_repeat_no_number() {
    let (_tmp, path, mailbox) = mailbox();
    let mailbox = Arc::new(mailbox);
    let start = Arc::new(Barrier::new(3));
    let writers: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|tag| {
            let (mailbox, start) = (mailbox.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for i in 0..EACH {
                    mailbox
                        .deliver(&mut envelope(&format!("{tag}-{i}")), &KEY)
                        .unwrap();
                }
            })
        })
        .collect();
    // The reader claims each envelope as soon as it lands, while numbers are counted.
    let reader = {
        let (path, start) = (path.clone(), start.clone());
        std::thread::spawn(move || {
            let reader = Mailbox::open(&path).unwrap();
            start.wait();
            let mut taken = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(30);
            while taken.len() < 2 * EACH && Instant::now() < deadline {
                match reader.take_next(&signed).unwrap() {
                    Some(e) => taken.push(e.seq),
                    None => std::thread::yield_now(),
                }
            }
            taken
        })
    };
    for writer in writers {
        writer.join().unwrap();
    }
    let mut seqs = reader.join().unwrap();
    seqs.extend(drain(&mailbox).iter().map(|e| e.seq));
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=2 * EACH as u64).collect::<Vec<_>>());
    assert!(names(&path.join("new")).is_empty(), "nothing stuck unread");
    assert!(names(&path.join("rejected")).is_empty());
}

#[test]
fn a_writer_ignoring_the_lock_takes_numbers_and_delivery_renumbers_replacing_nothing() {
    const COUNT: usize = 100;
    let (_tmp, path, mailbox) = mailbox();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Plants garbage at the next free numbers, as fast as it can, without the lock.
    let planter = {
        let (new, stop) = (path.join("new"), stop.clone());
        std::thread::spawn(move || {
            let mut planted = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let highest = names(&new)
                    .iter()
                    .filter_map(|n| n.strip_suffix(".json")?.parse::<u64>().ok())
                    .max()
                    .unwrap_or(0);
                let at = new.join(seq_file(highest + 1));
                let made = std::fs::File::create_new(&at);
                if let Ok(mut file) = made {
                    std::io::Write::write_all(&mut file, b"planted").unwrap();
                    planted += 1;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            planted
        })
    };
    let mut delivered = Vec::new();
    for i in 0..COUNT {
        let seq = mailbox
            .deliver(&mut envelope(&format!("m{i}")), &KEY)
            .unwrap();
        delivered.push(seq);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let planted = planter.join().unwrap();
    let mut unique = delivered.clone();
    unique.dedup();
    assert_eq!(unique.len(), COUNT, "every delivery its own number");
    let taken = drain(&mailbox);
    let texts: Vec<String> = taken.iter().map(|e| e.text.clone()).collect();
    assert_eq!(
        texts,
        (0..COUNT).map(|i| format!("m{i}")).collect::<Vec<_>>()
    );
    assert_eq!(taken.iter().map(|e| e.seq).collect::<Vec<_>>(), delivered);
    // Every planted file is kept, none replaced by an envelope.
    let rejected = names(&path.join("rejected"));
    assert_eq!(rejected.len(), planted);
    for name in rejected {
        assert_eq!(
            std::fs::read(path.join("rejected").join(name)).unwrap(),
            b"planted"
        );
    }
}

/// A valid envelope numbered `seq`, serialized, padded with trailing spaces (which JSON
/// allows) to `len` bytes when given.
fn envelope_bytes(seq: u64, len: Option<usize>) -> Vec<u8> {
    let mut e = envelope("planted");
    e.seq = seq;
    e.seal(&KEY);
    let mut bytes = e.to_bytes();
    if let Some(len) = len {
        bytes.resize(len, b' ');
    }
    bytes
}

#[test]
fn what_is_not_a_valid_envelope_is_rejected_and_the_next_valid_one_returned() {
    type Plant = fn(&Path, &Path);
    let plants: [(&str, Plant); 8] = [
        ("garbage", |at, _| std::fs::write(at, b"{not json").unwrap()),
        ("2 MiB", |at, _| {
            std::fs::write(at, envelope_bytes(1, Some(2 * 1024 * 1024))).unwrap()
        }),
        ("a symlink to a valid envelope", |at, outside| {
            let target = outside.join("valid.json");
            std::fs::write(&target, envelope_bytes(1, None)).unwrap();
            symlink(&target, at).unwrap();
        }),
        ("a hard link to a valid envelope", |at, outside| {
            let target = outside.join("linked.json");
            std::fs::write(&target, envelope_bytes(1, None)).unwrap();
            std::fs::hard_link(&target, at).unwrap();
        }),
        ("a FIFO", |at, _| {
            let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C string; mkfifo only reads it.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }),
        ("a folder", |at, _| {
            std::fs::create_dir(at).unwrap();
            std::fs::write(at.join("inside"), b"x").unwrap();
        }),
        ("a wrong seq", |at, _| {
            std::fs::write(at, envelope_bytes(7, None)).unwrap()
        }),
        ("a valid envelope one byte over the limit", |at, _| {
            std::fs::write(at, envelope_bytes(1, Some(MAILBOX_MAX_BYTES + 1))).unwrap()
        }),
    ];
    for (what, plant) in plants {
        let (tmp, path, mailbox) = mailbox();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        plant(&path.join("new").join(seq_file(1)), &outside);
        std::fs::write(path.join("new/stray name.txt"), b"x").unwrap();
        // The planted number counts: the next one delivered is 2.
        assert_eq!(
            mailbox.deliver(&mut envelope("real"), &KEY).unwrap(),
            2,
            "{what}"
        );
        let next = mailbox.take_next(&signed).unwrap().unwrap();
        assert_eq!((next.seq, next.text.as_str()), (2, "real"), "{what}");
        assert_eq!(mailbox.take_next(&signed).unwrap(), None, "{what}");
        assert_eq!(
            names(&path.join("rejected")),
            [seq_file(1), "stray name.txt".to_owned()],
            "{what}: kept for a person"
        );
        assert!(names(&path.join("new")).is_empty(), "{what}");
        // What a planted link pointed at is untouched.
        for target in names(&outside) {
            let bytes = std::fs::read(outside.join(target)).unwrap();
            let untouched = Envelope::parse(&bytes).unwrap();
            assert_eq!(
                (untouched.seq, untouched.text.as_str()),
                (1, "planted"),
                "{what}"
            );
        }
        // Nothing rejected is counted again as unread, and numbers go on past it.
        assert_eq!(
            mailbox.deliver(&mut envelope("after"), &KEY).unwrap(),
            3,
            "{what}"
        );
    }
}

#[test]
fn a_file_numbered_at_the_last_number_is_refused_not_a_panic() {
    let (_tmp, path, mailbox) = mailbox();
    std::fs::write(path.join("new").join(seq_file(u64::MAX)), b"x").unwrap();
    let mut e = envelope("after");
    let refused = mailbox.deliver(&mut e, &KEY).unwrap_err();
    assert_eq!(refused.code, Code::Internal, "{refused:?}");
    assert_eq!(e.seq, 0);
    assert_eq!(names(&path.join("new")), [seq_file(u64::MAX)]);
}

#[test]
fn an_envelope_of_exactly_the_limit_is_read_and_one_byte_more_is_rejected() {
    for (len, kept) in [
        (MAILBOX_MAX_BYTES - 1, true),
        (MAILBOX_MAX_BYTES, true),
        (MAILBOX_MAX_BYTES + 1, false),
    ] {
        let (_tmp, path, mailbox) = mailbox();
        std::fs::write(
            path.join("new").join(seq_file(1)),
            envelope_bytes(1, Some(len)),
        )
        .unwrap();
        let taken = mailbox.take_next(&signed).unwrap();
        assert_eq!(taken.is_some(), kept, "{len}");
        assert_eq!(names(&path.join("rejected")).is_empty(), kept, "{len}");
    }
}

/// An envelope whose serialized form, numbered `seq`, is exactly `len` bytes.
fn envelope_of_len(seq: u64, len: usize) -> Envelope {
    let mut e = envelope("");
    e.seq = seq;
    let empty = e.serialized_len();
    e.text = "a".repeat(len - empty);
    assert_eq!(e.serialized_len(), len);
    e.seq = 0;
    e
}

#[test]
fn an_envelope_of_exactly_the_limit_is_delivered_and_one_byte_more_refused() {
    let (_tmp, path, mailbox) = mailbox();
    for (seq, len) in [(1, MAILBOX_MAX_BYTES - 1), (2, MAILBOX_MAX_BYTES)] {
        let mut e = envelope_of_len(seq, len);
        assert_eq!(mailbox.deliver(&mut e, &KEY).unwrap(), seq);
        let size = std::fs::metadata(path.join("new").join(seq_file(seq)))
            .unwrap()
            .len();
        assert_eq!(size, len as u64);
    }
    let mut over = envelope_of_len(3, MAILBOX_MAX_BYTES + 1);
    let e = mailbox.deliver(&mut over, &KEY).unwrap_err();
    assert_eq!(e.code, Code::InvalidRequest, "{e:?}");
    assert_eq!(over.seq, 0, "a refused envelope is not numbered");
    assert_eq!(
        names(&path.join("new")),
        [1, 2].map(seq_file),
        "nothing left"
    );
    let read: Vec<usize> = drain(&mailbox).iter().map(|e| e.text.len()).collect();
    assert_eq!(read.len(), 2);
}

#[test]
fn a_crashed_writer_leaves_no_envelope_and_sweep_removes_its_temporary() {
    let (_tmp, path, mailbox) = mailbox();
    let new = Dir::open_ambient(&path.join("new")).unwrap();
    let (temp, mut file) = ferry_fs::create_temporary(&new).unwrap();
    std::io::Write::write_all(&mut file, &envelope_bytes(1, None)[..40]).unwrap();
    drop(file);
    assert_eq!(mailbox.unread().unwrap(), 0);
    assert_eq!(mailbox.take_next(&signed).unwrap(), None);
    assert_eq!(
        names(&path.join("new")),
        std::slice::from_ref(&temp),
        "a writer may be at work"
    );
    // Young: a writer may still be filling it.
    mailbox.sweep().unwrap();
    assert_eq!(names(&path.join("new")), std::slice::from_ref(&temp));
    let old = SystemTime::now() - Duration::from_secs(120);
    let file = std::fs::File::options()
        .write(true)
        .open(path.join("new").join(&temp))
        .unwrap();
    file.set_modified(old).unwrap();
    // Temporaries in the other folders too.
    for sub in ["cur", "rejected"] {
        let dir = Dir::open_ambient(&path.join(sub)).unwrap();
        let (name, file) = ferry_fs::create_temporary(&dir).unwrap();
        file.set_modified(old).unwrap();
        assert_eq!(names(&path.join(sub)), [name]);
    }
    mailbox.sweep().unwrap();
    for sub in ["new", "cur", "rejected"] {
        assert!(names(&path.join(sub)).is_empty(), "{sub}");
    }
    assert_eq!(mailbox.deliver(&mut envelope("next"), &KEY).unwrap(), 1);
}

#[test]
fn waiting_returns_what_arrives_and_gives_up_after_the_wait() {
    let (_tmp, path, mailbox) = mailbox();
    let started = Instant::now();
    assert_eq!(
        mailbox
            .wait_next(Duration::from_millis(300), &signed)
            .unwrap(),
        None
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        Mailbox::open(&path)
            .unwrap()
            .deliver(&mut envelope("late"), &KEY)
            .unwrap();
    });
    let started = Instant::now();
    let got = mailbox
        .wait_next(Duration::from_secs(10), &signed)
        .unwrap()
        .unwrap();
    assert_eq!(got.text, "late");
    assert!(started.elapsed() < Duration::from_secs(5));
    sender.join().unwrap();
}

#[test]
fn removing_a_mailbox_removes_all_of_it_and_follows_no_link() {
    let (tmp, path, mailbox) = mailbox();
    mailbox.deliver(&mut envelope("x"), &KEY).unwrap();
    let outside = tmp.path().join("precious");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("file"), b"keep").unwrap();
    symlink(&outside, path.join("new/link")).unwrap();
    symlink(outside.join("file"), path.join("cur/link")).unwrap();
    mailbox.remove().unwrap();
    assert!(!path.exists());
    assert_eq!(std::fs::read(outside.join("file")).unwrap(), b"keep");
}
