//! The walk of `dir.fetch`: the tree under a folder opened once, each child opened from
//! its parent's handle without following links, every descendant checked against the
//! node's read rules, before a byte of the archive is sent.

use std::os::fd::AsFd;

use ferry_codes::Code;
use ferry_fs::{Dir, Follow, FsError, is_temporary};
use rustix::fs::{AtFlags, FileType};
use tokio_util::sync::CancellationToken;

use super::NodePolicy;
use super::errors::refuse;
use super::resolve::{Identity, Target, child_path, nameable};
use crate::NodeError;
use crate::policy::Access;

/// What a descendant is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A folder.
    Dir,
    /// A regular file of this many bytes.
    File(u64),
}

/// One descendant, as the walk saw it.
#[derive(Debug)]
pub(super) struct Walked {
    /// Its path relative to the root, exact.
    pub rel: String,
    /// Where its own name starts in `rel`.
    pub name_at: usize,
    /// How many folders lie between it and the root.
    pub depth: usize,
    /// What it is.
    pub kind: Kind,
    /// Which object it is.
    pub id: Identity,
    /// Seconds since the Unix epoch.
    pub mtime: u64,
    /// Its permission bits.
    pub mode: u32,
}

impl Walked {
    /// Its own name.
    pub fn name(&self) -> &str {
        &self.rel[self.name_at..]
    }
}

/// The tree under the root, in archive order (each folder before what it holds, names
/// in byte order).
pub(super) struct Walk {
    /// The root's path.
    pub target: Target,
    /// The root, opened once.
    pub root: Dir,
    /// Which folder the root is.
    pub root_id: Identity,
    /// Its descendants.
    pub entries: Vec<Walked>,
    /// Links, devices, FIFOs and sockets left out.
    pub skipped: u64,
}

/// A folder being walked: its handle, its path and the names still to see.
struct Level {
    dir: Dir,
    rel: String,
    depth: usize,
    names: std::vec::IntoIter<String>,
}

/// Walks the tree under `path` (see the module).
pub(super) fn walk(
    policy: &NodePolicy,
    path: &str,
    follow: bool,
    max_descendants: u64,
    cancel: &CancellationToken,
) -> Result<Walk, NodeError> {
    let target = Target::new(path, follow, policy)?;
    target.check(policy, Access::Read)?;
    let root = target.open_dir()?;
    let (root_id, _) = Identity::of(&root).map_err(|e| target.fail(e))?;
    let names = sorted_names(&root, &target, "", max_descendants)?;
    let mut levels = vec![Level {
        dir: root.try_clone().map_err(|e| target.fail(e))?,
        rel: String::new(),
        depth: 0,
        names: names.into_iter(),
    }];
    let mut entries = Vec::new();
    let mut skipped = 0u64;
    while let Some(level) = levels.last_mut() {
        if cancel.is_cancelled() {
            return Err(NodeError::Cancelled);
        }
        let Some(name) = level.names.next() else {
            levels.pop();
            continue;
        };
        let stat = match rustix::fs::statat(&level.dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Gone since it was listed: not part of the tree any more.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(target.fail(FsError::from_raw_os_error(e.raw_os_error()))),
        };
        let rel = if level.rel.is_empty() {
            name.clone()
        } else {
            format!("{}/{name}", level.rel)
        };
        let kind = match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File(stat.st_size as u64),
            _ => {
                skipped += 1;
                if skipped > max_descendants {
                    return Err(too_many(&target, max_descendants));
                }
                continue;
            }
        };
        check_descendant(policy, &target, &rel)?;
        if entries.len() as u64 >= max_descendants {
            return Err(too_many(&target, max_descendants));
        }
        let walked = Walked {
            name_at: rel.len() - name.len(),
            depth: level.depth,
            kind,
            id: Identity::of_stat(&stat),
            mtime: u64::try_from(stat.st_mtime).unwrap_or(0),
            mode: stat.st_mode & 0o7777,
            rel,
        };
        if kind == Kind::Dir {
            let dir = level
                .dir
                .open_dir(&name, Follow::Never)
                .map_err(|e| changed(&target, &walked.rel, &e.to_string()))?;
            if Identity::of(&dir).map_err(|e| target.fail(e))?.0 != walked.id {
                return Err(changed(
                    &target,
                    &walked.rel,
                    "another folder took its place",
                ));
            }
            let names = sorted_names(&dir, &target, &walked.rel, max_descendants)?;
            let depth = level.depth + 1;
            levels.push(Level {
                dir,
                rel: walked.rel.clone(),
                depth,
                names: names.into_iter(),
            });
        }
        entries.push(walked);
    }
    Ok(Walk {
        target,
        root,
        root_id,
        entries,
        skipped,
    })
}

