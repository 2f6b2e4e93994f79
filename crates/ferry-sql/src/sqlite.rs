//! SQLite: one connection behind a lock (every statement here is a point lookup or a
//! small write), in WAL mode with a busy timeout, since the gateway and the
//! administration commands open the same file at once.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::migrate::{Migration, Step};
use crate::{Error, Output, Row, Value, Want};

pub(crate) struct Sqlite {
    conn: Mutex<Connection>,
}

impl Sqlite {
    pub(crate) fn open(path: &Path) -> Result<Sqlite, Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        Ok(Sqlite {
            conn: Mutex::new(conn),
        })
    }

    /// Opens an existing file for reading only: nothing, not even the journal mode, is
    /// changed in it.
    pub(crate) fn open_read_only(path: &Path) -> Result<Sqlite, Error> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(10))?;
        Ok(Sqlite {
            conn: Mutex::new(conn),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite itself consistent; carry on.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn begin(&self) -> Result<SqliteTx<'_>, Error> {
        let conn = self.lock();
        // A read-only database takes no write lock: its transaction is a snapshot.
        conn.execute_batch(if conn.is_readonly("main")? {
            "BEGIN DEFERRED"
        } else {
            "BEGIN IMMEDIATE"
        })?;
        Ok(SqliteTx { conn, done: false })
    }

    pub(crate) fn migrate(&self, migrations: &[Migration]) -> Result<(), Error> {
        let tx = self.begin()?;
        tx.conn.execute_batch(crate::migrate::VERSION_TABLE)?;
        let at: i64 = tx.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |r| r.get(0),
        )?;
        for migration in migrations.iter().filter(|m| m.version > at) {
            for step in migration.steps {
                match *step {
                    Step::Sql(sql) => tx.conn.execute_batch(sql)?,
                    Step::AddColumn {
                        table,
                        column,
                        decl,
                    } => {
                        let has: bool = tx.conn.query_row(
                            "SELECT COUNT(*) > 0 FROM pragma_table_info(?1) WHERE name = ?2",
                            [table, column],
                            |r| r.get(0),
                        )?;
                        if !has {
                            tx.conn.execute_batch(&format!(
                                "ALTER TABLE {table} ADD COLUMN {column} {decl}"
                            ))?;
                        }
                    }
                }
            }
            tx.conn.execute(
                "INSERT INTO schema_version (version) VALUES (?1)",
                [migration.version],
            )?;
        }
        tx.commit()
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Integer(*v),
            Value::Real(v) => ValueRef::Real(*v),
            Value::Text(v) => ValueRef::Text(v.as_bytes()),
            Value::Blob(v) => ValueRef::Blob(v),
        }))
    }
}

/// Runs one statement through the connection's statement cache.
pub(crate) fn run(
    conn: &Connection,
    sql: &str,
    params: &[Value],
    want: Want,
) -> Result<Output, Error> {
    let mut stmt = conn.prepare_cached(sql)?;
    let params = rusqlite::params_from_iter(params.iter());
    match want {
        Want::Count => Ok(Output::Count(stmt.execute(params)?)),
        Want::Rows => {
            let columns = stmt.column_count();
            let mut rows = stmt.query(params)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let mut values = Vec::with_capacity(columns);
                for i in 0..columns {
                    values.push(match row.get_ref(i)? {
                        ValueRef::Null => Value::Null,
                        ValueRef::Integer(v) => Value::Int(v),
                        ValueRef::Real(v) => Value::Real(v),
                        ValueRef::Text(v) => Value::Text(
                            std::str::from_utf8(v)
                                .map_err(|e| Error::Column {
                                    index: i,
                                    why: format!("text that is not UTF-8: {e}"),
                                })?
                                .to_owned(),
                        ),
                        ValueRef::Blob(v) => Value::Blob(v.to_vec()),
                    });
                }
                out.push(Row(values));
            }
            Ok(Output::Rows(out))
        }
    }
}

/// A transaction holding the connection (and SQLite's write lock) until it ends.
pub struct SqliteTx<'a> {
    conn: MutexGuard<'a, Connection>,
    done: bool,
}

impl SqliteTx<'_> {
    pub(crate) fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        run(&self.conn, sql, params, want)
    }

    pub(crate) fn commit(mut self) -> Result<(), Error> {
        self.conn.execute_batch("COMMIT")?;
        self.done = true;
        Ok(())
    }
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}
