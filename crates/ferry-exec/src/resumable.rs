//! A resumable upload's staged file (spec members M-DAILY, tus 1.0): made by the person
//! in the workspace's `public/` ([`MemberAction::ResumableStage`]), filled part by part
//! here through its descriptor (the bytes never cross the worker's socket), found again
//! by its identity after a restart ([`MemberAction::ResumableReopen`]), and placed by
//! the person when the last byte is in ([`MemberAction::ResumablePlace`]). No worker is
//! held between parts: each step asks the person's requester afresh.

use ferry_fs::{FileId, PartFile};
use ferry_site::PublicPlace;

use crate::member::{Existing, MemberAction, MemberReply, StagedFile};
use crate::ops::{Op, Reply};
use crate::staging::out_of_turn;
use crate::{RequestError, Requester};

/// The staged file of one resumable upload, open.
#[derive(Debug)]
pub struct ResumableFile {
    staged: StagedFile,
    part: PartFile,
}

impl ResumableFile {
    /// Has the person check `folder` and `name` in the workspace (or `project`) and make
    /// the temporary.
    pub fn start(
        requester: &Requester,
        project: Option<&str>,
        folder: Option<&str>,
        name: &str,
        existing: Existing,
    ) -> Result<ResumableFile, RequestError> {
        let action = MemberAction::ResumableStage {
            folder: folder.map(str::to_owned),
            name: name.to_owned(),
            existing,
        };
        let (temp, file) = match requester.execute(member(project, action))? {
            (Reply::Member(MemberReply::Staged { temp }), Some(file)) => (temp, file),
            _ => return Err(out_of_turn()),
        };
        let id = FileId::of(&file)?;
        let staged = StagedFile {
            project: project.map(str::to_owned),
            place: PublicPlace::Public,
            temp,
            dev: id.dev,
            ino: id.ino,
        };
        Ok(ResumableFile {
            staged,
            part: PartFile::new(file),
        })
    }

    /// Has the person open `staged` again, only while it is still that file; its first
    /// `keep` bytes at most are kept and hashed again.
    pub fn reopen(
        requester: &Requester,
        staged: StagedFile,
        keep: u64,
    ) -> Result<ResumableFile, RequestError> {
        let action = MemberAction::ResumableReopen {
            staged: staged.clone(),
        };
        let file = match requester.execute(member(staged.project.as_deref(), action))? {
            (Reply::Member(MemberReply::Done), Some(file)) => file,
            _ => return Err(out_of_turn()),
        };
        Ok(ResumableFile {
            staged,
            part: PartFile::reopen(file, keep)?,
        })
    }

    /// Which temporary this is.
    pub fn staged(&self) -> &StagedFile {
        &self.staged
    }

    /// The bytes.
    pub fn part(&mut self) -> &mut PartFile {
        &mut self.part
    }

    /// Bytes in the file.
    pub fn size(&self) -> u64 {
        self.part.size()
    }

    /// Makes the bytes durable and has the person place the file at `name` in `folder`.
    pub fn place(
        &mut self,
        requester: &Requester,
        folder: Option<&str>,
        name: &str,
        existing: Existing,
    ) -> Result<[u8; 32], RequestError> {
        self.part.sync()?;
        let action = MemberAction::ResumablePlace {
            staged: self.staged.clone(),
            folder: folder.map(str::to_owned),
            name: name.to_owned(),
            existing,
        };
        match requester.execute(member(self.staged.project.as_deref(), action))? {
            (Reply::Member(MemberReply::Done), _) => Ok(self.part.sha256()),
            _ => Err(out_of_turn()),
        }
    }
}

/// Has the person remove the temporary `staged` (one already gone is fine).
pub fn discard(requester: &Requester, staged: &StagedFile) -> Result<(), RequestError> {
    let action = MemberAction::Discard {
        staged: staged.clone(),
    };
    match requester.execute(member(staged.project.as_deref(), action))? {
        (Reply::Member(MemberReply::Done), _) => Ok(()),
        _ => Err(out_of_turn()),
    }
}

fn member(project: Option<&str>, action: MemberAction) -> Op {
    Op::Member {
        project: project.map(str::to_owned),
        action,
    }
}