/// The names in `dir` (the folder `rel` of the tree), sorted by bytes, without ferry's
/// own temporaries. A name that is not UTF-8 refuses the transfer: a tar name is never
/// altered, and the gateway takes only UTF-8. A folder with more names than the walk
/// could ever take is refused before they are all held.
fn sorted_names(
    dir: &Dir,
    target: &Target,
    rel: &str,
    max_descendants: u64,
) -> Result<Vec<String>, NodeError> {
    let io = |e: rustix::io::Errno| target.fail(FsError::from_raw_os_error(e.raw_os_error()));
    let mut reader = rustix::fs::Dir::read_from(dir.as_fd()).map_err(io)?;
    let mut names = Vec::new();
    while let Some(entry) = reader.read() {
        let entry = entry.map_err(io)?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let Some(name) = nameable(bytes) else {
            let lossy = String::from_utf8_lossy(bytes);
            return Err(refuse(
                Code::BadPath,
                format!(
                    "{} holds a name that is not UTF-8 ({lossy:?}), which is never sent \
                     altered, so the folder is not sent",
                    shown(target, rel)
                ),
            ));
        };
        if is_temporary(name) {
            continue;
        }
        // Each name is a descendant or a skipped entry, each kind capped.
        if names.len() as u64 >= max_descendants.saturating_mul(2) {
            return Err(too_many(target, max_descendants));
        }
        names.push(name.to_owned());
    }
    names.sort_unstable();
    Ok(names)
}

/// Refuses the whole transfer unless the rules allow reading the descendant `rel`.
fn check_descendant(policy: &NodePolicy, target: &Target, rel: &str) -> Result<(), NodeError> {
    let canonical = child_path(&target.canonical, rel);
    if policy.rules.allows(Access::Read, &canonical) {
        return Ok(());
    }
    let why = if target.canonical == target.asked {
        match policy.rules.check(Access::Read, &canonical, "this node's") {
            Err(e) => e.to_string(),
            Ok(()) => String::new(),
        }
    } else {
        format!(
            "this node's path policy does not allow reading {}",
            shown(target, rel)
        )
    };
    Err(refuse(
        Code::PathDenied,
        format!("{why}; the folder is not sent, whole or in part"),
    ))
}

/// The path of the descendant `rel` as the gateway asked for it.
pub(super) fn shown(target: &Target, rel: &str) -> String {
    if rel.is_empty() {
        target.asked.clone()
    } else {
        child_path(&target.asked, rel)
    }
}

fn too_many(target: &Target, max: u64) -> NodeError {
    refuse(
        Code::TooManyEntries,
        format!(
            "{} holds more than the {max} files and folders asked for at most",
            target.asked
        ),
    )
}

/// The refusal of a descendant that changed since the walk saw it.
pub(super) fn changed(target: &Target, rel: &str, how: &str) -> NodeError {
    refuse(
        Code::ChangedMeanwhile,
        format!(
            "{} changed while the folder was sent: {how}",
            shown(target, rel)
        ),
    )
}
