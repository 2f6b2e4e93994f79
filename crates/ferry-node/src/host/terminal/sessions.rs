//! The terminal sessions a node runs, written down in its state folder
//! (`terminal-sessions/`, see [`super::super::journal`]). A node killed while a terminal
//! was open cannot end that session: the shell itself gets the PTY's hang-up, but what it
//! started in groups of its own, `nohup`ed or ignoring the hang-up, would run on for
//! ever. So the node's next start ends them, as a terminal's end would.
//!
//! A record names the session by its id (the shell's pid), with the shell's start time
//! and the boot it ran in. A record from another boot is stale and goes. On the same
//! boot, a process holding that pid that started at another time means the pid went to
//! someone else since, and nothing is done; otherwise whatever is still in the session
//! is the terminal's, because a session's id cannot go to a new process while any process
//! is still in that session.

use rustix::process::Pid;
use serde::{Deserialize, Serialize};

use super::session;
use crate::host::journal::{Held, Journal};

/// The folder of the records, in the node's state folder.
pub const SESSIONS_DIR_NAME: &str = "terminal-sessions";

/// A record's name ends so.
const RECORD_SUFFIX: &str = ".session";

/// What a record says.
#[derive(Serialize, Deserialize)]
struct Record {
    /// The session's id: the shell's pid.
    session: i32,
    /// The shell's start, in the kernel's clock ticks since boot.
    started: u64,
    /// The boot it ran in (`/proc/sys/kernel/random/boot_id`).
    boot: String,
}

/// The records of one node's terminal sessions.
pub(crate) struct Sessions {
    journal: Journal,
}

impl Sessions {
    /// The records kept in `state_dir`.
    pub(crate) fn new(state_dir: &std::path::Path) -> Sessions {
        Sessions {
            journal: Journal::new(state_dir.join(SESSIONS_DIR_NAME), RECORD_SUFFIX),
        }
    }

    /// Writes down the session of the shell `pid`, until the returned value is dropped.
    /// `None` where it cannot be (no boot id, or the record could not be written, which
    /// is said): the terminal runs all the same, only a crash would leave its jobs.
    pub(super) fn begin(&self, pid: Pid) -> Option<Held> {
        let record = Record {
            session: pid.as_raw_nonzero().get(),
            started: session::started(pid)?,
            boot: boot_id()?,
        };
        match self.journal.begin(&record) {
            Ok(held) => Some(held),
            Err(e) => {
                eprintln!(
                    "ferry node: writing down the terminal session {}: {e}; if this node is \
                     killed, the session's jobs will outlive it",
                    record.session
                );
                None
            }
        }
    }

    /// Ends the sessions a node that died left; how many still had processes.
    /// Blocking: each is given [`session::GRACE`] to leave after its hang-up.
    pub(crate) fn sweep(&self) -> usize {
        let boot = boot_id();
        let mut ended = 0;
        self.journal.sweep(|record: Option<Record>| {
            let Some(record) = record else { return true };
            if boot.as_deref() != Some(record.boot.as_str()) {
                return true;
            }
            let Some(pid) = Pid::from_raw(record.session) else {
                return true;
            };
            match session::started(pid) {
                // The pid is someone else's now.
                Some(started) if started != record.started => {}
                _ => {
                    if session::end_left(pid) {
                        ended += 1;
                    }
                }
            }
            true
        });
        ended
    }
}

/// This boot's id.
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_owned()).filter(|id| !id.is_empty())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A process in a session of its own, as a terminal's shell is.
    fn session_leader() -> std::process::Child {
        std::process::Command::new("setsid")
            .args(["sleep", "100"])
            .spawn()
            .unwrap()
    }

    fn alive(child: &mut std::process::Child) -> bool {
        // Given a moment to die, if it was signalled.
        std::thread::sleep(std::time::Duration::from_millis(200));
        child.try_wait().unwrap().is_none()
    }

    #[test]
    fn only_a_session_of_this_boot_whose_pid_is_still_its_own_is_ended() {
        let tmp = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(tmp.path());
        let mut child = session_leader();
        // setsid has made the session by the time its process runs sleep.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let pid = Pid::from_raw(child.id() as i32).unwrap();
        let started = session::started(pid).unwrap();
        let boot = boot_id().unwrap();
        let left = |started: u64, boot: &str| {
            let record = Record {
                session: pid.as_raw_nonzero().get(),
                started,
                boot: boot.to_owned(),
            };
            sessions.journal.begin(&record).unwrap().abandon();
        };
        let records = || {
            std::fs::read_dir(tmp.path().join(SESSIONS_DIR_NAME))
                .unwrap()
                .count()
        };

        // The pid went to another process since: not a signal, and the record goes.
        left(started + 1, &boot);
        assert_eq!(sessions.sweep(), 0);
        assert!(alive(&mut child));
        assert_eq!(records(), 0);
        // Another boot's: the same.
        left(started, "another-boot");
        assert_eq!(sessions.sweep(), 0);
        assert!(alive(&mut child));
        assert_eq!(records(), 0);
        // A record a live terminal holds is left alone.
        let held = sessions.begin(pid).unwrap();
        assert_eq!(sessions.sweep(), 0);
        assert!(alive(&mut child));
        assert_eq!(records(), 1);
        drop(held);
        assert_eq!(records(), 0);
        // This boot's, with the session's own start: ended.
        left(started, &boot);
        assert_eq!(sessions.sweep(), 1);
        assert!(!alive(&mut child));
        assert_eq!(records(), 0);
    }
}
