//! PostgreSQL: a pool of connections, each made when first needed and made again after
//! it breaks, each with a thread of its own. A caller leases one; a transaction keeps
//! its lease until it ends. The driver blocks on a small runtime of its own, so a caller
//! outside every runtime makes its statements itself, and any other hands them to the
//! connection's thread and waits for the answers. Async tasks' lookups on every request
//! (the token check) go through one more connection, which their runtime drives.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Statement};

use crate::migrate::{ADVISORY_LOCK_KEY, Migration, Step, VERSION_TABLE};
use crate::pg_tls::Connector;
use crate::{Error, Output, Row, Value, Want, dialect};

/// How long a caller waits for a free connection before giving up.
const LEASE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long making a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Prepared statements a worker keeps; past this the cache starts over.
const STATEMENT_CACHE: usize = 512;
/// The pause before a listener tries its connection again.
const LISTEN_RETRY: Duration = Duration::from_secs(1);

/// Whether a statement may be sent from this thread: one outside every runtime (a
/// command's, a test's). The driver blocks on a runtime of its own, which must never
/// happen on a thread that runs async tasks (it would stall them, or panic), nor on a
/// blocking pool's: statements there would put their rows in every such thread's
/// allocator arena, and the gateway's memory grows with it (`docs/decisions.md`).
fn may_block_here() -> bool {
    tokio::runtime::Handle::try_current().is_err()
}

enum Job {
    Run {
        sql: String,
        params: Vec<Value>,
        want: Want,
        reply: SyncSender<Result<Output, Error>>,
    },
    Batch {
        sql: String,
        reply: SyncSender<Result<(), Error>>,
    },
    /// A client to close here, where blocking is allowed (closing says goodbye to the
    /// server through the driver's runtime).
    Close(Box<Client>),
}

/// One connection, with its prepared statements. It is used by one caller at a time
/// (the lease's), from the caller's thread or from the connection's own.
struct Conn {
    config: Connector,
    client: Option<Client>,
    statements: HashMap<String, Statement>,
    /// A transaction is open on the connection: if it breaks, the statements still to
    /// come must fail rather than run, without it, on a new connection.
    in_transaction: bool,
}

impl Conn {
    /// The client, made again if it broke; `ends`: the statement to come ends a
    /// transaction.
    fn client(&mut self, ends: bool) -> Result<&mut Client, Error> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.statements.clear();
            self.client = None;
            if self.in_transaction {
                self.in_transaction = !ends;
                return Err(Error::Unreachable(
                    "the connection broke midway through a transaction, which did not happen"
                        .into(),
                ));
            }
            self.client = Some(self.config.connect()?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| Error::Unreachable("no connection".into()))
    }

    fn batch(&mut self, sql: &str) -> Result<(), Error> {
        let begins = sql.starts_with("BEGIN");
        let ends = sql == "COMMIT" || sql == "ROLLBACK";
        let done = self.client(ends)?.batch_execute(sql).map_err(Error::from);
        if begins && done.is_ok() {
            self.in_transaction = true;
        }
        if ends {
            self.in_transaction = false;
        }
        done
    }

    /// Runs `sql`, already in PostgreSQL's placeholders.
    fn run(&mut self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        self.client(false)?;
        let Conn {
            client: Some(client),
            statements,
            config,
            in_transaction,
        } = self
        else {
            return Err(Error::Unreachable("no connection".into()));
        };
        let mut answer = run(client, statements, sql, params, want);
        // A connection the server closed while it sat idle (a restart, an
        // administrator's terminate) fails its next statement before the statement
        // reaches the server: outside a transaction, that statement is tried once more
        // on a new connection.
        if !*in_transaction && answer.as_ref().is_err_and(|_| client.is_closed()) {
            statements.clear();
            if let Ok(fresh) = config.connect() {
                *client = fresh;
                answer = run(client, statements, sql, params, want);
            }
        }
        answer
    }
}

