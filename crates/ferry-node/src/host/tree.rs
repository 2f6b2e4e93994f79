//! `dir.fetch`: a folder's tree as a checked gzip tar.
//!
//! The walk ([`super::walk`]) is done and checked before the head is sent. The tar is
//! then built on the blocking pool into a bounded channel the async side sends from:
//! each file is opened from its parent's handle and must still be what the walk saw.
//! Last, before the trailer, the path is resolved again and must still be the folder
//! that was walked; otherwise the body fails and the gateway gets no valid archive.

use std::cell::RefCell;
use std::io::{self, Write};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use ferry_archive::{ArchiveError, EntryMeta, TarWriter};
use ferry_codes::Code;
use ferry_fs::{Dir, Follow, FsError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::errors::refuse;
use super::fetch::QUEUED_CHUNKS;
use super::resolve::{Identity, Target};
use super::walk::{Kind, Walk, changed, walk};
use super::{NodePolicy, blocking, head, invalid};
use crate::checked::CheckedWriter;
use crate::commands::{DirFetchArgs, DirFetchHead};
use crate::{NodeError, Reply};

/// The most descendants a gateway may ask for: the walk holds each one's metadata until
/// the archive is built.
pub const WALK_MAX_DESCENDANTS: u64 = 100_000;

/// Bytes of compressed archive sent in one piece.
const PIECE_BYTES: usize = 64 * 1024;

/// Serves one `dir.fetch`.
pub(super) async fn serve(policy: Arc<NodePolicy>, args: DirFetchArgs, reply: Reply) {
    if args.max_descendants > WALK_MAX_DESCENDANTS {
        return reply.fail(invalid(format!(
            "this node walks at most {WALK_MAX_DESCENDANTS} descendants, not {}",
            args.max_descendants
        )));
    }
    let cancel = reply.cancellation();
    let walked = {
        let (policy, args, cancel) = (policy.clone(), args.clone(), cancel.clone());
        blocking(move || {
            walk(
                &policy,
                &args.path,
                args.follow_symlinks,
                args.max_descendants,
                &cancel,
            )
        })
        .await
    };
    let walked = match walked {
        Ok(walked) => walked,
        Err(e) => return reply.fail(e),
    };
    let answer = DirFetchHead {
        path: walked.target.canonical.clone(),
        descendants: walked.entries.len() as u64,
        skipped: walked.skipped,
    };
    let Ok(body) = reply.stream(head(&answer)) else {
        return;
    };
    let mut body = CheckedWriter::new(body);
    let (pieces, mut queued) = mpsc::channel::<Bytes>(QUEUED_CHUNKS);
    let building = tokio::task::spawn_blocking(move || {
        build(&walked, &args, pieces, &cancel)?;
        check_still_there(&policy, &args, &walked)
    });
    while let Some(piece) = queued.recv().await {
        if body.send(piece).await.is_err() {
            // The gateway gave the call up: dropping the queue stops the builder.
            return;
        }
    }
    match building.await {
        Ok(Ok(())) => drop(body.finish().await),
        Ok(Err(e)) => body.fail(e),
        Err(e) => body.fail(refuse(Code::Internal, format!("the archive stopped: {e}"))),
    }
}

/// Writes the tar of the walked tree into `pieces`.
fn build(
    walked: &Walk,
    args: &DirFetchArgs,
    pieces: mpsc::Sender<Bytes>,
    cancel: &CancellationToken,
) -> Result<(), NodeError> {
    let target = &walked.target;
    let stop = Rc::new(RefCell::new(None));
    let out = Pieces {
        pieces,
        held: Vec::with_capacity(PIECE_BYTES),
        total: 0,
        max_bytes: args.max_bytes,
        stop: stop.clone(),
    };
    // A failure of the output is its own reason, not the archive's.
    let failed = |e: ArchiveError| match stop.borrow_mut().take() {
        Some(reason) => reason,
        None => match e {
            ArchiveError::ChangedMeanwhile { path, found, .. } => changed(target, &path, &found),
            e => refuse(e.code(), e.to_string()),
        },
    };
    let mut tar = TarWriter::gzip(out);
    let mut folders = vec![walked.root.try_clone().map_err(|e| target.fail(e))?];
    for entry in &walked.entries {
        if cancel.is_cancelled() {
            return Err(NodeError::Cancelled);
        }
        folders.truncate(entry.depth + 1);
        let parent = folders.last().expect("the root stays");
        let meta = EntryMeta {
            mtime: entry.mtime,
            mode: entry.mode,
        };
        let gone = |e: FsError| changed(target, &entry.rel, &e.to_string());
        match entry.kind {
            Kind::Dir => {
                let dir = parent.open_dir(entry.name(), Follow::Never).map_err(gone)?;
                same(&dir, entry.id, None, target, &entry.rel)?;
                tar.add_dir(&entry.rel, meta).map_err(failed)?;
                folders.push(dir);
            }
            Kind::File(size) => {
                let file = parent
                    .open_file(entry.name(), Follow::Never)
                    .map_err(gone)?;
                same(&file, entry.id, Some(size), target, &entry.rel)?;
                tar.add_file(&entry.rel, size, meta, &file)
                    .map_err(failed)?;
            }
        }
    }
    let mut out = tar.finish().map_err(failed)?;
    out.flush()
        .map_err(|_| stop.borrow_mut().take().unwrap_or(NodeError::Cancelled))
}

/// Refuses an object that is not the one the walk saw (or a file not of its size).
fn same(
    fd: impl std::os::fd::AsFd,
    expected: Identity,
    size: Option<u64>,
    target: &Target,
    rel: &str,
) -> Result<(), NodeError> {
    let (id, stat) = Identity::of(fd).map_err(|e| target.fail(e))?;
    if id != expected {
        return Err(changed(target, rel, "another file took its place"));
    }
    if let Some(size) = size
        && stat.st_size as u64 != size
    {
        return Err(changed(
            target,
            rel,
            &format!("it had {size} bytes, now {}", stat.st_size),
        ));
    }
    Ok(())
}

/// Resolves the path again: it must still lead to the folder that was walked.
fn check_still_there(
    policy: &NodePolicy,
    args: &DirFetchArgs,
    walked: &Walk,
) -> Result<(), NodeError> {
    let moved = || {
        refuse(
            Code::CanonicalPathChanged,
            format!(
                "{} is no longer the folder that was sent (it was moved or replaced \
                 meanwhile), so the archive is not valid",
                walked.target.asked
            ),
        )
    };
    let again = Target::new(&args.path, args.follow_symlinks, policy).map_err(|_| moved())?;
    if again.canonical != walked.target.canonical {
        return Err(moved());
    }
    let dir: Dir = again.open_dir().map_err(|_| moved())?;
    match Identity::of(&dir) {
        Ok((id, _)) if id == walked.root_id => Ok(()),
        _ => Err(moved()),
    }
}

/// The archive's output: compressed bytes gathered into pieces for the link, counted
/// against the most the gateway takes.
struct Pieces {
    pieces: mpsc::Sender<Bytes>,
    held: Vec<u8>,
    total: u64,
    max_bytes: u64,
    /// Why the output stopped, when it did.
    stop: Rc<RefCell<Option<NodeError>>>,
}

impl Pieces {
    fn stopped(&self, reason: NodeError) -> io::Error {
        *self.stop.borrow_mut() = Some(reason);
        io::Error::other("the archive's output stopped")
    }

    fn send_held(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let piece = std::mem::replace(&mut self.held, Vec::with_capacity(PIECE_BYTES));
        if self.pieces.blocking_send(Bytes::from(piece)).is_err() {
            return Err(self.stopped(NodeError::Cancelled));
        }
        Ok(())
    }
}

impl Write for Pieces {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.total += buf.len() as u64;
        if self.total > self.max_bytes {
            let max = self.max_bytes;
            return Err(self.stopped(refuse(
                Code::TooLarge,
                format!("the folder's archive passes the {max} bytes asked for at most"),
            )));
        }
        self.held.extend_from_slice(buf);
        if self.held.len() >= PIECE_BYTES {
            self.send_held()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_held()
    }
}
