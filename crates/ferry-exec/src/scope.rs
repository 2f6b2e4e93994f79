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

use ferry_codes::Code;
use ferry_fs::{Dir, Follow, FsError, PATH_MAX_BYTES};
use serde::{Deserialize, Serialize};

use crate::{ExecError, RequestError};

/// One folder tree a person's tools may use.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tree {
    /// Absolute, beneath the scope's base (the site's data folder).
    pub path: PathBuf,
    /// Whether the tools may change files in it, or only read them.
    pub writable: bool,
}

impl Tree {
    /// Refuses a write into a tree the person may only read.
    pub(crate) fn require_writable(&self) -> Result<(), RequestError> {
        if self.writable {
            Ok(())
        } else {
            Err(RequestError::new(
                ferry_codes::Code::ReadOnly,
                format!("{} is read-only for this workspace", self.path.display()),
            ))
        }
    }
}

/// The root of a tree is a folder; a file operation needs a name beneath it.
pub(crate) fn non_empty(rel: &str) -> Result<&str, RequestError> {
    if rel.is_empty() || rel == "." {
        Err(FsError::IsDirectory.into())
    } else {
        Ok(rel)
    }
}

/// How paths are opened: see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Opened beneath a tree's handle by the kernel, where the process is not the person.
    Confined,
    /// Opened as given, with the person's own permissions deciding.
    AsPerson,
}

/// The person's home, their trees, and how paths are opened.
#[derive(Debug)]
pub struct Scope {
    base: PathBuf,
    home: PathBuf,
    trees: Vec<(Tree, Root)>,
    access: Access,
    /// Folders inside writable trees that the system provisions: read, never written.
    locked: Vec<PathBuf>,
}

/// A tree's root as it was found when the scope was made.
#[derive(Debug)]
enum Root {
    /// Opened beneath the base with no link followed (confined access).
    Open(Dir),
    /// Checked, and left to the person's own permissions (as the person).
    AsPerson,
    /// Every path into the tree fails with this.
    Refused(RequestError),
}

/// A resolved path: a folder handle and the rest of the path beneath it. Every
/// operation has one body over it, whichever [`Access`] the scope has.
pub(crate) struct Target<'a> {
    /// The folder the rest is opened beneath.
    pub(crate) dir: Handle<'a>,
    /// Beneath `dir`; empty for `dir` itself.
    pub(crate) rel: String,
    /// The tree whose rules apply (confined access). As the person there is none: the
    /// person's own permissions decide, exactly as at a shell.
    pub(crate) tree: Option<&'a Tree>,
    /// How a read follows links: beneath the tree when confined, anywhere as the person.
    pub(crate) follow: Follow,
}

impl Target<'_> {
    /// Refuses a write into a tree the person may only read (confined access).
    pub(crate) fn require_writable(&self) -> Result<(), RequestError> {
        self.tree.map_or(Ok(()), Tree::require_writable)
    }

    /// The rest of the path, which must name something beneath the folder.
    pub(crate) fn name(&self) -> Result<&str, RequestError> {
        non_empty(&self.rel)
    }
}

/// How a path that will be written is reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// As the person's tools reach it: as the person (host mode), a link is followed
    /// wherever the person could follow it at a shell.
    #[default]
    AsTools,
    /// A place the system made and names (`public/attachments/`, a pick's folder):
    /// reached from its tree's root one component at a time with no link followed, in
    /// every mode, so a link planted there cannot send the file elsewhere.
    NoLinks,
}

/// A tree's root, held by the scope, or a folder opened for one path.
pub(crate) enum Handle<'a> {
    Tree(&'a Dir),
    Opened(Dir),
}

impl std::ops::Deref for Handle<'_> {
    type Target = Dir;
    fn deref(&self) -> &Dir {
        match self {
            Handle::Tree(dir) => dir,
            Handle::Opened(dir) => dir,
        }
    }
}

