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

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_fs::{AtomicWriter, Follow, FsError, safe_name};
use hmac::{Hmac, Mac};
use rusqlite::params;
use sha2::Sha256;

use crate::site::SERVICE_DIR;
use crate::{Site, SiteError, SiteMode};

/// The person counts as reachable in the web client for this long after the gateway last
/// saw one of their pages' event streams.
pub const WEB_PRESENCE_TTL: Duration = Duration::from_secs(15);
/// How often the gateway renews the presence of a person with a page open; well inside
/// [`WEB_PRESENCE_TTL`], so a page that stays open never lapses.
pub const WEB_PRESENCE_TOUCH_INTERVAL: Duration = Duration::from_secs(5);
/// How often a waiting requester looks at its row.
pub const INTERACTION_POLL_INTERVAL: Duration = Duration::from_millis(200);
/// The longest an approval stays pending, whatever a waiter asks for, so a requester
/// that died leaves no question on the person's screen for longer.
pub const APPROVAL_MAX_WAIT: Duration = Duration::from_secs(10 * 60);
/// How long a pick's signed upload link is valid.
pub const PICK_LINK_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a picked file is kept before [`Site::sweep_picks`] removes it.
pub const PICK_FILE_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a finished request stays on record: longer than any picked file lives, so a
/// file on disk always has its row.
pub const INTERACTION_RECORD_TTL: Duration = Duration::from_secs(2 * 24 * 60 * 60);
/// The longest text of a request (the tool's name, the subject, the summary, the prompt),
/// in bytes.
pub const INTERACTION_TEXT_MAX_BYTES: usize = 4096;

const _: () = assert!(WEB_PRESENCE_TOUCH_INTERVAL.as_secs() * 2 < WEB_PRESENCE_TTL.as_secs());
const _: () = assert!(
    INTERACTION_RECORD_TTL.as_secs()
        > PICK_FILE_TTL.as_secs() + PICK_LINK_TTL.as_secs() + APPROVAL_MAX_WAIT.as_secs()
);

/// Picked files live in `private/people/<person>/` + this + `/<pick id>/<name>`.
const PICKS_DIR: &str = "tmp/picks";
/// The per-site key that signs pick links, in the service dir.
const PICK_LINK_KEY_FILE: &str = "pick-link.key";
const PICK_LINK_KEY_BYTES: usize = 32;
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
    #[error("there is no request {0:?} waiting for you")]
    Unknown(String),
    #[error("this request was already answered")]
    AlreadyAnswered,
    #[error("this request has expired: the agent stopped waiting for an answer")]
    Expired,
    #[error("this upload link was already used: the file has arrived")]
    LinkUsed,
    #[error("this upload link has expired: ask the agent for a new one")]
    LinkExpired,
    #[error("this request was cancelled, so its upload link no longer works")]
    LinkCancelled,
    #[error("this upload link is not valid: open the link the page shows, unchanged")]
    BadSignature,
    #[error("a file is being uploaded through this link right now; wait for it to finish")]
    UploadInProgress,
    #[error("the {field} {problem}")]
    InvalidText {
        field: &'static str,
        problem: String,
    },
}

/// How a wait for an approval ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    Approved,
    Denied,
    /// Nobody answered in time; the request is expired and a late answer is refused.
    TimedOut,
}

/// A pick just asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickRequest {
    pub id: String,
    /// Until when the person may upload (whole seconds).
    pub link_expires: SystemTime,
}

/// How a wait for a pick ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PickOutcome {
    /// The file is at `path` (absolute) until `expires`, when it is swept away.
    Arrived { path: PathBuf, expires: SystemTime },
    /// The person declined.
    Cancelled,
    /// Nothing arrived before the link expired or the waiter gave up.
    Expired,
}

/// One request the person has not answered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interaction {
    pub id: String,
    pub kind: InteractionKind,
    /// When the request stops being answerable.
    pub expires: SystemTime,
}

/// What is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InteractionKind {
    /// May the agent's `tool` do what `summary` says to `subject` (for example a path)?
    Approval {
        tool: String,
        subject: String,
        summary: String,
    },
    /// The agent asks for a file, saying why in `prompt`.
    Pick { prompt: String },
}

/// A pick whose link an upload holds: only this upload can complete it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedPick {
    id: String,
    person: String,
}

impl ClaimedPick {
    /// The pick's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The person who was asked.
    pub fn person(&self) -> &str {
        &self.person
    }
}

/// A picked file, in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickArrival {
    pub id: String,
    /// The safe name (C-NAME) the file was stored under.
    pub name: String,
    pub size: u64,
    pub sha256: String,
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

/// The message a pick link signs: the pick and the link's expiry, nothing a client chose.
fn link_message(id: &str, expires_secs: u64) -> String {
    format!("ferry pick upload\n{id}\n{expires_secs}")
}

type HmacSha256 = Hmac<Sha256>;

impl Site {
    // ------------------------------------------------------------------ presence

    /// Records that `person` has a page of the web client open now.
    pub fn touch_presence(&self, person: &str) -> Result<(), SiteError> {
        self.touch_presence_at(person, SystemTime::now())
    }

    /// [`Site::touch_presence`] with an explicit clock.
    pub fn touch_presence_at(&self, person: &str, at: SystemTime) -> Result<(), SiteError> {
        self.require_person(person)?;
        self.db.conn().execute(
            "INSERT INTO web_presence (person, seen_ms) VALUES (?1, ?2)
             ON CONFLICT (person) DO UPDATE SET seen_ms = MAX(seen_ms, excluded.seen_ms)",
            params![person, millis(at)],
        )?;
        Ok(())
    }

