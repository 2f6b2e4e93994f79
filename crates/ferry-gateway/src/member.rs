//! How the member API acts in a workspace: the site checks the person and the project,
//! then the person's requester does the work (ferry-exec `member.rs`), in process in
//! local and container mode and in the person's own worker in host mode. One body for
//! every mode.

use std::fs::File;
use std::sync::Arc;

use ferry_exec::Staging;
use ferry_exec::member::{Existing, MemberAction, MemberReply};
use ferry_exec::ops::{Op, Reply};
use ferry_fs::Written;
use ferry_site::{AttachmentsState, AuditEntry, PublicPlace, Site, SiteError};

use crate::body::Filled;
use crate::{ApiError, AppState, blocking};

impl AppState {
    /// Runs `action` in the workspace (or `project`) of `person`, on this thread, which
    /// may block: the workspace is checked first, then the person acts.
    pub(crate) fn member_now(
        &self,
        person: &str,
        project: Option<&str>,
        action: MemberAction,
    ) -> Result<(MemberReply, Option<File>), ApiError> {
        let requester = self.member_toolbox(person, project)?.shared_requester();
        let op = Op::Member {
            project: project.map(str::to_owned),
            action,
        };
        match requester.execute(op).map_err(ApiError::from)? {
            (Reply::Member(reply), file) => Ok((reply, file)),
            _ => Err(out_of_turn()),
        }
    }

    /// [`AppState::member_now`] on a blocking thread.
    pub(crate) async fn member(
        &self,
        person: &str,
        project: Option<&str>,
        action: MemberAction,
    ) -> Result<(MemberReply, Option<File>), ApiError> {
        let (state, person, project) =
            (self.clone(), person.to_owned(), project.map(str::to_owned));
        blocking(move || state.member_now(&person, project.as_deref(), action)).await
    }

    /// The files directly in the `public/attachments/` of `person`'s workspace or `project`.
    pub(crate) fn attachments_now(
        &self,
        person: &str,
        project: Option<&str>,
    ) -> Result<AttachmentsState, ApiError> {
        let action = MemberAction::Attachments { unchanged: None };
        match self.member_now(person, project, action)? {
            (MemberReply::Attachments { files, .. }, _) => Ok(files.unwrap_or_default()),
            _ => Err(out_of_turn()),
        }
    }

    /// The tools of `person` (their requester, their quota), once the person and
    /// `project` are known to the site.
    pub(crate) fn member_toolbox(
        &self,
        person: &str,
        project: Option<&str>,
    ) -> Result<Arc<ferry_tools::Toolbox>, ApiError> {
        self.site.workspace(person, project)?;
        self.toolbox(person).map_err(ApiError::from_tool)
    }
}

/// Places a filled upload or delivery at `name` in `place` of the main workspace or
/// `project`, through the worker that staged it. `record`, when given, goes into the
/// audit trail on the same trip to the blocking pool, as the commit ended (its size and
/// sha256, or the code it failed with): one hand-off between threads fewer for each
/// upload.
pub(crate) async fn commit_filled(
    state: &AppState,
    filled: Filled<Staging>,
    project: Option<String>,
    place: PublicPlace,
    name: String,
    existing: Existing,
    record: Option<AuditEntry>,
) -> Result<Written, ApiError> {
    let site = state.site.clone();
    placing(state, move || {
        commit_now(&site, filled, project, place, &name, existing, record)
    })
    .await
}

/// Runs `place` on a blocking thread once it is this placement's turn (at most
/// `PLACEMENTS_PER_CORE` per core at once). Uploads replacing files in one folder all
/// take its lock: 64 at once measured half the placements a second of 8 at once, at
/// twice the CPU each (bench/README.md). A request that goes away while it waits has
/// placed nothing; one that goes away once its placement runs leaves the turn taken
/// until the placement ends, since the placement goes on without it.
pub(crate) async fn placing<T: Send + 'static>(
    state: &AppState,
    place: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let turn = state
        .placements
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| ApiError::internal("placements", e))?;
    blocking(move || {
        let placed = place();
        drop(turn);
        placed
    })
    .await
}

/// [`commit_filled`] on this thread, which may block.
pub(crate) fn commit_now(
    site: &Site,
    filled: Filled<Staging>,
    project: Option<String>,
    place: PublicPlace,
    name: &str,
    existing: Existing,
    record: Option<AuditEntry>,
) -> Result<Written, ApiError> {
    let committed = filled
        .complete()
        .map_err(|e| ApiError::from(SiteError::from(e)))
        .and_then(|staging| {
            staging
                .commit(project.as_deref(), place, name, existing)
                .map_err(ApiError::from)
        });
    if let Some(entry) = record {
        site.audit(&match &committed {
            Ok(written) => entry.bytes(written.size, Some(&written.sha256_hex())),
            Err(e) => entry.failed(e.code.as_str()),
        });
    }
    committed
}

/// The person's requester answered with a reply of another operation.
pub(crate) fn out_of_turn() -> ApiError {
    ApiError::internal("member", "an answer out of turn")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::Receiver;
    use std::time::Duration;

    /// Counts the placements running, and the most that ever ran at once.
    #[derive(Default)]
    struct Running {
        now: AtomicUsize,
        most: AtomicUsize,
        done: AtomicUsize,
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn placements_take_turns_held_until_they_end_and_one_given_up_while_waiting_places_nothing()
     {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), ferry_config::Config::default()).unwrap();
        let state = AppState::new(Arc::new(site)).unwrap();
        let turns = state.placements.available_permits();
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(turns, ferry_config::limits::PLACEMENTS_PER_CORE * cores);

        let running = Arc::new(Running::default());
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(std::sync::Mutex::new(gate));
        let place = |running: Arc<Running>, gate: Arc<std::sync::Mutex<Receiver<()>>>| {
            move || {
                let now = running.now.fetch_add(1, Ordering::SeqCst) + 1;
                running.most.fetch_max(now, Ordering::SeqCst);
                // Held while waiting: the others wait for the lock.
                gate.lock().unwrap().recv().unwrap();
                running.now.fetch_sub(1, Ordering::SeqCst);
                running.done.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ApiError>(())
            }
        };
        let start = || {
            let (state, work) = (state.clone(), place(running.clone(), gate.clone()));
            tokio::spawn(async move { placing(&state, work).await })
        };
        // As many placements as turns. Each waits on the gate: the first holds it, the
        // others wait for its lock.
        let mut tasks: Vec<_> = (0..turns).map(|_| start()).collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while running.now.load(Ordering::SeqCst) < turns {
            assert!(
                std::time::Instant::now() < deadline,
                "the turns were not taken"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The request of a running placement goes away: the placement goes on, and
        // keeps its turn until it ends.
        let left = tasks.remove(0);
        left.abort();
        assert!(left.await.unwrap_err().is_cancelled());
        // One more waits for a turn, and another is given up while it waits.
        let waiting = start();
        let given_up = start();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(running.now.load(Ordering::SeqCst), turns);
        assert_eq!(state.placements.available_permits(), 0);
        assert!(!waiting.is_finished() && !given_up.is_finished());
        given_up.abort();
        assert!(given_up.await.unwrap_err().is_cancelled());
        // Let them through one by one: the waiting one runs once one ends.
        for _ in 0..=turns {
            release.send(()).unwrap();
        }
        tasks.push(waiting);
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // The left one gives its turn back once it has ended.
        while state.placements.available_permits() < turns {
            assert!(
                std::time::Instant::now() < deadline,
                "a turn was not given back"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(running.done.load(Ordering::SeqCst), turns + 1);
        assert_eq!(running.most.load(Ordering::SeqCst), turns);
    }
}