impl Scope {
    /// A scope over `trees`; `home` must be one of them, and every tree must lie beneath
    /// `base`, the site's data folder. `base` is the operator's and may be reached through
    /// a link; each tree is then reached from it one component at a time with no link
    /// followed (core C-PATH), once, now. A tree whose root is a link, or cannot be opened,
    /// is refused on its own: paths into it fail, the other trees keep working.
    pub fn new(
        base: PathBuf,
        home: PathBuf,
        trees: Vec<Tree>,
        access: Access,
    ) -> Result<Scope, RequestError> {
        let opened = Base::open(&base)?;
        let trees = trees
            .into_iter()
            .map(|tree| {
                let root = match (opened.open_root(&tree.path), access) {
                    (Ok(dir), Access::Confined) => Root::Open(dir),
                    (Ok(_), Access::AsPerson) => Root::AsPerson,
                    // As the person, only a link is refused: permissions decide the rest.
                    (Err(e @ ExecError::RootIsLink { .. }), _) => Root::Refused(e.into()),
                    (Err(_), Access::AsPerson) => Root::AsPerson,
                    (Err(e), Access::Confined) => Root::Refused(e.into()),
                };
                (tree, root)
            })
            .collect();
        Ok(Scope {
            base,
            home,
            trees,
            access,
            locked: Vec::new(),
        })
    }

    /// The site's data folder every tree lies beneath.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The trees that are refused, each with the reason: roots that are links or cannot
    /// be opened.
    pub fn refused(&self) -> impl Iterator<Item = (&Tree, &RequestError)> {
        self.trees.iter().filter_map(|(tree, root)| match root {
            Root::Refused(e) => Some((tree, e)),
            _ => None,
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
                Code::ReadOnly,
                format!(
                    "{} is provisioned by the system and read-only; write your own notes \
                     elsewhere in the workspace",
                    folder.display()
                ),
            )),
            None => Ok(()),
        }
    }

    /// The person's home: where relative paths and `~` start.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// How this scope opens paths.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The trees that are not refused, in the order given.
    pub fn trees(&self) -> impl Iterator<Item = &Tree> {
        self.trees
            .iter()
            .filter(|(_, root)| !matches!(root, Root::Refused(_)))
            .map(|(tree, _)| tree)
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
            // As the person, the kernel and their permissions decide; a tree whose root
            // is a link is still refused (by name: only root can plant such a link there).
            Access::AsPerson => match self.innermost(&abs) {
                Some((_, Root::Refused(e))) => Err(e.clone()),
                _ => as_person(&abs),
            },
            Access::Confined => self.beneath(&abs),
        }
    }

    /// Resolves a path a file will be written at: as [`Scope::resolve`], except that as
    /// the person a link at the last component is followed, so the file lands where the
    /// link points (as `>` does at a shell), under the person's own permissions.
    pub(crate) fn resolve_write(&self, path: &str) -> Result<Target<'_>, RequestError> {
        let target = self.resolve(path)?;
        if self.access == Access::Confined
            || !target
                .dir
                .metadata(target.name()?)
                .is_ok_and(|meta| meta.kind == ferry_fs::EntryKind::Symlink)
        {
            return Ok(target);
        }
        let followed = std::fs::canonicalize(self.absolute(path)?)?;
        as_person(&followed)
    }

    /// Resolves a path a file will be written at, reached the way `reach` says.
    pub(crate) fn resolve_reached(
        &self,
        path: &str,
        reach: Reach,
    ) -> Result<Target<'_>, RequestError> {
        match (reach, self.access) {
            (Reach::AsTools, _) | (Reach::NoLinks, Access::Confined) => self.resolve_write(path),
            (Reach::NoLinks, Access::AsPerson) => {
                let abs = self.absolute(path)?;
                let (tree, root) = self.innermost(&abs).ok_or_else(|| outside(&abs))?;
                if let Root::Refused(e) = root {
                    return Err(e.clone());
                }
                let rel = rest_beneath(tree, &abs)?;
                let dir = Base::open(&self.base)?.open_root(&tree.path)?;
                Ok(Target {
                    dir: Handle::Opened(dir),
                    rel,
                    tree: Some(tree),
                    follow: Follow::Never,
                })
            }
        }
    }

    /// The tree holding `abs` (the innermost, when trees nest) and the rest of the path
    /// beneath it; a path in none of them escapes.
    pub(crate) fn beneath(&self, abs: &Path) -> Result<Target<'_>, RequestError> {
        let (tree, dir) = self.innermost(abs).ok_or_else(|| outside(abs))?;
        let rel = rest_beneath(tree, abs)?;
        match dir {
            Root::Open(dir) => Ok(Target {
                dir: Handle::Tree(dir),
                rel,
                tree: Some(tree),
                follow: Follow::Beneath,
            }),
            Root::AsPerson => as_person(abs),
            Root::Refused(e) => Err(e.clone()),
        }
    }

    /// The tree holding `abs` lexically (the innermost, when trees nest), with its root.
    fn innermost(&self, abs: &Path) -> Option<(&Tree, &Root)> {
        self.trees
            .iter()
            .filter(|(tree, _)| abs.starts_with(&tree.path))
            .max_by_key(|(tree, _)| tree.path.as_os_str().len())
            .map(|(tree, root)| (tree, root))
    }

    /// The tree holding `abs`, lexically (used for a command's working folder); a
    /// refused tree is an error.
    pub(crate) fn tree_of(&self, abs: &Path) -> Result<&Tree, RequestError> {
        if abs.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(outside(abs));
        }
        let (tree, root) = self.innermost(abs).ok_or_else(|| outside(abs))?;
        match root {
            Root::Refused(e) => Err(e.clone()),
            _ => Ok(tree),
        }
    }
}

