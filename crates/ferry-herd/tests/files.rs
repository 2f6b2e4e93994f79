//! H-FILES for real: files resolved from a cwd, links followed to their targets, each
//! file once, hostile paths (FIFOs, devices, folders, broken links, unreadable files)
//! refusing the whole call, and embedding decided by the exact serialized envelope.

mod readers;

use std::fs::File;
use std::io::{Seek, Write};
use std::os::unix::fs::symlink;
use std::path::Path;

use ferry_codes::Code;
use ferry_config::limits::{HERD_FILES_MAX, MAILBOX_MAX_BYTES};
use ferry_herd::envelope::{Envelope, FileItem, Kind, OWNER};
use ferry_herd::files::{Opened, attach, open_all};
use ferry_herd::reader::Direct;
use readers::{as_nobody, fifo, folder, within_time, write};

fn strings(paths: &[&str]) -> Vec<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

fn open(paths: &[&str], cwd: &Path) -> Result<Vec<Opened>, ferry_herd::HerdError> {
    open_all(&strings(paths), cwd, &Direct)
}

fn envelope(text: &str) -> Envelope {
    let mut envelope = Envelope::new(Kind::Task, OWNER.into(), "review#4242".into(), text.into());
    envelope.seq = 7;
    envelope
}

/// Text awkward to size: every kind of JSON escape, multi-byte UTF-8, DEL (not escaped).
const AWKWARD: &str = "quote \" backslash \\ slash / tab \t newline \n cr \r bell \u{7} esc \u{1b} unit \u{1f} \
     del \u{7f} é 漢字 🦀 </script> \u{2028} end";

// ---------------------------------------------------------------------------- open_all

#[test]
fn relative_paths_resolve_from_the_cwd_and_come_back_canonical() {
    let (_keep, dir) = folder();
    write(&dir.join("project/notes.md"), "notes");
    write(&dir.join("project/sub/x.md"), "x");
    let cwd = dir.join("project/sub");
    let opened = open(&["../notes.md", "x.md", "./x.md"], &cwd).unwrap();
    let paths: Vec<&Path> = opened.iter().map(|o| o.path.as_path()).collect();
    assert_eq!(
        paths,
        [dir.join("project/notes.md"), dir.join("project/sub/x.md")]
    );
    assert_eq!(opened[0].size, 5);
}

#[test]
fn a_link_is_read_at_its_target_and_named_by_it() {
    let (_keep, dir) = folder();
    write(&dir.join("real/target.md"), "the target");
    symlink("real/target.md", dir.join("link.md")).unwrap();
    let opened = open(&["link.md"], &dir).unwrap();
    assert_eq!(opened[0].path, dir.join("real/target.md"));
    assert_eq!(opened[0].size, 10);
}

#[test]
fn duplicates_by_canonical_path_appear_once_and_the_first_wins() {
    let (_keep, dir) = folder();
    write(&dir.join("notes.md"), "notes");
    write(&dir.join("other.md"), "other");
    symlink(dir.join("notes.md"), dir.join("alias.md")).unwrap();
    let absolute = dir.join("notes.md").display().to_string();
    let opened = open(
        &["other.md", "./notes.md", &absolute, "alias.md", "other.md"],
        &dir,
    )
    .unwrap();
    let paths: Vec<&Path> = opened.iter().map(|o| o.path.as_path()).collect();
    assert_eq!(paths, [dir.join("other.md"), dir.join("notes.md")]);
}

#[test]
fn one_bad_path_rejects_the_whole_call_naming_it_as_given() {
    let (_keep, dir) = folder();
    write(&dir.join("good.md"), "good");
    symlink("gone.md", dir.join("broken.md")).unwrap();
    std::fs::create_dir(dir.join("folder")).unwrap();
    let cases: [(&str, Code); 4] = [
        ("missing.md", Code::NotFound),
        ("broken.md", Code::NotFound),
        ("folder", Code::IsDirectory),
        ("/dev/zero", Code::NotAFile),
    ];
    for (bad, code) in cases {
        let e = open(&["good.md", bad, "good.md"], &dir).unwrap_err();
        assert_eq!(e.code, code, "{bad}: {e}");
        assert!(e.message.contains(&format!("{bad:?}")), "{bad}: {e}");
    }
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let (_keep, dir) = folder();
    fifo(&dir.join("pipe.md"));
    let cwd = dir.clone();
    let e = within_time(move || open(&["pipe.md"], &cwd).unwrap_err());
    assert_eq!(e.code, Code::NotAFile);
    assert!(e.message.contains("\"pipe.md\""), "{e}");
}

