//! Resumable uploads (spec members M-DAILY, tus 1.0) as the site keeps them: one row per
//! upload in the metadata database (whose it is, where it goes, how long it is, which
//! staged temporary holds its bytes and until when), so that an upload outlives a
//! dropped connection, a reloaded page and a restart of the gateway; and the folder of
//! `public/` a finished upload is placed in.

use ferry_fs::Dir;
use ferry_sql::Row;

use crate::db::{Exec, params};
use crate::public::{PublicFolder, PublicPlace};
use crate::{Site, SiteError};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS resumable_uploads (
    id TEXT PRIMARY KEY,
    person TEXT NOT NULL REFERENCES persons(id),
    project TEXT,
    -- The folder the file goes in ('public/…'); NULL for public/ itself.
    folder TEXT,
    name TEXT NOT NULL,
    given TEXT NOT NULL,
    -- The Upload-Metadata header as the client sent it, for HEAD to answer.
    metadata TEXT NOT NULL,
    replace_existing INTEGER NOT NULL,
    length INTEGER NOT NULL,
    -- Bytes received as of the last part; the staged file itself decides after a restart.
    received INTEGER NOT NULL,
    temp TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    created INTEGER NOT NULL,
    expires INTEGER NOT NULL,
    -- The placed file as JSON once the upload is complete; NULL before.
    done TEXT,
    -- 1 once the staged bytes were removed after the upload expired.
    gone INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS resumable_uploads_by_expiry ON resumable_uploads (expires);
";

const COLUMNS: &str = "id, person, project, folder, name, given, replace_existing, length, \
                       received, temp, dev, ino, created, expires, done, gone, metadata";

/// One resumable upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumableRecord {
    /// The id in its URL: random, unguessable.
    pub id: String,
    /// Whose upload it is.
    pub person: String,
    /// The project whose workspace receives it; none for the main one.
    pub project: Option<String>,
    /// The folder (`public/…`) the file is placed in; none for `public/` itself.
    pub folder: Option<String>,
    /// The safe name the file gets (C-NAME, allowlist checked).
    pub name: String,
    /// The name as the client sent it.
    pub given: String,
    /// Whether a file already at the name is replaced (else `409 exists` at the end).
    pub replace: bool,
    /// Bytes the upload declared (`Upload-Length`).
    pub length: u64,
    /// Bytes received as of the last part.
    pub received: u64,
    /// The staged temporary's hidden name in the workspace's `public/`.
    pub temp: String,
    /// Its device, so that another file at its name is refused.
    pub dev: u64,
    /// Its inode, so that another file at its name is refused.
    pub ino: u64,
    /// When the upload was created (Unix seconds).
    pub created: i64,
    /// When it expires (Unix seconds): moved on by every part.
    pub expires: i64,
    /// The placed file as JSON, once complete.
    pub done: Option<String>,
    /// The staged bytes were removed after the upload expired.
    pub gone: bool,
    /// The `Upload-Metadata` header as sent.
    pub metadata: String,
}

