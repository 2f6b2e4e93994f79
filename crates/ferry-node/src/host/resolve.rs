//! Reaching a path on the node: from `/`, one component at a time, no link followed.
//!
//! A link is followed only when the call asks for it and the node's policy allows it;
//! then the kernel's canonical path is taken instead and reached without links, so the
//! path the rules are checked on is the path of the object used.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use ferry_codes::Code;
use ferry_fs::{Dir, Follow, FsError};

use super::NodePolicy;
use super::errors::{fs_error, refuse};
use crate::NodeError;
use crate::policy::{Access, normal_path};

/// The first of the characters that stand for a raw byte of a name that is not UTF-8
/// (`ferry_fs::name_from_bytes`); the last is U+10FFFF.
const BYTE_CHARS_FROM: char = '\u{10FF80}';

/// A path the node acts on: as the gateway asked for it, and as it is on disk.
#[derive(Clone, Debug)]
pub(super) struct Target {
    /// The path as asked (the only path messages name).
    pub asked: String,
    /// The canonical path: absolute, normal, no link on it when it was resolved.
    pub canonical: String,
}

impl Target {
    /// Checks `asked` and finds its canonical path: `asked` itself unless links are
    /// followed (`follow` asked by the call, allowed by `policy`). Blocking when
    /// following.
    pub fn new(asked: &str, follow: bool, policy: &NodePolicy) -> Result<Target, NodeError> {
        let asked = checked_path(asked)?.to_owned();
        let canonical = if follow && policy.follow_symlinks {
            canonical_of(&asked)?
        } else {
            asked.clone()
        };
        Ok(Target { asked, canonical })
    }

    /// Refuses with `path_denied` unless the node's rules (and the gateway's, when the
    /// call sent them) allow `access` to the canonical path; a canonical path reached
    /// through a link is not named.
    pub fn check(&self, policy: &NodePolicy, access: Access) -> Result<(), NodeError> {
        if self.canonical == self.asked {
            return policy.rules.check(access, &self.canonical, "this node's");
        }
        if policy.rules.allows(access, &self.canonical) {
            return Ok(());
        }
        let verb = match access {
            Access::Read => "reading",
            Access::Write => "writing",
        };
        Err(refuse(
            Code::PathDenied,
            format!(
                "{} leads through a symbolic link to a path the path policy (this node's, \
                 or the gateway's sent with the call) does not allow {verb}",
                self.asked
            ),
        ))
    }

    /// The error `error` met on this path is answered with.
    pub fn fail(&self, error: FsError) -> NodeError {
        fs_error(error, &self.asked)
    }

    /// The components of the canonical path.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.canonical.split('/').filter(|c| !c.is_empty())
    }

    /// Opens the folder at the canonical path, readable, from `/` without links.
    pub fn open_dir(&self) -> Result<Dir, NodeError> {
        let mut dir = root().map_err(|e| self.fail(e))?;
        for name in self.components() {
            dir = dir
                .open_dir(name, Follow::Never)
                .map_err(|e| self.fail(e))?;
        }
        Ok(dir)
    }

    /// The last component of the canonical path; `/` itself is a folder.
    pub fn name(&self) -> Result<&str, NodeError> {
        self.components()
            .last()
            .ok_or_else(|| self.fail(FsError::IsDirectory))
    }

    /// The canonical path's parent folder, from `/` without links.
    pub fn parent_path(&self) -> &str {
        match self.canonical.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &self.canonical[..i],
        }
    }

    /// Opens the canonical path's parent folder, readable, from `/` without links, and
    /// gives its last component.
    pub fn open_parent(&self) -> Result<(Dir, String), NodeError> {
        let name = self.name()?.to_owned();
        let parent = Target {
            asked: self.asked.clone(),
            canonical: self.parent_path().to_owned(),
        };
        Ok((parent.open_dir()?, name))
    }
}

/// Which object a name was: its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Identity {
    /// The device it lives on.
    pub dev: u64,
    /// Its inode there.
    pub ino: u64,
}

impl Identity {
    /// The identity of an open descriptor, and what fstat says of it.
    pub fn of(fd: impl AsFd) -> Result<(Identity, rustix::fs::Stat), FsError> {
        let stat =
            rustix::fs::fstat(fd).map_err(|e| FsError::from_raw_os_error(e.raw_os_error()))?;
        Ok((Identity::of_stat(&stat), stat))
    }

    /// The identity `stat` describes.
    pub fn of_stat(stat: &rustix::fs::Stat) -> Identity {
        // st_dev and st_ino are narrower than u64 on some targets.
        #[allow(clippy::unnecessary_cast)]
        Identity {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
        }
    }
}

/// The root folder, the one ambient open.
pub(super) fn root() -> Result<Dir, FsError> {
    Dir::open_ambient(Path::new("/"))
}

/// Checks that `path` is absolute and normal and names no byte a name that is not
/// UTF-8 would need (those are never listed, and could spell the bytes of a name the
/// rules see differently).
pub(super) fn checked_path(path: &str) -> Result<&str, NodeError> {
    let path = normal_path(path)?;
    if path.chars().any(|c| c >= BYTE_CHARS_FROM) {
        return Err(refuse(
            Code::BadPath,
            format!("{path:?} is not a path the node takes: it holds a character it reserves"),
        ));
    }
    Ok(path)
}

/// Whether `name` can be named exactly on the link: UTF-8, and none of the characters
/// [`checked_path`] refuses.
pub(super) fn nameable(name: &[u8]) -> Option<&str> {
    let name = std::str::from_utf8(name).ok()?;
    (!name.chars().any(|c| c >= BYTE_CHARS_FROM)).then_some(name)
}

/// The kernel's canonical path of `asked`: of its longest existing prefix, with the
/// missing rest appended (a file to be created, its folders with `createParents`).
fn canonical_of(asked: &str) -> Result<String, NodeError> {
    let mut existing = PathBuf::from(asked);
    let mut missing: Vec<String> = Vec::new();
    let resolved = loop {
        match std::fs::canonicalize(&existing) {
            Ok(resolved) => break resolved,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A link whose target is missing: following it finds nothing, which is
                // what to say (not that links are not followed).
                if std::fs::symlink_metadata(&existing).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(refuse(
                        Code::NotFound,
                        format!(
                            "{asked} leads through a symbolic link whose target does not exist"
                        ),
                    ));
                }
                let Some(name) = existing.file_name() else {
                    return Err(fs_error(FsError::NotFound, asked));
                };
                missing.push(name.to_string_lossy().into_owned());
                existing.pop();
            }
            Err(e) => return Err(fs_error(FsError::from_io(e), asked)),
        }
    };
    let Some(resolved) = resolved.to_str() else {
        return Err(refuse(
            Code::BadPath,
            format!("{asked} leads through a symbolic link to a name that is not UTF-8"),
        ));
    };
    let mut canonical = resolved.trim_end_matches('/').to_owned();
    for name in missing.iter().rev() {
        canonical.push('/');
        canonical.push_str(name);
    }
    if canonical.is_empty() {
        canonical.push('/');
    }
    checked_path(&canonical).map_err(|_| {
        refuse(
            Code::BadPath,
            format!("{asked} leads through a symbolic link to a path the node does not take"),
        )
    })?;
    Ok(canonical)
}

/// The absolute path of `name` in the folder `parent` (absolute and normal).
pub(super) fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}
