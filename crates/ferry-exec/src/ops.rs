//! The operations every file tool and `terminal_run` are made of (spec tools.md T-ID:
//! one requester primitive). An [`Executor`] performs them: in-process in local and
//! container mode, inside the person's worker in host mode. They are plain data so the
//! same enum crosses the worker's socket.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_codes::Code;
use ferry_fs::{AtomicWriter, Dir, EntryKind, Follow, FsError, MadeDirs, safe_name};
use serde::{Deserialize, Serialize};

pub use crate::info::{FileInfo, Kind, WrittenFile};
use crate::info::{info_from, info_of};
use crate::member::{MemberAction, MemberReply};
pub use crate::scope::Reach;
use crate::scope::Scope;
pub use crate::settings::{RunSettings, SandboxKind};
pub use crate::staged_at::Placement;
use crate::staged_at::StagedDirs;
use crate::{Command, ExecError, Identity, Output, Policy, RequestError, Sandbox, Strongest};

/// One operation, as the person.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Opens a regular file for reading; the reply carries its descriptor.
    Open {
        /// The file to open.
        path: String,
    },
    /// Metadata of a path, without following a link at its last component.
    Stat {
        /// The path to describe.
        path: String,
    },
    /// Metadata of a folder a command may run in: one inside the person's trees (in host
    /// mode too, where other paths stand by the person's permissions alone).
    WorkingFolder {
        /// The folder.
        path: String,
    },
    /// The entries of a folder, sorted by name (bytes): all of them, or `limit` after
    /// the name `after`. Only the entries returned are stat'ed.
    List {
        /// The folder to list.
        path: String,
        /// Start after the entry of this name; none starts at the first.
        after: Option<String>,
        /// The most entries to return; none returns all.
        limit: Option<usize>,
    },
    /// Removes one file (never a folder).
    Delete {
        /// The file to remove.
        path: String,
    },
    /// Creates a folder and its parents.
    Mkdir {
        /// The folder to make.
        path: String,
    },
    /// Copies a file into the folder `to_dir` under its safe name (C-NAME), holes kept
    /// as holes; a file whose apparent size passes `max_bytes` is refused and leaves nothing.
    Deliver {
        /// The file to copy.
        from: String,
        /// The folder the copy lands in.
        to_dir: String,
        /// The largest apparent size accepted, in bytes.
        max_bytes: u64,
    },
    /// Removes expired saved command output.
    SweepOutput,
    /// The apparent size of every file beneath the folders `paths` (missing ones count 0;
    /// links are not followed).
    CountBytes {
        /// The folders to count beneath.
        paths: Vec<String>,
    },
    /// An operation of the member API on a workspace's (or a project's) `public/`.
    Member {
        /// The project whose `public/` is meant; none means the workspace's own.
        project: Option<String>,
        /// What to do there.
        action: MemberAction,
    },
    /// Makes a hidden temporary where `path` will be written, as the person (its folders
    /// made); its descriptor, open for writing, travels beside the reply. The caller
    /// fills it, then [`Op::PlaceAll`] places it (staged_at.rs).
    StageAt {
        /// Where the finished file will be placed.
        path: String,
        /// How that place is reached.
        #[serde(default)]
        reach: Reach,
    },
    /// Places temporaries made by [`Op::StageAt`] as one change, all or none: each still
    /// the file it was when filled, and each previous file still the content it was read
    /// with, where that is given (`file_edit`).
    PlaceAll {
        /// Every file of the change, in order.
        files: Vec<Placement>,
    },
    /// Undoes a change of several files whose writer was killed between its placings
    /// (its journal survived it, see journal.rs): each file placed gets its previous
    /// file back, and what the change left (kept files, temporaries) goes.
    UndoPlaceAll {
        /// Every file of the change, as [`Op::PlaceAll`] had them.
        files: Vec<Placement>,
        /// The sha256 (hex) of each file's new content, in the same order: a file is
        /// put back only while it still holds exactly that (never one the person has
        /// written to since).
        placed_sha256: Vec<String>,
    },
    /// Removes the temporary `temp` made for `path`.
    DiscardAt {
        /// Where the file would have gone.
        path: String,
        /// The name [`Op::StageAt`] gave the temporary.
        temp: String,
        /// How `path` is reached, as when it was staged.
        #[serde(default)]
        reach: Reach,
    },
    /// Runs a command behind the guardrail (T-GUARD).
    Run {
        /// The shell command line.
        command: String,
        /// The working folder; none is the person's home.
        cwd: Option<String>,
        /// Seconds before the command is killed; none is the default.
        timeout_secs: Option<u64>,
        /// What a herd worker's run adds; none for a plain command.
        #[serde(default)]
        worker: Option<WorkerRun>,
    },
}

