//! The metadata database's one interface over two engines (spec `scale.md` S-META):
//! SQLite in a file, the embedded default, and PostgreSQL for a site that several
//! gateways share.
//!
//! Callers write each statement once, in the part of SQL both engines speak, with `?N`
//! parameters ([`params!`]); schemas use SQLite's type names, mapped for PostgreSQL. The
//! interface is synchronous, like the code that calls it (always on a blocking thread or
//! a command's own): SQLite runs on the caller's thread behind one lock, PostgreSQL on a
//! small pool of threads of its own, each holding one connection, so a call never runs
//! a database client inside the async runtime.
//!
//! Transactions are serializable on both engines: SQLite's take the write lock at
//! `BEGIN IMMEDIATE`, PostgreSQL's run at `SERIALIZABLE` and are retried, from the
//! start, when the server reports a conflict, so the closure given to
//! [`Db::transaction`] may run more than once and must only touch the database.

mod dialect;
mod migrate;
mod pg;
mod pg_tls;
mod sqlite;
pub mod testing;
mod value;

use std::path::Path;

pub use migrate::{Migration, Step};
pub use value::{FromValue, Row, ToValue, Value};

/// What went wrong, with the engine's own words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite refused or failed.
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL refused or failed, or could not be reached.
    #[error("PostgreSQL: {}", postgres_message(.0))]
    Postgres(#[from] postgres::Error),
    /// A column could not be read as the type asked for.
    #[error("column {index}: {why}")]
    Column {
        /// The column, from 0.
        index: usize,
        /// Why not.
        why: String,
    },
    /// No connection could be had in time (the pool is exhausted or the server is down).
    #[error("the metadata database is unreachable: {0}")]
    Unreachable(String),
    /// A parameter no engine can store alike (text with a NUL character).
    #[error("{why} (parameter {index})")]
    Parameter {
        /// The parameter, from 1.
        index: usize,
        /// Why not.
        why: &'static str,
    },
    /// The configuration names no engine this build speaks, or a bad one.
    #[error("{0}")]
    Config(String),
}

/// The driver's words and, when it has them, the server's or the cause's.
pub(crate) fn postgres_message(e: &postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

impl Error {
    /// A PostgreSQL serialization failure or deadlock: the transaction may be retried.
    fn is_conflict(&self) -> bool {
        use postgres::error::SqlState;
        match self {
            Error::Postgres(e) => matches!(
                e.code(),
                Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE
                    || *c == SqlState::T_R_DEADLOCK_DETECTED
            ),
            _ => false,
        }
    }

    /// A uniqueness constraint refused the write (both engines).
    pub fn is_unique_violation(&self) -> bool {
        match self {
            Error::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            }
            Error::Postgres(e) => e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION),
            _ => false,
        }
    }

    /// A parameter was refused before any engine saw it ([`Error::Parameter`]): text
    /// only a client can have sent, since no stored text holds a NUL.
    pub fn is_unstorable_parameter(&self) -> bool {
        matches!(self, Error::Parameter { .. })
    }

    /// The disk under the database is full (SQLite's `SQLITE_FULL`, PostgreSQL's
    /// `disk_full`): a condition the operator can mend, not a fault of the request.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.code == rusqlite::ErrorCode::DiskFull
            }
            Error::Postgres(e) => e.code() == Some(&postgres::error::SqlState::DISK_FULL),
            _ => false,
        }
    }

    /// The engine could not be reached at all (as opposed to refusing a statement).
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::Unreachable(_) => true,
            Error::Postgres(e) => e.is_closed() || e.code().is_none_or(is_transient_state),
            _ => false,
        }
    }
}

/// A state PostgreSQL ends a connection with when it is not the statement's fault: the
/// connection failed (class 08), or the server is shutting down, crashed, or is not yet
/// taking connections (an administrator's terminate among them).
pub(crate) fn is_transient_state(code: &postgres::error::SqlState) -> bool {
    use postgres::error::SqlState;
    code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
}

/// Which engine a database runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// SQLite in one file.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Engine {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }
}

