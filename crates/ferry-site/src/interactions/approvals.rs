//! Approvals: may the agent's tool do this? The person answers yes or no, once.

use std::time::{Duration, SystemTime};

use ferry_config::limits::APPROVAL_MAX_WAIT;

use super::{APPROVAL_ID_PREFIX, KIND_APPROVAL, State, check_text, duration_ms, millis, new_id};
use crate::db::{Exec, params};
use crate::{Site, SiteError};

/// How a wait for an approval ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// The person said yes.
    Approved,
    /// The person said no.
    Denied,
    /// Nobody answered in time; the request is expired and a late answer is refused.
    TimedOut,
}

impl Site {
    // ------------------------------------------------------------------ approvals

    /// Asks `person` whether the agent's `tool` may act on `subject` (for example the path
    /// to delete); `summary` is the sentence the person reads. Returns the request's id
    /// for [`Site::wait_for_approval`].
    pub fn request_approval(
        &self,
        person: &str,
        tool: &str,
        subject: &str,
        summary: &str,
    ) -> Result<String, SiteError> {
        check_text("tool", tool, true)?;
        check_text("subject", subject, true)?;
        check_text("summary", summary, false)?;
        self.require_person(person)?;
        let id = new_id(APPROVAL_ID_PREFIX)?;
        let now = millis(SystemTime::now());
        self.db.execute(
            &format!(
                "INSERT INTO interactions
                     (id, person, kind, state, tool, subject, summary, created_ms, expires_ms, seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, {})",
                crate::db::next_seq("interactions")
            ),
            params![
                id,
                person,
                KIND_APPROVAL,
                State::Pending.as_str(),
                tool,
                subject,
                summary,
                now,
                now.saturating_add(duration_ms(APPROVAL_MAX_WAIT)),
            ],
        )?;
        Ok(id)
    }

    /// Waits (blocking, polling the database) until the person answers the approval `id`
    /// or `timeout` passes; a timeout expires the request, so a late answer is refused.
    pub fn wait_for_approval(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<ApprovalOutcome, SiteError> {
        self.wait_for(id, KIND_APPROVAL, timeout, |row| match row.state {
            State::Approved => Some(ApprovalOutcome::Approved),
            State::Denied => Some(ApprovalOutcome::Denied),
            State::Expired => Some(ApprovalOutcome::TimedOut),
            _ => None,
        })
    }

    /// Records `person`'s answer to the approval `id`. Only the person asked may answer,
    /// and only once, before the request expires.
    pub fn answer_approval(&self, person: &str, id: &str, approve: bool) -> Result<(), SiteError> {
        let answer = if approve {
            State::Approved
        } else {
            State::Denied
        };
        let now = millis(SystemTime::now());
        let changed = self.db.execute(
            "UPDATE interactions SET state = ?1, answered_ms = ?2
             WHERE id = ?3 AND person = ?4 AND kind = ?5 AND state = ?6 AND expires_ms > ?2",
            params![
                answer.as_str(),
                now,
                id,
                person,
                KIND_APPROVAL,
                State::Pending.as_str()
            ],
        )?;
        if changed == 1 {
            return Ok(());
        }
        Err(self.why_unanswerable(person, id, KIND_APPROVAL))
    }
}
