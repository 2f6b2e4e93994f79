//! The requester primitive: runs one command the way spec tools.md T-GUARD says.
//!
//! [`run`] is synchronous and is called by whatever already *is* the person: the
//! `terminal_run` tool in local mode, or `ferry-posix-helper` after its privilege drop
//! in host mode. It does not switch identity itself; it enforces structure:
//!
//! - it refuses to run anything while the process is effectively root
//!   ([`ExecError::RefusedAsRoot`]);
//! - the working folder is opened beneath [`Policy::root`] by the kernel (ferry-fs,
//!   core C-PATH) and the child `fchdir`s into that very handle, so a symlink swapped in
//!   after the check cannot move it;
//! - the environment is replaced by [`ENV_NAMES`] and [`CANONICAL_PATH`], plus a herd
//!   worker's own `FERRY_HERD_*` variables ([`Command::env`], nothing else). `TMPDIR` is a
//!   private folder made for this run (`<full_output_dir>/tmp-<random>`, 0700) and removed
//!   after it, so runs share no scratch files; under bwrap it is the sandbox's fresh `/tmp`;
//! - the command inherits no descriptor but its standard streams, whatever the service
//!   itself inherited;
//! - the command runs as `/bin/bash -c` in a session of its own, with stdin on
//!   `/dev/null` and umask [`UMASK`], below a reaper of its own (reaper.rs, a child
//!   subreaper): at the deadline, and also as soon as bash exits, every process the
//!   command started is killed, however it detached (`setsid`, a double fork, `nohup`
//!   and `disown`), because an orphan is adopted by the reaper, not by init. A command
//!   is one request, and what it backgrounds would otherwise keep running unseen and keep
//!   the output pipes open. [`Output::leftovers_killed`] says how many were still
//!   running at the end;
//! - output is capped ([`VISIBLE_OUTPUT_BYTES`] per stream visible, the rest streamed
//!   to a file capped at [`FULL_OUTPUT_MAX_BYTES`] per stream); memory stays bounded
//!   however much the command prints;
//! - [`Sandbox::Bwrap`] runs the command under bubblewrap and refuses to run without it;
//!   under either sandbox a herd worker's [`Command::programs`] (the ferry binary) are
//!   shown read-only and executable, each file alone, nothing else of its folder.
//!
//! What bounds a fork bomb: `RLIMIT_NPROC` ([`Policy::max_processes`]) is set in the
//! child before exec. It counts every process of the real uid (the person), in or out
//! of a bwrap user namespace, so forks fail with `EAGAIN` at the limit; the reaper then
//! kills what was started, all of it in each round, so the bomb cannot refill itself.
//!
//! [`Sandbox::Landlock`] confines the same trees without root or user namespaces.
//! [`ops::SandboxKind::Auto`], the default, takes the strongest of the two that works on
//! this machine ([`strongest`], probed once per process) and refuses to run commands
//! when neither does ([`ExecError::NoSandbox`]).
//!
//! Not here yet: memory or CPU limits (those need cgroups). The reaper runs as the same
//! user as the command: under [`Sandbox::None`] the command can stop or kill it (Landlock
//! scopes signals to the command's own domain where the kernel can, ABI 6; bwrap's pid
//! namespace hides it). Then the runner gives up on the run with
//! [`ExecError::Unwatched`] rather than claim everything ended.

mod account;
mod capture;
mod change;
mod error;
mod extras;
mod fds;
mod idle;
mod info;
mod journal;
mod landlock;
mod lease;
pub mod member;
pub mod ops;
mod probe;
mod reaper;
mod request_error;
mod requester;
pub mod resumable;
mod run;
mod sandbox;
mod scope;
mod seccomp;
mod settings;
mod staged_at;
mod staging;
pub mod stream;
pub mod worker;

use std::path::PathBuf;
use std::time::Duration;

use ferry_config::limits::{
    EXEC_OUTPUT_MAX_BYTES, EXEC_OUTPUT_TTL_HOURS, FULL_OUTPUT_MAX_BYTES, PROCESS_MAX_COUNT,
    VISIBLE_OUTPUT_BYTES,
};

