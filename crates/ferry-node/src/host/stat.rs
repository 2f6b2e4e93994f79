//! `file.stat`: what is at a path, the path's last component not followed.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use ferry_fs::{FsError, Metadata};

use super::resolve::{Target, root};
use super::{NodePolicy, blocking, head};
use crate::Reply;
use crate::commands::{EntryKind, FileStatArgs, NodeEntry};
use crate::policy::Access;

/// Serves one `file.stat`.
pub(super) async fn serve(policy: Arc<NodePolicy>, args: FileStatArgs, reply: Reply) {
    let answer = blocking(move || {
        let target = Target::new(&args.path, args.follow_symlinks, &policy)?;
        target.check(&policy, Access::Read)?;
        let meta = if target.canonical == "/" {
            root().and_then(|dir| dir.own_metadata())
        } else {
            let (parent, name) = target.open_parent()?;
            parent.metadata(&name)
        }
        .map_err(|e| target.fail(e))?;
        if meta.kind == ferry_fs::EntryKind::Symlink {
            return Err(target.fail(FsError::PathEscapes));
        }
        Ok(node_entry(target.canonical, &meta))
    })
    .await;
    match answer {
        // A caller gone meanwhile is told nothing.
        Ok(entry) => drop(reply.ok(head(&entry))),
        Err(e) => reply.fail(e),
    }
}

/// The entry `name` with the metadata `meta`, as the link carries it.
pub(super) fn node_entry(name: String, meta: &Metadata) -> NodeEntry {
    let kind = match meta.kind {
        ferry_fs::EntryKind::File => EntryKind::File,
        ferry_fs::EntryKind::Dir => EntryKind::Dir,
        ferry_fs::EntryKind::Symlink => EntryKind::Symlink,
        ferry_fs::EntryKind::Other => EntryKind::Other,
    };
    NodeEntry {
        name,
        kind,
        size: if kind == EntryKind::File {
            meta.size
        } else {
            0
        },
        mtime: seconds(meta.mtime),
        mode: meta.mode & 0o7777,
    }
}

/// Seconds since the Unix epoch (0 for a time before it).
pub(super) fn seconds(time: std::time::SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