/// What a herd worker's run adds to a command's (spec handoffs.md H-WHERE).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkerRun {
    /// Variables added to the allowlisted environment; every name `FERRY_HERD_` then
    /// `[A-Z0-9_]+`, no value with NUL (else `invalid_command`, nothing started).
    pub env: Vec<(String, String)>,
    /// Seconds the worker may live (at most `HERD_WORKER_MAX_LIFETIME`, cut to it; zero
    /// refused), in place of the command timeout.
    pub lifetime_secs: u64,
    /// Absolute paths of programs outside the person's trees the command may run (read
    /// and execute, nothing else in their folders): the ferry binary, so a worker can
    /// call `ferry herd`. Each must be a regular file.
    pub programs: Vec<String>,
    /// Show every tree of the person read-only, except `writable`: a read-only worker.
    /// Without a sandbox (`sandbox = "none"`) it is refused (`sandbox_unavailable`).
    pub read_only: bool,
    /// Absolute folders inside the person's trees left writable for a read-only worker
    /// (its herd folder). Each must lie in a tree the person may write, outside the
    /// locked folders; they are checked for every worker, and used only when `read_only`.
    pub writable: Vec<String>,
}

/// What an operation returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// For [`Op::Open`]; the descriptor travels beside it.
    Opened(FileInfo),
    /// For [`Op::Stat`]: the metadata of the path.
    Info(FileInfo),
    /// For [`Op::Deliver`]: the file as written.
    Written(WrittenFile),
    /// For [`Op::List`]: one page of a folder.
    Listing {
        /// The entries asked for, sorted by name.
        entries: Vec<FileInfo>,
        /// Entries in the whole folder.
        total: usize,
    },
    /// The operation succeeded and has nothing to report.
    Done,
    /// For [`Op::Run`]: what the command printed and how it ended.
    Ran(Output),
    /// For [`Op::CountBytes`]: the total found.
    Counted {
        /// The apparent size of all the files, summed.
        bytes: u64,
    },
    /// For [`Op::Member`]: what the member API answered.
    Member(MemberReply),
    /// For [`Op::StageAt`]; the descriptor travels beside it.
    StagedAt {
        /// The name of the hidden temporary, for [`Op::PlaceAll`] or [`Op::DiscardAt`].
        temp: String,
        /// The absolute path the file will have.
        path: String,
    },
}

/// Performs [`Op`]s for one person.
#[derive(Debug)]
pub struct Executor {
    scope: Scope,
    run: RunSettings,
    /// Owner given to every file and folder created (container mode: the agent's ids).
    owner: Option<(u32, u32)>,
    /// The folder each temporary staged here was made in, until it is placed or removed.
    pub(crate) staged_in: StagedDirs,
}

/// A file mode for new files: readable by the person's group, so circles can share.
const NEW_FILE_MODE: u32 = 0o644;
const NEW_DIR_MODE: u32 = 0o755;

impl Executor {
    /// An executor for the person `scope` describes; `owner` is given every file it creates.
    pub fn new(scope: Scope, run: RunSettings, owner: Option<(u32, u32)>) -> Executor {
        Executor {
            scope,
            run,
            owner,
            staged_in: StagedDirs::default(),
        }
    }

    /// Where this executor may reach, and how it opens paths.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Performs `op`; for [`Op::Open`] the file comes back beside the reply.
    pub fn execute(&self, op: Op) -> Result<(Reply, Option<File>), RequestError> {
        let reply = match op {
            Op::Open { path } => {
                let (file, info) = self.open(&path)?;
                return Ok((Reply::Opened(info), Some(file)));
            }
            Op::Stat { path } => Reply::Info(self.stat(&path)?),
            Op::WorkingFolder { path } => {
                self.scope.tree_of(&self.scope.absolute(&path)?)?;
                Reply::Info(self.stat(&path)?)
            }
            Op::List { path, after, limit } => {
                let (entries, total) = self.list(&path, after.as_deref(), limit)?;
                Reply::Listing { entries, total }
            }
            Op::Delete { path } => {
                self.delete(&path)?;
                Reply::Done
            }
            Op::Mkdir { path } => {
                self.mkdir(&path)?;
                Reply::Done
            }
            Op::Deliver {
                from,
                to_dir,
                max_bytes,
            } => Reply::Written(self.deliver(&from, &to_dir, max_bytes)?),
            Op::CountBytes { paths } => Reply::Counted {
                bytes: self.count_bytes(&paths)?,
            },
            Op::SweepOutput => {
                let ttl = Duration::from_secs(self.run.output_ttl_secs);
                crate::sweep_saved_output(&self.run.full_output_dir, ttl)?;
                Reply::Done
            }
            Op::Member { project, action } => {
                let (reply, file) = crate::member::perform(
                    self.scope.base(),
                    self.scope.home(),
                    &self.staged_in,
                    self.owner,
                    project.as_deref(),
                    action,
                )?;
                return Ok((Reply::Member(reply), file));
            }
            Op::StageAt { path, reach } => {
                let (temp, path, file) = self.stage_at(&path, reach)?;
                return Ok((Reply::StagedAt { temp, path }, Some(file)));
            }
            Op::PlaceAll { files } => {
                self.place_all(&files)?;
                Reply::Done
            }
            Op::UndoPlaceAll {
                files,
                placed_sha256,
            } => {
                self.undo_place_all(&files, &placed_sha256)?;
                Reply::Done
            }
            Op::DiscardAt { path, temp, reach } => {
                self.discard_at(&path, &temp, reach)?;
                Reply::Done
            }
            Op::Run {
                command,
                cwd,
                timeout_secs,
                worker,
            } => Reply::Ran(self.run(command, cwd.as_deref(), timeout_secs, worker)?),
        };
        Ok((reply, None))
    }

