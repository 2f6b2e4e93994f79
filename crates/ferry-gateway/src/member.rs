//! How the member API acts in a workspace: the site checks the person and the project,
//! then the person's requester does the work (ferry-exec `member.rs`), in process in
//! local and container mode and in the person's own worker in host mode. One body for
//! every mode.

use std::fs::File;
use std::sync::Arc;

use ferry_exec::Staging;
use ferry_exec::member::{Existing, MemberAction, MemberReply};
use ferry_exec::ops::{Op, Reply};
use ferry_fs::Written;
use ferry_site::{AttachmentsState, AuditEntry, PublicPlace, Site, SiteError};

use crate::body::Filled;
use crate::{ApiError, AppState, blocking};

impl AppState {
    /// Runs `action` in the workspace (or `project`) of `person`, on this thread, which
    /// may block: the workspace is checked first, then the person acts.
    pub(crate) fn member_now(
        &self,
        person: &str,
        project: Option<&str>,
        action: MemberAction,
    ) -> Result<(MemberReply, Option<File>), ApiError> {
        let requester = self.member_toolbox(person, project)?.shared_requester();
        let op = Op::Member {
            project: project.map(str::to_owned),
            action,
        };
        match requester.execute(op).map_err(ApiError::from)? {
            (Reply::Member(reply), file) => Ok((reply, file)),
            _ => Err(out_of_turn()),
        }
    }

    /// [`AppState::member_now`] on a blocking thread.
    pub(crate) async fn member(
        &self,
        person: &str,
        project: Option<&str>,
        action: MemberAction,
    ) -> Result<(MemberReply, Option<File>), ApiError> {
        let (state, person, project) =
            (self.clone(), person.to_owned(), project.map(str::to_owned));
        blocking(move || state.member_now(&person, project.as_deref(), action)).await
    }

    /// The files directly in the `public/attachments/` of `person`'s workspace or `project`.
    pub(crate) fn attachments_now(
        &self,
        person: &str,
        project: Option<&str>,
    ) -> Result<AttachmentsState, ApiError> {
        let action = MemberAction::Attachments { unchanged: None };
        match self.member_now(person, project, action)? {
            (MemberReply::Attachments { files, .. }, _) => Ok(files.unwrap_or_default()),
            _ => Err(out_of_turn()),
        }
    }

    /// The tools of `person` (their requester, their quota), once the person and
    /// `project` are known to the site.
    pub(crate) fn member_toolbox(
        &self,
        person: &str,
        project: Option<&str>,
    ) -> Result<Arc<ferry_tools::Toolbox>, ApiError> {
        self.site.workspace(person, project)?;
        self.toolbox(person).map_err(ApiError::from_tool)
    }
}

/// Places a filled upload or delivery at `name` in `place` of the main workspace or
/// `project`, through the worker that staged it. `record`, when given, goes into the
/// audit trail on the same trip to the blocking pool, as the commit ended (its size and
/// sha256, or the code it failed with): one hand-off between threads fewer for each
/// upload.
pub(crate) async fn commit_filled(
    state: &AppState,
    filled: Filled<Staging>,
    project: Option<String>,
    place: PublicPlace,
    name: String,
    existing: Existing,
    record: Option<AuditEntry>,
) -> Result<Written, ApiError> {
    let site = state.site.clone();
    blocking(move || commit_now(&site, filled, project, place, &name, existing, record)).await
}

/// [`commit_filled`] on this thread, which may block.
pub(crate) fn commit_now(
    site: &Site,
    filled: Filled<Staging>,
    project: Option<String>,
    place: PublicPlace,
    name: &str,
    existing: Existing,
    record: Option<AuditEntry>,
) -> Result<Written, ApiError> {
    let committed = filled
        .complete()
        .map_err(|e| ApiError::from(SiteError::from(e)))
        .and_then(|staging| {
            staging
                .commit(project.as_deref(), place, name, existing)
                .map_err(ApiError::from)
        });
    if let Some(entry) = record {
        site.audit(&match &committed {
            Ok(written) => entry.bytes(written.size, Some(&written.sha256_hex())),
            Err(e) => entry.failed(e.code.as_str()),
        });
    }
    committed
}

/// The person's requester answered with a reply of another operation.
pub(crate) fn out_of_turn() -> ApiError {
    ApiError::internal("member", "an answer out of turn")
}
