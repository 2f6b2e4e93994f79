//! Starting a worker's supervisor, and ending a worker's whole process tree.
//!
//! A worker outlives the request that assigned it (`ferry herd assign` exits at once),
//! so each runs below a supervisor of its own: `ferry herd supervise`, in a session of
//! its own, which performs the worker's command through the person's requester and
//! records how it ended. The supervisor's pid is the worker's id. It waits on its
//! standard input for the [`Launch`], so nothing of the worker runs before its task is
//! in its mailbox, and an `assign` that rolls back just closes that pipe.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

use ferry_codes::Code;
use serde::{Deserialize, Serialize};

use crate::HerdError;
use crate::controller::{Acting, Place};
use crate::dirs::{HerdDirs, MAILBOXES};
use crate::envelope::worker_address;
use crate::keys::WorkerKey;
use crate::state::{self, WorkerRecord};

/// The subcommand of the ferry binary that supervises one worker.
pub const SUPERVISE_ARGS: [&str; 2] = ["herd", "supervise"];
/// The largest launch message a supervisor reads (the configuration is most of it).
const LAUNCH_MAX_BYTES: u64 = 4 * 1024 * 1024;
/// How long `stop` waits for a worker's processes to be gone.
const END_WAIT: Duration = Duration::from_secs(10);
/// How often `stop` looks.
const END_POLL: Duration = Duration::from_millis(20);

/// What a supervisor needs to run its worker, sent on its standard input.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// How the supervisor acts as the person.
    pub acting: Acting,
    /// The definition's command, `{systemPrompt}` replaced.
    pub command: String,
    /// The worker's folder, absolute.
    pub cwd: String,
    /// The `FERRY_HERD_*` variables.
    pub env: Vec<(String, String)>,
    /// Whether the person's trees are shown read-only.
    pub read_only: bool,
    /// The prompt snapshot's name, removed after the start attempt (H-SNAP).
    pub snapshot: String,
}

impl Launch {
    /// The worker generation's key, from the worker's variables.
    pub fn key(&self) -> Result<WorkerKey, HerdError> {
        let hex = self
            .env
            .iter()
            .find(|(name, _)| name == "FERRY_HERD_KEY")
            .map(|(_, value)| value.as_str())
            .unwrap_or_default();
        WorkerKey::from_hex(hex)
    }
}

/// The variable holding the upstream's API key (`[agent] api_key_env`), if the
/// supervisor is handed a configuration naming one.
fn upstream_key_variable(acting: &Acting) -> Option<String> {
    match acting {
        Acting::Site { config } => {
            ferry_config::Config::from_effective_toml(config)
                .ok()?
                .agent
                .api_key_env
        }
        Acting::AsPerson(_) => None,
    }
}

