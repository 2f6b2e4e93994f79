//! The audit trail (spec scale S-OPS) of the member routes a file can leave by: share
//! links, folder downloads, deletes for good; and of refused requests naming huge paths.

mod support;

use serde_json::{Value, json};
use support::{Server, client, get_json, post_json, upload};

/// The caller's records, newest first.
fn records(server: &Server) -> Vec<Value> {
    let (status, page) = get_json(&server.url("/v1/audit?limit=1000"), &server.token);
    assert_eq!(status, 200, "{page}");
    page["records"].as_array().unwrap().clone()
}

#[test]
fn share_links_folder_downloads_and_deletes_for_good_are_recorded() {
    let server = Server::start();
    let (status, _) = upload(&server, &server.token, "shared.txt", b"for a link\n", None);
    assert_eq!(status, 201);
    let (status, share) = post_json(
        &server,
        &server.token,
        "/v1/shares",
        &json!({"path": "public/shared.txt", "expiresInSecs": 3600}),
    );
    assert_eq!(status, 201, "{share}");
    // Fetched through the link, with no token: recorded as the maker's file, kind share.
    let fetched = client()
        .get(server.url(share["url"].as_str().unwrap()))
        .send()
        .unwrap();
    assert_eq!(fetched.status().as_u16(), 200);
    let bad = client()
        .get(server.url(&format!(
            "/s/{}?sig={}",
            share["id"].as_str().unwrap(),
            "0".repeat(64)
        )))
        .send()
        .unwrap();
    assert_eq!(bad.status().as_u16(), 404);
    // The folder as a zip.
    let zipped = client()
        .get(server.url("/v1/files/archive?path=public"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(zipped.status().as_u16(), 200);
    let _ = zipped.bytes();
    // Deleted into the trash, then for good.
    let deleted = client()
        .delete(server.url("/v1/files?path=public/shared.txt"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    let id = deleted.headers()["ferry-trash-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let purged = client()
        .delete(server.url(&format!("/v1/trash/{id}")))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(purged.status().as_u16(), 204);

    let all = records(&server);
    let find = |action: &str, kind: &str| {
        all.iter()
            .filter(|r| r["action"] == action && r["tokenKind"] == kind)
            .collect::<Vec<_>>()
    };
    let through_link = find("download", "share");
    assert_eq!(through_link.len(), 1, "{all:#?}");
    assert_eq!(through_link[0]["path"], "public/shared.txt");
    assert_eq!(through_link[0]["size"], 11);
    let folder = find("download", "admin");
    assert_eq!(folder.len(), 1, "{all:#?}");
    assert_eq!(folder[0]["path"], "public");
    let deletes = find("delete", "admin");
    assert_eq!(deletes.len(), 2, "into the trash, then for good: {all:#?}");
    assert!(deletes.iter().all(|r| r["path"] == "public/shared.txt"));
    assert!(all.iter().all(|r| r["outcome"] == "ok"), "{all:#?}");
}

#[test]
fn a_refused_move_of_a_huge_path_is_recorded_cut_to_the_limit() {
    let server = Server::start();
    let huge = format!("public/{}", "B".repeat(200_000));
    let (status, body) = post_json(
        &server,
        &server.token,
        "/v1/files/move",
        &json!({"from": huge, "to": huge}),
    );
    assert_eq!(status, 400, "{body}");
    let all = records(&server);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["action"], "move");
    assert_eq!(all[0]["outcome"], body["error"]["code"]);
    assert_eq!(all[0]["path"].as_str().unwrap().len(), 4096);
    assert_eq!(all[0]["to"].as_str().unwrap().len(), 4096);
}

/// A download is recorded with the bytes its answer carries (a range's, none when the
/// range is refused), and a resumable upload with the kind of the token that completed it.
#[test]
fn ranged_downloads_and_resumable_uploads_are_recorded_as_they_were() {
    let server = Server::start();
    let (status, _) = upload(&server, &server.token, "ranged.txt", b"0123456789A", None);
    assert_eq!(status, 201);
    let person = support::last_line(&server.ferry(&["token", "create", "me", "--kind", "person"]));
    for (range, expected) in [
        (None, 206u16),
        (Some("bytes=2-5"), 206),
        (Some("bytes=50-60"), 416),
    ] {
        let mut request = client()
            .get(server.url("/v1/files/content?path=public/ranged.txt"))
            .bearer_auth(&person);
        if let Some(range) = range {
            request = request.header("Range", range);
        }
        let answer = request.send().unwrap();
        let expected = if range.is_none() { 200 } else { expected };
        assert_eq!(answer.status().as_u16(), expected, "{range:?}");
    }
    // A resumable upload of 5 bytes, created and completed with the person token.
    let created = client()
        .post(server.url("/v1/uploads"))
        .bearer_auth(&person)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Length", "5")
        .header(
            "Upload-Metadata",
            format!("filename {}", data_encoding::BASE64.encode(b"tus.txt")),
        )
        .send()
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let at = created.headers()["location"].to_str().unwrap().to_owned();
    let patched = client()
        .patch(server.url(&at))
        .bearer_auth(&person)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Offset", "0")
        .header("Content-Type", "application/offset+octet-stream")
        .body("hello")
        .send()
        .unwrap();
    assert_eq!(patched.status().as_u16(), 204);

    let all = records(&server);
    let downloads: Vec<_> = all
        .iter()
        .filter(|r| r["action"] == "download" && r["path"] == "public/ranged.txt")
        .collect();
    // Newest first: the refused range, the range, the whole file.
    assert_eq!(downloads.len(), 3, "{all:#?}");
    assert_eq!(downloads[0]["outcome"], "range_not_satisfiable", "{all:#?}");
    assert_eq!(downloads[1]["size"], 4);
    assert_eq!(downloads[2]["size"], 11);
    assert!(downloads.iter().all(|r| r["tokenKind"] == "person"));
    let resumable: Vec<_> = all
        .iter()
        .filter(|r| r["action"] == "upload" && r["path"] == "public/tus.txt")
        .collect();
    assert_eq!(resumable.len(), 1, "{all:#?}");
    assert_eq!(resumable[0]["tokenKind"], "person");
    assert_eq!(resumable[0]["size"], 5);
}
