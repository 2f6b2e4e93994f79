//! Finding things and taking whole folders (spec members M-DAILY "Find things" and
//! "Whole folders"): `GET /v1/files/search` and `GET /v1/files/archive`. The person's
//! files are read by the person's requester (ferry-exec `member.rs`), never here.

use std::fs::File;
use std::io;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use ferry_codes::Code;
use ferry_exec::Lease;
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_exec::ops::{Op, Reply};
use ferry_exec::stream::{
    FRAME_DATA, FRAME_END, FRAME_FAILED, FRAME_HEADER_BYTES, FRAME_PAYLOAD_MAX_BYTES,
};
use ferry_site::{SearchQuery, SearchResults};
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::auth::Member;
use crate::extract::QueryParams;
use crate::files::content_disposition;
use crate::member::out_of_turn;
use crate::openapi::ApiRouter;
use crate::turns::PersonTurns;
use crate::{ApiError, AppState, blocking};

/// The routes of this module, merged into the gateway's router.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(search))
        .routes(routes!(archive))
}

/// What to look for, and where.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// Part of a name (or, with `content=true`, a phrase), matched case- and accent-insensitively.
    #[param(example = "report")]
    q: String,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
    /// Also matches inside text files under 1 MiB.
    #[serde(default)]
    content: bool,
}

/// Finds entries under `public/` by name, and with `content=true` inside text files: at most 200.
#[utoipa::path(
    get,
    path = "/v1/files/search",
    operation_id = "searchFiles",
    tag = "files",
    security(("bearer" = [])),
    params(SearchParams),
    responses((status = 200, description = "The matches under `public/`, by path.", body = SearchResults))
)]
pub async fn search(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(params): QueryParams<SearchParams>,
) -> Result<Json<SearchResults>, ApiError> {
    // Refused here first, so a bad query never reaches the person's worker; the worker
    // checks it again.
    SearchQuery::parse(&params.q)?;
    // A content search reads up to hundreds of MiB: one at a time per person, so a
    // person's burst of them queues behind itself rather than taking every core.
    let _turn = match params.content {
        true => Some(content_turns().take(&who.person).await),
        false => None,
    };
    let action = MemberAction::Search {
        query: params.q,
        content: params.content,
    };
    match state
        .member(&who.person, params.project.as_deref(), action)
        .await?
    {
        (MemberReply::Found(found), _) => Ok(Json(found)),
        _ => Err(out_of_turn()),
    }
}

/// The people's turns at content searches.
fn content_turns() -> &'static PersonTurns {
    static TURNS: std::sync::OnceLock<PersonTurns> = std::sync::OnceLock::new();
    TURNS.get_or_init(PersonTurns::default)
}

/// The folder to take.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ArchiveParams {
    /// The folder, from `public/` on.
    #[param(example = "public/reports")]
    path: String,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
}

/// A folder as a zip, streamed; one that fails midway is cut off, never ended as if whole.
//
// The person's requester walks the folder and admits it (or refuses it with the status
// the refusal names, before any byte), then writes the zip into a pipe; this only
// relays the pipe's frames. A stream that fails midway (a file that grew past the cap,
// the writer gone) is aborted, so the client sees a broken transfer, never a short zip
// that reads as whole.
#[utoipa::path(
    get,
    path = "/v1/files/archive",
    operation_id = "downloadFolder",
    tag = "files",
    security(("bearer" = [])),
    params(ArchiveParams),
    responses((status = 200,
               description = "The folder as a zip, streamed (links left out); a transfer cut midway is a failure.",
               content_type = "application/zip",
               headers(("Content-Disposition" = String, description = "`attachment`, with the folder's name and `.zip`."),
                       ("Cache-Control" = String, description = "`private, no-store`."))))
)]
pub async fn archive(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(params): QueryParams<ArchiveParams>,
) -> Result<Response, ApiError> {
    let entry = ferry_site::AuditEntry::new(
        &who.person,
        who.kind.as_str(),
        ferry_site::AuditAction::Download,
        &params.path,
    )
    .project(params.project.as_deref());
    let answered = zip_folder(state.clone(), who, params).await;
    let entry = crate::audit::ended(entry, &answered);
    crate::audit::record(&state, entry).await;
    answered
}

