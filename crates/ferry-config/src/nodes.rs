//! The `[nodes]` section: the transfer tools' caps, the pending cap, and one
//! `[nodes.<node id>]` table of gateway policy per node (spec nodes N-PAIR, N-TOOLS).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::globs::path_glob_set;
use crate::limits::{
    NODE_DIR_FETCH_MAX_BYTES, NODE_FETCH_MAX_BYTES, NODE_ID_HEX_DIGITS, NODE_PUSH_MAX_BYTES,
    NODE_TERMINALS_MAX, NODE_TERMINALS_MAX_CEILING, NODE_TRANSFER_CAP_MAX_BYTES, NODES_MAX_PENDING,
    NODES_MAX_PENDING_CEILING,
};

/// The `[nodes]` section.
///
/// Its scalar keys and its per-node tables share one TOML table, so the per-node tables
/// are gathered by `flatten`; a misspelled scalar key then lands there and is refused for
/// not being a table, and a table named by anything but a node id is refused by
/// [`NodesConfig::check`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodesConfig {
    /// The most `file_fetch` fetches in one call, in bytes.
    pub fetch_max_bytes: u64,
    /// The most `file_push` sends in one call, in bytes.
    pub push_max_bytes: u64,
    /// The largest compressed archive `dir_fetch` takes, in bytes.
    pub dir_fetch_max_bytes: u64,
    /// Nodes that may wait for approval at once; a new key past it is refused.
    pub max_pending: usize,
    /// Terminals open at once on one node; one more is `429 too_many_terminals`.
    pub terminals_max: usize,
    /// The gateway's policy for each node, by node id. A node without one may do nothing
    /// through the transfer tools.
    #[serde(flatten)]
    pub policies: BTreeMap<String, NodePolicyConfig>,
}

impl Default for NodesConfig {
    fn default() -> Self {
        Self {
            fetch_max_bytes: NODE_FETCH_MAX_BYTES,
            push_max_bytes: NODE_PUSH_MAX_BYTES,
            dir_fetch_max_bytes: NODE_DIR_FETCH_MAX_BYTES,
            max_pending: NODES_MAX_PENDING,
            terminals_max: NODE_TERMINALS_MAX,
            policies: BTreeMap::new(),
        }
    }
}

/// One `[nodes.<node id>]` table: what the gateway lets the transfer tools do on that node
/// (the node checks its own policy after this one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodePolicyConfig {
    /// Narrows the approval to these commands; unset, the approval decides alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Globs over the node's absolute paths that may be read (listed, fetched).
    pub allow_read: Vec<String>,
    /// Globs over the node's absolute paths that may be written (pushed).
    pub allow_write: Vec<String>,
    /// Globs never read nor written, whatever the allow globs say.
    pub deny: Vec<String>,
    /// Whether a fetch may follow a symbolic link on the node.
    pub follow_symlinks: bool,
    /// The persons whose agents may use this node's transfer tools.
    pub persons: Vec<String>,
}

impl NodesConfig {
    /// The gateway's policy for `node_id`; `None`: nothing is allowed on that node.
    pub fn policy(&self, node_id: &str) -> Option<&NodePolicyConfig> {
        self.policies.get(node_id)
    }

    /// Checks the caps and every node table; the error is `(key, message)`, the key being
    /// the setting at fault and the message naming the node or glob.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        for (key, value) in [
            ("nodes.fetch_max_bytes", self.fetch_max_bytes),
            ("nodes.push_max_bytes", self.push_max_bytes),
            ("nodes.dir_fetch_max_bytes", self.dir_fetch_max_bytes),
        ] {
            if !(1..=NODE_TRANSFER_CAP_MAX_BYTES).contains(&value) {
                return Err((
                    key,
                    format!(
                        "must be 1 to {NODE_TRANSFER_CAP_MAX_BYTES} bytes (what the media store takes in one put)"
                    ),
                ));
            }
        }
        if !(1..=NODES_MAX_PENDING_CEILING).contains(&self.max_pending) {
            return Err((
                "nodes.max_pending",
                format!("must be 1 to {NODES_MAX_PENDING_CEILING}"),
            ));
        }
        if !(1..=NODE_TERMINALS_MAX_CEILING).contains(&self.terminals_max) {
            return Err((
                "nodes.terminals_max",
                format!(
                    "must be 1 to {NODE_TERMINALS_MAX_CEILING} (a node link carries 64 calls \
                     at once, and transfers need some of them)"
                ),
            ));
        }
        for (id, policy) in &self.policies {
            let is_id = id.len() == NODE_ID_HEX_DIGITS
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !is_id {
                let shown: String = id.chars().take(64).collect();
                return Err((
                    "nodes",
                    format!(
                        "[nodes.{shown:?}] does not name a node: a node id is {NODE_ID_HEX_DIGITS} lowercase hex digits, as `ferry node list` shows it"
                    ),
                ));
            }
            policy
                .check()
                .map_err(|why| ("nodes", format!("[nodes.{id}] {why}")))?;
        }
        Ok(())
    }
}

impl NodePolicyConfig {
    fn check(&self) -> Result<(), String> {
        for (field, globs) in [
            ("allow_read", &self.allow_read),
            ("allow_write", &self.allow_write),
            ("deny", &self.deny),
        ] {
            path_glob_set(globs).map_err(|why| format!("{field}: {why}"))?;
        }
        for command in self.commands.iter().flatten() {
            let plain = !command.is_empty()
                && command
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_');
            if !plain {
                return Err(format!("commands: {command:?} is not a command name"));
            }
        }
        if let Some(person) = self.persons.iter().find(|p| p.is_empty()) {
            return Err(format!("persons: {person:?} is not a person id"));
        }
        Ok(())
    }
}