/// A connection and its own thread, which makes the statements of callers inside a
/// runtime ([`may_block_here`]) and closes the connection in the end.
struct Worker {
    conn: Arc<Mutex<Conn>>,
    jobs: Sender<Job>,
}

impl Worker {
    fn spawn(config: Connector, n: usize) -> Result<Worker, Error> {
        let (jobs, queue) = mpsc::channel();
        let conn = Arc::new(Mutex::new(Conn {
            config,
            client: None,
            statements: HashMap::new(),
            in_transaction: false,
        }));
        let theirs = conn.clone();
        std::thread::Builder::new()
            .name(format!("ferry-pg-{n}"))
            .spawn(move || work(&theirs, queue))
            .map_err(|e| Error::Unreachable(format!("could not start a thread: {e}")))?;
        Ok(Worker { conn, jobs })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        let sql = dialect::placeholders(sql);
        if may_block_here() {
            return self.conn().run(&sql, params, want);
        }
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job::Run {
            sql,
            params: params.to_vec(),
            want,
            reply,
        };
        self.send(job, answer)
    }

    fn batch(&self, sql: &str) -> Result<(), Error> {
        if may_block_here() {
            return self.conn().batch(sql);
        }
        let (reply, answer) = mpsc::sync_channel(1);
        self.send(
            Job::Batch {
                sql: sql.to_owned(),
                reply,
            },
            answer,
        )
    }

