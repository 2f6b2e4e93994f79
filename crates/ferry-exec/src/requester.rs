//! The one requester primitive (spec tools.md T-ID): every file tool and every command
//! goes through [`Requester::execute`], whichever mode the site runs in.

use std::fs::File;

use ferry_codes::Code;

use crate::ops::{Executor, FileInfo, Op, Reply, WorkerRun, WrittenFile};
use crate::worker::WorkerPool;
use crate::{Output, RequestError};

/// Entries asked for at a time by [`Requester::list`]: each at most a name of 255 bytes
/// (up to six times that in JSON escapes) and its metadata, well inside a frame.
const LIST_PAGE_ENTRIES: usize = 1000;

/// Performs operations as one person.
#[derive(Debug)]
pub enum Requester {
    /// Local and container mode: in this process, confined to the person's trees.
    InProcess(Executor),
    /// Host mode: in the person's own worker processes, behind `ferry-posix-helper`.
    Worker(WorkerPool),
}

impl Requester {
    /// Performs one operation, and hands back the descriptor it opened, if any.
    pub fn execute(&self, op: Op) -> Result<(Reply, Option<File>), RequestError> {
        match self {
            Requester::InProcess(executor) => executor.execute(op),
            Requester::Worker(pool) => pool.execute(&op),
        }
    }

    /// The person's worker processes, in host mode; none where this process acts itself.
    pub fn workers(&self) -> Option<&WorkerPool> {
        match self {
            Requester::InProcess(_) => None,
            Requester::Worker(pool) => Some(pool),
        }
    }

    /// Opens a regular file for reading, as the person.
    pub fn open(&self, path: &str) -> Result<(File, FileInfo), RequestError> {
        match self.execute(Op::Open {
            path: path.to_owned(),
        })? {
            (Reply::Opened(info), Some(file)) => Ok((file, info)),
            _ => Err(unexpected()),
        }
    }

    /// The metadata of a path, as the person; a link is described, not followed.
    pub fn stat(&self, path: &str) -> Result<FileInfo, RequestError> {
        self.info(Op::Stat {
            path: path.to_owned(),
        })
    }

    /// The metadata of a folder a command may run in (inside the person's trees), as the
    /// person; a link is described, not followed.
    pub fn working_folder(&self, path: &str) -> Result<FileInfo, RequestError> {
        self.info(Op::WorkingFolder {
            path: path.to_owned(),
        })
    }

    /// Every entry of a folder, sorted by name; asked for a page at a time, so that no
    /// answer from the person's worker outgrows its frame however big the folder is.
    pub fn list(&self, path: &str) -> Result<Vec<FileInfo>, RequestError> {
        let mut entries: Vec<FileInfo> = Vec::new();
        loop {
            let after = entries.last().map(|e| e.path.as_str());
            let (page, total) = self.list_page(path, after, Some(LIST_PAGE_ENTRIES))?;
            let done = page.is_empty();
            entries.extend(page);
            if done || entries.len() >= total {
                return Ok(entries);
            }
        }
    }

    /// Up to `limit` entries after the name `after`, and how many the folder holds.
    pub fn list_page(
        &self,
        path: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<(Vec<FileInfo>, usize), RequestError> {
        match self.execute(Op::List {
            path: path.to_owned(),
            after: after.map(str::to_owned),
            limit,
        })? {
            (Reply::Listing { entries, total }, _) => Ok((entries, total)),
            _ => Err(unexpected()),
        }
    }

    /// Removes one file (never a folder), as the person.
    pub fn delete(&self, path: &str) -> Result<(), RequestError> {
        self.done(Op::Delete {
            path: path.to_owned(),
        })
    }

    /// Makes a folder, and any missing parents, as the person.
    pub fn mkdir(&self, path: &str) -> Result<(), RequestError> {
        self.done(Op::Mkdir {
            path: path.to_owned(),
        })
    }

    /// Copies `from` into `to_dir` (holes kept); over `max_bytes` it is refused.
    pub fn deliver(
        &self,
        from: &str,
        to_dir: &str,
        max_bytes: u64,
    ) -> Result<WrittenFile, RequestError> {
        self.written(Op::Deliver {
            from: from.to_owned(),
            to_dir: to_dir.to_owned(),
            max_bytes,
        })
    }

    /// The apparent size of every file beneath the folders `paths`, counted as the person.
    pub fn count_bytes(&self, paths: Vec<String>) -> Result<u64, RequestError> {
        match self.execute(Op::CountBytes { paths })? {
            (Reply::Counted { bytes }, _) => Ok(bytes),
            _ => Err(unexpected()),
        }
    }

    /// Removes the person's expired saved command output.
    pub fn sweep_output(&self) -> Result<(), RequestError> {
        self.done(Op::SweepOutput)
    }

    /// Runs a shell command as the person, in `cwd` (none: their home), until it ends or times out.
    pub fn run(
        &self,
        command: String,
        cwd: Option<String>,
        timeout_secs: Option<u64>,
    ) -> Result<Output, RequestError> {
        self.ran(Op::Run {
            command,
            cwd,
            timeout_secs,
            worker: None,
        })
    }

    /// Runs a herd worker's command as the person (spec handoffs.md H-WHERE): a command
    /// run with what `worker` adds, until it ends, its lifetime passes, or the process
    /// calling this is killed (then the command's whole tree is ended).
    pub fn run_worker(
        &self,
        command: String,
        cwd: Option<String>,
        worker: WorkerRun,
    ) -> Result<Output, RequestError> {
        self.ran(Op::Run {
            command,
            cwd,
            timeout_secs: None,
            worker: Some(worker),
        })
    }

    fn info(&self, op: Op) -> Result<FileInfo, RequestError> {
        match self.execute(op)? {
            (Reply::Info(info), _) => Ok(info),
            _ => Err(unexpected()),
        }
    }

    fn ran(&self, op: Op) -> Result<Output, RequestError> {
        match self.execute(op)? {
            (Reply::Ran(output), _) => Ok(output),
            _ => Err(unexpected()),
        }
    }

    fn written(&self, op: Op) -> Result<WrittenFile, RequestError> {
        match self.execute(op)? {
            (Reply::Written(file), _) => Ok(file),
            _ => Err(unexpected()),
        }
    }

    fn done(&self, op: Op) -> Result<(), RequestError> {
        match self.execute(op)? {
            (Reply::Done, _) => Ok(()),
            _ => Err(unexpected()),
        }
    }
}

fn unexpected() -> RequestError {
    RequestError::new(
        Code::WorkerFailed,
        "the process acting as the person answered out of turn",
    )
}
