//! `file.fetch` on real files: exact bytes with a checked body, the size cap at its
//! limits, a file that shrinks mid-read, and what is not a regular file or not allowed.

mod common;

use common::host::{Tree, call, checked_bytes, host, host_of, noise, refused, rules, sha256};
use ferry_codes::Code;
use ferry_node::checked::CheckedReader;
use ferry_node::commands::FetchHead;
use ferry_node::host::NodePolicy;
use serde_json::json;

#[tokio::test]
async fn a_file_comes_whole_with_its_size_and_sha256() {
    let tree = Tree::new();
    let bytes = noise(700_001, 7);
    tree.file("d/data.bin", &bytes);
    let (gateway, _node) = host_of(&tree);
    let response = call(
        &gateway,
        "file.fetch",
        json!({"path": tree.path("d/data.bin"), "maxBytes": 1 << 20}),
    )
    .await
    .unwrap();
    let head: FetchHead = serde_json::from_value(response.result.clone()).unwrap();
    assert_eq!(
        (head.path.as_str(), head.size),
        (tree.path("d/data.bin").as_str(), 700_001)
    );
    let got = checked_bytes(response, 1 << 20).await.unwrap();
    assert_eq!(sha256(&got), sha256(&bytes));
    // An empty file is a body of no bytes.
    tree.file("empty", b"");
    let response = call(
        &gateway,
        "file.fetch",
        json!({"path": tree.path("empty"), "maxBytes": 0}),
    )
    .await
    .unwrap();
    assert!(checked_bytes(response, 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_size_cap_holds_at_its_limit() {
    let tree = Tree::new();
    tree.file("f", &[7u8; 1000]);
    let (gateway, _node) = host_of(&tree);
    for max in [1000u64, 1001] {
        let response = call(
            &gateway,
            "file.fetch",
            json!({"path": tree.path("f"), "maxBytes": max}),
        )
        .await
        .unwrap();
        assert_eq!(checked_bytes(response, max).await.unwrap().len(), 1000);
    }
    let e = call(
        &gateway,
        "file.fetch",
        json!({"path": tree.path("f"), "maxBytes": 999}),
    )
    .await
    .err()
    .unwrap();
    // Refused at the head: not one byte was sent.
    assert_eq!(e.code(), Code::FileTooLarge, "{e}");
}

#[tokio::test]
async fn a_file_that_shrinks_while_it_is_read_never_verifies() {
    let tree = Tree::new();
    tree.file("big", &noise(4 << 20, 3));
    let (gateway, _node) = host_of(&tree);
    let response = call(
        &gateway,
        "file.fetch",
        json!({"path": tree.path("big"), "maxBytes": 8 << 20}),
    )
    .await
    .unwrap();
    // The link's 1 MiB window holds the node back until this side reads.
    std::fs::OpenOptions::new()
        .write(true)
        .open(tree.root.join("big"))
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let mut reader = CheckedReader::new(response.body, 8 << 20);
    let mut got = 0usize;
    let error = loop {
        match reader.next().await {
            Some(Ok(piece)) => got += piece.len(),
            Some(Err(e)) => break e,
            None => panic!("a shrunk file verified after {got} bytes"),
        }
    };
    assert_eq!(error.code(), Code::ChangedMeanwhile, "{error}");
    assert!(got < 4 << 20);
}

#[tokio::test]
async fn only_regular_files_reached_without_links_are_fetched() {
    let tree = Tree::new();
    tree.file("real/f", b"secret");
    tree.link("to-file", "real/f");
    tree.link("to-real", "real");
    tree.link("to-passwd", "/etc/passwd");
    let fifo = tree.root.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let (gateway, _node) = host_of(&tree);
    let fetch = |path: String| json!({"path": path, "maxBytes": 100, "followSymlinks": true});
    for path in [
        tree.path("to-file"),
        tree.path("to-real/f"),
        tree.path("to-passwd"),
    ] {
        let e = call(&gateway, "file.fetch", fetch(path.clone()))
            .await
            .err()
            .unwrap();
        assert_eq!(e.code(), Code::PathDenied, "{path}: {e}");
    }
    for path in [tree.path("real"), tree.path("fifo")] {
        assert_eq!(
            refused(&gateway, "file.fetch", fetch(path.clone())).await,
            Code::NotAFile,
            "{path}"
        );
    }
    assert_eq!(
        refused(&gateway, "file.fetch", fetch(tree.path("nothing"))).await,
        Code::NotFound
    );
    assert_eq!(
        refused(&gateway, "file.fetch", fetch("/etc/passwd".into())).await,
        Code::PathDenied
    );
    assert_eq!(
        refused(&gateway, "file.fetch", fetch("/".into())).await,
        Code::PathDenied
    );
    let dotdot = format!("{}/real/../real/f", tree.path(""));
    for path in [dotdot.as_str(), "real/f", "./f"] {
        assert_eq!(
            refused(&gateway, "file.fetch", fetch(path.into())).await,
            Code::BadPath,
            "{path}"
        );
    }

    // Followed when both sides allow it, and answered with the canonical path.
    let (gateway, _node) = host(NodePolicy {
        rules: rules(
            &[tree.glob()],
            &[],
            &[format!("{}/real/hidden", tree.path(""))],
        ),
        follow_symlinks: true,
    });
    let response = call(&gateway, "file.fetch", fetch(tree.path("to-file")))
        .await
        .unwrap();
    assert_eq!(response.result["path"], tree.path("real/f"));
    assert_eq!(checked_bytes(response, 100).await.unwrap(), b"secret");
    // A link inside the allowed tree to a denied file is refused on the file's path.
    tree.file("real/hidden", b"h");
    tree.link("to-hidden", "real/hidden");
    let e = call(&gateway, "file.fetch", fetch(tree.path("to-hidden")))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), Code::PathDenied);
    assert_eq!(
        refused(&gateway, "file.fetch", fetch(tree.path("to-passwd"))).await,
        Code::PathDenied
    );
    // A link to nothing, followed, finds nothing, and says so.
    tree.link("to-nothing", "real/missing");
    let e = call(&gateway, "file.fetch", fetch(tree.path("to-nothing")))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.to_string().contains("target does not exist"), "{e}");
}

