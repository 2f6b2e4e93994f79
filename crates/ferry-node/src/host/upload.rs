//! `terminal.upload`: a file dropped on a terminal, staged privately on the node (spec
//! N-TERM).
//!
//! Uploads live under `<state dir>/uploads` (0700), each in a folder of its own with an
//! unguessable name (0700), under exactly the name the person's file had (0600). The bytes
//! go to a hidden temporary in `uploads` itself and are renamed into the upload's folder
//! only once the body's trailer matched, so an upload's folder never holds a partial file
//! and every temporary is one the sweep can tell for one. Folders older than
//! [`UPLOAD_KEEP_SECS`] are removed when the node starts and every hour after.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ferry_codes::Code;
use ferry_fs::{AtomicWriter, Dir, EntryKind, Follow, FsError, NAME_MAX_BYTES};

use super::errors::refuse;
use super::{TerminalConfig, blocking, head};
use crate::checked::CheckedReader;
use crate::terminal::{TerminalUploadArgs, TerminalUploadHead, UPLOAD_KEEP_SECS, UPLOAD_MAX_BYTES};
use crate::{DataReader, NodeError, Reply};

/// The staging folder's name in the state folder.
pub const UPLOADS_DIR_NAME: &str = "terminal-uploads";

/// Random bytes in an upload folder's name (base32: 26 characters).
const FOLDER_NAME_BYTES: usize = 16;

/// When staged uploads are removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadSweep {
    /// Time between two sweeps (the first is at start).
    pub interval: Duration,
    /// Age (by its folder's mtime) past which an upload is removed.
    pub keep: Duration,
    /// Age past which a temporary is taken for one a stopped upload left: an upload in
    /// progress writes its temporary at least once a minute or is given up.
    pub temporaries_keep: Duration,
}

impl Default for UploadSweep {
    fn default() -> UploadSweep {
        UploadSweep {
            interval: Duration::from_secs(60 * 60),
            keep: Duration::from_secs(UPLOAD_KEEP_SECS),
            temporaries_keep: Duration::from_secs(60 * 60),
        }
    }
}

/// Checks an upload's name: one path component, as a person may name a file. Quotes,
/// `$()`, globs, a leading `-`, spaces and any other printable character stay.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a file name cannot be empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("{name:?} is not a file name"));
    }
    if name.contains('/') {
        return Err(format!("{name:?} is a path, not one file name"));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the file name holds the control character U+{:04X}",
            u32::from(c)
        ));
    }
    // The code points ferry's confined file access reads as raw bytes (see
    // `ferry_fs::name_from_bytes`): such a name would be written as other bytes.
    if let Some(c) = name
        .chars()
        .find(|&c| ('\u{10FF80}'..='\u{10FFFF}').contains(&c))
    {
        return Err(format!(
            "the file name holds U+{:04X}, a private-use character this node cannot store as it is",
            u32::from(c)
        ));
    }
    if name.len() > NAME_MAX_BYTES {
        return Err(format!(
            "the file name is {} bytes long; at most {NAME_MAX_BYTES}",
            name.len()
        ));
    }
    Ok(())
}

/// Serves one `terminal.upload`.
pub(super) async fn serve(
    config: Arc<TerminalConfig>,
    args: TerminalUploadArgs,
    body: DataReader,
    reply: Reply,
) {
    if let Err(why) = check_name(&args.name) {
        return reply.fail(refuse(Code::UnsafeName, why));
    }
    let name = args.name;
    let mut staged = match blocking(move || Staged::begin(&config.state_dir, &name)).await {
        Ok(staged) => staged,
        Err(e) => return reply.fail(e),
    };
    let cancel = reply.cancellation();
    let mut body = CheckedReader::new(body, UPLOAD_MAX_BYTES);
    loop {
        let next = tokio::select! {
            next = body.next() => next,
            () = cancel.cancelled() => Some(Err(NodeError::Cancelled)),
        };
        let result = match next {
            Some(Ok(bytes)) => {
                blocking(move || {
                    staged.write(&bytes)?;
                    Ok(staged)
                })
                .await
            }
            None => break,
            Some(Err(e)) => {
                // The staged folder and temporary go before the answer.
                let _ = blocking(move || {
                    drop(staged);
                    Ok(())
                })
                .await;
                return reply.fail(e);
            }
        };
        staged = match result {
            Ok(staged) => staged,
            Err(e) => return reply.fail(e),
        };
    }
    match blocking(move || staged.commit()).await {
        Ok(answer) => drop(reply.ok(head(&answer))),
        Err(e) => reply.fail(e),
    }
}

