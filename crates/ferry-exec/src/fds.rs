//! The descriptors a command inherits: its three standard streams, nothing else.
//!
//! Rust and the libraries the service uses open everything close-on-exec, but the
//! service may itself have inherited descriptors without it from whatever started it (a
//! shell, a supervisor). A command would get those too, and no sandbox mediates an open
//! descriptor: one on the site's database would hand it over past Landlock and bwrap.

use std::io;

/// Descriptors this size and up are left alone when the kernel has no `close_range`.
const SCAN_MAX_FDS: u64 = 65_536;

/// Marks every descriptor above stderr close-on-exec. Raw system calls only: it runs in
/// the child between fork and exec.
pub(crate) fn cloexec_above_stderr() -> io::Result<()> {
    // SAFETY: close_range takes no pointers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    // Kernels before 5.11: one fcntl per descriptor the limit allows.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(SCAN_MAX_FDS, |n| n.min(SCAN_MAX_FDS));
    for fd in 3..limit as libc::c_int {
        // SAFETY: fcntl on a number that may not be open; EBADF is the only harm.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}
