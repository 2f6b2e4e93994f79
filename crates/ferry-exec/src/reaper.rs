//! The per-run reaper: a small process between the runner and the command that ends
//! everything the command started.
//!
//! A process group is not enough: `setsid`, `setsid -f`, a double fork or `nohup … &
//! disown` leave it. What they cannot leave is the process tree: an orphan is adopted
//! by its nearest *child subreaper* ancestor. So the child the runner spawns forks once
//! more, before `exec`: the parent half becomes this reaper (`PR_SET_CHILD_SUBREAPER`,
//! a session of its own) and the other half goes on to become the command. Whatever
//! the command starts stays below the reaper however it detaches. When the command
//! exits, at the deadline, or when the runner goes away (its end of the control pipe
//! closes), the reaper kills every process below it and reaps them, round after round,
//! until it has no child left, and only then reports and exits.
//!
//! A subreaper is a property of a whole process, and the gateway runs many commands at
//! once on many threads: hence one reaper per run rather than the service itself.
//!
//! It runs in a child of a possibly multi-threaded parent, between fork and exec, so
//! it only makes raw system calls (rustix's linux_raw backend, and a few libc calls that
//! are plain system calls) on memory allocated before the fork: no allocation, no lock.
//!
//! Killing: each round lists `/proc`, finds every live process whose parent chain leads
//! to the reaper, opens a pidfd for each, checks (by its start time) that the pid still
//! names the process listed, and signals it through the pidfd, so a pid reused in
//! between is never hit. Everything found is killed in the same round, so a chain that
//! refills itself cannot outrun the rounds.

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags, RawDir, SeekFrom};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal, WaitOptions};

/// The name (`/proc/<pid>/comm`) a reaper takes once it is one. It runs on in the
/// program of the process that started the command, under that process's command line
/// (it never executes one of its own), so it must say what it is: a herd's supervisor,
/// which is found by its command line, is told from its reaper by this.
pub const REAPER_NAME: &CStr = c"ferry-reaper";

/// Processes of the machine one `/proc` listing keeps track of. A listing with more
/// still kills the reaper's own children, so the rounds always make progress.
pub(crate) const LISTED_MAX_COUNT: usize = 16 * 1024;
/// Bytes of directory entries read from `/proc` at a time.
const DIR_BUFFER_BYTES: usize = 32 * 1024;
/// How often the reaper collects adopted orphans that ended while the command runs.
const COLLECT_INTERVAL: Duration = Duration::from_millis(500);
/// How often to look for the command's exit when the kernel offers no pidfd.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Between kill rounds: time for the killed to die.
const ROUND_PAUSE: Duration = Duration::from_millis(1);
/// Bytes of the report the reaper writes before it exits.
pub(crate) const REPORT_BYTES: usize = 10;

/// Why the watch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The command exited.
    Exited,
    /// The deadline struck first.
    TimedOut,
    /// The runner closed the control pipe (it failed, or went away).
    Cancelled,
}

/// What the reaper tells the runner at the end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Report {
    pub ending: Ending,
    /// The command's wait status, when it was reaped.
    pub status: Option<i32>,
    /// Processes besides the command that were still running at the end and were killed.
    pub leftovers: u32,
}

impl Report {
    fn encode(&self) -> [u8; REPORT_BYTES] {
        let mut out = [0u8; REPORT_BYTES];
        out[0] = match self.ending {
            Ending::Exited => 0,
            Ending::TimedOut => 1,
            Ending::Cancelled => 2,
        };
        out[1] = u8::from(self.status.is_some());
        out[2..6].copy_from_slice(&self.status.unwrap_or(0).to_le_bytes());
        out[6..10].copy_from_slice(&self.leftovers.to_le_bytes());
        out
    }

    /// The report, or `None` for anything but a whole one (the reaper did not finish).
    pub(crate) fn decode(bytes: &[u8]) -> Option<Report> {
        let bytes: &[u8; REPORT_BYTES] = bytes.try_into().ok()?;
        let ending = match bytes[0] {
            0 => Ending::Exited,
            1 => Ending::TimedOut,
            2 => Ending::Cancelled,
            _ => return None,
        };
        let status = match bytes[1] {
            0 => None,
            1 => Some(i32::from_le_bytes(bytes[2..6].try_into().ok()?)),
            _ => return None,
        };
        let leftovers = u32::from_le_bytes(bytes[6..10].try_into().ok()?);
        Some(Report {
            ending,
            status,
            leftovers,
        })
    }
}