/// A supervisor started and waiting for its launch.
pub struct Supervisor {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Supervisor {
    /// Starts `ferry herd supervise` for `label`'s generation `generation`, detached in a
    /// session of its own (a signal to the caller's terminal or group never reaches it).
    pub fn spawn(place: &Place, label: &str, generation: u64) -> Result<Supervisor, HerdError> {
        let mut command = std::process::Command::new(&place.program);
        command
            .args(supervisor_args(place, label, generation))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // The service's own secrets stay out of the supervisor's environment, which a
        // worker of the same account could read in the instant before the supervisor
        // makes itself undumpable: every `FERRY_` setting (the metadata password, the S3
        // keys; the supervisor takes its configuration on its standard input) and the
        // upstream's API key. What the operator allowlists for commands stays.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("FERRY_") {
                command.env_remove(&name);
            }
        }
        if let Some(api_key) = upstream_key_variable(&place.acting) {
            command.env_remove(api_key);
        }
        // SAFETY: setsid is one raw system call, safe between fork and exec.
        unsafe {
            command.pre_exec(|| {
                rustix::process::setsid()?;
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| {
            HerdError::new(
                Code::SpawnFailed,
                format!(
                    "the worker's supervisor ({}) could not start: {e}",
                    place.program.display()
                ),
            )
        })?;
        let stdin = child.stdin.take();
        Ok(Supervisor { child, stdin })
    }

    /// Its pid: the worker's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Hands it the launch; from now on it runs on its own, and a thread reaps it when
    /// it ends (in a process that exits first, init does).
    pub fn go(mut self, launch: &Launch) -> Result<(), HerdError> {
        let sent = self.stdin.take().map(|mut stdin| {
            let mut line = serde_json::to_vec(launch).unwrap_or_default();
            line.push(b'\n');
            stdin.write_all(&line)
        });
        match sent {
            Some(Ok(())) => {
                let mut child = self.child;
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
                Ok(())
            }
            _ => {
                self.abort();
                Err(HerdError::new(
                    Code::SpawnFailed,
                    "the worker's supervisor ended before it was given its task",
                ))
            }
        }
    }

    /// Ends it before it ran anything, and reaps it.
    pub fn abort(mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The arguments of `label`'s generation `generation`'s supervisor, after the program.
fn supervisor_args(place: &Place, label: &str, generation: u64) -> Vec<OsString> {
    let mut args: Vec<OsString> = SUPERVISE_ARGS.iter().map(OsString::from).collect();
    args.extend([
        "--data".into(),
        place.data.clone().into_os_string(),
        "--person".into(),
        place.person.clone().into(),
        "--label".into(),
        label.into(),
        "--generation".into(),
        generation.to_string().into(),
    ]);
    args
}

/// The supervisor a record names (pid and start time), when it is alive and is the very
/// process `spawn` started for that generation: its command line says so. A record is a
/// file of the person's, which any of their workers can rewrite; the herd never signals,
/// nor counts as its worker, a process it did not start (a forged pid, a reused one).
pub fn supervisor_of(place: &Place, record: &WorkerRecord) -> Option<(u32, u64)> {
    let (pid, ticks) = (record.pid?, record.start_ticks?);
    let expected = supervisor_args(place, &record.label, record.generation);
    (state::alive(pid, ticks) && is_supervisor(pid, &expected, expected.len()))
        .then_some((pid, ticks))
}

/// Whether `pid` runs with `expected` as its arguments (the first `compared` of them
/// compared; the program itself may be named otherwise by another caller: a link, an
/// upgrade), with no supervisor above it, and is still the process that started at
/// its start time (a pid may be reused meanwhile).
fn is_supervisor(pid: u32, expected: &[OsString], compared: usize) -> bool {
    let Some(ticks) = state::start_ticks(pid) else {
        return false;
    };
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let Some(given) = cmdline.strip_suffix(b"\0") else {
        return false;
    };
    let given: Vec<&[u8]> = given.split(|b| *b == 0).collect();
    let same = given.len() == expected.len() + 1
        && given[1..]
            .iter()
            .zip(&expected[..compared])
            .all(|(g, e)| *g == e.as_bytes());
    same && !is_reaper(pid) && !below_a_supervisor(pid) && state::alive(pid, ticks)
}

/// Whether `pid` is the reaper of a supervisor's run (ferry-exec): forked from the
/// supervisor without a program of its own, it shows the supervisor's command line, and
/// once that supervisor is killed nothing above it tells it apart any more. Taken for a
/// supervisor then, it was killed before it had ended the worker's command, which then
/// outlived every reaper.
fn is_reaper(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/comm")).is_ok_and(|comm| {
        comm.strip_suffix(b"\n").unwrap_or(&comm) == ferry_exec::REAPER_NAME.to_bytes()
    })
}

/// Whether a supervisor runs above `pid`: then `pid` is a process of some worker (which
/// can run the ferry binary with any arguments), never a supervisor the herd started.
fn below_a_supervisor(pid: u32) -> bool {
    let mut at = pid;
    // A chain of parents is short; the bound only guards against a loop in what /proc says.
    for _ in 0..4096 {
        match parent_of(at) {
            Some(parent) if parent > 1 => {
                if runs_as_supervisor(parent) {
                    return true;
                }
                at = parent;
            }
            _ => return false,
        }
    }
    true
}

/// Whether `pid`'s command line is a supervisor's (`<program> herd supervise …`).
fn runs_as_supervisor(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        let mut args = cmdline.split(|b| *b == 0).skip(1);
        args.next() == Some(b"herd".as_slice()) && args.next() == Some(b"supervise".as_slice())
    })
}

/// Every live supervisor of `label` in this herd, of any generation, found by its
/// command line: what `stop` ends even when the label's record was rewritten (and so
/// names no process it believes), and what goes before a new generation starts.
pub fn supervisors_of_label(place: &Place, label: &str) -> Vec<(u32, u64)> {
    let expected = supervisor_args(place, label, 0);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        // Everything but the generation's number, which is last.
        .filter(|&pid| is_supervisor(pid, &expected, expected.len() - 1))
        .filter_map(|pid| state::start_ticks(pid).map(|ticks| (pid, ticks)))
        .collect()
}

