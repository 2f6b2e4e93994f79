//! The shell in its PTY: started with portable-pty, its master read and written without
//! blocking any thread.
//!
//! The master is used through a descriptor of our own, non-blocking and watched by the
//! runtime, rather than portable-pty's reader and writer: a read blocked on a PTY that a
//! stray process keeps open would hold its thread for ever, and the writer's drop types a
//! newline and an end-of-file into the shell. Nothing is read while the gateway is not
//! taking output, so the PTY fills and the shell blocks on its own writes: the memory a
//! terminal holds is one chunk, whatever the shell prints.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferry_codes::Code;
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use rustix::fs::OFlags;
use rustix::io::Errno;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::super::errors::refuse;
use crate::NodeError;

/// The program a terminal runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shell {
    /// Its full path.
    pub path: PathBuf,
    /// Its last part: what the node's hello advertises as its shell.
    pub name: String,
}

/// The shell when `$SHELL` is unset or not an absolute path.
const FALLBACK_SHELL: &str = "/bin/sh";

impl Shell {
    /// The shell of `$SHELL` (`value`), when it is an absolute path to a file name, else
    /// `/bin/sh`. The hello's shell and the program a terminal runs both come from here,
    /// so the gateway quotes for the shell that really reads the paste.
    pub fn from_env(value: Option<OsString>) -> Shell {
        let path = value
            .map(PathBuf::from)
            .filter(|path| path.is_absolute() && path.file_name().is_some())
            .unwrap_or_else(|| PathBuf::from(FALLBACK_SHELL));
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "sh".to_owned());
        Shell { path, name }
    }
}

/// A shell just started in a new PTY.
pub(super) struct Started {
    /// The master, for resizes; dropped (with [`Started::io`]) to close the PTY.
    pub master: Mutex<Box<dyn MasterPty + Send>>,
    /// The master's bytes.
    pub io: PtyIo,
    /// The shell's process id: it leads its own session and process group.
    pub pid: u32,
}

/// Starts `shell` in a PTY of `size`, in `cwd`, with the node's environment plus the
/// terminal's type. portable-pty makes the shell a session leader (`setsid`) with the PTY
/// as its controlling terminal (`TIOCSCTTY`), and closes every other descriptor in it.
pub(super) fn start(shell: &Shell, cwd: &Path, size: PtySize) -> Result<Started, NodeError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        refuse(
            Code::SpawnFailed,
            format!(
                "the node could not {what} for {}: {e}",
                shell.path.display()
            ),
        )
    };
    let pair = native_pty_system()
        .openpty(size)
        .map_err(|e| failed("open a PTY", &e))?;
    let mut command = CommandBuilder::new(&shell.path);
    command.cwd(cwd);
    command.env("SHELL", &shell.path);
    command.env("TERM", "xterm-256color");
    command.env("COLORTERM", "truecolor");
    let child = pair
        .slave
        .spawn_command(command)
        .map_err(|e| failed("start the shell", &e))?;
    // Only the shell keeps the slave open: once it and its jobs are gone, reads see the end.
    drop(pair.slave);
    let pid = child
        .process_id()
        .ok_or_else(|| failed("learn the process id", &"none"))?;
    // The child is reaped by its session (waitid/waitpid on the pid), never by this handle.
    drop(child);
    let raw = pair
        .master
        .as_raw_fd()
        .ok_or_else(|| failed("reach the PTY", &"no descriptor"))?;
    // SAFETY: `raw` is the master's open descriptor, and `pair.master` keeps it open for
    // as long as the borrow lives (it is duplicated at once).
    let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
    let io = PtyIo::new(borrowed).map_err(|e| failed("watch the PTY", &e))?;
    Ok(Started {
        master: Mutex::new(pair.master),
        io,
        pid,
    })
}

/// The PTY's master through a non-blocking descriptor of our own.
pub(super) struct PtyIo {
    fd: AsyncFd<OwnedFd>,
}

impl PtyIo {
    fn new(master: BorrowedFd<'_>) -> io::Result<PtyIo> {
        let fd = rustix::io::fcntl_dupfd_cloexec(master, 0)?;
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | OFlags::NONBLOCK)?;
        // SAFETY: the descriptor is owned by the `AsyncFd` and is never replaced or
        // closed while it is.
        let fd =
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE | Interest::WRITABLE) }
                .map_err(io::Error::from)?;
        Ok(PtyIo { fd })
    }

    /// Reads what the shell printed; 0 once no process holds the PTY open any more (the
    /// kernel says EIO then).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.readable().await?;
            match ready.try_io(|fd| read_now(fd.get_ref().as_fd(), buf)) {
                Ok(Ok(Some(n))) => return Ok(n),
                Ok(Ok(None)) => continue,
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Reads what is there now, without waiting: `None` when nothing is.
    pub fn read_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match read_now(self.fd.get_ref().as_fd(), buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            other => other,
        }
    }

    /// Writes some of `bytes` to the shell's input, waiting while the PTY is full.
    pub async fn write(&self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.writable().await?;
            match ready.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), bytes)?)) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `bytes`, waiting while the PTY is full.
    pub async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.write(bytes).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => bytes = &bytes[n..],
            }
        }
        Ok(())
    }
}

/// One non-blocking read: `Some(0)` at the end, `None` when nothing is there (a
/// `WouldBlock` error, so that the runtime's readiness is cleared).
fn read_now(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    match rustix::io::read(fd, &mut *buf) {
        Ok(n) => Ok(Some(n)),
        // The slave side is closed by every process that had it.
        Err(Errno::IO) => Ok(Some(0)),
        Err(Errno::INTR) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A PTY of `cols` × `rows`.
pub(super) fn size(cols: u16, rows: u16) -> PtySize {
    PtySize {
        rows,
        cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}
