//! The metadata database: people, projects and tokens, in SQLite on disk.
//!
//! The gateway and the administration commands open the same file at once, so the
//! database runs in WAL mode with a busy timeout, and the gateway reads tokens from it
//! on every request (a token made by `ferry token create` works at once).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

use crate::SiteError;

/// The base tables; modules with tables of their own add their schema to `SCHEMAS`.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS persons (
    id TEXT PRIMARY KEY,
    created INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS projects (
    person TEXT NOT NULL REFERENCES persons(id),
    id TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (person, id)
);
CREATE TABLE IF NOT EXISTS chat_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    person TEXT NOT NULL REFERENCES persons(id),
    project TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    attachments TEXT NOT NULL,
    created INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chat_messages_by_workspace ON chat_messages (person, project, id);
CREATE TABLE IF NOT EXISTS tokens (
    prefix TEXT PRIMARY KEY,
    hash BLOB NOT NULL,
    person TEXT NOT NULL REFERENCES persons(id),
    kind TEXT NOT NULL,
    created INTEGER NOT NULL,
    -- 'relay': minted by the gateway for its own calls upstream, revoked at its next start.
    purpose TEXT NOT NULL DEFAULT ''
);
";

/// Every schema, run in order at open (each statement is `IF NOT EXISTS`).
const SCHEMAS: &[&str] = &[
    SCHEMA,
    crate::chat::SCHEMA,
    crate::interactions::SCHEMA,
    crate::artifacts::SCHEMA,
    crate::circles::SCHEMA,
    crate::media::SCHEMA,
    crate::nodes::SCHEMA,
    crate::trash::SCHEMA,
    crate::shares::SCHEMA,
    crate::resumable::SCHEMA,
];

/// One connection, shared behind a lock: every query here is a point lookup or a tiny write.
pub(crate) struct Db {
    conn: Mutex<Connection>,
}

impl Db {
    pub(crate) fn open(path: &Path) -> Result<Db, SiteError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        for schema in SCHEMAS {
            conn.execute_batch(schema)?;
        }
        crate::nodes::add_connected_column(&conn)?;
        add_project_name_column(&conn)?;
        Ok(Db {
            conn: Mutex::new(conn),
        })
    }

    /// Runs a one-row query through the statement cache; `None` when no row matches.
    pub(crate) fn row<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        map: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, SiteError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(sql)?;
        Ok(stmt.query_row(params, map).optional()?)
    }

    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite itself consistent; carry on.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Adds `projects.name` (M-DAILY display names) to a database made before it; an empty
/// name means the project is shown by its id. Safe when two processes open at once.
fn add_project_name_column(conn: &Connection) -> rusqlite::Result<()> {
    let has_column = |conn: &Connection| {
        conn.prepare("SELECT 1 FROM pragma_table_info('projects') WHERE name = 'name'")?
            .exists([])
    };
    if has_column(conn)? {
        return Ok(());
    }
    match conn.execute_batch("ALTER TABLE projects ADD COLUMN name TEXT NOT NULL DEFAULT ''") {
        Err(_) if has_column(conn)? => Ok(()),
        other => other,
    }
}

/// Seconds since the Unix epoch, for `created` columns.
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made before projects had names opens, gains the column, and shows its
    /// projects by their ids; opening it again changes nothing.
    #[test]
    fn projects_made_before_names_are_shown_by_their_id() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("old.db");
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(
                "CREATE TABLE persons (id TEXT PRIMARY KEY, created INTEGER NOT NULL);
                 CREATE TABLE projects (person TEXT NOT NULL REFERENCES persons(id),
                     id TEXT NOT NULL, created INTEGER NOT NULL, PRIMARY KEY (person, id));
                 INSERT INTO persons VALUES ('ann', 1);
                 INSERT INTO projects VALUES ('ann', 'q2', 2);",
            )
            .unwrap();
        }
        for _ in 0..2 {
            let db = Db::open(&path).unwrap();
            let name: String = db
                .row("SELECT name FROM projects WHERE id = 'q2'", [], |r| {
                    r.get(0)
                })
                .unwrap()
                .unwrap();
            assert_eq!(name, "");
        }
    }
}
