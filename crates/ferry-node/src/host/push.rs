//! `file.push`: a checked request body written atomically at a path.
//!
//! One blocking task does all the file system work: it opens the folder (making the
//! missing ones with `createParents`), writes a hidden temporary beside the target as
//! the body arrives through a bounded channel, and places it only once the body's
//! trailer and the call's `size` and `sha256` agree. A body that stops short (a
//! cancelled call, a dropped link) drops the temporary. A node killed midway leaves
//! it, written down in its state folder, and removes it at its next start
//! ([`super::pushing`]).

use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::Bytes;
use ferry_codes::Code;
use ferry_fs::{ByteSink, Dir, EntryKind, FileId, Follow, FsError, Placement};
use tokio::sync::{mpsc, oneshot};

use super::errors::refuse;
use super::fetch::QUEUED_CHUNKS;
use super::pushing::{InFlight, PushJournal};
use super::resolve::{Identity, Target, child_path, root};
use super::{NodePolicy, blocking, head, invalid, with_gateway_rules};
use crate::checked::{CheckedReader, Verified};
use crate::commands::{FilePushArgs, PushResult};
use crate::policy::Access;
use crate::{DataReader, NodeError, Reply};

/// What the async side hands the writer.
enum Piece {
    /// Bytes of the body.
    Bytes(Bytes),
    /// The body ended and its trailer matched.
    End(Verified),
}

/// The permission bits of a new file (a replaced file keeps its own).
const NEW_FILE_MODE: u32 = 0o644;

/// The permission bits of a folder `createParents` makes.
const NEW_FOLDER_MODE: u32 = 0o755;

/// Serves one `file.push`.
pub(super) async fn serve(
    policy: Arc<NodePolicy>,
    journal: Option<PushJournal>,
    args: FilePushArgs,
    body: DataReader,
    reply: Reply,
) {
    if !is_sha256_hex(&args.sha256) {
        return reply.fail(invalid("sha256 must be 64 lowercase hexadecimal digits"));
    }
    // The gateway's rules too, on the path the node itself resolves.
    let policy = match with_gateway_rules(policy, args.gateway_rules.as_ref(), Access::Write) {
        Ok(policy) => policy,
        Err(e) => return reply.fail(e),
    };
    let size = args.size;
    let (ready_tx, ready) = oneshot::channel();
    let (pieces_tx, pieces) = mpsc::channel::<Piece>(QUEUED_CHUNKS);
    let writing = blocking(move || write(&policy, journal.as_ref(), &args, ready_tx, pieces));
    let writing = tokio::spawn(writing);
    if let Ok(Err(e)) = ready.await {
        return reply.fail(e);
    }
    // A writer that ended without saying why (it panicked) is answered from its result.
    let cancel = reply.cancellation();
    let mut body = CheckedReader::new(body, size);
    loop {
        let next = tokio::select! {
            next = body.next() => next,
            () = cancel.cancelled() => Some(Err(NodeError::Cancelled)),
        };
        let piece = match next {
            Some(Ok(bytes)) => Piece::Bytes(bytes),
            None => Piece::End(body.verified().expect("a body that ended matched")),
            Some(Err(e)) => {
                // Dropping the channel unsent makes the writer drop its temporary; the
                // answer waits for that, so nothing is left once it is given.
                drop(pieces_tx);
                let _ = writing.await;
                return reply.fail(e);
            }
        };
        let end = matches!(piece, Piece::End(_));
        if pieces_tx.send(piece).await.is_err() || end {
            break;
        }
    }
    drop(pieces_tx);
    match writing.await {
        Ok(Ok(result)) => drop(reply.ok(head(&result))),
        Ok(Err(e)) => reply.fail(e),
        Err(e) => reply.fail(refuse(Code::Internal, format!("the writer stopped: {e}"))),
    }
}

