//! `dir.list`: one page of a folder, sorted by name in byte order.
//!
//! The names are read in one pass and only the page's worth of the smallest ones after
//! `after` are kept (a bounded heap), so a folder of any size costs the page, not the
//! folder; only the entries sent are stat'ed.

use std::collections::BinaryHeap;
use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferry_config::limits::DIR_LIST_MAX_ENTRIES;
use ferry_fs::{Dir, FsError, is_temporary};
use tokio_util::sync::CancellationToken;

use super::resolve::{Target, child_path, nameable};
use super::stat::node_entry;
use super::{NodePolicy, blocking, head, invalid, with_gateway_rules};
use crate::commands::{DirListArgs, DirListHead, ENTRY_LINE_MAX_BYTES};
use crate::policy::Access;
use crate::{NodeError, Reply};

/// Bytes of listing sent in one piece of the body.
const BATCH_BYTES: usize = 64 * 1024;

/// A page, ready to send.
struct Page {
    head: DirListHead,
    /// One JSON line per entry, each with its newline.
    lines: Vec<Vec<u8>>,
}

/// Serves one `dir.list`.
pub(super) async fn serve(policy: Arc<NodePolicy>, args: DirListArgs, reply: Reply) {
    if u64::from(args.limit) > DIR_LIST_MAX_ENTRIES {
        return reply.fail(invalid(format!(
            "a page holds at most {DIR_LIST_MAX_ENTRIES} entries, not {}",
            args.limit
        )));
    }
    // What the gateway's rules do not allow is not listed either.
    let policy = match with_gateway_rules(policy, args.gateway_rules.as_ref(), Access::Read) {
        Ok(policy) => policy,
        Err(e) => return reply.fail(e),
    };
    let cancel = reply.cancellation();
    let page = match blocking(move || page(&policy, &args, &cancel)).await {
        Ok(page) => page,
        Err(e) => return reply.fail(e),
    };
    let Ok(mut body) = reply.stream(head(&page.head)) else {
        return;
    };
    let mut batch = BytesMut::new();
    for line in page.lines {
        batch.extend_from_slice(&line);
        if batch.len() >= BATCH_BYTES && body.send(batch.split().freeze()).await.is_err() {
            return;
        }
    }
    if !batch.is_empty() && body.send(Bytes::from(batch)).await.is_err() {
        return;
    }
    let _ = body.finish().await;
}

fn page(
    policy: &NodePolicy,
    args: &DirListArgs,
    cancel: &CancellationToken,
) -> Result<Page, NodeError> {
    let target = Target::new(&args.path, args.follow_symlinks, policy)?;
    target.check(policy, Access::Read)?;
    let dir = target.open_dir()?;
    let limit = args.limit as usize;
    let mut smallest: BinaryHeap<String> = BinaryHeap::with_capacity(limit + 1);
    let mut unlisted = 0u64;
    let mut reader = rustix::fs::Dir::read_from(dir.as_fd())
        .map_err(|e| target.fail(FsError::from_raw_os_error(e.raw_os_error())))?;
    let mut seen = 0u64;
    while let Some(entry) = reader.read() {
        let entry = entry.map_err(|e| target.fail(FsError::from_raw_os_error(e.raw_os_error())))?;
        seen += 1;
        if seen.is_multiple_of(4096) && cancel.is_cancelled() {
            return Err(NodeError::Cancelled);
        }
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let Some(name) = nameable(bytes) else {
            unlisted += 1;
            continue;
        };
        if is_temporary(name)
            || args.after.as_deref().is_some_and(|after| name <= after)
            || !policy
                .rules
                .allows(Access::Read, &child_path(&target.canonical, name))
        {
            continue;
        }
        // Keeps the page's worth (and one more, to tell whether more remain).
        if smallest.len() <= limit {
            smallest.push(name.to_owned());
        } else if smallest
            .peek()
            .is_some_and(|largest| name < largest.as_str())
        {
            smallest.pop();
            smallest.push(name.to_owned());
        }
    }
    let mut names = smallest.into_sorted_vec();
    let more = names.len() > limit;
    names.truncate(limit);
    let lines = entry_lines(&dir, &target, names, &mut unlisted)?;
    Ok(Page {
        head: DirListHead {
            path: target.canonical.clone(),
            count: lines.len() as u32,
            more,
            unlisted,
        },
        lines,
    })
}

/// The JSON lines of `names`, each stat'ed without following links; an entry gone since
/// it was read is left out.
fn entry_lines(
    dir: &Dir,
    target: &Target,
    names: Vec<String>,
    unlisted: &mut u64,
) -> Result<Vec<Vec<u8>>, NodeError> {
    let mut lines = Vec::with_capacity(names.len());
    for name in names {
        let meta = match dir.metadata(&name) {
            Ok(meta) => meta,
            Err(FsError::NotFound) => continue,
            Err(e) => return Err(target.fail(e)),
        };
        let mut line = serde_json::to_vec(&node_entry(name, &meta)).expect("plain data");
        line.push(b'\n');
        if line.len() > ENTRY_LINE_MAX_BYTES {
            *unlisted += 1;
            continue;
        }
        lines.push(line);
    }
    Ok(lines)
}
