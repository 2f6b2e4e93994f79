//! Per-person storage quotas (`[limits] person_max_bytes`): what a person keeps in every
//! `public/` folder of theirs (the main workspace and each project) plus their saved
//! command output and their trash, counted by apparent size, so a sparse file counts at its full length.
//!
//! Counting walks those trees, which is too slow to repeat for every write of a large
//! workspace, so each person's count is kept and redone when it is older than
//! [`USAGE_RECOUNT_AFTER`], after a delete through the API, and before a write is
//! refused. Between counts, every write ferry makes takes room first ([`QuotaClaim`]):
//! bytes being written and bytes written since the count began are added to the count,
//! under one lock, so writers racing for the last room never pass the quota together.
//! What the count cannot see between two counts is a change ferry did not make (the
//! agent's own commands writing into `public/`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferry_fs::{Budget, Follow, FsError};

use crate::db::{Exec, params};
use crate::layout::{self, TERMINAL_OUTPUT_DIR};
use crate::{Site, SiteError};

/// How long a count of a person's bytes is trusted before it is redone.
pub const USAGE_RECOUNT_AFTER: Duration = Duration::from_secs(10);

/// Counts the bytes of a person's counted trees; the service's own walk, or (host mode)
/// one done as the person.
pub type Counter = Arc<dyn Fn() -> Result<u64, FsError> + Send + Sync>;

/// Every person's count, kept between writes.
#[derive(Default)]
pub(crate) struct Usage {
    people: Mutex<HashMap<String, Arc<Account>>>,
}

/// One person's count and the room writers hold now.
struct Account {
    limit: u64,
    tally: Mutex<Tally>,
    /// Held while counting, so two counts of one person never interleave their bookkeeping.
    counting: Mutex<()>,
}

#[derive(Default)]
struct Tally {
    /// Bytes found by the last count, and when it began; `None`: never counted or stale.
    counted: u64,
    counted_at: Option<Instant>,
    /// Bytes committed since the last count began: the count may not have seen them.
    recent: u64,
    /// Bytes writers have taken and not yet committed or released.
    in_flight: u64,
}

impl Tally {
    fn used(&self) -> u64 {
        self.counted
            .saturating_add(self.recent)
            .saturating_add(self.in_flight)
    }
}

impl Account {
    fn tally(&self) -> MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts again unless a count newer than [`USAGE_RECOUNT_AFTER`] exists (`force`:
    /// always).
    fn refresh(&self, counter: &Counter, force: bool) -> Result<(), FsError> {
        let _one_at_a_time = self.counting.lock().unwrap_or_else(|e| e.into_inner());
        let (started, recent_before) = {
            let tally = self.tally();
            let fresh = tally
                .counted_at
                .is_some_and(|at| at.elapsed() < USAGE_RECOUNT_AFTER);
            if fresh && !force {
                return Ok(());
            }
            (Instant::now(), tally.recent)
        };
        let counted = counter().map_err(uncounted)?;
        let mut tally = self.tally();
        tally.counted = counted;
        tally.counted_at = Some(started);
        // What was committed before the count began is in it; later commits may not be,
        // so they stay added (counted twice at worst, until the next count).
        tally.recent = tally.recent.saturating_sub(recent_before);
        Ok(())
    }
}

/// A count whose folders could not be looked up, with the lookup's own code.
pub fn uncountable(e: SiteError) -> FsError {
    match e {
        SiteError::Fs(e) => e,
        e => FsError::Relayed {
            code: e.code(),
            message: e.to_string(),
        },
    }
}

/// A count that failed, said as such; a count the permissions stopped says what to fix.
fn uncounted(e: FsError) -> FsError {
    match e.code() {
        ferry_codes::Code::PermissionDenied => FsError::Relayed {
            code: ferry_codes::Code::PermissionDenied,
            message: format!(
                "the storage quota could not be counted: {e}. A folder under public/ whose \
                 permissions keep even its owner out stops the count: make it readable \
                 again (chmod u+rwx) or delete it"
            ),
        },
        _ => e,
    }
}

/// One writer's share of a person's quota: room is taken before bytes are written, and
/// given back if the write is abandoned.
pub struct QuotaClaim {
    account: Arc<Account>,
    counter: Counter,
    /// Bytes this claim holds, and whether it counted again before refusing.
    mine: Mutex<(u64, bool)>,
}

impl std::fmt::Debug for QuotaClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaClaim")
            .field("limit", &self.account.limit)
            .finish_non_exhaustive()
    }
}

