//! Landlock for [`Sandbox::Landlock`](crate::Sandbox::Landlock): bwrap's confinement
//! without root, a setuid helper or user namespaces, only a kernel with Landlock.
//!
//! The command may read and execute beneath the read-only trees, the system folders and
//! `/etc`; it may do anything beneath the read-write trees and the run's private
//! `TMPDIR`; it may read and write a few devices. Everything else, other people's trees
//! included, is denied (`EACCES`) rather than absent as under bwrap: a name can still be
//! probed with `stat`, which Landlock does not mediate, but no content read, no folder
//! listed, nothing written. `no_new_privs` comes with it, so setuid programs gain nothing.
//! A program outside the trees (a herd worker's ferry binary) gets a rule on the file
//! itself: reading and executing it, nothing else in its folder. A read-only worker's
//! writable folder lies inside a read-only tree, which is fine: rights add up.
//!
//! Network: without `network`, TCP bind and connect are denied (ABI 4 and later; an older
//! kernel is refused, never run with the network open). Landlock mediates UDP only from
//! ABI 10 and connecting to a named unix socket only from ABI 9, so a seccomp filter
//! ([`Filter`], seccomp.rs) is enforced with the ruleset on every kernel: no socket but
//! netlink, and internet ones only with `network`; no unix socket but private pairs.
//! Where the kernel can (ABI 6), the command may neither signal nor reach the abstract
//! unix sockets of processes outside its own run.
//!
//! What bwrap gives and this does not: a private `/proc` (here there is none, see
//! [`SYSTEM_READ`]), a private `/tmp` (here `/tmp` is denied and `TMPDIR` is the run's own
//! folder), a pid namespace (a command that starts its own session escapes the group
//! kill, as without a sandbox), and read-only trees nested in read-write ones (Landlock
//! rights add up along a path, so such a tree is refused, not left writable).

use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    PathFdError, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError,
    RulesetStatus, Scope,
};
use rustix::io::Errno;

use crate::ExecError;
use crate::extras::Program;
use crate::sandbox::{RESOLVED_DIR, SYSTEM_DIRS, Trees};
use crate::scope::Base;
use crate::seccomp::Filter;

/// The newest ABI whose rights are asked for. The crate hands a kernel that knows fewer
/// only what it knows, on top of the floors below, which are required.
const NEWEST_ABI: ABI = ABI::V10;
/// Without the first ABI's rights the filesystem is not confined at all.
const FS_FLOOR_ABI: ABI = ABI::V1;
/// The first ABI that confines TCP, required when the network is cut.
const NET_FLOOR_ABI: ABI = ABI::V4;
/// What [`ExecError::SandboxUnavailable`] names when Landlock is missing: the kernel's
/// list of active security modules, where an operator looks for it.
const LSM_LIST: &str = "/sys/kernel/security/lsm";

/// Read and execute beneath these besides [`SYSTEM_DIRS`]. No `/proc`: a rule names an
/// inode, so `/proc/self` opened here would be this service's own folder, not the
/// command's, and each process the command starts has yet another; all of `/proc` would
/// show every process of the machine, which bwrap's private `/proc` hides. Tools that
/// only follow `/proc/self/...` links (`/dev/fd`, `/dev/stdout`, `readlink`) still work,
/// since Landlock checks what a path leads to, not the way there.
const SYSTEM_READ: [&str; 2] = ["/usr", "/etc"];
/// Opened for reading and writing: bwrap's minimal `/dev`.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The checked sandbox: the trees, a ruleset holding every rule but `TMPDIR`'s, and the
/// socket filter.
pub(crate) struct Landlock {
    pub trees: Trees,
    ruleset: RulesetCreated,
    filter: Filter,
}

impl Landlock {
    /// Resolves the trees and builds the ruleset; refuses when the kernel cannot enforce
    /// it (no Landlock, or no network confinement when the network is cut).
    pub(crate) fn check(
        base: Option<&Base>,
        read_write: &[PathBuf],
        read_only: &[PathBuf],
        network: bool,
    ) -> Result<Landlock, ExecError> {
        let trees = Trees::resolve(base, read_write, read_only)?;
        for (inner, _) in trees.iter().filter(|(_, writable)| !writable) {
            let outer = trees
                .iter()
                .find(|(tree, writable)| *writable && inner.starts_with(tree));
            if let Some((outer, _)) = outer {
                let why = format!(
                    "it lies inside the read-write tree {}, and Landlock cannot make part \
                     of a writable tree read-only",
                    outer.display()
                );
                return Err(ExecError::SandboxBind {
                    path: inner.to_path_buf(),
                    source: io::Error::new(io::ErrorKind::InvalidInput, why),
                });
            }
        }

        let filter = Filter::sockets(network)?;
        let mut ruleset = handled(network).map_err(|_| ExecError::SandboxUnavailable {
            what: "this kernel does not offer Landlock",
            path: PathBuf::from(LSM_LIST),
        })?;
        let read = AccessFs::from_read(NEWEST_ABI);
        let all = AccessFs::from_all(NEWEST_ABI);
        for (tree, writable, dir) in trees.opened() {
            let access = if writable { all } else { read };
            // The rule names the folder opened, not its path: nothing can swap it since.
            ruleset = ruleset
                .add_rule(PathBeneath::new(dir, access))
                .map_err(|e| bind_failed(tree, e))?;
        }
        let system = SYSTEM_READ.iter().chain(&SYSTEM_DIRS);
        let resolved = network.then_some(&RESOLVED_DIR);
        for dir in system.chain(resolved) {
            ruleset = allow_if_present(ruleset, Path::new(dir), read)?;
        }
        let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
        for dev in DEVICES {
            ruleset = allow_if_present(ruleset, Path::new(dev), device)?;
        }
        Ok(Landlock {
            trees,
            ruleset,
            filter,
        })
    }

