//! The person in the loop (spec tools T-WS `file_delete` and `file_pick`): an agent tool
//! asks the person to approve a deletion or to pick a file on their own computer, and the
//! person answers in the web client.
//!
//! The requester may be the gateway itself (MCP over HTTP) or a separate `ferry mcp`
//! process on the same data dir, so the metadata database is the rendezvous: the
//! requester inserts a row and polls it; the gateway shows the pending rows to the
//! person's open pages and records the answer in the row. Every change of state is one
//! conditional `UPDATE`, so two parties racing (an answer and a timeout, two uploads
//! through one link) cannot both win.

mod approvals;
mod links;
pub(crate) use links::HmacSha256;
mod picks;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::db::{Exec, params};
use ferry_codes::Code;
use ferry_config::limits::INTERACTION_TEXT_MAX_BYTES;

use crate::{Site, SiteError};

pub use approvals::ApprovalOutcome;
pub use picks::{ClaimedPick, PickArrival, PickOutcome, PickRequest, PutInPlace};

/// The person counts as reachable in the web client for this long after the gateway last
/// saw one of their pages' event streams.
pub const WEB_PRESENCE_TTL: Duration = Duration::from_secs(15);
/// How often the gateway renews the presence of a person with a page open; well inside
/// [`WEB_PRESENCE_TTL`], so a page that stays open never lapses.
pub const WEB_PRESENCE_TOUCH_INTERVAL: Duration = Duration::from_secs(5);
/// How often a waiting requester looks at its row.
pub const INTERACTION_POLL_INTERVAL: Duration = Duration::from_millis(200);

const _: () = assert!(WEB_PRESENCE_TOUCH_INTERVAL.as_secs() * 2 < WEB_PRESENCE_TTL.as_secs());

/// Random characters after an id's kind prefix: 16 base32 characters, 80 bits.
const ID_RANDOM_BYTES: usize = 10;
const ID_RANDOM_CHARS: usize = 16;
const APPROVAL_ID_PREFIX: &str = "ap_";
const PICK_ID_PREFIX: &str = "pk_";

/// The tables of this module, run at open with the others.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS interactions (
    id TEXT PRIMARY KEY,
    person TEXT NOT NULL REFERENCES persons(id),
    -- 'approval' or 'pick'
    kind TEXT NOT NULL,
    -- pending, then approved|denied|expired (approvals) or receiving, arrived|cancelled|expired (picks)
    state TEXT NOT NULL,
    tool TEXT NOT NULL DEFAULT '',
    subject TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '',
    prompt TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL,
    -- pending until then: the waiter's deadline, and for a pick its link's expiry
    expires_ms INTEGER NOT NULL,
    answered_ms INTEGER,
    file_name TEXT,
    file_expires_ms INTEGER
);
CREATE INDEX IF NOT EXISTS interactions_by_person ON interactions (person, state);
CREATE TABLE IF NOT EXISTS web_presence (
    person TEXT PRIMARY KEY REFERENCES persons(id),
    seen_ms INTEGER NOT NULL
);
";

/// Why a request could not be made, answered or uploaded to.
#[derive(Debug, thiserror::Error)]
pub enum InteractionError {
    /// No such request of this person (or not one that is waiting).
    #[error("there is no request {0:?} waiting for you")]
    Unknown(String),
    /// Answered before.
    #[error("this request was already answered")]
    AlreadyAnswered,
    /// The waiter stopped waiting.
    #[error("this request has expired: the agent stopped waiting for an answer")]
    Expired,
    /// The pick's file arrived already.
    #[error("this upload link was already used: the file has arrived")]
    LinkUsed,
    /// The pick's link is past its expiry.
    #[error("this upload link has expired: ask the agent for a new one")]
    LinkExpired,
    /// The pick was cancelled.
    #[error("this request was cancelled, so its upload link no longer works")]
    LinkCancelled,
    /// The link's signature does not match.
    #[error("this upload link is not valid: open the link the page shows, unchanged")]
    BadSignature,
    /// Another upload holds the link.
    #[error("a file is being uploaded through this link right now; wait for it to finish")]
    UploadInProgress,
    /// A text of the request is empty or too long.
    #[error("the {field} {problem}")]
    InvalidText {
        /// Which text.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl InteractionError {
    /// The code this failure is answered with.
    pub fn code(&self) -> Code {
        match self {
            InteractionError::Unknown(_) => Code::UnknownInteraction,
            InteractionError::AlreadyAnswered => Code::AlreadyAnswered,
            InteractionError::UploadInProgress => Code::UploadInProgress,
            InteractionError::Expired => Code::Expired,
            InteractionError::LinkUsed => Code::LinkUsed,
            InteractionError::LinkExpired => Code::LinkExpired,
            InteractionError::LinkCancelled => Code::LinkCancelled,
            InteractionError::BadSignature => Code::BadSignature,
            InteractionError::InvalidText { .. } => Code::InvalidRequest,
        }
    }
}

/// One request the person has not answered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interaction {
    /// The request's id (`ap_…` or `pk_…`).
    pub id: String,
    /// What is asked.
    pub kind: InteractionKind,
    /// When the request stops being answerable.
    pub expires: SystemTime,
}