impl QuotaClaim {
    fn mine(&self) -> MutexGuard<'_, (u64, bool)> {
        self.mine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes counted against the quota now, this claim's included.
    pub fn used(&self) -> u64 {
        self.account.tally().used()
    }

    /// The quota, in bytes.
    pub fn limit(&self) -> u64 {
        self.account.limit
    }
}

impl Budget for QuotaClaim {
    fn take(&self, bytes: u64) -> Result<(), FsError> {
        let mut mine = self.mine();
        loop {
            {
                let mut tally = self.account.tally();
                let used = tally.used();
                if used.saturating_add(bytes) <= self.account.limit {
                    tally.in_flight += bytes;
                    mine.0 += bytes;
                    return Ok(());
                }
                if mine.1 {
                    return Err(FsError::QuotaExceeded {
                        limit: self.account.limit,
                        used: used - mine.0,
                    });
                }
            }
            // Before refusing, count again: a file deleted since may have made room.
            mine.1 = true;
            self.account.refresh(&self.counter, true)?;
        }
    }

    fn release(&self) {
        let mut mine = self.mine();
        let mut tally = self.account.tally();
        tally.in_flight = tally.in_flight.saturating_sub(mine.0);
        mine.0 = 0;
    }

    fn commit(&self) {
        let mut mine = self.mine();
        let mut tally = self.account.tally();
        tally.in_flight = tally.in_flight.saturating_sub(mine.0);
        tally.recent = tally.recent.saturating_add(mine.0);
        mine.0 = 0;
    }
}

impl Drop for QuotaClaim {
    fn drop(&mut self) {
        // Room taken and neither committed nor released (a claim used without a writer)
        // is given back.
        self.release();
    }
}

