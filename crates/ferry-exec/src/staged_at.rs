//! Files written at paths without their bytes crossing the worker's socket: the person
//! makes a hidden temporary where each file will be ([`Op::StageAt`]), the caller fills
//! its descriptor (see `change.rs`), and the person places them all as one change
//! ([`Op::PlaceAll`]) or removes them ([`Op::DiscardAt`]). `file_write`, `file_edit` and
//! a picked file reach the person's folders this way.
//!
//! [`Op::StageAt`]: crate::ops::Op::StageAt
//! [`Op::PlaceAll`]: crate::ops::Op::PlaceAll
//! [`Op::DiscardAt`]: crate::ops::Op::DiscardAt

use std::collections::HashMap;
use std::fs::File;
use std::sync::Mutex;

use ferry_codes::Code;
use ferry_fs::{Dir, FileId, Follow, FsError, MadeDirs};
use serde::{Deserialize, Serialize};

use crate::RequestError;
use crate::ops::{Executor, Reach, WriteTarget};

/// One file of [`Op::PlaceAll`](crate::ops::Op::PlaceAll).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Placement {
    /// Where the file goes, resolved like any path a model gives.
    pub path: String,
    /// The name [`Op::StageAt`](crate::ops::Op::StageAt) gave the temporary.
    pub temp: String,
    /// The device the temporary must still be on.
    pub dev: u64,
    /// The inode the temporary must still have, so a swapped file is refused.
    pub ino: u64,
    /// The sha256 (hex) the file at `path` had when it was read; a change since refuses
    /// the whole change.
    pub expect_sha256: Option<String>,
    /// How `path` is reached, as when it was staged.
    #[serde(default)]
    pub reach: Reach,
}

/// The folder each temporary was made in, by the temporary's name, kept by the executor
/// that made it from its staging to its placing or removal: the temporary is found there
/// even when the person moved that folder away meanwhile. An executor that did not make
/// it (a fresh worker after one died) finds it by its path. With it, the folders made on
/// the way for it, taken back when it is removed instead of placed.
#[derive(Debug, Default)]
pub(crate) struct StagedDirs(Mutex<HashMap<String, (Dir, MadeDirs)>>);

impl StagedDirs {
    /// Keeps `dir` as where `temp` lies, `made` as the folders made for it.
    pub(crate) fn keep(&self, temp: &str, dir: Dir, made: MadeDirs) {
        self.lock().insert(temp.to_owned(), (dir, made));
    }

    /// A handle of the folder `temp` lies in, if this executor made it.
    pub(crate) fn get(&self, temp: &str) -> Option<Result<Dir, FsError>> {
        self.lock().get(temp).map(|(dir, _)| dir.try_clone())
    }

