//! Reading a file as the person: the controller's files through its requester, a
//! worker's own files directly (the worker process already is the person).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use ferry_codes::Code;
use ferry_exec::Requester;
use rustix::fs::{FileType, Mode, OFlags};

use crate::HerdError;

/// Opens regular files for reading as some person.
pub trait Reader {
    /// Opens the absolute `path` as the person may: links followed as their permissions
    /// (or their sandbox) allow, a FIFO or device refused without blocking.
    fn open(&self, path: &Path) -> Result<File, HerdError>;
}

impl Reader for Requester {
    fn open(&self, path: &Path) -> Result<File, HerdError> {
        let text = path
            .to_str()
            .ok_or_else(|| HerdError::new(Code::BadPath, "the path is not valid UTF-8"))?;
        let (file, _) = Requester::open(self, text)?;
        Ok(file)
    }
}

/// Reads as `inner` does, but refuses a file that lies, once every link is followed,
/// beneath `secret`: the herd's keys. Their folder is outside every tree a worker is
/// shown, but a worker could have its controller (the person, in host mode with no
/// sandbox) read them for it: a result it replaced with a link to a key, handed on as
/// evidence to the next worker, would put the key in a mailbox every worker can read.
pub struct Guarded<'a> {
    inner: &'a dyn Reader,
    secret: PathBuf,
}

impl<'a> Guarded<'a> {
    /// `inner`, refusing whatever lies beneath `secret` (canonical).
    pub fn new(inner: &'a dyn Reader, secret: PathBuf) -> Guarded<'a> {
        Guarded { inner, secret }
    }
}

impl Reader for Guarded<'_> {
    fn open(&self, path: &Path) -> Result<File, HerdError> {
        let file = self.inner.open(path)?;
        if canonical_path(&file)?.starts_with(&self.secret) {
            return Err(HerdError::new(
                Code::PathDenied,
                format!(
                    "{} leads into the herd's keys, which are never handed over",
                    path.display()
                ),
            ));
        }
        Ok(file)
    }
}

/// The process itself is the person (a worker, or the service reading its own site's
/// bundled definitions).
#[derive(Clone, Copy, Debug, Default)]
pub struct Direct;

impl Reader for Direct {
    fn open(&self, path: &Path) -> Result<File, HerdError> {
        // O_NONBLOCK so that a FIFO cannot hang the open; cleared once it is known to be
        // a regular file.
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| HerdError::from(std::io::Error::from(e)))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| HerdError::from(std::io::Error::from(e)))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => {
                return Err(HerdError::new(
                    Code::IsDirectory,
                    "the path is a folder, not a file",
                ));
            }
            _ => {
                return Err(HerdError::new(
                    Code::NotAFile,
                    "the path is not a regular file (a pipe, socket or device)",
                ));
            }
        }
        rustix::fs::fcntl_setfl(&fd, OFlags::RDONLY)
            .map_err(|e| HerdError::from(std::io::Error::from(e)))?;
        Ok(File::from(fd))
    }
}

/// The canonical absolute path of an open file: the one the kernel reached it by, every
/// link and `..` resolved (`realpath` of what was actually opened).
pub fn canonical_path(file: &File) -> Result<PathBuf, HerdError> {
    Ok(std::fs::read_link(format!(
        "/proc/self/fd/{}",
        file.as_raw_fd()
    ))?)
}

/// `path` made absolute from the canonical folder `cwd` when relative. Leading `./` and
/// `../` are taken off by name: `cwd` has no link in it, so that is exactly where the
/// kernel would go, and a confined requester refuses `..` itself. Any later `..` is left
/// to the reader; `.//x` stays beneath `cwd`, never the absolute `/x`.
pub fn absolute_from(cwd: &Path, path: &str) -> PathBuf {
    if path.starts_with('/') {
        return PathBuf::from(path);
    }
    let mut base = cwd.to_path_buf();
    let mut rest = path;
    loop {
        if let Some(after) = rest.strip_prefix("./") {
            rest = after;
        } else if let Some(after) = rest.strip_prefix("../") {
            base.pop();
            rest = after;
        } else if rest.starts_with('/') {
            rest = rest.trim_start_matches('/');
        } else {
            break;
        }
    }
    base.join(rest)
}
