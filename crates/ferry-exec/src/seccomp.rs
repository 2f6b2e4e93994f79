//! The socket filter that goes with [`Sandbox::Landlock`](crate::Sandbox::Landlock): what
//! Landlock cannot yet say about sockets on the kernels in use, said with seccomp.
//!
//! Landlock mediates UDP only from ABI 10 and connecting to a named unix socket only from
//! ABI 9; below that a confined command could send datagrams (DNS included) anywhere and
//! talk to every local daemon whose socket the person's permissions reach (dbus, a
//! container engine, a user's service manager). So, on every kernel, the command may
//! create sockets of these kinds only:
//!
//! - `AF_NETLINK` with `NETLINK_ROUTE`, which talks to the kernel (the C library asks it
//!   for the addresses of the machine's interfaces); no other netlink protocol;
//! - `AF_INET` and `AF_INET6`, only when the network is allowed;
//! - unconnected private pairs (`socketpair`, `AF_UNIX` streams and sequenced packets),
//!   which programs such as Python's multiprocessing use between their own processes. A
//!   datagram pair is refused: a datagram socket can be sent from to any named socket.
//!
//! Anything else is `EACCES`, as Landlock itself answers. `io_uring_setup` is `ENOSYS`, as
//! on a kernel without io_uring (which programs fall back from): a ring creates sockets
//! without the `socket` system call. A system call of another architecture than the one
//! this was built for (32-bit calls on x86_64 and aarch64, x32 calls), whose numbers mean
//! other calls, kills the process. Where Landlock covers something too (TCP from ABI 4,
//! abstract sockets from ABI 6), both apply.
//!
//! The program is built before the fork; the child only hands it to the kernel.

use std::io;

use libc::sock_filter;

use crate::ExecError;

/// The `seccomp_data.arch` of the architecture this was built for (`AUDIT_ARCH_*`: the ELF
/// machine, 64-bit, little-endian); `None` where the filter has no syscall table checked.
#[cfg(target_arch = "x86_64")]
const ARCH: Option<u32> = Some(libc::EM_X86_64 as u32 | AUDIT_ARCH_64BIT_LE);
#[cfg(target_arch = "aarch64")]
const ARCH: Option<u32> = Some(libc::EM_AARCH64 as u32 | AUDIT_ARCH_64BIT_LE);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCH: Option<u32> = None;
/// `__AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const AUDIT_ARCH_64BIT_LE: u32 = 0x8000_0000 | 0x4000_0000;
/// x32 system calls come with the x86_64 arch and this bit set in their number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Offsets into `struct seccomp_data`: the call's number, its arch, its arguments.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
const ARGS_OFFSET: u32 = 16;
/// The low half of an argument, the whole of an `int` one: the kernel reads no more.
const LOW_HALF: u32 = if cfg!(target_endian = "little") { 0 } else { 4 };
/// `SOCK_TYPE_MASK`: a socket type without `SOCK_NONBLOCK` and `SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u32 = 0xf;

/// A classic BPF program for `PR_SET_SECCOMP`.
pub(crate) struct Filter(Vec<sock_filter>);

impl Filter {
    /// The socket filter for a command with or without the network; refused on an
    /// architecture it has no checked syscall numbers for.
    pub(crate) fn sockets(network: bool) -> Result<Filter, ExecError> {
        let Some(arch) = ARCH else {
            return Err(ExecError::SandboxUnavailable {
                what: "the Landlock sandbox has no socket filter for this architecture",
                path: "/proc/sys/kernel/seccomp".into(),
            });
        };
        available()?;
        let eacces = ret(libc::SECCOMP_RET_ERRNO | libc::EACCES as u32);
        let allow = ret(libc::SECCOMP_RET_ALLOW);

        // Of netlink, only the routing protocol the C library asks for interfaces: others
        // reach host processes (`NETLINK_USERSOCK`) or list the host's sockets
        // (`NETLINK_SOCK_DIAG`).
        let route_only = [
            vec![load(arg(2))],
            when(libc::NETLINK_ROUTE as u32, vec![allow]),
            vec![eacces],
        ];
        let mut families = vec![when(libc::AF_NETLINK as u32, route_only.concat())];
        if network {
            families.push(when(libc::AF_INET as u32, vec![allow]));
            families.push(when(libc::AF_INET6 as u32, vec![allow]));
        }
        let mut socket = vec![load(arg(0))];
        socket.extend(families.into_iter().flatten());
        socket.push(eacces);

        let pair_types = [
            vec![
                load(arg(1)),
                stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, SOCK_TYPE_MASK),
            ],
            when(libc::SOCK_STREAM as u32, vec![allow]),
            when(libc::SOCK_SEQPACKET as u32, vec![allow]),
            vec![eacces],
        ];
        let mut socketpair = vec![load(arg(0))];
        socketpair.extend(when(libc::AF_UNIX as u32, pair_types.concat()));
        socketpair.push(eacces);