/// The rest of `abs` beneath `tree`'s root; `..` is refused here rather than by the
/// kernel so the message can say why.
fn rest_beneath(tree: &Tree, abs: &Path) -> Result<String, RequestError> {
    let rest = abs.strip_prefix(&tree.path).map_err(|_| outside(abs))?;
    if rest.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(outside(abs));
    }
    Ok(rest
        .to_str()
        .ok_or_else(|| RequestError::new(Code::BadPath, "the path is not valid UTF-8"))?
        .trim_start_matches("./")
        .to_owned())
}

/// `abs` as the person reaches it: the folder holding its last name, opened as the
/// kernel resolves it (links and `..` followed, the person's permissions checked), and
/// that name. Where that folder is missing (a write that makes its parents), the nearest
/// folder that exists, and the missing names beneath it. A path whose last component is
/// no name (`/`, or ending in `..`) is the folder itself.
fn as_person(abs: &Path) -> Result<Target<'static>, RequestError> {
    let whole = || RequestError::new(Code::BadPath, "the path is not valid UTF-8");
    let as_target = |dir, rel: String| Target {
        dir: Handle::Opened(dir),
        rel,
        tree: None,
        follow: Follow::Anywhere,
    };
    if !matches!(abs.components().next_back(), Some(Component::Normal(_))) {
        return Ok(as_target(Dir::open_ambient(abs)?, String::new()));
    }
    let mut folder = abs;
    let mut names = Vec::new();
    while let (Some(parent), Some(name)) = (folder.parent(), folder.file_name()) {
        names.push(name.to_str().ok_or_else(whole)?);
        match Dir::open_path(parent) {
            Ok(dir) => {
                names.reverse();
                return Ok(as_target(dir, names.join("/")));
            }
            Err(FsError::NotFound) => folder = parent,
            Err(e) => return Err(e.into()),
        }
    }
    Err(FsError::NotFound.into())
}

/// The site's data folder, opened: every root is reached from it.
#[derive(Debug)]
pub(crate) struct Base {
    dir: Dir,
    path: PathBuf,
}

impl Base {
    /// Opens the data folder the operator named (through a link, if that is how it is named).
    pub(crate) fn open(path: &Path) -> Result<Base, ExecError> {
        let dir = Dir::open_ambient(path).map_err(|source| ExecError::RootUnavailable {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Base {
            dir,
            path: path.to_path_buf(),
        })
    }

    /// Opens the tree at `path` (absolute, beneath the base) one component at a time,
    /// following no link: a root that is a link is [`ExecError::RootIsLink`].
    pub(crate) fn open_root(&self, path: &Path) -> Result<Dir, ExecError> {
        let unavailable = |source| ExecError::RootUnavailable {
            path: path.to_path_buf(),
            source,
        };
        let rel = self.rel(path).map_err(unavailable)?;
        if rel.is_empty() {
            return self.dir.try_clone().map_err(unavailable);
        }
        self.dir
            .open_dir(rel, Follow::Never)
            .map_err(|e| link_or(path, e, unavailable))
    }

    /// Opens the folder at `path` beneath the base like [`Base::open_root`], making it
    /// and its missing parents (0700) first.
    pub(crate) fn create_dirs(&self, path: &Path) -> Result<Dir, ExecError> {
        let failed = |e| ExecError::OutputDir {
            path: path.to_path_buf(),
            source: match e {
                FsError::Io(e) => e,
                e => std::io::Error::other(e),
            },
        };
        let rel = self.rel(path).map_err(failed)?;
        if rel.is_empty() {
            return self.dir.try_clone().map_err(failed);
        }
        self.dir
            .create_dir_all(rel, 0o700)
            .map_err(|e| link_or(path, e, failed))
    }

    /// `path` relative to the base; only plain components may lead there.
    fn rel<'p>(&self, path: &'p Path) -> Result<&'p str, FsError> {
        let rel = path
            .strip_prefix(&self.path)
            .map_err(|_| FsError::PathEscapes)?;
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(FsError::PathEscapes);
        }
        rel.to_str().ok_or_else(|| {
            FsError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the path is not valid UTF-8",
            ))
        })
    }
}

