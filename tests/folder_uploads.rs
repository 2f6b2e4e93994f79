//! `POST /v1/media` with a `folder` field (spec members M-DAILY "Uploads into a folder"):
//! the file lands in an existing folder of `public/`, under M-UP's rules (C-NAME,
//! `overwrite=false`, the allowlist), and never in `public/attachments`, outside
//! `public/`, or through a link.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use support::{
    Server, assert_alive, assert_error, assert_no_temporaries, create_project, multipart,
};

const BOUNDARY: &str = "ferry-folder-boundary-41a2";

fn post(server: &Server, query: &str, parts: &[(&str, Option<&str>, &[u8])]) -> (u16, Value) {
    let response = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
        .post(server.url(&format!("/v1/media{query}")))
        .bearer_auth(&server.token)
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(multipart(BOUNDARY, parts))
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// Uploads `name` holding `bytes` with `folder`, the folder field before the file or after it.
fn into_folder(
    server: &Server,
    folder: &str,
    name: &str,
    bytes: &[u8],
    folder_first: bool,
) -> (u16, Value) {
    let folder_part = ("folder", None, folder.as_bytes());
    let file_part = ("file", Some(name), bytes);
    let parts = match folder_first {
        true => vec![folder_part, file_part],
        false => vec![file_part, folder_part],
    };
    post(server, "", &parts)
}

fn public(server: &Server) -> PathBuf {
    server.home("me").join("public")
}

/// Every file under the data dir outside `.ferry/`: what "nothing was written" compares.
fn files(server: &Server) -> Vec<String> {
    support::tree(&server.data)
        .into_iter()
        .filter(|rel| !rel.starts_with(".ferry") && !server.data.join(rel).is_dir())
        .collect()
}

#[test]
fn a_file_lands_in_the_folder_named_in_either_order_and_in_a_project() {
    let mut server = Server::start();
    std::fs::create_dir_all(public(&server).join("reports/2026 Q2")).unwrap();
    for (folder_first, name) in [(true, "first.txt"), (false, "second.txt")] {
        let (status, answer) = into_folder(&server, "public/reports", name, b"hi", folder_first);
        assert_eq!(status, 201, "{answer}");
        assert_eq!(answer["path"], format!("public/reports/{name}"));
        assert_eq!(
            std::fs::read(public(&server).join("reports").join(name)).unwrap(),
            b"hi"
        );
        assert!(!public(&server).join(name).exists(), "also in public/");
    }
    // Nested, with a name people type, a trailing slash, and `public` itself.
    let (status, answer) = into_folder(&server, "public/reports/2026 Q2/", "n.md", b"n", true);
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["path"], "public/reports/2026 Q2/n.md");
    let (status, answer) = into_folder(&server, "public", "root.md", b"r", false);
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["path"], "public/root.md");

    // A project's folder: the project and the folder in any order around the file.
    create_project(&server, &server.token, "q2");
    let project_public = server.home("me").join("projects/q2/public");
    std::fs::create_dir_all(project_public.join("drafts")).unwrap();
    let orders: [[usize; 3]; 3] = [[0, 1, 2], [2, 1, 0], [1, 2, 0]];
    for (i, order) in orders.iter().enumerate() {
        let name = format!("p{i}.txt");
        let all = [
            ("project", None, &b"q2"[..]),
            ("folder", None, &b"public/drafts"[..]),
            ("file", Some(name.as_str()), &b"in the project"[..]),
        ];
        let parts: Vec<_> = order.iter().map(|&k| all[k]).collect();
        let (status, answer) = post(&server, "", &parts);
        assert_eq!(status, 201, "{order:?}: {answer}");
        assert_eq!(answer["path"], format!("public/drafts/{name}"));
        assert_eq!(answer["project"], "q2");
        assert_eq!(
            std::fs::read(project_public.join("drafts").join(&name)).unwrap(),
            b"in the project"
        );
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn the_placement_rules_stand_in_a_folder() {
    let mut server = Server::start();
    let reports = public(&server).join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::write(reports.join("a.txt"), "old").unwrap();
    // A file of the same name in public/ itself is not the one asked about.
    std::fs::write(public(&server).join("b.txt"), "elsewhere").unwrap();

    for folder_first in [true, false] {
        let parts_for = |name: &'static str| {
            let f = ("folder", None, &b"public/reports"[..]);
            let file = ("file", Some(name), &b"new!"[..]);
            match folder_first {
                true => vec![f, file],
                false => vec![file, f],
            }
        };
        let (status, refused) = post(&server, "?overwrite=false", &parts_for("a.txt"));
        assert_error(status, &refused, 409, "exists");
        assert_eq!(refused["error"]["existing"]["path"], "public/reports/a.txt");
        assert_eq!(refused["error"]["existing"]["size"], 3);
        assert_eq!(std::fs::read(reports.join("a.txt")).unwrap(), b"old");
        let (status, placed) = post(&server, "?overwrite=false", &parts_for("b.txt"));
        assert_eq!(status, 201, "{placed}");
        std::fs::remove_file(reports.join("b.txt")).unwrap();
    }
    let (status, replaced) = into_folder(&server, "public/reports", "a.txt", b"replaced", true);
    assert_eq!(status, 201, "{replaced}");
    assert_eq!(std::fs::read(reports.join("a.txt")).unwrap(), b"replaced");

    let (status, renamed) =
        into_folder(&server, "public/reports", "../Q2 (final)?.txt", b"q", true);
    assert_eq!(status, 201, "{renamed}");
    assert_eq!(renamed["renamedFrom"], "../Q2 (final)?.txt");
    let path = renamed["path"].as_str().unwrap();
    assert!(path.starts_with("public/reports/Q2"), "{path}");
    assert!(!path.contains(".."), "{path}");

    let (status, refused) = into_folder(&server, "public/reports", "tool.exe", b"MZ", true);
    assert_error(status, &refused, 400, "extension_not_allowed");
    assert!(!reports.join("tool.exe").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn missing_managed_and_outside_folders_are_refused_and_write_nothing() {
    let mut server = Server::start();
    std::fs::create_dir_all(public(&server).join("attachments/sub")).unwrap();
    std::fs::write(public(&server).join("plain.txt"), "a file").unwrap();
    let before = files(&server);
    let cases: &[(&str, u16, &str)] = &[
        ("public/nowhere", 404, "folder_not_found"),
        ("public/nowhere/deeper", 404, "folder_not_found"),
        ("public/attachments", 403, "managed_by_system"),
        ("public/attachments/", 403, "managed_by_system"),
        ("public/./attachments", 403, "managed_by_system"),
        ("public/attachments/sub", 403, "managed_by_system"),
        ("public/plain.txt", 400, "not_a_directory"),
        ("public/../public/x", 400, "path_escapes"),
        ("public/reports/../../..", 400, "path_escapes"),
        ("/etc", 400, "path_escapes"),
        ("..", 400, "path_escapes"),
        ("uploads", 404, "not_found"),
        ("home/me/public", 404, "not_found"),
        ("", 400, "bad_path"),
        ("public/a\0b", 400, "bad_path"),
    ];
    for (folder, status_wanted, code) in cases {
        for folder_first in [true, false] {
            let (status, answer) = into_folder(&server, folder, "x.txt", b"x", folder_first);
            assert_eq!(
                (status, support::error_code(&answer)),
                (*status_wanted, *code),
                "{folder:?} first={folder_first}: {answer}"
            );
        }
    }
    // Sent twice, or over its length.
    let twice = [
        ("folder", None, &b"public"[..]),
        ("folder", None, &b"public"[..]),
        ("file", Some("x.txt"), &b"x"[..]),
    ];
    let (status, answer) = post(&server, "", &twice);
    assert_error(status, &answer, 400, "duplicate_field");
    assert_eq!(files(&server), before, "something was written");
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn the_folder_field_is_held_to_its_length_at_the_edges() {
    let mut server = Server::start();
    let max = ferry_config::limits::FOLDER_FIELD_MAX_BYTES;
    // `public/` and then `a/` components up to the length wanted (a last `a` when odd).
    let folder_of = |len: usize| {
        let mut folder = String::from("public");
        while folder.len() + 2 <= len {
            folder.push_str("/a");
        }
        if folder.len() < len {
            folder.push('/');
        }
        assert_eq!(folder.len(), len);
        folder
    };
    // Within the limit, the folder is looked for (and is not there); past it, refused
    // before it is looked at.
    for (len, status_wanted, code) in [
        (max - 1, 404, "folder_not_found"),
        (max, 404, "folder_not_found"),
        (max + 1, 400, "field_too_large"),
    ] {
        let (status, answer) = into_folder(&server, &folder_of(len), "x.txt", b"x", true);
        assert_eq!(
            (status, support::error_code(&answer)),
            (status_wanted, code),
            "{len}: {answer}"
        );
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn a_folder_reached_through_a_link_is_path_escapes_and_nothing_lands_beyond_it() {
    let mut server = Server::start();
    let outside = tempfile::tempdir().unwrap();
    let public = public(&server);
    std::fs::create_dir_all(public.join("real/inner")).unwrap();
    // A link to a folder outside, one to a folder inside public/, and a link as an inner
    // component of the path.
    std::os::unix::fs::symlink(outside.path(), public.join("out")).unwrap();
    std::os::unix::fs::symlink(public.join("real"), public.join("inside")).unwrap();
    for folder in ["public/out", "public/inside", "public/inside/inner"] {
        for folder_first in [true, false] {
            let (status, answer) = into_folder(&server, folder, "x.txt", b"x", folder_first);
            assert_error(status, &answer, 400, "path_escapes");
        }
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!public.join("real/x.txt").exists());
    assert!(!public.join("real/inner/x.txt").exists());

    // A real folder at the same name is used.
    std::fs::remove_file(public.join("out")).unwrap();
    std::fs::create_dir(public.join("out")).unwrap();
    let (status, answer) = into_folder(&server, "public/out", "ok.txt", b"ok", false);
    assert_eq!(status, 201, "{answer}");
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn an_upload_into_a_folder_counts_against_the_quota_at_the_byte() {
    let quota: u64 = 100_000;
    let mut server =
        Server::start_with_env(&[("FERRY_LIMITS__PERSON_MAX_BYTES", quota.to_string().as_str())]);
    let reports = public(&server).join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    support::write_file(&public(&server).join("filler.txt"), vec![b'f'; 60_000]);
    // 40,000 bytes are left: one byte under, then exactly at, then one over.
    let (status, body) = into_folder(&server, "public/reports", "a.txt", &[b'a'; 39_999], true);
    assert_eq!(status, 201, "quota − 1: {body}");
    let (status, body) = into_folder(&server, "public/reports", "b.txt", b"b", false);
    assert_eq!(status, 201, "at the quota: {body}");
    let (status, body) = into_folder(&server, "public/reports", "c.txt", b"c", true);
    assert_error(status, &body, 507, "quota_exceeded");
    assert!(!reports.join("c.txt").exists(), "nothing is written");
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}
