//! Starting the command and watching it to its end.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use ferry_fs::{Dir, Follow, FsError};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::OFlags;
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Resource, Rlimit, WaitId, WaitIdOptions};

use crate::capture::{Capture, RUN_TMP_PREFIX, SaveTo, sweep_dir, write_full_output};
use crate::extras::{check_env, check_programs};
use crate::landlock::Landlock;
use crate::reaper::{Ending, REPORT_BYTES, Reaper, Report};
use crate::sandbox::{Bwrap, Trees};
use crate::scope::Base;
use crate::{CANONICAL_PATH, Command, ExecError, Identity, Output, Policy, Sandbox, UMASK};
use ferry_config::limits::{
    COMMAND_DEFAULT_TIMEOUT, COMMAND_MAX_TIMEOUT, HERD_WORKER_MAX_LIFETIME,
};

/// Absolute, so that `PATH` (which the command controls in spirit) plays no part.
const BASH: &str = "/bin/bash";
/// Bytes read from a pipe at a time.
const READ_CHUNK_BYTES: usize = 256 * 1024;
/// Pipe buffer asked for, so a loud command wakes the reader less often (1 MiB is the
/// default `pipe-max-size` an unprivileged process may ask for).
const PIPE_BYTES: usize = 1024 * 1024;
/// After the reaper is done, how long to keep reading what is still in the pipes. Only a
/// process outside the command's tree (one it handed a pipe to) can still hold them.
const DRAIN_AFTER_END: Duration = Duration::from_millis(250);
/// How often to look for the reaper's exit when the kernel offers no pidfd to wait on.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How long past the deadline the reaper may take to kill and report before the runner
/// gives up on it (it was stopped or killed from inside, see [`ExecError::Unwatched`]).
const REAPER_GRACE: Duration = Duration::from_secs(10);

/// The timeout a request gets: the default for none, at most [`COMMAND_MAX_TIMEOUT`], never zero.
pub fn effective_timeout(requested: Option<Duration>) -> Result<Duration, ExecError> {
    match requested {
        None => Ok(COMMAND_DEFAULT_TIMEOUT),
        Some(d) if d.is_zero() => Err(ExecError::InvalidTimeout),
        Some(d) => Ok(d.min(COMMAND_MAX_TIMEOUT)),
    }
}

/// A herd worker's lifetime: at most [`HERD_WORKER_MAX_LIFETIME`], never zero.
pub fn effective_lifetime(requested: Duration) -> Result<Duration, ExecError> {
    if requested.is_zero() {
        return Err(ExecError::InvalidLifetime);
    }
    Ok(requested.min(HERD_WORKER_MAX_LIFETIME))
}

