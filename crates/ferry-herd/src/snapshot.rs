//! H-SNAP: the prompt a worker generation starts with, in a private snapshot.

use std::path::{Path, PathBuf};

use ferry_config::limits::HERD_PROMPT_MAX_BYTES;
use ferry_fs::{AtomicWriter, Dir, Follow, FsError};

use crate::dirs::PRIVATE_DIR_MODE;
use crate::{HerdError, check_label};

/// The file name of the prompt inside a snapshot folder.
pub const PROMPT_FILE: &str = "system-prompt.md";
/// Random bytes in a snapshot's name: 16 characters of base32.
const RANDOM_BYTES: usize = 10;
/// Characters those bytes take.
const RANDOM_CHARS: usize = 16;
/// Names drawn before giving up; a second one is taken only if the first was.
const NAME_ATTEMPTS: usize = 8;

/// A written snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Its folder's name in `snapshots/`.
    pub name: String,
    /// Its folder (0700), absolute.
    pub dir: PathBuf,
    /// The prompt file in it (0600), absolute: `{systemPrompt}`.
    pub prompt: PathBuf,
}

/// Writes `prompt` to a new private folder in `snapshots` (at `snapshots_path`), for
/// the worker `label`.
pub fn write_snapshot(
    snapshots: &Dir,
    snapshots_path: &Path,
    label: &str,
    prompt: &str,
) -> Result<Snapshot, HerdError> {
    check_label(label)?;
    let name = make_folder(snapshots, label)?;
    let written = write_prompt(snapshots, &name, prompt);
    if let Err(e) = written {
        // Nothing of a failed snapshot stays behind.
        let _ = snapshots.remove(&name);
        return Err(e.context("writing the worker's prompt snapshot"));
    }
    let dir = snapshots_path.join(&name);
    Ok(Snapshot {
        prompt: dir.join(PROMPT_FILE),
        dir,
        name,
    })
}

/// Makes a new folder `<label>-<random>` (0700), never one that was there.
fn make_folder(snapshots: &Dir, label: &str) -> Result<String, HerdError> {
    for _ in 0..NAME_ATTEMPTS {
        let name = format!("{label}-{}", ferry_fs::random_base32::<RANDOM_BYTES>());
        match snapshots.create_dir(&name, PRIVATE_DIR_MODE) {
            Ok(()) => return Ok(name),
            Err(FsError::Exists) => continue,
            Err(e) => return Err(HerdError::from(e).context("making a prompt snapshot")),
        }
    }
    Err(HerdError::from(FsError::Exists).context("making a prompt snapshot"))
}

fn write_prompt(snapshots: &Dir, name: &str, prompt: &str) -> Result<(), HerdError> {
    let folder = snapshots.open_dir(name, Follow::Never)?;
    let mut writer =
        AtomicWriter::create(&folder, PROMPT_FILE)?.limit(HERD_PROMPT_MAX_BYTES as u64);
    writer.write(prompt.as_bytes())?;
    writer.commit_new_or_replace(false)?;
    folder.sync()?;
    Ok(())
}

/// Removes the snapshot folder `name` and what is in it; absent is fine, and a name
/// that is not a snapshot's is refused.
pub fn remove_snapshot(snapshots: &Dir, name: &str) -> Result<(), HerdError> {
    if !is_snapshot_name(name) {
        return Err(HerdError::invalid(format!(
            "{name:?} is not the name of a prompt snapshot"
        )));
    }
    // Links inside are removed, never followed.
    match snapshots.remove(name) {
        Ok(()) | Err(FsError::NotFound) => Ok(()),
        Err(e) => Err(HerdError::from(e).context(format!("removing the prompt snapshot {name}"))),
    }
}

/// `<label>-<16 characters of base32>`.
fn is_snapshot_name(name: &str) -> bool {
    let Some((label, random)) = name.rsplit_once('-') else {
        return false;
    };
    check_label(label).is_ok()
        && random.len() == RANDOM_CHARS
        && random
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'))
}
