//! The node's key in its state folder: made once with the right modes, loaded again, and
//! refused when it is a link, readable by others, or not a key.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use ferry_codes::Code;
use ferry_node::Identity;
use ferry_node::identity::{KEY_FILE_NAME, NODE_ID_HEX_DIGITS, key_file_path, node_id};

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn refused(state: &Path) -> String {
    let e = Identity::load_or_create(state).expect_err("refused");
    assert_eq!(e.code(), Code::NodeStateUnusable);
    e.to_string()
}

#[test]
fn the_key_is_made_private_and_loaded_again() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("deep/state");
    let made = Identity::load_or_create(&state).unwrap();
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&key_file_path(&state)), 0o600);
    let text = fs::read_to_string(state.join(KEY_FILE_NAME)).unwrap();
    assert!(text.starts_with("ferry-node-key-v1 ") && text.ends_with('\n'));
    // Nothing else is left in the folder (no temporary).
    assert_eq!(fs::read_dir(&state).unwrap().count(), 1);
    let loaded = Identity::load_or_create(&state).unwrap();
    assert_eq!(made.public_key(), loaded.public_key());
    assert_eq!(made.node_id(), loaded.node_id());
    // The secret never shows in a debug print.
    assert!(!format!("{made:?}").contains(&text[18..82]));
}

#[test]
fn the_node_id_is_the_start_of_the_keys_sha256() {
    let identity = Identity::generate();
    let id = identity.node_id();
    assert_eq!(id.len(), NODE_ID_HEX_DIGITS);
    let full = ferry_fs::sha256_hex(identity.public_key().as_bytes());
    assert!(full.starts_with(&id));
    assert_eq!(node_id(&identity.public_key()), id);
    assert_ne!(Identity::generate().node_id(), id);
}

#[test]
fn nodes_starting_at_once_keep_one_key() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let keys: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| Identity::load_or_create(&state).unwrap().public_key()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(fs::read_dir(&state).unwrap().count(), 1);
}

#[test]
fn a_key_file_others_can_read_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    Identity::load_or_create(&state).unwrap();
    for bad in [0o644, 0o640, 0o604, 0o660] {
        fs::set_permissions(key_file_path(&state), fs::Permissions::from_mode(bad)).unwrap();
        let e = refused(&state);
        assert!(e.contains("chmod 600") && e.contains(KEY_FILE_NAME), "{e}");
    }
    fs::set_permissions(key_file_path(&state), fs::Permissions::from_mode(0o400)).unwrap();
    assert!(Identity::load_or_create(&state).is_ok());
}

#[test]
fn a_state_folder_others_can_enter_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    fs::create_dir(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(refused(&state).contains("chmod 700"));
    // Nothing was written into it.
    assert_eq!(fs::read_dir(&state).unwrap().count(), 0);
}

#[test]
fn links_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let real = root.path().join("real");
    Identity::load_or_create(&real).unwrap();
    // A linked state folder.
    let linked_state = root.path().join("linked");
    symlink(&real, &linked_state).unwrap();
    assert!(refused(&linked_state).contains("symbolic link"));
    // A key file that is a link to a good key.
    let state = root.path().join("state");
    fs::create_dir(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    symlink(key_file_path(&real), key_file_path(&state)).unwrap();
    assert!(refused(&state).contains("symbolic link"));
    // A key file that is a folder.
    fs::remove_file(key_file_path(&state)).unwrap();
    fs::create_dir(key_file_path(&state)).unwrap();
    assert!(refused(&state).contains("not a regular file"));
    // A state folder that is a file.
    let file = root.path().join("file");
    fs::write(&file, b"x").unwrap();
    assert!(refused(&file).contains("not a folder"));
}

#[test]
fn bad_contents_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    Identity::load_or_create(&state).unwrap();
    let good = fs::read_to_string(key_file_path(&state)).unwrap();
    let digits = &good[18..82];
    let bad: Vec<String> = vec![
        String::new(),
        "\n".into(),
        format!("ferry-node-key-v1 {digits}"),     // no newline
        format!("ferry-node-key-v1 {digits}\n\n"), // two
        format!("ferry-node-key-v2 {digits}\n"),   // another version
        format!("ferry-node-key-v1 {}\n", &digits[..62]), // short
        format!("ferry-node-key-v1 {digits}00\n"), // long
        format!("ferry-node-key-v1 {}\n", digits.to_uppercase()),
        format!("ferry-node-key-v1 {}zz\n", &digits[..62]),
        "x".repeat(4096),
    ];
    for contents in bad {
        fs::write(key_file_path(&state), &contents).unwrap();
        let e = refused(&state);
        assert!(
            e.contains("not a node key") || e.contains("too long"),
            "{contents:?}: {e}"
        );
    }
    fs::write(key_file_path(&state), [0xffu8, 0xfe, 0x00]).unwrap();
    assert!(refused(&state).contains("not a node key"));
    // The good key still loads.
    fs::write(key_file_path(&state), &good).unwrap();
    assert!(Identity::load_or_create(&state).is_ok());
}
