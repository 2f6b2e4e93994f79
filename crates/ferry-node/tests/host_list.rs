//! `dir.list` and `file.stat` on real folders: sorting by bytes, paging at its limits,
//! names that are not UTF-8, and every way of reaching outside what the node allows.

mod common;

use std::os::unix::ffi::OsStrExt;

use common::host::{Tree, call, host, host_of, refused, rules};
use ferry_codes::Code;
use ferry_node::Link;
use ferry_node::commands::{DirListHead, EntryKind, NodeEntry};
use ferry_node::host::NodePolicy;
use serde_json::{Value, json};

/// Lists `path` and gives the head and the entries.
async fn list(link: &Link, args: Value) -> (DirListHead, Vec<NodeEntry>) {
    let mut response = call(link, "dir.list", args).await.unwrap();
    let head: DirListHead = serde_json::from_value(response.result.clone()).unwrap();
    let mut body = Vec::new();
    while let Some(piece) = response.body.next().await {
        body.extend_from_slice(&piece.unwrap());
    }
    let entries: Vec<NodeEntry> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(entries.len() as u32, head.count);
    (head, entries)
}

fn names(entries: &[NodeEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.name.as_str()).collect()
}

#[tokio::test]
async fn a_folder_is_listed_sorted_by_bytes_with_kinds_sizes_and_modes() {
    let tree = Tree::new();
    tree.file("b.txt", b"12345");
    tree.file("B.txt", b"1");
    tree.file("é.txt", b"");
    tree.dir("a");
    tree.link("link", "/etc");
    std::fs::set_permissions(
        tree.root.join("b.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    let (gateway, _node) = host_of(&tree);
    let (head, entries) = list(&gateway, json!({"path": tree.path(""), "limit": 10})).await;
    assert_eq!(head.path, tree.path(""));
    assert!(!head.more);
    assert_eq!(names(&entries), ["B.txt", "a", "b.txt", "link", "é.txt"]);
    let b = &entries[2];
    assert_eq!((b.kind, b.size, b.mode), (EntryKind::File, 5, 0o640));
    assert!(b.mtime > 1_600_000_000);
    assert_eq!(entries[1].kind, EntryKind::Dir);
    // The link is shown as a link, never followed.
    assert_eq!((entries[3].kind, entries[3].size), (EntryKind::Symlink, 0));
}

#[tokio::test]
async fn pages_start_after_the_last_name_and_say_whether_more_remain() {
    let tree = Tree::new();
    for i in 0..5 {
        tree.file(&format!("f{i}"), b"x");
    }
    let (gateway, _node) = host_of(&tree);
    let path = tree.path("");
    let (head, entries) = list(&gateway, json!({"path": path, "limit": 2})).await;
    assert_eq!((names(&entries), head.more), (vec!["f0", "f1"], true));
    let (head, entries) = list(&gateway, json!({"path": path, "limit": 2, "after": "f1"})).await;
    assert_eq!((names(&entries), head.more), (vec!["f2", "f3"], true));
    // Exactly the last entry left: no more after it.
    let (head, entries) = list(&gateway, json!({"path": path, "limit": 1, "after": "f3"})).await;
    assert_eq!((names(&entries), head.more), (vec!["f4"], false));
    let (head, entries) = list(&gateway, json!({"path": path, "limit": 2, "after": "f4"})).await;
    assert_eq!((entries.len(), head.more), (0, false));
    // A name between two is a fine place to start.
    let (_, entries) = list(&gateway, json!({"path": path, "limit": 9, "after": "f2a"})).await;
    assert_eq!(names(&entries), ["f3", "f4"]);
}

#[tokio::test]
async fn a_page_holds_at_most_5000_entries() {
    let tree = Tree::new();
    for i in 0..5001 {
        std::fs::File::create(tree.root.join(format!("n{i:05}"))).unwrap();
    }
    let (gateway, _node) = host_of(&tree);
    let path = tree.path("");
    let (head, entries) = list(&gateway, json!({"path": path, "limit": 4999})).await;
    assert_eq!((entries.len(), head.more), (4999, true));
    let (head, entries) = list(&gateway, json!({"path": path, "limit": 5000})).await;
    assert_eq!((entries.len(), head.more), (5000, true));
    assert_eq!(entries[4999].name, "n04999");
    let code = refused(&gateway, "dir.list", json!({"path": path, "limit": 5001})).await;
    assert_eq!(code, Code::InvalidArguments);
}

#[tokio::test]
async fn names_that_are_not_utf8_are_counted_not_shown() {
    let tree = Tree::new();
    tree.file("plain", b"");
    let raw = std::ffi::OsStr::from_bytes(b"caf\xe9");
    std::fs::write(tree.root.join(raw), b"").unwrap();
    let (gateway, _node) = host_of(&tree);
    let (head, entries) = list(&gateway, json!({"path": tree.path(""), "limit": 10})).await;
    assert_eq!(names(&entries), ["plain"]);
    assert_eq!(head.unlisted, 1);
}

#[tokio::test]
async fn links_on_the_way_are_refused_unless_both_sides_follow() {
    let tree = Tree::new();
    tree.file("real/inside.txt", b"x");
    tree.link("to-real", "real");
    tree.link("to-etc", "/etc");
    let (gateway, _node) = host_of(&tree);
    // The link as the folder listed, and as a parent of it.
    for path in [tree.path("to-real"), tree.path("to-etc")] {
        let e = call(
            &gateway,
            "dir.list",
            json!({"path": path, "limit": 5, "followSymlinks": true}),
        )
        .await
        .err()
        .unwrap();
        assert_eq!(e.code(), Code::PathDenied, "{path}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }
    tree.dir("real/sub");
    let code = refused(
        &gateway,
        "dir.list",
        json!({"path": tree.path("to-real/sub"), "limit": 5}),
    )
    .await;
    assert_eq!(code, Code::PathDenied);
    let code = refused(
        &gateway,
        "file.stat",
        json!({"path": tree.path("to-real/inside.txt")}),
    )
    .await;
    assert_eq!(code, Code::PathDenied);
    let code = refused(&gateway, "file.stat", json!({"path": tree.path("to-etc")})).await;
    assert_eq!(code, Code::PathDenied);

    // The node's policy follows: the link inside is followed to its canonical path, the
    // one to /etc leads outside the rules and is refused without naming where.
    let (gateway, _node) = host(NodePolicy {
        rules: rules(&[tree.glob()], &[], &[]),
        follow_symlinks: true,
    });
    let (head, entries) = list(
        &gateway,
        json!({"path": tree.path("to-real"), "limit": 5, "followSymlinks": true}),
    )
    .await;
    assert_eq!(head.path, tree.path("real"));
    assert_eq!(names(&entries), ["inside.txt", "sub"]);
    let e = call(
        &gateway,
        "dir.list",
        json!({"path": tree.path("to-etc"), "limit": 5, "followSymlinks": true}),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(e.code(), Code::PathDenied);
    assert!(!e.to_string().contains("/etc"), "{e}");
    // The call did not ask: not followed.
    let code = refused(
        &gateway,
        "dir.list",
        json!({"path": tree.path("to-real"), "limit": 5}),
    )
    .await;
    assert_eq!(code, Code::PathDenied);
    let stat = call(
        &gateway,
        "file.stat",
        json!({"path": tree.path("to-real/inside.txt"), "followSymlinks": true}),
    )
    .await
    .unwrap();
    let entry: NodeEntry = serde_json::from_value(stat.result).unwrap();
    assert_eq!(
        (entry.name, entry.kind, entry.size),
        (tree.path("real/inside.txt"), EntryKind::File, 1)
    );
}

#[tokio::test]
async fn paths_outside_the_rules_or_not_normal_are_refused() {
    let tree = Tree::new();
    tree.dir("open/secret");
    tree.file("open/.env", b"KEY=1");
    tree.file("closed/x", b"");
    let (gateway, _node) = host(NodePolicy {
        rules: rules(
            &[format!("{}/open/**", tree.path(""))],
            &[],
            &[
                format!("{}/open/secret/**", tree.path("")),
                "**/.env".into(),
            ],
        ),
        follow_symlinks: false,
    });
    let (_, entries) = list(&gateway, json!({"path": tree.path("open"), "limit": 5})).await;
    // What the rules deny is not shown either.
    assert!(entries.is_empty(), "{entries:?}");
    for path in [
        tree.path("closed"),
        tree.path("open/secret"),
        "/etc".into(),
        "/".into(),
    ] {
        let code = refused(&gateway, "dir.list", json!({"path": path, "limit": 5})).await;
        assert_eq!(code, Code::PathDenied, "{path}");
    }
    let code = refused(
        &gateway,
        "file.stat",
        json!({"path": tree.path("open/.env")}),
    )
    .await;
    assert_eq!(code, Code::PathDenied);
    let dotdot = format!("{}/open/../closed", tree.path(""));
    let dotted = format!("{}/open/./secret", tree.path(""));
    let doubled = format!("{}//open", tree.path(""));
    let trailing = format!("{}/open/", tree.path(""));
    for path in [
        dotdot.as_str(),
        dotted.as_str(),
        doubled.as_str(),
        trailing.as_str(),
        "open",
        "",
        "/srv/\u{10FFE9}",
    ] {
        let code = refused(&gateway, "dir.list", json!({"path": path, "limit": 5})).await;
        assert_eq!(code, Code::BadPath, "{path:?}");
        let code = refused(&gateway, "file.stat", json!({"path": path})).await;
        assert_eq!(code, Code::BadPath, "{path:?}");
    }
}

#[tokio::test]
async fn bad_arguments_and_unknown_commands_are_refused() {
    let tree = Tree::new();
    let (gateway, _node) = host_of(&tree);
    let code = refused(
        &gateway,
        "dir.list",
        json!({"path": tree.path(""), "limit": 5, "extra": 1}),
    )
    .await;
    assert_eq!(code, Code::InvalidArguments);
    let code = refused(&gateway, "dir.list", json!({"path": tree.path("")})).await;
    assert_eq!(code, Code::InvalidArguments);
    let code = refused(&gateway, "file.stat", json!({"path": 5})).await;
    assert_eq!(code, Code::InvalidArguments);
    let code = refused(&gateway, "terminal.open", json!({})).await;
    assert_eq!(code, Code::UnknownCommand);
    // Missing things are told apart.
    let code = refused(&gateway, "file.stat", json!({"path": tree.path("nothing")})).await;
    assert_eq!(code, Code::NotFound);
    tree.file("f", b"");
    let code = refused(
        &gateway,
        "dir.list",
        json!({"path": tree.path("f"), "limit": 1}),
    )
    .await;
    assert_eq!(code, Code::NotADirectory);
    let code = refused(&gateway, "file.stat", json!({"path": tree.path("f/x")})).await;
    assert_eq!(code, Code::NotADirectory);
}
