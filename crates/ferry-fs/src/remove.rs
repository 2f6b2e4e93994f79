//! Removing a whole tree beneath a handle, however deep it is.
//!
//! A person can build a folder thousands of levels deep (`mkdir -p` and a move, a few
//! requests), so the removal neither recurses (the stack would overflow and take the
//! gateway with it) nor holds a descriptor per level (they would run out). It walks with
//! an explicit stack of at most [`REMOVE_OPEN_LEVELS_MAX`] open folders; a folder deeper
//! than that is first moved up beside the tree's own entry, under a hidden temporary
//! name, and emptied from there as a tree of its own.

use std::ffi::{CStr, CString};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use crate::FsError;
use crate::atomic::TEMP_PREFIX;
use crate::dir::Dir;
use crate::random::random_hex;

/// Folders held open at once while a tree is removed; deeper ones are moved up first.
pub const REMOVE_OPEN_LEVELS_MAX: usize = 128;

/// One folder being emptied: its handle, its name in its parent, and the names left.
struct Level {
    dir: Dir,
    name: CString,
    left: Vec<CString>,
}

impl Dir {
    /// Removes `name` (a direct entry of this folder): a file or a link by unlinking it,
    /// a folder with everything in it. An entry already gone is no failure.
    pub(crate) fn remove_tree(&self, name: &CStr) -> Result<(), FsError> {
        if !is_dir(self, name)? {
            return unlink(self, name, AtFlags::empty());
        }
        let mut trees = vec![name.to_owned()];
        while let Some(top) = trees.pop() {
            self.empty_and_remove(top, &mut trees)?;
        }
        Ok(())
    }

    /// Empties the folder `top` of this one and removes it; a folder found too deep is
    /// moved up into this one and added to `trees`.
    fn empty_and_remove(&self, top: CString, trees: &mut Vec<CString>) -> Result<(), FsError> {
        let Some(first) = open_level(self, top)? else {
            return Ok(());
        };
        let mut stack = vec![first];
        loop {
            let depth = stack.len();
            let Some(level) = stack.last_mut() else {
                return Ok(());
            };
            let Some(name) = level.left.pop() else {
                let done = stack.pop().expect("the loop saw a last level");
                let parent = stack.last().map_or(self, |l| &l.dir);
                unlink(parent, &done.name, AtFlags::REMOVEDIR)?;
                continue;
            };
            if !is_dir(&level.dir, &name)? {
                unlink(&level.dir, &name, AtFlags::empty())?;
            } else if depth >= REMOVE_OPEN_LEVELS_MAX {
                let moved = CString::new(format!("{TEMP_PREFIX}remove-{}", random_hex::<8>()))
                    .expect("a hex name holds no NUL");
                match rustix::fs::renameat_with(
                    level.dir.fd(),
                    &*name,
                    self.fd(),
                    &*moved,
                    RenameFlags::NOREPLACE,
                ) {
                    Ok(()) => trees.push(moved),
                    Err(Errno::NOENT) => {}
                    Err(e) => return Err(FsError::from_errno(e)),
                }
            } else if let Some(next) = open_level(&level.dir, name)? {
                stack.push(next);
            }
        }
    }
}

/// Opens the folder `name` of `parent` (never through a link) with its names listed;
/// `None` when it is already gone.
fn open_level(parent: &Dir, name: CString) -> Result<Option<Level>, FsError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(parent.fd(), &*name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(FsError::from_errno(e)),
    };
    let dir = Dir::from_fd(fd);
    let mut left = Vec::new();
    dir.for_each_name(|n| {
        left.push(n.to_owned());
        Ok(())
    })?;
    Ok(Some(Level { dir, name, left }))
}

/// Whether `name` in `dir` is a folder itself (a link to one is not).
fn is_dir(dir: &Dir, name: &CStr) -> Result<bool, FsError> {
    match rustix::fs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(FileType::from_raw_mode(stat.st_mode) == FileType::Directory),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

fn unlink(dir: &Dir, name: &CStr, flags: AtFlags) -> Result<(), FsError> {
    match rustix::fs::unlinkat(dir.fd(), name, flags) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of `depth` folders named `d` under `root/top`, with a file at the bottom.
    fn chain(root: &std::path::Path, depth: usize) {
        let top = root.join("top");
        std::fs::create_dir(&top).unwrap();
        let dir = std::fs::File::open(&top).unwrap();
        let mut fd: std::os::fd::OwnedFd = dir.into();
        for _ in 0..depth {
            rustix::fs::mkdirat(&fd, "d", Mode::from_raw_mode(0o700)).unwrap();
            fd = rustix::fs::openat(&fd, "d", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
                .unwrap();
        }
        let file = rustix::fs::openat(
            &fd,
            "f",
            OFlags::WRONLY | OFlags::CREATE,
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        drop(file);
    }

    #[test]
    fn a_tree_far_deeper_than_the_open_levels_is_removed_without_recursion() {
        let tmp = tempfile::tempdir().unwrap();
        // Deep enough to overflow a test thread's stack were the walk recursive, and many
        // times the levels held open.
        chain(tmp.path(), 20_000);
        std::fs::write(tmp.path().join("keep"), b"k").unwrap();
        let root = Dir::open_ambient(tmp.path()).unwrap();
        root.remove("top").unwrap();
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            left,
            ["keep"],
            "nothing of the tree, nor a moved-up part, is left"
        );
    }

    #[test]
    fn depths_around_the_open_levels_are_removed() {
        for depth in [
            REMOVE_OPEN_LEVELS_MAX - 1,
            REMOVE_OPEN_LEVELS_MAX,
            REMOVE_OPEN_LEVELS_MAX + 1,
        ] {
            let tmp = tempfile::tempdir().unwrap();
            chain(tmp.path(), depth);
            Dir::open_ambient(tmp.path())
                .unwrap()
                .remove("top")
                .unwrap();
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "{depth}");
        }
    }

    #[test]
    fn a_link_is_removed_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("precious"), b"p").unwrap();
        std::fs::create_dir(tmp.path().join("top")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("top/link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("alone")).unwrap();
        let root = Dir::open_ambient(tmp.path()).unwrap();
        root.remove("top").unwrap();
        root.remove("alone").unwrap();
        assert_eq!(
            std::fs::read(outside.path().join("precious")).unwrap(),
            b"p"
        );
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
