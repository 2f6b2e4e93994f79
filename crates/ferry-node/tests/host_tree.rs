//! `dir.fetch` on real trees: the archive the planner admits and that extracts to the
//! same tree, links left out and never followed, denied descendants, the descendant cap
//! at its limit, and a root or a file swapped while the archive streams.

mod common;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::host::{Tree, call, checked_bytes, host, host_of, noise, refused, rules};
use ferry_archive::{EntryType, PlanOptions};
use ferry_codes::Code;
use ferry_node::checked::CheckedReader;
use ferry_node::commands::DirFetchHead;
use ferry_node::host::NodePolicy;
use ferry_node::{Link, NodeError};
use serde_json::{Value, json};

fn args(path: String) -> Value {
    json!({"path": path, "maxBytes": 64 << 20, "maxDescendants": 5000})
}

/// Fetches and reads the whole archive.
async fn fetch(link: &Link, args: Value) -> Result<(DirFetchHead, Vec<u8>), NodeError> {
    let response = call(link, "dir.fetch", args).await?;
    let head: DirFetchHead = serde_json::from_value(response.result.clone()).unwrap();
    let archive = checked_bytes(response, 64 << 20).await?;
    Ok((head, archive))
}

/// Every file (with its bytes) and folder beneath `root`, by relative path.
fn snapshot(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let rel = entry
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
                out.insert(rel, None);
            } else if kind.is_file() {
                out.insert(rel, Some(std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_archive_is_admitted_by_the_planner_and_extracts_to_the_same_tree() {
    let tree = Tree::new();
    tree.file("src/a.txt", b"alpha");
    tree.file("src/sub/deeper/b.bin", &noise(200_000, 1));
    tree.file("src/é and space.txt", b"");
    tree.file(&format!("src/{}/long", "n".repeat(120)), b"long name");
    tree.dir("src/empty");
    tree.link("src/etc", "/etc");
    tree.link("src/sub/passwd", "/etc/passwd");
    let (gateway, _node) = host_of(&tree);
    let (head, archive) = fetch(&gateway, args(tree.path("src"))).await.unwrap();
    assert_eq!(head.path, tree.path("src"));
    // Links are left out, counted, and never followed.
    assert_eq!(head.skipped, 2);
    let plan = ferry_archive::plan(&archive[..], &PlanOptions::default()).unwrap();
    assert_eq!(plan.descendants, head.descendants);
    assert_eq!(head.descendants, 8);
    assert!(
        plan.entries
            .iter()
            .all(|e| !e.path.starts_with("etc") && e.path != "sub/passwd")
    );
    let b = plan
        .entries
        .iter()
        .find(|e| e.path == "sub/deeper/b.bin")
        .unwrap();
    assert_eq!((b.kind, b.size), (EntryType::File, 200_000));
    // Folders come before what they hold, names sorted by bytes.
    let order: Vec<&str> = plan.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(order[0], "a.txt");
    let out = Tree::new();
    let parent = ferry_fs::Dir::open_ambient(&out.root).unwrap();
    ferry_archive::extract(&archive[..], &plan, &parent, "x").unwrap();
    let mut expected = snapshot(&tree.root.join("src"));
    expected.retain(|rel, _| rel != "etc" && rel != "sub/passwd");
    assert_eq!(snapshot(&out.root.join("x")), expected);
}

#[tokio::test]
async fn one_denied_descendant_refuses_the_whole_tree() {
    let tree = Tree::new();
    tree.file("src/ok.txt", b"fine");
    tree.file("src/deep/.env", b"KEY=secret");
    let (gateway, _node) = host(NodePolicy {
        rules: rules(&[tree.glob()], &[], &["**/.env".into()]),
        follow_symlinks: false,
    });
    let e = fetch(&gateway, args(tree.path("src"))).await.unwrap_err();
    assert_eq!(e.code(), Code::PathDenied);
    assert!(e.to_string().contains("deep/.env"), "{e}");
    // Outside the rules, or not normal.
    assert_eq!(
        refused(&gateway, "dir.fetch", args("/etc".into())).await,
        Code::PathDenied
    );
    let dotdot = format!("{}/src/../src", tree.path(""));
    for path in [dotdot.as_str(), "src", "/tmp/"] {
        assert_eq!(
            refused(&gateway, "dir.fetch", args(path.into())).await,
            Code::BadPath,
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_root_is_reached_without_links_unless_both_sides_follow() {
    let tree = Tree::new();
    tree.file("real/f", b"x");
    tree.link("to-real", "real");
    tree.link("to-etc", "/etc");
    let (gateway, _node) = host_of(&tree);
    let mut follow = args(tree.path("to-real"));
    follow["followSymlinks"] = json!(true);
    assert_eq!(
        refused(&gateway, "dir.fetch", follow.clone()).await,
        Code::PathDenied
    );
    assert_eq!(
        refused(&gateway, "dir.fetch", args(tree.path("to-real"))).await,
        Code::PathDenied
    );
    let (gateway, _node) = host(NodePolicy {
        rules: rules(&[tree.glob()], &[], &[]),
        follow_symlinks: true,
    });
    let (head, _) = fetch(&gateway, follow).await.unwrap();
    assert_eq!((head.path, head.descendants), (tree.path("real"), 1));
    let mut etc = args(tree.path("to-etc"));
    etc["followSymlinks"] = json!(true);
    assert_eq!(refused(&gateway, "dir.fetch", etc).await, Code::PathDenied);
}

#[tokio::test]
async fn names_that_are_not_utf8_refuse_the_tree() {
    let tree = Tree::new();
    tree.dir("src");
    std::fs::write(
        tree.root
            .join("src")
            .join(std::ffi::OsStr::from_bytes(b"caf\xe9")),
        b"",
    )
    .unwrap();
    let (gateway, _node) = host_of(&tree);
    assert_eq!(
        refused(&gateway, "dir.fetch", args(tree.path("src"))).await,
        Code::BadPath
    );
}

#[tokio::test]
async fn the_descendant_cap_holds_at_its_limit() {
    let tree = Tree::new();
    tree.dir("src/sub");
    for i in 0..4999 {
        std::fs::File::create(tree.root.join(format!("src/sub/f{i}"))).unwrap();
    }
    let (gateway, _node) = host_of(&tree);
    // 4999 files and their folder: 5000.
    let (head, archive) = fetch(&gateway, args(tree.path("src"))).await.unwrap();
    assert_eq!(head.descendants, 5000);
    assert_eq!(
        ferry_archive::plan(&archive[..], &PlanOptions::default())
            .unwrap()
            .descendants,
        5000
    );
    std::fs::File::create(tree.root.join("src/sub/f4999")).unwrap();
    assert_eq!(
        refused(&gateway, "dir.fetch", args(tree.path("src"))).await,
        Code::TooManyEntries
    );
    let mut over = args(tree.path("src"));
    over["maxDescendants"] = json!(100_001);
    assert_eq!(
        refused(&gateway, "dir.fetch", over).await,
        Code::InvalidArguments
    );
}

#[tokio::test]
async fn an_archive_past_max_bytes_never_verifies() {
    let tree = Tree::new();
    tree.file("src/noise", &noise(300_000, 2));
    let (gateway, _node) = host_of(&tree);
    let mut small = args(tree.path("src"));
    small["maxBytes"] = json!(100_000);
    let e = fetch(&gateway, small).await.unwrap_err();
    assert_eq!(e.code(), Code::TooLarge, "{e}");
}

/// Reads the body of a fetch whose head came, expecting it to fail with `code`.
async fn fails_midway(response: ferry_node::Response, code: Code) {
    let mut reader = CheckedReader::new(response.body, 64 << 20);
    loop {
        match reader.next().await {
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                assert_eq!(e.code(), code, "{e}");
                return;
            }
            None => panic!("the archive verified"),
        }
    }
}

#[tokio::test]
async fn a_root_swapped_for_another_folder_midway_is_refused() {
    let tree = Tree::new();
    tree.file("src/noise", &noise(4 << 20, 4));
    let (gateway, _node) = host_of(&tree);
    let response = call(&gateway, "dir.fetch", args(tree.path("src")))
        .await
        .unwrap();
    // The 1 MiB window holds the node back until this side reads on.
    std::fs::rename(tree.root.join("src"), tree.root.join("moved")).unwrap();
    tree.file("src/noise", b"another folder at the same path");
    fails_midway(response, Code::CanonicalPathChanged).await;
}

#[tokio::test]
async fn a_file_replaced_midway_is_refused() {
    let tree = Tree::new();
    tree.file("src/a", &noise(4 << 20, 6));
    tree.file("src/b", b"before");
    let (gateway, _node) = host_of(&tree);
    let response = call(&gateway, "dir.fetch", args(tree.path("src")))
        .await
        .unwrap();
    tree.file("b.new", b"before");
    std::fs::rename(tree.root.join("b.new"), tree.root.join("src/b")).unwrap();
    fails_midway(response, Code::ChangedMeanwhile).await;
}

#[tokio::test]
async fn a_file_that_grows_midway_is_refused() {
    let tree = Tree::new();
    tree.file("src/a", &noise(4 << 20, 8));
    tree.file("src/b", b"before");
    let (gateway, _node) = host_of(&tree);
    let response = call(&gateway, "dir.fetch", args(tree.path("src")))
        .await
        .unwrap();
    std::fs::write(tree.root.join("src/b"), b"before and after").unwrap();
    fails_midway(response, Code::ChangedMeanwhile).await;
}

#[tokio::test]
async fn a_folder_swapped_for_a_link_midway_is_not_followed() {
    let tree = Tree::new();
    tree.file("src/a", &noise(4 << 20, 10));
    tree.file("src/b/inside", b"walked");
    let (gateway, _node) = host_of(&tree);
    let response = call(&gateway, "dir.fetch", args(tree.path("src")))
        .await
        .unwrap();
    // The walk saw a folder; the archive, still held back by the window, meets a link.
    std::fs::rename(tree.root.join("src/b"), tree.root.join("b.old")).unwrap();
    tree.link("src/b", "/etc");
    fails_midway(response, Code::ChangedMeanwhile).await;
}

#[tokio::test]
async fn a_fetch_given_up_midway_ends_the_node_s_work() {
    let tree = Tree::new();
    tree.file("src/a", &noise(4 << 20, 12));
    let (gateway, node) = host_of(&tree);
    let mut response = call(&gateway, "dir.fetch", args(tree.path("src")))
        .await
        .unwrap();
    response.body.next().await.unwrap().unwrap();
    drop(response);
    for _ in 0..100 {
        if node.open_streams() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the node still serves {} streams", node.open_streams());
}
