//! The audit trail (spec scale S-OPS): every file movement of every face, recorded once
//! in the metadata database with who moved it (person, token kind, node), what (the
//! workspace-relative path or the node's path, the size and sha256 where the bytes passed
//! through ferry), when, and how it ended. `ferry audit` reads it all, `GET /v1/audit`
//! shows a person their own, and records older than `[audit] retention_days` are swept.
//!
//! A record is written once the movement has ended, with its outcome: `ok` or the error
//! code it failed with. Writing the record never undoes or fails the movement itself: a
//! database that refuses it is logged.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::db::{Exec, params};
use crate::{Site, SiteError};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    person TEXT NOT NULL,
    -- 'person', 'harness', 'admin', or 'agent' for the agent's tools; '' when none.
    token_kind TEXT NOT NULL,
    node TEXT NOT NULL DEFAULT '',
    action TEXT NOT NULL,
    project TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL,
    -- Where a move or a node transfer put it.
    to_path TEXT NOT NULL DEFAULT '',
    size INTEGER,
    sha256 TEXT,
    outcome TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_person ON audit (person, id);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit (at_ms);
";

/// What happened to a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// A member's upload (one request, or a resumable upload's completion).
    Upload,
    /// A harness delivery.
    Delivery,
    /// A member's download.
    Download,
    /// A move or rename.
    Move,
    /// A delete (into the trash, or for good).
    Delete,
    /// A restore from the trash.
    Restore,
    /// A share link made.
    Share,
    /// An agent tool wrote or edited a file.
    ToolWrite,
    /// An agent tool deleted a file.
    ToolDelete,
    /// A file fetched from a node.
    NodeFetch,
    /// A file pushed to a node.
    NodePush,
    /// A folder fetched from a node.
    DirFetch,
    /// Files handed to another agent (the herd).
    Handoff,
}

impl AuditAction {
    /// The name kept in the database and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Upload => "upload",
            AuditAction::Delivery => "delivery",
            AuditAction::Download => "download",
            AuditAction::Move => "move",
            AuditAction::Delete => "delete",
            AuditAction::Restore => "restore",
            AuditAction::Share => "share",
            AuditAction::ToolWrite => "tool_write",
            AuditAction::ToolDelete => "tool_delete",
            AuditAction::NodeFetch => "node_fetch",
            AuditAction::NodePush => "node_push",
            AuditAction::DirFetch => "dir_fetch",
            AuditAction::Handoff => "handoff",
        }
    }
}

/// One movement, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// Grows with every record; pages are cut by it.
    pub id: i64,
    /// When it ended, RFC 3339.
    #[schema(format = DateTime)]
    pub at: String,
    /// Whose file it is (and who moved it, or whose agent).
    pub person: String,
    /// The kind of token it came with: `person`, `harness`, `admin`, `agent` (the agent's
    /// tools) or `share` (a share link's download).
    pub token_kind: String,
    /// The node, for node transfers.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub node: Option<String>,
    /// What happened.
    #[schema(value_type = AuditAction)]
    pub action: String,
    /// The project, or none for the main workspace.
    #[schema(required = true)]
    pub project: Option<String>,
    /// The workspace-relative path (the node's path for a node's side).
    pub path: String,
    /// Where it went: a move's new path, a transfer's other end.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub to: Option<String>,
    /// Bytes, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub size: Option<u64>,
    /// The sha256 of the bytes, where they passed through ferry.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub sha256: Option<String>,
    /// `ok`, or the error code it failed with.
    pub outcome: String,
}

/// A movement to record: made with [`AuditEntry::new`], completed with its builders.
#[derive(Clone, Debug)]
pub struct AuditEntry {
    person: String,
    token_kind: String,
    node: Option<String>,
    action: AuditAction,
    project: Option<String>,
    path: String,
    to: Option<String>,
    size: Option<u64>,
    sha256: Option<String>,
    outcome: String,
}

impl AuditEntry {
    /// `path` of `person`'s workspace moved by `action`, with a token of `token_kind`
    /// (`agent` for the agent's tools); its outcome is `ok` until said otherwise.
    pub fn new(person: &str, token_kind: &str, action: AuditAction, path: &str) -> AuditEntry {
        AuditEntry {
            person: person.to_owned(),
            token_kind: token_kind.to_owned(),
            node: None,
            action,
            project: None,
            path: path.to_owned(),
            to: None,
            size: None,
            sha256: None,
            outcome: "ok".to_owned(),
        }
    }

    /// In `project` (none: the main workspace).
    pub fn project(mut self, project: Option<&str>) -> AuditEntry {
        self.project = project.map(str::to_owned);
        self
    }

