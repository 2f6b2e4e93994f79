//! The media store's records (spec core C-MEDIA) in the site's metadata database, and
//! [`Site::media`], the store of this site.

use std::sync::Arc;
use std::time::Duration;

use ferry_media::{Blobs, MediaError, MediaId, MediaRecord, MediaRecords, MediaSource, MediaStore};
use ferry_sql::{Row, Value};

use crate::Site;
use crate::db::{Db, Exec, params};
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

const COLUMNS: &str = "id, original_name, source_node, source_path, size, sha256, media_type, \
     created, expires, person";

/// [`MediaRecords`] in the site's metadata database.
pub struct DbMediaRecords {
    db: Arc<Db>,
}

impl Site {
    /// Bytes and count of the distinct blobs the media records hold (S-OPS's media store
    /// size); a blob no record holds any longer, waiting for the sweeper, is not counted.
    pub fn media_stored(&self) -> Result<(u64, u64), crate::SiteError> {
        let row = self.db.row(
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT), COUNT(*) \
             FROM (SELECT MAX(size) AS size FROM media GROUP BY sha256) AS blobs",
            params![],
            |row| Ok::<_, crate::SiteError>((row.get::<i64>(0)?, row.get::<i64>(1)?)),
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

    /// The blobs of this site's media store: under [`MEDIA_DIR`], or in the S3 bucket of
    /// `[media] backend = "s3"` (with the trees `dir_fetch` extracts still under
    /// [`MEDIA_DIR`]).
    pub fn blobs(&self) -> Result<Blobs, MediaError> {
        let media = &self.config().media;
        if media.backend == ferry_config::MediaBackend::Local {
            return Blobs::local(&self.media_dir());
        }
        if let Some(blobs) = self.s3_blobs.get() {
            return Ok(blobs.clone());
        }
        let prefix = self
            .store_name()
            .map_err(|e| MediaError::Records(e.to_string()))?;
        let blobs = Blobs::s3(&self.media_dir(), media, &format!("ferry-{prefix}"))?;
        Ok(self.s3_blobs.get_or_init(|| blobs).clone())
    }

    /// The media store of this site: [`Site::blobs`], records in the metadata database,
    /// records kept `[media] ttl_hours`.
    pub fn media(&self) -> Result<MediaStore, MediaError> {
        let blobs = self.blobs()?;
        let records = Arc::new(DbMediaRecords {
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

fn db_error(e: ferry_sql::Error) -> MediaError {
    MediaError::Records(e.to_string())
}

fn record_of(row: &Row) -> Result<MediaRecord, MediaError> {
    let get = |e: ferry_sql::Error| db_error(e);
    let id: String = row.get(0).map_err(get)?;
    let size: i64 = row.get(4).map_err(get)?;
    // A row this code did not write (an id that no longer parses) is reported, not
    // trusted.
    let Ok(parsed) = MediaId::parse(&id) else {
        return Err(MediaError::Records(format!(
            "the media table holds {id:?}, which is not a media id"
        )));
    };
    let read = || -> Result<MediaRecord, ferry_sql::Error> {
        Ok(MediaRecord {
            id: parsed,
            original_name: row.get(1)?,
            source: MediaSource {
                node: row.get(2)?,
                path: row.get(3)?,
                person: row.get(9)?,
            },
            size: u64::try_from(size).unwrap_or(0),
            sha256: row.get(5)?,
            media_type: row.get(6)?,
            created: row.get(7)?,
            expires: row.get(8)?,
            local_path: None,
            location: None,
        })
    };
    read().map_err(get)
}

impl DbMediaRecords {
    fn many(&self, sql: &str, params: &[Value]) -> Result<Vec<MediaRecord>, MediaError> {
        self.db
            .rows(sql, params, |r| Ok::<_, ferry_sql::Error>(record_of(r)))
            .map_err(db_error)?
            .into_iter()
            .collect()
    }
}

impl MediaRecords for DbMediaRecords {
    fn insert(&self, r: &MediaRecord) -> Result<(), MediaError> {
        let size = i64::try_from(r.size).map_err(|_| MediaError::TooLarge {
            max_bytes: i64::MAX as u64,
        })?;
        self.db
            .execute(
                &format!(
                    "INSERT INTO media ({COLUMNS}, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, {})",
                    crate::db::next_seq("media")
                ),
                params![
                    r.id.as_str(),
                    &r.original_name,
                    &r.source.node,
                    &r.source.path,
                    size,
                    &r.sha256,
                    &r.media_type,
                    r.created,
                    r.expires,
                    &r.source.person,
                ],
            )
            .map_err(db_error)?;
        Ok(())
    }

    fn get(&self, id: &MediaId) -> Result<Option<MediaRecord>, MediaError> {
        let mut found = self.many(
            &format!("SELECT {COLUMNS} FROM media WHERE id = ?1"),
            params![id.as_str()],
        )?;
        Ok(found.pop())
    }

    fn list(&self) -> Result<Vec<MediaRecord>, MediaError> {
        self.many(
            &format!("SELECT {COLUMNS} FROM media ORDER BY created, seq, id"),
            params![],
        )
    }

    fn expired(&self, now: i64) -> Result<Vec<MediaRecord>, MediaError> {
        self.many(
            &format!("SELECT {COLUMNS} FROM media WHERE expires <= ?1 ORDER BY expires, seq, id"),
            params![now],
        )
    }

    fn delete(&self, id: &MediaId) -> Result<bool, MediaError> {
        let n = self
            .db
            .execute("DELETE FROM media WHERE id = ?1", params![id.as_str()])
            .map_err(db_error)?;
        Ok(n > 0)
    }

    fn references(&self, sha256: &str) -> Result<bool, MediaError> {
        self.db
            .exists(
                "SELECT 1 FROM media WHERE sha256 = ?1 LIMIT 1",
                params![sha256],
            )
            .map_err(db_error)
    }
}