#[doc(hidden)]
/// What a statement is run for.
#[derive(Clone, Copy)]
pub enum Want {
    /// Its rows.
    Rows,
    /// How many rows it changed.
    Count,
}

#[doc(hidden)]
/// What a statement gave.
pub enum Output {
    /// Rows.
    Rows(Vec<Row>),
    /// Rows changed.
    Count(usize),
}

/// Running statements, the same on a database and inside a transaction.
pub trait Exec {
    #[doc(hidden)]
    fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error>;

    /// Runs a statement that returns no rows; how many rows it changed.
    fn execute(&self, sql: &str, params: &[Value]) -> Result<usize, Error> {
        match self.run(sql, params, Want::Count)? {
            Output::Count(n) => Ok(n),
            Output::Rows(rows) => Ok(rows.len()),
        }
    }

    /// The first row, mapped; `None` when there is none.
    fn row<T, E: From<Error>>(
        &self,
        sql: &str,
        params: &[Value],
        map: impl FnOnce(&Row) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        first_row(self.run(sql, params, Want::Rows)?, map)
    }

    /// Whether the statement returns any row.
    fn exists(&self, sql: &str, params: &[Value]) -> Result<bool, Error> {
        match self.run(sql, params, Want::Rows)? {
            Output::Rows(rows) => Ok(!rows.is_empty()),
            Output::Count(_) => Ok(false),
        }
    }

    /// Every row, mapped.
    fn rows<T, E: From<Error>>(
        &self,
        sql: &str,
        params: &[Value],
        map: impl FnMut(&Row) -> Result<T, E>,
    ) -> Result<Vec<T>, E> {
        match self.run(sql, params, Want::Rows)? {
            Output::Rows(rows) => rows.iter().map(map).collect(),
            Output::Count(_) => Ok(Vec::new()),
        }
    }
}

/// The first of `output`'s rows, mapped.
fn first_row<T, E>(output: Output, map: impl FnOnce(&Row) -> Result<T, E>) -> Result<Option<T>, E> {
    match output {
        Output::Rows(rows) => rows.first().map(map).transpose(),
        Output::Count(_) => Ok(None),
    }
}

/// A metadata database.
pub struct Db {
    inner: Inner,
}

enum Inner {
    Sqlite(sqlite::Sqlite),
    Postgres(Box<pg::Pool>),
}

/// How many connections a gateway keeps to PostgreSQL at most.
pub const POSTGRES_POOL_SIZE: usize = 8;

impl Db {
    /// Opens (making it if missing) the SQLite database in `path`.
    pub fn sqlite(path: &Path) -> Result<Db, Error> {
        Ok(Db {
            inner: Inner::Sqlite(sqlite::Sqlite::open(path)?),
        })
    }

    /// Opens an existing SQLite database for reading only (a copy's source: the file is
    /// left exactly as it was).
    pub fn sqlite_read_only(path: &Path) -> Result<Db, Error> {
        Ok(Db {
            inner: Inner::Sqlite(sqlite::Sqlite::open_read_only(path)?),
        })
    }

    /// Connects to PostgreSQL at `url` (`postgres://user@host/db`, or key=value pairs);
    /// `password`, when given, wins over one in the URL. Connections are made as they
    /// are first needed, so a server that is down now is an error of the first call.
    pub fn postgres(url: &str, password: Option<&str>) -> Result<Db, Error> {
        Ok(Db {
            inner: Inner::Postgres(Box::new(pg::Pool::new(url, password, POSTGRES_POOL_SIZE)?)),
        })
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        match self.inner {
            Inner::Sqlite(_) => Engine::Sqlite,
            Inner::Postgres(_) => Engine::Postgres,
        }
    }

