//! `ferry site migrate-metadata` (spec S-META): copies a site's SQLite metadata into an
//! empty PostgreSQL database, in one transaction, and checks every table's row count.
//! The SQLite file is opened read-only and left exactly as it was, so the site can go
//! on (or go back) on SQLite until its configuration names PostgreSQL.

use std::path::Path;

use ferry_sql::{Db, Exec, Value, params};

use crate::SiteError;
use crate::db::TABLES;
use crate::layout::SERVICE_DIR;
use crate::site::DB_FILE;

/// Tables whose ids a sequence hands out on PostgreSQL, moved past the copied ones.
const IDENTITIES: &[(&str, &str)] = &[
    ("chat_messages", "id"),
    ("artifacts", "id"),
    ("audit", "id"),
];

/// One table's rows, as counted on both sides after the copy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableCopied {
    /// The table.
    pub table: String,
    /// Rows in the SQLite file.
    pub sqlite: u64,
    /// Rows in PostgreSQL after the copy.
    pub postgres: u64,
}

/// Copies the metadata of the site at `data` into the PostgreSQL database at `url`,
/// which must be empty (no tables). Returns each table's counts; an error leaves the
/// PostgreSQL database without any of the copy.
pub fn migrate_metadata(
    data: &Path,
    url: &str,
    password: Option<&str>,
) -> Result<Vec<TableCopied>, SiteError> {
    let file = data.join(SERVICE_DIR).join(DB_FILE);
    if !file.is_file() {
        return Err(SiteError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("there is no SQLite metadata at {}", file.display()),
        )));
    }
    let from = Db::sqlite_read_only(&file)?;
    let to = Db::postgres(url, password)?;
    let tables: i64 = to
        .row(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()",
            params![],
            |r| r.get(0),
        )?
        .unwrap_or(0);
    if tables > 0 {
        return Err(SiteError::Io(std::io::Error::other(format!(
            "the PostgreSQL database is not empty ({tables} tables): migrate-metadata copies \
             into an empty one only, so nothing there is overwritten"
        ))));
    }
    // The source must be at this version's schema: the copy is column for column.
    let (at, latest) = (from.version()?, latest_version());
    if at != latest {
        return Err(SiteError::Io(std::io::Error::other(format!(
            "the SQLite metadata is at schema version {at}, this ferry writes {latest}: start \
             `ferry serve` of this version on it once (it updates the schema), stop it, and \
             run migrate-metadata again"
        ))));
    }
    let present: Vec<String> = from.rows(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name != 'schema_version' ORDER BY name",
        params![],
        |r| r.get(0),
    )?;
    if let Some(unknown) = present.iter().find(|t| !TABLES.contains(&t.as_str())) {
        return Err(SiteError::Io(std::io::Error::other(format!(
            "the SQLite metadata has a table {unknown:?} this ferry does not know; nothing \
             was copied"
        ))));
    }
    let mut shapes = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        shapes.push((*table, from.columns(table)?));
    }
    to.migrate(crate::db::MIGRATIONS)?;
    // One snapshot of the source, one transaction on the target: all or nothing.
    let copied = to.transaction_once(|target| {
        from.transaction_once(|source| {
            let mut copied = Vec::new();
            for (table, columns) in &shapes {
                let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
                let columns = columns.join(", ");
                let insert = format!(
                    "INSERT INTO {table} ({columns}) VALUES ({})",
                    marks.join(", ")
                );
                let rows: Vec<Vec<Value>> =
                    source.rows(&format!("SELECT {columns} FROM {table}"), params![], |r| {
                        Ok::<_, ferry_sql::Error>(r.values().to_vec())
                    })?;
                for row in &rows {
                    target.execute(&insert, row)?;
                }
                let count = |db: &dyn Fn(&str) -> Result<Option<i64>, ferry_sql::Error>| {
                    db(&format!("SELECT COUNT(*) FROM {table}"))
                        .map(|n| n.unwrap_or(0).max(0) as u64)
                };
                copied.push(TableCopied {
                    table: (*table).to_owned(),
                    sqlite: count(&|sql| source.row(sql, params![], |r| r.get(0)))?,
                    postgres: count(&|sql| target.row(sql, params![], |r| r.get(0)))?,
                });
            }
            if let Some(off) = copied.iter().find(|c| c.sqlite != c.postgres) {
                return Err(SiteError::Io(std::io::Error::other(format!(
                    "table {} has {} rows in SQLite but {} in PostgreSQL after the copy; \
                     nothing was kept",
                    off.table, off.sqlite, off.postgres
                ))));
            }
            Ok(copied)
        })
    })?;
    for (table, column) in IDENTITIES {
        to.reset_identity(table, column)?;
    }
    // Beside the SQLite file, never in it: the site's metadata lives elsewhere now, and a
    // command or gateway still pointed at the file is refused instead of acting on a
    // copy nobody else reads.
    let note = format!(
        "The metadata of this site was copied to PostgreSQL ({}) at {}.\n\
         Set [metadata] url (the password in FERRY_METADATA__PASSWORD) to use it.\n",
        where_only(url),
        crate::rfc3339(std::time::SystemTime::now())
    );
    std::fs::write(data.join(SERVICE_DIR).join(MOVED_FILE), note)?;
    Ok(copied)
}

/// Beside a SQLite file whose metadata was copied to PostgreSQL.
pub(crate) const MOVED_FILE: &str = "metadata-moved";

/// `postgres://…@host/db?…` as host and database only: no user, password or options.
fn where_only(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rfind('@').map_or(rest, |at| &rest[at + 1..]);
    rest.split(['?', '#']).next().unwrap_or_default().to_owned()
}

/// Refuses to open a SQLite file whose metadata moved to PostgreSQL.
pub(crate) fn refuse_moved(data: &Path) -> Result<(), SiteError> {
    match std::fs::read_to_string(data.join(SERVICE_DIR).join(MOVED_FILE)) {
        Ok(note) => Err(SiteError::Io(std::io::Error::other(format!(
            "{} (remove {} to use the SQLite file again)",
            note.trim().replace('\n', " "),
            Path::new(SERVICE_DIR).join(MOVED_FILE).display()
        )))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn latest_version() -> i64 {
    crate::db::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}
