//! `terminal.upload` on real folders: hostile names staged byte for byte, private modes,
//! names refused, sizes at the limit, bodies that lie, a planted link at `uploads`, a
//! hostile state folder, and the sweep of old uploads.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use common::host::{call_with_checked_body, noise, sha256};
use ferry_codes::Code;
use ferry_node::host::{
    NodeHost, NodePolicy, Shell, TerminalConfig, UPLOADS_DIR_NAME, UploadSweep, sweep_once,
};
use ferry_node::terminal::{TerminalUploadHead, UPLOAD_MAX_BYTES};
use ferry_node::{Link, NodeError};
use serde_json::json;

/// A node whose state folder is `state` (made), serving terminals.
struct Node {
    gateway: Link,
    _node: Link,
    host: NodeHost,
    state: PathBuf,
}

fn node_at(state: PathBuf, sweep: UploadSweep) -> Node {
    std::fs::create_dir_all(&state).unwrap();
    let config = TerminalConfig {
        shell: Shell::from_env(Some("/bin/sh".into())),
        home: None,
        state_dir: state.clone(),
        sweep,
    };
    let host = NodeHost::new(NodePolicy::default()).with_terminal(config);
    let (gateway, node) = common::linked(host.handler());
    Node {
        gateway,
        _node: node,
        host,
        state: std::fs::canonicalize(state).unwrap(),
    }
}

impl Node {
    fn uploads(&self) -> PathBuf {
        self.state.join(UPLOADS_DIR_NAME)
    }

