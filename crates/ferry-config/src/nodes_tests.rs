//! `[nodes]`: defaults, the file, the environment, every limit at its bounds, node tables.
use super::*;
use crate::limits::{
    NODE_DIR_FETCH_MAX_BYTES, NODE_FETCH_MAX_BYTES, NODE_PUSH_MAX_BYTES, NODE_TERMINALS_MAX,
    NODE_TERMINALS_MAX_CEILING, NODE_TRANSFER_CAP_MAX_BYTES, NODES_MAX_PENDING,
    NODES_MAX_PENDING_CEILING,
};

use std::io::Write as _;

const NODE: &str = "0123456789abcdef0123";

fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    Config::load(Some(f.path()), env)
}

fn invalid_key(result: Result<Config, ConfigError>) -> String {
    match result {
        Err(ConfigError::Invalid { key, message, .. }) => format!("{key}: {message}"),
        other => panic!("not refused as invalid: {other:?}"),
    }
}

#[test]
fn the_defaults_are_the_named_limits() {
    let nodes = Config::default().nodes;
    assert_eq!(nodes.fetch_max_bytes, NODE_FETCH_MAX_BYTES);
    assert_eq!(nodes.push_max_bytes, NODE_PUSH_MAX_BYTES);
    assert_eq!(nodes.dir_fetch_max_bytes, NODE_DIR_FETCH_MAX_BYTES);
    assert_eq!(nodes.max_pending, NODES_MAX_PENDING);
    assert_eq!(NODE_FETCH_MAX_BYTES, 16 * 1024 * 1024);
    assert!(nodes.policy(NODE).is_none(), "no table: nothing allowed");
}

#[test]
fn a_node_table_is_read_whole() {
    let c = load(
        &format!(
            r#"
[nodes]
fetch_max_bytes = 4096
max_pending = 3

[nodes.{NODE}]
commands = ["dir.list", "file.fetch"]
allow_read = ["/data/**"]
allow_write = ["/data/inbox/**"]
deny = ["**/.ssh/**"]
follow_symlinks = true
persons = ["alice"]
"#
        ),
        &[],
    )
    .unwrap();
    assert_eq!(c.nodes.fetch_max_bytes, 4096);
    assert_eq!(c.nodes.max_pending, 3);
    let policy = c.nodes.policy(NODE).unwrap();
    assert_eq!(
        policy.commands.as_deref(),
        Some(&["dir.list".to_string(), "file.fetch".to_string()][..])
    );
    assert_eq!(policy.allow_read, ["/data/**"]);
    assert_eq!(policy.allow_write, ["/data/inbox/**"]);
    assert_eq!(policy.deny, ["**/.ssh/**"]);
    assert!(policy.follow_symlinks);
    assert_eq!(policy.persons, ["alice"]);
    assert!(c.nodes.policy("ffffffffffffffffffff").is_none());
}

#[test]
fn an_unset_field_of_a_node_table_allows_nothing() {
    let c = load(&format!("[nodes.{NODE}]\npersons = [\"bob\"]\n"), &[]).unwrap();
    let policy = c.nodes.policy(NODE).unwrap();
    assert!(policy.allow_read.is_empty() && policy.allow_write.is_empty());
    assert!(!policy.follow_symlinks);
    assert!(policy.commands.is_none());
}

#[test]
fn the_environment_overrides_the_caps() {
    let c = load(
        "[nodes]\npush_max_bytes = 10\n",
        &[
            ("FERRY_NODES__FETCH_MAX_BYTES", "1000"),
            ("FERRY_NODES__PUSH_MAX_BYTES", "20"),
            ("FERRY_NODES__MAX_PENDING", "7"),
        ],
    )
    .unwrap();
    assert_eq!(c.nodes.fetch_max_bytes, 1000);
    assert_eq!(c.nodes.push_max_bytes, 20);
    assert_eq!(c.nodes.max_pending, 7);
    let Err(ConfigError::Invalid { key, var, .. }) =
        load("", &[("FERRY_NODES__DIR_FETCH_MAX_BYTES", "0")])
    else {
        panic!("0 taken")
    };
    assert_eq!(key, "nodes.dir_fetch_max_bytes");
    assert_eq!(var, "FERRY_NODES__DIR_FETCH_MAX_BYTES");
}

