//! The media store's records (spec core C-MEDIA) in the site's metadata database, and
//! [`Site::media`], the store of this site.

use std::sync::Arc;
use std::time::Duration;

use ferry_media::{Blobs, MediaError, MediaId, MediaRecord, MediaRecords, MediaSource, MediaStore};
use rusqlite::Row;

use crate::Site;
use crate::db::Db;
use crate::layout::MEDIA_DIR;

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS media (
    id TEXT PRIMARY KEY,
    original_name TEXT NOT NULL,
    -- NULL for bytes given to the gateway itself rather than fetched from a node.
    source_node TEXT,
    source_path TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    media_type TEXT NOT NULL,
    created INTEGER NOT NULL,
    expires INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS media_by_expiry ON media (expires);
CREATE INDEX IF NOT EXISTS media_by_blob ON media (sha256);
";

const COLUMNS: &str =
    "id, original_name, source_node, source_path, size, sha256, media_type, created, expires";

/// [`MediaRecords`] in the site's SQLite database.
pub struct SqliteMediaRecords {
    db: Arc<Db>,
}

impl Site {
    /// Bytes and count of the distinct blobs the media records hold (S-OPS's media store
    /// size); a blob no record holds any longer, waiting for the sweeper, is not counted.
    pub fn media_stored(&self) -> Result<(u64, u64), crate::SiteError> {
        let row = self.db.row(
            "SELECT COALESCE(SUM(size), 0), COUNT(*) \
             FROM (SELECT MAX(size) AS size FROM media GROUP BY sha256)",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
        )?;
        let (bytes, blobs) = row.unwrap_or((0, 0));
        Ok((
            u64::try_from(bytes).unwrap_or(0),
            u64::try_from(blobs).unwrap_or(0),
        ))
    }

    /// The folder of the media store's blobs, [`MEDIA_DIR`] in the data folder.
    pub fn media_dir(&self) -> std::path::PathBuf {
        self.path().join(MEDIA_DIR)
    }

    /// The media store of this site: blobs under [`MEDIA_DIR`], records in the metadata
    /// database, records kept `[media] ttl_hours`.
    pub fn media(&self) -> Result<MediaStore, MediaError> {
        let blobs = Blobs::local(&self.media_dir())?;
        let records = Arc::new(SqliteMediaRecords {
            db: self.db.clone(),
        });
        let ttl = Duration::from_secs(self.config().media.ttl_hours.saturating_mul(3600));
        Ok(MediaStore::new(
            blobs,
            records,
            ttl,
            ferry_config::limits::MEDIA_BLOB_MAX_BYTES,
        ))
    }
}

fn db_error(e: rusqlite::Error) -> MediaError {
    MediaError::Records(e.to_string())
}

fn record_of(row: &Row<'_>) -> rusqlite::Result<Result<MediaRecord, MediaError>> {
    let id: String = row.get(0)?;
    let size: i64 = row.get(4)?;
    // A row this code did not write (an id that no longer parses) is reported, not
    // trusted.
    let Ok(parsed) = MediaId::parse(&id) else {
        return Ok(Err(MediaError::Records(format!(
            "the media table holds {id:?}, which is not a media id"
        ))));
    };
    Ok(Ok(MediaRecord {
        id: parsed,
        original_name: row.get(1)?,
        source: MediaSource {
            node: row.get(2)?,
            path: row.get(3)?,
        },
        size: u64::try_from(size).unwrap_or(0),
        sha256: row.get(5)?,
        media_type: row.get(6)?,
        created: row.get(7)?,
        expires: row.get(8)?,
        local_path: None,
    }))
}

impl SqliteMediaRecords {
    fn many<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> Result<Vec<MediaRecord>, MediaError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare_cached(sql).map_err(db_error)?;
        let rows = stmt.query_map(params, record_of).map_err(db_error)?;
        let mut records = Vec::new();
        for row in rows {
            records.push(row.map_err(db_error)??);
        }
        Ok(records)
    }
}

impl MediaRecords for SqliteMediaRecords {
    fn insert(&self, r: &MediaRecord) -> Result<(), MediaError> {
        let size = i64::try_from(r.size).map_err(|_| MediaError::TooLarge {
            max_bytes: i64::MAX as u64,
        })?;
        self.db
            .conn()
            .prepare_cached(&format!(
                "INSERT INTO media ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![
                    r.id.as_str(),
                    r.original_name,
                    r.source.node,
                    r.source.path,
                    size,
                    r.sha256,
                    r.media_type,
                    r.created,
                    r.expires,
                ])
            })
            .map_err(db_error)?;
        Ok(())
    }

    fn get(&self, id: &MediaId) -> Result<Option<MediaRecord>, MediaError> {
        let mut found = self.many(
            &format!("SELECT {COLUMNS} FROM media WHERE id = ?1"),
            [id.as_str()],
        )?;
        Ok(found.pop())
    }

    fn list(&self) -> Result<Vec<MediaRecord>, MediaError> {
        self.many(
            &format!("SELECT {COLUMNS} FROM media ORDER BY created, rowid"),
            [],
        )
    }

    fn expired(&self, now: i64) -> Result<Vec<MediaRecord>, MediaError> {
        self.many(
            &format!("SELECT {COLUMNS} FROM media WHERE expires <= ?1 ORDER BY expires, rowid"),
            [now],
        )
    }

    fn delete(&self, id: &MediaId) -> Result<bool, MediaError> {
        let n = self
            .db
            .conn()
            .execute("DELETE FROM media WHERE id = ?1", [id.as_str()])
            .map_err(db_error)?;
        Ok(n > 0)
    }

    fn references(&self, sha256: &str) -> Result<bool, MediaError> {
        self.db
            .row(
                "SELECT 1 FROM media WHERE sha256 = ?1 LIMIT 1",
                [sha256],
                |_| Ok(()),
            )
            .map(|row| row.is_some())
            .map_err(|e| MediaError::Records(e.to_string()))
    }
}
