//! The person in the loop (spec tools `file_delete`, `file_pick`): the person's pending
//! approvals and picks, their answers, and the signed upload link of a pick.
//!
//! The requests themselves are rows in the metadata database (see `ferry_site`'s
//! interactions), made by whichever process runs the agent's tool. The page watcher in
//! `events.rs` keeps the presence of people with a page open fresh and, through
//! [`Watch`], tells their pages when their pending requests change.

use ferry_exec::Change;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use ferry_codes::Code;
use ferry_fs::{AtomicWriter, FsError};
use ferry_site::{
    ClaimedPick, INTERACTION_POLL_INTERVAL, Interaction, InteractionError, InteractionKind,
    PutInPlace, Site, SiteError,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::body::Filled;
use crate::extract::{JsonBody, QueryParams};
use crate::openapi::ApiRouter;
use crate::upload::{multipart_error, open_multipart, receive_file};
use crate::{ApiError, AppState, auth::Member, blocking};

/// How often the gateway removes picked files past their lifetime (also once at start).
pub const PICK_SWEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// The routes of this module, merged into the gateway's router.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(answer_approval))
        .routes(routes!(cancel_pick))
        .routes(routes!(upload_pick))
}

// ---------------------------------------------------------------------- the page watcher

/// The pending request ids each watched person's pages last heard of.
#[derive(Default)]
pub(crate) struct Watch {
    told: Mutex<HashMap<String, Vec<String>>>,
}

impl Watch {
    fn told(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<String>>> {
        self.told.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the people for whom `watched` says no page is open any more.
    pub(crate) fn retain(&self, watched: impl Fn(&str) -> bool) {
        self.told().retain(|person, _| watched(person));
    }
}

/// The person's pending requests changed: `interaction`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct InteractionsEvent {
    #[serde(skip)]
    pub(crate) person: String,
    /// The ids of the person's pending approvals and picks, now.
    ids: Vec<String>,
}

impl crate::events::SseData for InteractionsEvent {
    const EVENT: &'static str = "interaction";
}

fn pending_ids(site: &Site, person: &str) -> Result<Vec<String>, SiteError> {
    Ok(site
        .pending_interactions(person)?
        .into_iter()
        .map(|i| i.id)
        .collect())
}

/// A page of `person` opened its event stream: they are present, and what is pending now
/// is what the page loads itself, so only later changes are events.
pub(crate) async fn page_opened(state: &AppState, person: &str) {
    let (site, who) = (state.site.clone(), person.to_owned());
    let first = blocking(move || {
        site.touch_presence(&who)?;
        pending_ids(&site, &who)
    })
    .await;
    match first {
        Ok(ids) => {
            state
                .events
                .interactions
                .told()
                .entry(person.to_owned())
                .or_insert(ids);
        }
        Err(e) => tracing::warn!("interactions of {person}: {}", e.message),
    }
}

/// One tick of the page watcher for `person`: renews their presence when `touch`, and
/// publishes an `interaction` event when their pending requests changed.
pub(crate) async fn notice(state: &AppState, person: &str, touch: bool) {
    let (site, who) = (state.site.clone(), person.to_owned());
    let now = blocking(move || {
        if touch {
            site.touch_presence(&who)?;
        }
        pending_ids(&site, &who)
    })
    .await;
    let ids = match now {
        Ok(ids) => ids,
        Err(e) => {
            tracing::warn!("interactions of {person}: {}", e.message);
            return;
        }
    };
    let changed = {
        let mut told = state.events.interactions.told();
        let before = told.insert(person.to_owned(), ids.clone());
        before.as_ref() != Some(&ids)
    };
    if changed {
        state.events.publish_interactions(InteractionsEvent {
            person: person.to_owned(),
            ids,
        });
    }
}

/// Removes expired picked files now and every [`PICK_SWEEP_INTERVAL`], for the life of
/// the gateway.
pub(crate) async fn sweep_picks(state: AppState) {
    let mut ticks = tokio::time::interval(PICK_SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let site = state.site.clone();
        match blocking(move || site.sweep_picks()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("removed {n} expired picked file folder(s)"),
            Err(e) => tracing::warn!("sweeping picked files: {}", e.message),
        }
    }
}

// ---------------------------------------------------------------------- routes

/// The person's pending requests, oldest first.
#[derive(Serialize, ToSchema)]
struct PendingInteractions {
    interactions: Vec<PendingInteraction>,
}

/// What an agent's tool asks of the person.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum InteractionKindName {
    /// Approve or deny a tool's action.
    Approval,
    /// Upload a file the agent asked for.
    Pick,
}