    /// Runs `f` in one serializable transaction, committed when it returns `Ok`. On
    /// PostgreSQL a conflict with another transaction runs `f` again (at most 40 times,
    /// after a short random pause that grows),
    /// so `f` must have no effect outside the database.
    pub fn transaction<T, E: From<Error>>(
        &self,
        mut f: impl FnMut(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        const ATTEMPTS: u32 = 40;
        let mut attempt = 0;
        loop {
            if attempt > 0 {
                std::thread::sleep(backoff(attempt));
            }
            attempt += 1;
            let tx = self.begin()?;
            let result = f(&tx);
            let conflicted = tx.conflicted();
            match result {
                Ok(value) => match tx.commit() {
                    Ok(()) => return Ok(value),
                    Err(e) if e.is_conflict() && attempt < ATTEMPTS => continue,
                    Err(e) => return Err(e.into()),
                },
                Err(_) if conflicted && attempt < ATTEMPTS => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs `f` once in a transaction, for work with effects outside the database that
    /// must not be repeated (placing a file). It holds what it reads with
    /// [`Tx::for_update`]: SQLite's transaction holds the whole database from its start;
    /// PostgreSQL's runs at `READ COMMITTED` and holds the rows selected `FOR UPDATE`, so
    /// no conflict can make it fail at commit.
    pub fn transaction_once<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let tx = match &self.inner {
            Inner::Sqlite(db) => Tx::Sqlite(db.begin()?),
            Inner::Postgres(pool) => Tx::Postgres(pool.begin(false)?),
        };
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    fn begin(&self) -> Result<Tx<'_>, Error> {
        Ok(match &self.inner {
            Inner::Sqlite(db) => Tx::Sqlite(db.begin()?),
            Inner::Postgres(pool) => Tx::Postgres(pool.begin(true)?),
        })
    }

    /// Applies the migrations past the database's version, in order, each once: the
    /// first process to start applies them, others wait (SQLite's write lock, a
    /// PostgreSQL advisory lock) and then find nothing left to do.
    pub fn migrate(&self, migrations: &[Migration]) -> Result<(), Error> {
        match &self.inner {
            Inner::Sqlite(db) => db.migrate(migrations),
            Inner::Postgres(pool) => pool.migrate(migrations),
        }
    }

    /// [`Exec::row`] for an async task, which must not block a runtime's thread on
    /// PostgreSQL: there the statement goes through one connection the caller's runtime
    /// drives, shared by every such lookup. On SQLite it is made here, as `row` would
    /// (a page-cache read behind the database's lock).
    pub async fn row_async<T, E: From<Error>>(
        &self,
        sql: &str,
        params: &[Value],
        map: impl FnOnce(&Row) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        check_params(params)?;
        let output = match &self.inner {
            Inner::Sqlite(db) => sqlite::run(&db.lock(), sql, params, Want::Rows)?,
            Inner::Postgres(pool) => Output::Rows(pool.rows_async(sql, params).await?),
        };
        first_row(output, map)
    }

    /// The schema version the database is at (0: none applied).
    pub fn version(&self) -> Result<i64, Error> {
        self.row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            params![],
            |r| r.get(0),
        )
        .map(|v| v.unwrap_or(0))
    }

    /// The names of a table's columns, in order.
    pub fn columns(&self, table: &str) -> Result<Vec<String>, Error> {
        let sql = match self.engine() {
            Engine::Sqlite => "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
            Engine::Postgres => {
                "SELECT CAST(column_name AS TEXT) FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = ?1
                 ORDER BY ordinal_position"
            }
        };
        self.rows(sql, params![table], |r| r.get(0))
    }

    /// After rows were copied in with their ids, moves `table`'s identity past the
    /// largest `column` (PostgreSQL; SQLite needs nothing).
    pub fn reset_identity(&self, table: &str, column: &str) -> Result<(), Error> {
        if self.engine() == Engine::Postgres {
            self.rows(&reset_identity_sql(table, column), params![], |_| {
                Ok::<_, Error>(())
            })?;
        }
        Ok(())
    }

    /// Sends `payload` to every listener of `channel` (PostgreSQL `NOTIFY`; a SQLite
    /// database has one process's worth of listeners, which need no message).
    pub fn notify(&self, channel: &str, payload: &str) -> Result<(), Error> {
        if self.engine() == Engine::Postgres {
            self.rows(
                "SELECT pg_notify(?1, ?2)",
                params![channel, payload],
                |_| Ok::<_, Error>(()),
            )?;
        }
        Ok(())
    }

    /// Calls `deliver` with each payload sent to `channel` by any process, from a
    /// thread of its own that reconnects after a failure (calling `reconnected` each
    /// time, since messages sent meanwhile were missed). `None` on SQLite.
    pub fn listen(
        &self,
        channel: &str,
        deliver: impl FnMut(String) + Send + 'static,
        reconnected: impl FnMut() + Send + 'static,
    ) -> Option<Listener> {
        match &self.inner {
            Inner::Sqlite(_) => None,
            Inner::Postgres(pool) => Some(pool.listen(channel, deliver, reconnected)),
        }
    }
}

pub use pg::Listener;

/// The pause before a conflicted transaction's next attempt: random, so the two that
/// conflicted do not meet again in step, and growing to at most about 50 ms.
fn backoff(attempt: u32) -> std::time::Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let ceiling_us = 500u64 * u64::from(attempt.min(100));
    std::time::Duration::from_micros(u64::from(nanos) % ceiling_us.max(1))
}

/// Refuses what one engine would store and the other not: PostgreSQL has no NUL in text,
/// so neither engine gets one.
fn check_params(params: &[Value]) -> Result<(), Error> {
    for (i, p) in params.iter().enumerate() {
        if let Value::Text(t) = p
            && t.contains('\0')
        {
            return Err(Error::Parameter {
                index: i + 1,
                why: "text with a NUL character cannot be stored",
            });
        }
    }
    Ok(())
}

impl Exec for Db {
    fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        check_params(params)?;
        match &self.inner {
            Inner::Sqlite(db) => sqlite::run(&db.lock(), sql, params, want),
            Inner::Postgres(pool) => pool.lease()?.run(sql, params, want),
        }
    }
}

