//! Disk full and disk errors (issue 15, core C-ATOMIC).
//!
//! Full: a tmpfs of a few MiB, mounted over the folder a write goes to, fills for real
//! while an upload, a resumable part, a delivery, a tool's write and a tool's two-file
//! edit run (the node fetch and push are in `node_transfers.rs`). Each is answered
//! `507 insufficient_storage` (a tool error with that code over MCP), keeps the file that
//! was there, leaves no temporary, and gives the space back: a write that fits then
//! lands. The upload is also tried at the disk's own limit: the free bytes exactly, and
//! one byte more.
//!
//! Errors: the fsyncs of `ferry serve` and of `ferry mcp` go through the test
//! (`support::faults`), which answers `EIO` for the person's files, as a disk that lost
//! a write does. The upload is `500 io_error` and the tool call an `io_error`, the
//! previous file stays, and no temporary is left.

mod support;

use serde_json::{Value, json};
use support::faults;
use support::mcp_stdio::McpProcess;
use support::tmpfs::Tmpfs;
use support::{
    Options, Peer, Reply, Server, assert_error, client, json_answer, temporaries, upload,
};

const MIB: u64 = 1024 * 1024;

/// The size of each test's small disk.
const DISK: u64 = 4 * MIB;

/// `n` bytes that tell one write from another: `tag` repeated.
fn bytes(n: u64, tag: u8) -> Vec<u8> {
    vec![tag; n as usize]
}

/// A server whose person `me` has a small disk mounted over `public/`.
fn server_with_a_small_public() -> (Server, Tmpfs) {
    let server = Server::start();
    let disk = Tmpfs::mount(&server.home("me").join("public"), DISK);
    (server, disk)
}

#[track_caller]
fn assert_no_temporaries_in(dir: &std::path::Path) {
    let left = temporaries(dir);
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

#[test]
fn an_upload_past_the_free_space_is_refused_and_the_old_file_stays() {
    let (server, disk) = server_with_a_small_public();
    let public = server.home("me").join("public");
    let old = bytes(MIB, b'o');
    let (status, body) = upload(&server, &server.token, "keep.txt", &old, None);
    assert_eq!(status, 201, "{body}");

    // One byte past what the disk holds: refused, and nothing of it is left.
    let free = disk.available();
    let (status, body) = upload(
        &server,
        &server.token,
        "keep.txt",
        &bytes(free + 1, b'n'),
        None,
    );
    assert_error(status, &body, 507, "insufficient_storage");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("full"),
        "{body}"
    );
    assert_eq!(std::fs::read(public.join("keep.txt")).unwrap(), old);
    assert_no_temporaries_in(&public);
    assert_eq!(
        disk.available(),
        free,
        "the refused upload gave its space back"
    );

    // Exactly what the disk holds: it lands.
    let new = bytes(free, b'n');
    let (status, body) = upload(&server, &server.token, "keep.txt", &new, None);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["size"], free);
    assert_eq!(std::fs::read(public.join("keep.txt")).unwrap(), new);

    // And one byte less than what is free after it.
    let free = disk.available();
    let (status, body) = upload(
        &server,
        &server.token,
        "less.txt",
        &bytes(free - 1, b'l'),
        None,
    );
    assert_eq!(status, 201, "{body}");
    assert_no_temporaries_in(&public);
}

#[test]
fn a_delivery_that_fills_the_disk_is_refused_and_the_old_attachment_stays() {
    let (server, _disk) = server_with_a_small_public();
    let harness = server.create_token("me", "harness");
    let attachments = server.home("me").join("public").join("attachments");
    let peer = Peer::start(|path| match path {
        "/small" => Reply::ok(bytes(MIB, b'o')),
        "/big" => Reply::ok(bytes(2 * DISK, b'b')),
        _ => Reply::ok(bytes(MIB / 2, b'f')),
    });
    let deliver = |path: &str| -> (u16, Value) {
        json_answer(
            client()
                .post(server.url("/v1/deliveries"))
                .bearer_auth(&harness)
                .json(&json!({"url": peer.url(path), "filename": "report.bin"}))
                .send()
                .unwrap(),
        )
    };
    let (status, body) = deliver("/small");
    assert_eq!(status, 201, "{body}");

    let (status, body) = deliver("/big");
    assert_error(status, &body, 507, "insufficient_storage");
    assert_eq!(
        std::fs::read(attachments.join("report.bin")).unwrap(),
        bytes(MIB, b'o')
    );
    assert_no_temporaries_in(&attachments);

    let (status, body) = deliver("/fits");
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        std::fs::read(attachments.join("report.bin")).unwrap(),
        bytes(MIB / 2, b'f')
    );
}