/// One pending request as the page shows it: an approval's fields, or a pick's.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PendingInteraction {
    id: String,
    kind: InteractionKindName,
    /// An approval's tool, e.g. `file_delete`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    tool: Option<String>,
    /// What an approval's tool would act on.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    subject: Option<String>,
    /// An approval's sentence for the person.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    summary: Option<String>,
    /// A pick's question for the person.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    prompt: Option<String>,
    /// A pick's signed upload link, relative to the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    upload_url: Option<String>,
    /// When the request stops waiting (RFC 3339, UTC).
    #[schema(format = DateTime)]
    expires: String,
}

impl PendingInteraction {
    fn of(site: &Site, interaction: Interaction) -> Result<PendingInteraction, SiteError> {
        let mut listing = PendingInteraction {
            kind: InteractionKindName::Approval,
            tool: None,
            subject: None,
            summary: None,
            prompt: None,
            upload_url: None,
            expires: ferry_site::rfc3339(interaction.expires),
            id: interaction.id,
        };
        match interaction.kind {
            InteractionKind::Approval {
                tool,
                subject,
                summary,
            } => {
                listing.tool = Some(tool);
                listing.subject = Some(subject);
                listing.summary = Some(summary);
            }
            InteractionKind::Pick { prompt } => {
                listing.kind = InteractionKindName::Pick;
                listing.prompt = Some(prompt);
                listing.upload_url = Some(site.pick_link(&listing.id, interaction.expires)?);
            }
        }
        Ok(listing)
    }
}

/// What the person has not answered yet, oldest first.
#[utoipa::path(
    get,
    path = "/v1/interactions",
    operation_id = "listInteractions",
    tag = "interactions",
    security(("bearer" = [])),
    responses((status = 200, description = "The person's pending approvals and picks.",
               body = PendingInteractions))
)]
async fn list(
    State(state): State<AppState>,
    Member(who): Member,
) -> Result<Json<PendingInteractions>, ApiError> {
    let site = state.site.clone();
    let interactions = blocking(move || {
        site.pending_interactions(&who.person)?
            .into_iter()
            .map(|i| PendingInteraction::of(&site, i))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    Ok(Json(PendingInteractions { interactions }))
}

/// The `{id}` of a route: a request id, else a request that does not exist.
fn interaction_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    match path {
        Ok(Path(id)) if ferry_site::is_interaction_id(&id) => Ok(id),
        Ok(Path(id)) => Err(SiteError::from(InteractionError::Unknown(id)).into()),
        Err(_) => Err(SiteError::from(InteractionError::Unknown(String::new())).into()),
    }
}

/// The person's answer to an approval.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ApprovalAnswer {
    /// `true` lets the tool act; `false` denies it.
    approve: bool,
}

/// What became of a request.
#[derive(Serialize, ToSchema)]
struct InteractionAnswered {
    id: String,
    state: InteractionState,
}

/// A request's state once answered.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum InteractionState {
    Approved,
    Denied,
    Cancelled,
}

/// Approves or denies a pending approval.
#[utoipa::path(
    post,
    path = "/v1/approvals/{id}",
    operation_id = "answerApproval",
    tag = "interactions",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The approval's id, as listed.")),
    request_body = ApprovalAnswer,
    responses((status = 200, description = "The approval, approved or denied.", body = InteractionAnswered))
)]
async fn answer_approval(
    State(state): State<AppState>,
    Member(who): Member,
    path: Result<Path<String>, PathRejection>,
    JsonBody(answer): JsonBody<ApprovalAnswer>,
) -> Result<Json<InteractionAnswered>, ApiError> {
    let id = interaction_id(path)?;
    let (site, answered) = (state.site.clone(), id.clone());
    blocking(move || site.answer_approval(&who.person, &answered, answer.approve)).await?;
    let state = if answer.approve {
        InteractionState::Approved
    } else {
        InteractionState::Denied
    };
    Ok(Json(InteractionAnswered { id, state }))
}

