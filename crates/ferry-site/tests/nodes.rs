//! Pairing records on a site in SQLite on disk (spec nodes N-PAIR, N-ADMIN).

use ferry_site::{NODE_COMMANDS_MAX, NODE_FIELD_MAX_BYTES, NodeHello, NodeState, Site};

fn site() -> (tempfile::TempDir, Site) {
    let tmp = tempfile::tempdir().unwrap();
    let site = Site::open(
        &tmp.path().join("site"),
        ferry_site::testing::config(&tmp.path().join("site")),
    )
    .unwrap();
    (tmp, site)
}

/// A hello from the key whose hex digits are all `digit`; the id is made from it.
fn hello(digit: char, name: &str, commands: &[&str]) -> NodeHello {
    NodeHello {
        id: std::iter::repeat_n(digit, 20).collect(),
        public_key: std::iter::repeat_n(digit, 64).collect(),
        name: name.into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: commands.iter().map(|c| c.to_string()).collect(),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|c| c.to_string()).collect()
}

#[test]
fn a_new_key_is_a_pending_node_that_serves_nothing() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list"]))
        .unwrap();
    assert_eq!(node.state, NodeState::Pending);
    assert_eq!(node.advertised_commands, strings(&["dir.list"]));
    assert!(node.approved_commands.is_empty());
    assert!(site.served_commands(&node.id).unwrap().is_empty());
    assert_eq!(site.nodes().unwrap(), vec![node]);
}

#[test]
fn a_new_key_with_a_known_name_is_a_second_pending_node() {
    let (_tmp, site) = site();
    let first = site
        .record_hello(&hello('a', "box", &["dir.list"]))
        .unwrap();
    site.approve(&first.id, None).unwrap();
    let second = site
        .record_hello(&hello('b', "box", &["dir.list"]))
        .unwrap();
    assert_ne!(first.id, second.id);
    assert_eq!(second.state, NodeState::Pending);
    assert!(site.served_commands(&second.id).unwrap().is_empty());
    assert_eq!(site.node(&first.id).unwrap().state, NodeState::Approved);
    assert_eq!(site.nodes().unwrap().len(), 2);
}

#[test]
fn a_known_key_updates_what_it_says_and_keeps_its_approval() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list"]))
        .unwrap();
    site.approve(&node.id, None).unwrap();
    let mut again = hello('a', "renamed", &["dir.list"]);
    again.shell = "zsh".into();
    let node = site.record_hello(&again).unwrap();
    assert_eq!(
        (node.name.as_str(), node.shell.as_str()),
        ("renamed", "zsh")
    );
    assert_eq!(node.state, NodeState::Approved);
    assert_eq!(site.nodes().unwrap().len(), 1);
}

#[test]
fn a_command_advertised_after_approval_waits_for_the_upgrade() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list", "file.fetch"]))
        .unwrap();
    site.approve(&node.id, None).unwrap();
    let upgraded = site
        .record_hello(&hello(
            'a',
            "box",
            &["dir.list", "file.fetch", "terminal.upload"],
        ))
        .unwrap();
    assert_eq!(upgraded.pending_commands(), strings(&["terminal.upload"]));
    assert_eq!(
        site.served_commands(&node.id).unwrap(),
        strings(&["dir.list", "file.fetch"])
    );
    site.approve(&node.id, None).unwrap();
    assert_eq!(
        site.served_commands(&node.id).unwrap(),
        strings(&["dir.list", "file.fetch", "terminal.upload"])
    );
}

#[test]
fn a_command_no_longer_advertised_is_not_served() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list", "file.fetch"]))
        .unwrap();
    site.approve(&node.id, None).unwrap();
    site.record_hello(&hello('a', "box", &["file.fetch"]))
        .unwrap();
    assert_eq!(
        site.served_commands(&node.id).unwrap(),
        strings(&["file.fetch"])
    );
}

#[test]
fn an_approval_must_name_only_advertised_commands() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list", "file.fetch"]))
        .unwrap();
    let err = site
        .approve(&node.id, Some(strings(&["dir.list", "terminal.open"])))
        .unwrap_err();
    assert_eq!(err.code(), "command_not_advertised");
    assert_eq!(err.code().status(), 400);
    assert!(err.to_string().contains("\"terminal.open\""), "{err}");
    assert_eq!(site.node(&node.id).unwrap().state, NodeState::Pending);

    let approved = site
        .approve(&node.id, Some(strings(&["file.fetch", "file.fetch"])))
        .unwrap();
    assert_eq!(approved.approved_commands, strings(&["file.fetch"]));
    assert_eq!(
        site.served_commands(&node.id).unwrap(),
        strings(&["file.fetch"])
    );

    let none = site.approve(&node.id, Some(Vec::new())).unwrap();
    assert_eq!(none.state, NodeState::Approved);
    assert!(site.served_commands(&node.id).unwrap().is_empty());
}

