//! The cap on pending nodes and the `connected` mark of pairing records.

use ferry_codes::Code;
use ferry_config::Config;
use ferry_site::{NodeHello, NodeState, Site};

const CAP: usize = 3;

fn site() -> (tempfile::TempDir, Site) {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.nodes.max_pending = CAP;
    let site = Site::open(
        &tmp.path().join("site"),
        ferry_site::testing::metadata(&tmp.path().join("site"), config),
    )
    .unwrap();
    (tmp, site)
}

/// A hello from the key whose hex digits are all `digit`.
fn hello(digit: char) -> NodeHello {
    NodeHello {
        id: std::iter::repeat_n(digit, 20).collect(),
        public_key: std::iter::repeat_n(digit, 64).collect(),
        name: "box".into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: vec!["dir.list".into()],
    }
}

#[test]
fn new_keys_past_the_pending_cap_are_refused_and_not_recorded() {
    let (_tmp, site) = site();
    // Up to the cap − 1, then the cap itself: taken.
    for digit in ['1', '2'] {
        site.record_hello(&hello(digit)).unwrap();
    }
    assert_eq!(site.nodes().unwrap().len(), CAP - 1);
    site.record_hello(&hello('3')).unwrap();
    assert_eq!(site.nodes().unwrap().len(), CAP);
    // The cap + 1: refused, nothing recorded.
    let e = site.record_hello(&hello('4')).unwrap_err();
    assert_eq!(e.code(), Code::TooManyPendingNodes);
    assert_eq!(e.code().status(), 429);
    assert!(e.to_string().contains("3 nodes"), "{e}");
    assert_eq!(site.nodes().unwrap().len(), CAP);
    assert_eq!(
        site.node(&hello('4').id).unwrap_err().code(),
        Code::UnknownNode
    );
    // A known pending node is never refused by the cap.
    site.record_hello(&hello('1')).unwrap();
    // An approved node neither counts nor is refused.
    site.approve(&hello('1').id, None).unwrap();
    site.record_hello(&hello('4')).unwrap();
    assert_eq!(
        site.record_hello(&hello('5')).unwrap_err().code(),
        Code::TooManyPendingNodes
    );
    assert_eq!(
        site.record_hello(&hello('1')).unwrap().state,
        NodeState::Approved
    );
    // A revoked node does not count either.
    site.revoke(&hello('2').id).unwrap();
    site.record_hello(&hello('5')).unwrap();
    assert_eq!(
        site.record_hello(&hello('2')).unwrap().state,
        NodeState::Revoked
    );
}

#[test]
fn connected_marks_belong_to_their_gateway_and_go_with_it() {
    let (_tmp, site) = site();
    site.register_gateway("gwA", "127.0.0.1:1").unwrap();
    site.register_gateway("gwB", "127.0.0.1:2").unwrap();
    let a = site.record_hello(&hello('a')).unwrap();
    let b = site.record_hello(&hello('b')).unwrap();
    assert!(!a.connected);
    site.set_node_connected(&a.id, true, "gwA").unwrap();
    site.set_node_connected(&b.id, true, "gwB").unwrap();
    assert!(site.node(&a.id).unwrap().connected);
    let shown = serde_json::to_value(site.node(&a.id).unwrap().view(true)).unwrap();
    assert_eq!(shown["connected"], true);
    // Another gateway cannot clear a mark it does not hold (the node moved to A).
    site.set_node_connected(&a.id, false, "gwB").unwrap();
    assert!(site.node(&a.id).unwrap().connected);
    site.set_node_connected(&a.id, false, "gwA").unwrap();
    assert!(!site.node(&a.id).unwrap().connected);
    assert!(site.node(&b.id).unwrap().connected);
    // A starting (or restarting) gateway leaves the others' marks alone.
    site.register_gateway("gwC", "127.0.0.1:3").unwrap();
    assert!(site.node(&b.id).unwrap().connected);
    // B stops: its marks go, and only its.
    site.set_node_connected(&a.id, true, "gwA").unwrap();
    site.gateway_stopped("gwB").unwrap();
    assert!(!site.node(&b.id).unwrap().connected);
    assert!(site.node(&a.id).unwrap().connected);
    // An id that names no node changes nothing and is no error.
    site.set_node_connected("ffffffffffffffffffff", true, "gwA")
        .unwrap();
}