/// What is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InteractionKind {
    /// May the agent's `tool` do what `summary` says to `subject` (for example a path)?
    Approval {
        /// The tool that asks.
        tool: String,
        /// What it acts on, for example the path to delete.
        subject: String,
        /// The sentence the person reads.
        summary: String,
    },
    /// The agent asks for a file, saying why in `prompt`.
    Pick {
        /// Which file, and why.
        prompt: String,
    },
}

/// The states a row goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Receiving,
    Approved,
    Denied,
    Arrived,
    Cancelled,
    Expired,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Receiving => "receiving",
            State::Approved => "approved",
            State::Denied => "denied",
            State::Arrived => "arrived",
            State::Cancelled => "cancelled",
            State::Expired => "expired",
        }
    }

    fn parse(s: &str) -> Option<State> {
        Some(match s {
            "pending" => State::Pending,
            "receiving" => State::Receiving,
            "approved" => State::Approved,
            "denied" => State::Denied,
            "arrived" => State::Arrived,
            "cancelled" => State::Cancelled,
            "expired" => State::Expired,
            _ => return None,
        })
    }
}

/// What the waiters and the answering functions read of a row.
struct Row {
    person: String,
    state: State,
    expires_ms: i64,
    file_name: Option<String>,
    file_expires_ms: Option<i64>,
}

const KIND_APPROVAL: &str = "approval";
const KIND_PICK: &str = "pick";

/// Milliseconds since the Unix epoch (negative before it, saturating far away).
fn millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

