//! The artifact manifest (spec tools.md T-FLOW): every file under a person's
//! `artifacts/` and every delivery, with person, task, slug, path, size, sha256, time.

use serde::Serialize;

use crate::db::now_secs;
use crate::{Site, SiteError, check_id};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS artifacts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    person TEXT NOT NULL REFERENCES persons(id),
    kind TEXT NOT NULL,
    task TEXT NOT NULL,
    slug TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    delivered_as TEXT NOT NULL DEFAULT '',
    created INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS artifacts_by_person ON artifacts (person, id);
";

/// Whether a record is a finished file under `artifacts/` or a copy delivered to
/// `public/attachments/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactKind {
    Artifact,
    Delivery,
}

impl ArtifactKind {
    fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::Artifact => "artifact",
            ArtifactKind::Delivery => "delivery",
        }
    }
}

/// One row of the manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub kind: ArtifactKind,
    /// The task the file belongs to (by default its slug).
    pub task: String,
    /// The folder under `artifacts/` (or `tmp/`) the work was done in; empty if none.
    pub slug: String,
    /// The absolute path of the file.
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// For a delivery: the path in `public/` the person sees it at.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub delivered_as: String,
    /// RFC 3339.
    pub created: String,
}

impl Site {
    /// Records a file under `artifacts/`; a file recorded before with the same content
    /// is left as it was, a changed one gets a new row (the manifest is a history).
    pub fn record_artifact(&self, person: &str, record: &Artifact) -> Result<bool, SiteError> {
        check_id("person", person)?;
        let seen = self.db.row(
            "SELECT 1 FROM artifacts WHERE person = ?1 AND kind = ?2 AND path = ?3 AND sha256 = ?4",
            (person, record.kind.as_str(), &record.path, &record.sha256),
            |_| Ok(()),
        )?;
        if seen.is_some() {
            return Ok(false);
        }
        self.db.conn().execute(
            "INSERT INTO artifacts (person, kind, task, slug, path, size, sha256, delivered_as, \
             created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            (
                person,
                record.kind.as_str(),
                &record.task,
                &record.slug,
                &record.path,
                record.size as i64,
                &record.sha256,
                &record.delivered_as,
                now_secs(),
            ),
        )?;
        Ok(true)
    }

    /// The person's manifest, oldest first.
    pub fn artifacts(&self, person: &str) -> Result<Vec<Artifact>, SiteError> {
        self.require_person(person)?;
        let conn = self.db.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT kind, task, slug, path, size, sha256, delivered_as, created FROM artifacts \
             WHERE person = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([person], |row| {
            let kind: String = row.get(0)?;
            Ok(Artifact {
                kind: if kind == "delivery" {
                    ArtifactKind::Delivery
                } else {
                    ArtifactKind::Artifact
                },
                task: row.get(1)?,
                slug: row.get(2)?,
                path: row.get(3)?,
                size: row.get::<_, i64>(4)?.max(0) as u64,
                sha256: row.get(5)?,
                delivered_as: row.get(6)?,
                created: crate::rfc3339(
                    std::time::UNIX_EPOCH
                        + std::time::Duration::from_secs(row.get::<_, i64>(7)?.max(0) as u64),
                ),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