/// A link met on the way to `path` is [`ExecError::RootIsLink`]; anything else is `other`.
fn link_or(path: &Path, e: FsError, other: impl FnOnce(FsError) -> ExecError) -> ExecError {
    match e {
        FsError::PathEscapes => ExecError::RootIsLink {
            path: path.to_path_buf(),
        },
        e => other(e),
    }
}

fn outside(abs: &Path) -> RequestError {
    RequestError::new(
        Code::PathEscapes,
        format!(
            "{} is outside the folders this workspace may use (its home, private tmp/ and \
             artifacts/, shared/public, its circles); use a path inside them, without `..`",
            abs.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A data folder with `home` and `shared` (a link to a folder outside holding
    /// `secret.txt`), and the scope over both, opened the given way.
    fn linked_site(access: Access) -> (tempfile::TempDir, tempfile::TempDir, Scope) {
        let data = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        let base = data.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("home")).unwrap();
        std::fs::write(base.join("home/mine.txt"), "mine").unwrap();
        symlink(outside.path(), base.join("shared")).unwrap();
        let trees = ["home", "shared"]
            .map(|rel| Tree {
                path: base.join(rel),
                writable: true,
            })
            .to_vec();
        let scope = Scope::new(base.clone(), base.join("home"), trees, access).unwrap();
        (data, outside, scope)
    }

    #[test]
    fn a_root_that_is_a_link_is_refused_and_the_others_are_open() {
        for openat2 in [true, false] {
            ferry_fs::set_openat2_enabled(openat2);
            let (data, _outside, scope) = linked_site(Access::Confined);
            let base = data.path().canonicalize().unwrap();
            let refused: Vec<_> = scope.refused().map(|(t, e)| (t.path.clone(), e)).collect();
            assert_eq!(refused.len(), 1);
            assert_eq!(refused[0].0, base.join("shared"));
            assert_eq!(refused[0].1.code, "path_escapes");
            let err = scope
                .resolve(base.join("shared/secret.txt").to_str().unwrap())
                .err()
                .unwrap();
            assert_eq!(err.code, "path_escapes");
            assert!(err.message.contains("symbolic link"), "{err}");
            assert_eq!(
                scope.tree_of(&base.join("shared")).unwrap_err().code,
                "path_escapes"
            );
            assert!(scope.resolve("mine.txt").unwrap().tree.is_some());
            // A refused tree is no tree at all for a sandbox.
            let shown: Vec<_> = scope.trees().map(|t| t.path.clone()).collect();
            assert_eq!(shown, [base.join("home")]);
        }
        ferry_fs::set_openat2_enabled(true);
    }

    #[test]
    fn as_the_person_only_a_link_is_refused() {
        let (data, _outside, scope) = linked_site(Access::AsPerson);
        let base = data.path().canonicalize().unwrap();
        assert_eq!(
            scope
                .resolve(base.join("shared/secret.txt").to_str().unwrap())
                .err()
                .unwrap()
                .code,
            "path_escapes"
        );
        let mine = scope.resolve("mine.txt").unwrap();
        assert!(mine.tree.is_none());
        assert_eq!(mine.rel, "mine.txt");
    }

    #[test]
    fn a_tree_outside_the_base_is_unavailable() {
        let data = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let base = data.path().canonicalize().unwrap();
        let tree = Tree {
            path: elsewhere.path().to_path_buf(),
            writable: true,
        };
        let scope = Scope::new(base.clone(), base, vec![tree], Access::Confined).unwrap();
        let (_, err) = scope.refused().next().unwrap();
        assert_eq!(err.code, "root_unavailable");
    }
}