/// Runs `cmd` as the current (non-root) user behind the guardrail of `policy`; `who`
/// only fills `HOME`, `USER` and `LOGNAME`.
pub fn run(cmd: &Command, who: &Identity, policy: &Policy) -> Result<Output, ExecError> {
    // First, before touching anything: root may read and write every person's files.
    if rustix::process::geteuid().is_root() {
        return Err(ExecError::RefusedAsRoot);
    }
    let timeout = match cmd.lifetime {
        Some(lifetime) => effective_lifetime(lifetime)?,
        None => effective_timeout(cmd.timeout)?,
    };
    if cmd.command.contains('\0') {
        return Err(ExecError::InvalidCommand);
    }
    check_env(&cmd.env)?;
    let programs = check_programs(&cmd.programs)?;
    let base = policy.base.as_deref().map(Base::open).transpose()?;
    let cwd = open_cwd(base.as_ref(), &policy.root, &cmd.cwd)?;
    // The checked sandbox. bwrap also takes the working folder's real path, which is how
    // it (inside its own mount namespace) finds it.
    let (sandbox, landlock) = match &policy.sandbox {
        Sandbox::None => (None, None),
        Sandbox::Bwrap {
            bwrap,
            read_write,
            read_only,
            network,
        } => {
            let sb = Bwrap::check(bwrap, base.as_ref(), read_write, read_only, *network)?
                .with_programs(&programs);
            let real = cwd_in(&cwd, &sb.binds)?;
            (Some((sb, real)), None)
        }
        Sandbox::Landlock {
            read_write,
            read_only,
            network,
        } => {
            let ll = Landlock::check(base.as_ref(), read_write, read_only, *network)?
                .with_programs(&programs)?;
            cwd_in(&cwd, &ll.trees)?;
            (None, Some(ll))
        }
    };

    let out = OutputDir::prepare(base.as_ref(), &policy.full_output_dir)?;
    // Expired output goes before anything new is saved; a failure only leaves it longer.
    let _ = sweep_dir(&out.opened, policy.full_output_ttl);
    // Without bwrap each run gets a private TMPDIR, removed afterwards: nothing of one
    // run is left for the next to trip over (Landlock denies the shared /tmp). Under
    // bwrap /tmp is already that.
    let run_tmp = match sandbox {
        None => Some(RunTmp::create(&out).map_err(|source| ExecError::OutputDir {
            path: out.shown.clone(),
            source,
        })?),
        Some(_) => None,
    };

    let mut command = match &sandbox {
        Some((sb, cwd_path)) => {
            let mut c = std::process::Command::new(&sb.bwrap);
            c.args(sb.args(cwd_path)).arg(BASH);
            c
        }
        None => std::process::Command::new(BASH),
    };
    // `--`: a command that starts with `-` is a command, not an option to bash.
    command.arg("-c").arg("--").arg(&cmd.command);
    let tmpdir = run_tmp.as_ref().map_or(Path::new("/tmp"), |t| &t.shown);
    let confine = run_tmp
        .as_ref()
        .and_then(|t| landlock.map(|ll| ll.with_tmpdir(&t.reach)))
        .transpose()?;
    command
        .env_clear()
        .env("HOME", &who.home)
        .env("USER", &who.user)
        .env("LOGNAME", &who.user)
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("TZ", "UTC")
        .env("TERM", "dumb")
        .env("TMPDIR", tmpdir)
        .env("PATH", CANONICAL_PATH)
        .envs(cmd.env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    // The reaper (reaper.rs) sits between this thread and the command: it ends the
    // command's whole tree when the command exits, at the deadline, or when `control`
    // closes, and writes a report to `report`.
    let pipe = || rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC);
    let (control_read, control) = pipe().map_err(|e| ExecError::Spawn(e.into()))?;
    let (report, report_write) = pipe().map_err(|e| ExecError::Spawn(e.into()))?;
    let mut reaper = Reaper::new(control_read, report_write, timeout).map_err(ExecError::Spawn)?;
    // SAFETY: the first hook of a fresh child; `split` makes raw system calls only, on
    // memory allocated above (reaper.rs).
    unsafe {
        command.pre_exec(move || reaper.split());
    }

    let hard = rustix::process::getrlimit(Resource::Nproc).maximum;
    let nproc = hard.map_or(policy.max_processes, |h| h.min(policy.max_processes));
    let cwd_fd = cwd.as_fd().as_raw_fd();
    // SAFETY: between fork and exec only raw syscalls run (rustix's linux_raw backend):
    // no allocation, no locks. `cwd` outlives the spawn, so the descriptor is open.
    unsafe {
        command.pre_exec(move || {
            // A session of its own makes the command a process-group leader (pgid = pid)
            // and cuts it from any terminal of the service.
            rustix::process::setsid()?;
            let limit = Rlimit {
                current: Some(nproc),
                maximum: Some(nproc),
            };
            rustix::process::setrlimit(Resource::Nproc, limit)?;
            // Not the service's umask, which may be anything (000 included).
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(UMASK));
            // Into the very folder that was checked, not a path that could change since.
            rustix::process::fchdir(BorrowedFd::borrow_raw(cwd_fd))?;
            crate::fds::cloexec_above_stderr()?;
            Ok(())
        });
    }
    if let Some(mut confine) = confine {
        // SAFETY: enforcing is raw system calls only; landlock.rs says which, and why the
        // ruleset was built before the fork.
        unsafe {
            command.pre_exec(move || confine.enforce());
        }
    }

    let deadline = Instant::now() + timeout;
    let spawned = command.spawn();
    // The hooks own the reaper's ends of the pipes: only the reaper keeps them now.
    drop(command);
    let mut child = spawned.map_err(ExecError::Spawn)?;
    let save = SaveTo {
        dir: &out.reach,
        // A stream larger than the person may keep in all could not be saved anyway.
        max_bytes: policy
            .full_output_max_bytes
            .min(policy.full_output_keep_max_bytes),
    };
    let mut stdout = Capture::new("stdout", policy.visible_output_bytes);
    let mut stderr = Capture::new("stderr", policy.visible_output_bytes);
    let watched = watch(&mut child, deadline, [&mut stdout, &mut stderr], &save);
    // Closing it tells a reaper that is still watching to end everything now.
    drop(control);
    let reaped = child.wait().map_err(ExecError::Io);
    watched?;
    reaped?;
    let report = read_report(&report).ok_or(ExecError::Unwatched)?;
    let status = ExitStatus::from_raw(report.status.ok_or(ExecError::Unwatched)?);
    let timed_out = report.ending == Ending::TimedOut;
    drop(run_tmp);

    let (full_output_path, full_output_note) = write_full_output(
        [&mut stdout, &mut stderr],
        &out.opened,
        &out.reach,
        policy.full_output_keep_max_bytes,
    );
    let full_output_path = full_output_path.map(|p| out.shown(&p));
    Ok(Output {
        stdout: stdout.text(),
        stderr: stderr.text(),
        stdout_bytes: stdout.total(),
        stderr_bytes: stderr.total(),
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        leftovers_killed: report.leftovers,
        truncated: stdout.overflowed() || stderr.overflowed(),
        full_output_path,
        full_output_note,
    })
}