/// The person declines to pick a file.
#[utoipa::path(
    post,
    path = "/v1/picks/{id}/cancel",
    operation_id = "cancelPick",
    tag = "interactions",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The pick's id, as listed.")),
    responses((status = 200, description = "The pick, cancelled.", body = InteractionAnswered))
)]
async fn cancel_pick(
    State(state): State<AppState>,
    Member(who): Member,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<InteractionAnswered>, ApiError> {
    let id = interaction_id(path)?;
    let (site, cancelled) = (state.site.clone(), id.clone());
    blocking(move || site.cancel_pick(&who.person, &cancelled)).await?;
    Ok(Json(InteractionAnswered {
        id,
        state: InteractionState::Cancelled,
    }))
}

/// The query of a pick's upload link. Both are needed; one missing is answered as a bad
/// signature, like one that does not match.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct LinkQuery {
    /// When the link expires, in Unix seconds, as the link says.
    #[param(required = true)]
    expires: Option<String>,
    /// The link's signature, in lowercase hex, as the link says.
    #[param(required = true)]
    sig: Option<String>,
}

/// The form of a pick's upload: one part, named `file`, with its file name.
// Never built: the handler streams the form part by part, so this only describes it.
#[derive(ToSchema)]
#[allow(dead_code)]
struct PickForm {
    /// The file's bytes.
    #[schema(format = Binary)]
    file: String,
}

/// The file the pick received.
#[derive(Serialize, ToSchema)]
struct PickUploaded {
    /// The pick's id.
    id: String,
    /// The file's name, made safe.
    name: String,
    /// Bytes.
    size: u64,
    /// Lower-case hex SHA-256 of the content.
    sha256: String,
}

/// Holds a claimed link for the length of one upload; an upload that fails, or whose
/// client goes away mid-body, gives the link back so the person can try again.
struct Claim {
    site: Arc<Site>,
    claimed: Option<ClaimedPick>,
}

impl Claim {
    fn pick(&self) -> Result<ClaimedPick, ApiError> {
        self.claimed
            .clone()
            .ok_or_else(|| ApiError::internal("pick upload", "the claim was already given up"))
    }

    /// The upload completed: the link stays used.
    fn keep(mut self) {
        self.claimed = None;
    }

    /// Gives the link back before the answer goes out, so an immediate retry finds it free.
    async fn give_back(mut self) {
        if let Some(claimed) = self.claimed.take() {
            let site = self.site.clone();
            if let Err(e) = blocking(move || site.release_pick(&claimed)).await {
                tracing::warn!("giving back a pick link: {}", e.message);
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Only a request dropped mid-flight gets here with its claim still held.
        if let Some(claimed) = self.claimed.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let site = self.site.clone();
            runtime.spawn_blocking(move || {
                if let Err(e) = site.release_pick(&claimed) {
                    tracing::warn!("giving back a pick link: {e}");
                }
            });
        }
    }
}

/// Uploads the person's file for a pick.
///
/// No token: the signature of the link `GET /v1/interactions` lists is the authority.
#[utoipa::path(
    post,
    path = "/v1/picks/{id}/upload",
    operation_id = "uploadPick",
    tag = "interactions",
    params(("id" = String, Path, description = "The pick's id, as the link names it."),
           LinkQuery),
    request_body(content = PickForm, content_type = "multipart/form-data"),
    responses((status = 201, description = "The file was received; the agent's tool gets it.",
               body = PickUploaded))
)]
async fn upload_pick(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    QueryParams(link): QueryParams<LinkQuery>,
    request: Request,
) -> Result<(StatusCode, Json<PickUploaded>), ApiError> {
    let id = match (path, &link.expires, &link.sig) {
        (Ok(Path(id)), Some(_), Some(_)) => id,
        _ => return Err(SiteError::from(InteractionError::BadSignature).into()),
    };
    let (site, checked) = (state.site.clone(), id.clone());
    blocking(move || {
        site.check_pick_link(
            &checked,
            link.expires.as_deref().unwrap_or_default(),
            link.sig.as_deref().unwrap_or_default(),
        )
    })
    .await?;
    // A body declared too large is refused before the link is taken.
    let mut multipart = open_multipart(request, state.site.pick_max_bytes(), state.pace)?;
    let (site, claimed) = (state.site.clone(), id.clone());
    let claimed = blocking(move || site.claim_pick(&claimed)).await?;
    let claim = Claim {
        site: state.site.clone(),
        claimed: Some(claimed),
    };
    let received = async {
        let body = read_pick_body(&state, &claim, &mut multipart);
        // The person may cancel, or the agent stop waiting, while the body streams: the
        // upload stops then, not when the client has sent it all.
        let (filled, name) = tokio::select! {
            read = body => read?,
            why = pick_ended(&state, &claim) => return Err(why),
        };
        let (site, pick) = (state.site.clone(), claim.pick()?);
        // Host mode: the file is placed by the person's own worker (tools.md T-ID).
        let requester = match site.mode() {
            ferry_config::SiteMode::Host => {
                Some(state.toolbox(pick.person()).map_err(ApiError::from_tool)?)
            }
            _ => None,
        };
        blocking(move || {
            let place = |staged: &std::path::Path, destination: &std::path::Path| {
                let toolbox = requester.as_ref().ok_or_else(|| FsError::Relayed {
                    code: Code::Internal,
                    message: "no requester for host mode".to_owned(),
                })?;
                // Copied from the service's staged file into a temporary the person made,
                // through its descriptor: never read whole, holes kept.
                let source = std::fs::File::open(staged).map_err(FsError::from_io)?;
                let destination = destination.to_string_lossy();
                let mut change = Change::in_system_place(toolbox.shared_requester());
                change
                    .stage(&destination, None)
                    .map_err(relayed)?
                    .copy_sparse(&source)?;
                let put: PutInPlace =
                    Box::new(move || change.commit().map(|_| ()).map_err(relayed));
                Ok(put)
            };
            site.finish_pick_with(&pick, filled.complete()?, &name, &place)
        })
        .await
    }
    .await;
    match received {
        Ok(arrival) => {
            claim.keep();
            Ok((
                StatusCode::CREATED,
                Json(PickUploaded {
                    id: arrival.id,
                    name: arrival.name,
                    size: arrival.size,
                    sha256: arrival.sha256,
                }),
            ))
        }
        Err(e) => {
            claim.give_back().await;
            Err(e)
        }
    }
}

