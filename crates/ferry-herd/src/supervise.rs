//! The supervisor process (`ferry herd supervise`): runs one worker generation's
//! command through the person's requester, and records how it ended.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};

use ferry_config::limits::{HERD_START_TIMEOUT, HERD_WORKER_MAX_LIFETIME};
use ferry_exec::ops::WorkerRun;
use ferry_exec::{Output, Requester};
use ferry_fs::Dir;

use crate::HerdError;
use crate::controller::Place;
use crate::dirs::{HerdDirs, SNAPSHOTS};
use crate::keys::WorkerKey;
use crate::snapshot::remove_snapshot;
use crate::spawn::Launch;
use crate::state::{self, Exit, State, WorkerRecord, Workers};

/// Runs generation `generation` of the worker `label` to its end, as `launch` says.
pub fn supervise(
    place: &Place,
    label: &str,
    generation: u64,
    launch: Launch,
    requester: &Requester,
) -> Result<(), HerdError> {
    crate::check_label(label)?;
    let herd = place.herd();
    let data = Dir::open_ambient(&place.data)?;
    let rel = ferry_site::layout::private_sub(&place.person, ferry_site::layout::HERD_DIR);
    let dirs = HerdDirs::open(&herd, Some((&data, &rel)))?;
    let key = launch.key()?;

    // H-SNAP: the prompt goes once the worker read its inbox, exited, or had its time.
    // The run's end wakes the timer at once: it is joined before the end is recorded.
    let (ended, wake) = mpsc::channel::<()>();
    let timer = {
        let (herd, rel, label, key) = (herd.clone(), rel.clone(), label.to_owned(), key.clone());
        let data = place.data.clone();
        std::thread::spawn(move || {
            if wake.recv_timeout(HERD_START_TIMEOUT) == Err(RecvTimeoutError::Timeout)
                && let Ok(data) = Dir::open_ambient(&data)
                && let Ok(dirs) = HerdDirs::open(&herd, Some((&data, &rel)))
            {
                let _ = drop_snapshot(&dirs, &label, generation, &key);
            }
        })
    };

    let writable = vec![herd.display().to_string()];
    let run = requester.run_worker(
        launch.command,
        Some(launch.cwd),
        WorkerRun {
            env: launch.env,
            lifetime_secs: HERD_WORKER_MAX_LIFETIME.as_secs(),
            programs: vec![place.program.display().to_string()],
            read_only: launch.read_only,
            writable,
        },
    );
    drop(ended);
    let _ = timer.join();
    let _ = remove_snapshot(&dirs.sub(SNAPSHOTS)?, &launch.snapshot);
    record_end(&dirs, label, generation, &key, run.map_err(HerdError::from))
}

/// Marks `label`'s generation `generation` of the herd at `herd` failed, saying why its
/// supervisor could not run it (the site would not open, say): otherwise its record
/// would only tell, later, that the process is gone.
pub fn record_failure(
    herd: &Path,
    label: &str,
    generation: u64,
    launch: &Launch,
    why: &str,
) -> Result<(), HerdError> {
    crate::check_label(label)?;
    let dirs = HerdDirs::open(herd, None)?;
    update_generation(&dirs, label, generation, &launch.key()?, |record| {
        let live = record.state.is_live();
        if live {
            record.state = State::Failed;
            record.reason = Some(format!("its supervisor could not run it: {why}"));
        }
        Ok(live)
    })
}

/// Changes the record of `label`'s generation `generation` under the herd's lock, unless
/// a later generation took the label or the record is not signed with `key` (another
/// process wrote it); `change` says whether it changed anything.
pub(crate) fn update_generation(
    dirs: &HerdDirs,
    label: &str,
    generation: u64,
    key: &WorkerKey,
    change: impl FnOnce(&mut WorkerRecord) -> Result<bool, HerdError>,
) -> Result<(), HerdError> {
    let workers = Workers::open(&dirs.dir)?;
    let _lock = state::lock(&dirs.dir)?;
    match workers.load(label)? {
        Some(mut record) if record.generation == generation && record.verifies(key) => {
            if change(&mut record)? {
                workers.save(&mut record, key)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Removes the prompt snapshot of `label`'s generation, if its record still names it.
pub(crate) fn drop_snapshot(
    dirs: &HerdDirs,
    label: &str,
    generation: u64,
    key: &WorkerKey,
) -> Result<(), HerdError> {
    update_generation(dirs, label, generation, key, |record| {
        let Some(name) = record.snapshot.take() else {
            return Ok(false);
        };
        remove_snapshot(&dirs.sub(SNAPSHOTS)?, &name)?;
        Ok(true)
    })
}

/// Writes how the run ended into the record, unless a later generation took the label.
fn record_end(
    dirs: &HerdDirs,
    label: &str,
    generation: u64,
    key: &WorkerKey,
    run: Result<Output, HerdError>,
) -> Result<(), HerdError> {
    update_generation(dirs, label, generation, key, |record| {
        end(record, run);
        Ok(true)
    })
}

/// What a run's end makes of a record.
fn end(record: &mut WorkerRecord, run: Result<Output, HerdError>) {
    record.snapshot = None;
    match run {
        Ok(output) => {
            record.exit = Some(Exit {
                code: output.exit_code,
                signal: output.signal,
            });
            record.output_path = output
                .full_output_path
                .as_ref()
                .map(|p| p.display().to_string());
            if record.state.is_live() {
                record.state = State::Failed;
                record.reason = Some(why_failed(&output));
            }
        }
        Err(e) => {
            if record.state.is_live() {
                record.state = State::Failed;
                record.reason = Some(format!("its command could not run: {}", e.message));
            }
        }
    }
}

/// A sentence for a worker whose process ended without completing, with the end of what
/// it said on stderr, since that is where a crash explains itself.
fn why_failed(output: &Output) -> String {
    let how = match (output.timed_out, output.exit_code, output.signal) {
        (true, _, _) => format!(
            "it ran past the {}-hour limit and was ended",
            HERD_WORKER_MAX_LIFETIME.as_secs() / 3600
        ),
        (false, Some(code), _) => {
            format!("its process exited with status {code} without completing")
        }
        (false, None, Some(signal)) => {
            format!("its process was killed by signal {signal} without completing")
        }
        (false, None, None) => "its process ended without completing".to_owned(),
    };
    let tail = last_chars(output.stderr.trim_end(), 400);
    if tail.is_empty() {
        how
    } else {
        format!("{how}; its last words on stderr: {tail}")
    }
}

fn last_chars(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
