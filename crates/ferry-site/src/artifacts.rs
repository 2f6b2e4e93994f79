//! The artifact manifest (spec tools.md T-FLOW): every file under a person's
//! `artifacts/` and every delivery, with person, task, slug, path, size, sha256, time.

use std::path::Path;

use serde::Serialize;

use crate::db::{Db, Exec, now_secs, params};
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
    -- The file's modification time when it was hashed: unchanged size and time, no rehash.
    mtime INTEGER NOT NULL DEFAULT 0,
    created INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS artifacts_by_person ON artifacts (person, id);
";

/// Whether a record is a finished file under `artifacts/` or a copy delivered to
/// `public/attachments/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactKind {
    /// A finished file under `private/people/<p>/artifacts/`.
    Artifact,
    /// A file delivered into `public/attachments/`.
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Whether it is an artifact or a delivery.
    pub kind: ArtifactKind,
    /// The task the file belongs to (by default its slug).
    pub task: String,
    /// The folder under `artifacts/` (or `tmp/`) the work was done in; empty if none.
    pub slug: String,
    /// The file as the person knows it, relative to their home or the site, never a host path.
    pub path: String,
    /// Bytes.
    pub size: u64,
    /// Lower-case hex SHA-256 of the content.
    pub sha256: String,
    /// For a delivery: the path in `public/` the person sees it at.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub delivered_as: String,
    /// When it was recorded, RFC 3339.
    #[schema(format = DateTime)]
    pub created: String,
    /// Seconds since the epoch, of the file when it was recorded.
    #[serde(skip)]
    pub mtime: i64,
}

/// Rewrites the rows recorded with absolute paths (before paths were stored as the
/// person knows them) into their workspace-relative form; a row from a site folder that
/// has since moved keeps only its file name. Runs at every open; a no-op once done.
pub(crate) fn relativize_legacy_paths(db: &Db, data: &Path) -> Result<(), SiteError> {
    let legacy = db.rows(
        "SELECT id, person, path FROM artifacts WHERE substr(path, 1, 1) = '/'",
        params![],
        |row| {
            Ok::<_, SiteError>((
                row.get::<i64>(0)?,
                row.get::<String>(1)?,
                row.get::<String>(2)?,
            ))
        },
    )?;
    for (id, person, path) in legacy {
        let abs = Path::new(&path);
        let rel = crate::person_relative(data, &person, abs).unwrap_or_else(|| {
            abs.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        db.execute(
            "UPDATE artifacts SET path = ?1 WHERE id = ?2",
            params![rel, id],
        )?;
    }
    Ok(())
}

impl Site {
    /// Records a file under `artifacts/`; a file recorded before with the same content
    /// is left as it was, a changed one gets a new row (the manifest is a history).
    pub fn record_artifact(&self, person: &str, record: &Artifact) -> Result<bool, SiteError> {
        check_id("person", person)?;
        let seen = self.db.exists(
            "SELECT 1 FROM artifacts WHERE person = ?1 AND kind = ?2 AND path = ?3 AND sha256 = ?4",
            params![person, record.kind.as_str(), &record.path, &record.sha256],
        )?;
        if seen {
            return Ok(false);
        }
        self.db.execute(
            "INSERT INTO artifacts (person, kind, task, slug, path, size, sha256, delivered_as, \
             mtime, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                person,
                record.kind.as_str(),
                &record.task,
                &record.slug,
                &record.path,
                record.size as i64,
                &record.sha256,
                &record.delivered_as,
                record.mtime,
                now_secs()
            ],
        )?;
        Ok(true)
    }

    /// Whether the newest record of the file at `path` under `artifacts/` has this size
    /// and modification time: then its content is taken as recorded, without hashing.
    pub fn artifact_unchanged(
        &self,
        person: &str,
        path: &str,
        size: u64,
        mtime: i64,
    ) -> Result<bool, SiteError> {
        let newest = self.db.row(
            "SELECT size, mtime FROM artifacts WHERE person = ?1 AND kind = 'artifact' \
             AND path = ?2 ORDER BY id DESC LIMIT 1",
            params![person, path],
            |row| Ok::<_, SiteError>((row.get::<i64>(0)?, row.get::<i64>(1)?)),
        )?;
        Ok(newest == Some((size as i64, mtime)))
    }

    /// The person's manifest, oldest first.
    pub fn artifacts(&self, person: &str) -> Result<Vec<Artifact>, SiteError> {
        self.require_person(person)?;
        self.db.rows(
            "SELECT kind, task, slug, path, size, sha256, delivered_as, created FROM artifacts \
             WHERE person = ?1 ORDER BY id",
            params![person],
            |row| {
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
                    size: row.get::<i64>(4)?.max(0) as u64,
                    sha256: row.get(5)?,
                    delivered_as: row.get(6)?,
                    mtime: 0,
                    created: crate::rfc3339(
                        std::time::UNIX_EPOCH
                            + std::time::Duration::from_secs(row.get::<i64>(7)?.max(0) as u64),
                    ),
                })
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(site: &Site, path: &str) {
        site.record_artifact(
            "me",
            &Artifact {
                kind: ArtifactKind::Delivery,
                task: String::new(),
                slug: String::new(),
                path: path.to_owned(),
                size: 1,
                sha256: "00".into(),
                delivered_as: "public/attachments/a.txt".into(),
                created: String::new(),
                mtime: 0,
            },
        )
        .unwrap();
    }

    #[test]
    fn rows_recorded_with_absolute_paths_become_relative_at_open() {
        let tmp = tempfile::tempdir().unwrap();
        let data = std::fs::canonicalize(tmp.path()).unwrap();
        {
            let site = Site::open(&data, crate::testing::config(&data)).unwrap();
            site.add_person("me").unwrap();
            let home = data.join("home/me/drafts/a.txt");
            let private = data.join("private/people/me/artifacts/q3/r.md");
            record(&site, home.to_str().unwrap());
            record(&site, private.to_str().unwrap());
            record(&site, "/elsewhere/old-site/home/me/b.txt");
            record(&site, "shared/public/c.txt");
        }
        let site = Site::open(&data, crate::testing::config(&data)).unwrap();
        let paths: Vec<String> = site
            .artifacts("me")
            .unwrap()
            .into_iter()
            .map(|a| a.path)
            .collect();
        assert_eq!(
            paths,
            [
                "drafts/a.txt",
                "private/people/me/artifacts/q3/r.md",
                "b.txt",
                "shared/public/c.txt"
            ]
        );
    }
}
