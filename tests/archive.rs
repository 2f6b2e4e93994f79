//! `ferry archive plan` (N-ADMIN) on good and hostile archives, through the real binary.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use ferry_archive::{EntryMeta, TarWriter};
use serde_json::Value;

/// Runs `ferry archive plan FILE ARGS…`: the exit code and the one JSON line printed.
fn plan(file: &Path, args: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("archive")
        .arg("plan")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout:?}");
    let json = serde_json::from_str(&stdout).unwrap();
    (out.status.code().unwrap(), json)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A ustar header with its checksum, for entries the writer would never make.
fn raw_header(name: &[u8], flag: u8, size: u64) -> Vec<u8> {
    let mut b = vec![0u8; 512];
    b[..name.len()].copy_from_slice(name);
    b[100..108].copy_from_slice(b"0000644\0");
    b[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    b[136..148].copy_from_slice(b"14000000000\0");
    b[156] = flag;
    b[257..263].copy_from_slice(b"ustar\0");
    b[263..265].copy_from_slice(b"00");
    b[148..156].fill(b' ');
    let sum: u64 = b.iter().map(|&x| u64::from(x)).sum();
    b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    b
}

fn raw_tar(entries: &[(&[u8], u8)]) -> Vec<u8> {
    let mut tar = Vec::new();
    for (name, flag) in entries {
        tar.extend(raw_header(name, *flag, 0));
    }
    tar.extend([0u8; 1024]);
    tar
}

#[test]
fn a_good_archive_prints_its_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let mut writer = TarWriter::gzip(Vec::new());
    let meta = EntryMeta::default();
    writer.add_dir("docs", meta).unwrap();
    writer
        .add_file("docs/relatório\n.txt", 5, meta, &b"hello"[..])
        .unwrap();
    writer.add_file("src/lib.rs", 2, meta, &b"//"[..]).unwrap();
    let file = write(tmp.path(), "good.tar.gz", &writer.finish().unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["archive", "plan"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(r#"{"entries":[{"path":"docs","type":"dir","size":0},"#),
        "keys in the order N-ADMIN gives: {text}"
    );
    assert!(text.trim_end().ends_with(r#"],"descendants":4}"#), "{text}");
    let (code, json) = plan(&file, &[]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(
        json,
        serde_json::json!({
            "entries": [
                {"path": "docs", "type": "dir", "size": 0},
                {"path": "docs/relatório\n.txt", "type": "file", "size": 5},
                {"path": "src/lib.rs", "type": "file", "size": 2},
            ],
            "descendants": 4,
        })
    );
    let (code, json) = plan(
        &file,
        &[
            "--allow", "**/*.rs", "--allow", "docs/**", "--allow", "docs",
        ],
    );
    assert_eq!(code, 0, "{json}");
}

#[test]
fn hostile_archives_print_their_refusal() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<u8>, Vec<&str>, &str)> = vec![
        (
            "traversal",
            raw_tar(&[(b"../../etc/passwd", b'0')]),
            vec![],
            "path_escapes",
        ),
        (
            "absolute",
            raw_tar(&[(b"/etc/passwd", b'0')]),
            vec![],
            "path_escapes",
        ),
        (
            "symlink",
            raw_tar(&[(b"link", b'2')]),
            vec![],
            "unsupported_entry",
        ),
        (
            "hardlink",
            raw_tar(&[(b"link", b'1')]),
            vec![],
            "unsupported_entry",
        ),
        (
            "fifo",
            raw_tar(&[(b"fifo", b'6')]),
            vec![],
            "unsupported_entry",
        ),
        (
            "twice",
            raw_tar(&[(b"a", b'0'), (b"a", b'0')]),
            vec![],
            "name_collision",
        ),
        (
            "case",
            raw_tar(&[(b"A", b'0'), (b"a", b'0')]),
            vec!["--platform", "windows"],
            "name_collision",
        ),
        (
            "reserved",
            raw_tar(&[(b"con.txt", b'0')]),
            vec!["--platform", "windows"],
            "platform_name",
        ),
        (
            "denied",
            raw_tar(&[(b"x/.ssh/id", b'0')]),
            vec!["--deny", "**/.ssh"],
            "path_denied",
        ),
        (
            "not allowed",
            raw_tar(&[(b"a.md", b'0')]),
            vec!["--allow", "*.txt"],
            "path_denied",
        ),
        (
            "not utf-8",
            raw_tar(&[(b"\xff", b'0')]),
            vec![],
            "invalid_unicode",
        ),
        (
            "garbage",
            b"definitely not a tar".to_vec(),
            vec![],
            "malformed_archive",
        ),
        (
            "bad glob",
            raw_tar(&[(b"a", b'0')]),
            vec!["--deny", "a[b"],
            "invalid_request",
        ),
    ];
    for (what, bytes, args, expected) in cases {
        let file = write(tmp.path(), "x.tar", &bytes);
        let (code, json) = plan(&file, &args);
        assert_eq!(code, 1, "{what}: {json}");
        assert_eq!(json["error"]["code"], expected, "{what}: {json}");
        assert!(
            json["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert_eq!(json.as_object().unwrap().len(), 1, "only the error: {json}");
        let keys: Vec<_> = json["error"].as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 2, "code and message: {json}");
    }
}

#[test]
fn the_caps_apply_on_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut tar = Vec::new();
    for i in 0..5001 {
        tar.extend(raw_header(format!("f{i}").as_bytes(), b'0', 0));
    }
    tar.extend([0u8; 1024]);
    let file = write(tmp.path(), "many.tar", &tar);
    let (code, json) = plan(&file, &[]);
    assert_eq!(
        (code, json["error"]["code"].as_str()),
        (1, Some("too_many_entries"))
    );
    // A file that makes the archive exactly 16 MiB (zeros: its data and the end marker),
    // then one byte more.
    let cap = 16 * 1024 * 1024;
    let path = tmp.path().join("big.tar");
    let mut big = std::fs::File::create(&path).unwrap();
    big.write_all(&raw_header(b"a", b'0', cap - 3 * 512))
        .unwrap();
    big.set_len(cap).unwrap();
    let (code, json) = plan(&path, &[]);
    assert_eq!(code, 0, "{json}");
    big.set_len(cap + 1).unwrap();
    let (code, json) = plan(&path, &[]);
    assert_eq!(
        (code, json["error"]["code"].as_str()),
        (1, Some("too_large"))
    );
}

#[test]
fn a_missing_file_is_an_error_in_the_same_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, json) = plan(&tmp.path().join("absent.tar"), &[]);
    assert_eq!(code, 1);
    assert_eq!(json["error"]["code"], "not_found");
}

#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let mut writer = TarWriter::gzip(Vec::new());
    // A plan far larger than a pipe holds, under the cap of 5000 entries.
    for i in 0..4000 {
        let name = format!("some/deeper/folder/file-{i:04}.txt");
        writer
            .add_file(&name, 1, EntryMeta::default(), &b"x"[..])
            .unwrap();
    }
    let file = write(tmp.path(), "many.tar.gz", &writer.finish().unwrap());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["archive", "plan"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Like `| head -c 10`: read a little, then stop reading.
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
}