fn from_millis(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Whether `id` has the shape of an approval's (`ap_…`) or a pick's (`pk_…`) id: checked
/// before an id from a URL is looked up or becomes a folder name.
pub fn is_interaction_id(id: &str) -> bool {
    let random = id
        .strip_prefix(APPROVAL_ID_PREFIX)
        .or_else(|| id.strip_prefix(PICK_ID_PREFIX));
    random.is_some_and(|r| {
        r.len() == ID_RANDOM_CHARS
            && r.bytes()
                .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
    })
}

fn new_id(prefix: &str) -> Result<String, SiteError> {
    Ok(format!(
        "{prefix}{}",
        ferry_fs::random_base32::<ID_RANDOM_BYTES>()
    ))
}

/// Refuses text that is empty (when `required`) or longer than [`INTERACTION_TEXT_MAX_BYTES`].
fn check_text(field: &'static str, value: &str, required: bool) -> Result<(), InteractionError> {
    if required && value.trim().is_empty() {
        return Err(InteractionError::InvalidText {
            field,
            problem: "is empty".to_owned(),
        });
    }
    if value.len() > INTERACTION_TEXT_MAX_BYTES {
        return Err(InteractionError::InvalidText {
            field,
            problem: format!("is longer than {INTERACTION_TEXT_MAX_BYTES} bytes"),
        });
    }
    Ok(())
}

impl Site {
    // ------------------------------------------------------------------ presence

    /// Records that `person` has a page of the web client open now.
    pub fn touch_presence(&self, person: &str) -> Result<(), SiteError> {
        self.touch_presence_at(person, SystemTime::now())
    }

    /// [`Site::touch_presence`] with an explicit clock.
    pub fn touch_presence_at(&self, person: &str, at: SystemTime) -> Result<(), SiteError> {
        self.require_person(person)?;
        self.db.execute(
            "INSERT INTO web_presence (person, seen_ms) VALUES (?1, ?2)
             ON CONFLICT (person) DO UPDATE SET seen_ms = CASE
                 WHEN excluded.seen_ms > web_presence.seen_ms THEN excluded.seen_ms
                 ELSE web_presence.seen_ms END",
            params![person, millis(at)],
        )?;
        Ok(())
    }

    /// When the gateway last saw a page of `person`'s open, if ever.
    pub fn last_seen_on_web(&self, person: &str) -> Result<Option<SystemTime>, SiteError> {
        let seen: Option<i64> = self.db.row(
            "SELECT seen_ms FROM web_presence WHERE person = ?1",
            params![person],
            |r| r.get(0),
        )?;
        Ok(seen.map(from_millis))
    }

    /// Whether `person` can be asked in the web client now: a page of theirs was seen
    /// within [`WEB_PRESENCE_TTL`].
    pub fn web_channel_open(&self, person: &str) -> Result<bool, SiteError> {
        self.web_channel_open_at(person, SystemTime::now())
    }

    /// [`Site::web_channel_open`] with an explicit clock.
    pub fn web_channel_open_at(&self, person: &str, now: SystemTime) -> Result<bool, SiteError> {
        Ok(self
            .last_seen_on_web(person)?
            .is_some_and(|seen| millis(now) - millis(seen) <= duration_ms(WEB_PRESENCE_TTL)))
    }

    /// Everything `person` has not answered yet and can still answer, oldest first.
    pub fn pending_interactions(&self, person: &str) -> Result<Vec<Interaction>, SiteError> {
        self.db.rows(
            "SELECT id, kind, tool, subject, summary, prompt, expires_ms FROM interactions
             WHERE person = ?1 AND state = ?2 AND expires_ms > ?3
             ORDER BY created_ms, seq, id",
            params![person, State::Pending.as_str(), millis(SystemTime::now())],
            |r| {
                let kind: String = r.get(1)?;
                let kind = match kind.as_str() {
                    KIND_APPROVAL => InteractionKind::Approval {
                        tool: r.get(2)?,
                        subject: r.get(3)?,
                        summary: r.get(4)?,
                    },
                    _ => InteractionKind::Pick { prompt: r.get(5)? },
                };
                Ok(Interaction {
                    id: r.get(0)?,
                    kind,
                    expires: from_millis(r.get(6)?),
                })
            },
        )
    }

    // ------------------------------------------------------------------ shared

    /// Polls row `id` of `kind` until `outcome` reads an end in it or `timeout` passes;
    /// the deadline is written into the row first, so the person sees when it ends.
    fn wait_for<T>(
        &self,
        id: &str,
        kind: &str,
        timeout: Duration,
        outcome: impl Fn(&Row) -> Option<T>,
    ) -> Result<T, SiteError> {
        let deadline_ms = millis(SystemTime::now()).saturating_add(duration_ms(timeout));
        self.db.execute(
            "UPDATE interactions
             SET expires_ms = CASE WHEN ?1 < expires_ms THEN ?1 ELSE expires_ms END
             WHERE id = ?2 AND kind = ?3 AND state = ?4",
            params![deadline_ms, id, kind, State::Pending.as_str()],
        )?;
        loop {
            let row = self
                .row_of(id, kind)?
                .ok_or_else(|| InteractionError::Unknown(id.to_owned()))?;
            if let Some(done) = outcome(&row) {
                return Ok(done);
            }
            let now_ms = millis(SystemTime::now());
            if now_ms >= deadline_ms {
                // Also an upload under way: the waiter is gone, so its file would be lost.
                self.expire(id, &[State::Pending, State::Receiving])?;
                continue;
            }
            if row.state == State::Pending && now_ms >= row.expires_ms {
                self.expire(id, &[State::Pending])?;
                continue;
            }
            let left = Duration::from_millis((deadline_ms - now_ms).unsigned_abs());
            std::thread::sleep(INTERACTION_POLL_INTERVAL.min(left));
        }
    }

    /// Why `person` could not answer request `id` of `kind`: another's or unknown, past its
    /// time (which the row is then marked as), or answered already.
    fn why_unanswerable(&self, person: &str, id: &str, kind: &str) -> SiteError {
        let row = match self.row_of(id, kind) {
            Ok(row) => row.filter(|row| row.person == person),
            Err(e) => return e,
        };
        let Some(row) = row else {
            return InteractionError::Unknown(id.to_owned()).into();
        };
        match row.state {
            State::Pending | State::Expired => match self.expire(id, &[State::Pending]) {
                Ok(()) => InteractionError::Expired.into(),
                Err(e) => e,
            },
            _ => InteractionError::AlreadyAnswered.into(),
        }
    }

    /// Marks `id` expired if it is in one of `from`; a row that has moved on meanwhile
    /// keeps its newer state.
    fn expire(&self, id: &str, from: &[State]) -> Result<(), SiteError> {
        let now = millis(SystemTime::now());
        for state in from {
            self.db.execute(
                "UPDATE interactions SET state = ?1, answered_ms = ?2 WHERE id = ?3 AND state = ?4",
                params![State::Expired.as_str(), now, id, state.as_str()],
            )?;
        }
        Ok(())
    }

    fn row_of(&self, id: &str, kind: &str) -> Result<Option<Row>, SiteError> {
        let row = self.db.row(
            "SELECT person, state, expires_ms, file_name, file_expires_ms FROM interactions
             WHERE id = ?1 AND kind = ?2",
            params![id, kind],
            |r| {
                Ok::<_, SiteError>((
                    r.get::<String>(0)?,
                    r.get::<String>(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                ))
            },
        )?;
        Ok(row.map(
            |(person, state, expires_ms, file_name, file_expires_ms)| Row {
                person,
                // A state this version does not know: treat it as over.
                state: State::parse(&state).unwrap_or(State::Expired),
                expires_ms,
                file_name,
                file_expires_ms,
            },
        ))
    }
}

#[cfg(test)]
mod tests;