fn record_of(row: &Row) -> Result<ResumableRecord, SiteError> {
    let unsigned = |i: usize| -> Result<u64, SiteError> {
        let v: i64 = row.get(i)?;
        Ok(u64::try_from(v).unwrap_or(0))
    };
    Ok(ResumableRecord {
        id: row.get(0)?,
        person: row.get(1)?,
        project: row.get(2)?,
        folder: row.get(3)?,
        name: row.get(4)?,
        given: row.get(5)?,
        replace: row.get::<i64>(6)? != 0,
        length: unsigned(7)?,
        received: unsigned(8)?,
        temp: row.get(9)?,
        dev: unsigned(10)?,
        ino: unsigned(11)?,
        created: row.get(12)?,
        expires: row.get(13)?,
        done: row.get(14)?,
        gone: row.get::<i64>(15)? != 0,
        metadata: row.get(16)?,
    })
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Site {
    /// Records a new resumable upload.
    pub fn resumable_insert(&self, r: &ResumableRecord) -> Result<(), SiteError> {
        self.db.execute(
            &format!(
                "INSERT INTO resumable_uploads ({COLUMNS}) VALUES \
                 (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
            ),
            params![
                &r.id,
                &r.person,
                &r.project,
                &r.folder,
                &r.name,
                &r.given,
                i64::from(r.replace),
                signed(r.length),
                signed(r.received),
                &r.temp,
                signed(r.dev),
                signed(r.ino),
                r.created,
                r.expires,
                &r.done,
                i64::from(r.gone),
                &r.metadata,
            ],
        )?;
        Ok(())
    }

    /// The upload with this id, whoever's it is.
    pub fn resumable_get(&self, id: &str) -> Result<Option<ResumableRecord>, SiteError> {
        self.db.row(
            &format!("SELECT {COLUMNS} FROM resumable_uploads WHERE id = ?1"),
            params![id],
            record_of,
        )
    }

    /// Notes the bytes received and the new expiry after a part.
    pub fn resumable_progress(
        &self,
        id: &str,
        received: u64,
        expires: i64,
    ) -> Result<(), SiteError> {
        self.db.execute(
            "UPDATE resumable_uploads SET received = ?2, expires = ?3 WHERE id = ?1",
            params![id, signed(received), expires],
        )?;
        Ok(())
    }

    /// Notes that the upload is complete and placed, as `done` (JSON) says.
    pub fn resumable_complete(
        &self,
        id: &str,
        received: u64,
        done: &str,
        expires: i64,
    ) -> Result<(), SiteError> {
        self.db.execute(
            "UPDATE resumable_uploads SET received = ?2, done = ?3, expires = ?4 WHERE id = ?1",
            params![id, signed(received), done, expires],
        )?;
        Ok(())
    }

    /// Notes that the staged bytes of an expired upload were removed.
    pub fn resumable_mark_gone(&self, id: &str) -> Result<(), SiteError> {
        self.db.execute(
            "UPDATE resumable_uploads SET gone = 1 WHERE id = ?1",
            params![id],
        )?;
        Ok(())
    }

    /// Forgets the upload.
    pub fn resumable_remove(&self, id: &str) -> Result<(), SiteError> {
        self.db
            .execute("DELETE FROM resumable_uploads WHERE id = ?1", params![id])?;
        Ok(())
    }

    /// How many uploads `person` has in progress (neither complete nor expired).
    pub fn resumable_in_progress(&self, person: &str) -> Result<usize, SiteError> {
        let n: Option<i64> = self.db.row(
            "SELECT COUNT(*) FROM resumable_uploads \
             WHERE person = ?1 AND done IS NULL AND gone = 0",
            params![person],
            |row| row.get(0),
        )?;
        Ok(usize::try_from(n.unwrap_or(0)).unwrap_or(usize::MAX))
    }

    /// Takes the upload for one request of gateway `holder` for `lease_secs` (spec
    /// S-GATEWAYS: two gateways never write one upload at once): it must be in progress
    /// and held by nobody else, or by a holder whose lease ran out. Answers the bytes
    /// received as the site knows them; `None` when it is held elsewhere, complete or
    /// gone.
    pub fn resumable_claim(
        &self,
        id: &str,
        holder: &str,
        lease_secs: i64,
    ) -> Result<Option<u64>, SiteError> {
        let now = crate::db::now_secs();
        let received: Option<i64> = self.db.row(
            "UPDATE resumable_uploads SET holder = ?2, held_until = ?3
             WHERE id = ?1 AND done IS NULL AND gone = 0
               AND (holder = '' OR holder = ?2 OR held_until < ?4)
             RETURNING received",
            params![id, holder, now.saturating_add(lease_secs), now],
            |r| r.get(0),
        )?;
        Ok(received.map(|r| u64::try_from(r).unwrap_or(0)))
    }

    /// Moves `holder`'s lease on the upload to `lease_secs` from now; `false` when it no
    /// longer holds it.
    pub fn resumable_renew(
        &self,
        id: &str,
        holder: &str,
        lease_secs: i64,
    ) -> Result<bool, SiteError> {
        let until = crate::db::now_secs().saturating_add(lease_secs);
        Ok(self.db.execute(
            "UPDATE resumable_uploads SET held_until = ?3 WHERE id = ?1 AND holder = ?2",
            params![id, holder, until],
        )? == 1)
    }

    /// Lets the upload go, if `holder` holds it.
    pub fn resumable_release(&self, id: &str, holder: &str) -> Result<(), SiteError> {
        self.db.execute(
            "UPDATE resumable_uploads SET holder = '', held_until = 0 WHERE id = ?1 AND holder = ?2",
            params![id, holder],
        )?;
        Ok(())
    }

    /// The uploads whose expiry is at or before `now` (Unix seconds).
    pub fn resumable_expired(&self, now: i64) -> Result<Vec<ResumableRecord>, SiteError> {
        self.db.rows(
            &format!(
                "SELECT {COLUMNS} FROM resumable_uploads WHERE expires <= ?1 ORDER BY expires"
            ),
            params![now],
            record_of,
        )
    }
}

impl PublicFolder {
    /// The folder a member's upload is placed in: `public/` itself for none (or
    /// `public`), else an existing folder beneath it reached with no link followed
    /// (`folder_not_found` when there is none), never `public/attachments` nor what lies
    /// beneath it (`managed_by_system`). The same rules as `POST /v1/media`'s `folder`.
    pub fn upload_folder(&self, folder: Option<&str>) -> Result<Dir, SiteError> {
        let place = match folder {
            Some(folder) => PublicPlace::upload_folder(folder)?,
            None => PublicPlace::Public,
        };
        self.place_dir(&place)
    }
}
