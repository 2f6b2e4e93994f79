//! A pairing records table made before the `connected` column existed gets it at open.

use ferry_config::Config;
use ferry_site::{NodeHello, Site};

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
fn a_nodes_table_from_before_the_connected_column_gets_it_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    let id = {
        let site = Site::open(&data, Config::default()).unwrap();
        site.record_hello(&hello('c')).unwrap().id
    };
    // The table as it was made before the column existed (and before schema versions).
    let db = rusqlite::Connection::open(data.join(".ferry").join("site.db")).unwrap();
    db.execute_batch(
        "CREATE TABLE old_nodes AS SELECT id, public_key, name, state, platform, shell,
             advertised, approved, first_seen, last_seen FROM nodes;
         DROP TABLE nodes;
         ALTER TABLE old_nodes RENAME TO nodes;
         DROP TABLE schema_version;",
    )
    .unwrap();
    drop(db);
    let site = Site::open(&data, Config::default()).unwrap();
    let node = site.node(&id).unwrap();
    assert!(!node.connected);
    site.register_gateway("gw", "").unwrap();
    site.set_node_connected(&id, true, "gw").unwrap();
    assert!(site.node(&id).unwrap().connected);
    drop(site);
    // Opening again finds the column and leaves it.
    let site = Site::open(&data, Config::default()).unwrap();
    assert!(site.node(&id).unwrap().connected);
    site.gateway_stopped("gw").unwrap();
    assert!(!site.node(&id).unwrap().connected);
}