/// An upload being staged: its folder and its temporary, both removed unless committed.
struct Staged {
    root: Dir,
    folder_name: String,
    folder: Dir,
    writer: Option<AtomicWriter>,
    path: String,
}

impl Staged {
    /// Opens the staging root, makes the upload's folder and starts its temporary.
    fn begin(state_dir: &Path, name: &str) -> Result<Staged, NodeError> {
        let (root, root_path) = open_root(state_dir, true)?;
        let Some(root) = root else {
            return Err(staging_error(&root_path, FsError::NotFound));
        };
        let failed = |e: FsError| staging_error(&root_path, e);
        let mut folder_name = None;
        for _ in 0..8 {
            let candidate = ferry_fs::random_base32::<FOLDER_NAME_BYTES>();
            match root.create_dir(&candidate, 0o700) {
                Ok(()) => {
                    folder_name = Some(candidate);
                    break;
                }
                Err(FsError::Exists) => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        let folder_name = folder_name.ok_or_else(|| failed(FsError::Exists))?;
        let mut staged = Staged {
            folder: root
                .open_dir(&folder_name, Follow::Never)
                .map_err(&failed)?,
            path: path_text(&root_path.join(&folder_name).join(name))?,
            root: root.try_clone().map_err(&failed)?,
            folder_name,
            writer: None,
        };
        rustix::fs::fchmod(
            staged.folder.as_fd(),
            rustix::fs::Mode::from_raw_mode(0o700),
        )
        .map_err(|e| failed(FsError::from_raw_os_error(e.raw_os_error())))?;
        let mut writer = AtomicWriter::create_unplaced(&root)
            .map_err(&failed)?
            .limit(UPLOAD_MAX_BYTES);
        writer.set_mode(0o600).map_err(&failed)?;
        writer.retarget(&staged.folder, name).map_err(&failed)?;
        staged.writer = Some(writer);
        Ok(staged)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), NodeError> {
        let writer = self.writer.as_mut().expect("written before committed");
        writer.write(bytes).map_err(|e| match e {
            FsError::TooLarge(max) => NodeError::TooLarge(max),
            e => refuse(e.code(), format!("the upload could not be written: {e}")),
        })
    }

    /// Places the file under its name, durably, and says what it holds.
    fn commit(mut self) -> Result<TerminalUploadHead, NodeError> {
        let writer = self.writer.take().expect("committed once");
        let failed = |e: FsError| refuse(e.code(), format!("the upload could not be placed: {e}"));
        let written = writer.commit().map_err(failed)?;
        // The new name and the folder itself survive a crash only once their folders do.
        self.folder.sync().map_err(failed)?;
        self.root.sync().map_err(failed)?;
        let answer = TerminalUploadHead {
            path: std::mem::take(&mut self.path),
            size: written.size,
            sha256: written.sha256_hex(),
        };
        self.folder_name.clear();
        Ok(answer)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // The temporary first (the writer's drop removes it), then the folder it left empty.
        drop(self.writer.take());
        if !self.folder_name.is_empty() {
            let _ = self.root.remove(&self.folder_name);
        }
    }
}

/// The staging root: `<state dir>/uploads` reached without following a link at
/// `uploads`, made (0700) when missing and `create` is set; `None` when missing otherwise.
/// Also its path, from the state folder's canonical path.
fn open_root(state_dir: &Path, create: bool) -> Result<(Option<Dir>, PathBuf), NodeError> {
    let canonical = std::fs::canonicalize(state_dir).map_err(|e| {
        NodeError::state(
            state_dir,
            format!("the node's state folder cannot be reached for uploads: {e}"),
        )
    })?;
    let root_path = canonical.join(UPLOADS_DIR_NAME);
    ancestors_kept_from_others(&canonical)?;
    let state = Dir::open_ambient(&canonical).map_err(|e| staging_error(&canonical, e))?;
    let opened = match state.open_dir(UPLOADS_DIR_NAME, Follow::Never) {
        Err(FsError::NotFound) if create => {
            match state.create_dir(UPLOADS_DIR_NAME, 0o700) {
                Ok(()) | Err(FsError::Exists) => {}
                Err(e) => return Err(staging_error(&root_path, e)),
            }
            state.open_dir(UPLOADS_DIR_NAME, Follow::Never)
        }
        opened => opened,
    };
    match opened {
        Ok(root) => {
            private_to_me(&root, &root_path)?;
            Ok((Some(root), root_path))
        }
        Err(FsError::NotFound) => Ok((None, root_path)),
        Err(FsError::PathEscapes) => Err(NodeError::state(
            &root_path,
            "it is a symbolic link; uploads are staged only in a real folder there (remove the \
             link, and the node makes the folder)",
        )),
        Err(FsError::NotADirectory) => Err(NodeError::state(
            &root_path,
            "it is not a folder; uploads are staged only in a folder there (move it away, and \
             the node makes the folder)",
        )),
        Err(e) => Err(staging_error(&root_path, e)),
    }
}

/// Refuses a staging folder another user owns or others may enter: whoever could would
/// swap an upload's folder for their own before the person uses the pasted path.
fn private_to_me(root: &Dir, path: &Path) -> Result<(), NodeError> {
    let stat = rustix::fs::fstat(root)
        .map_err(|e| NodeError::state(path, format!("uploads cannot be staged here: {e}")))?;
    let me = rustix::process::geteuid().as_raw();
    let mode = stat.st_mode & 0o7777;
    if stat.st_uid != me || mode & 0o077 != 0 {
        return Err(NodeError::state(
            path,
            format!(
                "it is owned by uid {} with mode {mode:04o}; uploads are staged only in a \
                 folder of the node's own user (uid {me}) that nobody else may enter (chmod \
                 700, or remove it and the node makes it)",
                stat.st_uid
            ),
        ));
    }
    Ok(())
}

/// Refuses a state folder with a folder on its path (itself included) that another user
/// could rename things in: one owned by someone other than root and the node's user, or
/// one others may write without the sticky bit (as `/tmp` has). Whoever could would move
/// the state folder aside and put their own file where a pasted path leads.
fn ancestors_kept_from_others(canonical: &Path) -> Result<(), NodeError> {
    let me = rustix::process::geteuid().as_raw();
    for folder in canonical.ancestors() {
        let stat = rustix::fs::stat(folder)
            .map_err(|e| NodeError::state(folder, format!("uploads cannot be staged: {e}")))?;
        let mode = stat.st_mode & 0o7777;
        let owner_ok = stat.st_uid == 0 || stat.st_uid == me;
        let others_may_rename = mode & 0o022 != 0 && mode & 0o1000 == 0;
        if !owner_ok || others_may_rename {
            return Err(NodeError::state(
                canonical,
                format!(
                    "{} (owned by uid {}, mode {mode:04o}) is on the state folder's path and \
                     other users could move things in it, so a staged file could be swapped \
                     for theirs; give the node a --state folder whose every parent belongs to \
                     root or to uid {me} and is not writable by others (or is sticky, as /tmp)",
                    folder.display(),
                    stat.st_uid
                ),
            ));
        }
    }
    Ok(())
}

/// A failure of the staging folder at `path`.
fn staging_error(path: &Path, e: FsError) -> NodeError {
    NodeError::state(path, format!("uploads cannot be staged here: {e}"))
}

/// A staged path as the answer spells it: it must be text to be quoted and pasted.
fn path_text(path: &Path) -> Result<String, NodeError> {
    path.to_str().map(str::to_owned).ok_or_else(|| {
        NodeError::state(
            path.parent().unwrap_or(path),
            "the staging folder's path is not UTF-8, so a staged file's path could not be \
             pasted; give the node a --state folder whose path is",
        )
    })
}

/// Removes what is old in the staging root of `state_dir` at `now`: upload folders older
/// than `sweep.keep` and temporaries older than `sweep.temporaries_keep`, never following
/// a link (a link there is not ours and stays). Says how many entries went.
pub fn sweep_once(
    state_dir: &Path,
    sweep: &UploadSweep,
    now: SystemTime,
) -> Result<usize, NodeError> {
    let (root, root_path) = open_root(state_dir, false)?;
    let Some(root) = root else {
        return Ok(0);
    };
    let older_than = |mtime: SystemTime, age: Duration| {
        now.duration_since(mtime).is_ok_and(|elapsed| elapsed > age)
    };
    let mut removed = 0;
    for entry in root.entries().map_err(|e| staging_error(&root_path, e))? {
        let old = match entry.meta.kind {
            EntryKind::Dir => older_than(entry.meta.mtime, sweep.keep),
            EntryKind::File if ferry_fs::is_temporary(&entry.name) => {
                older_than(entry.meta.mtime, sweep.temporaries_keep)
            }
            _ => false,
        };
        if old && root.remove(&entry.name).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Sweeps the staging root of `state_dir` now and then every `sweep.interval`, for ever.
pub(super) async fn sweep_forever(state_dir: Arc<PathBuf>, sweep: UploadSweep) {
    loop {
        let dir = state_dir.clone();
        let _ = blocking(move || sweep_once(&dir, &sweep, SystemTime::now())).await;
        tokio::time::sleep(sweep.interval).await;
    }
}