#[test]
fn an_unreadable_file_is_refused() {
    let (_keep, dir) = folder();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    write(&dir.join("open.md"), "anyone");
    write(&dir.join("secret.md"), "root's");
    std::fs::set_permissions(
        dir.join("secret.md"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let cwd = dir.clone();
    let (readable, refused) = as_nobody(move || {
        (
            open(&["open.md"], &cwd).map(|o| o.len()),
            open(&["open.md", "secret.md"], &cwd).unwrap_err(),
        )
    });
    assert_eq!(readable.unwrap(), 1);
    assert_eq!(refused.code, Code::PermissionDenied, "{refused}");
    assert!(refused.message.contains("\"secret.md\""), "{refused}");
}

#[test]
fn empty_and_nul_paths_are_refused() {
    let (_keep, dir) = folder();
    write(&dir.join("a.md"), "a");
    for bad in ["", "a.md\0b"] {
        let e = open(&["a.md", bad], &dir).unwrap_err();
        assert_eq!(e.code, Code::BadPath, "{bad:?}: {e}");
    }
}

#[test]
fn a_canonical_name_that_is_not_utf8_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let (_keep, dir) = folder();
    let odd = dir.join(std::ffi::OsStr::from_bytes(b"odd-\xff.md"));
    std::fs::write(&odd, "text").unwrap();
    symlink(&odd, dir.join("plain.md")).unwrap();
    let e = open(&["plain.md"], &dir).unwrap_err();
    assert_eq!(e.code, Code::BadPath, "{e}");
    assert!(e.message.contains("\"plain.md\""), "{e}");
}

#[test]
fn at_most_files_max_paths_are_taken() {
    let (_keep, dir) = folder();
    write(&dir.join("one.md"), "one");
    for count in [HERD_FILES_MAX - 1, HERD_FILES_MAX] {
        let opened = open(&vec!["one.md"; count], &dir).unwrap();
        assert_eq!(opened.len(), 1, "{count} names of one file");
    }
    let e = open(&vec!["one.md"; HERD_FILES_MAX + 1], &dir).unwrap_err();
    assert_eq!(e.code, Code::InvalidRequest, "{e}");
    assert!(e.message.contains(&HERD_FILES_MAX.to_string()), "{e}");
}

// ------------------------------------------------------------------------------ attach

/// The envelope's text padded so that, with `items` as its files, it serializes to
/// exactly `target` bytes.
fn pad_to(envelope: &mut Envelope, items: &[FileItem], target: usize) {
    let mut probe = envelope.clone();
    probe.files.extend_from_slice(items);
    let len = probe.serialized_len();
    assert!(len <= target, "the items alone take {len}");
    envelope.text.push_str(&"p".repeat(target - len));
}

fn embedded(path: &Path, content: &str) -> FileItem {
    FileItem {
        path: path.display().to_string(),
        size: content.len() as u64,
        embedded: true,
        content: Some(content.to_owned()),
    }
}

fn referenced(path: &Path, size: u64) -> FileItem {
    FileItem {
        path: path.display().to_string(),
        size,
        embedded: false,
        content: None,
    }
}

/// Awkward files that together fill an envelope to exactly the limit are all embedded;
/// one byte more and the last is referenced instead. Proves the incremental sizing is
/// exactly serde_json's, escapes, commas and all, with and without files already there.
#[test]
fn an_envelope_of_exactly_the_limit_embeds_and_one_byte_more_references() {
    let (_keep, dir) = folder();
    let contents = [AWKWARD, "", "\"\"\"\\\\\\", "漢🦀\u{1}\u{1e}"];
    let mut paths = Vec::new();
    for (i, content) in contents.iter().enumerate() {
        let path = dir.join(format!("f{i}.md"));
        write(&path, content);
        paths.push(path);
    }
    let names: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
    let existing = referenced(Path::new("/already/there"), 3);
    for already in [vec![], vec![existing]] {
        let all: Vec<FileItem> = already
            .iter()
            .cloned()
            .chain(paths.iter().zip(contents).map(|(p, c)| embedded(p, c)))
            .collect();
        let mut exact = envelope("");
        exact.files = already.clone();
        pad_to(&mut exact, &all[already.len()..], MAILBOX_MAX_BYTES);
        attach(&mut exact, open(&names, &dir).unwrap()).unwrap();
        assert_eq!(exact.files, all);
        assert_eq!(exact.serialized_len(), MAILBOX_MAX_BYTES);

        let mut over = envelope("");
        over.files = already.clone();
        pad_to(&mut over, &all[already.len()..], MAILBOX_MAX_BYTES);
        over.text.push('q');
        attach(&mut over, open(&names, &dir).unwrap()).unwrap();
        let last = paths.last().unwrap();
        assert_eq!(
            over.files.last().unwrap(),
            &referenced(last, contents.last().unwrap().len() as u64)
        );
        assert_eq!(over.files[..all.len() - 1], all[..all.len() - 1]);
        assert!(over.serialized_len() <= MAILBOX_MAX_BYTES);
        assert_eq!(Envelope::parse(&over.to_bytes()).unwrap(), over);
    }
}

/// Offsets of each opened file, read through duplicates that share them.
fn twins(opened: &[Opened]) -> Vec<File> {
    opened.iter().map(|o| o.file.try_clone().unwrap()).collect()
}

#[test]
fn invalid_utf8_nul_and_binary_files_are_referenced_with_their_size() {
    let (_keep, dir) = folder();
    let cases: [(&str, &[u8]); 6] = [
        ("latin1.txt", b"caf\xe9"),
        ("overlong.txt", b"\xc0\xaf"),
        ("surrogate.txt", b"\xed\xa0\x80"),
        ("cut.txt", "漢".as_bytes().split_at(2).0),
        ("nul.txt", b"text\0more"),
        ("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
    ];
    for (name, bytes) in cases {
        write(&dir.join(name), bytes);
    }
    write(&dir.join("fine.md"), "fine");
    let names: Vec<&str> = cases.iter().map(|(n, _)| *n).chain(["fine.md"]).collect();
    let mut envelope = envelope("look");
    attach(&mut envelope, open(&names, &dir).unwrap()).unwrap();
    for ((name, bytes), item) in cases.iter().zip(&envelope.files) {
        assert_eq!(
            item,
            &referenced(&dir.join(name), bytes.len() as u64),
            "{name}"
        );
    }
    assert_eq!(envelope.files[6], embedded(&dir.join("fine.md"), "fine"));
}

#[test]
fn a_file_too_big_to_fit_is_not_read_at_all() {
    let (_keep, dir) = folder();
    let huge = dir.join("huge.log");
    File::create(&huge).unwrap().set_len(100 << 20).unwrap();
    let opened = open(&["huge.log"], &dir).unwrap();
    let mut twins = twins(&opened);
    let mut envelope = envelope("look");
    attach(&mut envelope, opened).unwrap();
    assert_eq!(envelope.files, [referenced(&huge, 100 << 20)]);
    assert_eq!(twins[0].stream_position().unwrap(), 0);
}

#[test]
fn a_file_that_grows_after_it_was_opened_is_read_no_further_than_could_fit() {
    let (_keep, dir) = folder();
    let path = dir.join("growing.log");
    write(&path, "small");
    let opened = open(&["growing.log"], &dir).unwrap();
    let mut twins = twins(&opened);
    // Room for exactly 1000 bytes of text once the envelope is padded (the size as
    // opened, 5, is what the room is reckoned with).
    let mut envelope = envelope("");
    let thousand = FileItem {
        size: 5,
        ..embedded(&path, &"g".repeat(1000))
    };
    pad_to(&mut envelope, &[thousand], MAILBOX_MAX_BYTES);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[b'g'; 1 << 20])
        .unwrap();
    attach(&mut envelope, opened).unwrap();
    let grown = 5 + (1 << 20);
    assert_eq!(envelope.files, [referenced(&path, grown)]);
    assert_eq!(twins[0].stream_position().unwrap(), 1001);
}

#[test]
fn embedded_text_is_the_snapshot_taken_at_submission() {
    let (_keep, dir) = folder();
    let path = dir.join("notes.md");
    write(&path, "before");
    let opened = open(&["notes.md"], &dir).unwrap();
    write(&path, "during");
    let mut envelope = envelope("look");
    attach(&mut envelope, opened).unwrap();
    write(&path, "after, and longer");
    assert_eq!(envelope.files, [embedded(&path, "during")]);
    assert_eq!(Envelope::parse(&envelope.to_bytes()).unwrap(), envelope);
}

#[test]
fn the_first_of_duplicates_is_the_one_attached() {
    let (_keep, dir) = folder();
    write(&dir.join("notes.md"), "the notes");
    symlink("notes.md", dir.join("alias.md")).unwrap();
    let absolute = dir.join("notes.md").display().to_string();
    let mut envelope = envelope("look");
    let opened = open(&["./notes.md", &absolute, "alias.md"], &dir).unwrap();
    attach(&mut envelope, opened).unwrap();
    assert_eq!(
        envelope.files,
        [embedded(&dir.join("notes.md"), "the notes")]
    );
}

/// Embedding an early file never takes the room a later one needs to be named: the big
/// first file is referenced so that the second still fits, by reference.
#[test]
fn room_for_every_later_reference_is_kept() {
    let (_keep, dir) = folder();
    let big = dir.join("big.md");
    let later = dir.join("later.bin");
    write(&big, "b".repeat(1000));
    write(&later, b"\xff");
    let mut envelope = envelope("");
    // Exactly room for the first embedded and nothing after it.
    pad_to(
        &mut envelope,
        &[embedded(&big, &"b".repeat(1000))],
        MAILBOX_MAX_BYTES,
    );
    attach(&mut envelope, open(&["big.md", "later.bin"], &dir).unwrap()).unwrap();
    assert_eq!(
        envelope.files,
        [referenced(&big, 1000), referenced(&later, 1)]
    );
    assert!(envelope.serialized_len() <= MAILBOX_MAX_BYTES);
}

#[test]
fn an_envelope_that_overflows_even_with_references_alone_is_refused_unchanged() {
    let (_keep, dir) = folder();
    let path = dir.join("a.md");
    write(&path, "a");
    for (extra, fits) in [(0, true), (1, false)] {
        let mut envelope = envelope("");
        pad_to(&mut envelope, &[referenced(&path, 1)], MAILBOX_MAX_BYTES);
        envelope.text.push_str(&"x".repeat(extra));
        let before = envelope.clone();
        let result = attach(&mut envelope, open(&["a.md"], &dir).unwrap());
        if fits {
            result.unwrap();
            assert_eq!(envelope.files, [referenced(&path, 1)]);
            assert_eq!(envelope.serialized_len(), MAILBOX_MAX_BYTES);
        } else {
            let e = result.unwrap_err();
            assert_eq!(e.code, Code::InvalidRequest, "{e}");
            assert_eq!(envelope, before);
        }
    }
}

/// A thousand small files are all embedded, each once, and the envelope is exactly as
/// large as the sizing said (it fits, and parses back).
#[test]
fn a_thousand_small_files_are_embedded() {
    let (_keep, dir) = folder();
    let mut names = Vec::new();
    for i in 0..1000 {
        let name = format!("n{i:04}.md");
        write(&dir.join(&name), format!("file {i}: {AWKWARD}"));
        names.push(name);
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut envelope = envelope("look at all of these");
    attach(&mut envelope, open(&names, &dir).unwrap()).unwrap();
    assert_eq!(envelope.files.len(), 1000);
    assert!(envelope.files.iter().all(|f| f.embedded));
    assert_eq!(Envelope::parse(&envelope.to_bytes()).unwrap(), envelope);
}

#[test]
fn no_files_leave_the_envelope_as_it_was() {
    let mut envelope = envelope("nothing attached");
    let before = envelope.clone();
    attach(&mut envelope, Vec::new()).unwrap();
    assert_eq!(envelope, before);
}

/// A file that fails as it is read (here a folder's descriptor: EISDIR) fails the whole
/// attach, and the files attached before it are taken out again.
#[test]
fn a_read_that_fails_leaves_the_envelope_as_it_was() {
    let (_keep, dir) = folder();
    write(&dir.join("good.md"), "good");
    let mut opened = open(&["good.md"], &dir).unwrap();
    opened.push(Opened {
        path: dir.clone(),
        file: File::open(&dir).unwrap(),
        size: 0,
    });
    let mut envelope = envelope("look");
    let before = envelope.clone();
    let e = attach(&mut envelope, opened).unwrap_err();
    assert!(e.message.contains(&dir.display().to_string()), "{e}");
    assert_eq!(envelope, before);
}