impl Site {
    /// The folders, relative to the site, whose files count against `person`'s quota:
    /// `public/` of the main workspace and of each project, the saved command output, and
    /// the trash. They are looked up when called, which is when a count is due: a claim
    /// whose count is still fresh asks the database nothing.
    pub fn usage_roots(
        &self,
        person: &str,
    ) -> impl Fn() -> Result<Vec<String>, SiteError> + Send + Sync + 'static {
        let (db, person) = (self.db.clone(), person.to_owned());
        move || {
            let mut roots = vec![layout::public_of(&layout::home(&person))];
            let projects: Vec<String> = db.rows(
                "SELECT id FROM projects WHERE person = ?1 ORDER BY id",
                params![person],
                |r| r.get(0),
            )?;
            for project in projects {
                roots.push(layout::public_of(&layout::project(&person, &project)));
            }
            roots.push(layout::private_sub(&person, TERMINAL_OUTPUT_DIR));
            // What a delete moved into the trash still takes room until it leaves it.
            roots.push(layout::trash(&person));
            Ok(roots)
        }
    }

    /// Counts `person`'s bytes now, as the service (a fresh walk, no cache).
    pub fn count_usage(&self, person: &str) -> Result<u64, SiteError> {
        Ok(self.service_counter(person)?()?)
    }

    /// A claim on `person`'s quota for one writer, counted by the service's own walk.
    pub fn quota_claim(&self, person: &str) -> Result<QuotaClaim, SiteError> {
        let counter = self.service_counter(person)?;
        self.quota_claim_counted_by(person, counter)
    }

    /// A claim on `person`'s quota whose counts are made by `counter` (host mode: as the
    /// person, who alone may read their folders).
    pub fn quota_claim_counted_by(
        &self,
        person: &str,
        counter: Counter,
    ) -> Result<QuotaClaim, SiteError> {
        let account = {
            let mut people = self.usage.people.lock().unwrap_or_else(|e| e.into_inner());
            people
                .entry(person.to_owned())
                .or_insert_with(|| {
                    Arc::new(Account {
                        limit: self.config().limits.person_max_bytes,
                        tally: Mutex::default(),
                        counting: Mutex::new(()),
                    })
                })
                .clone()
        };
        account.refresh(&counter, false)?;
        Ok(QuotaClaim {
            account,
            counter,
            mine: Mutex::new((0, false)),
        })
    }

    /// Marks `person`'s count stale (files were removed): the next claim counts again.
    pub fn usage_changed(&self, person: &str) {
        let people = self.usage.people.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(account) = people.get(person) {
            account.tally().counted_at = None;
        }
    }

    /// The service's walk of `person`'s counted folders.
    fn service_counter(&self, person: &str) -> Result<Counter, SiteError> {
        let root = self.root().try_clone()?;
        let roots = self.usage_roots(person);
        Ok(Arc::new(move || {
            let mut total = 0u64;
            for rel in &roots().map_err(uncountable)? {
                match root.open_dir(rel, Follow::Never) {
                    Ok(dir) => total = total.saturating_add(dir.file_bytes()?),
                    // Missing, or not a folder ferry writes into (a link is never followed).
                    Err(FsError::NotFound | FsError::PathEscapes | FsError::NotADirectory) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(total)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_config::Config;

    fn site(limit: u64) -> (tempfile::TempDir, Site) {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.limits.person_max_bytes = limit;
        let site = Site::open(tmp.path(), crate::testing::metadata(tmp.path(), config)).unwrap();
        site.add_person("ann").unwrap();
        site.add_project("ann", "p1").unwrap();
        site.workspace("ann", None).unwrap().public().unwrap();
        (tmp, site)
    }

    #[test]
    fn every_public_folder_and_the_saved_output_count() {
        let (tmp, site) = site(1 << 40);
        let home = tmp.path().join("home/ann");
        std::fs::write(home.join("public/a"), [0u8; 100]).unwrap();
        std::fs::write(home.join("projects/p1/public/attachments/b"), [0u8; 20]).unwrap();
        let output = tmp
            .path()
            .join("private/people/ann")
            .join(TERMINAL_OUTPUT_DIR);
        std::fs::create_dir_all(&output).unwrap();
        std::fs::write(output.join("run-1.log"), [0u8; 3]).unwrap();
        // Elsewhere in the workspace: not counted.
        std::fs::write(home.join("notes"), [0u8; 1000]).unwrap();
        assert_eq!(site.count_usage("ann").unwrap(), 123);
    }

    #[test]
    fn claims_racing_for_the_last_room_never_pass_the_quota_together() {
        let (_tmp, site) = site(100);
        let site = Arc::new(site);
        let all_tried = Arc::new(std::sync::Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (site, all_tried) = (site.clone(), all_tried.clone());
                std::thread::spawn(move || {
                    let claim = site.quota_claim("ann").unwrap();
                    let won = claim.take(30).is_ok();
                    // Every claim still holds its room while the others try.
                    all_tried.wait();
                    won
                })
            })
            .collect();
        let winners: usize = threads
            .into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum();
        assert_eq!(winners, 3, "3 × 30 fit in 100, a fourth does not");
        // The room of dropped claims is free again.
        let claim = site.quota_claim("ann").unwrap();
        assert!(claim.take(99).is_ok(), "below the limit");
        assert!(claim.take(1).is_ok(), "at the limit");
        let err = claim.take(1).unwrap_err();
        assert!(
            matches!(
                err,
                FsError::QuotaExceeded {
                    limit: 100,
                    used: 0
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("100 bytes"), "{err}");
    }

    #[test]
    fn a_count_sees_files_written_and_removed_since_the_last() {
        let (tmp, site) = site(100);
        let public = tmp.path().join("home/ann/public");
        std::fs::write(public.join("big"), [0u8; 100]).unwrap();
        let claim = site.quota_claim("ann").unwrap();
        assert!(matches!(
            claim.take(1),
            Err(FsError::QuotaExceeded { used: 100, .. })
        ));
        // A refusal counts again first: a file removed meanwhile makes room.
        let claim = site.quota_claim("ann").unwrap();
        std::fs::remove_file(public.join("big")).unwrap();
        assert!(claim.take(100).is_ok());
        drop(claim);
        // A file written behind ferry's back is seen at the next count.
        std::fs::write(public.join("again"), [0u8; 60]).unwrap();
        site.usage_changed("ann");
        let claim = site.quota_claim("ann").unwrap();
        assert_eq!(claim.used(), 60);
        assert!(claim.take(41).is_err());
        assert!(claim.take(40).is_ok());
    }
}
