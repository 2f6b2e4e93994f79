//! Taking kernel features away from one process, for real, with a seccomp filter: a
//! machine without Landlock, or without user namespaces too, on the machine at hand.
//!
//! [`HIDE_LANDLOCK`] answers `landlock_create_ruleset` (every Landlock probe included)
//! with `ENOSYS`, as a kernel built without it does. [`HIDE_LANDLOCK_AND_USER_NAMESPACES`]
//! also answers `clone` and `unshare` asking for a new user namespace with `EPERM`, as a
//! kernel or container that forbids them does, and `clone3` (whose flags a filter cannot
//! see) with `ENOSYS`, so that the C library falls back to `clone`.
//!
//! The syscall numbers are those of the architecture the test was built for, which is
//! the one it runs on, so the filters need no architecture check.

use libc::sock_filter;

const fn op(code: u32, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}
const LOAD_NR: sock_filter = op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0);
/// `seccomp_data.args[0]` starts at byte 16; its low half holds the clone flags.
const LOAD_ARG0: sock_filter = op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 16);
const fn jeq(nr: libc::c_long, jt: u8, jf: u8) -> sock_filter {
    op(
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        jt,
        jf,
        nr as u32,
    )
}
const fn ret(k: u32) -> sock_filter {
    op(libc::BPF_RET | libc::BPF_K, 0, 0, k)
}
const ALLOW: sock_filter = ret(libc::SECCOMP_RET_ALLOW);
const ENOSYS: sock_filter = ret(libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
const EPERM: sock_filter = ret(libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);

/// A kernel without Landlock.
pub static HIDE_LANDLOCK: [sock_filter; 4] = [
    LOAD_NR,
    jeq(libc::SYS_landlock_create_ruleset, 0, 1),
    ENOSYS,
    ALLOW,
];

/// A kernel without Landlock that refuses new user namespaces.
pub static HIDE_LANDLOCK_AND_USER_NAMESPACES: [sock_filter; 10] = [
    LOAD_NR,
    jeq(libc::SYS_landlock_create_ruleset, 5, 0),
    jeq(libc::SYS_clone3, 4, 0),
    jeq(libc::SYS_clone, 1, 0),
    jeq(libc::SYS_unshare, 0, 3),
    LOAD_ARG0,
    op(
        libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K,
        2,
        1,
        libc::CLONE_NEWUSER as u32,
    ),
    ENOSYS,
    ALLOW,
    EPERM,
];

/// Installs `program` for the calling thread and everything it starts. Raw system calls
/// only, so it may run between fork and exec.
pub fn install(program: &'static [sock_filter]) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        // The kernel copies the program and never writes to it.
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: plain prctl calls; `fprog` and the program outlive them.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mode = libc::c_ulong::from(libc::SECCOMP_MODE_FILTER);
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            mode,
            &fprog as *const libc::sock_fprog,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
