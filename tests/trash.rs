//! The trash (spec M-DAILY "Undo a delete"), through the real `ferry serve`: a delete
//! moves into `private/trash/<person>/`, the trash lists and restores, refuses to
//! overwrite, keeps within `files.trash_max_bytes`, expires, and holds against swapped
//! links, other people and spelled-out traversals.

mod support;

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use reqwest::blocking::Response;
use serde_json::{Value, json};
use support::{Server, assert_error, client, create_project, is_rfc3339, upload};

/// A delete's answer: its status, the trash id it named, and its JSON body (if any).
fn delete(server: &Server, token: &str, query: &[(&str, &str)]) -> (u16, Option<String>, Value) {
    let response = client()
        .delete(server.url("/v1/files"))
        .query(query)
        .bearer_auth(token)
        .send()
        .unwrap();
    let id = response
        .headers()
        .get("ferry-trash-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let (status, body) = answer(response);
    (status, id, body)
}

fn answer(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn trash(server: &Server, token: &str) -> Value {
    let (status, body) = answer(
        client()
            .get(server.url("/v1/trash"))
            .bearer_auth(token)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    body
}

fn restore(server: &Server, token: &str, id: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = client()
        .post(server.url(&format!("/v1/trash/{id}/restore")))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    answer(request.send().unwrap())
}

fn purge(server: &Server, token: &str, id: &str) -> (u16, Value) {
    answer(
        client()
            .delete(server.url(&format!("/v1/trash/{id}")))
            .bearer_auth(token)
            .send()
            .unwrap(),
    )
}

fn trash_dir(server: &Server, person: &str) -> PathBuf {
    server.data.join("private/trash").join(person)
}

fn deleted(server: &Server, token: &str, path: &str) -> String {
    let (status, id, body) = delete(server, token, &[("path", path)]);
    assert_eq!(status, 204, "deleting {path}: {body}");
    id.expect("a delete into the trash names its id")
}

#[test]
fn a_delete_goes_to_the_trash_and_comes_back() {
    let server = Server::start();
    let token = &server.token;
    let public = server.home("me").join("public");
    assert_eq!(upload(&server, token, "a.txt", b"alpha", None).0, 201);
    std::fs::create_dir_all(public.join("docs/deep")).unwrap();
    std::fs::write(public.join("docs/one.txt"), b"12345").unwrap();
    std::fs::write(public.join("docs/deep/two.txt"), b"1234567").unwrap();

    let file_id = deleted(&server, token, "public/a.txt");
    let dir_id = deleted(&server, token, "public//docs/");
    assert!(!public.join("a.txt").exists() && !public.join("docs").exists());
    // Moved, not copied: the entry itself is in the trash folder, under its id.
    let in_trash = trash_dir(&server, "me");
    assert_eq!(std::fs::read(in_trash.join(&file_id)).unwrap(), b"alpha");
    assert!(in_trash.join(&dir_id).join("deep/two.txt").is_file());
    assert_ne!(file_id, dir_id);
    for id in [&file_id, &dir_id] {
        assert_eq!(id.len(), 32, "160 random bits: {id}");
    }

    let listed = trash(&server, token);
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{listed}");
    let dir = entries.iter().find(|e| e["id"] == dir_id.as_str()).unwrap();
    assert_eq!(dir["path"], "public/docs", "normalized: {dir}");
    assert_eq!(dir["name"], "docs");
    assert_eq!(dir["type"], "dir");
    assert_eq!(dir["size"], 12, "every file at every depth");
    assert_eq!(dir["project"], Value::Null);
    let file = entries
        .iter()
        .find(|e| e["id"] == file_id.as_str())
        .unwrap();
    assert_eq!((&file["type"], &file["size"]), (&json!("file"), &json!(5)));
    let (deleted_at, expires_at) = (
        file["deletedAt"].as_str().unwrap(),
        file["expiresAt"].as_str().unwrap(),
    );
    assert!(is_rfc3339(deleted_at) && is_rfc3339(expires_at), "{file}");
    let secs = |s: &str| {
        chrono_free_secs(s).unwrap_or_else(|| panic!("{s} is not a UTC time this test reads"))
    };
    assert_eq!(
        secs(expires_at) - secs(deleted_at),
        7 * 24 * 3600,
        "files.trash_days"
    );
    assert_eq!(listed["bytes"], 17);
    assert_eq!(listed["maxBytes"], 1024u64 * 1024 * 1024);

    // Restore: back where it was, whole, and gone from the trash.
    let (status, body) = restore(&server, token, &dir_id, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["path"], "public/docs");
    assert_eq!(
        std::fs::read(public.join("docs/deep/two.txt")).unwrap(),
        b"1234567"
    );
    let (status, body) = restore(&server, token, &file_id, Some(json!({})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(std::fs::read(public.join("a.txt")).unwrap(), b"alpha");
    assert_eq!(trash(&server, token)["entries"], json!([]));
    assert_eq!(std::fs::read_dir(&in_trash).unwrap().count(), 0);
    // A second restore of the same id finds nothing.
    let (status, body) = restore(&server, token, &file_id, None);
    assert_error(status, &body, 404, "not_found");
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ` (what the API writes).
fn chrono_free_secs(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[19] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    // Days from civil (Howard Hinnant's algorithm, public domain arithmetic).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

#[test]
fn a_restore_never_overwrites_and_can_take_a_new_name() {
    let server = Server::start();
    let token = &server.token;
    let public = server.home("me").join("public");
    assert_eq!(upload(&server, token, "a.txt", b"old", None).0, 201);
    let id = deleted(&server, token, "public/a.txt");
    assert_eq!(upload(&server, token, "a.txt", b"new", None).0, 201);

    let (status, body) = restore(&server, token, &id, None);
    assert_error(status, &body, 409, "exists");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("public/a.txt"), "names it: {message}");
    assert_eq!(std::fs::read(public.join("a.txt")).unwrap(), b"new");
    assert_eq!(trash(&server, token)["entries"][0]["id"], id.as_str());

    // A name that is not one, or that would climb out, is refused; nothing moves.
    for bad in ["../escape.txt", "a/b.txt", "", ".."] {
        let (status, body) = restore(&server, token, &id, Some(json!({ "name": bad })));
        assert!(status == 400, "{bad:?}: {status} {body}");
    }
    let (status, body) = restore(&server, token, &id, Some(json!({"nope": 1})));
    assert_error(status, &body, 400, "bad_json");
    let (status, body) = restore(&server, token, &id, Some(json!({"name": "a (old).txt"})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["path"], "public/a (old).txt");
    assert_eq!(std::fs::read(public.join("a (old).txt")).unwrap(), b"old");
    assert_eq!(std::fs::read(public.join("a.txt")).unwrap(), b"new");
}

#[test]
fn a_restore_makes_missing_folders_again() {
    let server = Server::start();
    let token = &server.token;
    let public = server.home("me").join("public");
    std::fs::create_dir_all(public.join("r/s")).unwrap();
    std::fs::write(public.join("r/s/f.txt"), b"f").unwrap();
    let id = deleted(&server, token, "public/r/s/f.txt");
    let (status, _, body) = delete(&server, token, &[("path", "public/r"), ("forever", "true")]);
    assert_eq!(status, 204, "{body}");
    assert!(!public.join("r").exists());
    assert_eq!(
        trash(&server, token)["entries"].as_array().unwrap().len(),
        1
    );

    let (status, body) = restore(&server, token, &id, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(std::fs::read(public.join("r/s/f.txt")).unwrap(), b"f");

    // A file where a folder must be made again: refused, the entry stays in the trash.
    let id = deleted(&server, token, "public/r/s/f.txt");
    let (status, _, _) = delete(&server, token, &[("path", "public/r"), ("forever", "true")]);
    assert_eq!(status, 204);
    std::fs::write(public.join("r"), b"a file now").unwrap();
    let (status, body) = restore(&server, token, &id, None);
    assert!(status == 400 || status == 409, "{status} {body}");
    assert!(trash_dir(&server, "me").join(&id).is_file());
}

#[test]
fn a_trash_over_its_size_refuses_the_delete_and_loses_nothing() {
    // 1000 bytes of trash: 600 in it, then 401 more is one too many and 400 just fits.
    let server = Server::start_with_env(&[("FERRY_FILES__TRASH_MAX_BYTES", "1000")]);
    let token = &server.token;
    let public = server.home("me").join("public");
    for (name, size) in [("a.txt", 600), ("b.txt", 401), ("c.txt", 400), ("d.txt", 1)] {
        assert_eq!(upload(&server, token, name, &vec![b'x'; size], None).0, 201);
    }
    deleted(&server, token, "public/a.txt");
    let (status, id, body) = delete(&server, token, &[("path", "public/b.txt")]);
    assert_error(status, &body, 507, "trash_full");
    assert_eq!(id, None);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("public/b.txt") && message.contains("Nothing was deleted"),
        "{message}"
    );
    assert_eq!(std::fs::read(public.join("b.txt")).unwrap().len(), 401);
    deleted(&server, token, "public/c.txt");
    assert_eq!(trash(&server, token)["bytes"], 1000);
    let (status, _, body) = delete(&server, token, &[("path", "public/d.txt")]);
    assert_error(status, &body, 507, "trash_full");
    assert!(public.join("d.txt").is_file());
    // A folder counts all its files.
    std::fs::create_dir_all(public.join("f")).unwrap();
    std::fs::write(public.join("f/x"), b"x").unwrap();
    let (status, _, body) = delete(&server, token, &[("path", "public/f")]);
    assert_error(status, &body, 507, "trash_full");
    assert!(public.join("f/x").is_file());
    // A refused delete leaves no record behind.
    assert_eq!(
        trash(&server, token)["entries"].as_array().unwrap().len(),
        2
    );
    // Deleting for good is always possible; emptying one entry makes room.
    let (status, _, body) = delete(
        &server,
        token,
        &[("path", "public/b.txt"), ("forever", "1")],
    );
    assert!(
        status == 400,
        "forever takes true or false only: {status} {body}"
    );
    let (status, _, body) = delete(
        &server,
        token,
        &[("path", "public/b.txt"), ("forever", "true")],
    );
    assert_eq!(status, 204, "{body}");
    assert!(!public.join("b.txt").exists());
    let first = trash(&server, token)["entries"][1]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(purge(&server, token, &first).0, 204);
    assert!(!trash_dir(&server, "me").join(&first).exists());
    deleted(&server, token, "public/d.txt");
}

#[test]
fn the_trash_counts_against_the_quota_until_emptied() {
    let server = Server::start_with_env(&[("FERRY_LIMITS__PERSON_MAX_BYTES", "1000")]);
    let token = &server.token;
    assert_eq!(upload(&server, token, "a.txt", &[b'a'; 900], None).0, 201);
    let id = deleted(&server, token, "public/a.txt");
    let (status, body) = upload(&server, token, "b.txt", &[b'b'; 200], None);
    assert_error(status, &body, 507, "quota_exceeded");
    assert_eq!(purge(&server, token, &id).0, 204);
    let (status, body) = upload(&server, token, "b.txt", &[b'b'; 200], None);
    assert_eq!(status, 201, "{body}");
}

#[test]
fn a_trash_entry_swapped_for_a_link_is_not_restored() {
    let server = Server::start();
    let token = &server.token;
    let public = server.home("me").join("public");
    let outside = server.data.parent().unwrap().join("outside.txt");
    std::fs::write(&outside, b"not the person's").unwrap();
    assert_eq!(upload(&server, token, "a.txt", b"mine", None).0, 201);
    let id = deleted(&server, token, "public/a.txt");
    let entry = trash_dir(&server, "me").join(&id);
    // The trashed file's inode stays in use (a second name, outside the trash), so no
    // file planted below can be handed its number.
    std::fs::hard_link(&entry, server.data.parent().unwrap().join("original")).unwrap();
    std::fs::remove_file(&entry).unwrap();
    symlink(&outside, &entry).unwrap();

    let (status, body) = restore(&server, token, &id, None);
    assert_error(status, &body, 409, "changed_meanwhile");
    assert!(
        std::fs::symlink_metadata(public.join("a.txt")).is_err(),
        "nothing restored"
    );
    // Another file in its place (a new inode) is refused the same way.
    let planted = entry.with_file_name("planted");
    std::fs::write(&planted, b"planted").unwrap();
    std::fs::rename(&planted, &entry).unwrap();
    let (status, body) = restore(&server, token, &id, None);
    assert_error(status, &body, 409, "changed_meanwhile");
    // Deleting it forever removes what is there, never what a link points at.
    std::fs::remove_file(&entry).unwrap();
    symlink(&outside, &entry).unwrap();
    assert_eq!(purge(&server, token, &id).0, 204);
    assert_eq!(std::fs::read(&outside).unwrap(), b"not the person's");
    assert!(std::fs::symlink_metadata(&entry).is_err());

    // The person's trash folder itself swapped for a link: nothing moves either way.
    assert_eq!(upload(&server, token, "b.txt", b"bee", None).0, 201);
    let id = deleted(&server, token, "public/b.txt");
    let elsewhere = server.data.parent().unwrap().join("elsewhere");
    std::fs::rename(trash_dir(&server, "me"), &elsewhere).unwrap();
    symlink(&elsewhere, trash_dir(&server, "me")).unwrap();
    let (status, body) = restore(&server, token, &id, None);
    assert_error(status, &body, 400, "path_escapes");
    assert!(elsewhere.join(&id).is_file() && !public.join("b.txt").exists());
    assert_eq!(upload(&server, token, "c.txt", b"sea", None).0, 201);
    let (status, id, body) = delete(&server, token, &[("path", "public/c.txt")]);
    assert_error(status, &body, 400, "path_escapes");
    assert_eq!(id, None);
    assert_eq!(std::fs::read(public.join("c.txt")).unwrap(), b"sea");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);
}

#[test]
fn another_persons_trash_and_spelled_out_ids_are_not_found() {
    let server = Server::start();
    let token = &server.token;
    let bob = server.add_person("bob");
    assert_eq!(upload(&server, token, "a.txt", b"mine", None).0, 201);
    let id = deleted(&server, token, "public/a.txt");

    assert_eq!(trash(&server, &bob)["entries"], json!([]));
    let (status, body) = restore(&server, &bob, &id, None);
    assert_error(status, &body, 404, "not_found");
    let (status, body) = purge(&server, &bob, &id);
    assert_error(status, &body, 404, "not_found");
    assert!(trash_dir(&server, "me").join(&id).is_file());

    // Ids that are not ids: traversal, other spellings, another length.
    let upper = id.to_uppercase();
    let short = &id[..31];
    let long = format!("{id}a");
    let spellings = [
        "..%2F..%2Fhome%2Fme%2Fpublic",
        "..",
        "%2e%2e",
        upper.as_str(),
        short,
        long.as_str(),
        "a%00",
        "../../../../etc/passwd",
    ];
    for bad in spellings {
        let (status, body) = restore(&server, token, bad, None);
        assert!(status == 404 || status == 405, "{bad}: {status} {body}");
        let (status, body) = purge(&server, token, bad);
        assert!(status == 404 || status == 405, "{bad}: {status} {body}");
    }
    assert!(trash_dir(&server, "me").join(&id).is_file());
    assert!(server.home("me").join("public").is_dir());
    // Unauthenticated: 401.
    let response = client().get(server.url("/v1/trash")).send().unwrap();
    assert_eq!(response.status().as_u16(), 401);
}

#[test]
fn a_project_delete_is_restored_into_the_project() {
    let server = Server::start();
    let token = &server.token;
    create_project(&server, token, "p1");
    assert_eq!(upload(&server, token, "in-p.txt", b"p", Some("p1")).0, 201);
    let (status, id, body) = delete(
        &server,
        token,
        &[("path", "public/in-p.txt"), ("project", "p1")],
    );
    assert_eq!(status, 204, "{body}");
    let id = id.unwrap();
    let listed = trash(&server, token);
    assert_eq!(listed["entries"][0]["project"], "p1");
    let (status, body) = restore(&server, token, &id, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["project"], "p1");
    let project_public = server.workspace("me", Some("p1")).join("public");
    assert_eq!(
        std::fs::read(project_public.join("in-p.txt")).unwrap(),
        b"p"
    );
    assert!(!server.home("me").join("public/in-p.txt").exists());

    // The system's folders are refused as before, and leave no record.
    for path in ["public/attachments", "public"] {
        let (status, _, body) = delete(&server, token, &[("path", path)]);
        assert_error(status, &body, 403, "managed_by_system");
    }
    let (status, _, body) = delete(&server, token, &[("path", "public/none.txt")]);
    assert_error(status, &body, 404, "not_found");
    assert_eq!(trash(&server, token)["entries"], json!([]));
}

#[test]
fn expired_entries_are_swept_at_start() {
    // Kept no days: an entry is over at once, no longer listed, and swept at the next start.
    let mut server = Server::start_with_env(&[("FERRY_FILES__TRASH_DAYS", "0")]);
    let token = server.token.clone();
    assert_eq!(upload(&server, &token, "a.txt", b"a", None).0, 201);
    let id = deleted(&server, &token, "public/a.txt");
    assert_eq!(trash(&server, &token)["entries"], json!([]));
    let (status, body) = restore(&server, &token, &id, None);
    assert_error(status, &body, 404, "not_found");
    // The sweep the gateway started with may come after the delete (it runs beside the
    // first requests) and take it already; at the latest, the next start's does.
    server.restart();
    let entry = trash_dir(&server, "me").join(&id);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while entry.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!entry.exists(), "the sweep at start removed it");
}

/// A chain of `depth` folders named `d` under `top`, made one level at a time through
/// descriptors (as an agent's `mkdir -p` and moves can), with a file at the bottom.
fn deep_chain(top: &std::path::Path, depth: usize) {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    std::fs::create_dir_all(top).unwrap();
    let mut fd: std::os::fd::OwnedFd = std::fs::File::open(top).unwrap().into();
    for _ in 0..depth {
        mkdirat(&fd, "d", Mode::from_raw_mode(0o700)).unwrap();
        fd = openat(&fd, "d", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
    }
    let file = openat(
        &fd,
        "f.txt",
        OFlags::WRONLY | OFlags::CREATE,
        Mode::from_raw_mode(0o600),
    )
    .unwrap();
    drop(file);
}

#[test]
fn a_folder_thousands_of_levels_deep_is_deleted_without_taking_the_gateway_down() {
    // Deep enough that a recursive removal overflowed a worker thread's stack and ended
    // the whole process, and would again at every start once the trash entry expired.
    let mut server = Server::start_with_env(&[("FERRY_FILES__TRASH_DAYS", "0")]);
    let token = server.token.clone();
    let public = server.workspace("me", None).join("public");
    deep_chain(&public.join("forever"), 5000);
    deep_chain(&public.join("trashed"), 5000);

    let (status, id, body) = delete(
        &server,
        &token,
        &[("path", "public/forever"), ("forever", "true")],
    );
    assert_eq!((status, id), (204, None), "{body}");
    assert!(!public.join("forever").exists());
    support::assert_alive(&mut server);

    // Into the trash, kept no days: the sweep at the next start removes it, and the
    // gateway still starts and answers.
    deleted(&server, &token, "public/trashed");
    server.restart();
    let trash_of_me = trash_dir(&server, "me");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_dir(&trash_of_me).unwrap().count() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweep at start removed the deep entry; log:\n{}",
            server.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    support::assert_alive(&mut server);
    assert_eq!(trash(&server, &token)["entries"], json!([]));
}
