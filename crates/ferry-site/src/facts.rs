//! What nearly every request asks the metadata and what rarely changes: the row behind a
//! token's prefix, a person's circles, whether a person exists. On PostgreSQL each answer
//! is a round trip to another process, so a gateway remembers them, under a lease that
//! keeps "changed through one gateway, seen by every gateway at the next request" exact
//! (spec S-GATEWAYS: a token revoked anywhere is refused everywhere at the next request).
//!
//! - **A change** to a remembered fact (a token revoked, a member added to a circle)
//!   raises the site's fact generation in its own transaction, which also notifies the
//!   gateways. Once committed, it waits until every lease has acknowledged that
//!   generation, and for [`LEASE`] at most.
//! - **A gateway renews its lease** every [`RENEW_EVERY`]: it writes the generation it has
//!   forgotten everything up to, then reads the site's generation and forgets everything
//!   when that is newer. It trusts what it remembers for [`TRUST`] after the start of its
//!   last renewal that went through, and never otherwise.
//! - **A notification** of a newer generation makes it forget at once and renew (so
//!   acknowledge) at once. Notifications only make changes quick; they are not needed for
//!   the rest to hold.
//!
//! Why that is exact: let a change commit at time C. A renewal that read the generation
//! before C started before C, so the trust it gave ends before C + [`TRUST`]; a renewal
//! that read it after C forgot. So by C + [`LEASE`] every gateway has forgotten or stopped
//! trusting, whatever happened to notifications, and the change returns then at the
//! latest; it returns sooner once every lease row has acknowledged, which a gateway does
//! only after forgetting. A lease row is written before the generation is read, so a
//! gateway that trusts is one the change waits for. An answer read from the metadata
//! while a change lands is remembered only if no newer generation was seen since the
//! lookup began. Only the two monotonic clocks' durations are compared, never the
//! machines' times of day ([`TRUST`] is 90 % of [`LEASE`] for the clocks' rates).
//!
//! Persons are never removed, so that one exists is remembered without a lease. On
//! SQLite nothing takes a lease: a lookup there is a statement on the gateway's own page
//! cache, and remembering measured no faster (`bench/README.md`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use ferry_sql::{Db, Engine, Exec, Tx};