pub use capture::sweep_saved_output;
pub use change::Change;
pub use error::ExecError;
pub use journal::{Journal, persons_with_unfinished_changes};
pub use lease::Lease;
pub use probe::{AUTO_LANDLOCK_MIN_ABI, Strongest, Unavailable, in_force, probe, strongest};
pub use reaper::REAPER_NAME;
pub use request_error::RequestError;
pub use requester::Requester;
pub use run::{effective_lifetime, effective_timeout, run};
pub use scope::{Access, Scope, Tree};
pub use staging::Staging;

/// The umask of every command, and of host mode's worker: what they create gets the
/// modes the file tools give (0644 files, 0755 folders), whatever the service's umask
/// is; the folders of the site layout decide who may enter.
pub const UMASK: u32 = 0o022;
/// Where bubblewrap is installed by Debian's `bubblewrap` package.
pub const DEFAULT_BWRAP: &str = "/usr/bin/bwrap";
/// The only `PATH` a command sees.
pub const CANONICAL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The only environment names a command receives. bash then exports `PWD`, `SHLVL` and
/// `_` itself; under bwrap, bwrap sets `PWD` (to the working folder) before bash starts.
pub const ENV_NAMES: [&str; 9] = [
    "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TERM", "TMPDIR", "PATH",
];

/// One command to run.
#[derive(Clone, Debug, Default)]
pub struct Command {
    /// Handed to `/bin/bash -c` as is.
    pub command: String,
    /// The working folder: absolute, or relative to [`Policy::root`]; it must lie inside it.
    pub cwd: PathBuf,
    /// `None` is [`COMMAND_DEFAULT_TIMEOUT`](ferry_config::limits::COMMAND_DEFAULT_TIMEOUT);
    /// more than [`COMMAND_MAX_TIMEOUT`](ferry_config::limits::COMMAND_MAX_TIMEOUT) is cut;
    /// zero is refused.
    pub timeout: Option<Duration>,
    /// Variables added to the allowlisted environment (a herd worker's, spec handoffs.md
    /// H-WHERE): every name `FERRY_HERD_` then `[A-Z0-9_]+`, no value with NUL; anything
    /// else is [`ExecError::InvalidWorkerRun`] and nothing starts.
    pub env: Vec<(String, String)>,
    /// A herd worker's lifetime, in place of [`Command::timeout`] (which is then not
    /// used): at most [`HERD_WORKER_MAX_LIFETIME`](ferry_config::limits::HERD_WORKER_MAX_LIFETIME),
    /// longer is cut; zero is [`ExecError::InvalidLifetime`].
    pub lifetime: Option<Duration>,
    /// Programs outside the sandbox's trees the command may read and execute, and nothing
    /// else in their folders: each absolute, named by its real path, a regular file.
    /// Without a sandbox they are checked the same, and the person's permissions decide.
    pub programs: Vec<PathBuf>,
}

/// Who the command runs as, for the environment only: the process already is that user.
#[derive(Clone, Debug)]
pub struct Identity {
    /// `HOME`.
    pub home: PathBuf,
    /// `USER` and `LOGNAME`.
    pub user: String,
}

/// Whether and how the command is confined beyond the person's own permissions.
#[derive(Clone, Debug)]
pub enum Sandbox {
    /// Ownership and mode bits alone decide what the command can touch.
    None,
    /// bubblewrap: read-only system folders, a private `/tmp`, `/proc` and `/dev`, and
    /// only the listed trees; no network unless `network`.
    Bwrap {
        /// The bwrap binary; a missing one is [`ExecError::SandboxUnavailable`].
        bwrap: PathBuf,
        /// Bound read-write at the same path inside.
        read_write: Vec<PathBuf>,
        /// Bound read-only at the same path inside.
        read_only: Vec<PathBuf>,
        /// Share the host's network (otherwise only a private loopback exists).
        network: bool,
    },
    /// Landlock: the same trees at their own paths, read-only system folders, a few
    /// devices and a private `TMPDIR`, everything else denied; no internet socket unless
    /// `network`, and no unix socket but private pairs (seccomp.rs).
    /// Needs no root and no user namespace, only a kernel with Landlock (ABI 4, Linux
    /// 6.7, when the network is cut); without it the run is
    /// [`ExecError::SandboxUnavailable`]. A read-only tree may not lie in a read-write one.
    Landlock {
        /// Everything allowed beneath each.
        read_write: Vec<PathBuf>,
        /// Reading and executing allowed beneath each.
        read_only: Vec<PathBuf>,
        /// Allow TCP and UDP (otherwise creating such a socket fails with `EACCES`).
        network: bool,
    },
}