/// Reads a pick's form: exactly one part named `file`, streamed into the pick's writer.
/// Returns the filled writer and the file's safe name; nothing is placed yet.
async fn read_pick_body(
    state: &AppState,
    claim: &Claim,
    multipart: &mut crate::upload::Form,
) -> Result<(Filled<AtomicWriter>, String), ApiError> {
    let mut incoming = None;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("file") if incoming.is_none() => {
                let raw_name = field.file_name().unwrap_or_default().to_owned();
                let (site, pick) = (state.site.clone(), claim.pick()?);
                let (writer, name) = blocking(move || site.pick_writer(&pick, &raw_name)).await?;
                incoming = Some((receive_file(&mut field, writer, Vec::new()).await?, name));
            }
            Some("file") => {
                return Err(ApiError::new(
                    Code::TooManyFiles,
                    "send exactly one part named 'file'",
                ));
            }
            other => {
                return Err(ApiError::new(
                    Code::UnexpectedField,
                    format!(
                        "unexpected form field {:?}: send only the part 'file'",
                        other.unwrap_or("")
                    ),
                ));
            }
        }
    }
    // Placed only once the whole body is read and found well formed.
    incoming.ok_or_else(|| ApiError::new(Code::MissingFile, "send the file in a part named 'file'"))
}

/// Resolves once the pick `claim` holds has ended under the upload (cancelled by the
/// person, given up by the agent), with the answer for the uploader; pending while it is
/// still receiving. Looks at the pick's row, which another process may change, every
/// [`INTERACTION_POLL_INTERVAL`].
async fn pick_ended(state: &AppState, claim: &Claim) -> ApiError {
    // The first look is one interval in: the claim was just made, so it is receiving.
    let first = tokio::time::Instant::now() + INTERACTION_POLL_INTERVAL;
    let mut ticks = tokio::time::interval_at(first, INTERACTION_POLL_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (site, pick) = (state.site.clone(), claim.pick());
        let pick = match pick {
            Ok(pick) => pick,
            Err(e) => return e,
        };
        match blocking(move || site.pick_upload_stops(&pick)).await {
            Ok(Some(why)) => return SiteError::from(why).into(),
            Ok(None) => {}
            // The final check under the database's lock still decides; keep streaming.
            Err(e) => tracing::warn!("looking at a pick under upload: {}", e.message),
        }
    }
}

/// A worker's failure as a file system one, its code and sentence kept.
fn relayed(e: ferry_exec::RequestError) -> FsError {
    FsError::Relayed {
        code: e.code,
        message: e.message,
    }
}
