//! The shell's session, and how it ends: nothing the terminal started outlives it.
//!
//! The shell leads a session of its own. An interactive shell puts each job in a process
//! group of its own, so a signal to the shell's group alone misses `sleep 1000 &`; the
//! session is what holds them all. Ending sends SIGHUP to the shell's group (and the PTY's
//! close hangs up its foreground job), gives everything [`GRACE`] to leave, then sends
//! SIGKILL to every process still in the session. The shell is waited for without being
//! reaped (`WNOWAIT`) until all that is done: while it is a zombie its pid, which is the
//! session's and the group's id, cannot be given to another process, so no signal can
//! reach a stranger. Only then is it reaped.

use std::io;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, WaitOptions};

use crate::host::journal::Held;

/// How long the session's processes have, after the hang-up, before they are killed.
pub const GRACE: Duration = Duration::from_secs(2);

/// How often the session is looked at while it is given time to leave.
const POLL: Duration = Duration::from_millis(50);

/// Most rounds of SIGKILL: processes may fork while they are being killed.
const KILL_ROUNDS: usize = 100;

/// Waits until the shell `pid` exits, without reaping it; says how it ended: its exit
/// code, or 128 + the signal that ended it.
pub(super) fn wait_exit(pid: Pid) -> io::Result<i32> {
    loop {
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(Some(status)) => {
                if let Some(code) = status.exit_status() {
                    return Ok(code);
                }
                if let Some(signal) = status.terminating_signal() {
                    return Ok(128 + signal);
                }
            }
            Ok(None) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Sends SIGHUP to the shell's process group (one already gone is fine).
pub(super) fn hang_up(pid: Pid) {
    let _ = rustix::process::kill_process_group(pid, Signal::HUP);
}

/// Gives the session of `pid` [`GRACE`] to leave, then kills what is left of it; returns
/// once nothing of it has been seen alive (zombies aside) in [`QUIET_SCANS`] scans in a
/// row, or the kill rounds are spent.
///
/// A process that forks and exits over and over is rarely where a scan saw it, and a
/// scan may miss it altogether; its process group stays. So every group seen in the
/// session, in any scan, a zombie's included, is killed as a whole in each round: the
/// kernel delivers a signal sent to a group to a child being forked meanwhile too, so a
/// group cannot outrun it.
pub(super) fn clear(pid: Pid) {
    let mut groups = Groups::default();
    let deadline = Instant::now() + GRACE;
    let mut quiet = 0;
    while Instant::now() < deadline && quiet < QUIET_SCANS {
        quiet = if members(pid, &mut groups).is_empty() {
            quiet + 1
        } else {
            0
        };
        std::thread::sleep(POLL);
    }
    quiet = 0;
    for _ in 0..KILL_ROUNDS {
        let alive = members(pid, &mut groups);
        for &group in &groups.seen {
            kill_group(group, pid);
        }
        if alive.is_empty() {
            quiet += 1;
            if quiet >= QUIET_SCANS {
                return;
            }
        } else {
            quiet = 0;
            for member in alive {
                kill(member, pid);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Scans in a row that must find nothing alive before the session counts as gone.
const QUIET_SCANS: usize = 3;

/// The process groups seen in a session so far.
#[derive(Default)]
struct Groups {
    seen: Vec<Pid>,
}

impl Groups {
    fn add(&mut self, group: Pid) {
        if !self.seen.contains(&group) {
            self.seen.push(group);
        }
    }
}

/// Reaps the shell, which must have exited (or be killed: it is in its session).
pub(super) fn reap(pid: Pid) {
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
            Err(rustix::io::Errno::INTR) => continue,
            _ => return,
        }
    }
}

/// Ends the session of `pid` from a thread of its own: for a terminal whose task was
/// dropped before it could end it (the runtime shutting down). `record`, the session's
/// record in the state folder, goes once it has ended.
pub(super) fn end_detached(pid: Pid, record: Option<Held>) {
    hang_up(pid);
    let spawned = std::thread::Builder::new()
        .name("ferry-terminal-end".into())
        .spawn(move || {
            clear(pid);
            reap(pid);
            drop(record);
        });
    if spawned.is_err() {
        // No thread to wait with: kill at once rather than leave the session behind.
        for member in members(pid, &mut Groups::default()) {
            kill(member, pid);
        }
    }
}

/// Ends what is left of the session `sid` of a shell this process did not start (a
/// node that died left it): its group hung up, then [`clear`]. Whether anything of it
/// was still alive.
pub(super) fn end_left(sid: Pid) -> bool {
    if members(sid, &mut Groups::default()).is_empty() {
        return false;
    }
    hang_up(sid);
    clear(sid);
    true
}

/// The live processes of the session `sid` (zombies left out: they are only waiting to be
/// reaped, by their parent or by init); the process group of each process of the
/// session, zombies' included, is added to `groups`.
#[cfg(target_os = "linux")]
fn members(sid: Pid, groups: &mut Groups) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut alive = Vec::new();
    for pid in entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(Pid::from_raw)
    {
        match place_of(pid) {
            Some(place) if place.session == sid => {
                groups.add(place.group);
                if place.alive {
                    alive.push(pid);
                }
            }
            _ => {}
        }
    }
    alive
}

/// Where a process stands: its session, its process group, whether it is alive, and
/// when it started.
struct Place {
    session: Pid,
    group: Pid,
    alive: bool,
    /// In the kernel's clock ticks since boot.
    started: u64,
}

/// [`Place`] of `pid`, from `/proc/<pid>/stat`: after the command name (in parentheses,
/// which may hold anything), field 3 is the state, 5 the process group, 6 the session
/// and 22 the start time.
#[cfg(target_os = "linux")]
fn place_of(pid: Pid) -> Option<Place> {
    let stat = std::fs::read(format!("/proc/{}/stat", pid.as_raw_nonzero())).ok()?;
    let after_name = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let text = std::str::from_utf8(after_name).ok()?;
    let mut fields = text.split_ascii_whitespace();
    let state = fields.next()?;
    let group = fields.nth(1)?.parse::<i32>().ok()?;
    let session = fields.next()?.parse::<i32>().ok()?;
    let started = fields.nth(15)?.parse::<u64>().ok()?;
    Some(Place {
        session: Pid::from_raw(session)?,
        group: Pid::from_raw(group)?,
        alive: !matches!(state, "Z" | "X"),
        started,
    })
}

/// When the process `pid` started (`None`: there is none, or it cannot be told here).
#[cfg(target_os = "linux")]
pub(super) fn started(pid: Pid) -> Option<u64> {
    place_of(pid).map(|place| place.started)
}

#[cfg(not(target_os = "linux"))]
pub(super) fn started(_pid: Pid) -> Option<u64> {
    None
}

/// Kills the process group `group`, once seen in the session `sid`.
///
/// Its members may all be gone by now (a process that forks and exits lives for
/// microseconds), so no member can be pinned first, as [`kill`] pins a process. A
/// group's id is reserved while the group has a member; the id can only name someone
/// else's group once a new process has taken that pid, so the group is left alone when
/// a process of that pid is in another session. (The check and the signal are
/// microseconds apart, and in between the group would have to end and its id come round
/// again to a process that made itself a group leader.)
#[cfg(target_os = "linux")]
fn kill_group(group: Pid, sid: Pid) {
    match place_of(group) {
        Some(place) if place.session != sid => {}
        _ => {
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
        }
    }
}

#[cfg(target_os = "linux")]
fn kill(member: Pid, sid: Pid) {
    use rustix::process::PidfdFlags;
    match rustix::process::pidfd_open(member, PidfdFlags::empty()) {
        Ok(pidfd) => {
            if matches!(place_of(member), Some(place) if place.session == sid) {
                let _ = rustix::process::pidfd_send_signal(&pidfd, Signal::KILL);
            }
        }
        // A kernel without pidfds (before 5.3): the pid as it is.
        Err(rustix::io::Errno::NOSYS) => {
            let _ = rustix::process::kill_process(member, Signal::KILL);
        }
        Err(_) => {}
    }
}

/// Elsewhere no portable call lists a session's processes: the shell's own process
/// group is what can be reached (its jobs in groups of their own may stay).
#[cfg(not(target_os = "linux"))]
fn members(sid: Pid, _groups: &mut Groups) -> Vec<Pid> {
    match rustix::process::test_kill_process_group(sid) {
        Ok(()) => vec![sid],
        Err(_) => Vec::new(),
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_group(_group: Pid, _sid: Pid) {}

#[cfg(not(target_os = "linux"))]
fn kill(_member: Pid, sid: Pid) {
    let _ = rustix::process::kill_process_group(sid, Signal::KILL);
}
