//! The small state record each worker has (`workers/<label>.json`), and the herd's lock.

use std::fs::File;
use std::io::Read;
use std::time::{Duration, Instant};

use ferry_codes::Code;
use ferry_config::limits::HERD_LOCK_WAIT;
use ferry_fs::{AtomicWriter, Dir, Follow, FsError};
use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::dirs::{PRIVATE_DIR_MODE, WORKERS};
use crate::keys::WorkerKey;
use crate::{HerdError, check_label};

/// A record is a few hundred bytes; anything far larger was not written by a herd.
const RECORD_MAX_BYTES: u64 = 64 * 1024;
/// The lock's file in the herd folder.
const LOCK_FILE: &str = ".lock";
/// How often a caller waiting for the lock tries again.
const LOCK_RETRY: Duration = Duration::from_millis(25);

/// Where a worker is in its life (H-CLI's `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Its process is being started.
    Starting,
    /// Its process runs.
    Running,
    /// It asked its owner a question and awaits the reply.
    Waiting,
    /// It completed; `resultPath` holds its output.
    Completed,
    /// Its process ended without completing, or is gone.
    Failed,
    /// Its owner stopped it.
    Stopped,
}

impl State {
    /// Whether its process should still be alive.
    pub fn is_live(self) -> bool {
        matches!(self, State::Starting | State::Running | State::Waiting)
    }
}

/// How a worker's process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exit {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

/// One worker's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerRecord {
    /// Its label.
    pub label: String,
    /// The definition it was started from.
    pub agent: String,
    /// Counts the processes started under this label, from 1.
    pub generation: u64,
    /// Where it is in its life.
    pub state: State,
    /// The process that runs it (its supervisor): the worker's id.
    pub pid: Option<u32>,
    /// That process's start time (`/proc/<pid>/stat`, clock ticks), so a reused pid is
    /// never taken for it.
    pub start_ticks: Option<u64>,
    /// The folder its command runs in.
    pub cwd: String,
    /// Whether its sandbox shows the person's trees read-only.
    pub read_only: bool,
    /// The prompt snapshot's folder, until it is removed (H-SNAP).
    pub snapshot: Option<String>,
    /// How its process ended.
    pub exit: Option<Exit>,
    /// Its completion's output (H-RESULT).
    pub result_path: Option<String>,
    /// Why it failed or stopped, in a sentence.
    pub reason: Option<String>,
    /// Where its process's output over the visible cap was saved.
    pub output_path: Option<String>,
    /// When this generation was assigned, RFC 3339.
    pub created_at: String,
    /// When the record last changed, RFC 3339.
    pub updated_at: String,
    /// The highest number the worker has read from its mailbox: anything numbered no
    /// higher is a replay.
    #[serde(default)]
    pub read_through: u64,
    /// HMAC-SHA256 (hex) of the record without it, under its generation's key (keys.rs):
    /// any worker of the person can write this file, none can sign as another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

impl WorkerRecord {
    fn unsigned_bytes(&self) -> Vec<u8> {
        let mut bare = self.clone();
        bare.mac = None;
        // Plain strings, numbers and booleans: serializing them cannot fail.
        serde_json::to_vec(&bare).unwrap_or_default()
    }

    /// Whether the record was signed, as it is, with `key`.
    pub fn verifies(&self, key: &WorkerKey) -> bool {
        self.mac
            .as_deref()
            .is_some_and(|mac| key.verifies(&self.unsigned_bytes(), mac))
    }

    fn seal(&mut self, key: &WorkerKey) {
        self.mac = Some(key.sign(&self.unsigned_bytes()));
    }
}

/// The worker records of one herd (`workers/`).
#[derive(Debug)]
pub struct Workers {
    dir: Dir,
}

impl Workers {
    /// Opens (making it, 0700) `workers/` in the herd folder.
    pub fn open(herd: &Dir) -> Result<Workers, HerdError> {
        match herd.create_dir(WORKERS, PRIVATE_DIR_MODE) {
            Ok(()) | Err(FsError::Exists) => {}
            Err(e) => return Err(HerdError::from(e).context("the herd's workers folder")),
        }
        let dir = herd
            .open_dir(WORKERS, Follow::Never)
            .map_err(|e| HerdError::from(e).context("the herd's workers folder"))?;
        Ok(Workers { dir })
    }

    /// The record of `label`, if there is one; a record that is not valid is an error
    /// naming the label, never a panic.
    pub fn load(&self, label: &str) -> Result<Option<WorkerRecord>, HerdError> {
        check_label(label)?;
        let broken = |why: String| {
            HerdError::new(
                Code::Internal,
                format!("the record of worker {label} is not valid: {why}"),
            )
        };
        let file = match self.dir.open_file(&record_name(label), Follow::Never) {
            Ok(file) => file,
            Err(FsError::NotFound) => return Ok(None),
            Err(e) => return Err(broken(e.to_string())),
        };
        let mut bytes = Vec::new();
        file.take(RECORD_MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| broken(e.to_string()))?;
        if bytes.len() as u64 > RECORD_MAX_BYTES {
            return Err(broken(format!("it is over {RECORD_MAX_BYTES} bytes")));
        }
        let record: WorkerRecord =
            serde_json::from_slice(&bytes).map_err(|e| broken(e.to_string()))?;
        if record.label != label {
            return Err(broken(format!("it names the label {:?}", record.label)));
        }
        Ok(Some(record))
    }

