//! Files written as one change (`file_write`, `file_edit`, a picked file) without their
//! bytes crossing the worker's socket: for each file the person makes a hidden temporary
//! where it will be, the caller fills the temporary's descriptor through a [`ByteSink`]
//! (sha256, writeback, fsync), and the same worker places them all, or none
//! (staged_at.rs). Memory is flat in the size of the files.

use std::sync::Arc;

use ferry_fs::{ByteSink, FileId};

use crate::journal::Journal;
use crate::ops::{Op, Placement, Reach, Reply, WrittenFile};
use crate::staging::{discard, out_of_turn};
use crate::{Lease, RequestError, Requester};

/// A change being made; dropped unplaced, its temporaries are removed.
#[derive(Debug)]
pub struct Change {
    lease: Lease,
    reach: Reach,
    files: Vec<Staged>,
    placed: bool,
    /// Where a change of several files is noted while it is placed; none leaves such a
    /// change all or none against errors only, not against a kill.
    journal: Option<Journal>,
}

#[derive(Debug)]
struct Staged {
    placement: Placement,
    /// The absolute path the file will have.
    display: String,
    sink: ByteSink,
}

impl Change {
    /// A change made as the requester's person, with one worker leased for its whole life.
    pub fn new(requester: Arc<Requester>) -> Change {
        Change::reaching(requester, Reach::AsTools)
    }

    /// A change of files in a place the system made (a pick's folder): reached with no
    /// link followed, in every mode.
    pub fn in_system_place(requester: Arc<Requester>) -> Change {
        Change::reaching(requester, Reach::NoLinks)
    }

    fn reaching(requester: Arc<Requester>, reach: Reach) -> Change {
        Change {
            lease: Lease::new(requester),
            reach,
            files: Vec::new(),
            placed: false,
            journal: None,
        }
    }

    /// Notes the change in `journal` while it is placed, when it has several files, so
    /// a kill between two placings is undone at the next start.
    pub fn journaled(mut self, journal: Journal) -> Change {
        self.journal = Some(journal);
        self
    }

    /// Makes the temporary for `path` (its missing folders made) and hands back where its
    /// bytes go. With `expect_sha256`, the file at `path` must still have that content
    /// when the change is placed.
    pub fn stage(
        &mut self,
        path: &str,
        expect_sha256: Option<String>,
    ) -> Result<&mut ByteSink, RequestError> {
        let op = Op::StageAt {
            path: path.to_owned(),
            reach: self.reach,
        };
        let (temp, display, file) = match self.lease.execute(op)? {
            (Reply::StagedAt { temp, path }, Some(file)) => (temp, path, file),
            _ => return Err(out_of_turn()),
        };
        let id = FileId::of(&file)?;
        self.files.push(Staged {
            placement: Placement {
                path: path.to_owned(),
                temp,
                dev: id.dev,
                ino: id.ino,
                expect_sha256,
                reach: self.reach,
            },
            display,
            sink: ByteSink::new(file),
        });
        let last = self.files.len() - 1;
        Ok(&mut self.files[last].sink)
    }

    /// Flushes every file and has the person place them all, or none.
    pub fn commit(mut self) -> Result<Vec<WrittenFile>, RequestError> {
        let mut written = Vec::with_capacity(self.files.len());
        for file in &mut self.files {
            let done = file.sink.finish()?;
            written.push(WrittenFile {
                path: file.display.clone(),
                size: done.size,
                sha256: done.sha256_hex(),
            });
        }
        let files: Vec<Placement> = self.files.iter().map(|f| f.placement.clone()).collect();
        let placed_sha256: Vec<String> = written.iter().map(|w| w.sha256.clone()).collect();
        let noted = match &self.journal {
            Some(journal) if files.len() > 1 => Some(journal.note(&files, &placed_sha256)?),
            _ => None,
        };
        let placed = self.lease.execute(Op::PlaceAll {
            files: files.clone(),
        });
        if let Some(noted) = noted {
            let settled = match &placed {
                Ok(_) => Ok(()),
                // The person's side put back what it had placed, unless it died midway:
                // undone here, or, failing that, at the next start (the note stays).
                Err(_) => self
                    .lease
                    .execute(Op::UndoPlaceAll {
                        files,
                        placed_sha256,
                    })
                    .map(|_| ()),
            };
            if settled.is_ok() {
                noted.done()?;
            }
        }
        match placed? {
            (Reply::Done, _) => {}
            _ => return Err(out_of_turn()),
        }
        self.placed = true;
        for file in &mut self.files {
            file.sink.settle();
        }
        Ok(written)
    }
}

impl Drop for Change {
    fn drop(&mut self) {
        if self.placed {
            return;
        }
        for file in &self.files {
            discard(&mut self.lease, || Op::DiscardAt {
                path: file.placement.path.clone(),
                temp: file.placement.temp.clone(),
                reach: self.reach,
            });
        }
    }
}