/// One process seen in a `/proc` listing.
#[derive(Clone, Copy, Default)]
struct Listed {
    pid: i32,
    ppid: i32,
    /// Clock ticks after boot (stat field 22): with the pid, names one process for good.
    start: u64,
    alive: bool,
    /// Below the reaper.
    ours: bool,
}

/// Everything the reaper needs, made in the parent before the fork.
pub(crate) struct Reaper {
    below: Below,
    control: OwnedFd,
    report: OwnedFd,
    timeout: Duration,
}

/// What it takes to find and kill the processes below the calling one, allocated up
/// front so that using it allocates nothing.
pub(crate) struct Below {
    proc_dir: OwnedFd,
    listed: Vec<Listed>,
    dir_buffer: Vec<MaybeUninit<u8>>,
}

impl Below {
    pub(crate) fn new() -> io::Result<Below> {
        let proc_dir = rustix::fs::open(
            "/proc",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut dir_buffer = Vec::with_capacity(DIR_BUFFER_BYTES);
        dir_buffer.resize(DIR_BUFFER_BYTES, MaybeUninit::uninit());
        Ok(Below {
            proc_dir,
            listed: vec![Listed::default(); LISTED_MAX_COUNT],
            dir_buffer,
        })
    }
}

impl Reaper {
    /// `control` is the read end of a pipe the runner holds open for the whole run;
    /// `report` the write end of the pipe the report goes to. Both close-on-exec.
    pub(crate) fn new(control: OwnedFd, report: OwnedFd, timeout: Duration) -> io::Result<Reaper> {
        Ok(Reaper {
            below: Below::new()?,
            control,
            report,
            timeout,
        })
    }

    /// Called between fork and exec: forks again. Returns `Ok` in the half that goes on
    /// to exec the command; the other half reaps and never returns.
    ///
    /// # Safety
    /// Only in a freshly forked child (a `pre_exec` hook), before anything else runs in it.
    pub(crate) unsafe fn split(&mut self) -> io::Result<()> {
        // Its own session: a signal to the service's terminal or group does not reach it.
        rustix::process::setsid()?;
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
        // SAFETY: a raw clone with only SIGCHLD is fork without glibc's fork handlers,
        // which could take locks another thread of the original parent held.
        let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // The command's half; its pre_exec hooks and exec follow.
            return Ok(());
        }
        let command = Pid::from_raw(pid as i32).ok_or(Errno::SRCH)?;
        // SAFETY: prctl(PR_SET_NAME) is a plain system call reading a static string.
        unsafe { libc::prctl(libc::PR_SET_NAME, REAPER_NAME.as_ptr()) };
        self.detach();
        let report = self.watch(command);
        let bytes = report.encode();
        let _ = rustix::io::write(&self.report, &bytes);
        // SAFETY: _exit ends the process without running anything of the parent's.
        unsafe { libc::_exit(0) }
    }

    /// Lets go of everything the reaper inherited but its own three descriptors: the
    /// output pipes (so they close when the command's processes are gone) and any
    /// descriptor of other runs (so their control pipes can close).
    fn detach(&self) {
        // fd 0 is /dev/null (the command's stdin).
        // SAFETY: dup2 and close_range are plain system calls on descriptor numbers.
        unsafe {
            libc::dup2(0, 1);
            libc::dup2(0, 2);
            // Ignored: a report written to a runner that is gone must not kill the reaper,
            // nor may a plain `kill $PPID` from the command (it shares the reaper's user
            // without a sandbox). SIGKILL and SIGSTOP cannot be ignored; the runner
            // notices those (ExecError::Unwatched). Set after the fork: the command's
            // half keeps the default dispositions.
            for signal in [
                libc::SIGPIPE,
                libc::SIGTERM,
                libc::SIGINT,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGUSR1,
                libc::SIGUSR2,
            ] {
                libc::signal(signal, libc::SIG_IGN);
            }
        }
        let mut keep = [
            self.below.proc_dir.as_raw_fd(),
            self.control.as_raw_fd(),
            self.report.as_raw_fd(),
        ];
        keep.sort_unstable();
        let mut from: RawFd = 3;
        for fd in keep.into_iter().chain([RawFd::MAX]) {
            if fd > from {
                close_range(from, fd - 1);
            }
            from = from.max(fd.saturating_add(1));
        }
    }