    fn open(&self, path: &str) -> Result<(File, FileInfo), RequestError> {
        let abs = self.scope.absolute(path)?;
        let target = self.scope.resolve(path)?;
        let file = target.dir.open_file(target.name()?, target.follow)?;
        let info = info_of(&abs, &file.metadata()?);
        Ok((file, info))
    }

    fn stat(&self, path: &str) -> Result<FileInfo, RequestError> {
        let abs = self.scope.absolute(path)?;
        let target = self.scope.resolve(path)?;
        let meta = if target.rel.is_empty() {
            target.dir.own_metadata()?
        } else {
            target.dir.metadata(&target.rel)?
        };
        Ok(info_from(abs.display().to_string(), &meta))
    }

    fn list(
        &self,
        path: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<(Vec<FileInfo>, usize), RequestError> {
        let target = self.scope.resolve(path)?;
        let opened;
        let dir = if target.rel.is_empty() {
            &*target.dir
        } else {
            opened = target.dir.open_dir(&target.rel, target.follow)?;
            &opened
        };
        // Names first (sorted, and remembered while the folder is unchanged, so a later
        // page does not read the folder again), then metadata for the page alone.
        let names = dir.listing_names()?;
        let total = names.len();
        let start = after.map_or(0, |last| {
            names.partition_point(|n| n.as_bytes() <= last.as_bytes())
        });
        let end = limit.map_or(total, |l| total.min(start.saturating_add(l)));
        let mut entries = Vec::with_capacity(end - start);
        for name in &names[start..end] {
            // Gone since the names were read: not listed.
            let Ok(meta) = dir.metadata(name) else {
                continue;
            };
            entries.push(info_from(name.clone(), &meta));
        }
        Ok((entries, total))
    }

    fn delete(&self, path: &str) -> Result<(), RequestError> {
        let info = self.stat(path)?;
        if info.kind == Kind::Dir {
            return Err(RequestError::new(
                Code::IsDirectory,
                format!("{} is a folder; file_delete removes one file", info.path),
            ));
        }
        self.scope.check_unlocked(path)?;
        let target = self.scope.resolve(path)?;
        target.require_writable()?;
        target.dir.remove(target.name()?)?;
        Ok(())
    }

    fn mkdir(&self, path: &str) -> Result<(), RequestError> {
        self.scope.check_unlocked(path)?;
        let target = self.scope.resolve(path)?;
        target.require_writable()?;
        self.make_dirs(&target.dir, &target.rel)?;
        Ok(())
    }

    fn count_bytes(&self, paths: &[String]) -> Result<u64, RequestError> {
        let mut total = 0u64;
        for path in paths {
            // No link is followed at the folder counted, as the service counts.
            let dir = self.scope.resolve(path).map(|target| {
                if target.rel.is_empty() {
                    target.dir.try_clone()
                } else {
                    target.dir.open_dir(&target.rel, Follow::Never)
                }
            });
            match dir {
                Ok(Ok(dir)) => total = total.saturating_add(dir.file_bytes()?),
                Ok(Err(FsError::NotFound | FsError::PathEscapes | FsError::NotADirectory)) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(e) if e.code == Code::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    fn deliver(
        &self,
        from: &str,
        to_dir: &str,
        max_bytes: u64,
    ) -> Result<WrittenFile, RequestError> {
        let (source, info) = self.open(from)?;
        if info.size > max_bytes {
            return Err(FsError::TooLarge(max_bytes).into());
        }
        let base = Path::new(&info.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = safe_name(&base)?;
        let dest = format!("{}/{name}", to_dir.trim_end_matches('/'));
        let mut staged = self.stage(&dest, Reach::NoLinks)?;
        staged.writer.set_limit(max_bytes);
        // Checked again while copying: the file may have grown since it was opened.
        staged.fill_and_commit(|writer| writer.copy_sparse(&source))
    }

    fn run(
        &self,
        command: String,
        cwd: Option<&str>,
        timeout_secs: Option<u64>,
        worker: Option<WorkerRun>,
    ) -> Result<Output, RequestError> {
        let cwd = self.scope.absolute(cwd.unwrap_or("~"))?;
        let tree = self.scope.tree_of(&cwd)?;
        let mut policy = Policy::new(&tree.path, &self.run.full_output_dir);
        policy.base = Some(self.scope.base().to_path_buf());
        let view = match &worker {
            Some(worker) => self.worker_view(worker)?,
            None => View::Trees,
        };
        policy.sandbox = self.sandbox(&view)?;
        policy.full_output_ttl = Duration::from_secs(self.run.output_ttl_secs);
        policy.full_output_keep_max_bytes = self.run.output_max_bytes;
        let identity = Identity {
            home: self.scope.home().to_path_buf(),
            user: self.run.user.clone(),
        };
        let mut cmd = Command {
            command,
            cwd,
            timeout: timeout_secs.map(Duration::from_secs),
            ..Command::default()
        };
        if let Some(worker) = worker {
            cmd.env = worker.env;
            cmd.lifetime = Some(Duration::from_secs(worker.lifetime_secs));
            cmd.programs = worker.programs.into_iter().map(PathBuf::from).collect();
        }
        Ok(crate::run(&cmd, &identity, &policy)?)
    }

    /// The sandbox for a command: the person's trees, read-write where writable; a refused
    /// tree (its root a link) is not shown at all. Under bwrap the locked folders that
    /// exist are mounted read-only on top (Landlock cannot take back what a parent grants,
    /// so there they are restored after the command). `auto` is resolved here, in the
    /// process that runs the command (the worker in host mode).
    fn sandbox(&self, view: &View) -> Result<Sandbox, ExecError> {
        let (read_write, read_only) = match view {
            View::Trees => {
                let (read_write, read_only): (Vec<_>, Vec<_>) =
                    self.scope.trees().partition(|tree| tree.writable);
                let paths = |trees: Vec<&crate::Tree>| -> Vec<PathBuf> {
                    trees.into_iter().map(|t| t.path.clone()).collect()
                };
                (paths(read_write), paths(read_only))
            }
            // Every tree read-only and the writable folders on top: bwrap binds them
            // deeper, Landlock adds their rights to the trees' (sandbox.rs, landlock.rs).
            View::ReadOnly { writable } => (
                writable.clone(),
                self.scope.trees().map(|t| t.path.clone()).collect(),
            ),
        };
        let network = self.run.network;
        // bwrap can mount the locked folders read-only over their writable parents.
        let bwrap = |bwrap: PathBuf, mut read_only: Vec<PathBuf>, read_write| {
            read_only.extend(self.scope.locked().iter().filter(|p| p.is_dir()).cloned());
            Sandbox::Bwrap {
                bwrap,
                read_write,
                read_only,
                network,
            }
        };
        Ok(match self.run.sandbox {
            SandboxKind::None => Sandbox::None,
            SandboxKind::Bwrap => bwrap(PathBuf::from(crate::DEFAULT_BWRAP), read_only, read_write),
            SandboxKind::Landlock => Sandbox::landlock(read_write, read_only, network),
            SandboxKind::Auto => match crate::strongest()? {
                Strongest::Landlock { .. } => Sandbox::landlock(read_write, read_only, network),
                Strongest::Bwrap { bwrap: path } => bwrap(path.clone(), read_only, read_write),
            },
        })
    }

    /// What a worker's command is shown: its trees as they are, or all of them read-only
    /// but its writable folders. Each writable folder must lie in a tree the person may
    /// write, outside every locked folder; a read-only worker needs a sandbox.
    fn worker_view(&self, worker: &WorkerRun) -> Result<View, RequestError> {
        let mut writable = Vec::with_capacity(worker.writable.len());
        for folder in &worker.writable {
            let path = PathBuf::from(folder);
            if !path.is_absolute() {
                return Err(RequestError::new(
                    Code::BadPath,
                    format!("the writable folder {folder} is not an absolute path"),
                ));
            }
            self.scope.tree_of(&path)?.require_writable()?;
            self.scope.check_unlocked(folder)?;
            writable.push(path);
        }
        if !worker.read_only {
            return Ok(View::Trees);
        }
        if self.run.sandbox == SandboxKind::None {
            return Err(RequestError::new(
                Code::SandboxUnavailable,
                "a read-only worker needs a sandbox, and `[exec] sandbox` is \"none\": \
                 without one nothing keeps it from writing the person's files",
            ));
        }
        Ok(View::ReadOnly { writable })
    }

    /// A hidden temporary beside `path`, ready for bytes; the previous file's mode is kept.
    fn stage(&self, path: &str, reach: Reach) -> Result<Staged, RequestError> {
        let target = self.target_of(path, true, reach)?;
        let mut writer = AtomicWriter::create(&target.dir, &target.name)?.owner(self.owner);
        writer.set_mode(target.mode)?;
        Ok(Staged {
            writer,
            path: target.display,
            made: target.made,
        })
    }

    /// Where a write of `path` lands: the folder (its parents made when asked), the name,
    /// and the mode the file will have (the previous file's, else the default).
    pub(crate) fn target_of(
        &self,
        path: &str,
        create_parents: bool,
        reach: Reach,
    ) -> Result<WriteTarget, RequestError> {
        let display = self.scope.absolute(path)?;
        self.scope.check_unlocked(path)?;
        let target = self.scope.resolve_reached(path, reach)?;
        target.require_writable()?;
        let rel = target.name()?;
        let (parent, name) = match rel.trim_end_matches('/').rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None => ("", rel),
        };
        let (dir, made) = if create_parents {
            self.make_dirs(&target.dir, parent)?
        } else if parent.is_empty() {
            (target.dir.try_clone()?, MadeDirs::default())
        } else {
            (
                target.dir.open_dir(parent, Follow::Never)?,
                MadeDirs::default(),
            )
        };
        let name = name.to_owned();
        let mode = match dir.metadata(&name) {
            Ok(meta) if meta.kind == EntryKind::Dir => return Err(FsError::IsDirectory.into()),
            Ok(meta) => meta.mode & 0o777,
            Err(FsError::NotFound) => NEW_FILE_MODE,
            Err(e) => return Err(e.into()),
        };
        Ok(WriteTarget {
            dir,
            name,
            mode,
            display,
            made,
        })
    }

    /// The owner given to what is created (container mode: the agent's ids).
    pub(crate) fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }

    /// Creates `rel` and its parents beneath `dir`, giving new folders to the owner, and
    /// says which it made.
    fn make_dirs(&self, dir: &Dir, rel: &str) -> Result<(Dir, MadeDirs), RequestError> {
        if rel.is_empty() || rel == "." {
            return Ok((dir.try_clone()?, MadeDirs::default()));
        }
        Ok(dir.create_dir_all_made(rel, NEW_DIR_MODE, self.owner)?)
    }
}

/// What a command's sandbox shows of the person's trees.
enum View {
    /// Each tree as the person may use it.
    Trees,
    /// Every tree read-only, but these folders inside them.
    ReadOnly {
        /// Read-write on top of the read-only trees.
        writable: Vec<PathBuf>,
    },
}

struct Staged {
    writer: AtomicWriter,
    path: PathBuf,
    /// The folders made for it, taken back if it is not placed.
    made: MadeDirs,
}

/// Where a write lands: see [`Executor::target_of`].
pub(crate) struct WriteTarget {
    pub(crate) dir: Dir,
    pub(crate) name: String,
    pub(crate) mode: u32,
    pub(crate) display: PathBuf,
    /// The folders made on the way to `dir`, for a write that fails to take back.
    pub(crate) made: MadeDirs,
}

impl Staged {
    /// Fills the temporary with `fill` and places it. On a failure (too large, a full
    /// disk) the temporary goes, and so do the folders made for it while empty.
    fn fill_and_commit(
        self,
        fill: impl FnOnce(&mut AtomicWriter) -> Result<(), FsError>,
    ) -> Result<WrittenFile, RequestError> {
        let Staged {
            mut writer,
            path,
            made,
        } = self;
        // The writer is consumed or dropped (its temporary removed) before the folders go.
        let written = match fill(&mut writer) {
            Ok(()) => writer.commit(),
            Err(e) => {
                drop(writer);
                Err(e)
            }
        };
        match written {
            Ok(written) => Ok(WrittenFile {
                path: path.display().to_string(),
                size: written.size,
                sha256: written.sha256_hex(),
            }),
            Err(e) => {
                made.remove_empty();
                Err(e.into())
            }
        }
    }
}