    /// When the gateway last saw a page of `person`'s open, if ever.
    pub fn last_seen_on_web(&self, person: &str) -> Result<Option<SystemTime>, SiteError> {
        let seen: Option<i64> = self.db.row(
            "SELECT seen_ms FROM web_presence WHERE person = ?1",
            [person],
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
        self.db.conn().execute(
            "INSERT INTO interactions
                 (id, person, kind, state, tool, subject, summary, created_ms, expires_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        let changed = self.db.conn().execute(
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

    // ------------------------------------------------------------------ picks

    /// Asks `person` to pick a file on their computer; `prompt` says which and why. The
    /// file arrives through a signed link (see [`Site::pick_link`]) valid for
    /// [`PICK_LINK_TTL`].
    pub fn request_pick(&self, person: &str, prompt: &str) -> Result<PickRequest, SiteError> {
        check_text("prompt", prompt, true)?;
        self.require_person(person)?;
        let id = new_id(PICK_ID_PREFIX)?;
        let now = SystemTime::now();
        // Whole seconds: the link carries its expiry in seconds, and both must agree.
        let link_expires_secs = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .saturating_add(PICK_LINK_TTL.as_secs());
        let link_expires = UNIX_EPOCH + Duration::from_secs(link_expires_secs);
        self.db.conn().execute(
            "INSERT INTO interactions (id, person, kind, state, prompt, created_ms, expires_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id,
                person,
                KIND_PICK,
                State::Pending.as_str(),
                prompt,
                millis(now),
                millis(link_expires),
            ],
        )?;
        Ok(PickRequest { id, link_expires })
    }

    /// Waits (blocking, polling the database) until the file of pick `id` arrives, the
    /// person cancels, the link expires, or `timeout` passes (which expires the link).
    /// An upload under way when the link expires may still finish.
    pub fn wait_for_pick(&self, id: &str, timeout: Duration) -> Result<PickOutcome, SiteError> {
        self.wait_for(id, KIND_PICK, timeout, |row| match row.state {
            State::Arrived => Some(match (&row.file_name, row.file_expires_ms) {
                (Some(name), Some(expires_ms)) => {
                    match self.pick_file_path(&row.person, id, name) {
                        Ok(path) => Ok(PickOutcome::Arrived {
                            path,
                            expires: from_millis(expires_ms),
                        }),
                        Err(e) => Err(e),
                    }
                }
                // Arrived rows always carry both; a row edited by hand counts as nothing.
                _ => Ok(PickOutcome::Expired),
            }),
            State::Cancelled => Some(Ok(PickOutcome::Cancelled)),
            State::Expired => Some(Ok(PickOutcome::Expired)),
            _ => None,
        })?
    }

    /// `person` declines the pick `id` (also while their upload runs: that upload then fails).
    pub fn cancel_pick(&self, person: &str, id: &str) -> Result<(), SiteError> {
        let now = millis(SystemTime::now());
        let changed = self.db.conn().execute(
            "UPDATE interactions SET state = ?1, answered_ms = ?2
             WHERE id = ?3 AND person = ?4 AND kind = ?5
               AND (state = ?6 OR (state = ?7 AND expires_ms > ?2))",
            params![
                State::Cancelled.as_str(),
                now,
                id,
                person,
                KIND_PICK,
                State::Receiving.as_str(),
                State::Pending.as_str(),
            ],
        )?;
        if changed == 1 {
            return Ok(());
        }
        Err(self.why_unanswerable(person, id, KIND_PICK))
    }

    /// Everything `person` has not answered yet and can still answer, oldest first.
    pub fn pending_interactions(&self, person: &str) -> Result<Vec<Interaction>, SiteError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, kind, tool, subject, summary, prompt, expires_ms FROM interactions
             WHERE person = ?1 AND state = ?2 AND expires_ms > ?3
             ORDER BY created_ms, rowid",
        )?;
        let rows = stmt.query_map(
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
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    // ------------------------------------------------------------------ pick links

    /// The upload link of pick `id`, valid until `expires` (cut to whole seconds, rounded
    /// up): `/v1/picks/<id>/upload?expires=<unix seconds>&sig=<hex HMAC-SHA256>`.
    pub fn pick_link(&self, id: &str, expires: SystemTime) -> Result<String, SiteError> {
        let expires_secs = u64::try_from(millis(expires).max(0))
            .unwrap_or(0)
            .div_ceil(1000);
        let mut mac = self.link_mac()?;
        mac.update(link_message(id, expires_secs).as_bytes());
        let sig = data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes());
        Ok(format!(
            "/v1/picks/{id}/upload?expires={expires_secs}&sig={sig}"
        ))
    }

    /// Checks a link's `expires` and `sig` as a client presented them: a signature that
    /// does not match is [`InteractionError::BadSignature`], a link past its expiry
    /// [`InteractionError::LinkExpired`]. Says nothing of the pick's state.
    pub fn check_pick_link(&self, id: &str, expires: &str, sig: &str) -> Result<(), SiteError> {
        self.check_pick_link_at(id, expires, sig, SystemTime::now())
    }

    /// [`Site::check_pick_link`] with an explicit clock.
    pub fn check_pick_link_at(
        &self,
        id: &str,
        expires: &str,
        sig: &str,
        now: SystemTime,
    ) -> Result<(), SiteError> {
        let bad = || SiteError::from(InteractionError::BadSignature);
        // Plain digits only: no sign, no spaces, no second spelling of the same number.
        let well_formed = !expires.is_empty()
            && expires.bytes().all(|b| b.is_ascii_digit())
            && (expires == "0" || !expires.starts_with('0'));
        let expires_secs: u64 = match expires.parse() {
            Ok(secs) if well_formed => secs,
            _ => return Err(bad()),
        };
        let sig = data_encoding::HEXLOWER
            .decode(sig.as_bytes())
            .map_err(|_| bad())?;
        let mut mac = self.link_mac()?;
        mac.update(link_message(id, expires_secs).as_bytes());
        mac.verify_slice(&sig).map_err(|_| bad())?;
        let expires_ms = i64::try_from(expires_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        if millis(now) >= expires_ms {
            return Err(InteractionError::LinkExpired.into());
        }
        Ok(())
    }

    /// An HMAC keyed with the site's link key.
    fn link_mac(&self) -> Result<HmacSha256, SiteError> {
        let key = self.link_key()?;
        // HMAC takes a key of any length; this cannot fail.
        HmacSha256::new_from_slice(&key).map_err(|e| std::io::Error::other(e.to_string()).into())
    }

    /// The site's link key, made on first use: random, 0600, in the service dir. A new key
    /// is published with a hard link, which never replaces an existing file, so two
    /// processes making one at once end up with the same key.
    fn link_key(&self) -> Result<[u8; PICK_LINK_KEY_BYTES], SiteError> {
        if let Some(key) = self.read_link_key()? {
            return Ok(key);
        }
        let service = self.path().join(SERVICE_DIR);
        let mut key = [0u8; PICK_LINK_KEY_BYTES];
        getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
        let temp = service.join(format!("{}{}", ferry_fs::TEMP_PREFIX, new_id("")?));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(&key)?;
            file.sync_all()?;
            match std::fs::hard_link(&temp, service.join(PICK_LINK_KEY_FILE)) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
                _ => Ok(()),
            }
        })();
        let _ = std::fs::remove_file(&temp);
        written?;
        self.read_link_key()?
            .ok_or_else(|| std::io::Error::other("the pick link key vanished").into())
    }

    fn read_link_key(&self) -> Result<Option<[u8; PICK_LINK_KEY_BYTES]>, SiteError> {
        let service = self.root().open_dir(SERVICE_DIR, Follow::Never)?;
        let mut file = match service.open_file(PICK_LINK_KEY_FILE, Follow::Never) {
            Ok(file) => file,
            Err(FsError::NotFound) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut key = [0u8; PICK_LINK_KEY_BYTES];
        let mut extra = [0u8; 1];
        file.read_exact(&mut key)?;
        if file.read(&mut extra)? != 0 {
            return Err(std::io::Error::other(format!(
                "{SERVICE_DIR}/{PICK_LINK_KEY_FILE} is not a {PICK_LINK_KEY_BYTES}-byte key; \
                 remove it and a new one is made (open upload links stop working)"
            ))
            .into());
        }
        Ok(Some(key))
    }

    // ------------------------------------------------------------------ pick uploads

    /// Takes pick `id`'s link for one upload: the link must still be pending. Until
    /// [`Site::finish_pick`] or [`Site::release_pick`], a second upload is refused with
    /// [`InteractionError::UploadInProgress`], and waiters keep waiting past the link's
    /// expiry.
    pub fn claim_pick(&self, id: &str) -> Result<ClaimedPick, SiteError> {
        // The id names a folder once claimed: only the shape this module makes.
        if !is_interaction_id(id) {
            return Err(InteractionError::Unknown(id.to_owned()).into());
        }
        let changed = self.db.conn().execute(
            "UPDATE interactions SET state = ?1
             WHERE id = ?2 AND kind = ?3 AND state = ?4 AND expires_ms > ?5",
            params![
                State::Receiving.as_str(),
                id,
                KIND_PICK,
                State::Pending.as_str(),
                millis(SystemTime::now()),
            ],
        )?;
        let row = self
            .row_of(id, KIND_PICK)?
            .ok_or_else(|| InteractionError::Unknown(id.to_owned()))?;
        if changed == 1 {
            return Ok(ClaimedPick {
                id: id.to_owned(),
                person: row.person,
            });
        }
        Err(match row.state {
            State::Receiving => InteractionError::UploadInProgress,
            State::Arrived => InteractionError::LinkUsed,
            State::Cancelled => InteractionError::LinkCancelled,
            _ => {
                self.expire(id, &[State::Pending])?;
                InteractionError::LinkExpired
            }
        }
        .into())
    }

    /// The largest file a pick accepts: the member upload cap (`media.max_upload_bytes`).
    pub fn pick_max_bytes(&self) -> u64 {
        self.config().media.max_upload_bytes
    }

    /// Starts writing the picked file, named `raw_name` made safe (C-NAME), at
    /// `private/people/<person>/tmp/picks/<id>/<name>`: through confined handles, capped
    /// at [`Site::pick_max_bytes`], owned by the agent in container mode. The one place
    /// that writes a picked file, so another way of writing can replace it.
    pub fn pick_writer(
        &self,
        claim: &ClaimedPick,
        raw_name: &str,
    ) -> Result<(AtomicWriter, String), SiteError> {
        let name = safe_name(raw_name)?;
        let owner = self.config().agent_ids(&claim.person);
        // In host mode the service cannot enter the person's folders: the file is staged
        // in the service's own folder and placed as the person (`finish_pick_with`).
        let rel = match self.mode() {
            SiteMode::Host => staging_dir_rel(&claim.id),
            _ => pick_dir_rel(&claim.person, &claim.id),
        };
        let dir = self.make_dir(&rel, 0o700, owner)?;
        let writer = AtomicWriter::create(&dir, &name)?
            .limit(self.pick_max_bytes())
            .owner(owner);
        Ok((writer, name))
    }

    /// Puts the picked file in place and marks the pick arrived, for [`PICK_FILE_TTL`].
    /// Refused, with nothing kept, when the person cancelled or the waiter gave up meanwhile.
    /// Not for host mode, where the file must be placed as the person: see
    /// [`Site::finish_pick_with`].
    pub fn finish_pick(
        &self,
        claim: &ClaimedPick,
        writer: AtomicWriter,
        name: &str,
    ) -> Result<PickArrival, SiteError> {
        self.finish_pick_with(claim, writer, name, &|_, _| {
            Err("host mode places picked files as the person".to_owned())
        })
    }

    /// [`Site::finish_pick`], where in host mode `place(staged, destination)` copies the
    /// staged file to its place in the person's folder, acting as the person.
    pub fn finish_pick_with(
        &self,
        claim: &ClaimedPick,
        writer: AtomicWriter,
        name: &str,
        place: &dyn Fn(&Path, &Path) -> Result<(), String>,
    ) -> Result<PickArrival, SiteError> {
        let written = writer.commit()?;
        if self.mode() == SiteMode::Host {
            let staging = std::path::absolute(self.path())?.join(staging_dir_rel(&claim.id));
            let destination = self.pick_file_path(&claim.person, &claim.id, name)?;
            let placed = place(&staging.join(name), &destination);
            self.remove_staging_dir(&claim.id)?;
            if let Err(why) = placed {
                self.release_pick(claim)?;
                return Err(SiteError::Io(std::io::Error::other(format!(
                    "the picked file could not be placed in {}'s folder: {why}",
                    claim.person
                ))));
            }
        }
        let now = millis(SystemTime::now());
        let changed = self.db.conn().execute(
            "UPDATE interactions
             SET state = ?1, answered_ms = ?2, file_name = ?3, file_expires_ms = ?4
             WHERE id = ?5 AND state = ?6",
            params![
                State::Arrived.as_str(),
                now,
                name,
                now.saturating_add(duration_ms(PICK_FILE_TTL)),
                claim.id,
                State::Receiving.as_str(),
            ],
        )?;
        if changed == 1 {
            return Ok(PickArrival {
                id: claim.id.clone(),
                name: name.to_owned(),
                size: written.size,
                sha256: written.sha256_hex(),
            });
        }
        self.remove_pick_dir(&claim.person, &claim.id)?;
        let state = self.row_of(&claim.id, KIND_PICK)?.map(|row| row.state);
        Err(match state {
            Some(State::Cancelled) => InteractionError::LinkCancelled,
            _ => InteractionError::LinkExpired,
        }
        .into())
    }

    /// Gives a claimed link back after a failed upload, so the person can try again, and
    /// removes whatever the attempt left. A pick that has moved on (arrived, cancelled,
    /// expired) is left as it is.
    pub fn release_pick(&self, claim: &ClaimedPick) -> Result<(), SiteError> {
        let released = self.db.conn().execute(
            "UPDATE interactions SET state = ?1 WHERE id = ?2 AND state = ?3",
            params![State::Pending.as_str(), claim.id, State::Receiving.as_str()],
        )?;
        if released == 1 {
            self.remove_pick_dir(&claim.person, &claim.id)?;
        }
        Ok(())
    }

    /// Removes picked files past [`PICK_FILE_TTL`] and the leftovers of picks that ended
    /// without a file, and forgets requests older than [`INTERACTION_RECORD_TTL`].
    /// Returns how many pick folders it removed.
    pub fn sweep_picks(&self) -> Result<usize, SiteError> {
        self.sweep_picks_at(SystemTime::now())
    }

    /// [`Site::sweep_picks`] with an explicit clock.
    pub fn sweep_picks_at(&self, now: SystemTime) -> Result<usize, SiteError> {
        let now_ms = millis(now);
        let mut removed = 0;
        for person in self.persons()? {
            let rel = format!("private/people/{person}/{PICKS_DIR}");
            let picks = match self.root().open_dir(&rel, Follow::Never) {
                Ok(dir) => dir,
                Err(FsError::NotFound) => continue,
                // Host mode: the person's folder is theirs alone; their tmp/ is theirs to clear.
                Err(FsError::PermissionDenied) if self.mode() == SiteMode::Host => continue,
                // A link in place of a folder of ours: leave it, and everything it points at.
                Err(FsError::PathEscapes | FsError::NotADirectory) => {
                    tracing::warn!("{rel} is not a folder; picked files there are not swept");
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for entry in picks.entries()? {
                // Only folders this module made; anything else there is left alone.
                if !entry.name.starts_with(PICK_ID_PREFIX) || !is_interaction_id(&entry.name) {
                    continue;
                }
                let row = self.row_of(&entry.name, KIND_PICK)?;
                let keep = row.is_some_and(|row| match row.state {
                    State::Pending | State::Receiving => true,
                    State::Arrived => row.file_expires_ms.is_some_and(|at| at > now_ms),
                    _ => false,
                });
                if !keep {
                    picks.remove(&entry.name)?;
                    removed += 1;
                }
            }
        }
        self.db.conn().execute(
            "DELETE FROM interactions WHERE created_ms <= ?1",
            [now_ms.saturating_sub(duration_ms(INTERACTION_RECORD_TTL))],
        )?;
        Ok(removed)
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
        self.db.conn().execute(
            "UPDATE interactions SET expires_ms = MIN(expires_ms, ?1)
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
        let conn = self.db.conn();
        let mut stmt = conn.prepare_cached(
            "UPDATE interactions SET state = ?1, answered_ms = ?2 WHERE id = ?3 AND state = ?4",
        )?;
        let now = millis(SystemTime::now());
        for state in from {
            stmt.execute(params![State::Expired.as_str(), now, id, state.as_str()])?;
        }
        Ok(())
    }

    fn row_of(&self, id: &str, kind: &str) -> Result<Option<Row>, SiteError> {
        let row = self.db.row(
            "SELECT person, state, expires_ms, file_name, file_expires_ms FROM interactions
             WHERE id = ?1 AND kind = ?2",
            [id, kind],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
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

    /// The absolute path of a picked file.
    fn pick_file_path(&self, person: &str, id: &str, name: &str) -> Result<PathBuf, SiteError> {
        Ok(std::path::absolute(self.path())?
            .join(pick_dir_rel(person, id))
            .join(name))
    }

    fn remove_pick_dir(&self, person: &str, id: &str) -> Result<(), SiteError> {
        if self.mode() == SiteMode::Host {
            return self.remove_staging_dir(id);
        }
        let rel = format!("private/people/{person}/{PICKS_DIR}");
        let picks = match self.root().open_dir(&rel, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        match picks.remove(id) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Site {
    /// Removes host mode's staging folder of pick `id` and what is in it.
    fn remove_staging_dir(&self, id: &str) -> Result<(), SiteError> {
        let staging = match self.root().open_dir(&staging_root_rel(), Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let folder = match staging.open_dir(id, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for entry in folder.entries()? {
            match folder.remove(&entry.name) {
                Ok(()) | Err(FsError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        match staging.remove_empty_dir(id) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Where host mode stages picked files before placing them as the person: the service's
/// own folder, `.ferry/picks/`.
fn staging_root_rel() -> String {
    format!("{SERVICE_DIR}/picks")
}

/// `.ferry/picks/<id>`, relative to the site.
fn staging_dir_rel(id: &str) -> String {
    format!("{}/{id}", staging_root_rel())
}

/// `private/people/<person>/tmp/picks/<id>`, relative to the site.
fn pick_dir_rel(person: &str, id: &str) -> String {
    format!("private/people/{person}/{PICKS_DIR}/{id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    fn site_with(config: Config) -> (tempfile::TempDir, Arc<Site>) {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), config).unwrap();
        site.add_person("me").unwrap();
        site.add_person("bob").unwrap();
        (tmp, Arc::new(site))
    }

    fn site() -> (tempfile::TempDir, Arc<Site>) {
        site_with(Config::default())
    }

    fn interaction_error(err: SiteError) -> InteractionError {
        match err {
            SiteError::Interaction(e) => e,
            other => panic!("expected an interaction error, got {other:?}"),
        }
    }

    /// A pick's link split into what a client sends: `(expires, sig)`.
    fn link_parts(link: &str) -> (String, String) {
        let query = link.split_once('?').unwrap().1;
        let mut expires = String::new();
        let mut sig = String::new();
        for pair in query.split('&') {
            match pair.split_once('=').unwrap() {
                ("expires", v) => expires = v.to_owned(),
                ("sig", v) => sig = v.to_owned(),
                other => panic!("unexpected {other:?}"),
            }
        }
        (expires, sig)
    }

    /// Uploads `bytes` as `name` through the site functions the gateway calls.
    fn upload(site: &Site, id: &str, name: &str, bytes: &[u8]) -> Result<PickArrival, SiteError> {
        let claim = site.claim_pick(id)?;
        let (mut writer, safe) = site.pick_writer(&claim, name)?;
        if let Err(e) = writer.write(bytes) {
            drop(writer);
            site.release_pick(&claim)?;
            return Err(e.into());
        }
        site.finish_pick(&claim, writer, &safe)
    }

    #[test]
    fn ids_have_one_shape() {
        let (_tmp, site) = site();
        let approval = site
            .request_approval("me", "file_delete", "a.txt", "")
            .unwrap();
        let pick = site.request_pick("me", "the invoice").unwrap().id;
        assert!(approval.starts_with("ap_") && is_interaction_id(&approval));
        assert!(pick.starts_with("pk_") && is_interaction_id(&pick));
        for bad in [
            "",
            "ap_",
            "xx_abcdefghijklmnop",
            "ap_abcdefghijklmno",
            "ap_abcdefghijklmnopq",
            "ap_ABCDEFGHIJKLMNOP",
            "ap_abcdefghijklmn01",
            "pk_abcdefghijklmn/.",
            "../abcdefghijklmnop",
        ] {
            assert!(!is_interaction_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn presence_lasts_exactly_the_ttl() {
        let (_tmp, site) = site();
        assert!(!site.web_channel_open("me").unwrap(), "never seen");
        let seen = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        site.touch_presence_at("me", seen).unwrap();
        let ms = Duration::from_millis(1);
        assert!(site.web_channel_open_at("me", seen).unwrap());
        assert!(
            site.web_channel_open_at("me", seen + WEB_PRESENCE_TTL - ms)
                .unwrap()
        );
        assert!(
            site.web_channel_open_at("me", seen + WEB_PRESENCE_TTL)
                .unwrap()
        );
        assert!(
            !site
                .web_channel_open_at("me", seen + WEB_PRESENCE_TTL + ms)
                .unwrap()
        );
        assert!(
            !site.web_channel_open_at("bob", seen).unwrap(),
            "only the person touched"
        );
        // An older touch (a slow tick) never moves the time back.
        site.touch_presence_at("me", seen - WEB_PRESENCE_TTL)
            .unwrap();
        assert_eq!(site.last_seen_on_web("me").unwrap(), Some(seen));
        assert!(matches!(
            site.touch_presence("ghost"),
            Err(SiteError::UnknownPerson(_))
        ));
    }

    #[test]
    fn request_text_is_bounded() {
        let (_tmp, site) = site();
        let text = |n| "x".repeat(n);
        for (n, ok) in [
            (INTERACTION_TEXT_MAX_BYTES - 1, true),
            (INTERACTION_TEXT_MAX_BYTES, true),
            (INTERACTION_TEXT_MAX_BYTES + 1, false),
        ] {
            assert_eq!(
                site.request_pick("me", &text(n)).is_ok(),
                ok,
                "prompt of {n}"
            );
            let summary = site.request_approval("me", "file_delete", "a", &text(n));
            assert_eq!(summary.is_ok(), ok, "summary of {n}");
            let subject = site.request_approval("me", "file_delete", &text(n), "");
            assert_eq!(subject.is_ok(), ok, "subject of {n}");
        }
        for empty in ["", "  "] {
            let err = site.request_pick("me", empty).unwrap_err();
            assert!(matches!(
                interaction_error(err),
                InteractionError::InvalidText {
                    field: "prompt",
                    ..
                }
            ));
            assert!(
                site.request_approval("me", "file_delete", empty, "")
                    .is_err()
            );
            assert!(site.request_approval("me", empty, "a.txt", "").is_err());
        }
        assert!(matches!(
            site.request_pick("ghost", "a file"),
            Err(SiteError::UnknownPerson(_))
        ));
    }

    #[test]
    fn an_approval_is_answered_once_by_its_person() {
        let (_tmp, site) = site();
        for approve in [true, false] {
            let id = site
                .request_approval("me", "file_delete", "notes/old.txt", "Delete old.txt")
                .unwrap();
            let pending = site.pending_interactions("me").unwrap();
            assert_eq!(pending.last().map(|i| i.id.as_str()), Some(id.as_str()));
            assert_eq!(
                pending.last().unwrap().kind,
                InteractionKind::Approval {
                    tool: "file_delete".into(),
                    subject: "notes/old.txt".into(),
                    summary: "Delete old.txt".into(),
                }
            );
            assert!(site.pending_interactions("bob").unwrap().is_empty());

            let waiter = {
                let (site, id) = (site.clone(), id.clone());
                std::thread::spawn(move || site.wait_for_approval(&id, Duration::from_secs(20)))
            };
            let err = site.answer_approval("bob", &id, true).unwrap_err();
            assert!(matches!(
                interaction_error(err),
                InteractionError::Unknown(_)
            ));
            site.answer_approval("me", &id, approve).unwrap();
            let want = if approve {
                ApprovalOutcome::Approved
            } else {
                ApprovalOutcome::Denied
            };
            assert_eq!(waiter.join().unwrap().unwrap(), want);
            let err = site.answer_approval("me", &id, !approve).unwrap_err();
            assert!(matches!(
                interaction_error(err),
                InteractionError::AlreadyAnswered
            ));
            assert!(site.pending_interactions("me").unwrap().is_empty());
        }
        let err = site
            .answer_approval("me", "ap_aaaaaaaaaaaaaaaa", true)
            .unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::Unknown(_)
        ));
    }

    #[test]
    fn an_unanswered_approval_times_out_and_refuses_a_late_answer() {
        let (_tmp, site) = site();
        let id = site
            .request_approval("me", "file_delete", "a.txt", "")
            .unwrap();
        let outcome = site
            .wait_for_approval(&id, Duration::from_millis(300))
            .unwrap();
        assert_eq!(outcome, ApprovalOutcome::TimedOut);
        let err = site.answer_approval("me", &id, true).unwrap_err();
        assert!(matches!(interaction_error(err), InteractionError::Expired));
        assert!(site.pending_interactions("me").unwrap().is_empty());
    }

    #[test]
    fn a_waiter_shortens_the_expiry_the_person_sees() {
        let (_tmp, site) = site();
        let id = site
            .request_approval("me", "file_delete", "a.txt", "")
            .unwrap();
        let before = site.pending_interactions("me").unwrap()[0].expires;
        assert!(before > SystemTime::now() + APPROVAL_MAX_WAIT - Duration::from_secs(5));
        let waiter = {
            let (site, id) = (site.clone(), id.clone());
            std::thread::spawn(move || site.wait_for_approval(&id, Duration::from_secs(30)))
        };
        let shortened = (0..100)
            .find_map(|_| {
                std::thread::sleep(Duration::from_millis(20));
                let now = site.pending_interactions("me").unwrap()[0].expires;
                (now < before).then_some(now)
            })
            .expect("the waiter wrote its deadline");
        assert!(shortened <= SystemTime::now() + Duration::from_secs(30));
        site.answer_approval("me", &id, false).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), ApprovalOutcome::Denied);
    }

    #[test]
    fn pick_links_are_signed_and_expire_at_their_second() {
        let (_tmp, site) = site();
        let request = site.request_pick("me", "the invoice").unwrap();
        let now_secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let ttl = request
            .link_expires
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            - now_secs;
        assert!((PICK_LINK_TTL.as_secs() - 1..=PICK_LINK_TTL.as_secs()).contains(&ttl));
        let link = site.pick_link(&request.id, request.link_expires).unwrap();
        assert!(link.starts_with(&format!("/v1/picks/{}/upload?expires=", request.id)));
        let (expires, sig) = link_parts(&link);
        let at = request.link_expires;
        let second = Duration::from_secs(1);
        let check = |now| site.check_pick_link_at(&request.id, &expires, &sig, now);
        check(at - second).unwrap();
        assert!(matches!(
            interaction_error(check(at).unwrap_err()),
            InteractionError::LinkExpired
        ));
        assert!(matches!(
            interaction_error(check(at + second).unwrap_err()),
            InteractionError::LinkExpired
        ));

        let bad = |id: &str, expires: &str, sig: &str| {
            let err = site.check_pick_link_at(id, expires, sig, at - second);
            matches!(
                err.map_err(interaction_error),
                Err(InteractionError::BadSignature)
            )
        };
        let mut flipped = sig.clone().into_bytes();
        flipped[0] = if flipped[0] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap();
        let later = (expires.parse::<u64>().unwrap() + 1).to_string();
        assert!(bad(&request.id, &expires, &flipped), "a changed signature");
        assert!(bad(&request.id, &later, &sig), "a later expiry");
        assert!(
            bad(&request.id, &format!("0{expires}"), &sig),
            "a second spelling"
        );
        assert!(bad(&request.id, &format!("+{expires}"), &sig));
        assert!(bad(&request.id, "", &sig));
        assert!(bad(&request.id, &expires, ""));
        assert!(bad(&request.id, &expires, &sig[..sig.len() - 2]));
        assert!(bad(&request.id, &expires, &sig.to_uppercase()));
        assert!(bad("pk_aaaaaaaaaaaaaaaa", &expires, &sig), "another pick");
    }

    #[test]
    fn the_link_key_is_private_made_once_and_shared() {
        let tmp = tempfile::tempdir().unwrap();
        let sites: Vec<Arc<Site>> = (0..4)
            .map(|_| Arc::new(Site::open(tmp.path(), Config::default()).unwrap()))
            .collect();
        let expires = SystemTime::now() + Duration::from_secs(60);
        // Made by several at once: every link any of them made checks with every other.
        let links: Vec<String> = sites
            .iter()
            .map(|site| {
                let site = site.clone();
                std::thread::spawn(move || site.pick_link("pk_aaaaaaaaaaaaaaaa", expires).unwrap())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        for link in &links {
            assert_eq!(link, &links[0]);
            let (expires, sig) = link_parts(link);
            for site in &sites {
                site.check_pick_link("pk_aaaaaaaaaaaaaaaa", &expires, &sig)
                    .unwrap();
            }
        }
        let key = tmp.path().join(SERVICE_DIR).join(PICK_LINK_KEY_FILE);
        let meta = std::fs::metadata(&key).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), PICK_LINK_KEY_BYTES as u64);
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join(SERVICE_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(ferry_fs::TEMP_PREFIX))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        // Another site has another key.
        let (_other_tmp, other) = site();
        let (expires, sig) = link_parts(&links[0]);
        assert!(
            other
                .check_pick_link("pk_aaaaaaaaaaaaaaaa", &expires, &sig)
                .is_err()
        );
    }

    #[test]
    fn a_pick_arrives_once_and_waits_see_it() {
        let (tmp, site) = site();
        let request = site.request_pick("me", "the invoice").unwrap();
        let waiter = {
            let (site, id) = (site.clone(), request.id.clone());
            std::thread::spawn(move || site.wait_for_pick(&id, Duration::from_secs(20)))
        };
        let arrival = upload(&site, &request.id, "../Q2 report (final).pdf", b"%PDF-1.4").unwrap();
        assert_eq!(arrival.name, "Q2_report_final_.pdf");
        assert_eq!(arrival.size, 8);
        let PickOutcome::Arrived { path, expires } = waiter.join().unwrap().unwrap() else {
            panic!("the file arrived");
        };
        let want = std::path::absolute(tmp.path())
            .unwrap()
            .join(format!("private/people/me/tmp/picks/{}", request.id))
            .join("Q2_report_final_.pdf");
        assert_eq!(path, want);
        assert!(path.is_absolute());
        assert_eq!(std::fs::read(&path).unwrap(), b"%PDF-1.4");
        let lifetime = expires.duration_since(SystemTime::now()).unwrap();
        assert!(lifetime > PICK_FILE_TTL - Duration::from_secs(60) && lifetime <= PICK_FILE_TTL);
        let err = site.claim_pick(&request.id).unwrap_err();
        assert!(matches!(interaction_error(err), InteractionError::LinkUsed));
        assert!(site.pending_interactions("me").unwrap().is_empty());
        // A give-back that comes late (the upload's request ended after it completed).
        let stale = ClaimedPick {
            id: request.id.clone(),
            person: "me".to_owned(),
        };
        site.release_pick(&stale).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"%PDF-1.4",
            "an arrived file stays"
        );
        let err = site.cancel_pick("me", &request.id).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::AlreadyAnswered
        ));
    }

    #[test]
    fn one_upload_at_a_time_and_a_failed_one_gives_the_link_back() {
        let cap = 100;
        let mut config = Config::default();
        config.media.max_upload_bytes = cap;
        let (tmp, site) = site_with(config);
        let id = site.request_pick("me", "a small file").unwrap().id;
        let claim = site.claim_pick(&id).unwrap();
        assert_eq!((claim.id(), claim.person()), (id.as_str(), "me"));
        assert!(
            site.pending_interactions("me").unwrap().is_empty(),
            "not pending while an upload runs"
        );
        let err = site.claim_pick(&id).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::UploadInProgress
        ));
        site.release_pick(&claim).unwrap();
        assert_eq!(site.pending_interactions("me").unwrap().len(), 1);

        let over = upload(&site, &id, "big.bin", &vec![b'x'; cap as usize + 1]).unwrap_err();
        assert!(matches!(over, SiteError::Fs(FsError::TooLarge(n)) if n == cap));
        let picks = tmp.path().join("private/people/me/tmp/picks");
        assert!(
            !picks.join(&id).exists(),
            "nothing kept of a refused upload"
        );
        let at_cap = upload(&site, &id, "full.bin", &vec![b'x'; cap as usize]).unwrap();
        assert_eq!(at_cap.size, cap);
        let other = site.request_pick("me", "another").unwrap().id;
        let under = upload(&site, &other, "less.bin", &vec![b'x'; cap as usize - 1]).unwrap();
        assert_eq!(under.size, cap - 1);
    }

    #[test]
    fn cancelled_and_timed_out_picks_refuse_their_link() {
        let (tmp, site) = site();
        let cancelled = site.request_pick("me", "a file").unwrap().id;
        let waiter = {
            let (site, id) = (site.clone(), cancelled.clone());
            std::thread::spawn(move || site.wait_for_pick(&id, Duration::from_secs(20)))
        };
        let err = site.cancel_pick("bob", &cancelled).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::Unknown(_)
        ));
        site.cancel_pick("me", &cancelled).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), PickOutcome::Cancelled);
        let err = site.claim_pick(&cancelled).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::LinkCancelled
        ));

        let timed_out = site.request_pick("me", "a file").unwrap().id;
        let outcome = site
            .wait_for_pick(&timed_out, Duration::from_millis(300))
            .unwrap();
        assert_eq!(outcome, PickOutcome::Expired);
        let err = site.claim_pick(&timed_out).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::LinkExpired
        ));

        // Cancelled while the file streams: the upload fails and keeps nothing.
        let raced = site.request_pick("me", "a file").unwrap().id;
        let claim = site.claim_pick(&raced).unwrap();
        let (mut writer, name) = site.pick_writer(&claim, "a.txt").unwrap();
        writer.write(b"abc").unwrap();
        site.cancel_pick("me", &raced).unwrap();
        let err = site.finish_pick(&claim, writer, &name).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::LinkCancelled
        ));
        assert!(
            !tmp.path()
                .join("private/people/me/tmp/picks")
                .join(&raced)
                .exists()
        );
        let err = site.claim_pick("pk_aaaaaaaaaaaaaaaa").unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::Unknown(_)
        ));
        let approval = site.request_approval("me", "file_delete", "a", "").unwrap();
        let err = site.claim_pick(&approval).unwrap_err();
        assert!(
            matches!(interaction_error(err), InteractionError::Unknown(_)),
            "an approval has no link"
        );
    }

    #[test]
    fn an_upload_under_way_outlives_the_link() {
        let (_tmp, site) = site();
        let id = site.request_pick("me", "a file").unwrap().id;
        let claim = site.claim_pick(&id).unwrap();
        // The link expires while the file streams.
        site.db
            .conn()
            .execute(
                "UPDATE interactions SET expires_ms = 0 WHERE id = ?1",
                [&id],
            )
            .unwrap();
        let waiter = {
            let (site, id) = (site.clone(), id.clone());
            std::thread::spawn(move || site.wait_for_pick(&id, Duration::from_secs(20)))
        };
        std::thread::sleep(INTERACTION_POLL_INTERVAL * 2);
        let (mut writer, name) = site.pick_writer(&claim, "late.txt").unwrap();
        writer.write(b"late").unwrap();
        site.finish_pick(&claim, writer, &name).unwrap();
        assert!(matches!(
            waiter.join().unwrap().unwrap(),
            PickOutcome::Arrived { .. }
        ));
    }

    #[test]
    fn sweeping_removes_picked_files_at_their_expiry() {
        let (tmp, site) = site();
        let id = site.request_pick("me", "a file").unwrap().id;
        upload(&site, &id, "a.txt", b"abc").unwrap();
        let PickOutcome::Arrived { path, expires } =
            site.wait_for_pick(&id, Duration::from_secs(5)).unwrap()
        else {
            panic!("arrived");
        };
        let ms = Duration::from_millis(1);
        // A leftover of an attempt that ended, and a folder that is not ours.
        let ended = site.request_pick("me", "a file").unwrap().id;
        site.cancel_pick("me", &ended).unwrap();
        let picks = tmp.path().join("private/people/me/tmp/picks");
        std::fs::create_dir_all(picks.join(&ended)).unwrap();
        std::fs::create_dir_all(picks.join("keep-me")).unwrap();
        // Pending and running picks keep their folders.
        let waiting = site.request_pick("me", "a file").unwrap().id;
        std::fs::create_dir_all(picks.join(&waiting)).unwrap();

        assert_eq!(site.sweep_picks_at(expires - ms).unwrap(), 1);
        assert!(path.exists());
        assert!(!picks.join(&ended).exists());
        assert_eq!(site.sweep_picks_at(expires).unwrap(), 1);
        assert!(!path.exists() && !picks.join(&id).exists());
        assert!(picks.join("keep-me").exists() && picks.join(&waiting).exists());
        assert_eq!(site.sweep_picks_at(expires + ms).unwrap(), 0);

        // Records go after INTERACTION_RECORD_TTL, counted from their creation.
        let created = site.row_of(&id, KIND_PICK).unwrap().is_some();
        assert!(created);
        let later = SystemTime::now() + INTERACTION_RECORD_TTL + Duration::from_secs(5);
        site.sweep_picks_at(later).unwrap();
        assert!(site.row_of(&id, KIND_PICK).unwrap().is_none());
        assert_eq!(
            site.sweep_picks_at(later).unwrap(),
            1,
            "the pending one's folder"
        );
    }
}
