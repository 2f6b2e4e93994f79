//! The trees a sandbox exposes, and the bubblewrap command line for
//! [`Sandbox::Bwrap`](crate::Sandbox::Bwrap).
//!
//! Inside, the command sees read-only system folders, `/etc` (for passwd and resolv),
//! a fresh `/tmp` (tmpfs: memory, bounded only by the tmpfs default of half the RAM;
//! bwrap 0.8 has no `--size`), its own `/proc` and a minimal `/dev`, and the bound trees
//! at their real paths, under a read-only root. Everything else, other people's trees
//! included, is simply not there. A herd worker's programs are bound read-only at their
//! own paths, alone: their folders show nothing else (only their mount points).

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use ferry_fs::{Dir, FsError};

use crate::ExecError;
use crate::extras::Program;
use crate::run::real_path;
use crate::scope::Base;

/// Top-level system folders shown read-only besides /usr and /etc; on merged-/usr systems
/// they are symlinks into /usr (bwrap recreates them as such).
pub(crate) const SYSTEM_DIRS: [&str; 3] = ["/bin", "/lib", "/lib64"];
/// Where systemd-resolved hosts point /etc/resolv.conf; shown read-only with the network,
/// since without it there is no DNS.
pub(crate) const RESOLVED_DIR: &str = "/run/systemd/resolve";

/// The trees a sandbox shows the command: (real path, writable, the open folder),
/// shallowest first.
pub(crate) struct Trees(Vec<(PathBuf, bool, Dir)>);

impl Trees {
    /// Opens every tree; one that cannot be opened is an error, not a smaller sandbox.
    /// Beneath a `base` a tree is reached with no link followed (a root that is a link is
    /// [`ExecError::RootIsLink`], never bound at its target); without one the trees are
    /// the caller's own paths.
    pub(crate) fn resolve(
        base: Option<&Base>,
        read_write: &[PathBuf],
        read_only: &[PathBuf],
    ) -> Result<Trees, ExecError> {
        let mut trees = Vec::new();
        let tagged = read_write.iter().map(|p| (p, true));
        for (path, writable) in tagged.chain(read_only.iter().map(|p| (p, false))) {
            let bind_error = |source| ExecError::SandboxBind {
                path: path.clone(),
                source,
            };
            let dir = match base {
                Some(base) => base.open_root(path).map_err(|e| match e {
                    ExecError::RootUnavailable { source, .. } => bind_error(io_error(source)),
                    link => link,
                })?,
                None => Dir::open_ambient(path).map_err(|e| bind_error(io_error(e)))?,
            };
            // The real path of the folder opened, because bwrap creates the mount point at
            // the path given, and the working folder is compared with it.
            let real = real_path(&dir).map_err(bind_error)?;
            trees.push((real, writable, dir));
        }
        trees.sort_by_key(|(p, _, _)| p.components().count());
        Ok(Trees(trees))
    }

    /// Whether `path` (canonical) is inside some tree.
    pub(crate) fn shows(&self, path: &Path) -> bool {
        self.0.iter().any(|(tree, _, _)| path.starts_with(tree))
    }

    /// (path, writable), shallowest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Path, bool)> {
        self.0
            .iter()
            .map(|(path, writable, _)| (path.as_path(), *writable))
    }

    /// (path, writable, the open folder), shallowest first.
    pub(crate) fn opened(&self) -> impl Iterator<Item = (&Path, bool, &Dir)> {
        self.0
            .iter()
            .map(|(path, writable, dir)| (path.as_path(), *writable, dir))
    }
}

fn io_error(e: FsError) -> std::io::Error {
    match e {
        FsError::Io(e) => e,
        e => std::io::Error::other(e),
    }
}

/// The checked sandbox: the bwrap binary and every bind, canonical.
pub(crate) struct Bwrap {
    pub bwrap: PathBuf,
    /// Shallowest first, so that a nested bind lands on top.
    pub binds: Trees,
    /// Files bound read-only at their own paths, after the trees.
    programs: Vec<PathBuf>,
    network: bool,
}

impl Bwrap {
    /// Checks that bwrap exists (never falls back to no sandbox) and resolves the binds.
    pub(crate) fn check(
        bwrap: &Path,
        base: Option<&Base>,
        read_write: &[PathBuf],
        read_only: &[PathBuf],
        network: bool,
    ) -> Result<Bwrap, ExecError> {
        let executable = std::fs::metadata(bwrap)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if !executable {
            return Err(ExecError::SandboxUnavailable {
                what: "bubblewrap is not installed",
                path: bwrap.to_path_buf(),
            });
        }
        Ok(Bwrap {
            bwrap: bwrap.to_path_buf(),
            binds: Trees::resolve(base, read_write, read_only)?,
            programs: Vec::new(),
            network,
        })
    }

    /// Shows each program read-only at its own path, and nothing else of its folder.
    pub(crate) fn with_programs(mut self, programs: &[Program]) -> Bwrap {
        self.programs = programs.iter().map(|p| p.path.clone()).collect();
        self
    }

    /// Everything before the command: bwrap's options, ending with `--`.
    pub(crate) fn args(&self, cwd: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
            args.extend(items.iter().map(|i| i.as_ref().to_os_string()));
        };
        // --unshare-all: user, ipc, pid, net, uts, cgroup. The pid namespace is what
        // kills a daemonized grandchild: it dies with the namespace's init.
        push(&[&"--unshare-all"]);
        if self.network {
            push(&[&"--share-net"]);
        }
        // --die-with-parent: bwrap and its init die when the thread waiting in run() does
        // (run() waits on the same thread that spawned it, so this is the whole call).
        // --new-session: no TIOCSTI into a terminal the service might hold.
        push(&[&"--die-with-parent", &"--new-session"]);
        push(&[&"--ro-bind", &"/usr", &"/usr"]);
        for dir in SYSTEM_DIRS {
            match std::fs::symlink_metadata(dir) {
                Ok(m) if m.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(dir) {
                        push(&[&"--symlink", &target, &dir]);
                    }
                }
                Ok(m) if m.is_dir() => push(&[&"--ro-bind", &dir, &dir]),
                _ => {}
            }
        }
        push(&[&"--ro-bind", &"/etc", &"/etc"]);
        if self.network {
            push(&[&"--ro-bind-try", &RESOLVED_DIR, &RESOLVED_DIR]);
        }
        push(&[&"--proc", &"/proc", &"--dev", &"/dev", &"--tmpfs", &"/tmp"]);
        for (path, writable) in self.binds.iter() {
            let flag = if writable { "--bind" } else { "--ro-bind" };
            push(&[&flag, &path, &path]);
        }
        // After the trees: a program is a file, never a folder another bind could cover.
        for path in &self.programs {
            push(&[&"--ro-bind", &path, &path]);
        }
        // The new root is a tmpfs bwrap built: once the mount points are made, nothing
        // else belongs there (writes to it would be memory, and invisible outside).
        push(&[&"--remount-ro", &"/"]);
        push(&[&"--chdir", &cwd, &"--"]);
        args
    }
}