/// A transaction under way; rolled back if dropped without [`Db::transaction`]'s commit.
pub enum Tx<'a> {
    #[doc(hidden)]
    Sqlite(sqlite::SqliteTx<'a>),
    #[doc(hidden)]
    Postgres(pg::PgTx<'a>),
}

/// The statement that moves `table`'s identity past the largest `column` (PostgreSQL).
fn reset_identity_sql(table: &str, column: &str) -> String {
    format!(
        "SELECT setval(pg_get_serial_sequence('{table}', '{column}'),
            COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
    )
}

impl Tx<'_> {
    /// [`Db::reset_identity`] inside this transaction, so that rows copied in and the
    /// identity moved past them are seen together (a sequence's new value itself is not
    /// undone by a rollback: it is set again with the next copy).
    pub fn reset_identity(&self, table: &str, column: &str) -> Result<(), Error> {
        if let Tx::Postgres(_) = self {
            self.rows(&reset_identity_sql(table, column), params![], |_| {
                Ok::<_, Error>(())
            })?;
        }
        Ok(())
    }

    fn conflicted(&self) -> bool {
        match self {
            Tx::Sqlite(_) => false,
            Tx::Postgres(tx) => tx.conflicted(),
        }
    }

    fn commit(self) -> Result<(), Error> {
        match self {
            Tx::Sqlite(tx) => tx.commit(),
            Tx::Postgres(tx) => tx.commit(),
        }
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        match self {
            Tx::Sqlite(_) => Engine::Sqlite,
            Tx::Postgres(_) => Engine::Postgres,
        }
    }

    /// The clause that ends a `SELECT` whose rows the transaction must hold until it
    /// ends: `FOR UPDATE` on PostgreSQL; nothing on SQLite, whose transaction holds the
    /// whole database already.
    pub fn for_update(&self) -> &'static str {
        match self {
            Tx::Sqlite(_) => "",
            Tx::Postgres(_) => " FOR UPDATE",
        }
    }
}

impl Exec for Tx<'_> {
    fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        check_params(params)?;
        match self {
            Tx::Sqlite(tx) => tx.run(sql, params, want),
            Tx::Postgres(tx) => tx.run(sql, params, want),
        }
    }
}
