//! A new file on its way into the person's folders without its bytes crossing the
//! worker's socket: the person makes the hidden temporary (so the person owns it), the
//! caller writes the bytes into its descriptor through a [`ByteSink`] (limit, quota,
//! sha256, writeback, fsync), and the same worker places it. Memory is flat in the size
//! of the file. Two kinds of place: a workspace's `public/` by the member rules
//! (member.rs), or a path the person's tools may write (staged_at.rs).

use ferry_codes::Code;
use std::sync::Arc;

use ferry_fs::{ByteSink, FileId, Written};
use ferry_site::PublicPlace;

use crate::member::{MemberAction, MemberReply, StagedFile};
use crate::ops::{Op, Reply};
use crate::{Lease, RequestError, Requester};

/// A temporary being filled; dropped unplaced, it is removed.
#[derive(Debug)]
pub struct Staging {
    lease: Lease,
    sink: ByteSink,
    spot: Spot,
    placed: bool,
}

/// Where the temporary lies.
#[derive(Debug)]
enum Spot {
    Member(StagedFile),
    At {
        path: String,
        temp: String,
        id: FileId,
    },
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
    ) -> Result<Staging, RequestError> {
        let mut lease = Lease::new(requester);
        let op = Op::Member {
            project: project.map(str::to_owned),
            action: MemberAction::Stage {
                place,
                name: name.map(str::to_owned),
            },
        };
        let (temp, file) = match lease.execute(op)? {
            (Reply::Member(MemberReply::Staged { temp }), Some(file)) => (temp, file),
            _ => return Err(out_of_turn()),
        };
        let id = FileId::of(&file)?;
        let spot = Spot::Member(StagedFile {
            project: project.map(str::to_owned),
            place,
            temp,
            dev: id.dev,
            ino: id.ino,
        });
        Ok(Staging::new(lease, file, spot))
    }

    /// Makes a temporary where `path` (a path the person's tools may write) will be.
    pub fn start_at(requester: Arc<Requester>, path: &str) -> Result<Staging, RequestError> {
        let mut lease = Lease::new(requester);
        let op = Op::StageAt {
            path: path.to_owned(),
        };
        let (temp, file) = match lease.execute(op)? {
            (Reply::StagedAt { temp }, Some(file)) => (temp, file),
            _ => return Err(out_of_turn()),
        };
        let id = FileId::of(&file)?;
        let spot = Spot::At {
            path: path.to_owned(),
            temp,
            id,
        };
        Ok(Staging::new(lease, file, spot))
    }

    fn new(lease: Lease, file: std::fs::File, spot: Spot) -> Staging {
        Staging {
            lease,
            sink: ByteSink::new(file),
            spot,
            placed: false,
        }
    }

    /// Where the bytes go.
    pub fn sink(&mut self) -> &mut ByteSink {
        &mut self.sink
    }

    /// Flushes the bytes and has the person place the file at `name` in `place` of the
    /// workspace (or `project`): a link planted at the target meanwhile is refused, and
    /// so is a temporary that is no longer the file written.
    pub fn commit(
        self,
        project: Option<&str>,
        place: PublicPlace,
        name: &str,
    ) -> Result<Written, RequestError> {
        let Spot::Member(staged) = &self.spot else {
            return Err(RequestError::new(
                Code::BadRequest,
                "a file staged at a path is placed at that path",
            ));
        };
        let op = Op::Member {
            project: project.map(str::to_owned),
            action: MemberAction::Commit {
                staged: staged.clone(),
                place,
                name: name.to_owned(),
            },
        };
        self.place(op, Reply::Member(MemberReply::Done))
    }

    /// Flushes the bytes and has the person place the file at the path it was staged for.
    pub fn commit_at(self) -> Result<Written, RequestError> {
        let Spot::At { path, temp, id } = &self.spot else {
            return Err(RequestError::new(
                Code::BadRequest,
                "a file staged in public/ is placed by the member rules",
            ));
        };
        let op = Op::PlaceAt {
            path: path.clone(),
            temp: temp.clone(),
            dev: id.dev,
            ino: id.ino,
        };
        self.place(op, Reply::Done)
    }

    fn place(mut self, op: Op, expected: Reply) -> Result<Written, RequestError> {
        let written = self.sink.finish()?;
        let (reply, _) = self.lease.execute(op)?;
        if std::mem::discriminant(&reply) != std::mem::discriminant(&expected) {
            return Err(out_of_turn());
        }
        self.placed = true;
        self.sink.settle();
        Ok(written)
    }

    fn discard_op(&self) -> Op {
        match &self.spot {
            Spot::Member(staged) => Op::Member {
                project: staged.project.clone(),
                action: MemberAction::Discard {
                    staged: staged.clone(),
                },
            },
            Spot::At { path, temp, .. } => Op::DiscardAt {
                path: path.clone(),
                temp: temp.clone(),
            },
        }
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
        // A worker that died meanwhile is replaced by a fresh one for the second try.
        if let Err(first) = self.lease.execute(self.discard_op())
            && let Err(again) = self.lease.execute(self.discard_op())
        {
            // Nothing more can be done here (listings hide the temporary); the operator
            // hears of it.
            eprintln!("ferry: a staged temporary could not be removed: {first}; again: {again}");
        }
    }
}

fn out_of_turn() -> RequestError {
    RequestError::new(
        Code::WorkerFailed,
        "the process acting as the person answered out of turn",
    )
}