/// Ends every supervisor of `label` (see [`supervisors_of_label`]) and its whole tree;
/// how many there were. One that does not end in time does not keep the others alive.
pub fn end_label(place: &Place, label: &str) -> Result<usize, HerdError> {
    let found = supervisors_of_label(place, label);
    let mut first_error = None;
    for &(pid, ticks) in &found {
        if let Err(e) = end_tree(pid, ticks) {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(found.len()),
    }
}

/// Reads the launch a supervisor is given; `None` when the pipe closed without one (the
/// `assign` rolled back).
pub fn read_launch(input: &mut dyn Read) -> Result<Option<Launch>, HerdError> {
    let mut bytes = Vec::new();
    input
        .take(LAUNCH_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(HerdError::from)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if bytes.len() as u64 > LAUNCH_MAX_BYTES {
        return Err(HerdError::invalid("the launch message is too large"));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| HerdError::invalid(format!("the launch message is not valid: {e}")))
}

/// The definition's command with `{systemPrompt}` replaced by the snapshot's path,
/// quoted for bash.
pub fn command_with_prompt(command: &str, prompt: &Path) -> String {
    let quoted = format!("'{}'", prompt.display().to_string().replace('\'', r"'\''"));
    command.replace("{systemPrompt}", &quoted)
}

/// The `FERRY_HERD_*` variables of a worker.
pub fn worker_env(
    place: &Place,
    dirs: &HerdDirs,
    label: &str,
    pid: u32,
    generation: u64,
    prompt: &Path,
    key: &WorkerKey,
) -> Vec<(String, String)> {
    let shown = |p: &Path| p.display().to_string();
    vec![
        ("FERRY_HERD_LABEL".to_owned(), label.to_owned()),
        ("FERRY_HERD_WORKER".to_owned(), worker_address(label, pid)),
        ("FERRY_HERD_GENERATION".to_owned(), generation.to_string()),
        ("FERRY_HERD_DIR".to_owned(), shown(&dirs.path)),
        (
            "FERRY_HERD_MAILBOX".to_owned(),
            shown(&dirs.path_of(MAILBOXES).join(label)),
        ),
        ("FERRY_HERD_SYSTEM_PROMPT".to_owned(), shown(prompt)),
        ("FERRY_HERD_BIN".to_owned(), shown(&place.program)),
        ("FERRY_HERD_KEY".to_owned(), key.to_hex()),
    ]
}

/// Ends the supervisor `pid` (started at `ticks`) and every process below it, and waits
/// until they are all gone. Killing the supervisor closes its end of the reaper's control
/// pipe, and the reaper kills the whole command tree (ferry-exec); what had detached
/// (`setsid`, a double fork) was adopted by the reaper, so it is below it too.
pub fn end_tree(pid: u32, ticks: u64) -> Result<(), HerdError> {
    if !state::alive(pid, ticks) {
        return Ok(());
    }
    let below = descendants(pid);
    let raw = rustix::process::Pid::from_raw(pid as i32)
        .ok_or_else(|| HerdError::invalid("a worker's pid is not a pid"))?;
    // Through a pidfd, checked against the start time first: never a reused pid.
    let pidfd = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
        .map_err(|e| HerdError::from(std::io::Error::from(e)))?;
    if state::alive(pid, ticks) {
        let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
    }
    let deadline = Instant::now() + END_WAIT;
    let mut left: Vec<(u32, u64)> = std::iter::once((pid, ticks)).chain(below).collect();
    while !left.is_empty() {
        left.retain(|&(p, t)| state::alive(p, t));
        if Instant::now() >= deadline {
            return Err(HerdError::new(
                Code::Unwatched,
                format!(
                    "{} of the worker's processes were still running {}s after it was ended",
                    left.len(),
                    END_WAIT.as_secs()
                ),
            ));
        }
        std::thread::sleep(END_POLL);
    }
    Ok(())
}

/// Every process below `pid` now, with its start time.
fn descendants(pid: u32) -> Vec<(u32, u64)> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(parent) = parent_of(p) {
                parents.push((p, parent));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let of = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == of).map(|(p, _)| *p));
        i += 1;
    }
    found
        .into_iter()
        .skip(1)
        .filter_map(|p| state::start_ticks(p).map(|t| (p, t)))
        .collect()
}

/// The parent of `pid` (`/proc/<pid>/stat` field 4, read after the command's `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}
