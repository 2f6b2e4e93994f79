//! The transfer tools against a paired node (spec nodes.md N-TOOLS): `dir_list` with
//! `node`, `file_fetch`, `file_push` and `dir_fetch`.
//!
//! Every call goes through [`reach`] first, which applies the gateway's side of the
//! policy in this order: the node is one this person may use (`[nodes.<id>] persons`;
//! to anyone else it does not exist), it is approved and not revoked, it serves the
//! command (the approval ∩ what it advertises ∩ `[nodes.<id>] commands`), the path is
//! absolute and normal and the gateway's globs allow it, and only then is its link
//! looked up (`node_offline` at once when it has none). The node checks its own policy
//! on the canonical path again, and the gateway checks the canonical path it answers
//! with too, so neither side has to trust the other.
//!
//! These calls run on the runtime, not on a blocking thread: dropping one (a cancelled
//! MCP request) drops its stream, which tells the node to stop.

mod fetch;
mod list;
mod push;
mod tree;
mod wire;

use std::sync::Arc;

use ferry_codes::Code;
use ferry_node::hub::Hub;
use ferry_node::policy::{Access, PathRules, normal_path};
use ferry_node::{Link, NodeError};
use ferry_site::{NodeRecord, NodeState};

use crate::{ToolError, ToolOutput, Toolbox};

pub(crate) use fetch::file_fetch;
pub(crate) use list::dir_list;
pub(crate) use push::file_push;
pub(crate) use tree::dir_fetch;
/// The typed arguments of the node tools, for [`crate::fuzzing`].
pub(crate) use {fetch::FileFetch, push::FilePush, tree::DirFetch};

/// The nodes a toolbox reaches: the gateway's hub of links, and, on a site several
/// gateways serve, the way to the gateway holding a node's link when this one does not
/// (spec S-GATEWAYS).
#[derive(Clone)]
pub struct Nodes {
    pub(crate) hub: Arc<Hub>,
    elsewhere: Option<(String, Arc<dyn Forward>)>,
}

/// Carries a node tool's call to another gateway of the site, which holds the node's
/// link, and brings its answer back.
pub trait Forward: Send + Sync {
    /// Calls `tool` with `args` for `person` on gateway `gateway`.
    fn forward(
        &self,
        gateway: String,
        person: String,
        tool: String,
        args: serde_json::Value,
    ) -> futures_util::future::BoxFuture<'static, Result<ToolOutput, ToolError>>;
}

impl Nodes {
    /// The nodes connected to `hub`.
    pub fn new(hub: Arc<Hub>) -> Nodes {
        Nodes {
            hub,
            elsewhere: None,
        }
    }

    /// Also the nodes linked to the site's other gateways: this gateway is `here`, and
    /// `forward` carries a call to the one holding the node's link.
    pub fn with_forward(mut self, here: &str, forward: Arc<dyn Forward>) -> Nodes {
        self.elsewhere = Some((here.to_owned(), forward));
        self
    }
}

/// The gateway to forward a call naming `node` to: another gateway of the site holds
/// its link and this one does not. `None`: the call runs here (and says `node_offline`
/// when the node is nowhere), as do calls that name no node this person may use.
pub(crate) fn held_elsewhere(tools: &Toolbox, node: &str) -> Option<(String, Arc<dyn Forward>)> {
    let nodes = tools.nodes()?;
    let (here, forward) = nodes.elsewhere.as_ref()?;
    let record = find(&usable(tools).ok()?, node).ok()?;
    let away = record.connected
        && !record.gateway.is_empty()
        && record.gateway != *here
        && !nodes.hub.is_connected(&record.id);
    away.then(|| (record.gateway, forward.clone()))
}

/// A node a call may use, with the gateway's rules for it and its open link.
pub(crate) struct Reached {
    pub id: String,
    /// The wrapper's `source` for what this node sends: `node:<name>`.
    pub source: String,
    pub rules: PathRules,
    pub follow_symlinks: bool,
    pub link: Link,
}

impl Reached {
    /// Calls `command` with `args` on the node, waiting for a stream if the link is full;
    /// the answer's head parsed strictly.
    pub async fn call<A: serde::Serialize, H: serde::de::DeserializeOwned>(
        &self,
        command: &str,
        args: &A,
    ) -> Result<(H, ferry_node::DataReader), ToolError> {
        let args = serde_json::to_value(args)
            .map_err(|e| ToolError::new(Code::Internal, format!("the {command} request: {e}")))?;
        let call = self.link.open_queued(command, args, false).await?;
        let response = tokio::time::timeout(wire::STALL, call.response())
            .await
            .map_err(|_| NodeError::Stalled(wire::STALL))??;
        Ok((wire::head(command, response.result)?, response.body))
    }

    /// Refuses `path` unless it is absolute and normal and the gateway's rules allow it
    /// so: the canonical path a node answers with is checked like a request's.
    pub fn check(&self, access: Access, path: &str) -> Result<(), ToolError> {
        normal_path(path)?;
        Ok(self.rules.check(access, path, "the gateway's")?)
    }

    /// A failure of a call that reached the node: its sentence may hold what the node
    /// said (an error's message, a path, a name), so the sentence is shown inside the
    /// N-WRAP wrapper, after a line of the gateway's own.
    pub fn guard(&self, outcome: Result<ToolOutput, ToolError>) -> Result<ToolOutput, ToolError> {
        outcome.map_err(|e| {
            ToolError::new(
                e.code,
                format!(
                    "the call to {} failed ({}); the details below may quote the node:\n{}",
                    self.source,
                    e.code.as_str(),
                    crate::wrap::wrap(&self.source, &e.message)
                ),
            )
        })
    }
}