        let kill = ret(libc::SECCOMP_RET_KILL_PROCESS);
        let mut program = vec![load(ARCH_OFFSET), jump(libc::BPF_JEQ, arch, 1, 0), kill];
        program.push(load(NR_OFFSET));
        #[cfg(target_arch = "x86_64")]
        program.extend([jump(libc::BPF_JGE, X32_SYSCALL_BIT, 0, 1), kill]);
        program.extend(when(
            libc::SYS_io_uring_setup as u32,
            vec![ret(libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32)],
        ));
        program.extend(when(libc::SYS_socket as u32, socket));
        program.extend(when(libc::SYS_socketpair as u32, socketpair));
        program.push(allow);
        Ok(Filter(program))
    }

    /// Installs the filter on the calling process for good; a raw system call only, for
    /// the child between fork and exec, after `no_new_privs` (which Landlock sets).
    pub(crate) fn install(&self) -> io::Result<()> {
        let fprog = libc::sock_fprog {
            // At most a few dozen instructions (see the test below).
            len: self.0.len() as u16,
            // The kernel copies the program and never writes to it.
            filter: self.0.as_ptr().cast_mut(),
        };
        let mode = libc::c_ulong::from(libc::SECCOMP_MODE_FILTER);
        // SAFETY: a plain prctl; `fprog` and the program it points to outlive it.
        let done = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                mode,
                &fprog as *const libc::sock_fprog,
            )
        };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Whether this kernel takes seccomp filters with the actions the filter returns; asked in
/// the parent, so that a kernel without them refuses the run instead of failing the spawn.
fn available() -> Result<(), ExecError> {
    for action in [libc::SECCOMP_RET_KILL_PROCESS, libc::SECCOMP_RET_ERRNO] {
        // SAFETY: the kernel reads one u32 through the pointer, which is valid.
        let answer = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_ACTION_AVAIL,
                0,
                &action as *const u32,
            )
        };
        if answer != 0 {
            return Err(ExecError::SandboxUnavailable {
                what: "this kernel does not offer the seccomp filters the Landlock sandbox \
                       needs to cut sockets",
                path: "/proc/sys/kernel/seccomp/actions_avail".into(),
            });
        }
    }
    Ok(())
}

/// Where the low half of argument `n` lies.
const fn arg(n: u32) -> u32 {
    ARGS_OFFSET + 8 * n + LOW_HALF
}

const fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(op: u32, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// Loads the 32-bit word at `offset` of `seccomp_data`.
const fn load(offset: u32) -> sock_filter {
    stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset)
}

const fn ret(action: u32) -> sock_filter {
    stmt(libc::BPF_RET | libc::BPF_K, action)
}

/// `block` when the loaded word is `k`, else what follows it; `block` must end in a
/// return, so that it never falls through into what follows.
fn when(k: u32, block: Vec<sock_filter>) -> Vec<sock_filter> {
    let skip = u8::try_from(block.len()).expect("a filter block fits a jump");
    let mut out = vec![jump(libc::BPF_JEQ, k, 0, skip)];
    out.extend(block);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_through_the_program_ends_in_a_return() {
        for network in [false, true] {
            let Filter(program) = Filter::sockets(network).unwrap();
            assert!(program.len() < 64, "{} instructions", program.len());
            let is_ret = |i: &sock_filter| u32::from(i.code) & 0x07 == libc::BPF_RET;
            assert!(is_ret(program.last().unwrap()));
            for (at, insn) in program.iter().enumerate() {
                if u32::from(insn.code) & 0x07 == libc::BPF_JMP {
                    for target in [insn.jt, insn.jf] {
                        assert!(at + 1 + usize::from(target) < program.len(), "{at}");
                    }
                }
            }
        }
    }
}
