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
/// which must be empty (no tables, or only the tables of a run of this command that was
/// stopped before its copy was kept, all of them without a row). Returns each table's
/// counts; an error leaves the PostgreSQL database without any of the copy.
///
/// The copy and the identities moved past it are one transaction: a run stopped
/// anywhere (killed, say) leaves the database with all of it or none. A run again after
/// one stopped before the copy was kept copies; after one stopped once it was kept (the
/// note beside the SQLite file not yet written), it finds the copy whole, each count
/// equal to the SQLite file's, and only writes the note.
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
    let copied = match target_state(&to)? {
        Target::Empty => copy(&from, &to)?,
        Target::Holding(rows) => {
            // Kept by a run that stopped before it wrote the note: whole if every count
            // is the SQLite file's (the copy is one transaction, so it is all or nothing).
            let copied = counts(&from, &rows)?;
            if to.version()? != latest || copied.iter().any(|c| c.sqlite != c.postgres) {
                let tables = rows.iter().filter(|(_, n)| *n > 0).count();
                return Err(SiteError::Io(std::io::Error::other(format!(
                    "the PostgreSQL database is not empty ({tables} tables with rows that are \
                     not this site's copy): migrate-metadata copies into an empty one only, so \
                     nothing there is overwritten"
                ))));
            }
            copied
        }
        Target::Foreign(tables) => {
            return Err(SiteError::Io(std::io::Error::other(format!(
                "the PostgreSQL database is not empty ({tables} tables): migrate-metadata \
                 copies into an empty one only, so nothing there is overwritten"
            ))));
        }
    };
    // Beside the SQLite file, never in it: the site's metadata lives elsewhere now, and a
    // command or gateway still pointed at the file is refused instead of acting on a
    // copy nobody else reads.
    let note = format!(
        "The metadata of this site was copied to PostgreSQL ({}) at {}.\n\
         Set [metadata] url (the password in FERRY_METADATA__PASSWORD) to use it.\n",
        where_only(url),
        crate::rfc3339(std::time::SystemTime::now())
    );
    write_note(&data.join(SERVICE_DIR), &note)?;
    Ok(copied)
}

/// What the PostgreSQL database holds before a copy.
enum Target {
    /// Nothing: no table, or only tables of this site's schema without a row.
    Empty,
    /// This site's tables, some with rows: each table's rows.
    Holding(Vec<(String, u64)>),
    /// Tables that are not this site's: how many.
    Foreign(usize),
}

fn target_state(to: &Db) -> Result<Target, SiteError> {
    let tables: Vec<String> = to.rows(
        "SELECT CAST(table_name AS TEXT) FROM information_schema.tables \
         WHERE table_schema = current_schema()",
        params![],
        |r| r.get(0),
    )?;
    let ours = |t: &String| t == "schema_version" || TABLES.contains(&t.as_str());
    if !tables.iter().all(ours) {
        return Ok(Target::Foreign(tables.len()));
    }
    let mut rows = Vec::new();
    for table in TABLES {
        if tables.iter().any(|t| t == table) {
            rows.push(((*table).to_owned(), count(to, table)?));
        } else {
            rows.push(((*table).to_owned(), 0));
        }
    }
    if rows.iter().all(|(_, n)| *n == 0) {
        return Ok(Target::Empty);
    }
    Ok(Target::Holding(rows))
}

/// The rows of `table`.
fn count(db: &impl Exec, table: &str) -> Result<u64, SiteError> {
    let n: Option<i64> = db.row(&format!("SELECT COUNT(*) FROM {table}"), params![], |r| {
        r.get(0)
    })?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// Each table's rows in the SQLite file beside those `rows` in PostgreSQL.
fn counts(from: &Db, rows: &[(String, u64)]) -> Result<Vec<TableCopied>, SiteError> {
    rows.iter()
        .map(|(table, postgres)| {
            Ok(TableCopied {
                table: table.clone(),
                sqlite: count(from, table)?,
                postgres: *postgres,
            })
        })
        .collect()
}

/// Makes the schema (what a stopped run made of it is completed) and copies every row,
/// in one transaction with the identities moved past the copied ids.
fn copy(from: &Db, to: &Db) -> Result<Vec<TableCopied>, SiteError> {
    let mut shapes = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        shapes.push((*table, from.columns(table)?));
    }
    to.migrate(crate::db::MIGRATIONS)?;
    // One snapshot of the source, one transaction on the target: all or nothing.
    to.transaction_once(|target| {
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
                copied.push(TableCopied {
                    table: (*table).to_owned(),
                    sqlite: count(source, table)?,
                    postgres: count(target, table)?,
                });
            }
            if let Some(off) = copied.iter().find(|c| c.sqlite != c.postgres) {
                return Err(SiteError::Io(std::io::Error::other(format!(
                    "table {} has {} rows in SQLite but {} in PostgreSQL after the copy; \
                     nothing was kept",
                    off.table, off.sqlite, off.postgres
                ))));
            }
            for (table, column) in IDENTITIES {
                target.reset_identity(table, column)?;
            }
            Ok(copied)
        })
    })
}

/// Writes the note beside the SQLite file whole or not at all (a temporary renamed).
fn write_note(service: &Path, note: &str) -> Result<(), SiteError> {
    let temporary = service.join(format!(".{MOVED_FILE}.new"));
    std::fs::write(&temporary, note)?;
    std::fs::rename(&temporary, service.join(MOVED_FILE))?;
    Ok(())
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
