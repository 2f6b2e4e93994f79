//! PostgreSQL: a pool of worker threads, each holding one connection made when first
//! needed and made again after it breaks. A caller leases a worker, sends it statements
//! and waits for the answers; a transaction keeps its lease until it ends. The driver
//! runs its own small runtime inside each worker, never inside the caller's.

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
}

struct Worker {
    jobs: Sender<Job>,
}

impl Worker {
    fn spawn(config: Connector, n: usize) -> Result<Worker, Error> {
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("ferry-pg-{n}"))
            .spawn(move || work(config, queue))
            .map_err(|e| Error::Unreachable(format!("could not start a thread: {e}")))?;
        Ok(Worker { jobs })
    }

    fn run(&self, sql: &str, params: &[Value], want: Want) -> Result<Output, Error> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job::Run {
            sql: dialect::placeholders(sql),
            params: params.to_vec(),
            want,
            reply,
        };
        self.send(job, answer)
    }

    fn batch(&self, sql: &str) -> Result<(), Error> {
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

/// A worker's life: one connection, its prepared statements, one job at a time.
fn work(config: Connector, jobs: Receiver<Job>) {
    let mut client: Option<Client> = None;
    let mut statements: HashMap<String, Statement> = HashMap::new();
    // A transaction is open on the connection: if it breaks, the statements still to
    // come must fail rather than run, without it, on a new connection.
    let mut in_transaction = false;
    for job in jobs {
        let (begins, ends) = match &job {
            Job::Batch { sql, .. } => (
                sql.starts_with("BEGIN"),
                sql == "COMMIT" || sql == "ROLLBACK",
            ),
            Job::Run { .. } => (false, false),
        };
        if client.as_ref().is_none_or(Client::is_closed) {
            statements.clear();
            client = None;
            if in_transaction {
                in_transaction = !ends;
                job.fail(Error::Unreachable(
                    "the connection broke midway through a transaction, which did not happen"
                        .into(),
                ));
                continue;
            }
            match config.connect() {
                Ok(c) => client = Some(c),
                Err(e) => {
                    job.fail(e.into());
                    continue;
                }
            }
        }
        let Some(c) = client.as_mut() else { continue };
        match job {
            Job::Batch { sql, reply } => {
                let done = c.batch_execute(&sql).map_err(Error::from);
                if begins && done.is_ok() {
                    in_transaction = true;
                }
                if ends {
                    in_transaction = false;
                }
                let _ = reply.send(done);
            }
            Job::Run {
                sql,
                params,
                want,
                reply,
            } => {
                let mut answer = run(c, &mut statements, &sql, &params, want);
                // A connection the server closed while it sat idle (a restart, an
                // administrator's terminate) fails its next statement before the statement
                // reaches the server: outside a transaction, that statement is tried once
                // more on a new connection.
                if !in_transaction && answer.as_ref().is_err_and(|_| c.is_closed()) {
                    statements.clear();
                    if let Ok(fresh) = config.connect() {
                        *c = fresh;
                        answer = run(c, &mut statements, &sql, &params, want);
                    }
                }
                let _ = reply.send(answer);
            }
        }
    }
}

impl Job {
    fn fail(self, e: Error) {
        match self {
            Job::Run { reply, .. } => drop(reply.send(Err(e))),
            Job::Batch { reply, .. } => drop(reply.send(Err(e))),
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
        None => {
            let s = client.prepare(sql)?;
            if statements.len() >= STATEMENT_CACHE {
                statements.clear();
            }
            statements.insert(sql.to_owned(), s.clone());
            s
        }
    };
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
    match want {
        Want::Count => Ok(Output::Count(client.execute(&statement, &refs)? as usize)),
        Want::Rows => {
            let rows = client.query(&statement, &refs)?;
            rows.iter()
                .map(row_of)
                .collect::<Result<_, _>>()
                .map(Output::Rows)
        }
    }
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

/// The workers, those idle and how many were made.
pub(crate) struct Pool {
    config: Connector,
    idle: Mutex<(Vec<Worker>, usize)>,
    freed: Condvar,
    size: usize,
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
        })
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
