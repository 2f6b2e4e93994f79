//! Picks: the agent asks for a file on the person's computer; it arrives once, through a
//! signed link, and is kept for [`PICK_FILE_TTL`].

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_config::SiteMode;
use ferry_config::limits::{INTERACTION_RECORD_TTL, PICK_FILE_TTL, PICK_LINK_TTL};
use ferry_fs::{AtomicWriter, Follow, FsError, Written, safe_name};

use super::{
    InteractionError, KIND_PICK, PICK_ID_PREFIX, State, check_text, duration_ms, from_millis,
    is_interaction_id, millis, new_id,
};
use crate::db::{Exec, params};
use crate::layout::{self, PICK_STAGING_DIR, PICKS_DIR};
use crate::{Site, SiteError};

/// A pick just asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickRequest {
    /// The pick's id (`pk_…`).
    pub id: String,
    /// Until when the person may upload (whole seconds).
    pub link_expires: SystemTime,
}

/// How a wait for a pick ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PickOutcome {
    /// The file is at `path` (absolute) until `expires`, when it is swept away.
    Arrived {
        /// Where the file is, absolute.
        path: PathBuf,
        /// When it is swept away.
        expires: SystemTime,
    },
    /// The person declined.
    Cancelled,
    /// Nothing arrived before the link expired or the waiter gave up.
    Expired,
}

/// A pick whose link an upload holds: only this upload can complete it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedPick {
    pub(super) id: String,
    pub(super) person: String,
}

impl ClaimedPick {
    /// The pick's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The person who was asked.
    pub fn person(&self) -> &str {
        &self.person
    }
}

/// A picked file, in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickArrival {
    /// The pick's id.
    pub id: String,
    /// The safe name (C-NAME) the file was stored under.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// Lower-case hex SHA-256 of the content.
    pub sha256: String,
}

impl Site {
    // ------------------------------------------------------------------ picks

    /// Asks `person` to pick a file on their computer; `prompt` says which and why. The
    /// file arrives through a signed link (see [`Site::pick_link`]) valid for
    /// [`PICK_LINK_TTL`].
    pub fn request_pick(&self, person: &str, prompt: &str) -> Result<PickRequest, SiteError> {
        check_text("prompt", prompt, true)?;
        self.require_person(person)?;
        let id = new_id(PICK_ID_PREFIX)?;
        let now = SystemTime::now();
        // Whole seconds: the link carries its expiry in seconds, and both must agree.
        let link_expires_secs = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .saturating_add(PICK_LINK_TTL.as_secs());
        let link_expires = UNIX_EPOCH + Duration::from_secs(link_expires_secs);
        self.db.execute(
            &format!(
                "INSERT INTO interactions
                     (id, person, kind, state, prompt, created_ms, expires_ms, seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, {})",
                crate::db::next_seq("interactions")
            ),
            params![
                id,
                person,
                KIND_PICK,
                State::Pending.as_str(),
                prompt,
                millis(now),
                millis(link_expires),
            ],
        )?;
        Ok(PickRequest { id, link_expires })
    }

    /// Waits (blocking, polling the database) until the file of pick `id` arrives, the
    /// person cancels, the link expires, or `timeout` passes (which expires the link).
    /// An upload under way when the link expires may still finish.
    pub fn wait_for_pick(&self, id: &str, timeout: Duration) -> Result<PickOutcome, SiteError> {
        self.wait_for(id, KIND_PICK, timeout, |row| match row.state {
            State::Arrived => Some(match (&row.file_name, row.file_expires_ms) {
                (Some(name), Some(expires_ms)) => {
                    match self.pick_file_path(&row.person, id, name) {
                        Ok(path) => Ok(PickOutcome::Arrived {
                            path,
                            expires: from_millis(expires_ms),
                        }),
                        Err(e) => Err(e),
                    }
                }
                // Arrived rows always carry both; a row edited by hand counts as nothing.
                _ => Ok(PickOutcome::Expired),
            }),
            State::Cancelled => Some(Ok(PickOutcome::Cancelled)),
            State::Expired => Some(Ok(PickOutcome::Expired)),
            _ => None,
        })?
    }

    /// `person` declines the pick `id` (also while their upload runs: that upload then fails).
    pub fn cancel_pick(&self, person: &str, id: &str) -> Result<(), SiteError> {
        let now = millis(SystemTime::now());
        let changed = self.db.execute(
            "UPDATE interactions SET state = ?1, answered_ms = ?2
             WHERE id = ?3 AND person = ?4 AND kind = ?5
               AND (state = ?6 OR (state = ?7 AND expires_ms > ?2))",
            params![
                State::Cancelled.as_str(),
                now,
                id,
                person,
                KIND_PICK,
                State::Receiving.as_str(),
                State::Pending.as_str(),
            ],
        )?;
        if changed == 1 {
            return Ok(());
        }
        Err(self.why_unanswerable(person, id, KIND_PICK))
    }