    /// Adds reading and executing each program: a rule on the file itself grants file
    /// rights on that file alone, nothing else in its folder.
    pub(crate) fn with_programs(mut self, programs: &[Program]) -> Result<Landlock, ExecError> {
        let access = AccessFs::ReadFile | AccessFs::Execute;
        for program in programs {
            self.ruleset = self
                .ruleset
                .add_rule(PathBeneath::new(&program.file, access))
                .map_err(|e| bind_failed(&program.path, e))?;
        }
        Ok(self)
    }

    /// Adds full access beneath the run's private `TMPDIR`: the ruleset, ready for the child.
    pub(crate) fn with_tmpdir(self, tmpdir: &Path) -> Result<Confine, ExecError> {
        let all = AccessFs::from_all(NEWEST_ABI);
        let ruleset = allow(self.ruleset, tmpdir, all)?;
        Ok(Confine {
            ruleset: Some(ruleset),
            filter: self.filter,
        })
    }
}

/// The rights the ruleset denies unless a rule grants them, and the scopes it closes.
fn handled(network: bool) -> Result<RulesetCreated, RulesetError> {
    // Probes the kernel; the floors are required, the rest is taken where it exists.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(FS_FLOOR_ABI))?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(NEWEST_ABI))?;
    if !network {
        // Handled with no rule granting a port: every bind and connect is denied.
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::from_all(NET_FLOOR_ABI))?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessNet::from_all(NEWEST_ABI))?;
    }
    ruleset.scope(Scope::from_all(NEWEST_ABI))?.create()
}

/// Grants `access` beneath `path`, an operator's tree or the run's `TMPDIR`.
fn allow(
    ruleset: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, ExecError> {
    let fd = PathFd::new(path).map_err(|e| bind_failed(path, e))?;
    add(ruleset, path, fd, access)
}

/// Grants `access` beneath a system path, which some systems lack (`/lib64`, `/dev/tty`).
fn allow_if_present(
    ruleset: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, ExecError> {
    match PathFd::new(path) {
        Ok(fd) => add(ruleset, path, fd, access),
        Err(PathFdError::OpenCall { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Ok(ruleset)
        }
        Err(e) => Err(bind_failed(path, e)),
    }
}

fn add(
    ruleset: RulesetCreated,
    path: &Path,
    fd: PathFd,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, ExecError> {
    // The descriptor (O_PATH, close-on-exec) is closed once the kernel holds the rule.
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| bind_failed(path, e))
}

fn bind_failed(path: &Path, e: impl std::error::Error + Send + Sync + 'static) -> ExecError {
    ExecError::SandboxBind {
        path: path.to_path_buf(),
        source: io::Error::other(e),
    }
}

/// A complete ruleset, enforced in the child between fork and exec.
///
/// Everything that allocates, takes a lock or looks at paths (probing the kernel, opening
/// each tree, adding the rules) happened in the parent, before the fork: in a child of a
/// multi-threaded parent only async-signal-safe calls are sound, since another thread may
/// have held the allocator's lock at the fork. What is left for the child is what
/// [`RulesetCreated::restrict_self`] does: `prctl(PR_SET_NO_NEW_PRIVS)`,
/// `landlock_restrict_self` and closing the ruleset descriptor, then `prctl(PR_SET_SECCOMP)`
/// with the socket filter, all raw system calls.
/// The child has a single thread, so restricting it restricts the whole command, and
/// everything it starts inherits the domain.
pub(crate) struct Confine {
    ruleset: Option<RulesetCreated>,
    // Kept, not taken: dropping it in the child would free memory between fork and exec.
    filter: Filter,
}

impl Confine {
    /// Confines the calling process for good; an error aborts the spawn.
    pub(crate) fn enforce(&mut self) -> io::Result<()> {
        // Taken, because enforcing consumes the ruleset; a second call has nothing to
        // enforce, and that is an error, not a pass.
        let Some(ruleset) = self.ruleset.take() else {
            return Err(Errno::INVAL.into());
        };
        match ruleset.restrict_self() {
            Ok(status) if status.ruleset != RulesetStatus::NotEnforced => {}
            // The parent required Landlock, so this is a kernel changing its mind.
            Ok(_) => return Err(Errno::OPNOTSUPP.into()),
            Err(_) => return Err(io::Error::last_os_error()),
        }
        // After restrict_self, which set no_new_privs: without it the kernel refuses a
        // filter from a process without CAP_SYS_ADMIN.
        self.filter.install()
    }
}
