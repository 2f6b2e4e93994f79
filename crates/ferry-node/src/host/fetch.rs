//! `file.fetch`: one regular file, streamed as a checked body of exactly its size.
//!
//! A blocking reader fills chunks into a bounded channel that the async side sends on,
//! so at most a few chunks are in memory whatever the file's size.

use std::fs::File;
use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use ferry_codes::Code;
use ferry_fs::{Dir, EntryKind, Follow, FsError, Metadata};
use tokio::sync::mpsc;

use super::errors::refuse;
use super::resolve::Target;
use super::stat::seconds;
use super::{NodePolicy, blocking, head};
use crate::checked::CheckedWriter;
use crate::commands::{FetchHead, FileFetchArgs};
use crate::policy::Access;
use crate::{NodeError, Reply};

/// Bytes read from the file at a time.
pub(super) const CHUNK_BYTES: usize = 256 * 1024;

/// Chunks waiting between the reader and the link.
pub(super) const QUEUED_CHUNKS: usize = 2;

/// Serves one `file.fetch`.
pub(super) async fn serve(policy: Arc<NodePolicy>, args: FileFetchArgs, reply: Reply) {
    let (file, answer, shown) = match blocking(move || open(&policy, &args)).await {
        Ok(opened) => opened,
        Err(e) => return reply.fail(e),
    };
    let size = answer.size;
    let Ok(body) = reply.stream(head(&answer)) else {
        return;
    };
    let mut body = CheckedWriter::new(body);
    let (chunks, mut queued) = mpsc::channel::<Bytes>(QUEUED_CHUNKS);
    let reading = tokio::task::spawn_blocking(move || read_exactly(file, size, &chunks, &shown));
    while let Some(chunk) = queued.recv().await {
        if body.send(chunk).await.is_err() {
            // The gateway gave the call up: dropping the queue stops the reader.
            return;
        }
    }
    match reading.await {
        Ok(Ok(())) => drop(body.finish().await),
        Ok(Err(e)) => body.fail(e),
        Err(e) => body.fail(refuse(Code::Internal, format!("the reader stopped: {e}"))),
    }
}

/// Opens the regular file, refusing anything else and a file over `max_bytes`.
fn open(policy: &NodePolicy, args: &FileFetchArgs) -> Result<(File, FetchHead, String), NodeError> {
    let target = Target::new(&args.path, args.follow_symlinks, policy)?;
    target.check(policy, Access::Read)?;
    let (parent, name) = target.open_parent()?;
    let file = open_regular(&parent, &name, &target)?;
    let meta = Metadata::of_file(&file).map_err(|e| target.fail(e))?;
    if meta.size > args.max_bytes {
        return Err(refuse(
            Code::FileTooLarge,
            format!(
                "{} has {} bytes, more than the {} bytes asked for at most",
                target.asked, meta.size, args.max_bytes
            ),
        ));
    }
    let answer = FetchHead {
        path: target.canonical.clone(),
        size: meta.size,
        mtime: seconds(meta.mtime),
        mode: meta.mode & 0o7777,
    };
    Ok((file, answer, target.asked))
}

/// Opens `name` of `parent` for reading if it is a regular file: looked at first without
/// following it (so a device is never opened), then opened `O_NOFOLLOW`.
pub(super) fn open_regular(parent: &Dir, name: &str, target: &Target) -> Result<File, NodeError> {
    let not_a_file = |what: &str| {
        refuse(
            Code::NotAFile,
            format!("{} is {what}, not a regular file", target.asked),
        )
    };
    match parent.metadata(name).map_err(|e| target.fail(e))?.kind {
        EntryKind::File => {}
        EntryKind::Symlink => return Err(target.fail(FsError::PathEscapes)),
        EntryKind::Dir => return Err(not_a_file("a folder")),
        EntryKind::Other => return Err(not_a_file("a device, a FIFO or a socket")),
    }
    parent.open_file(name, Follow::Never).map_err(|e| match e {
        FsError::IsDirectory => not_a_file("a folder"),
        FsError::NotRegular => not_a_file("a device, a FIFO or a socket"),
        e => target.fail(e),
    })
}

/// Reads exactly `size` bytes of `file` into `chunks`; a file that ends sooner changed
/// meanwhile.
fn read_exactly(
    mut file: File,
    size: u64,
    chunks: &mpsc::Sender<Bytes>,
    shown: &str,
) -> Result<(), NodeError> {
    let mut left = size;
    while left > 0 {
        let want = usize::try_from(left).map_or(CHUNK_BYTES, |left| left.min(CHUNK_BYTES));
        // Read into spare capacity: a zeroed buffer would cost a pass over every byte.
        let mut chunk = Vec::with_capacity(want);
        let read = (&mut file).take(want as u64).read_to_end(&mut chunk);
        match read {
            Ok(n) if n < want => {
                return Err(refuse(
                    Code::ChangedMeanwhile,
                    format!(
                        "{shown} shrank while it was read: it had {size} bytes, then only {}",
                        size - left + n as u64
                    ),
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(super::errors::fs_error(FsError::from_io(e), shown)),
        }
        left -= want as u64;
        if chunks.blocking_send(Bytes::from(chunk)).is_err() {
            return Err(NodeError::Cancelled);
        }
    }
    Ok(())
}