    /// The names in `uploads` (empty when it does not exist).
    fn staged(&self) -> Vec<String> {
        match std::fs::read_dir(self.uploads()) {
            Ok(entries) => entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// Uploads `bytes` as `name`, the body sent in pieces and checked.
async fn upload(link: &Link, name: &str, bytes: &[u8]) -> Result<TerminalUploadHead, NodeError> {
    let answer =
        call_with_checked_body(link, "terminal.upload", json!({ "name": name }), bytes).await?;
    Ok(serde_json::from_value(answer).unwrap())
}

/// Uploads `bytes` followed by `trailer` as they are, whatever they say.
async fn upload_raw(link: &Link, name: &str, bytes: &[u8], trailer: &[u8]) -> Code {
    let mut call = link
        .open("terminal.upload", json!({ "name": name }), true)
        .unwrap();
    let mut body = call.take_body().unwrap();
    let mut all = BytesMut::from(bytes);
    all.extend_from_slice(trailer);
    let _ = body.send(all.freeze()).await;
    let _ = body.finish().await;
    match call.response().await {
        Ok(r) => panic!("answered {}", r.result),
        Err(e) => e.code(),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// Checks `answer` names a file staged as `name` in a private folder of its own, holding
/// `bytes`.
fn check_staged(node: &Node, answer: &TerminalUploadHead, name: &str, bytes: &[u8]) {
    let path = Path::new(&answer.path);
    assert_eq!(path.file_name().unwrap().to_str().unwrap(), name);
    let folder = path.parent().unwrap();
    assert_eq!(folder.parent().unwrap(), node.uploads());
    let folder_name = folder.file_name().unwrap().to_str().unwrap();
    assert_eq!(folder_name.len(), 26, "{folder_name}");
    assert!(
        folder_name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
    );
    // Byte for byte: the only entry of its folder is exactly that name.
    let entries: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, [std::ffi::OsString::from(name)]);
    assert_eq!(std::fs::read(path).unwrap(), bytes);
    assert_eq!(
        (answer.size, answer.sha256.clone()),
        (bytes.len() as u64, sha256(bytes))
    );
    assert_eq!(mode(&node.uploads()), 0o700);
    assert_eq!(mode(folder), 0o700);
    assert_eq!(mode(path), 0o600);
    assert!(std::fs::symlink_metadata(path).unwrap().is_file());
}

/// No temporary and no folder but those of `answers` under `uploads`.
fn only_staged(node: &Node, answers: &[&TerminalUploadHead]) {
    let mut want: Vec<String> = answers
        .iter()
        .map(|a| {
            let folder = Path::new(&a.path).parent().unwrap();
            folder.file_name().unwrap().to_str().unwrap().to_owned()
        })
        .collect();
    want.sort();
    let mut got = node.staged();
    got.sort();
    assert_eq!(got, want);
}

/// Names a person may give a file, each a trap for a shell.
const HOSTILE_NAMES: &[&str] = &[
    "it's \"quoted\".txt",
    "$(touch CANARY)",
    "`touch CANARY`",
    "back\\slash",
    "*.glob?[ab]",
    "{a,b}",
    "!bang; rm -rf ~",
    "~tilde",
    "-leading-dash",
    "two  spaces",
    "relatório 日本 🚀.pdf",
    "'",
    ".hidden",
    "...",
];

#[tokio::test]
async fn hostile_names_are_staged_under_exactly_that_name_privately() {
    let tmp = tempfile::tempdir().unwrap();
    let node = node_at(tmp.path().join("state"), UploadSweep::default());
    let mut answers = Vec::new();
    for (i, name) in HOSTILE_NAMES.iter().enumerate() {
        let bytes = noise(1000 + i, i as u64);
        let answer = upload(&node.gateway, name, &bytes)
            .await
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        check_staged(&node, &answer, name, &bytes);
        answers.push(answer);
    }
    // Each in a folder of its own, and nothing else (no temporaries).
    only_staged(&node, &answers.iter().collect::<Vec<_>>());
    // The same name twice is two uploads.
    let again = upload(&node.gateway, HOSTILE_NAMES[0], b"again")
        .await
        .unwrap();
    assert_ne!(again.path, answers[0].path);
    // Nothing was run.
    assert!(!tmp.path().join("CANARY").exists());
    assert!(!node.state.join("CANARY").exists());
    // An empty file is a file.
    let empty = upload(&node.gateway, "empty", b"").await.unwrap();
    check_staged(&node, &empty, "empty", b"");
}

#[tokio::test]
async fn a_name_that_is_not_one_component_is_refused_before_the_body() {
    let tmp = tempfile::tempdir().unwrap();
    let node = node_at(tmp.path().join("state"), UploadSweep::default());
    let longest = "n".repeat(255);
    let too_long = "n".repeat(256);
    // 255 bytes of a multi-byte character (3 bytes each: 85 of them), then one more.
    let wide = "語".repeat(85);
    let wide_over = format!("{wide}n");
    for bad in [
        "",
        ".",
        "..",
        "a/b",
        "/",
        "/etc/passwd",
        "../up",
        "a\0b",
        "line\nfeed",
        "carriage\rreturn",
        "tab\there",
        "escape\u{1b}[31m",
        "del\u{7f}",
        "c1\u{85}control",
        "raw\u{10FFE9}byte",
        &too_long,
        &wide_over,
    ] {
        let e = upload(&node.gateway, bad, b"x").await.unwrap_err();
        assert_eq!(e.code(), Code::UnsafeName, "{bad:?}: {e}");
    }
    assert!(node.staged().is_empty(), "{:?}", node.staged());
    for good in [&longest, &wide] {
        let answer = upload(&node.gateway, good, b"ok").await.unwrap();
        check_staged(&node, &answer, good, b"ok");
    }
}

#[tokio::test]
async fn sizes_up_to_16_mib_are_staged_and_one_byte_more_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let node = node_at(tmp.path().join("state"), UploadSweep::default());
    let max = UPLOAD_MAX_BYTES as usize;
    let bytes = noise(max + 1, 3);
    let under = upload(&node.gateway, "under", &bytes[..max - 1])
        .await
        .unwrap();
    check_staged(&node, &under, "under", &bytes[..max - 1]);
    let at = upload(&node.gateway, "at", &bytes[..max]).await.unwrap();
    check_staged(&node, &at, "at", &bytes[..max]);
    let e = upload(&node.gateway, "over", &bytes).await.unwrap_err();
    assert_eq!(e.code(), Code::TooLarge, "{e}");
    only_staged(&node, &[&under, &at]);
}

#[tokio::test]
async fn a_body_that_lies_or_stops_short_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let node = node_at(tmp.path().join("state"), UploadSweep::default());
    let bytes = noise(50_000, 9);
    let trailer = |size: u64, digest: &[u8]| [&size.to_be_bytes()[..], digest].concat();
    let right = hex_bytes(&sha256(&bytes));
    let wrong = hex_bytes(&sha256(b"something else"));
    let cases = [
        ("wrong digest", trailer(bytes.len() as u64, &wrong)),
        ("wrong size", trailer(bytes.len() as u64 + 1, &right)),
        ("no trailer", Vec::new()),
        (
            "half a trailer",
            trailer(bytes.len() as u64, &right)[..20].to_vec(),
        ),
    ];
    for (case, trailer) in cases {
        let code = upload_raw(&node.gateway, "lie", &bytes, &trailer).await;
        assert_eq!(code, Code::TransferMismatch, "{case}");
        assert!(node.staged().is_empty(), "{case}: {:?}", node.staged());
    }
    // Given up midway: nothing stays either.
    let mut call = node
        .gateway
        .open("terminal.upload", json!({"name": "dropped"}), true)
        .unwrap();
    let mut body = call.take_body().unwrap();
    body.send(Bytes::from(bytes.clone())).await.unwrap();
    for _ in 0..100 {
        if !node.staged().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!node.staged().is_empty(), "the upload was begun");
    drop(body);
    drop(call);
    for _ in 0..200 {
        if node.staged().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(node.staged().is_empty(), "{:?}", node.staged());
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test]
async fn uploads_planted_as_a_link_or_a_file_is_refused_and_nothing_is_written_there() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let node = node_at(tmp.path().join("state"), UploadSweep::default());
    std::os::unix::fs::symlink(&elsewhere, node.uploads()).unwrap();
    let e = upload(&node.gateway, "f", b"secret").await.unwrap_err();
    assert_eq!(e.code(), Code::NodeStateUnusable, "{e}");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // The sweep does not follow it either.
    std::fs::create_dir(elsewhere.join("old")).unwrap();
    let later = SystemTime::now() + Duration::from_secs(10 * 24 * 3600);
    assert!(sweep_once(&node.state, &UploadSweep::default(), later).is_err());
    assert!(elsewhere.join("old").exists());

    std::fs::remove_file(node.uploads()).unwrap();
    std::fs::write(node.uploads(), b"not a folder").unwrap();
    let e = upload(&node.gateway, "f", b"secret").await.unwrap_err();
    assert_eq!(e.code(), Code::NodeStateUnusable, "{e}");
    assert!(e.to_string().contains("not a folder"), "{e}");
    assert_eq!(std::fs::read(node.uploads()).unwrap(), b"not a folder");
}

/// A staging folder others may enter, or another user's, is refused: its owner could swap
/// an upload's folder before the pasted path is used. Made private again, it works.
#[tokio::test]
async fn uploads_open_to_others_or_owned_by_another_user_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let node = node_at(tmp.path().join("state"), UploadSweep::default());
    upload(&node.gateway, "first", b"1").await.unwrap();
    for mode in [0o777, 0o750, 0o701] {
        std::fs::set_permissions(node.uploads(), std::fs::Permissions::from_mode(mode)).unwrap();
        let e = upload(&node.gateway, "f", b"secret").await.unwrap_err();
        assert_eq!(e.code(), Code::NodeStateUnusable, "{mode:o}: {e}");
        assert!(e.to_string().contains("nobody else may enter"), "{e}");
    }
    std::fs::set_permissions(node.uploads(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(node.uploads(), Some(65534), Some(65534)).unwrap();
    let e = upload(&node.gateway, "f", b"secret").await.unwrap_err();
    assert_eq!(e.code(), Code::NodeStateUnusable, "{e}");
    let me = rustix::process::geteuid().as_raw();
    std::os::unix::fs::chown(node.uploads(), Some(me), None).unwrap();
    upload(&node.gateway, "again", b"2").await.unwrap();
}

/// A state folder below a folder another user could rename things in (writable by
/// others without the sticky bit, or owned by another user) is refused before anything is
/// staged: its owner could move the state folder aside and put their own file where a
/// pasted path leads. A sticky folder (as /tmp) is fine.
#[tokio::test]
async fn a_state_folder_below_a_folder_others_may_rename_in_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    let node = node_at(shared.join("state"), UploadSweep::default());
    upload(&node.gateway, "first", b"1").await.unwrap();
    let set = |mode: u32| {
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    for mode in [0o777, 0o775, 0o757] {
        set(mode);
        let e = upload(&node.gateway, "f", b"secret").await.unwrap_err();
        assert_eq!(e.code(), Code::NodeStateUnusable, "{mode:o}: {e}");
        assert!(
            e.to_string().contains("other users could move things"),
            "{e}"
        );
    }
    set(0o1777);
    upload(&node.gateway, "sticky", b"2").await.unwrap();
    set(0o755);
    std::os::unix::fs::chown(&shared, Some(65534), None).unwrap();
    let e = upload(&node.gateway, "f", b"secret").await.unwrap_err();
    assert_eq!(e.code(), Code::NodeStateUnusable, "{e}");
    let me = rustix::process::geteuid().as_raw();
    std::os::unix::fs::chown(&shared, Some(me), None).unwrap();
    upload(&node.gateway, "again", b"3").await.unwrap();
}

#[tokio::test]
async fn a_state_folder_whose_path_is_hostile_works() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp
        .path()
        .join("it's \"the\" $(touch CANARY) `id`  state; dir");
    let node = node_at(state.clone(), UploadSweep::default());
    let answer = upload(&node.gateway, "a b", b"bytes").await.unwrap();
    let canonical = std::fs::canonicalize(&state).unwrap();
    assert!(
        answer.path.starts_with(&format!(
            "{}/{UPLOADS_DIR_NAME}/",
            canonical.to_str().unwrap()
        )),
        "{}",
        answer.path
    );
    check_staged(&node, &answer, "a b", b"bytes");
    assert!(!tmp.path().join("CANARY").exists());
}

/// Sets the mtime of `path` (not following a link) to `age` ago.
fn age(path: &Path, age: Duration) {
    let when = SystemTime::now() - age;
    let secs = when.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let stamp = rustix::fs::Timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &rustix::fs::Timestamps {
            last_access: stamp,
            last_modification: stamp,
        },
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

#[tokio::test]
async fn the_sweep_removes_old_uploads_and_leftover_temporaries_and_keeps_new_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let node = node_at(tmp.path().join("state"), UploadSweep::default());
    let old = upload(&node.gateway, "old", b"old").await.unwrap();
    let new = upload(&node.gateway, "new", b"new").await.unwrap();
    let old_folder = Path::new(&old.path).parent().unwrap().to_path_buf();
    age(&old_folder, Duration::from_secs(24 * 3600 + 60));
    age(
        Path::new(&new.path).parent().unwrap(),
        Duration::from_secs(23 * 3600),
    );
    // A temporary a stopped upload left, and one still being written.
    let stale = node
        .uploads()
        .join(format!("{}stale", ferry_fs::TEMP_PREFIX));
    let fresh = node
        .uploads()
        .join(format!("{}fresh", ferry_fs::TEMP_PREFIX));
    std::fs::write(&stale, b"x").unwrap();
    std::fs::write(&fresh, b"x").unwrap();
    age(&stale, Duration::from_secs(2 * 3600));
    // A link there is not ours: it stays, and what it points to too.
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), b"keep").unwrap();
    let link = node.uploads().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    age(&link, Duration::from_secs(30 * 24 * 3600));