/// Opens the working folder beneath the root (itself reached from `base` without a link,
/// when there is one); the kernel refuses every way out.
fn open_cwd(base: Option<&Base>, root: &Path, cwd: &Path) -> Result<Dir, ExecError> {
    let root_dir = match base {
        Some(base) => base.open_root(root)?,
        None => Dir::open_ambient(root).map_err(|source| ExecError::RootUnavailable {
            path: root.to_path_buf(),
            source,
        })?,
    };
    let outside = || ExecError::CwdOutside {
        path: cwd.to_path_buf(),
    };
    let real_root;
    let rel = if cwd.is_absolute() {
        match cwd.strip_prefix(root) {
            Ok(rel) => rel,
            // The root may be named through a link; its real path is the other way in.
            Err(_) => {
                real_root = real_path(&root_dir).map_err(ExecError::Io)?;
                cwd.strip_prefix(&real_root).map_err(|_| outside())?
            }
        }
    } else {
        cwd
    };
    if rel.as_os_str().is_empty() {
        return Ok(root_dir);
    }
    let unusable = |source| ExecError::CwdUnusable {
        path: cwd.to_path_buf(),
        source,
    };
    let rel = rel.to_str().ok_or_else(|| {
        unusable(FsError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path is not valid UTF-8",
        )))
    })?;
    root_dir
        .open_dir(rel, Follow::Beneath)
        .map_err(|e| match e {
            FsError::PathEscapes => outside(),
            FsError::NotFound => ExecError::CwdNotFound {
                path: cwd.to_path_buf(),
            },
            other => unusable(other),
        })
}

/// The working folder's real path, when a sandbox shows it; a folder the command could
/// not see is refused rather than run in.
fn cwd_in(cwd: &Dir, trees: &Trees) -> Result<PathBuf, ExecError> {
    let real = real_path(cwd).map_err(ExecError::Io)?;
    if !trees.shows(&real) {
        return Err(ExecError::CwdNotInSandbox { path: real });
    }
    Ok(real)
}

/// The path the kernel knows an open directory by.
pub(crate) fn real_path(dir: &Dir) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd()))
}