#[test]
fn an_approval_names_at_most_the_command_cap() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list"]))
        .unwrap();
    let many = vec!["dir.list".to_string(); NODE_COMMANDS_MAX];
    assert!(site.approve(&node.id, Some(many.clone())).is_ok());
    let mut too_many = many;
    too_many.push("dir.list".into());
    let err = site.approve(&node.id, Some(too_many)).unwrap_err();
    assert_eq!(err.code(), "command_not_advertised");
}

#[test]
fn a_revoked_node_stays_revoked() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list"]))
        .unwrap();
    site.approve(&node.id, None).unwrap();
    assert_eq!(site.revoke(&node.id).unwrap().state, NodeState::Revoked);
    assert!(site.served_commands(&node.id).unwrap().is_empty());

    let again = site
        .record_hello(&hello('a', "box", &["dir.list", "file.push"]))
        .unwrap();
    assert_eq!(again.state, NodeState::Revoked);
    let err = site.approve(&node.id, None).unwrap_err();
    assert_eq!(err.code(), "node_revoked");
    assert_eq!(err.code().status(), 409);
    assert!(site.served_commands(&node.id).unwrap().is_empty());
    // Revoking twice changes nothing.
    assert_eq!(site.revoke(&node.id).unwrap().state, NodeState::Revoked);
}

#[test]
fn the_records_outlive_the_site_being_reopened() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("site");
    let id = {
        let site = Site::open(&path, ferry_site::testing::config(&path)).unwrap();
        let node = site
            .record_hello(&hello('a', "box", &["dir.list"]))
            .unwrap();
        site.approve(&node.id, None).unwrap();
        node.id
    };
    let site = Site::open(&path, ferry_site::testing::config(&path)).unwrap();
    assert_eq!(site.served_commands(&id).unwrap(), strings(&["dir.list"]));
}

#[test]
fn unknown_and_malformed_ids_are_unknown_node() {
    let (_tmp, site) = site();
    site.record_hello(&hello('a', "box", &["dir.list"]))
        .unwrap();
    let long = "a".repeat(10_000);
    for id in [
        "",
        "bbbbbbbbbbbbbbbbbbbb",
        "AAAA",
        "../etc",
        "a b",
        "a\0",
        long.as_str(),
    ] {
        for err in [
            site.node(id).unwrap_err(),
            site.approve(id, None).unwrap_err(),
            site.revoke(id).unwrap_err(),
            site.served_commands(id).unwrap_err(),
        ] {
            assert_eq!(err.code(), "unknown_node", "{id:?}");
            assert_eq!(err.code().status(), 404);
            assert!(
                err.to_string().len() < 200,
                "the message repeats a hostile id"
            );
        }
    }
}

#[test]
fn another_key_with_a_known_id_is_refused() {
    let (_tmp, site) = site();
    let node = site
        .record_hello(&hello('a', "box", &["dir.list"]))
        .unwrap();
    let mut impostor = hello('b', "box", &["dir.list"]);
    impostor.id = node.id.clone();
    assert_eq!(
        site.record_hello(&impostor).unwrap_err().code(),
        "bad_proof"
    );
    assert_eq!(site.node(&node.id).unwrap().public_key, node.public_key);
}

#[test]
fn a_hello_is_checked_at_its_limits() {
    let (_tmp, site) = site();
    let max = "n".repeat(NODE_FIELD_MAX_BYTES);
    let over = "n".repeat(NODE_FIELD_MAX_BYTES + 1);
    assert!(site.record_hello(&hello('a', &max, &[])).is_ok());
    let below = "n".repeat(NODE_FIELD_MAX_BYTES - 1);
    assert!(site.record_hello(&hello('f', &below, &[])).is_ok());
    for (name, digit) in [("", 'b'), (over.as_str(), 'c'), ("a/b", 'd'), ("é", 'e')] {
        let err = site.record_hello(&hello(digit, name, &[])).unwrap_err();
        assert_eq!(err.code(), "bad_hello", "{name:?}");
    }

    let names: Vec<String> = (0..=NODE_COMMANDS_MAX)
        .map(|i| format!("cmd.{i}"))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut at_cap = hello('1', "cap", &refs[..NODE_COMMANDS_MAX]);
    assert!(site.record_hello(&at_cap).is_ok());
    at_cap.commands = strings(&refs);
    assert_eq!(site.record_hello(&at_cap).unwrap_err().code(), "bad_hello");
    let below = hello('2', "below", &refs[..NODE_COMMANDS_MAX - 1]);
    assert!(site.record_hello(&below).is_ok());

    let twice = hello('3', "twice", &["dir.list", "dir.list"]);
    assert_eq!(site.record_hello(&twice).unwrap_err().code(), "bad_hello");
    let mut bad_key = hello('4', "key", &[]);
    bad_key.public_key = "A".repeat(64);
    assert_eq!(site.record_hello(&bad_key).unwrap_err().code(), "bad_hello");
    bad_key.public_key = "a".repeat(63);
    assert_eq!(site.record_hello(&bad_key).unwrap_err().code(), "bad_hello");
}