    let removed = sweep_once(&node.state, &UploadSweep::default(), SystemTime::now()).unwrap();
    assert_eq!(removed, 2);
    assert!(!old_folder.exists());
    assert!(!stale.exists());
    assert_eq!(std::fs::read(&new.path).unwrap(), b"new");
    assert!(fresh.exists());
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"keep");
}

#[tokio::test]
async fn the_host_sweeps_at_start_and_then_every_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = UploadSweep {
        interval: Duration::from_millis(50),
        keep: Duration::from_secs(3600),
        temporaries_keep: Duration::from_secs(3600),
    };
    let node = node_at(tmp.path().join("state"), sweep);
    let first = upload(&node.gateway, "first", b"1").await.unwrap();
    let first_folder = Path::new(&first.path).parent().unwrap().to_path_buf();
    age(&first_folder, Duration::from_secs(7200));
    let host = node.host.clone();
    let sweeping = tokio::spawn(async move { host.sweep_uploads().await });
    let gone = |path: &Path| {
        let path = path.to_path_buf();
        async move {
            for _ in 0..200 {
                if !path.exists() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            false
        }
    };
    assert!(gone(&first_folder).await, "swept at start");
    // One made old later goes at a later sweep; a new one stays.
    let second = upload(&node.gateway, "second", b"2").await.unwrap();
    let kept = upload(&node.gateway, "kept", b"3").await.unwrap();
    let second_folder = Path::new(&second.path).parent().unwrap().to_path_buf();
    age(&second_folder, Duration::from_secs(7200));
    assert!(gone(&second_folder).await, "swept again");
    assert_eq!(std::fs::read(&kept.path).unwrap(), b"3");
    sweeping.abort();
}