    // ------------------------------------------------------------------ pick uploads

    /// Takes pick `id`'s link for one upload: the link must still be pending. Until
    /// [`Site::finish_pick`] or [`Site::release_pick`], a second upload is refused with
    /// [`InteractionError::UploadInProgress`], and waiters keep waiting past the link's
    /// expiry.
    pub fn claim_pick(&self, id: &str) -> Result<ClaimedPick, SiteError> {
        // The id names a folder once claimed: only the shape this module makes.
        if !is_interaction_id(id) {
            return Err(InteractionError::Unknown(id.to_owned()).into());
        }
        let changed = self.db.execute(
            "UPDATE interactions SET state = ?1
             WHERE id = ?2 AND kind = ?3 AND state = ?4 AND expires_ms > ?5",
            params![
                State::Receiving.as_str(),
                id,
                KIND_PICK,
                State::Pending.as_str(),
                millis(SystemTime::now()),
            ],
        )?;
        let row = self
            .row_of(id, KIND_PICK)?
            .ok_or_else(|| InteractionError::Unknown(id.to_owned()))?;
        if changed == 1 {
            return Ok(ClaimedPick {
                id: id.to_owned(),
                person: row.person,
            });
        }
        Err(match row.state {
            State::Receiving => InteractionError::UploadInProgress,
            State::Arrived => InteractionError::LinkUsed,
            State::Cancelled => InteractionError::LinkCancelled,
            _ => {
                self.expire(id, &[State::Pending])?;
                InteractionError::LinkExpired
            }
        }
        .into())
    }

    /// The largest file a pick accepts: the member upload cap (`media.max_upload_bytes`).
    pub fn pick_max_bytes(&self) -> u64 {
        self.config().media.max_upload_bytes
    }

    /// Starts writing the picked file, named `raw_name` made safe (C-NAME), at
    /// `private/people/<person>/tmp/picks/<id>/<name>`: through confined handles, capped
    /// at [`Site::pick_max_bytes`], owned by the agent in container mode. The one place
    /// that writes a picked file, so another way of writing can replace it.
    pub fn pick_writer(
        &self,
        claim: &ClaimedPick,
        raw_name: &str,
    ) -> Result<(AtomicWriter, String), SiteError> {
        let name = safe_name(raw_name)?;
        let owner = self.config().agent_ids(&claim.person);
        // In host mode the service cannot enter the person's folders: the file is staged
        // in the service's own folder and placed as the person (`finish_pick_with`).
        let rel = match self.mode() {
            SiteMode::Host => staging_dir_rel(&claim.id),
            _ => pick_dir_rel(&claim.person, &claim.id),
        };
        let dir = self
            .make_dir(&rel, 0o700, owner)
            .map_err(|e| match self.mode() {
                SiteMode::Host => e,
                _ => in_the_way(&claim.person, e),
            })?;
        let writer = AtomicWriter::create(&dir, &name)?
            .limit(self.pick_max_bytes())
            .owner(owner);
        Ok((writer, name))
    }

    /// Puts the picked file in place and marks the pick arrived, for [`PICK_FILE_TTL`].
    /// Refused, with nothing kept, when the person cancelled or the waiter gave up meanwhile.
    /// Not for host mode, where the file must be placed as the person: see
    /// [`Site::finish_pick_with`].
    pub fn finish_pick(
        &self,
        claim: &ClaimedPick,
        writer: AtomicWriter,
        name: &str,
    ) -> Result<PickArrival, SiteError> {
        self.finish_pick_with(claim, writer, name, &|_, _| {
            Err(FsError::Relayed {
                code: ferry_codes::Code::Internal,
                message: "host mode places picked files as the person".to_owned(),
            })
        })
    }

