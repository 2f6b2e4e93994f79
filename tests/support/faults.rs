//! A failing disk for one process, injected for real at its system calls: a seccomp
//! filter hands each `fsync` and `fdatasync` of the process to the test (a user
//! notification), which answers `EIO` for the files below a chosen folder, as a disk that
//! lost a write reports it at the next fsync, and lets every other go on unchanged (the
//! site's database included). Its renames come to the test too, so that it can kill the
//! process at an exact point: at the n-th rename into the folder, before it happens.
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

/// A jump to the last instruction (`USER_NOTIF`) when the call is `nr`, `skip` of these
/// before it.
const fn to_the_test(nr: libc::c_long, skip: u8) -> sock_filter {
    op(
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        skip,
        0,
        nr as u32,
    )
}

/// `fsync`, `fdatasync` and the renames that name folders go to the listener; every
/// other call is allowed.
static TO_THE_TEST: [sock_filter; 7] = [
    op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
    to_the_test(libc::SYS_fsync, 4),
    to_the_test(libc::SYS_fdatasync, 3),
    to_the_test(libc::SYS_renameat, 2),
    to_the_test(libc::SYS_renameat2, 1),
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
                len: TO_THE_TEST.len() as u16,
                filter: TO_THE_TEST.as_ptr().cast_mut(),
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

/// The test's side of a [`prepare`]d process's fsyncs and renames: `EIO` for the fsyncs
/// of files below a folder while failing, and a kill at a chosen rename into it.
pub struct Disk {
    failing: Arc<AtomicBool>,
    failed: Arc<AtomicUsize>,
    /// Renames into the folder still to let through before the process is killed at
    /// the next; `usize::MAX` never.
    renames_left: Arc<AtomicUsize>,
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
        let renames_left = Arc::new(AtomicUsize::new(usize::MAX));
        let stop = Arc::new(AtomicBool::new(false));
        let rules = Rules {
            below: below.to_owned(),
            failing: failing.clone(),
            failed: failed.clone(),
            renames_left: renames_left.clone(),
        };
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || answer(listener, &rules, &stop))
        };
        Disk {
            failing,
            failed,
            renames_left,
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

    /// Kills the process (SIGKILL) at its rename into the folder after the next `passed`
    /// ones, before that rename happens.
    pub fn kill_at_rename_after(&self, passed: usize) {
        self.renames_left.store(passed, Ordering::SeqCst);
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

/// What [`answer`] does with each call.
struct Rules {
    below: PathBuf,
    failing: Arc<AtomicBool>,
    failed: Arc<AtomicUsize>,
    renames_left: Arc<AtomicUsize>,
}

/// What one call gets.
enum Verdict {
    Proceed,
    Fail(i32),
    Kill,
}

impl Rules {
    fn judge(&self, request: &libc::seccomp_notif) -> Verdict {
        let nr = libc::c_long::from(request.data.nr);
        // The descriptor that says where: the file for a sync, the new name's folder for
        // a rename.
        let fd = if nr == libc::SYS_fsync || nr == libc::SYS_fdatasync {
            request.data.args[0]
        } else {
            request.data.args[2]
        };
        let path = std::fs::read_link(format!("/proc/{}/fd/{}", request.pid, fd as i32))
            .unwrap_or_default();
        if !path.starts_with(&self.below) {
            return Verdict::Proceed;
        }
        if nr == libc::SYS_fsync || nr == libc::SYS_fdatasync {
            if self.failing.load(Ordering::SeqCst) {
                self.failed.fetch_add(1, Ordering::SeqCst);
                return Verdict::Fail(libc::EIO);
            }
            return Verdict::Proceed;
        }
        let left = self.renames_left.load(Ordering::SeqCst);
        match left {
            usize::MAX => Verdict::Proceed,
            0 => {
                self.renames_left.store(usize::MAX, Ordering::SeqCst);
                Verdict::Kill
            }
            n => {
                self.renames_left.store(n - 1, Ordering::SeqCst);
                Verdict::Proceed
            }
        }
    }
}

/// Answers notifications until told to stop or the process is gone.
fn answer(listener: OwnedFd, rules: &Rules, stop: &AtomicBool) {
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
        let (error, flags) = match rules.judge(&request) {
            Verdict::Proceed => (0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
            Verdict::Fail(errno) => (-errno, 0),
            Verdict::Kill => {
                // The call waits for this answer, so the process dies before it is made.
                // SAFETY: a signal to the caller's process.
                unsafe { libc::kill(request.pid as i32, libc::SIGKILL) };
                continue;
            }
        };
        let response = libc::seccomp_notif_resp {
            id: request.id,
            val: 0,
            error,
            flags,
        };
        // SAFETY: the response is complete; a caller gone meanwhile is ENOENT, ignored.
        unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &response) };
    }
}