    /// Where it went: a move's new path, a transfer's other end.
    pub fn to(mut self, to: &str) -> AuditEntry {
        self.to = Some(to.to_owned());
        self
    }

    /// Its size, and its sha256 where the bytes passed through ferry.
    pub fn bytes(mut self, size: u64, sha256: Option<&str>) -> AuditEntry {
        self.size = Some(size);
        self.sha256 = sha256.map(str::to_owned);
        self
    }

    /// The node of a node transfer.
    pub fn node(mut self, node: &str) -> AuditEntry {
        self.node = Some(node.to_owned());
        self
    }

    /// It failed with the error `code`.
    pub fn failed(mut self, code: &str) -> AuditEntry {
        self.outcome = code.to_owned();
        self
    }
}

/// The most bytes of a path (or destination) a record keeps.
pub const AUDIT_PATH_MAX_BYTES: usize = 4096;

/// `text` cut to [`AUDIT_PATH_MAX_BYTES`] at a character boundary.
fn cut(text: &str) -> &str {
    if text.len() <= AUDIT_PATH_MAX_BYTES {
        return text;
    }
    let mut end = AUDIT_PATH_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` as a record keeps it: cut ([`cut`]), and a NUL character, which no metadata
/// engine stores alike, written as `␀` (U+2400), so that a refused request holding one
/// is recorded as every other.
fn kept(text: &str) -> Cow<'_, str> {
    let text = cut(text);
    match text.contains('\0') {
        true => Cow::Owned(text.replace('\0', "\u{2400}")),
        false => Cow::Borrowed(text),
    }
}

/// Which records to read.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    /// One person's only.
    pub person: Option<String>,
    /// At or after this time.
    pub since: Option<SystemTime>,
    /// Records with an id below this (the next page of a listing, newest first).
    pub before: Option<i64>,
    /// At most this many (capped at [`AUDIT_PAGE_MAX`]).
    pub limit: usize,
}

/// The most records one read returns.
pub const AUDIT_PAGE_MAX: usize = 1000;

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis().min(i64::MAX as u128) as i64)
        .unwrap_or(0)
}

impl Site {
    /// Records a movement; a failure to record is logged, never returned (see above).
    /// A path or destination longer than [`AUDIT_PATH_MAX_BYTES`] is kept cut, so that a
    /// refused request naming a huge path costs the trail no more than a real one.
    pub fn audit(&self, entry: &AuditEntry) {
        let (path, to) = (kept(&entry.path), entry.to.as_deref().map(kept));
        let written = self.db.execute(
            "INSERT INTO audit (at_ms, person, token_kind, node, action, project, path, to_path,
                 size, sha256, outcome)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                millis(SystemTime::now()),
                &entry.person,
                &entry.token_kind,
                entry.node.as_deref().unwrap_or(""),
                entry.action.as_str(),
                entry
                    .project
                    .as_deref()
                    .map(kept)
                    .unwrap_or_default()
                    .as_ref(),
                path.as_ref(),
                to.unwrap_or_default().as_ref(),
                entry.size,
                &entry.sha256,
                &entry.outcome
            ],
        );
        if let Err(e) = written {
            tracing::warn!(
                action = entry.action.as_str(),
                person = %entry.person,
                "the audit trail could not record a movement: {e}"
            );
        }
    }

    /// Records newest first, as `filter` says.
    pub fn audit_records(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, SiteError> {
        let limit = filter.limit.clamp(1, AUDIT_PAGE_MAX) as i64;
        self.db.rows(
            "SELECT id, at_ms, person, token_kind, node, action, project, path, to_path, size,
                 sha256, outcome FROM audit
             WHERE (?1 = '' OR person = ?1) AND at_ms >= ?2 AND id < ?3
             ORDER BY id DESC LIMIT ?4",
            params![
                filter.person.as_deref().unwrap_or(""),
                filter.since.map_or(0, millis),
                filter.before.unwrap_or(i64::MAX),
                limit
            ],
            |r| {
                let at_ms: i64 = r.get(1)?;
                let optional = |i: usize| -> Result<Option<String>, SiteError> {
                    let text: String = r.get(i)?;
                    Ok((!text.is_empty()).then_some(text))
                };
                Ok(AuditRecord {
                    id: r.get(0)?,
                    at: crate::rfc3339(UNIX_EPOCH + Duration::from_millis(at_ms.max(0) as u64)),
                    person: r.get(2)?,
                    token_kind: r.get(3)?,
                    node: optional(4)?,
                    action: r.get(5)?,
                    project: optional(6)?,
                    path: r.get(7)?,
                    to: optional(8)?,
                    size: r.get::<Option<i64>>(9)?.map(|s| s.max(0) as u64),
                    sha256: r.get(10)?,
                    outcome: r.get(11)?,
                })
            },
        )
    }

    /// Removes records older than `[audit] retention_days` at `now`; how many.
    pub fn sweep_audit(&self, now: SystemTime) -> Result<usize, SiteError> {
        let days = self.config().audit.retention_days;
        let keep = Duration::from_secs(days.saturating_mul(86_400));
        let cutoff = now.checked_sub(keep).unwrap_or(UNIX_EPOCH);
        Ok(self.db.execute(
            "DELETE FROM audit WHERE at_ms < ?1",
            params![millis(cutoff)],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_read_by_person_and_time_and_swept_after_retention() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), crate::testing::config(tmp.path())).unwrap();
        site.audit(
            &AuditEntry::new("ann", "person", AuditAction::Upload, "public/a.txt")
                .bytes(3, Some("ab")),
        );
        site.audit(
            &AuditEntry::new("ann", "person", AuditAction::Move, "public/a.txt").to("public/b.txt"),
        );
        site.audit(
            &AuditEntry::new("bob", "agent", AuditAction::NodeFetch, "/etc/x")
                .node("n1")
                .failed("node_offline"),
        );

        let all = site
            .audit_records(&AuditFilter {
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].person, "bob", "newest first");
        assert_eq!(all[0].node.as_deref(), Some("n1"));
        assert_eq!(all[0].outcome, "node_offline");
        let ann = site
            .audit_records(&AuditFilter {
                person: Some("ann".into()),
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(ann.len(), 2);
        assert_eq!(ann[0].action, "move");
        assert_eq!(ann[0].to.as_deref(), Some("public/b.txt"));
        assert_eq!(
            (ann[1].size, ann[1].sha256.as_deref()),
            (Some(3), Some("ab"))
        );
        // A page: one at a time, cut by id.
        let first = site
            .audit_records(&AuditFilter {
                person: Some("ann".into()),
                limit: 1,
                ..Default::default()
            })
            .unwrap();
        let next = site
            .audit_records(&AuditFilter {
                person: Some("ann".into()),
                before: Some(first[0].id),
                limit: 1,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(next[0].action, "upload");
        // Since a moment in the future: nothing.
        let later = SystemTime::now() + Duration::from_secs(60);
        let none = site
            .audit_records(&AuditFilter {
                since: Some(later),
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        assert!(none.is_empty());
        // The sweep keeps what is within the retention, drops what is past it.
        assert_eq!(site.sweep_audit(SystemTime::now()).unwrap(), 0);
        let past = SystemTime::now() + Duration::from_secs(91 * 86_400);
        assert_eq!(site.sweep_audit(past).unwrap(), 3);
        let last_of_cy = || {
            site.audit_records(&AuditFilter {
                person: Some("cy".into()),
                limit: 1,
                ..Default::default()
            })
            .unwrap()
            .remove(0)
        };
        // A path at the limit is kept whole; one past it, cut to the limit (and a cut
        // never splits a character).
        for (len, kept) in [
            (AUDIT_PATH_MAX_BYTES - 1, AUDIT_PATH_MAX_BYTES - 1),
            (AUDIT_PATH_MAX_BYTES, AUDIT_PATH_MAX_BYTES),
            (AUDIT_PATH_MAX_BYTES + 1, AUDIT_PATH_MAX_BYTES),
            (1_000_000, AUDIT_PATH_MAX_BYTES),
        ] {
            let long = format!("public/{}", "a".repeat(len - "public/".len()));
            site.audit(&AuditEntry::new("cy", "person", AuditAction::Move, &long).to(&long));
            let got = last_of_cy();
            assert_eq!(
                (got.path.len(), got.to.map(|t| t.len())),
                (kept, Some(kept)),
                "{len}"
            );
        }
        // A refused request's path with a NUL in it is recorded, the NUL shown as `␀`.
        site.audit(
            &AuditEntry::new("cy", "person", AuditAction::Move, "public/a\0b").to("public/\0"),
        );
        let got = last_of_cy();
        assert_eq!(
            (got.path.as_str(), got.to.as_deref()),
            ("public/a\u{2400}b", Some("public/\u{2400}"))
        );
        assert_eq!(
            cut(&"ä".repeat(AUDIT_PATH_MAX_BYTES)).len(),
            AUDIT_PATH_MAX_BYTES
        );
        assert_eq!(
            cut(&format!("a{}", "ä".repeat(AUDIT_PATH_MAX_BYTES))).len(),
            AUDIT_PATH_MAX_BYTES - 1
        );
    }
}
