//! A new file on its way into the person's folders without its bytes crossing the
//! worker's socket: the person makes the hidden temporary (so the person owns it), the
//! caller writes the bytes into its descriptor through a [`ByteSink`] (limit, quota,
//! sha256, writeback, fsync), and the same worker places it. Memory is flat in the size
//! of the file. The place is a workspace's `public/`, by the member rules (member.rs);
//! files at other paths are written as a [`crate::Change`].

use ferry_codes::Code;
use std::sync::Arc;

use ferry_fs::{ByteSink, FileId, Written};
use ferry_site::PublicPlace;

use crate::member::{Existing, MemberAction, MemberReply, StagedFile};
use crate::ops::{Op, Reply};
use crate::{Lease, RequestError, Requester};

/// A temporary being filled; dropped unplaced, it is removed.
#[derive(Debug)]
pub struct Staging {
    lease: Lease,
    sink: ByteSink,
    staged: StagedFile,
    placed: bool,
}

impl Staging {
    /// Makes a temporary in `place` of the workspace (or `project`) of the requester's
    /// person, with a worker leased for the staging's whole life; with `name`, a target
    /// that could not be placed is refused first.
    pub fn start(
        requester: Arc<Requester>,
        project: Option<&str>,
        place: PublicPlace,
        name: Option<&str>,
        existing: Existing,
    ) -> Result<Staging, RequestError> {
        let mut lease = Lease::new(requester);
        let op = Op::Member {
            project: project.map(str::to_owned),
            action: MemberAction::Stage {
                place: place.clone(),
                name: name.map(str::to_owned),
                existing,
            },
        };
        let (temp, file) = match lease.execute(op)? {
            (Reply::Member(MemberReply::Staged { temp }), Some(file)) => (temp, file),
            _ => return Err(out_of_turn()),
        };
        let id = FileId::of(&file)?;
        let staged = StagedFile {
            project: project.map(str::to_owned),
            place,
            temp,
            dev: id.dev,
            ino: id.ino,
        };
        Ok(Staging {
            lease,
            sink: ByteSink::new(file),
            staged,
            placed: false,
        })
    }

    /// Where the bytes go.
    pub fn sink(&mut self) -> &mut ByteSink {
        &mut self.sink
    }

    /// Flushes the bytes and has the person place the file at `name` in `place` of the
    /// workspace (or `project`): a link planted at the target meanwhile is refused, and
    /// so is a temporary that is no longer the file written.
    pub fn commit(
        mut self,
        project: Option<&str>,
        place: PublicPlace,
        name: &str,
        existing: Existing,
    ) -> Result<Written, RequestError> {
        let written = self.sink.finish()?;
        let op = Op::Member {
            project: project.map(str::to_owned),
            action: MemberAction::Commit {
                staged: self.staged.clone(),
                place,
                name: name.to_owned(),
                existing,
            },
        };
        match self.lease.execute(op)? {
            (Reply::Member(MemberReply::Done), _) => {}
            _ => return Err(out_of_turn()),
        }
        self.placed = true;
        self.sink.settle();
        Ok(written)
    }
}

impl AsMut<ByteSink> for Staging {
    fn as_mut(&mut self) -> &mut ByteSink {
        &mut self.sink
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.placed {
            return;
        }
        let staged = &self.staged;
        discard(&mut self.lease, || Op::Member {
            project: staged.project.clone(),
            action: MemberAction::Discard {
                staged: staged.clone(),
            },
        });
    }
}

/// Removes a temporary with the operation `op` makes. A worker that died meanwhile is
/// replaced by a fresh one for the second try; should that fail too, nothing more can be
/// done here (listings hide the temporary) and the operator
/// hears of it.
pub(crate) fn discard(lease: &mut Lease, op: impl Fn() -> Op) {
    if let Err(first) = lease.execute(op())
        && let Err(again) = lease.execute(op())
    {
        eprintln!("ferry: a staged temporary could not be removed: {first}; again: {again}");
    }
}

/// The answer when the acting process replied with something other than asked for.
pub(crate) fn out_of_turn() -> RequestError {
    RequestError::new(
        Code::WorkerFailed,
        "the process acting as the person answered out of turn",
    )
}