#[tokio::test]
async fn a_link_swapped_in_after_the_check_is_not_followed() {
    // The node resolves once, component by component without links, and uses what it
    // opened: a parent replaced by a link to /etc between two fetches is refused on the
    // second, and never read through.
    let tree = Tree::new();
    tree.file("d/passwd", b"mine");
    let (gateway, _node) = host_of(&tree);
    let args = json!({"path": tree.path("d/passwd"), "maxBytes": 1 << 20});
    let response = call(&gateway, "file.fetch", args.clone()).await.unwrap();
    assert_eq!(checked_bytes(response, 1 << 20).await.unwrap(), b"mine");
    std::fs::rename(tree.root.join("d"), tree.root.join("old")).unwrap();
    tree.link("d", "/etc");
    let e = call(&gateway, "file.fetch", args).await.err().unwrap();
    assert_eq!(e.code(), Code::PathDenied, "{e}");
}

#[tokio::test]
async fn a_fetch_given_up_midway_ends_the_node_s_work() {
    let tree = Tree::new();
    tree.file("big", &noise(4 << 20, 13));
    let (gateway, node) = host_of(&tree);
    let mut response = call(
        &gateway,
        "file.fetch",
        json!({"path": tree.path("big"), "maxBytes": 8 << 20}),
    )
    .await
    .unwrap();
    response.body.next().await.unwrap().unwrap();
    assert_eq!(node.open_streams(), 1);
    drop(response);
    for _ in 0..100 {
        if node.open_streams() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the node still serves {} streams", node.open_streams());
}