    fn send<T>(&self, job: Job, answer: Receiver<Result<T, Error>>) -> Result<T, Error> {
        let gone = || Error::Unreachable("the connection's thread ended".into());
        self.jobs.send(job).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

impl Drop for Worker {
    /// The client is closed on the connection's own thread: a pool may be dropped
    /// anywhere, an async task included.
    fn drop(&mut self) {
        if let Some(client) = self.conn().client.take()
            && let Err(mpsc::SendError(job)) = self.jobs.send(Job::Close(Box::new(client)))
        {
            // The thread is gone (it panicked): close on a thread made for it.
            let _ = std::thread::Builder::new()
                .name("ferry-pg-close".into())
                .spawn(move || drop(job));
        }
    }
}

/// A connection's thread: the jobs of its callers that may not block, one at a time.
fn work(conn: &Mutex<Conn>, jobs: Receiver<Job>) {
    for job in jobs {
        let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
        match job {
            Job::Batch { sql, reply } => drop(reply.send(conn.batch(&sql))),
            Job::Run {
                sql,
                params,
                want,
                reply,
            } => drop(reply.send(conn.run(&sql, &params, want))),
            Job::Close(client) => drop(client),
        }
    }
}

fn run(
    client: &mut Client,
    statements: &mut HashMap<String, Statement>,
    sql: &str,
    params: &[Value],
    want: Want,
) -> Result<Output, Error> {
    let statement = match statements.get(sql) {
        Some(s) => s.clone(),
        None => remember(statements, sql, client.prepare(sql)?),
    };
    let refs = refs(params);
    match want {
        Want::Count => Ok(Output::Count(client.execute(&statement, &refs)? as usize)),
        Want::Rows => rows_of(&client.query(&statement, &refs)?).map(Output::Rows),
    }
}

/// Keeps `statement`, prepared for `sql`, in a connection's cache (started over when
/// full); gives it back.
fn remember(
    statements: &mut HashMap<String, Statement>,
    sql: &str,
    statement: Statement,
) -> Statement {
    if statements.len() >= STATEMENT_CACHE {
        statements.clear();
    }
    statements.insert(sql.to_owned(), statement.clone());
    statement
}

/// The parameters as the driver takes them.
fn refs(params: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as _).collect()
}

fn rows_of(rows: &[postgres::Row]) -> Result<Vec<Row>, Error> {
    rows.iter().map(row_of).collect()
}

fn row_of(row: &postgres::Row) -> Result<Row, Error> {
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        let value = if *ty == Type::INT8 {
            row.try_get::<_, Option<i64>>(i)?.map(Value::Int)
        } else if *ty == Type::INT4 {
            row.try_get::<_, Option<i32>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *ty == Type::INT2 {
            row.try_get::<_, Option<i16>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *ty == Type::BOOL {
            row.try_get::<_, Option<bool>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *ty == Type::FLOAT8 {
            row.try_get::<_, Option<f64>>(i)?.map(Value::Real)
        } else if *ty == Type::BYTEA {
            row.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob)
        } else if <String as postgres::types::FromSql>::accepts(ty) {
            row.try_get::<_, Option<String>>(i)?.map(Value::Text)
        } else if *ty == Type::VOID {
            None
        } else {
            return Err(Error::Column {
                index: i,
                why: format!("a column of type {ty} (cast it to BIGINT or TEXT)"),
            });
        };
        values.push(value.unwrap_or(Value::Null));
    }
    Ok(Row(values))
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let wrong = |what: &str| -> Box<dyn StdError + Sync + Send> {
            format!("a parameter of type {ty} was given {what}").into()
        };
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => {
                if *ty == Type::INT8 {
                    v.to_sql(ty, out)
                } else if *ty == Type::INT4 {
                    i32::try_from(*v)
                        .map_err(|_| wrong("an integer out of its range"))?
                        .to_sql(ty, out)
                } else if *ty == Type::INT2 {
                    i16::try_from(*v)
                        .map_err(|_| wrong("an integer out of its range"))?
                        .to_sql(ty, out)
                } else if *ty == Type::BOOL {
                    (*v != 0).to_sql(ty, out)
                } else if *ty == Type::FLOAT8 {
                    (*v as f64).to_sql(ty, out)
                } else {
                    Err(wrong("an integer"))
                }
            }
            Value::Real(v) if *ty == Type::FLOAT8 => v.to_sql(ty, out),
            Value::Real(_) => Err(wrong("a real")),
            Value::Text(v) if <String as ToSql>::accepts(ty) => v.to_sql(ty, out),
            Value::Text(_) => Err(wrong("text")),
            Value::Blob(v) if *ty == Type::BYTEA => v.to_sql(ty, out),
            Value::Blob(_) => Err(wrong("bytes")),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// The workers, those idle and how many were made; and the connection async tasks share.
pub(crate) struct Pool {
    config: Connector,
    idle: Mutex<(Vec<Worker>, usize)>,
    freed: Condvar,
    size: usize,
    shared: Shared,
}

/// One connection driven by the async runtime of the tasks that use it, for the lookups
/// an async task makes on every request (the token check). Its statements are pipelined
/// (concurrent lookups share it), no thread is handed anything, and a server that does
/// not answer holds the waiting task, never one of the runtime's threads.
#[derive(Default)]
struct Shared {
    live: Mutex<Option<Arc<Live>>>,
    /// Held while connecting, so callers that find no connection make one between them.
    connecting: tokio::sync::Mutex<()>,
}

/// A connection of [`Shared`], with its prepared statements.
struct Live {
    client: tokio_postgres::Client,
    statements: Mutex<HashMap<String, Statement>>,
}

impl Live {
    /// The rows of `sql`, already in PostgreSQL's placeholders.
    async fn rows(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, Error> {
        let known = self
            .statements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sql)
            .cloned();
        let statement = match known {
            Some(statement) => statement,
            None => {
                let statement = self.client.prepare(sql).await?;
                let mut statements = self.statements.lock().unwrap_or_else(|e| e.into_inner());
                remember(&mut statements, sql, statement)
            }
        };
        rows_of(&self.client.query(&statement, &refs(params)).await?)
    }
}

impl Pool {
    pub(crate) fn new(url: &str, password: Option<&str>, size: usize) -> Result<Pool, Error> {
        let mut config = Connector::new(url, password)?;
        let settings = config.config_mut();
        settings.connect_timeout(CONNECT_TIMEOUT);
        settings.application_name("ferry");
        settings.keepalives(true);
        Ok(Pool {
            config,
            idle: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
            size,
            shared: Shared::default(),
        })
    }

    /// The rows of a lookup from an async task, on the connection tasks share
    /// ([`Shared`]), made on the caller's runtime when there is none or it closed.
    pub(crate) async fn rows_async(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, Error> {
        let sql = dialect::placeholders(sql);
        let live = self.live().await?;
        let answer = live.rows(&sql, params).await;
        // A connection the server closed while it sat idle (a restart, an administrator's
        // terminate), or whose runtime ended, fails before its statement reaches the
        // server: that statement is tried once more on a new connection.
        if answer.is_err() && live.client.is_closed() {
            return self.live().await?.rows(&sql, params).await;
        }
        answer
    }

    /// The shared connection, made if there is none or it closed.
    async fn live(&self) -> Result<Arc<Live>, Error> {
        let open = || {
            self.shared
                .live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .filter(|live| !live.client.is_closed())
        };
        if let Some(live) = open() {
            return Ok(live);
        }
        let _one = self.shared.connecting.lock().await;
        if let Some(live) = open() {
            return Ok(live);
        }
        let client = tokio::time::timeout(CONNECT_TIMEOUT, self.config.connect_async())
            .await
            .map_err(|_| {
                Error::Unreachable(format!(
                    "no connection within {} s",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })??;
        let live = Arc::new(Live {
            client,
            statements: Mutex::default(),
        });
        *self.shared.live.lock().unwrap_or_else(|e| e.into_inner()) = Some(live.clone());
        Ok(live)
    }

    pub(crate) fn lease(&self) -> Result<Lease<'_>, Error> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(worker) = idle.0.pop() {
                return Ok(Lease {
                    pool: self,
                    worker: Some(worker),
                });
            }
            if idle.1 < self.size {
                idle.1 += 1;
                let n = idle.1;
                drop(idle);
                let worker = Worker::spawn(self.config.clone(), n);
                if worker.is_err() {
                    self.idle.lock().unwrap_or_else(|e| e.into_inner()).1 -= 1;
                }
                return Ok(Lease {
                    pool: self,
                    worker: Some(worker?),
                });
            }
            let (guard, timeout) = self
                .freed
                .wait_timeout(idle, LEASE_TIMEOUT)
                .unwrap_or_else(|e| e.into_inner());
            idle = guard;
            if timeout.timed_out() && idle.0.is_empty() {
                return Err(Error::Unreachable(format!(
                    "all {} connections stayed busy for {} s",
                    self.size,
                    LEASE_TIMEOUT.as_secs()
                )));
            }
        }
    }

    pub(crate) fn begin(&self, serializable: bool) -> Result<PgTx<'_>, Error> {
        let lease = self.lease()?;
        lease.batch(if serializable {
            "BEGIN ISOLATION LEVEL SERIALIZABLE"
        } else {
            "BEGIN ISOLATION LEVEL READ COMMITTED"
        })?;
        Ok(PgTx {
            lease,
            done: false,
            conflicted: std::cell::Cell::new(false),
        })
    }

    pub(crate) fn migrate(&self, migrations: &[Migration]) -> Result<(), Error> {
        let lease = self.lease()?;
        lease.run(
            "SELECT pg_advisory_lock(?1)",
            &[Value::Int(ADVISORY_LOCK_KEY)],
            Want::Rows,
        )?;
        let applied = apply(&lease, migrations);
        let unlocked = lease.run(
            "SELECT pg_advisory_unlock(?1)",
            &[Value::Int(ADVISORY_LOCK_KEY)],
            Want::Rows,
        );
        applied.and(unlocked.map(drop))
    }

    pub(crate) fn listen(
        &self,
        channel: &str,
        mut deliver: impl FnMut(String) + Send + 'static,
        mut reconnected: impl FnMut() + Send + 'static,
    ) -> Listener {
        let config = self.config.clone();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let listening = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let heard = listening.clone();
        let listen = format!("LISTEN \"{}\"", channel.replace('"', ""));
        let spawned = std::thread::Builder::new()
            .name("ferry-pg-listen".into())
            .spawn(move || {
                let mut first = true;
                while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut client = match config.connect() {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!("the metadata database's notifications: {e}");
                            std::thread::sleep(LISTEN_RETRY);
                            continue;
                        }
                    };
                    if let Err(e) = client.batch_execute(&listen) {
                        tracing::warn!("the metadata database's notifications: {e}");
                        std::thread::sleep(LISTEN_RETRY);
                        continue;
                    }
                    heard.store(true, std::sync::atomic::Ordering::Relaxed);
                    if !first {
                        reconnected();
                    }
                    first = false;
                    while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                        let next = client
                            .notifications()
                            .timeout_iter(Duration::from_millis(500))
                            .next();
                        match next {
                            Ok(Some(n)) => deliver(n.payload().to_owned()),
                            Ok(None) if client.is_closed() => break,
                            Ok(None) => {}
                            Err(e) => {
                                tracing::warn!("the metadata database's notifications: {e}");
                                break;
                            }
                        }
                    }
                    heard.store(false, std::sync::atomic::Ordering::Relaxed);
                }
            });
        if let Err(e) = spawned {
            tracing::error!("could not start the notifications' thread: {e}");
        }
        Listener { stop, listening }
    }
}