    /// [`Site::finish_pick`], where in host mode `place(staged, destination)` copies the
    /// staged file, acting as the person, into a temporary beside its destination in the
    /// person's folder, and hands back the step that puts it in place.
    ///
    /// The pick's state is read, the file put in place and the pick marked arrived in one
    /// write transaction: a cancel or an expiry (from this process or another) either
    /// comes before, and nothing is placed, or after, and finds the file arrived.
    pub fn finish_pick_with(
        &self,
        claim: &ClaimedPick,
        writer: AtomicWriter,
        name: &str,
        place: &dyn Fn(&Path, &Path) -> Result<PutInPlace, FsError>,
    ) -> Result<PickArrival, SiteError> {
        // A pick that ended meanwhile is not copied at all.
        if let Some(why) = self.pick_upload_stops(claim)? {
            drop(writer);
            self.remove_pick_dir(&claim.person, &claim.id)?;
            return Err(why.into());
        }
        let put: Box<dyn FnOnce() -> Result<Written, SiteError>> = match self.mode() {
            SiteMode::Host => {
                let written = writer.commit()?;
                let staging = std::path::absolute(self.path())?.join(staging_dir_rel(&claim.id));
                let destination = self.pick_file_path(&claim.person, &claim.id, name)?;
                let copied = place(&staging.join(name), &destination);
                self.remove_staging_dir(&claim.id)?;
                let put_in_place = match copied {
                    Ok(put) => put,
                    Err(e) => {
                        self.release_pick(claim)?;
                        return Err(placing_error(&claim.person, e));
                    }
                };
                let person = claim.person.clone();
                Box::new(move || {
                    put_in_place().map_err(|e| placing_error(&person, e))?;
                    Ok(written)
                })
            }
            _ => Box::new(move || Ok(writer.commit()?)),
        };
        /// How the transaction below ended, for what follows it.
        enum Placed {
            Arrived(Written),
            Stopped(InteractionError),
            Failed(SiteError),
        }
        let placed = self.db.transaction_once(|tx| {
            let state: Option<String> = tx.row(
                &format!(
                    "SELECT state FROM interactions WHERE id = ?1 AND kind = ?2{}",
                    tx.for_update()
                ),
                params![&claim.id, KIND_PICK],
                |r| r.get(0),
            )?;
            if let Some(why) = stop_reason(state.as_deref().and_then(State::parse)) {
                return Ok::<_, SiteError>(Placed::Stopped(why));
            }
            let written = match put() {
                Ok(written) => written,
                Err(e) => return Ok(Placed::Failed(e)),
            };
            let now = millis(SystemTime::now());
            tx.execute(
                "UPDATE interactions
                 SET state = ?1, answered_ms = ?2, file_name = ?3, file_expires_ms = ?4
                 WHERE id = ?5 AND state = ?6",
                params![
                    State::Arrived.as_str(),
                    now,
                    name,
                    now.saturating_add(duration_ms(PICK_FILE_TTL)),
                    &claim.id,
                    State::Receiving.as_str(),
                ],
            )?;
            Ok(Placed::Arrived(written))
        })?;
        let written = match placed {
            Placed::Arrived(written) => written,
            Placed::Stopped(why) => {
                // Unplaced: the writer's or the person's temporary went with `put`.
                self.remove_pick_dir(&claim.person, &claim.id)?;
                return Err(why.into());
            }
            Placed::Failed(e) => {
                if self.mode() == SiteMode::Host {
                    self.release_pick(claim)?;
                }
                return Err(e);
            }
        };
        Ok(PickArrival {
            id: claim.id.clone(),
            name: name.to_owned(),
            size: written.size,
            sha256: written.sha256_hex(),
        })
    }

    /// Why the upload holding `claim` must stop now: the person cancelled, the waiter gave
    /// up, or the row is gone; `None` while the pick is still receiving.
    pub fn pick_upload_stops(
        &self,
        claim: &ClaimedPick,
    ) -> Result<Option<InteractionError>, SiteError> {
        let state = self.row_of(&claim.id, KIND_PICK)?.map(|row| row.state);
        Ok(stop_reason(state))
    }

    /// Gives a claimed link back after a failed upload, so the person can try again, and
    /// removes whatever the attempt left. A pick that has moved on keeps its state; an
    /// arrived file stays, the leftovers of a cancelled or expired one go.
    pub fn release_pick(&self, claim: &ClaimedPick) -> Result<(), SiteError> {
        let released = self.db.execute(
            "UPDATE interactions SET state = ?1 WHERE id = ?2 AND state = ?3",
            params![State::Pending.as_str(), claim.id, State::Receiving.as_str()],
        )?;
        // An upload stopped because the pick ended leaves nothing either.
        let ended = released == 0
            && self
                .row_of(&claim.id, KIND_PICK)?
                .is_some_and(|row| matches!(row.state, State::Cancelled | State::Expired));
        if released == 1 || ended {
            self.remove_pick_dir(&claim.person, &claim.id)?;
        }
        Ok(())
    }

    /// Removes picked files past [`PICK_FILE_TTL`] and the leftovers of picks that ended
    /// without a file, and forgets requests older than [`INTERACTION_RECORD_TTL`].
    /// Returns how many pick folders it removed.
    pub fn sweep_picks(&self) -> Result<usize, SiteError> {
        self.sweep_picks_at(SystemTime::now())
    }