    /// Waits for the command to end, the deadline or the runner's end; then kills
    /// everything below and reports.
    fn watch(&mut self, command: Pid) -> Report {
        let deadline = now().saturating_add(self.timeout);
        let pidfd = rustix::process::pidfd_open(command, PidfdFlags::empty()).ok();
        let mut status = None;
        let ending = loop {
            collect(Some(command), &mut status);
            if status.is_some() {
                break Ending::Exited;
            }
            let left = deadline.saturating_sub(now());
            if left.is_zero() {
                break Ending::TimedOut;
            }
            let step = if pidfd.is_some() {
                COLLECT_INTERVAL
            } else {
                EXIT_POLL_INTERVAL
            };
            let mut fds = [
                PollFd::new(&self.control, PollFlags::IN),
                PollFd::new(&self.control, PollFlags::IN),
            ];
            let watched = match &pidfd {
                Some(fd) => {
                    fds[1] = PollFd::new(fd, PollFlags::IN);
                    2
                }
                None => 1,
            };
            let wait = timespec(left.min(step));
            let _ = rustix::event::poll(&mut fds[..watched], Some(&wait));
            if !fds[0].revents().is_empty() {
                break Ending::Cancelled;
            }
        };
        let leftovers = self.below.kill_all(Some(command), &mut status);
        Report {
            ending,
            status,
            leftovers,
        }
    }
}

impl Below {
    /// Kills every process below the caller and reaps its children until none is left,
    /// keeping `command`'s status. Returns how many were still running at the first
    /// round, `command` not counted.
    pub(crate) fn kill_all(&mut self, command: Option<Pid>, status: &mut Option<i32>) -> u32 {
        let mut leftovers = None;
        loop {
            if collect(command, status) {
                break;
            }
            let (count, found) = self.list();
            let mut alive = 0u32;
            for i in 0..count {
                let p = self.listed[i];
                if p.ours && p.alive {
                    if command.is_none_or(|c| c.as_raw_nonzero().get() != p.pid) {
                        alive += 1;
                    }
                    self.kill(p);
                }
            }
            // `found`: our children the full listing could not hold, killed meanwhile.
            leftovers.get_or_insert(alive + found);
            pause(ROUND_PAUSE);
        }
        leftovers.unwrap_or(0)
    }

    /// Lists `/proc` into `self.listed` and marks what lies below the reaper. Returns
    /// how many entries were kept, and how many live children of the reaper did not fit
    /// (those are killed right away, by pid, which is safe for an unreaped child).
    fn list(&mut self) -> (usize, u32) {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let mut count = 0;
        let mut overflow = 0;
        if rustix::fs::seek(&self.proc_dir, SeekFrom::Start(0)).is_err() {
            return (0, 0);
        }
        let mut dir = RawDir::new(self.proc_dir.as_fd(), &mut self.dir_buffer[..]);
        while let Some(entry) = dir.next() {
            let Ok(entry) = entry else { break };
            let Some(pid) = parse_pid(entry.file_name()) else {
                continue;
            };
            let Some(p) = read_stat(self.proc_dir.as_fd(), pid) else {
                continue;
            };
            if count < self.listed.len() {
                self.listed[count] = p;
                count += 1;
            } else if p.ppid == me && p.alive {
                if let Some(pid) = Pid::from_raw(p.pid) {
                    let _ = rustix::process::kill_process(pid, Signal::KILL);
                }
                overflow += 1;
            }
        }
        let listed = &mut self.listed[..count];
        // /proc lists in pid order, and children mostly come after their parents: one
        // pass marks most; passes repeat until nothing changes (pids wrap around).
        loop {
            let mut changed = false;
            for i in 0..listed.len() {
                if listed[i].ours {
                    continue;
                }
                let ppid = listed[i].ppid;
                let ours = ppid == me
                    || listed
                        .binary_search_by_key(&ppid, |p| p.pid)
                        .is_ok_and(|j| listed[j].ours);
                if ours {
                    listed[i].ours = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        (count, overflow)
    }

    /// SIGKILL to `p` through a pidfd, if the pid still names the process listed.
    fn kill(&self, p: Listed) {
        let Some(pid) = Pid::from_raw(p.pid) else {
            return;
        };
        let Ok(pidfd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
            // Gone, or a kernel without pidfds: only an unreaped child is safe by pid.
            if p.ppid == rustix::process::getpid().as_raw_nonzero().get() {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
            return;
        };
        let same = read_stat(self.proc_dir.as_fd(), p.pid).is_some_and(|now| now.start == p.start);
        if same {
            let _ = rustix::process::pidfd_send_signal(&pidfd, Signal::KILL);
        }
    }
}

/// Reaps every child that has ended, keeping the command's status. Returns whether the
/// caller has no child left at all.
fn collect(command: Option<Pid>, status: &mut Option<i32>) -> bool {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, st))) => {
                if Some(pid) == command {
                    *status = Some(st.as_raw());
                }
            }
            Ok(None) => return false,
            Err(Errno::INTR) => {}
            Err(_) => return true,
        }
    }
}