impl Sandbox {
    /// bubblewrap at [`DEFAULT_BWRAP`].
    pub fn bwrap(read_write: Vec<PathBuf>, read_only: Vec<PathBuf>, network: bool) -> Sandbox {
        Sandbox::Bwrap {
            bwrap: PathBuf::from(DEFAULT_BWRAP),
            read_write,
            read_only,
            network,
        }
    }

    /// Landlock over the given trees.
    pub fn landlock(read_write: Vec<PathBuf>, read_only: Vec<PathBuf>, network: bool) -> Sandbox {
        Sandbox::Landlock {
            read_write,
            read_only,
            network,
        }
    }
}

/// What the guardrail enforces for one person's commands.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The folder the root and every sandbox tree lie beneath (the site's data folder).
    /// When set, each is reached from it one component at a time and a link anywhere below
    /// it is refused ([`ExecError::RootIsLink`]); without it they are the caller's own
    /// paths, taken as they resolve.
    pub base: Option<PathBuf>,
    /// The tree the working folder must lie in (the person's workspace).
    pub root: PathBuf,
    /// How the command is confined beyond the working folder check.
    pub sandbox: Sandbox,
    /// Bytes of each stream returned as text.
    pub visible_output_bytes: usize,
    /// Where over-cap output is saved (`run-<random>.log`, 0600) and, unless bwrap gives
    /// the command a fresh `/tmp`, where each run's private `TMPDIR` lives. Created (0700) when missing.
    pub full_output_dir: PathBuf,
    /// Bytes of each stream saved to the full-output file.
    pub full_output_max_bytes: u64,
    /// Saved output older than this is removed before each run.
    pub full_output_ttl: Duration,
    /// Bytes all saved output files in [`Policy::full_output_dir`] may hold together:
    /// the oldest are removed to make room, and a file larger than this is not saved.
    pub full_output_keep_max_bytes: u64,
    /// `RLIMIT_NPROC` for the command: the person's processes (threads, in fact), all of
    /// them, anywhere on the machine, at once.
    pub max_processes: u64,
}

impl Policy {
    /// The default limits, no sandbox.
    pub fn new(root: impl Into<PathBuf>, full_output_dir: impl Into<PathBuf>) -> Policy {
        Policy {
            base: None,
            root: root.into(),
            sandbox: Sandbox::None,
            visible_output_bytes: VISIBLE_OUTPUT_BYTES,
            full_output_dir: full_output_dir.into(),
            full_output_max_bytes: FULL_OUTPUT_MAX_BYTES,
            full_output_ttl: Duration::from_secs(EXEC_OUTPUT_TTL_HOURS * 60 * 60),
            full_output_keep_max_bytes: EXEC_OUTPUT_MAX_BYTES,
            max_processes: PROCESS_MAX_COUNT,
        }
    }
}

/// What a finished (or killed) command left behind.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Output {
    /// The first [`Policy::visible_output_bytes`] bytes of stdout, decoded lossily (an
    /// invalid byte becomes U+FFFD, three bytes); a character cut by the cap is dropped.
    pub stdout: String,
    /// The first [`Policy::visible_output_bytes`] bytes of stderr, decoded as stdout is.
    pub stderr: String,
    /// Bytes the command wrote to each stream, all of them.
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr, all of them.
    pub stderr_bytes: u64,
    /// The exit code, when the command exited. Under bwrap a command killed by signal N
    /// shows as 128+N here, as in a shell.
    pub exit_code: Option<i32>,
    /// The signal that killed the command (SIGKILL, 9, after a timeout).
    pub signal: Option<i32>,
    /// The command ran past its deadline and was killed.
    pub timed_out: bool,
    /// Processes the command started that were still running when it exited (or at the
    /// deadline), all killed before the answer; the command itself is not counted.
    #[serde(default)]
    pub leftovers_killed: u32,
    /// Either stream was longer than the visible cap.
    pub truncated: bool,
    /// The complete output (see [`Output::truncated`]): a stdout section, then a stderr
    /// section, each headed `==== stdout: N bytes ====`.
    pub full_output_path: Option<PathBuf>,
    /// Why the saved file lacks part of the output (its cap was reached, or saving
    /// failed); `None` when it is complete or there is none.
    pub full_output_note: Option<String>,
}