#[test]
fn every_byte_cap_is_checked_at_its_bounds() {
    let max = NODE_TRANSFER_CAP_MAX_BYTES;
    for key in ["fetch_max_bytes", "push_max_bytes", "dir_fetch_max_bytes"] {
        for (value, ok) in [
            (0, false),
            (1, true),
            (2, true),
            (max - 1, true),
            (max, true),
            (max + 1, false),
        ] {
            let result = load(&format!("[nodes]\n{key} = {value}\n"), &[]);
            if ok {
                assert!(result.is_ok(), "{key} = {value}: {result:?}");
            } else {
                let shown = invalid_key(result);
                assert!(shown.starts_with(&format!("nodes.{key}:")), "{shown}");
            }
        }
        assert!(load(&format!("[nodes]\n{key} = -1\n"), &[]).is_err());
    }
}

/// `[nodes] key` takes 1 to `ceiling` (checked at 0, 1, 2, ceiling − 1, ceiling and
/// ceiling + 1), read back through `get`.
fn check_cap_bounds(key: &str, ceiling: usize, get: fn(&Config) -> usize) {
    for (value, ok) in [
        (0, false),
        (1, true),
        (2, true),
        (ceiling - 1, true),
        (ceiling, true),
        (ceiling + 1, false),
    ] {
        let result = load(&format!("[nodes]\n{key} = {value}\n"), &[]);
        if ok {
            assert_eq!(get(&result.unwrap()), value, "{key} = {value}");
        } else {
            assert!(invalid_key(result).starts_with(&format!("nodes.{key}:")));
        }
    }
    assert!(load(&format!("[nodes]\n{key} = -1\n"), &[]).is_err());
}

#[test]
fn the_pending_cap_is_checked_at_its_bounds() {
    check_cap_bounds("max_pending", NODES_MAX_PENDING_CEILING, |c| {
        c.nodes.max_pending
    });
}

#[test]
fn the_terminal_cap_is_checked_at_its_bounds() {
    assert_eq!(Config::default().nodes.terminals_max, NODE_TERMINALS_MAX);
    check_cap_bounds("terminals_max", NODE_TERMINALS_MAX_CEILING, |c| {
        c.nodes.terminals_max
    });
}

#[test]
fn a_table_not_named_by_a_node_id_is_refused_by_name() {
    for bad in [
        "build-box",
        "0123456789ABCDEF0123",
        "0123456789abcdef012",
        "0123456789abcdef01234",
    ] {
        let shown = invalid_key(load(&format!("[nodes.\"{bad}\"]\n"), &[]));
        assert!(shown.contains(bad), "{shown}");
    }
    // A misspelled cap is not taken for a node table.
    assert!(load("[nodes]\nfetch_max_byte = 10\n", &[]).is_err());
    // A misspelled field of a node table is refused.
    assert!(load(&format!("[nodes.{NODE}]\nallow_reads = [\"/a\"]\n"), &[]).is_err());
}

#[test]
fn a_glob_that_cannot_be_used_is_refused_by_name() {
    for (field, glob) in [
        ("allow_read", "/data/["),
        ("allow_write", "relative/**"),
        ("deny", "/a/{b"),
    ] {
        let shown = invalid_key(load(
            &format!("[nodes.{NODE}]\n{field} = [\"/ok/**\", {glob:?}]\n"),
            &[],
        ));
        assert!(shown.contains(glob), "{shown}");
        assert!(shown.contains(field), "{shown}");
        assert!(shown.contains(NODE), "{shown}");
    }
}

#[test]
fn print_config_shows_the_section_and_reads_back() {
    let c = load(
        &format!("[nodes]\nmax_pending = 5\n[nodes.{NODE}]\nallow_read = [\"/srv/**\"]\n"),
        &[],
    )
    .unwrap();
    let printed = c.to_toml_string();
    assert!(printed.contains("[nodes]"), "{printed}");
    assert!(printed.contains("max_pending = 5"), "{printed}");
    assert!(printed.contains(&format!("[nodes.{NODE}]")), "{printed}");
    let again = load(&printed, &[]).unwrap();
    assert_eq!(again, c);
    // The defaults print the caps too.
    let printed = Config::default().to_toml_string();
    assert!(printed.contains("fetch_max_bytes = 16777216"), "{printed}");
}