    /// [`Site::sweep_picks`] with an explicit clock.
    pub fn sweep_picks_at(&self, now: SystemTime) -> Result<usize, SiteError> {
        let now_ms = millis(now);
        let mut removed = 0;
        for person in self.persons()? {
            let rel = layout::private_sub(&person, PICKS_DIR);
            let picks = match self.root().open_dir(&rel, Follow::Never) {
                Ok(dir) => dir,
                Err(FsError::NotFound) => continue,
                // Host mode: the person's folder is theirs alone; their tmp/ is theirs to clear.
                Err(FsError::PermissionDenied) if self.mode() == SiteMode::Host => continue,
                // A link in place of a folder of ours: leave it, and everything it points at.
                Err(FsError::PathEscapes | FsError::NotADirectory) => {
                    tracing::warn!("{rel} is not a folder; picked files there are not swept");
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for entry in picks.entries()? {
                // Only folders this module made; anything else there is left alone.
                if !entry.name.starts_with(PICK_ID_PREFIX) || !is_interaction_id(&entry.name) {
                    continue;
                }
                let row = self.row_of(&entry.name, KIND_PICK)?;
                let keep = row.is_some_and(|row| match row.state {
                    State::Pending | State::Receiving => true,
                    State::Arrived => row.file_expires_ms.is_some_and(|at| at > now_ms),
                    _ => false,
                });
                if !keep {
                    picks.remove(&entry.name)?;
                    removed += 1;
                }
            }
        }
        self.db.execute(
            "DELETE FROM interactions WHERE created_ms <= ?1",
            params![now_ms.saturating_sub(duration_ms(INTERACTION_RECORD_TTL))],
        )?;
        Ok(removed)
    }

    /// The absolute path of a picked file.
    fn pick_file_path(&self, person: &str, id: &str, name: &str) -> Result<PathBuf, SiteError> {
        Ok(std::path::absolute(self.path())?
            .join(pick_dir_rel(person, id))
            .join(name))
    }

    fn remove_pick_dir(&self, person: &str, id: &str) -> Result<(), SiteError> {
        if self.mode() == SiteMode::Host {
            return self.remove_staging_dir(id);
        }
        let rel = layout::private_sub(person, PICKS_DIR);
        let picks = match self.root().open_dir(&rel, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        match picks.remove(id) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Site {
    /// Removes host mode's staging folder of pick `id` and what is in it.
    fn remove_staging_dir(&self, id: &str) -> Result<(), SiteError> {
        let staging = match self.root().open_dir(&staging_root_rel(), Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let folder = match staging.open_dir(id, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for entry in folder.entries()? {
            match folder.remove(&entry.name) {
                Ok(()) | Err(FsError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        match staging.remove_empty_dir(id) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// The last step of placing a picked file in host mode: puts the person's temporary in
/// place. Dropped without being run, the temporary is discarded.
pub type PutInPlace = Box<dyn FnOnce() -> Result<(), FsError>>;

/// Why an upload in `state` (`None`: no such row) cannot complete; `None` while receiving.
fn stop_reason(state: Option<State>) -> Option<InteractionError> {
    match state {
        Some(State::Receiving) => None,
        Some(State::Cancelled) => Some(InteractionError::LinkCancelled),
        Some(State::Arrived) => Some(InteractionError::LinkUsed),
        _ => Some(InteractionError::LinkExpired),
    }
}

/// A failure placing the picked file in `person`'s folder, keeping its code (a link or a
/// file in the way is `path_escapes`, a folder the person cannot enter `permission_denied`).
fn placing_error(person: &str, e: FsError) -> SiteError {
    let where_ = layout::private_sub(person, PICKS_DIR);
    let code = e.code();
    SiteError::Fs(FsError::Relayed {
        code,
        message: format!("the picked file could not be placed in {where_}: {e}"),
    })
}

/// A picks folder that could not be made because something not a folder is in its place
/// (a planted link, a file): named, with what to do, never an internal failure.
fn in_the_way(person: &str, e: SiteError) -> SiteError {
    match e {
        SiteError::Fs(FsError::PathEscapes | FsError::NotADirectory | FsError::Exists) => {
            SiteError::Unsafe {
                path: layout::private_sub(person, PICKS_DIR),
                why: "cannot hold picked files: a link or a file is in the way of its \
                      folders (links are never followed there); remove it and try again"
                    .into(),
            }
        }
        e => e,
    }
}

/// Where host mode stages picked files before placing them as the person: the service's
/// own folder, `.ferry/picks/`.
fn staging_root_rel() -> String {
    PICK_STAGING_DIR.to_owned()
}

/// `.ferry/picks/<id>`, relative to the site.
fn staging_dir_rel(id: &str) -> String {
    format!("{}/{id}", staging_root_rel())
}

/// `private/people/<person>/tmp/picks/<id>`, relative to the site.
fn pick_dir_rel(person: &str, id: &str) -> String {
    format!("{}/{id}", layout::private_sub(person, PICKS_DIR))
}