async fn zip_folder(
    state: AppState,
    who: ferry_site::Principal,
    params: ArchiveParams,
) -> Result<Response, ApiError> {
    let max_bytes = state.site.config().files.archive_max_bytes;
    let requester = {
        let (state, person, project) = (state.clone(), who.person.clone(), params.project.clone());
        blocking(move || {
            state
                .member_toolbox(&person, project.as_deref())
                .map(|t| t.shared_requester())
        })
        .await?
    };
    let op = Op::Member {
        project: params.project,
        action: MemberAction::Archive {
            path: params.path,
            max_bytes,
        },
    };
    // Leased: the worker that writes the zip (host mode) stays this download's until it ends.
    let (lease, reply) = blocking(move || {
        let mut lease = Lease::new(requester);
        let reply = lease.execute(op).map_err(ApiError::from)?;
        Ok::<_, ApiError>((lease, reply))
    })
    .await
    .map_err(|e| match e.code {
        // Whatever lies outside public/ (or behind a link) does not exist for the member.
        Code::PathEscapes => ApiError::not_found(),
        _ => e,
    })?;
    let (name, pipe) = match reply {
        (Reply::Member(MemberReply::Archive { name, .. }), Some(pipe)) => (name, pipe),
        _ => return Err(out_of_turn()),
    };
    let frames = Frames::new(pipe, lease).map_err(|e| ApiError::internal("archive pipe", e))?;
    let stream = futures_util::stream::unfold(frames, |mut frames| async move {
        frames.next().await.map(|item| (item, frames))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/zip")
        .header(header::CONTENT_DISPOSITION, content_disposition(&name))
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::CACHE_CONTROL, "private, no-store")
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal("response", e))
}

/// The frames of a zip's pipe, read as the body is sent.
struct Frames {
    /// Dropped before the lease, so the writer sees its reader gone first.
    pipe: Option<pipe::Receiver>,
    lease: Option<Lease>,
}

impl Frames {
    fn new(pipe: File, lease: Lease) -> io::Result<Frames> {
        Ok(Frames {
            pipe: Some(pipe::Receiver::from_file(pipe)?),
            lease: Some(lease),
        })
    }

    /// The next piece of the body; an error aborts the response; none ends it.
    async fn next(&mut self) -> Option<io::Result<Bytes>> {
        let pipe = self.pipe.as_mut()?;
        let read = async {
            let mut header = [0u8; FRAME_HEADER_BYTES];
            pipe.read_exact(&mut header).await?;
            let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
            if len > FRAME_PAYLOAD_MAX_BYTES {
                return Err(io::Error::other("a zip frame over its size"));
            }
            let mut payload = vec![0u8; len];
            pipe.read_exact(&mut payload).await?;
            Ok::<_, io::Error>((header[0], payload))
        };
        let item = match read.await {
            Ok((FRAME_DATA, payload)) => return Some(Ok(Bytes::from(payload))),
            Ok((FRAME_END, _)) => None,
            Ok((FRAME_FAILED, why)) => {
                let why = String::from_utf8_lossy(&why).into_owned();
                tracing::warn!(reason = %why, "folder download aborted");
                Some(Err(io::Error::other(why)))
            }
            Ok((kind, _)) => Some(Err(io::Error::other(format!(
                "a zip frame of unknown kind {kind}"
            )))),
            Err(e) => {
                tracing::warn!(error = %e, "folder download cut: its writer ended early");
                Some(Err(e))
            }
        };
        self.close();
        item
    }

    /// Lets go of the pipe, then of the worker, on a thread that may wait for it.
    fn close(&mut self) {
        self.pipe = None;
        if let Some(lease) = self.lease.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || drop(lease))),
                Err(_) => drop(lease),
            }
        }
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        self.close();
    }
}
