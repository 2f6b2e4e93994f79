//! A failing disk for one process, injected for real at its system calls: a seccomp
//! filter hands each `fsync` and `fdatasync` of the process to the test (a user
//! notification), which answers `EIO` for the files below a chosen folder, as a disk that
//! lost a write reports it at the next fsync, and lets every other go on unchanged (the
//! site's database included).
//!
//! [`prepare`] sets up a command before it is spawned; [`Disk::watch`] takes the filter's
//! listener from the started process and answers for it until dropped.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use libc::sock_filter;

/// Where the started process keeps the filter's listener, for [`Disk::watch`] to take.
const LISTENER_FD: i32 = 213;

const fn op(code: u32, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// `fsync` and `fdatasync` go to the listener; everything else is allowed.
static SYNCS_TO_THE_TEST: [sock_filter; 5] = [
    op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
    op(
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        2,
        0,
        libc::SYS_fsync as u32,
    ),
    op(
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        1,
        0,
        libc::SYS_fdatasync as u32,
    ),
    op(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    op(
        libc::BPF_RET | libc::BPF_K,
        0,
        0,
        libc::SECCOMP_RET_USER_NOTIF,
    ),
];

/// Makes the process `cmd` starts hand its fsyncs to a [`Disk`] (which must then watch
/// it: until then, its first fsync waits).
pub fn prepare(cmd: &mut Command) {
    // SAFETY: raw system calls only, as the time between fork and exec needs.
    unsafe {
        cmd.pre_exec(|| {
            let fprog = libc::sock_fprog {
                len: SYNCS_TO_THE_TEST.len() as u16,
                filter: SYNCS_TO_THE_TEST.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let listener = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &fprog as *const libc::sock_fprog,
            );
            if listener < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // dup2 leaves the copy open across exec; the listener itself is close-on-exec.
            if libc::dup2(listener as i32, LISTENER_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(listener as i32);
            Ok(())
        });
    }
}

/// The test's side of a [`prepare`]d process's fsyncs: `EIO` for files below a folder
/// while failing, success otherwise.
pub struct Disk {
    failing: Arc<AtomicBool>,
    failed: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Disk {
    /// Answers the fsyncs of the started process `pid`; fails those of files below
    /// `below` once [`Disk::fail`] is called.
    pub fn watch(pid: u32, below: &Path) -> Disk {
        let listener = take_listener(pid);
        let failing = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let below = below.to_owned();
        let thread = {
            let (failing, failed, stop) = (failing.clone(), failed.clone(), stop.clone());
            std::thread::spawn(move || answer(listener, &below, &failing, &failed, &stop))
        };
        Disk {
            failing,
            failed,
            stop,
            thread: Some(thread),
        }
    }

    /// From now on, fsyncs below the folder fail with `EIO`.
    pub fn fail(&self) {
        self.failing.store(true, Ordering::SeqCst);
    }

    /// From now on, every fsync succeeds again.
    pub fn heal(&self) {
        self.failing.store(false, Ordering::SeqCst);
    }

    /// How many fsyncs were failed so far.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The listener the process keeps at [`LISTENER_FD`], copied into this one.
fn take_listener(pid: u32) -> OwnedFd {
    // SAFETY: plain system calls; each result is checked before use.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        assert!(
            pidfd >= 0,
            "pidfd_open: {}",
            std::io::Error::last_os_error()
        );
        let pidfd = OwnedFd::from_raw_fd(pidfd as i32);
        let fd = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), LISTENER_FD, 0);
        assert!(
            fd >= 0,
            "pidfd_getfd (the test must run as root): {}",
            std::io::Error::last_os_error()
        );
        OwnedFd::from_raw_fd(fd as i32)
    }
}

/// Answers notifications until told to stop or the process is gone.
fn answer(
    listener: OwnedFd,
    below: &PathBuf,
    failing: &AtomicBool,
    failed: &AtomicUsize,
    stop: &AtomicBool,
) {
    let fd = listener.as_raw_fd();
    while !stop.load(Ordering::SeqCst) {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, owned here.
        let ready = unsafe { libc::poll(&mut poll, 1, 100) };
        if ready <= 0 {
            continue;
        }
        if poll.revents & libc::POLLIN == 0 {
            return; // POLLHUP: every process under the filter is gone.
        }
        // SAFETY: the kernel fills the zeroed request it is given (it must be zeroed).
        let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut request) } != 0 {
            continue; // The caller died meanwhile.
        }
        let file = std::fs::read_link(format!("/proc/{}/fd/{}", request.pid, request.data.args[0]))
            .unwrap_or_default();
        let fail = failing.load(Ordering::SeqCst) && file.starts_with(below);
        let response = libc::seccomp_notif_resp {
            id: request.id,
            val: 0,
            error: if fail { -libc::EIO } else { 0 },
            flags: if fail {
                0
            } else {
                libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
            },
        };
        if fail {
            failed.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the response is complete; a caller gone meanwhile is ENOENT, ignored.
        unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &response) };
    }
}
