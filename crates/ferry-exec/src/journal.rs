//! The journal of a change of several files (a `file_edit` of more than one file). It is
//! noted in a folder of the site's own, never in the person's folders, before the first
//! placing, and removed after the last. A writer killed between two placings leaves it
//! behind, and the next start undoes that change as the person
//! ([`Op::UndoPlaceAll`](crate::ops::Op::UndoPlaceAll)): so the change lands all or none
//! against a kill as it does against an error.
//!
//! Whether a writer is gone is told by its process id and that process's start time, so
//! a new process that got the same id is not taken for it.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ops::{Op, Placement};
use crate::{RequestError, Requester};

/// Where the changes of one person are noted.
#[derive(Clone, Debug)]
pub struct Journal {
    dir: PathBuf,
    person: String,
}

/// One noted change, as written.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    person: String,
    pid: u32,
    /// The writer's start time, in clock ticks since boot (`/proc/<pid>/stat`).
    started: u64,
    files: Vec<Placement>,
    /// The sha256 of each file's new content, in order; see
    /// [`Op::UndoPlaceAll`](crate::ops::Op::UndoPlaceAll).
    #[serde(default)]
    placed_sha256: Vec<String>,
}

/// A change noted and not yet placed; [`Noted::done`] removes the note.
#[derive(Debug)]
pub(crate) struct Noted {
    path: PathBuf,
}

impl Journal {
    /// The journal of `person`'s changes in `dir` (made when first needed, 0700).
    pub fn new(dir: impl Into<PathBuf>, person: &str) -> Journal {
        Journal {
            dir: dir.into(),
            person: person.to_owned(),
        }
    }

    /// Notes `files` durably before they are placed, with the sha256 of each one's new
    /// content.
    pub(crate) fn note(
        &self,
        files: &[Placement],
        placed_sha256: &[String],
    ) -> Result<Noted, RequestError> {
        let pid = std::process::id();
        let record = Record {
            person: self.person.clone(),
            pid,
            started: started(pid).unwrap_or_default(),
            files: files.to_vec(),
            placed_sha256: placed_sha256.to_vec(),
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let name = format!("{pid}-{}.json", ferry_fs::random_base32::<10>());
        let writing = self.dir.join(format!(".{name}.new"));
        let path = self.dir.join(name);
        let mut file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&writing)?;
        file.write_all(&serde_json::to_vec(&record).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&writing, &path)?;
        sync_dir(&self.dir)?;
        Ok(Noted { path })
    }

    /// Undoes every change of this journal's person whose writer is gone, through
    /// `requester` (acting as the person); the number undone. A change whose undo fails
    /// stays noted, for the next start, and is logged.
    pub fn undo_unfinished(&self, requester: &Requester) -> usize {
        let mut undone = 0;
        for (path, record) in unfinished(&self.dir) {
            if record.person != self.person {
                continue;
            }
            match requester.execute(Op::UndoPlaceAll {
                files: record.files,
                placed_sha256: record.placed_sha256,
            }) {
                Ok(_) => match forget(&path) {
                    Ok(()) => undone += 1,
                    Err(e) => tracing::warn!("removing {}: {e}", path.display()),
                },
                Err(e) => tracing::warn!(
                    "undoing the unfinished change {} of {}: {e}",
                    path.display(),
                    self.person
                ),
            }
        }
        if undone > 0 {
            tracing::info!(
                "undid {undone} change(s) of {} whose writer died between its files",
                self.person
            );
        }
        undone
    }
}

impl Noted {
    /// The change is placed (or undone): its note goes, durably, so that no later start
    /// undoes a change that was answered as done.
    pub(crate) fn done(self) -> Result<(), RequestError> {
        Ok(forget(&self.path)?)
    }
}

/// The persons with a noted change in `dir` whose writer is gone: those a gateway opens
/// the tools of at its start, so that their changes are undone before anything else.
pub fn persons_with_unfinished_changes(dir: &Path) -> Vec<String> {
    let mut persons: Vec<String> = unfinished(dir).into_iter().map(|(_, r)| r.person).collect();
    persons.sort();
    persons.dedup();
    persons
}

/// Every noted change in `dir` whose writer is gone. A note that cannot be read is
/// logged and left for an operator; a folder not made yet holds none.
fn unfinished(dir: &Path) -> Vec<(PathBuf, Record)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let record = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).map_err(|e| e.to_string()));
        match record {
            Ok(record) if started(record.pid) == Some(record.started) => {} // still writing
            Ok(record) => found.push((path, record)),
            Err(e) => tracing::warn!("the change journal {} cannot be read: {e}", path.display()),
        }
    }
    found
}

/// Removes a note, and makes the removal durable.
fn forget(path: &Path) -> std::io::Result<()> {
    std::fs::remove_file(path)?;
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// When the process `pid` started (field 22 of `/proc/<pid>/stat`), if it is running.
fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses
    // itself: the fields after it start after the last `)`.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_running_and_a_record_of_it_is_not_unfinished() {
        let me = std::process::id();
        assert!(started(me).is_some());
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path().join("changes"), "ann");
        let noted = journal.note(&[], &[]).unwrap();
        assert!(unfinished(&dir.path().join("changes")).is_empty());
        noted.done().unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path().join("changes"))
                .unwrap()
                .count(),
            0
        );
    }

    #[test]
    fn a_record_of_a_process_that_is_gone_is_unfinished() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let then = started(pid);
        child.wait().unwrap();
        let record = Record {
            person: "ann".into(),
            pid,
            started: then.unwrap_or(1),
            files: Vec::new(),
            placed_sha256: Vec::new(),
        };
        std::fs::write(
            dir.path().join("1-x.json"),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.path().join("2-y.json"), b"not json").unwrap();
        assert_eq!(persons_with_unfinished_changes(dir.path()), vec!["ann"]);
    }
}