/// A tool result's error code (`structuredContent.error.code`), if it is an error.
fn tool_error_code(result: &Value) -> Option<&str> {
    (result["isError"] == true).then(|| {
        result["structuredContent"]["error"]["code"]
            .as_str()
            .unwrap_or_default()
    })
}

#[test]
fn a_tool_write_or_edit_that_fills_the_disk_fails_and_changes_nothing() {
    let (server, disk) = server_with_a_small_public();
    let public = server.home("me").join("public");
    let line = "an unchanged line of the file\n";
    let text = |counter: u64, size: u64| -> String {
        let mut t = format!("counter: {counter}\n");
        while (t.len() as u64) < size {
            t.push_str(line);
        }
        t
    };
    // Two files of 0.75 MiB: an edit of both needs 1.5 MiB more while it runs, and a
    // filler leaves 1 MiB free: room for the first file's new version, not the second's.
    let (a, b) = (public.join("a.txt"), public.join("b.txt"));
    std::fs::write(&a, text(0, 3 * MIB / 4)).unwrap();
    std::fs::write(&b, text(0, 3 * MIB / 4)).unwrap();
    let filler = disk.available() - MIB;
    std::fs::write(public.join("filler"), bytes(filler, b'f')).unwrap();
    let (before_a, before_b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

    let mut mcp = McpProcess::start(&server.data);
    let edits: Vec<Value> = ["public/a.txt", "public/b.txt"]
        .iter()
        .map(|p| json!({"path": p, "oldText": "counter: 0\n", "newText": "counter: 1\n"}))
        .collect();
    let edited = mcp.call("file_edit", json!({"edits": edits})).unwrap();
    assert_eq!(
        tool_error_code(&edited),
        Some("insufficient_storage"),
        "{edited}"
    );
    assert_eq!(std::fs::read(&a).unwrap(), before_a, "a.txt changed");
    assert_eq!(std::fs::read(&b).unwrap(), before_b, "b.txt changed");
    assert_no_temporaries_in(&public);

    let written = mcp
        .call(
            "file_write",
            json!({"path": "public/a.txt", "content": text(7, 2 * MIB)}),
        )
        .unwrap();
    assert_eq!(
        tool_error_code(&written),
        Some("insufficient_storage"),
        "{written}"
    );
    assert_eq!(std::fs::read(&a).unwrap(), before_a, "a.txt changed");
    assert_no_temporaries_in(&public);

    // A refused write takes back the folders it made on the way, and only those.
    std::fs::create_dir(public.join("kept")).unwrap();
    let written = mcp
        .call(
            "file_write",
            json!({"path": "public/kept/new/deeper/c.txt", "content": text(7, 2 * MIB)}),
        )
        .unwrap();
    assert_eq!(
        tool_error_code(&written),
        Some("insufficient_storage"),
        "{written}"
    );
    assert!(
        !public.join("kept/new").exists(),
        "the refused write left the folders it made"
    );
    assert!(public.join("kept").is_dir(), "a folder that was there went");

    // With the filler gone, the same edit lands in both files.
    std::fs::remove_file(public.join("filler")).unwrap();
    let edits: Vec<Value> = ["public/a.txt", "public/b.txt"]
        .iter()
        .map(|p| json!({"path": p, "oldText": "counter: 0\n", "newText": "counter: 1\n"}))
        .collect();
    let edited = mcp.call("file_edit", json!({"edits": edits})).unwrap();
    assert_eq!(tool_error_code(&edited), None, "{edited}");
    for path in [&a, &b] {
        assert!(
            std::fs::read_to_string(path)
                .unwrap()
                .starts_with("counter: 1\n")
        );
    }
}

#[test]
fn a_resumable_part_that_fills_the_disk_is_refused_and_the_upload_resumes_once_there_is_room() {
    let (server, _disk) = server_with_a_small_public();
    let public = server.home("me").join("public");
    std::fs::write(public.join("filler"), bytes(2 * MIB, b'f')).unwrap();
    let content: Vec<u8> = (0..3 * MIB).map(|i| (i % 251) as u8).collect();
    let tus = |request: reqwest::blocking::RequestBuilder| {
        request
            .bearer_auth(&server.token)
            .header("Tus-Resumable", "1.0.0")
            .send()
            .unwrap()
    };
    let created = tus(client()
        .post(server.url("/v1/uploads"))
        .header("Upload-Length", content.len().to_string())
        .header("Upload-Metadata", "filename YmlnLnR4dA==")); // big.txt
    assert_eq!(created.status().as_u16(), 201);
    let at = created.headers()["location"].to_str().unwrap().to_owned();
    let patch = |offset: usize| {
        tus(client()
            .patch(server.url(&at))
            .header("Upload-Offset", offset.to_string())
            .header("Content-Type", "application/offset+octet-stream")
            .body(content[offset..].to_vec()))
    };
    let offset = || -> usize {
        let head = tus(client().head(server.url(&at)));
        head.headers()["upload-offset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };

    let (status, body) = json_answer(patch(0));
    assert_error(status, &body, 507, "insufficient_storage");
    let kept = offset();
    assert!(kept < content.len(), "offset {kept}");
    assert!(!public.join("big.txt").exists());

    // Room again: the upload goes on from where it stopped, and lands whole.
    std::fs::remove_file(public.join("filler")).unwrap();
    assert_eq!(patch(kept).status().as_u16(), 204);
    assert_eq!(std::fs::read(public.join("big.txt")).unwrap(), content);
    assert_no_temporaries_in(&public);
}

#[test]
fn a_tool_write_or_edit_whose_fsync_fails_changes_nothing() {
    let server = Server::start();
    let public = server.home("me").join("public");
    std::fs::create_dir_all(&public).unwrap();
    let (a, b) = (public.join("a.txt"), public.join("b.txt"));
    std::fs::write(&a, "counter: 0\nfirst\n").unwrap();
    std::fs::write(&b, "counter: 0\nsecond\n").unwrap();
    let mut cmd = McpProcess::command(&server.data);
    faults::prepare(&mut cmd);
    let mut mcp = McpProcess::launch(cmd);
    let disk = faults::Disk::watch(mcp.child.id(), &public);
    mcp.initialize();

    disk.fail();
    let written = mcp
        .call(
            "file_write",
            json!({"path": "public/a.txt", "content": "new\n"}),
        )
        .unwrap();
    assert_eq!(tool_error_code(&written), Some("io_error"), "{written}");
    let edits: Vec<Value> = ["public/a.txt", "public/b.txt"]
        .iter()
        .map(|p| json!({"path": p, "oldText": "counter: 0\n", "newText": "counter: 1\n"}))
        .collect();
    let edited = mcp
        .call("file_edit", json!({"edits": edits.clone()}))
        .unwrap();
    assert_eq!(tool_error_code(&edited), Some("io_error"), "{edited}");
    assert!(disk.failed() >= 2, "{} fsyncs failed", disk.failed());
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "counter: 0\nfirst\n");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "counter: 0\nsecond\n");
    assert_no_temporaries_in(&public);

    disk.heal();
    let edited = mcp.call("file_edit", json!({"edits": edits})).unwrap();
    assert_eq!(tool_error_code(&edited), None, "{edited}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "counter: 1\nfirst\n");
}

#[test]
fn an_upload_whose_fsync_fails_is_a_clear_error_and_the_old_file_stays() {
    let server = Server::start_with(Options {
        failing_disk: true,
        ..Options::default()
    });
    let public = server.home("me").join("public");
    let (status, body) = upload(&server, &server.token, "keep.txt", b"the old one\n", None);
    assert_eq!(status, 201, "{body}");
    let disk = server.disk.as_ref().unwrap();

    disk.fail();
    let (status, body) = upload(&server, &server.token, "keep.txt", &bytes(MIB, b'n'), None);
    assert_error(status, &body, 500, "io_error");
    // The page is told the server failed; the operator's log says how.
    assert!(disk.failed() >= 1);
    let log = server.log();
    assert!(log.contains("Input/output error"), "{log}");
    assert_eq!(
        std::fs::read(public.join("keep.txt")).unwrap(),
        b"the old one\n"
    );
    assert_no_temporaries_in(&public);

    disk.heal();
    let (status, body) = upload(&server, &server.token, "keep.txt", b"the new one\n", None);
    assert_eq!(status, 201, "{body}");
}
