//! The trash routes (spec M-DAILY "Undo a delete"): `DELETE /v1/files` moves into the
//! person's trash (see `files.rs`), `GET /v1/trash` lists it, `POST
//! /v1/trash/{id}/restore` puts an entry back, `DELETE /v1/trash/{id}` removes it for
//! good. The records are the site's; every move is made by the person's requester, so in
//! host mode by the person's own worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ferry_codes::Code;
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_site::{PublicPath, TrashEntry, TrashRoom, rfc3339};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::auth::Member;
use crate::extract::OptionalJsonBody;
use crate::member::out_of_turn;
use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};
use ferry_site::{AuditAction, AuditEntry};

/// How often `ferry serve` removes the trash entries whose time is over (and once at start).
const TRASH_SWEEP_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// The trash routes.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(restore))
        .routes(routes!(purge))
}

/// One entry of the trash.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = TrashEntry)]
struct EntryView {
    /// The entry's id, for a restore or a purge.
    id: String,
    /// Where it was and goes back to, `public/…`.
    path: String,
    /// Its last name.
    name: String,
    /// The project it was deleted from; null for the main workspace.
    #[schema(required = true)]
    project: Option<String>,
    /// What it is; null while it is being moved into the trash.
    #[serde(rename = "type")]
    #[schema(required = true)]
    kind: Option<ferry_site::NodeKind>,
    /// Bytes of its files (a folder's, at every depth).
    size: u64,
    /// When it was deleted (RFC 3339, UTC).
    #[schema(format = DateTime)]
    deleted_at: String,
    /// When it is removed for good (RFC 3339, UTC).
    #[schema(format = DateTime)]
    expires_at: String,
}

/// The person's trash.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TrashList {
    /// Every project's entries, newest first.
    entries: Vec<EntryView>,
    /// The bytes the trash holds now.
    bytes: u64,
    /// The most it may hold (`files.trash_max_bytes`); a delete past it is refused.
    max_bytes: u64,
}

/// Where a restored entry is back.
#[derive(Serialize, ToSchema)]
struct Restored {
    /// The entry, from `public/` on.
    path: String,
    /// Its project; null for the main workspace.
    #[schema(required = true)]
    project: Option<String>,
}

fn at(secs: i64) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64))
}

impl From<TrashEntry> for EntryView {
    fn from(e: TrashEntry) -> EntryView {
        EntryView {
            name: e.path.rsplit('/').next().unwrap_or_default().to_owned(),
            id: e.id,
            path: e.path,
            project: e.project,
            kind: e.kind,
            size: e.size,
            deleted_at: at(e.deleted),
            expires_at: at(e.expires),
        }
    }
}

/// The person's trashed entries (every project's), newest first, and what the trash holds.
#[utoipa::path(
    get,
    path = "/v1/trash",
    operation_id = "listTrash",
    tag = "trash",
    security(("bearer" = [])),
    responses((status = 200, description = "The trash's entries, what it holds and may hold.", body = TrashList))
)]
async fn list(
    State(state): State<AppState>,
    Member(who): Member,
) -> Result<Json<TrashList>, ApiError> {
    let site = state.site.clone();
    let (entries, held) = blocking(move || {
        let entries = site.trash_entries(&who.person)?;
        let held = site.trash_held_bytes(&who.person)?;
        Ok::<_, ferry_site::SiteError>((entries, held))
    })
    .await?;
    let entries: Vec<EntryView> = entries.into_iter().map(EntryView::from).collect();
    Ok(Json(TrashList {
        entries,
        bytes: held,
        max_bytes: state.site.config().files.trash_max_bytes,
    }))
}

/// The optional body of a restore.
#[derive(Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct RestoreBody {
    /// A new last name, for when the original one is taken.
    name: Option<String>,
}

/// Puts an entry back at its path (or as `name` beside it), never overwriting.
#[utoipa::path(
    post,
    path = "/v1/trash/{id}/restore",
    operation_id = "restoreTrash",
    tag = "trash",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The trash entry's id.")),
    request_body(content = Option<RestoreBody>,
                 description = "Optional: a new name, for when the entry's own is taken."),
    responses((status = 200, description = "The entry is back; missing folders on its way were made again.", body = Restored))
)]
async fn restore(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
    OptionalJsonBody(body): OptionalJsonBody<RestoreBody>,
) -> Result<Json<Restored>, ApiError> {
    let name = body.name;
    let restoring = state.clone();
    let person = who.person.clone();
    // A restore that fails before its path is known is recorded under the entry's id.
    let id_shown = format!("trash:{}", id.chars().take(64).collect::<String>());
    let restored = blocking(move || {
        let lock = person_lock(&person);
        let _one_at_a_time = hold(&lock);
        let entry = restoring.site.trash_entry(&person, &id)?;
        let project = entry.project.clone();
        let action = MemberAction::Restore { entry, name };
        match restoring.member_now(&person, project.as_deref(), action) {
            Ok((MemberReply::Path { path }, _)) => {
                // The entry is back in place: that is the answer, even when its record
                // cannot go now (the metadata's disk is full, say). A record whose
                // entry is gone from the trash folder is dropped when next used.
                if let Err(e) = restoring.site.trash_forget(&id) {
                    tracing::warn!("restored {path}, but its trash record stays: {e}");
                }
                Ok((path, project))
            }
            Ok(_) => Err(out_of_turn()),
            Err(e) => {
                // Gone from the trash folder: the record is of no use any more.
                if e.code == Code::NotFound {
                    restoring.site.trash_forget(&id)?;
                }
                Err(e)
            }
        }
    })
    .await;
    let (path, project) = match restored {
        Ok(restored) => restored,
        Err(e) => {
            let entry = AuditEntry::new(
                &who.person,
                who.kind.as_str(),
                AuditAction::Restore,
                &id_shown,
            )
            .failed(e.code.as_str());
            crate::audit::record(&state, entry).await;
            return Err(e);
        }
    };
    let entry = AuditEntry::new(&who.person, who.kind.as_str(), AuditAction::Restore, &path)
        .project(project.as_deref());
    crate::audit::record(&state, entry).await;
    state
        .events
        .publish(&who.person, project.as_deref(), vec![path.clone()]);
    Ok(Json(Restored { path, project }))
}

