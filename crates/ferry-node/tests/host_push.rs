//! `file.push` on real folders: atomic writes, overwrite and createParents, the `exists`
//! race, bodies that lie or run long, a push given up midway, and links on the way.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use bytes::Bytes;
use common::host::{Tree, host, host_of, noise, push, rules, sha256};
use ferry_codes::Code;
use ferry_node::checked::CheckedWriter;
use ferry_node::commands::PushResult;
use ferry_node::host::NodePolicy;
use serde_json::json;

/// Waits (bounded) until the folder `rel` of `tree` holds no temporary.
async fn no_temporaries_left(tree: &Tree, rel: &str) {
    for _ in 0..100 {
        if tree.temporaries(rel).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("temporaries left in {rel:?}: {:?}", tree.temporaries(rel));
}

/// Waits (bounded) until the node has checked the path and made its temporary in the
/// folder `rel`.
async fn temporary_made(tree: &Tree, rel: &str) {
    for _ in 0..250 {
        if !tree.temporaries(rel).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the node made no temporary in {rel:?}");
}

#[tokio::test]
async fn a_push_writes_the_file_atomically_and_says_what_it_wrote() {
    let tree = Tree::new();
    tree.dir("in");
    let (gateway, _node) = host_of(&tree);
    let bytes = noise(300_000, 5);
    let answer = push(&gateway, &tree.path("in/new.bin"), &bytes, json!({}))
        .await
        .unwrap();
    let answer: PushResult = serde_json::from_value(answer).unwrap();
    assert_eq!(answer.path, tree.path("in/new.bin"));
    assert_eq!(
        (answer.size, answer.sha256.as_str(), answer.replaced),
        (300_000, sha256(&bytes).as_str(), false)
    );
    assert_eq!(std::fs::read(tree.root.join("in/new.bin")).unwrap(), bytes);
    assert!(tree.temporaries("in").is_empty());
    // An empty file too.
    push(&gateway, &tree.path("in/empty"), b"", json!({}))
        .await
        .unwrap();
    assert_eq!(std::fs::read(tree.root.join("in/empty")).unwrap(), b"");
}

#[tokio::test]
async fn an_existing_file_is_replaced_only_with_overwrite() {
    let tree = Tree::new();
    tree.file("f", b"old");
    let (gateway, _node) = host_of(&tree);
    let e = push(&gateway, &tree.path("f"), b"new", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Exists);
    assert_eq!(std::fs::read(tree.root.join("f")).unwrap(), b"old");
    // A replaced file keeps its permission bits; a new one is 0644.
    std::fs::set_permissions(tree.root.join("f"), PermissionsExt::from_mode(0o600)).unwrap();
    let answer = push(
        &gateway,
        &tree.path("f"),
        b"new",
        json!({"overwrite": true}),
    )
    .await
    .unwrap();
    assert_eq!(answer["replaced"], true);
    assert_eq!(std::fs::read(tree.root.join("f")).unwrap(), b"new");
    let mode = |rel: &str| {
        std::fs::metadata(tree.root.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("f"), 0o600);
    push(&gateway, &tree.path("g"), b"new", json!({}))
        .await
        .unwrap();
    assert_eq!(mode("g"), 0o644);
    // A folder is never replaced.
    tree.dir("folder");
    let e = push(
        &gateway,
        &tree.path("folder"),
        b"x",
        json!({"overwrite": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::IsDirectory);
    no_temporaries_left(&tree, "").await;
}

#[tokio::test]
async fn a_file_that_appears_while_the_body_streams_is_not_replaced() {
    let tree = Tree::new();
    let (gateway, _node) = host_of(&tree);
    let bytes = b"pushed".to_vec();
    let args = json!({"path": tree.path("race"), "size": bytes.len(), "sha256": sha256(&bytes)});
    let mut call = gateway.open("file.push", args, true).unwrap();
    let mut body = CheckedWriter::new(call.take_body().unwrap());
    body.send(Bytes::from_static(b"pus")).await.unwrap();
    // The node checked the name was free; someone takes it before the body ends.
    temporary_made(&tree, "").await;
    tree.file("race", b"theirs");
    body.send(Bytes::from_static(b"hed")).await.unwrap();
    body.finish().await.unwrap();
    let e = call.response().await.err().unwrap();
    assert_eq!(e.code(), Code::Exists, "{e}");
    assert_eq!(std::fs::read(tree.root.join("race")).unwrap(), b"theirs");
    no_temporaries_left(&tree, "").await;
}

#[tokio::test]
async fn create_parents_makes_each_missing_folder_within_the_write_rules() {
    let tree = Tree::new();
    tree.dir("drop");
    let (gateway, _node) = host(NodePolicy {
        rules: rules(
            &[],
            &[format!("{}/drop/**", tree.path(""))],
            &[format!("{}/drop/no/**", tree.path(""))],
        ),
        follow_symlinks: false,
    });
    let e = push(&gateway, &tree.path("drop/a/b/f"), b"x", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(!tree.root.join("drop/a").exists());
    push(
        &gateway,
        &tree.path("drop/a/b/f"),
        b"x",
        json!({"createParents": true}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(tree.root.join("drop/a/b/f")).unwrap(), b"x");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(tree.root.join("drop/a"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o700, 0o700);
    // A folder outside the write rules is not made, nor what is under it.
    let e = push(
        &gateway,
        &tree.path("elsewhere/f"),
        b"x",
        json!({"createParents": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PathDenied);
    let e = push(
        &gateway,
        &tree.path("drop/no/f"),
        b"x",
        json!({"createParents": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PathDenied);
    assert!(!tree.root.join("elsewhere").exists() && !tree.root.join("drop/no").exists());
    // Reading is not writing.
    let (gateway, _node) = host(NodePolicy {
        rules: rules(&[tree.glob()], &[], &[]),
        follow_symlinks: false,
    });
    let e = push(&gateway, &tree.path("drop/g"), b"x", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PathDenied);
}

#[tokio::test]
async fn a_body_that_lies_or_runs_past_its_size_is_never_placed() {
    let tree = Tree::new();
    let (gateway, _node) = host_of(&tree);
    // The call says one sha256, the body carries (and truthfully trails) another.
    let args = json!({"path": tree.path("lie"), "size": 3, "sha256": sha256(b"abc")});
    let mut call = gateway.open("file.push", args, true).unwrap();
    let mut body = CheckedWriter::new(call.take_body().unwrap());
    body.send(Bytes::from_static(b"abd")).await.unwrap();
    body.finish().await.unwrap();
    assert_eq!(
        call.response().await.err().unwrap().code(),
        Code::TransferMismatch
    );
    // A trailer that lies about the bytes before it.
    let args = json!({"path": tree.path("lie"), "size": 3, "sha256": sha256(b"abc")});
    let mut call = gateway.open("file.push", args, true).unwrap();
    let mut raw = call.take_body().unwrap();
    let mut lying = b"abc".to_vec();
    lying.extend_from_slice(&4u64.to_be_bytes());
    lying.extend_from_slice(&<sha2::Sha256 as sha2::Digest>::digest(b"abc"));
    raw.send(Bytes::from(lying)).await.unwrap();
    raw.finish().await.unwrap();
    assert_eq!(
        call.response().await.err().unwrap().code(),
        Code::TransferMismatch
    );
    // One byte more than `size`: refused at that byte.
    let args = json!({"path": tree.path("long"), "size": 3, "sha256": sha256(b"abc")});
    let mut call = gateway.open("file.push", args, true).unwrap();
    let mut body = CheckedWriter::new(call.take_body().unwrap());
    let _ = body.send(Bytes::from_static(b"abcd")).await;
    let _ = body.finish().await;
    assert_eq!(call.response().await.err().unwrap().code(), Code::TooLarge);
    // A sha256 that is not one.
    let e = push(&gateway, &tree.path("x"), b"abc", json!({"sha256": "ABC"}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArguments);
    assert!(!tree.root.join("lie").exists() && !tree.root.join("long").exists());
    no_temporaries_left(&tree, "").await;
}

#[tokio::test]
async fn a_push_given_up_midway_leaves_nothing() {
    let tree = Tree::new();
    let (gateway, _node) = host_of(&tree);
    let bytes = noise(4 << 20, 9);
    let args = json!({"path": tree.path("half"), "size": bytes.len(), "sha256": sha256(&bytes)});
    let mut call = gateway.open("file.push", args, true).unwrap();
    let mut body = CheckedWriter::new(call.take_body().unwrap());
    body.send(Bytes::copy_from_slice(&bytes[..1 << 20]))
        .await
        .unwrap();
    // The temporary exists while the body streams…
    temporary_made(&tree, "").await;
    assert_eq!(tree.temporaries("").len(), 1);
    drop(body);
    drop(call);
    // …and is gone once the call is.
    no_temporaries_left(&tree, "").await;
    assert!(!tree.root.join("half").exists());
}

#[tokio::test]
async fn links_as_the_target_or_a_parent_are_never_written_through() {
    let tree = Tree::new();
    tree.dir("real");
    tree.file("outside/victim", b"safe");
    tree.link("real/to-victim", "../outside/victim");
    tree.link("to-outside", "outside");
    let (gateway, _node) = host(NodePolicy {
        rules: rules(
            &[],
            &[
                format!("{}/real/**", tree.path("")),
                format!("{}/to-outside/**", tree.path("")),
            ],
            &[],
        ),
        follow_symlinks: false,
    });
    let follow = json!({"overwrite": true, "followSymlinks": true});
    let e = push(
        &gateway,
        &tree.path("real/to-victim"),
        b"evil",
        follow.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PathDenied);
    let e = push(
        &gateway,
        &tree.path("to-outside/victim"),
        b"evil",
        follow.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PathDenied);
    assert_eq!(
        std::fs::read(tree.root.join("outside/victim")).unwrap(),
        b"safe"
    );
    assert!(
        std::fs::symlink_metadata(tree.root.join("real/to-victim"))
            .unwrap()
            .is_symlink()
    );
    // With following on at the node, the link resolves to a path the rules do not allow.
    let (gateway, _node) = host(NodePolicy {
        rules: rules(&[], &[format!("{}/real/**", tree.path(""))], &[]),
        follow_symlinks: true,
    });
    let e = push(
        &gateway,
        &tree.path("real/to-victim"),
        b"evil",
        follow.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PathDenied);
    assert_eq!(
        std::fs::read(tree.root.join("outside/victim")).unwrap(),
        b"safe"
    );
    // And to one they allow: the file behind the link is replaced, the link stays.
    tree.file("real/target", b"before");
    tree.link("real/to-target", "target");
    let answer = push(&gateway, &tree.path("real/to-target"), b"after", follow)
        .await
        .unwrap();
    assert_eq!(answer["path"], tree.path("real/target"));
    assert_eq!(
        std::fs::read(tree.root.join("real/target")).unwrap(),
        b"after"
    );
    assert!(
        std::fs::symlink_metadata(tree.root.join("real/to-target"))
            .unwrap()
            .is_symlink()
    );
    for path in ["real/x", "/", &format!("{}/real/../x", tree.path(""))] {
        let e = push(&gateway, path, b"x", json!({})).await.unwrap_err();
        assert!(
            matches!(
                e.code(),
                Code::BadPath | Code::IsDirectory | Code::PathDenied
            ),
            "{path}: {e}"
        );
    }
}

/// Starts a push of `bytes` to `path`, sends its first half and gives the call and
/// the rest of the body to finish.
async fn half_pushed(
    gateway: &ferry_node::Link,
    tree: &Tree,
    folder: &str,
    path: String,
    bytes: &'static [u8],
    overwrite: bool,
) -> (ferry_node::Call, CheckedWriter) {
    let args =
        json!({"path": path, "size": bytes.len(), "sha256": sha256(bytes), "overwrite": overwrite});
    let mut call = gateway.open("file.push", args, true).unwrap();
    let mut body = CheckedWriter::new(call.take_body().unwrap());
    body.send(Bytes::from_static(&bytes[..3])).await.unwrap();
    temporary_made(tree, folder).await;
    (call, body)
}

#[tokio::test]
async fn a_link_swapped_in_while_the_body_streams_is_never_written_through() {
    let tree = Tree::new();
    tree.file("outside/victim", b"safe");
    tree.dir("in");
    let (gateway, _node) = host(NodePolicy {
        rules: rules(&[], &[format!("{}/in/**", tree.path(""))], &[]),
        follow_symlinks: false,
    });
    // The target becomes a link to a file outside the rules.
    let (call, mut body) = half_pushed(
        &gateway,
        &tree,
        "in",
        tree.path("in/f"),
        b"evil bytes",
        true,
    )
    .await;
    tree.link("in/f", "../outside/victim");
    body.send(Bytes::from_static(&b"evil bytes"[3..]))
        .await
        .unwrap();
    body.finish().await.unwrap();
    let e = call.response().await.err().unwrap();
    assert_eq!(e.code(), Code::PathDenied, "{e}");
    assert_eq!(
        std::fs::read(tree.root.join("outside/victim")).unwrap(),
        b"safe"
    );
    assert!(
        std::fs::symlink_metadata(tree.root.join("in/f"))
            .unwrap()
            .is_symlink()
    );
    no_temporaries_left(&tree, "in").await;

    // The folder becomes a link to a folder outside: nothing is written through the
    // link, nor left in the folder that was checked.
    tree.dir("in/sub");
    let (call, mut body) = half_pushed(
        &gateway,
        &tree,
        "in/sub",
        tree.path("in/sub/g"),
        b"the bytes",
        false,
    )
    .await;
    std::fs::rename(tree.root.join("in/sub"), tree.root.join("in/sub.old")).unwrap();
    tree.link("in/sub", "../outside");
    body.send(Bytes::from_static(&b"the bytes"[3..]))
        .await
        .unwrap();
    body.finish().await.unwrap();
    let e = call.response().await.err().unwrap();
    assert_eq!(e.code(), Code::CanonicalPathChanged, "{e}");
    assert!(!tree.root.join("outside/g").exists());
    assert!(!tree.root.join("in/sub.old/g").exists());
    no_temporaries_left(&tree, "in/sub.old").await;
}

/// A node killed while it wrote (issue 15's crash harness found the temporary stayed for
/// ever): each push is written down in the state folder while it runs, and a node that
/// starts on that folder removes what a push of a dead node left, and nothing else.
#[tokio::test]
async fn what_a_killed_push_left_goes_at_the_next_start() {
    use ferry_node::host::{NodeHost, PUSHING_DIR_NAME};
    let tree = Tree::new();
    let state = tempfile::tempdir().unwrap();
    let policy = NodePolicy {
        rules: rules(&[tree.glob()], &[tree.glob()], &[]),
        follow_symlinks: false,
    };
    let journaled = NodeHost::new(policy.clone()).with_push_journal(state.path());
    let (gateway, _node) = common::linked(journaled.handler());
    let records = state.path().join(PUSHING_DIR_NAME);
    let names = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };

    // A whole push leaves no record.
    push(&gateway, &tree.path("whole"), b"all of it", json!({}))
        .await
        .unwrap();
    assert_eq!(names(&records), Vec::<String>::new());

    // While a push streams, its record names its temporary.
    let bytes = noise(4 << 20, 11);
    let args = json!({"path": tree.path("half"), "size": bytes.len(), "sha256": sha256(&bytes)});
    let mut call = gateway.open("file.push", args, true).unwrap();
    let mut body = CheckedWriter::new(call.take_body().unwrap());
    body.send(Bytes::copy_from_slice(&bytes[..1 << 20]))
        .await
        .unwrap();
    temporary_made(&tree, "").await;
    let temporary = tree.temporaries("").remove(0);
    let record = names(&records).remove(0);
    let record_text = std::fs::read_to_string(records.join(&record)).unwrap();
    assert!(record_text.contains(&temporary), "{record_text}");
    // What a node killed now leaves: the record, unlocked, and the temporary.
    let half = std::fs::read(tree.root.join(&temporary)).unwrap();
    drop(body);
    drop(call);
    no_temporaries_left(&tree, "").await;
    for _ in 0..100 {
        if names(&records).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(names(&records), Vec::<String>::new(), "the push ended");
    std::fs::write(records.join(&record), &record_text).unwrap();
    std::fs::write(tree.root.join(&temporary), &half).unwrap();
    // Another writer's temporary in the same folder is not the node's.
    let foreign = format!("{}another-writer", ferry_fs::TEMP_PREFIX);
    std::fs::write(tree.root.join(&foreign), b"theirs").unwrap();

    let restarted = NodeHost::new(policy).with_push_journal(state.path());
    assert_eq!(restarted.sweep_pushes(), 1);
    assert_eq!(tree.temporaries(""), [foreign]);
    assert_eq!(names(&records), Vec::<String>::new());
    assert_eq!(
        std::fs::read(tree.root.join("whole")).unwrap(),
        b"all of it"
    );
    assert!(!tree.root.join("half").exists());
}