    /// Forgets `temp`, handing back its folder and the folders made for it.
    pub(crate) fn take(&self, temp: &str) -> Option<(Dir, MadeDirs)> {
        self.lock().remove(temp)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Dir, MadeDirs)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Executor {
    /// Makes the temporary for `path` (its folders made): its name, the absolute path
    /// the file will have, and the temporary open for writing.
    pub(crate) fn stage_at(
        &self,
        path: &str,
        reach: Reach,
    ) -> Result<(String, String, File), RequestError> {
        let target = self.target_of(path, true, reach)?;
        ferry_fs::check_placeable(&target.dir, &target.name, true)?;
        let (temp, file) = ferry_fs::create_temporary(&target.dir)?;
        self.staged_in.keep(&temp, target.dir, target.made);
        Ok((temp, target.display.display().to_string(), file))
    }

    /// Places every file of one change, all or none. Each expected content is checked
    /// first, and each previous file is kept (a second hard link, named after the file's
    /// temporary: [`ferry_fs::kept_name`]) until all are placed: should placing one
    /// fail, those already placed get their previous file back. Should this process be
    /// killed meanwhile, the change's journal has [`Executor::undo_place_all`] do that at
    /// the next start.
    pub(crate) fn place_all(&self, files: &[Placement]) -> Result<(), RequestError> {
        let mut targets = Vec::with_capacity(files.len());
        for file in files {
            let target = self.target_of(&file.path, false, file.reach);
            targets.push(target.map_err(|e| naming(&file.path, e))?);
        }
        // Held until every file is placed: a concurrent change of the same file waits,
        // then finds it changed, instead of both passing the check and one edit being lost.
        let _locked = lock_unchanged(files, &targets)?;
        let mut kept: Vec<Option<String>> = Vec::with_capacity(targets.len());
        let mut result = Ok(());
        // One file alone is placed or not: nothing to put back, so nothing is kept (and
        // no second link is made to a file another may own, in a sticky folder).
        let keeping = targets.len() > 1;
        for (index, (file, target)) in files.iter().zip(&targets).enumerate() {
            if !keeping {
                break;
            }
            let kept_as = ferry_fs::kept_name(&file.temp);
            match ferry_fs::keep_previous(&target.dir, &target.name, &kept_as) {
                Ok(previous) => kept.push(previous),
                Err(e) => {
                    result = Err((index, e));
                    break;
                }
            }
        }
        let mut placed = 0;
        if result.is_ok() {
            for (file, target) in files.iter().zip(&targets) {
                let expect = FileId {
                    dev: file.dev,
                    ino: file.ino,
                };
                let made_in = match self.staged_in.get(&file.temp).transpose() {
                    Ok(made_in) => made_in,
                    Err(e) => {
                        result = Err((placed, e));
                        break;
                    }
                };
                let placing = ferry_fs::place_temporary(
                    made_in.as_ref().unwrap_or(&target.dir),
                    &file.temp,
                    &target.dir,
                    &target.name,
                    expect,
                    ferry_fs::Placement {
                        mode: target.mode,
                        owner: self.owner(),
                        replace: true,
                    },
                );
                if let Err(e) = placing {
                    result = Err((placed, e));
                    break;
                }
                self.staged_in.take(&file.temp);
                placed += 1;
            }
        }
        if result.is_err() {
            for (target, previous) in targets.iter().zip(&kept).take(placed) {
                // Best effort: the error that stopped the change is the one reported.
                let _ = match previous {
                    Some(previous) => {
                        ferry_fs::restore_previous(&target.dir, previous, &target.name)
                    }
                    None => target.dir.remove(&target.name),
                };
            }
        }
        for (target, previous) in targets.iter().zip(&kept) {
            if let Some(previous) = previous {
                let _ = ferry_fs::remove_temporary(&target.dir, previous);
            }
        }
        result.map_err(|(index, e)| naming(&files[index].path, e.into()))
    }

    /// Undoes the change `files` whose writer died between its placings: each target
    /// that still holds its new file (the temporary's inode, with the content it was
    /// placed with, `placed_sha256`) gets its kept previous file back; then the kept
    /// files and the temporaries left are removed. Repeating it does no harm, so a kill
    /// during the undo is mended by the next. A target changed since (another file, or
    /// the same file written to) is left as it is, and a file is never removed: a change
    /// of several files only ever replaces files that exist (`file_edit`).
    pub(crate) fn undo_place_all(
        &self,
        files: &[Placement],
        placed_sha256: &[String],
    ) -> Result<(), RequestError> {
        let mut first_error = None;
        for (index, file) in files.iter().enumerate() {
            let undone = self
                .target_of(&file.path, false, file.reach)
                .and_then(|target| {
                    let kept = ferry_fs::kept_name(&file.temp);
                    if target.dir.metadata(&kept).is_ok()
                        && holds_as_placed(&target, file.ino, placed_sha256.get(index))
                    {
                        ferry_fs::restore_previous(&target.dir, &kept, &target.name)?;
                    }
                    ferry_fs::remove_temporary(&target.dir, &kept)?;
                    ferry_fs::remove_temporary(&target.dir, &file.temp)?;
                    Ok(())
                });
            if let Err(e) = undone {
                first_error.get_or_insert(naming(&file.path, e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Removes the temporary `temp` made for `path`, and the folders made for it while
    /// they are empty.
    pub(crate) fn discard_at(
        &self,
        path: &str,
        temp: &str,
        reach: Reach,
    ) -> Result<(), RequestError> {
        if let Some((made_in, made)) = self.staged_in.take(temp) {
            ferry_fs::remove_temporary(&made_in, temp)?;
            // A write refused (too large, a full disk) leaves no folders it made behind.
            made.remove_empty();
            return Ok(());
        }
        let target = self.target_of(path, false, reach)?;
        Ok(ferry_fs::remove_temporary(&target.dir, temp)?)
    }
}

/// Whether `target` is still the file a change placed: the inode `ino`, with the content
/// whose sha256 is `sha256`. Without a digest to compare, it is not taken for it.
fn holds_as_placed(target: &WriteTarget, ino: u64, sha256: Option<&String>) -> bool {
    let Some(sha256) = sha256 else {
        return false;
    };
    let Ok(mut file) = target.dir.open_file(&target.name, Follow::Never) else {
        return false;
    };
    FileId::of(&file).is_ok_and(|id| id.ino == ino)
        && ferry_fs::sha256_hex_of_reader(&mut file).is_ok_and(|now| &now == sha256)
}

/// How long a change waits for another change of one of its files to finish.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens every file a change expects a content of, locks them (`flock`, exclusive, in
/// inode order so two changes of the same files cannot wait on each other), then checks
/// each is still at its name and still the content it was read with.
fn lock_unchanged(files: &[Placement], targets: &[WriteTarget]) -> Result<Vec<File>, RequestError> {
    let mut expected = Vec::new();
    for (file, target) in files.iter().zip(targets) {
        if let Some(sha256) = &file.expect_sha256 {
            let opened = target
                .dir
                .open_file(&target.name, Follow::Never)
                .map_err(|e| naming(&file.path, e.into()))?;
            let id = FileId::of(&opened)?;
            expected.push((id, opened, target, sha256, &file.path));
        }
    }
    expected.sort_by_key(|(id, ..)| (id.dev, id.ino));
    if expected.windows(2).any(|pair| pair[0].0 == pair[1].0) {
        return Err(RequestError::new(
            Code::InvalidArguments,
            "the change names one file twice (through a link, or by two names)",
        ));
    }
    let mut locked = Vec::with_capacity(expected.len());
    for (id, mut opened, target, sha256, path) in expected {
        lock(&opened, path)?;
        let still = target
            .dir
            .metadata(&target.name)
            .is_ok_and(|meta| meta.inode == id.ino);
        if !still || &ferry_fs::sha256_hex_of_reader(&mut opened)? != sha256 {
            return Err(changed(path));
        }
        locked.push(opened);
    }
    Ok(locked)
}

/// Takes the exclusive lock of `file`, waiting at most [`LOCK_WAIT`].
fn lock(file: &File, path: &str) -> Result<(), RequestError> {
    use rustix::fs::{FlockOperation, flock};
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR)
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(RequestError::new(
                    Code::ChangedMeanwhile,
                    format!(
                        "{path} is being changed by another edit; read it again and redo the edit"
                    ),
                ));
            }
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
    }
}

/// `e`, saying which file it is about when it does not already.
fn naming(path: &str, mut e: RequestError) -> RequestError {
    if !e.message.contains(path) {
        e.message = format!("{path}: {}", e.message);
    }
    e
}

fn changed(path: &str) -> RequestError {
    RequestError::new(
        Code::ChangedMeanwhile,
        format!("{path} changed since it was read; read it again and redo the edit"),
    )
}