/// Reads both pipes until the reaper is done (the command and all it started ended),
/// and a moment longer for what is still buffered. A reaper still running well past the
/// deadline was stopped or killed from inside: it is killed, and the run has no answer.
fn watch(
    child: &mut Child,
    deadline: Instant,
    mut captures: [&mut Capture; 2],
    save: &SaveTo,
) -> Result<(), ExecError> {
    let pid = Pid::from_child(child);
    let mut pipes: [Option<File>; 2] = [
        child.stdout.take().map(|p| File::from(OwnedFd::from(p))),
        child.stderr.take().map(|p| File::from(OwnedFd::from(p))),
    ];
    for pipe in pipes.iter().flatten() {
        rustix::fs::fcntl_setfl(pipe, OFlags::NONBLOCK).map_err(|e| ExecError::Io(e.into()))?;
        let _ = rustix::pipe::fcntl_setpipe_size(pipe, PIPE_BYTES);
    }
    // Readable when the reaper exits; without it (old kernels, seccomp) we poll waitid.
    let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok();
    let give_up = deadline + REAPER_GRACE;
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    let mut ended_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if ended_at.is_none() {
            if has_exited(pid)? {
                ended_at = Some(now);
            } else if now >= give_up {
                let _ = child.kill();
                return Err(ExecError::Unwatched);
            }
        }
        let wake = match ended_at {
            Some(at) => {
                if pipes.iter().all(Option::is_none) || now >= at + DRAIN_AFTER_END {
                    break;
                }
                at + DRAIN_AFTER_END
            }
            None => give_up,
        };
        let mut wait = wake.saturating_duration_since(now);
        if ended_at.is_none() && pidfd.is_none() {
            wait = wait.min(EXIT_POLL_INTERVAL);
        }

        let mut fds: Vec<PollFd> = pipes
            .iter()
            .flatten()
            .map(|p| PollFd::new(p, PollFlags::IN))
            .collect();
        if let (Some(fd), None) = (&pidfd, ended_at) {
            fds.push(PollFd::new(fd, PollFlags::IN));
        }
        let wait = Timespec::try_from(wait).unwrap_or(Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        });
        match rustix::event::poll(&mut fds, Some(&wait)) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(ExecError::Io(e.into())),
        }
        drop(fds);

        // One chunk per pipe per round keeps both streams moving when both are loud.
        for (pipe, capture) in pipes.iter_mut().zip(captures.iter_mut()) {
            let Some(file) = pipe else { continue };
            match file.read(&mut buf) {
                Ok(0) => *pipe = None,
                Ok(n) => capture.push(&buf[..n], save),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(ExecError::Io(e)),
            }
        }
    }
    Ok(())
}

/// Whether the child has exited, without reaping it.
fn has_exited(pid: Pid) -> Result<bool, ExecError> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    match rustix::process::waitid(WaitId::Pid(pid), options) {
        Ok(status) => Ok(status.is_some()),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(ExecError::Io(e.into())),
    }
}

/// The reaper's report, once it has exited; `None` when it did not finish one.
fn read_report(report: &OwnedFd) -> Option<Report> {
    let mut bytes = [0u8; REPORT_BYTES];
    let mut got = 0;
    while got < REPORT_BYTES {
        match rustix::io::read(report, &mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::INTR) => {}
            Err(_) => break,
        }
    }
    Report::decode(&bytes[..got])
}

/// Where over-cap output and each run's TMPDIR go (made 0700 when missing). `shown` is
/// the path the person knows it by; `reach` is how the service writes there: beneath a
/// base, through the folder opened with no link followed (`/proc/self/fd/N`), so that a
/// link swapped in later cannot redirect a write.
struct OutputDir {
    opened: Dir,
    shown: PathBuf,
    reach: PathBuf,
}

impl OutputDir {
    fn prepare(base: Option<&Base>, dir: &Path) -> Result<OutputDir, ExecError> {
        let opened = match base {
            Some(base) => base.create_dirs(dir)?,
            // No site: the folder is the caller's own, named by its own path.
            None => {
                let failed = |source| ExecError::OutputDir {
                    path: dir.to_path_buf(),
                    source,
                };
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(failed)?;
                Dir::open_ambient(dir).map_err(|e| failed(io::Error::other(e)))?
            }
        };
        let reach = PathBuf::from(format!("/proc/self/fd/{}", opened.as_fd().as_raw_fd()));
        Ok(OutputDir {
            opened,
            shown: dir.to_path_buf(),
            reach,
        })
    }

    /// The path the person knows a file by that the service wrote at `reached`.
    fn shown(&self, reached: &Path) -> PathBuf {
        match reached.strip_prefix(&self.reach) {
            Ok(rest) => self.shown.join(rest),
            Err(_) => reached.to_path_buf(),
        }
    }
}

/// The per-run TMPDIR (0700), removed with everything in it when the run is over.
struct RunTmp {
    shown: PathBuf,
    reach: PathBuf,
}

impl RunTmp {
    fn create(out: &OutputDir) -> io::Result<RunTmp> {
        let name = format!("{RUN_TMP_PREFIX}{}", ferry_fs::random_hex::<8>());
        let reach = out.reach.join(&name);
        std::fs::DirBuilder::new().mode(0o700).create(&reach)?;
        Ok(RunTmp {
            shown: out.shown.join(name),
            reach,
        })
    }
}

impl Drop for RunTmp {
    fn drop(&mut self) {
        // Best effort: the command's processes are gone, but it may have left a folder
        // it made unwritable; that stays, private to the person (0700 parent).
        let _ = std::fs::remove_dir_all(&self.reach);
    }
}
