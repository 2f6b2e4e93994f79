//! `ferry media put|list|show|sweep` (spec scale S-STORE, core C-MEDIA) through the real
//! binary, on a site folder of its own.
//!
//! Until nodes exist, the bytes come in through `ferry media put`, the operator's own
//! command: it needs the site folder and a file of the machine, which an operator has
//! anyway, so it opens no way in for anyone else.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Runs `ferry media ARGS… --data DATA`: exit code, stdout lines as JSON, stderr.
fn media(data: &Path, args: &[&str]) -> (i32, Vec<Value>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("media")
        .args(args)
        .arg("--data")
        .arg(data)
        .env_remove("FERRY_CONFIG")
        .env_remove("FERRY_DATA")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    let stderr = String::from_utf8(out.stderr).unwrap();
    (out.status.code().unwrap(), lines, stderr)
}

/// A new site in `dir`: administration commands such as `ferry media` never make one.
fn site_in(dir: &Path) -> PathBuf {
    site_named(dir, "site")
}

/// A new site at `dir/name`.
fn site_named(dir: &Path, name: &str) -> PathBuf {
    let data = dir.join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["site", "init", "--mode", "local", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    data
}

fn put(data: &Path, file: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["put", file.to_str().unwrap()];
    args.extend(extra);
    let (code, lines, stderr) = media(data, &args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(lines.len(), 1);
    lines.into_iter().next().unwrap()
}

fn error_code(data: &Path, args: &[&str]) -> String {
    let (code, lines, _) = media(data, args);
    assert_eq!(code, 1, "{args:?}");
    lines[0]["error"]["code"].as_str().unwrap().to_owned()
}

fn id_of(record: &Value) -> &str {
    record["id"].as_str().unwrap()
}

#[test]
fn put_list_show_and_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let data = site_in(tmp.path());
    let source = tmp.path().join("train.py");
    std::fs::write(&source, "print('train')\n").unwrap();

    let record = put(&data, &source, &[]);
    let id = id_of(&record);
    assert!(id.starts_with("train~") && id.ends_with(".txt"), "{id}");
    assert_eq!(record["originalName"], "train.py");
    assert_eq!(record["size"], 15);
    assert_eq!(record["source"]["node"], Value::Null);
    let local = record["localPath"].as_str().unwrap();
    assert_eq!(std::fs::read(local).unwrap(), b"print('train')\n");

    let (code, shown, _) = media(&data, &["show", id]);
    assert_eq!(code, 0);
    assert_eq!(shown, vec![record.clone()]);

    let png = tmp.path().join("photo.jpg");
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0".to_vec();
    bytes.extend([0x1f, 0x15, 0xc4, 0x89]);
    std::fs::write(&png, bytes).unwrap();
    let photo = put(&data, &png, &[]);
    assert!(id_of(&photo).starts_with("photo~") && id_of(&photo).ends_with(".png"));

    let (code, listed, _) = media(&data, &["list"]);
    assert_eq!(code, 0);
    let ids: Vec<&str> = listed.iter().map(id_of).collect();
    assert_eq!(ids, vec![id, id_of(&photo)]);

    // Nothing has expired: a sweep removes nothing.
    let (code, report, _) = media(&data, &["sweep"]);
    assert_eq!(code, 0);
    assert_eq!(report[0]["recordsRemoved"], 0);
    assert_eq!(report[0]["blobsRemoved"], 0);

    // Once the record has expired, the sweep removes it; its blob is younger than the
    // grace period and waits that out, then goes.
    let db = rusqlite::Connection::open(data.join(".ferry").join("site.db")).unwrap();
    db.execute("UPDATE media SET expires = 0 WHERE id = ?1", [id])
        .unwrap();
    assert_eq!(error_code(&data, &["show", id]), "unknown_media_id");
    let (code, report, _) = media(&data, &["sweep"]);
    assert_eq!(code, 0);
    assert_eq!(report[0]["recordsRemoved"], 1);
    assert_eq!(report[0]["blobsRemoved"], 0);
    assert!(Path::new(local).exists());
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(local)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    let (code, report, _) = media(&data, &["sweep"]);
    assert_eq!(code, 0);
    assert_eq!(report[0]["recordsRemoved"], 0);
    assert_eq!(report[0]["blobsRemoved"], 1);
    assert!(!Path::new(local).exists());
    let (_, listed, _) = media(&data, &["list"]);
    assert_eq!(listed.len(), 1);
}

#[test]
fn show_refuses_what_this_store_never_issued() {
    let tmp = tempfile::tempdir().unwrap();
    let data = site_in(tmp.path());
    let source = tmp.path().join("notes.txt");
    std::fs::write(&source, "notes\n").unwrap();
    let record = put(&data, &source, &[]);
    let id = id_of(&record);
    let local = record["localPath"].as_str().unwrap();
    let other = site_named(tmp.path(), "other");
    let foreign = put(&other, &source, &[]);
    for value in [
        local,
        &format!("../{id}"),
        &format!("./{id}"),
        &format!("a/{id}"),
        &format!("a\\{id}"),
        "train~k3j9x2m1q8ab.txt",
        id_of(&foreign),
        "notes.txt",
        "",
    ] {
        assert_eq!(
            error_code(&data, &["show", value]),
            "unknown_media_id",
            "{value:?}"
        );
    }
}

#[test]
fn put_makes_the_stem_safe_and_refuses_what_is_not_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let data = site_in(tmp.path());
    let source = tmp.path().join("x.bin");
    std::fs::write(&source, [0u8, 1, 2, 3, 0, 9]).unwrap();
    let record = put(&data, &source, &["--name", "../../etc/pass wd.txt"]);
    assert!(id_of(&record).starts_with("pass_wd~"), "{record}");
    assert!(id_of(&record).ends_with(".bin"), "{record}");
    assert_eq!(record["originalName"], "../../etc/pass wd.txt");
    let nothing = put(&data, &source, &["--name", "..."]);
    assert!(id_of(&nothing).starts_with("media~"), "{nothing}");

    for missing in [tmp.path().join("missing"), tmp.path().to_owned()] {
        let (code, lines, stderr) = media(&data, &["put", missing.to_str().unwrap()]);
        assert_eq!(code, 1);
        assert!(lines.is_empty());
        assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    }
}