/// The node `node` (an id or a name) for `command` on `path`, as this person may use it.
pub(crate) fn reach(
    tools: &Toolbox,
    node: &str,
    command: &str,
    access: Access,
    path: &str,
) -> Result<Reached, ToolError> {
    let Some(nodes) = tools.nodes() else {
        return Err(ToolError::new(
            Code::NodeOffline,
            "this server has no node link; node tools work through the gateway's /mcp",
        ));
    };
    let config = &tools.site().config().nodes;
    let record = find(&usable(tools)?, node)?;
    let Some(policy) = config.policy(&record.id) else {
        return Err(unknown(node));
    };
    match record.state {
        NodeState::Revoked => {
            return Err(ToolError::new(
                Code::NodeRevoked,
                format!("node {} was revoked", record.name),
            ));
        }
        NodeState::Pending => {
            return Err(ToolError::new(
                Code::CommandNotAllowed,
                format!(
                    "node {} is waiting for an admin's approval (`ferry node approve {}`)",
                    record.name, record.id
                ),
            ));
        }
        NodeState::Approved => {}
    }
    if !serves_command(Some(policy), &record, command) {
        return Err(ToolError::new(
            Code::CommandNotAllowed,
            format!("node {} is not allowed to serve {command}", record.name),
        ));
    }
    let rules = PathRules::new(&policy.allow_read, &policy.allow_write, &policy.deny)
        .map_err(|e| ToolError::new(Code::InvalidArguments, e))?;
    normal_path(path)?;
    rules.check(access, path, "the gateway's")?;
    let link = nodes.hub.link(&record.id)?;
    Ok(Reached {
        source: format!("node:{}", record.name),
        id: record.id,
        rules,
        follow_symlinks: policy.follow_symlinks,
        link,
    })
}

/// The nodes this person may use (`[nodes.<id>] persons`): to them, no other exists.
fn usable(tools: &Toolbox) -> Result<Vec<NodeRecord>, ToolError> {
    let config = &tools.site().config().nodes;
    Ok(tools
        .site()
        .nodes()?
        .into_iter()
        .filter(|r| {
            config
                .policy(&r.id)
                .is_some_and(|p| p.persons.iter().any(|who| who == tools.person()))
        })
        .collect())
}

/// Whether the node of `record` may serve `command` now: what its approval and its hello
/// have in common, narrowed by the gateway's `[nodes.<id>] commands` (`policy`) when set.
pub fn serves_command(
    policy: Option<&ferry_config::NodePolicyConfig>,
    record: &NodeRecord,
    command: &str,
) -> bool {
    let served = record.served_commands().iter().any(|c| c == command);
    let narrowed = policy
        .and_then(|p| p.commands.as_ref())
        .is_none_or(|only| only.iter().any(|c| c == command));
    served && narrowed
}

/// A call's `maxBytes`: `default` when absent, clamped to `cap`; 0 is refused.
pub(crate) fn max_bytes(asked: Option<u64>, default: u64, cap: u64) -> Result<u64, ToolError> {
    match asked {
        Some(0) => Err(ToolError::new(
            Code::InvalidArguments,
            "maxBytes must be at least 1",
        )),
        Some(n) => Ok(n.min(cap)),
        None => Ok(default.min(cap)),
    }
}

/// The record `node` names among `records`: its id, or the one live node by that name.
fn find(records: &[NodeRecord], node: &str) -> Result<NodeRecord, ToolError> {
    if let Some(record) = records.iter().find(|r| r.id == node) {
        return Ok(record.clone());
    }
    let named: Vec<&NodeRecord> = records
        .iter()
        .filter(|r| r.name == node && r.state != NodeState::Revoked)
        .collect();
    match named.as_slice() {
        [] => Err(unknown(node)),
        [one] => Ok((*one).clone()),
        several => {
            // Only approved ones are usable; a pending twin does not make a name ambiguous.
            let approved: Vec<&&NodeRecord> = several
                .iter()
                .filter(|r| r.state == NodeState::Approved)
                .collect();
            match approved.as_slice() {
                [one] => Ok((**one).clone()),
                _ => Err(ToolError::new(
                    Code::AmbiguousNode,
                    format!(
                        "{} nodes are named {node:?}; call it by its id",
                        several.len()
                    ),
                )),
            }
        }
    }
}

fn unknown(node: &str) -> ToolError {
    ToolError::new(
        Code::UnknownNode,
        format!(
            "there is no node {node:?} you may use; ask the operator to pair it and name you \
             in its [nodes.<id>] persons"
        ),
    )
}

impl From<NodeError> for ToolError {
    fn from(e: NodeError) -> ToolError {
        ToolError::new(e.code(), e.to_string())
    }
}

impl From<ferry_media::MediaError> for ToolError {
    fn from(e: ferry_media::MediaError) -> ToolError {
        ToolError::new(e.code(), e.shown())
    }
}

impl From<ferry_archive::ArchiveError> for ToolError {
    fn from(e: ferry_archive::ArchiveError) -> ToolError {
        ToolError::new(e.code(), e.to_string())
    }
}

impl From<ferry_fs::FsError> for ToolError {
    fn from(e: ferry_fs::FsError) -> ToolError {
        ferry_exec::RequestError::from(e).into()
    }
}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> ToolError {
        ferry_fs::FsError::from(e).into()
    }
}