/// Stops its listening thread when dropped.
pub struct Listener {
    stop: Arc<std::sync::atomic::AtomicBool>,
    listening: Arc<std::sync::atomic::AtomicBool>,
}

impl Listener {
    /// Whether the listening connection is up now: what is sent meanwhile is heard.
    pub fn is_listening(&self) -> bool {
        self.listening.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn apply(lease: &Lease<'_>, migrations: &[Migration]) -> Result<(), Error> {
    lease.batch(&dialect::schema(VERSION_TABLE))?;
    let at = match lease.run(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        &[],
        Want::Rows,
    )? {
        Output::Rows(rows) => rows
            .first()
            .map(|r| r.get::<i64>(0))
            .transpose()?
            .unwrap_or(0),
        Output::Count(_) => 0,
    };
    for migration in migrations.iter().filter(|m| m.version > at) {
        lease.batch("BEGIN")?;
        let steps = migration.steps.iter().try_for_each(|step| match *step {
            Step::Sql(sql) => lease.batch(&dialect::schema(sql)),
            Step::AddColumn {
                table,
                column,
                decl,
            } => lease.batch(&dialect::schema(&format!(
                "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {decl}"
            ))),
        });
        let recorded = steps.and_then(|()| {
            lease
                .run(
                    "INSERT INTO schema_version (version) VALUES (?1)",
                    &[Value::Int(migration.version)],
                    Want::Count,
                )
                .map(drop)
        });
        match recorded {
            Ok(()) => lease.batch("COMMIT")?,
            Err(e) => {
                let _ = lease.batch("ROLLBACK");
                return Err(e);
            }
        }
    }
    Ok(())
}

/// A worker lent to one caller; back in the pool when dropped.
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    worker: Option<Worker>,
}

impl Lease<'_> {
    pub(crate) fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        self.worker().run(sql, params, want)
    }

    fn batch(&self, sql: &str) -> Result<(), Error> {
        self.worker().batch(sql)
    }

    fn worker(&self) -> &Worker {
        self.worker
            .as_ref()
            .expect("a lease holds its worker until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.0.push(worker);
            self.pool.freed.notify_one();
        }
    }
}

/// A transaction on one leased connection; rolled back if dropped without a commit.
pub struct PgTx<'a> {
    lease: Lease<'a>,
    done: bool,
    conflicted: std::cell::Cell<bool>,
}

impl PgTx<'_> {
    pub(crate) fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        let result = self.lease.run(sql, params, want);
        if let Err(e) = &result
            && e.is_conflict()
        {
            self.conflicted.set(true);
        }
        result
    }

    pub(crate) fn conflicted(&self) -> bool {
        self.conflicted.get()
    }

    pub(crate) fn commit(mut self) -> Result<(), Error> {
        self.done = true;
        self.lease.batch("COMMIT")
    }
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.lease.batch("ROLLBACK");
        }
    }
}