use crate::db::params;
use crate::{Site, SiteError};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS fact_changes (
    -- One row (id 1): the generation, raised by every change to a remembered fact.
    id INTEGER PRIMARY KEY,
    generation INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS fact_leases (
    -- A gateway that remembers facts: the generation it has forgotten everything up to,
    -- and when it last renewed (seconds since the epoch by the database's own clock, the
    -- one every gateway shares, for sweeping rows of gateways long gone).
    gateway TEXT PRIMARY KEY,
    seen INTEGER NOT NULL,
    renewed INTEGER NOT NULL
);
";

/// How long a change waits at most for the gateways to forget what it made stale.
pub(crate) const LEASE: Duration = Duration::from_secs(2);
/// How long a gateway trusts what it remembers after a renewal began.
const TRUST: Duration = Duration::from_millis(1800);
/// How often a gateway renews its lease.
const RENEW_EVERY: Duration = Duration::from_millis(500);
/// A lease unrenewed this long belongs to a gateway long gone, and is swept: its trust
/// ended [`TRUST`] after its last renewal.
const LEASE_STALE_SECS: i64 = 60;
/// The same for a gateway no longer registered (stopped, or its process seen gone): more
/// than 3 s, counted in the database's whole seconds, is past [`TRUST`] with room for
/// the clocks' rates.
const GONE_LEASE_SECS: i64 = 3;
/// The channel changes are announced on.
const CHANNEL: &str = "ferry_facts";
/// Entries remembered of each kind at most; past it, that kind is forgotten and filled
/// again (a site with more tokens in use than this pays a lookup now and then).
const ENTRIES_MAX: usize = 65_536;

/// A token's stored row: its hash, person and kind.
pub(crate) type TokenRow = (Vec<u8>, String, String);

/// What one process remembers.
#[derive(Default)]
pub(crate) struct Facts {
    leased: Mutex<Leased>,
    /// Persons seen to exist (never removed, so never stale).
    persons: RwLock<HashSet<String>>,
}

/// The facts a lease guards.
#[derive(Default)]
pub(crate) struct Leased {
    /// Everything remembered is as of this generation or newer.
    generation: i64,
    /// Until when what is remembered may be used; `None`: not now (no lease, or its last
    /// renewal failed long enough ago).
    trusted_until: Option<Instant>,
    tokens: HashMap<String, TokenRow>,
    circles: HashMap<String, Vec<String>>,
}

impl Leased {
    fn trusted(&self) -> bool {
        self.trusted_until.is_some_and(|t| Instant::now() < t)
    }

    fn forget(&mut self) {
        self.tokens.clear();
        self.circles.clear();
    }
}

/// A lookup of a remembered fact.
pub(crate) enum Recall<T> {
    /// Remembered, and trusted now.
    Known(T),
    /// Ask the metadata; what it answers may be remembered with this stamp (`None`: it
    /// may not, the process trusts nothing now).
    Ask(Option<i64>),
}

/// Which map of [`Leased`] a fact lives in.
type Pick<T> = fn(&mut Leased) -> &mut HashMap<String, T>;

pub(crate) fn tokens(l: &mut Leased) -> &mut HashMap<String, TokenRow> {
    &mut l.tokens
}

pub(crate) fn circles(l: &mut Leased) -> &mut HashMap<String, Vec<String>> {
    &mut l.circles
}

impl Facts {
    fn leased(&self) -> std::sync::MutexGuard<'_, Leased> {
        self.leased.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fact under `key` in `pick`, if remembered and trusted.
    pub(crate) fn recall<T: Clone>(&self, pick: Pick<T>, key: &str) -> Recall<T> {
        let mut leased = self.leased();
        if !leased.trusted() {
            return Recall::Ask(None);
        }
        let generation = leased.generation;
        match pick(&mut leased).get(key) {
            Some(value) => Recall::Known(value.clone()),
            None => Recall::Ask(Some(generation)),
        }
    }

    /// Remembers what the metadata answered after [`Facts::recall`] gave `stamp`, unless
    /// a change was seen meanwhile.
    pub(crate) fn remember<T>(&self, stamp: Option<i64>, pick: Pick<T>, key: &str, value: T) {
        let mut leased = self.leased();
        if stamp != Some(leased.generation) || !leased.trusted() {
            return;
        }
        let map = pick(&mut leased);
        if map.len() >= ENTRIES_MAX {
            map.clear();
        }
        map.insert(key.to_owned(), value);
    }

    /// Forgets everything remembered under a lease, as of `generation`.
    fn forget(&self, generation: i64) {
        let mut leased = self.leased();
        if generation > leased.generation {
            leased.generation = generation;
            leased.forget();
        }
    }

    /// Whether `person` is known to exist.
    pub(crate) fn person_exists(&self, person: &str) -> bool {
        self.persons
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(person)
    }

    /// Remembers that `person` exists.
    pub(crate) fn person_found(&self, person: &str) {
        let mut persons = self.persons.write().unwrap_or_else(|e| e.into_inner());
        if persons.len() >= ENTRIES_MAX {
            persons.clear();
        }
        persons.insert(person.to_owned());
    }
}

/// Raises the site's fact generation inside `tx` and announces it to the gateways (at
/// commit, on PostgreSQL); returns the new generation.
fn raise(tx: &Tx<'_>) -> Result<i64, SiteError> {
    let generation: i64 = tx
        .row(
            "INSERT INTO fact_changes (id, generation) VALUES (1, 1)
             ON CONFLICT (id) DO UPDATE SET generation = fact_changes.generation + 1
             RETURNING generation",
            params![],
            |r| r.get(0),
        )?
        .unwrap_or(0);
    if tx.engine() == Engine::Postgres {
        tx.rows(
            "SELECT pg_notify(?1, ?2)",
            params![CHANNEL, generation.to_string()],
            |_| Ok::<_, SiteError>(()),
        )?;
    }
    Ok(generation)
}

/// Waits until every lease has acknowledged `generation`, for [`LEASE`] at most (by then
/// every gateway has forgotten or stopped trusting, whatever it acknowledged).
fn await_forgotten(db: &Db, generation: i64) {
    let deadline = Instant::now() + LEASE;
    let mut pause = Duration::from_millis(1);
    loop {
        let unacknowledged = db.exists(
            "SELECT 1 FROM fact_leases WHERE seen < ?1",
            params![generation],
        );
        if matches!(unacknowledged, Ok(false)) {
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// A gateway's lease, renewed by a thread of its own until [`Keeper::stop`].
pub(crate) struct Keeper {
    wake: Arc<Wake>,
    thread: Option<std::thread::JoinHandle<()>>,
    _listener: Option<ferry_sql::Listener>,
}

/// What the lease's thread waits on: a notification to act on, or the stop.
#[derive(Default)]
struct Wake {
    flags: Mutex<Flags>,
    bell: Condvar,
}

#[derive(Default)]
struct Flags {
    /// Rung since the thread last woke.
    rung: bool,
    /// The thread is to stop.
    stop: bool,
}

impl Wake {
    fn ring(&self, stop: bool) {
        let mut flags = self.flags.lock().unwrap_or_else(|e| e.into_inner());
        flags.rung = true;
        flags.stop |= stop;
        self.bell.notify_all();
    }

    /// Waits for a ring or `timeout`; whether to stop.
    fn wait(&self, timeout: Duration) -> bool {
        let flags = self.flags.lock().unwrap_or_else(|e| e.into_inner());
        let (mut flags, _) = self
            .bell
            .wait_timeout_while(flags, timeout, |f| !f.rung)
            .unwrap_or_else(|e| e.into_inner());
        flags.rung = false;
        flags.stop
    }
}

impl Keeper {
    /// Stops renewing, stops trusting, and gives the lease up.
    pub(crate) fn stop(mut self) {
        self.wake.ring(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.wake.ring(true);
    }
}

/// The database's own clock, in seconds since the epoch: one clock for every gateway,
/// whatever their machines' clocks say.
fn database_secs(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT)",
        Engine::Sqlite => "CAST(strftime('%s', 'now') AS INTEGER)",
    }
}

/// One renewal of `gateway`'s lease: acknowledges `seen`, and reads the site's generation.
fn renew(db: &Db, gateway: &str, seen: i64) -> Result<i64, SiteError> {
    db.execute(
        &format!(
            "INSERT INTO fact_leases (gateway, seen, renewed) VALUES (?1, ?2, {})
             ON CONFLICT (gateway) DO UPDATE
             SET seen = excluded.seen, renewed = excluded.renewed",
            database_secs(db.engine())
        ),
        params![gateway, seen],
    )?;
    current_generation(db)
}

/// The site's fact generation now.
fn current_generation(db: &Db) -> Result<i64, SiteError> {
    Ok(db
        .row(
            "SELECT generation FROM fact_changes WHERE id = 1",
            params![],
            |r| r.get(0),
        )?
        .unwrap_or(0))
}

fn keep(db: Arc<Db>, facts: Arc<Facts>, gateway: String, wake: Arc<Wake>) {
    let mut failing = false;
    loop {
        let started = Instant::now();
        let seen = facts.leased().generation;
        match renew(&db, &gateway, seen) {
            Ok(generation) => {
                facts.forget(generation);
                facts.leased().trusted_until = Some(started + TRUST);
                if failing {
                    tracing::info!("remembering tokens and circles again");
                    failing = false;
                }
                if generation > seen {
                    // A change this renewal learned of waits for its acknowledgment.
                    continue;
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        "renewing this gateway's lease on remembered tokens and circles \
                         (each request asks the metadata meanwhile): {e}"
                    );
                    failing = true;
                }
            }
        }
        if wake.wait(RENEW_EVERY) {
            break;
        }
    }
    facts.leased().trusted_until = None;
    if let Err(e) = db.execute(
        "DELETE FROM fact_leases WHERE gateway = ?1",
        params![&gateway],
    ) {
        tracing::warn!("giving up this gateway's lease on remembered facts: {e}");
    }
}

/// Removes the leases no gateway trusts under any longer: those of gateways no longer
/// registered once unrenewed for [`GONE_LEASE_SECS`], any once unrenewed for
/// [`LEASE_STALE_SECS`] (a gateway renews every half second, and trusts for less than
/// [`TRUST`] after a renewal began).
pub(crate) fn sweep_stale_leases(db: &Db) -> Result<(), SiteError> {
    let now = database_secs(db.engine());
    db.execute(
        &format!(
            "DELETE FROM fact_leases WHERE renewed < {now} - ?2
             OR (renewed < {now} - ?1 AND gateway NOT IN (SELECT id FROM gateways))"
        ),
        params![GONE_LEASE_SECS, LEASE_STALE_SECS],
    )?;
    Ok(())
}

impl Site {
    /// Runs `change` in one transaction; when it changed rows (it returns how many), the
    /// fact generation is raised in the same transaction and, once committed, this waits
    /// until no gateway uses what the change made stale (at most [`LEASE`]). A change of
    /// nothing makes no gateway forget.
    pub(crate) fn change_facts(
        &self,
        mut change: impl FnMut(&Tx<'_>) -> Result<usize, SiteError>,
    ) -> Result<usize, SiteError> {
        let (changed, generation) = self.db.transaction(|tx| {
            let changed = change(tx)?;
            let generation = if changed > 0 { Some(raise(tx)?) } else { None };
            Ok::<_, SiteError>((changed, generation))
        })?;
        if let Some(generation) = generation {
            self.facts.forget(generation);
            await_forgotten(&self.db, generation);
        }
        Ok(changed)
    }

    /// Waits until no gateway uses what the changes made so far made stale (at most
    /// [`LEASE`]).
    pub(crate) fn await_current_forgotten(&self) {
        if let Ok(generation) = current_generation(&self.db) {
            await_forgotten(&self.db, generation);
        }
    }

    /// Makes this process remember tokens and circles as gateway `gateway`, under a
    /// lease (PostgreSQL only; nothing on SQLite). It lasts until
    /// [`Site::gateway_stopped`].
    pub fn keep_facts(&self, gateway: &str) {
        if self.db.engine() != Engine::Postgres {
            return;
        }
        let wake = Arc::new(Wake::default());
        let heard = (self.facts.clone(), wake.clone());
        let resumed = wake.clone();
        let listener = self.db.listen(
            CHANNEL,
            move |payload| {
                if let Ok(generation) = payload.parse::<i64>() {
                    heard.0.forget(generation);
                    heard.1.ring(false);
                }
            },
            move || resumed.ring(false),
        );
        let (db, facts, id, waker) = (
            self.db.clone(),
            self.facts.clone(),
            gateway.to_owned(),
            wake.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("ferry-facts".into())
            .spawn(move || keep(db, facts, id, waker));
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("could not start the remembered facts' lease: {e}");
                None
            }
        };
        let old = self
            .keeper
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(Keeper {
                wake,
                thread,
                _listener: listener,
            });
        if let Some(old) = old {
            old.stop();
        }
    }

    /// Stops remembering under a lease and gives the lease up.
    pub(crate) fn stop_keeping_facts(&self) {
        let keeper = self.keeper.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(keeper) = keeper {
            keeper.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(facts: &Facts) {
        facts.leased().trusted_until = Some(Instant::now() + TRUST);
    }

    #[test]
    fn nothing_is_recalled_without_trust() {
        let facts = Facts::default();
        assert!(matches!(facts.recall(tokens, "p"), Recall::Ask(None)));
        facts.remember(Some(0), circles, "ann", vec!["team".to_owned()]);
        trusted(&facts);
        assert!(matches!(facts.recall(circles, "ann"), Recall::Ask(Some(0))));
    }

    #[test]
    fn an_answer_read_across_a_change_is_not_remembered() {
        let facts = Facts::default();
        trusted(&facts);
        let Recall::Ask(stamp) = facts.recall(circles, "ann") else {
            panic!("nothing is remembered yet");
        };
        facts.forget(1);
        facts.remember(stamp, circles, "ann", vec![]);
        assert!(matches!(facts.recall(circles, "ann"), Recall::Ask(Some(1))));
        facts.remember(Some(1), circles, "ann", vec![]);
        assert!(matches!(facts.recall(circles, "ann"), Recall::Known(v) if v.is_empty()));
        // An older generation announced late changes nothing; a newer one forgets.
        facts.forget(1);
        assert!(matches!(facts.recall(circles, "ann"), Recall::Known(_)));
        facts.forget(2);
        assert!(matches!(facts.recall(circles, "ann"), Recall::Ask(Some(2))));
    }

    #[test]
    fn trust_ends() {
        let facts = Facts::default();
        facts.leased().trusted_until = Some(Instant::now());
        facts.remember(Some(0), tokens, "p", (vec![], String::new(), String::new()));
        assert!(matches!(facts.recall(tokens, "p"), Recall::Ask(None)));
    }
}
