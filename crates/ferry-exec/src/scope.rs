//! Where a person's tools may reach, and how a path given by a model is resolved.
//!
//! Paths arrive from a language model and are hostile (spec core C-PATH). A path is
//! relative to the person's home (`$HOME`), `~` expands to it, and an absolute path is
//! taken as is. What happens next depends on [`Access`]:
//!
//! - [`Access::Confined`] (local and container mode, where the process is not the
//!   person): the path must lie in one of the person's [`Tree`]s and is opened beneath
//!   that tree's handle by the kernel; reads may follow links that stay inside, writes
//!   follow none.
//! - [`Access::AsPerson`] (host mode, inside the worker that already *is* the person):
//!   the path is opened as given; the person's own permissions decide, exactly as at a
//!   shell. Only the working folder of a command is still held to the trees (T-GUARD).

use std::path::{Component, Path, PathBuf};

use ferry_fs::{Dir, FsError, PATH_MAX_BYTES};
use serde::{Deserialize, Serialize};

use crate::RequestError;

/// One folder tree a person's tools may use.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tree {
    /// Absolute and free of symlinks (the caller canonicalizes it).
    pub path: PathBuf,
    pub writable: bool,
}

/// How paths are opened: see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Confined,
    AsPerson,
}

/// The person's home, their trees, and how paths are opened.
#[derive(Debug)]
pub struct Scope {
    home: PathBuf,
    trees: Vec<(Tree, Option<Dir>)>,
    access: Access,
    /// Folders inside writable trees that the system provisions: read, never written.
    locked: Vec<PathBuf>,
}

/// A resolved path: beneath one tree's handle, or (as the person) absolute.
pub(crate) enum Target<'a> {
    Beneath {
        dir: &'a Dir,
        /// Relative to `dir`; empty for the tree's root itself.
        rel: String,
        tree: &'a Tree,
    },
    Absolute(PathBuf),
}

impl Scope {
    /// A scope over `trees`; `home` must be one of them. In confined access every tree
    /// is opened now, once: later resolution happens beneath these handles.
    pub fn new(home: PathBuf, trees: Vec<Tree>, access: Access) -> Result<Scope, RequestError> {
        let trees = trees
            .into_iter()
            .map(|tree| {
                let dir = match access {
                    Access::Confined => Some(Dir::open_ambient(&tree.path).map_err(|e| {
                        RequestError::new(
                            "root_unavailable",
                            format!("the folder {} cannot be opened: {e}", tree.path.display()),
                        )
                    })?),
                    Access::AsPerson => None,
                };
                Ok((tree, dir))
            })
            .collect::<Result<Vec<_>, RequestError>>()?;
        Ok(Scope {
            home,
            trees,
            access,
            locked: Vec::new(),
        })
    }

    /// Locks `folders` (absolute, inside the trees): no write, delete or new folder lands
    /// in them, whatever path names them. Reads pass. Lexical, which holds because
    /// confined writes follow no symlink and `..` is refused.
    pub fn with_locked(mut self, folders: Vec<PathBuf>) -> Scope {
        self.locked = folders;
        self
    }

    /// The locked folders.
    pub fn locked(&self) -> &[PathBuf] {
        &self.locked
    }

    /// Refuses a write to `path` when it lies in a locked folder.
    pub(crate) fn check_unlocked(&self, path: &str) -> Result<(), RequestError> {
        let abs = self.absolute(path)?;
        match self.locked.iter().find(|folder| abs.starts_with(folder)) {
            Some(folder) => Err(RequestError::new(
                "read_only",
                format!(
                    "{} is provisioned by the system and read-only; write your own notes \
                     elsewhere in the workspace",
                    folder.display()
                ),
            )),
            None => Ok(()),
        }
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// The trees, in the order given.
    pub fn trees(&self) -> impl Iterator<Item = &Tree> {
        self.trees.iter().map(|(tree, _)| tree)
    }

    /// The absolute form of a model's path: `~` expanded, relative paths joined to the
    /// home. Purely lexical; refuses empty, NUL and over-long paths before any syscall.
    pub fn absolute(&self, path: &str) -> Result<PathBuf, RequestError> {
        if path.is_empty() {
            return Err(FsError::EmptyPath.into());
        }
        if path.contains('\0') {
            return Err(FsError::NulByte.into());
        }
        if path.len() > PATH_MAX_BYTES {
            return Err(FsError::PathTooLong.into());
        }
        let joined = if path == "~" {
            self.home.clone()
        } else if let Some(rest) = path.strip_prefix("~/") {
            self.home.join(rest)
        } else {
            self.home.join(path) // an absolute `path` replaces the home
        };
        Ok(joined)
    }

    /// Resolves a model's path to where it will be opened.
    pub(crate) fn resolve(&self, path: &str) -> Result<Target<'_>, RequestError> {
        let abs = self.absolute(path)?;
        match self.access {
            Access::AsPerson => Ok(Target::Absolute(abs)),
            Access::Confined => self.beneath(&abs),
        }
    }

    /// The tree holding `abs` (the innermost, when trees nest) and the rest of the path
    /// beneath it; a path in none of them escapes.
    pub(crate) fn beneath(&self, abs: &Path) -> Result<Target<'_>, RequestError> {
        let (tree, dir) = self
            .trees
            .iter()
            .filter(|(tree, _)| abs.starts_with(&tree.path))
            .max_by_key(|(tree, _)| tree.path.as_os_str().len())
            .ok_or_else(|| outside(abs))?;
        let rest = abs.strip_prefix(&tree.path).map_err(|_| outside(abs))?;
        // `..` is refused here rather than by the kernel so the message can say why.
        if rest.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(outside(abs));
        }
        let rel = rest
            .to_str()
            .ok_or_else(|| RequestError::new("invalid_path", "the path is not valid UTF-8"))?
            .trim_start_matches("./")
            .to_owned();
        let dir = match dir {
            Some(dir) => dir,
            None => return Ok(Target::Absolute(abs.to_path_buf())),
        };
        Ok(Target::Beneath { dir, rel, tree })
    }

    /// The tree holding `abs`, lexically (used for a command's working folder).
    pub(crate) fn tree_of(&self, abs: &Path) -> Result<&Tree, RequestError> {
        if abs.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(outside(abs));
        }
        self.trees()
            .filter(|tree| abs.starts_with(&tree.path))
            .max_by_key(|tree| tree.path.as_os_str().len())
            .ok_or_else(|| outside(abs))
    }
}

fn outside(abs: &Path) -> RequestError {
    RequestError::new(
        "path_escapes",
        format!(
            "{} is outside the folders this workspace may use (its home, private tmp/ and \
             artifacts/, shared/public, its circles); use a path inside them, without `..`",
            abs.display()
        ),
    )
}