/// A `/proc` entry's name as a pid, when it is one.
fn parse_pid(name: &CStr) -> Option<i32> {
    let bytes = name.to_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: i64 = 0;
    for b in bytes {
        n = n * 10 + i64::from(b - b'0');
    }
    i32::try_from(n).ok().filter(|n| *n > 0)
}

/// `/proc/<pid>/stat`: parent, start time and whether it still runs (not a zombie).
fn read_stat(proc_dir: BorrowedFd<'_>, pid: i32) -> Option<Listed> {
    // "<pid>/stat\0" in a stack buffer.
    let mut name = [0u8; 24];
    let mut digits = [0u8; 10];
    let mut n = pid;
    let mut len = 0;
    while n > 0 {
        digits[len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
    }
    for i in 0..len {
        name[i] = digits[len - 1 - i];
    }
    name[len..len + 6].copy_from_slice(b"/stat\0");
    let name = CStr::from_bytes_with_nul(&name[..len + 6]).ok()?;
    let fd = rustix::fs::openat(
        proc_dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut buf = [0u8; 1024];
    let got = rustix::io::read(&fd, &mut buf).ok()?;
    parse_stat(pid, &buf[..got])
}

/// Parses a stat line: `pid (comm) state ppid … starttime …`; comm may hold anything,
/// so the fields start after the last `)`.
fn parse_stat(pid: i32, line: &[u8]) -> Option<Listed> {
    let close = line.iter().rposition(|b| *b == b')')?;
    let mut fields = line[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    let ppid = number(fields.next()?)?;
    // starttime is field 22 of the line; state was field 3, ppid 4.
    let start = number(fields.nth(22 - 5)?)?;
    Some(Listed {
        pid,
        ppid: i32::try_from(ppid).ok()?,
        start,
        alive: state != b'Z' && state != b'X',
        ours: false,
    })
}

fn number(field: &[u8]) -> Option<u64> {
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    field.iter().try_fold(0u64, |n, b| {
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

fn close_range(first: RawFd, last: RawFd) {
    // SAFETY: close_range(2) closes descriptor numbers; none of them is used afterwards.
    let done = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    if done != 0 {
        // Kernels before 5.9: one at a time, up to a bound no real table reaches.
        let last = last.min(first.saturating_add(65_536));
        for fd in first..=last {
            // SAFETY: as above.
            unsafe { libc::close(fd) };
        }
    }
}

/// CLOCK_MONOTONIC as a duration since boot.
fn now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

fn pause(d: Duration) {
    let _ = rustix::event::poll(&mut [], Some(&timespec(d)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_past_any_comm() {
        let line = b"4242 (a) b) c (d) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        let p = parse_stat(4242, line).unwrap();
        assert_eq!((p.ppid, p.start, p.alive), (17, 987654, true));
        let zombie = b"7 (z) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert!(!parse_stat(7, zombie).unwrap().alive);
        assert!(parse_stat(7, b"7 (cut").is_none());
        assert!(parse_stat(7, b"7 (x) S 1 2").is_none());
    }

    #[test]
    fn pids_are_digits_only() {
        fn c(s: &[u8]) -> &CStr {
            CStr::from_bytes_with_nul(s).unwrap()
        }
        assert_eq!(parse_pid(c(b"123\0")), Some(123));
        assert_eq!(parse_pid(c(b"self\0")), None);
        assert_eq!(parse_pid(c(b"0\0")), None);
        assert_eq!(parse_pid(c(b"99999999999\0")), None);
    }

    #[test]
    fn reports_round_trip_and_partial_ones_are_refused() {
        let r = Report {
            ending: Ending::TimedOut,
            status: Some(9),
            leftovers: 3,
        };
        let back = Report::decode(&r.encode()).unwrap();
        assert_eq!(
            (back.ending, back.status, back.leftovers),
            (Ending::TimedOut, Some(9), 3)
        );
        assert!(Report::decode(&r.encode()[..5]).is_none());
        assert!(Report::decode(&[]).is_none());
    }
}
