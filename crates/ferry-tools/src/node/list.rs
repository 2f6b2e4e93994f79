//! `dir_list` with `node`: one page of a folder on a node, under the same page rules as
//! the workspace's listing; tokens are bound to the node and the path.

use ferry_codes::Code;
use ferry_exec::ops::{FileInfo, Kind};
use ferry_node::commands::{
    DIR_LIST, DirListArgs, DirListHead, ENTRY_LINE_MAX_BYTES, EntryKind, NodeEntry,
};
use ferry_node::policy::Access;

use super::{reach, wire};
use crate::args::{self, DirList};
use crate::dir_list::{Page, page_size, start_after};
use crate::{ToolError, ToolOutput, Toolbox};

pub(crate) async fn dir_list(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: DirList = args::parse("dir_list", args)?;
    let node = args.node.as_deref().unwrap_or_default();
    let max = page_size(args.max_entries)?;
    let reached = reach(tools, node, DIR_LIST, Access::Read, &args.path)?;
    // Everything from here on may carry the node's own words.
    let outcome: Result<ToolOutput, ToolError> = async {
        let binding = format!("node {}\n{}", reached.id, args.path);
        let after = start_after(args.page_token.as_deref(), &binding)?;
        let request = DirListArgs {
            path: args.path.clone(),
            after: after.clone(),
            limit: max as u32,
            follow_symlinks: reached.follow_symlinks,
            // The node lists only what the gateway's rules let this agent read too.
            gateway_rules: Some(reached.rules.sent(Access::Read)),
        };
        let (head, body): (DirListHead, _) = reached.call(DIR_LIST, &request).await?;
        reached.check(Access::Read, &head.path)?;
        let entries: Vec<NodeEntry> =
            wire::lines(body, max.min(head.count as usize), ENTRY_LINE_MAX_BYTES).await?;
        let candidates = checked_entries(entries, after.as_deref())?;
        let mut header = format!("{} on {}", head.path, reached.source);
        if head.unlisted > 0 {
            header.push_str(&format!(
                " ({} entries are not shown: their names are not UTF-8)",
                head.unlisted
            ));
        }
        Ok(Page {
            source: &reached.source,
            header,
            binding: &binding,
            path: &head.path,
            candidates: &candidates,
            more_beyond: head.more,
            page_token: args.page_token.as_deref(),
        }
        .render())
    }
    .await;
    reached.guard(outcome)
}

/// The node's entries as a listing shows them, refusing what no honest node sends: a
/// name that is not one component, or entries out of order or before the page's start.
fn checked_entries(
    entries: Vec<NodeEntry>,
    after: Option<&str>,
) -> Result<Vec<FileInfo>, ToolError> {
    let mut previous = after.map(str::to_owned);
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        if entry.name.is_empty()
            || entry.name == "."
            || entry.name == ".."
            || entry.name.contains(['/', '\0'])
        {
            return Err(ToolError::new(
                Code::BadFrame,
                format!("the node listed {:?}, which is not a name", entry.name),
            ));
        }
        if previous
            .as_deref()
            .is_some_and(|p| p.as_bytes() >= entry.name.as_bytes())
        {
            return Err(ToolError::new(
                Code::BadFrame,
                "the node's listing is not sorted by name, or repeats the page before",
            ));
        }
        previous = Some(entry.name.clone());
        out.push(FileInfo {
            kind: match entry.kind {
                EntryKind::File => Kind::File,
                EntryKind::Dir => Kind::Dir,
                EntryKind::Symlink => Kind::Symlink,
                EntryKind::Other => Kind::Other,
            },
            path: entry.name,
            size: entry.size,
            mtime: entry.mtime,
            mode: entry.mode & 0o7777,
        });
    }
    Ok(out)
}