    /// Every valid record, by label; invalid ones are left out (and logged).
    pub fn list(&self) -> Result<Vec<WorkerRecord>, HerdError> {
        let mut labels: Vec<String> = self
            .dir
            .names()?
            .into_iter()
            .filter_map(|name| name.strip_suffix(".json").map(str::to_owned))
            .filter(|label| check_label(label).is_ok())
            .collect();
        labels.sort_unstable();
        let mut records = Vec::with_capacity(labels.len());
        // One log line, however many broken records a worker planted.
        let (mut left_out, mut first) = (0usize, None);
        for label in labels {
            match self.load(&label) {
                Ok(Some(record)) => records.push(record),
                // Removed since it was listed.
                Ok(None) => {}
                Err(e) => {
                    left_out += 1;
                    first.get_or_insert((label, e.message));
                }
            }
        }
        if let Some((label, error)) = first {
            tracing::warn!(left_out, first = %label, error = %error, "worker records are left out");
        }
        Ok(records)
    }

    /// Writes a new record, signed with `key`; `false` when `label` already has one (nothing replaced:
    /// two racing creators, one wins).
    pub fn create(&self, record: &mut WorkerRecord, key: &WorkerKey) -> Result<bool, HerdError> {
        check_label(&record.label)?;
        record.seal(key);
        match self.write(record, false) {
            Ok(()) => Ok(true),
            Err(FsError::Exists) => Ok(false),
            Err(e) => {
                Err(HerdError::from(e).context(format!("the record of worker {}", record.label)))
            }
        }
    }

    /// Replaces the record atomically (`updated_at` set now), signed with `key`.
    pub fn save(&self, record: &mut WorkerRecord, key: &WorkerKey) -> Result<(), HerdError> {
        check_label(&record.label)?;
        record.updated_at = ferry_site::rfc3339(std::time::SystemTime::now());
        record.seal(key);
        self.write(record, true).map_err(|e| {
            HerdError::from(e).context(format!("the record of worker {}", record.label))
        })
    }

    /// Writes `record` at its (checked) label's name, replacing what is there only with
    /// `replace`.
    fn write(&self, record: &WorkerRecord, replace: bool) -> Result<(), FsError> {
        // Plain strings, numbers and booleans: serializing them cannot fail.
        let bytes = serde_json::to_vec_pretty(record).unwrap_or_default();
        let mut writer =
            AtomicWriter::create(&self.dir, &record_name(&record.label))?.limit(RECORD_MAX_BYTES);
        writer.write(&bytes)?;
        writer.commit_new_or_replace(replace)?;
        self.dir.sync()
    }

    /// Removes the record of `label` (absent is fine).
    pub fn remove(&self, label: &str) -> Result<(), HerdError> {
        check_label(label)?;
        match self.dir.remove(&record_name(label)) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(HerdError::from(e).context(format!("the record of worker {label}"))),
        }
    }
}

/// The file of `label`'s record.
fn record_name(label: &str) -> String {
    format!("{label}.json")
}

/// The herd's lock, held while a worker's record changes; released on drop and when
/// the holder dies.
#[derive(Debug)]
pub struct HerdLock(#[allow(dead_code)] File);

/// Takes the lock `herd/.lock` (`flock`), waiting up to
/// [`HERD_LOCK_WAIT`](ferry_config::limits::HERD_LOCK_WAIT), then `herd_busy`.
pub fn lock(herd: &Dir) -> Result<HerdLock, HerdError> {
    let file = open_lock_file(herd).map_err(|e| HerdError::from(e).context("the herd's lock"))?;
    flock_waiting(&file, "the herd's lock")?;
    Ok(HerdLock(file))
}

/// Takes an exclusive `flock` on `fd`, retrying until
/// [`HERD_LOCK_WAIT`](ferry_config::limits::HERD_LOCK_WAIT) has passed, then `herd_busy`
/// naming `what` is held.
pub(crate) fn flock_waiting(fd: impl std::os::fd::AsFd, what: &str) -> Result<(), HerdError> {
    let started = Instant::now();
    loop {
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK) if started.elapsed() < HERD_LOCK_WAIT => {
                std::thread::sleep(LOCK_RETRY);
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(HerdError::new(
                    Code::HerdBusy,
                    format!(
                        "another process has held {what} for over {} s; try again",
                        HERD_LOCK_WAIT.as_secs()
                    ),
                ));
            }
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
    }
}

fn open_lock_file(herd: &Dir) -> Result<File, FsError> {
    let flags =
        OFlags::RDONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    // ELOOP, a link at the name, is mapped to a path escape.
    let fd = rustix::fs::openat(herd, LOCK_FILE, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| FsError::from_raw_os_error(e.raw_os_error()))?;
    let file = File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(FsError::NotRegular);
    }
    Ok(file)
}

/// The state (field 3) and start time (field 22) of process `pid`, from
/// `/proc/<pid>/stat`. The fields are read after the last `)`: the command name
/// before it may hold spaces and parentheses.
fn proc_stat(pid: u32) -> Option<(u8, u64)> {
    if pid == 0 {
        return None;
    }
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // Field 3 was the state; field 22 is 19 further.
    let ticks = fields.nth(18)?.parse().ok()?;
    Some((state, ticks))
}

/// The start time of process `pid` in clock ticks since boot, if it exists.
pub fn start_ticks(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, ticks)| ticks)
}

/// Whether the process `pid` that started at `ticks` still runs (not a zombie).
pub fn alive(pid: u32, ticks: u64) -> bool {
    // `Z` a zombie, `X` (and `x`) dead: gone but not yet reaped.
    proc_stat(pid)
        .is_some_and(|(state, started)| started == ticks && !matches!(state, b'Z' | b'X' | b'x'))
}