/// Removes a trash entry for good.
#[utoipa::path(
    delete,
    path = "/v1/trash/{id}",
    operation_id = "purgeTrash",
    tag = "trash",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The trash entry's id.")),
    responses((status = 204, description = "Removed for good."))
)]
async fn purge(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let purging = state.clone();
    let (person, kind) = (who.person.clone(), who.kind);
    let id_shown = format!("trash:{}", id.chars().take(64).collect::<String>());
    let purged = blocking(move || {
        let lock = person_lock(&who.person);
        let _one_at_a_time = hold(&lock);
        let entry = purging.site.trash_entry(&who.person, &id)?;
        purge_entry(&purging, &entry)?;
        Ok::<_, ApiError>(entry)
    })
    .await;
    // Deleted for good: the record names the path it had, and that it was in the trash.
    let entry = match &purged {
        Ok(e) => AuditEntry::new(&person, kind.as_str(), AuditAction::Delete, &e.path)
            .project(e.project.as_deref())
            .to("(deleted for good from the trash)"),
        Err(_) => AuditEntry::new(&person, kind.as_str(), AuditAction::Delete, &id_shown),
    };
    let entry = crate::audit::ended(entry, &purged);
    crate::audit::record(&state, entry).await;
    purged?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes `entry` from its person's trash folder (as the person) and forgets it.
fn purge_entry(state: &AppState, entry: &TrashEntry) -> Result<(), ApiError> {
    let action = MemberAction::Purge {
        id: entry.id.clone(),
    };
    state.member_now(&entry.person, None, action)?;
    state.site.trash_forget(&entry.id)?;
    state.site.usage_changed(&entry.person);
    Ok(())
}

/// Moves `path` of `person`'s workspace (or `project`) into their trash; the entry's id.
/// Refused, with nothing moved, when the trash would pass `files.trash_max_bytes`.
pub(crate) fn trash_now(
    state: &AppState,
    person: &str,
    project: Option<&str>,
    path: &str,
) -> Result<String, ApiError> {
    let site = &state.site;
    site.workspace(person, project)?;
    // Recorded as the client will see it again: `public/…`, normalized.
    let path = PublicPath::parse(path)?.display();
    // One delete of a person at a time, so two cannot both take the trash's last room.
    let lock = person_lock(person);
    let _one_at_a_time = hold(&lock);
    let room = TrashRoom {
        held: site.trash_held_bytes(person)?,
        max: site.config().files.trash_max_bytes,
    };
    let id = site.trash_begin(person, project, &path)?;
    let action = MemberAction::Trash {
        path,
        id: id.clone(),
        room,
    };
    let moved = state.member_now(person, project, action);
    match moved {
        Ok((MemberReply::Trashed(trashed), _)) => {
            site.trash_moved(&id, trashed)?;
            Ok(id)
        }
        other => {
            site.trash_forget(&id)?;
            match other {
                Err(e) => Err(e),
                Ok(_) => Err(out_of_turn()),
            }
        }
    }
}

/// The lock that makes one person's trash changes take turns in this gateway.
fn person_lock(person: &str) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<Mutex<()>>>>> = OnceLock::new();
    LOCKS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(person.to_owned())
        .or_default()
        .clone()
}

/// Takes a person's lock (a panic while it was held left nothing half done in memory).
fn hold(lock: &Mutex<()>) -> std::sync::MutexGuard<'_, ()> {
    lock.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes the entries whose time in the trash is over, each as its person, at start and
/// then every [`TRASH_SWEEP_INTERVAL`].
pub(crate) async fn sweep(state: AppState) {
    let mut ticks = tokio::time::interval(TRASH_SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let sweeping = state.clone();
        let swept = blocking(move || sweep_now(&sweeping, SystemTime::now())).await;
        match swept {
            Ok(n) if n > 0 => tracing::info!(entries = n, "removed expired trash entries"),
            Ok(_) => {}
            Err(e) => tracing::warn!("sweeping the trash: {}", e.message),
        }
    }
}

/// One sweep: every entry expired at `now` is removed for good; one that cannot be is
/// logged and tried again at the next sweep.
pub(crate) fn sweep_now(state: &AppState, now: SystemTime) -> Result<usize, ApiError> {
    let mut removed = 0;
    for entry in state.site.trash_expired(now)? {
        let lock = person_lock(&entry.person);
        let _one_at_a_time = hold(&lock);
        match purge_entry(state, &entry) {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(
                person = entry.person,
                "removing an expired trash entry: {}",
                e.message
            ),
        }
    }
    Ok(removed)
}