/// Whether `text` is a sha256 as the link spells it.
fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The blocking side: prepares the temporary, says so on `ready`, fills it from
/// `pieces` and places it.
fn write(
    policy: &NodePolicy,
    journal: Option<&PushJournal>,
    args: &FilePushArgs,
    ready: oneshot::Sender<Result<(), NodeError>>,
    mut pieces: mpsc::Receiver<Piece>,
) -> Result<PushResult, NodeError> {
    let (mut staged, target) = match prepare(policy, journal, args) {
        Ok(prepared) => {
            let _ = ready.send(Ok(()));
            prepared
        }
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let verified = loop {
        match pieces.blocking_recv() {
            Some(Piece::Bytes(bytes)) => staged.sink.write(&bytes).map_err(|e| target.fail(e))?,
            Some(Piece::End(verified)) => break verified,
            // The body stopped: dropping `staged` removes the temporary.
            None => return Err(NodeError::Cancelled),
        }
    };
    let sha256 = verified.sha256_hex();
    if verified.size != args.size || sha256 != args.sha256 {
        return Err(NodeError::Mismatch(format!(
            "the body held {} bytes with sha256 {sha256}, but the call said {} bytes with \
             sha256 {}",
            verified.size, args.size, args.sha256
        )));
    }
    let written = staged.sink.finish().map_err(|e| target.fail(e))?;
    still_there(&target, &staged.dir)?;
    let replaced = staged
        .place(target.name()?, args.overwrite)
        .map_err(|e| match e {
            FsError::Exists => exists(&target),
            e => target.fail(e),
        })?;
    // The new name is durable only once its folder is.
    rustix::fs::fsync(staged.dir.as_fd())
        .map_err(|e| target.fail(FsError::from_raw_os_error(e.raw_os_error())))?;
    Ok(PushResult {
        path: target.canonical.clone(),
        size: written.size,
        sha256: written.sha256_hex(),
        replaced,
    })
}

/// The temporary a push fills beside its target; removed when dropped unless placed,
/// and then its record in the journal goes too.
struct Staged {
    dir: Dir,
    name: String,
    mode: u32,
    sink: ByteSink,
    placed: bool,
    /// Dropped after the temporary is removed (fields drop after `drop` runs).
    _in_flight: Option<InFlight>,
}

impl Staged {
    /// Makes the temporary in `dir`, written down in `journal` first (its folder is at
    /// `folder`); the file gets `mode` when placed, and takes at most `size` bytes.
    fn create(
        dir: Dir,
        folder: &str,
        journal: Option<&PushJournal>,
        mode: u32,
        size: u64,
    ) -> Result<Staged, FsError> {
        let in_flight = journal.map(|j| j.begin(folder, &dir)).transpose()?;
        let name = match &in_flight {
            Some(in_flight) => in_flight.temp.clone(),
            None => format!(
                "{}{}",
                ferry_fs::TEMP_PREFIX,
                ferry_fs::random_base32::<10>()
            ),
        };
        let file = dir.create_new_file(&name, 0o600)?;
        let mut staged = Staged {
            dir,
            name,
            mode,
            sink: ByteSink::new(file),
            placed: false,
            _in_flight: in_flight,
        };
        staged.sink.set_limit(size);
        Ok(staged)
    }

    /// Places the filled temporary at `target`: a file already there is replaced only
    /// with `overwrite` (else [`FsError::Exists`], decided by the rename itself); whether
    /// one was replaced.
    fn place(&mut self, target: &str, overwrite: bool) -> Result<bool, FsError> {
        // The file this push wrote, and only it, is placed.
        let id = FileId::of(self.sink.file())?;
        let placement = |replace| Placement {
            mode: self.mode,
            owner: None,
            replace,
        };
        let place = |replace| {
            ferry_fs::place_temporary(
                &self.dir,
                &self.name,
                &self.dir,
                target,
                id,
                placement(replace),
            )
        };
        let replaced = match place(false) {
            Ok(()) => false,
            // Checked again by the placement: what took the name may be a link or a folder.
            Err(FsError::Exists) if overwrite => {
                place(true)?;
                true
            }
            Err(e) => return Err(e),
        };
        self.placed = true;
        Ok(replaced)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.placed {
            let _ = ferry_fs::remove_temporary(&self.dir, &self.name);
        }
    }
}

/// Checks the rules, opens (or makes) the folder and starts the temporary.
fn prepare(
    policy: &NodePolicy,
    journal: Option<&PushJournal>,
    args: &FilePushArgs,
) -> Result<(Staged, Target), NodeError> {
    // Listings hide the node's temporaries: a file pushed under such a name would be
    // on disk and never shown.
    if args.path.split('/').any(ferry_fs::is_temporary) {
        return Err(refuse(
            Code::BadPath,
            format!(
                "{} uses a name starting with {}, which the node keeps for its temporaries",
                args.path,
                ferry_fs::TEMP_PREFIX
            ),
        ));
    }
    let target = Target::new(&args.path, args.follow_symlinks, policy)?;
    target.check(policy, Access::Write)?;
    let name = target.name()?.to_owned();
    let parent = open_folder(policy, &target, args.create_parents)?;
    let mode = match parent.metadata(&name) {
        Ok(meta) if meta.kind == EntryKind::File => {
            if !args.overwrite {
                return Err(exists(&target));
            }
            meta.mode & 0o777
        }
        Ok(meta) if meta.kind == EntryKind::Symlink => {
            return Err(target.fail(FsError::PathEscapes));
        }
        Ok(meta) if meta.kind == EntryKind::Dir => return Err(target.fail(FsError::IsDirectory)),
        Ok(_) => return Err(target.fail(FsError::NotRegular)),
        Err(FsError::NotFound) => NEW_FILE_MODE,
        Err(e) => return Err(target.fail(e)),
    };
    let staged = Staged::create(parent, target.parent_path(), journal, mode, args.size)
        .map_err(|e| target.fail(e))?;
    Ok((staged, target))
}

/// Opens the target's folder from `/` without links; with `create`, makes each missing
/// folder (0755), each checked against the write rules first.
fn open_folder(policy: &NodePolicy, target: &Target, create: bool) -> Result<Dir, NodeError> {
    let folder = target.parent_path();
    let mut dir = root().map_err(|e| target.fail(e))?;
    let mut path = String::from("/");
    for name in folder.split('/').filter(|c| !c.is_empty()) {
        path = child_path(&path, name);
        dir = match dir.open_dir(name, Follow::Never) {
            Ok(child) => child,
            Err(FsError::NotFound) if create => {
                let made = Target {
                    asked: target.asked.clone(),
                    canonical: path.clone(),
                };
                // Named only when it is part of the path asked for.
                if target.asked == target.canonical {
                    policy
                        .rules
                        .check(Access::Write, &made.canonical, "this node's")?;
                } else {
                    made.check(policy, Access::Write)?;
                }
                match dir.create_dir(name, NEW_FOLDER_MODE) {
                    Ok(()) | Err(FsError::Exists) => {}
                    Err(e) => return Err(target.fail(e)),
                }
                dir.open_dir(name, Follow::Never)
                    .map_err(|e| target.fail(e))?
            }
            Err(FsError::NotFound) => {
                return Err(refuse(
                    Code::NotFound,
                    format!(
                        "the folder of {} does not exist (createParents makes it)",
                        target.asked
                    ),
                ));
            }
            Err(e) => return Err(target.fail(e)),
        };
    }
    Ok(dir)
}

/// The refusal of a target already there.
fn exists(target: &Target) -> NodeError {
    refuse(
        Code::Exists,
        format!("{} exists already (overwrite replaces it)", target.asked),
    )
}

/// Refuses to place the file when its folder is no longer at its path (moved or
/// replaced while the body streamed): the answer would name a path the file is not at.
fn still_there(target: &Target, parent: &Dir) -> Result<(), NodeError> {
    let at_path = Target {
        asked: target.asked.clone(),
        canonical: target.parent_path().to_owned(),
    };
    let same = match (at_path.open_dir(), Identity::of(parent)) {
        (Ok(now), Ok((was, _))) => Identity::of(&now).is_ok_and(|(id, _)| id == was),
        _ => false,
    };
    if same {
        return Ok(());
    }
    Err(refuse(
        Code::CanonicalPathChanged,
        format!(
            "the folder of {} was moved or replaced while the file was sent; nothing was \
             written",
            target.asked
        ),
    ))
}
