//! `GET /v1/files/preview` (spec M-DAILY "Look before downloading"): what the Files
//! panel shows of a file, from the code `file_preview` uses (ferry-preview).
//!
//! The file is opened as the person (`MemberAction::Open`, so host mode reads it in the
//! person's worker); only its descriptor comes back, and ferry-preview reads that on a
//! blocking thread. Two answers:
//! - without `format` (or `format=json`): JSON, the [`ferry_preview::PanelPreview`] with
//!   the file's `path`, `name` and `project`;
//! - `format=image`: the picture (an image scaled, a PDF's first page drawn) as
//!   `image/png`, never anything a browser would run.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ferry_codes::Code;
use ferry_config::limits::{PREVIEW_QUEUE_WAIT_SECS, PREVIEWS_AT_ONCE};
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_preview::{PdfRenderer, PreviewError};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::openapi::ApiRouter;
use crate::turns::PersonTurns;

use crate::auth::Member;
use crate::extract::QueryParams;
use crate::member::out_of_turn;
use crate::{ApiError, AppState, blocking};

/// The hidden `ferry` subcommand that draws a PDF page in a process of its own.
pub const RENDER_SUBCOMMAND: &str = "preview-render";

/// The preview routes, merged into the API's router.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().route("/v1/files/preview", get(preview))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewQuery {
    path: String,
    project: Option<String>,
    format: Option<String>,
}

/// Which representation the request asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Image,
}

/// Previews in progress in this process, `PREVIEWS_AT_ONCE` at most.
fn turns() -> &'static Arc<Semaphore> {
    static TURNS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    TURNS.get_or_init(|| Arc::new(Semaphore::new(PREVIEWS_AT_ONCE)))
}

/// One preview at a time per person, so a person's slow previews never hold every slot.
fn person_turns() -> &'static PersonTurns {
    static TURNS: OnceLock<PersonTurns> = OnceLock::new();
    TURNS.get_or_init(PersonTurns::default)
}

async fn preview(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<PreviewQuery>,
) -> Result<Response, ApiError> {
    let format = match q.format.as_deref() {
        None | Some("json") => Format::Json,
        Some("image") => Format::Image,
        Some(_) => {
            return Err(ApiError::new(
                Code::BadQuery,
                "format is 'json' (the default) or 'image'",
            ));
        }
    };
    let opened = state
        .member(
            &who.person,
            q.project.as_deref(),
            MemberAction::Open {
                path: q.path.clone(),
            },
        )
        .await
        .map_err(|e| match e.code {
            // Whatever lies outside public/ does not exist for the member, as for downloads.
            Code::PathEscapes => ApiError::not_found(),
            _ => e,
        })?;
    let (meta, mut file) = match opened {
        (MemberReply::Opened(meta), Some(file)) => (meta, file),
        _ => return Err(out_of_turn()),
    };
    let turn = tokio::time::timeout(Duration::from_secs(PREVIEW_QUEUE_WAIT_SECS), async {
        let own = person_turns().take(&who.person).await;
        turns()
            .clone()
            .acquire_owned()
            .await
            .ok()
            .map(|shared| (own, shared))
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| {
        ApiError::new(
            Code::PreviewBusy,
            "the server is busy making other previews; try again in a moment",
        )
    })?;
    let name = meta.name.clone();
    let size = meta.size;
    match format {
        Format::Json => {
            let preview = blocking(move || {
                let _turn = turn;
                ferry_preview::panel_preview(&mut file, &name, size).map_err(preview_error)
            })
            .await?;
            let mut body =
                serde_json::to_value(preview).map_err(|e| ApiError::internal("preview", e))?;
            if let Some(object) = body.as_object_mut() {
                object.insert("path".to_owned(), json!(q.path));
                object.insert("name".to_owned(), json!(meta.name));
                object.insert("project".to_owned(), json!(q.project));
            }
            let mut response = Json(body).into_response();
            no_store(&mut response);
            Ok(response)
        }
        Format::Image => {
            let rendering = blocking(move || {
                let _turn = turn;
                let renderer = renderer().map_err(preview_error)?;
                ferry_preview::panel_image(&mut file, &name, size, &renderer).map_err(preview_error)
            })
            .await?;
            image_response(rendering)
        }
    }
}

/// The picture, with headers that keep a browser from ever treating it as a page.
fn image_response(rendering: ferry_preview::ModelImage) -> Result<Response, ApiError> {
    let mut response = Response::builder()
        .status(StatusCode::OK)
        // Only PNG ever comes out of ferry-preview for the panel; say so, whatever it is.
        .header(header::CONTENT_TYPE, "image/png")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::CONTENT_SECURITY_POLICY, "default-src 'none'")
        .header(
            header::CONTENT_DISPOSITION,
            "inline; filename=\"preview.png\"",
        )
        .header("x-preview-width", rendering.width)
        .header("x-preview-height", rendering.height)
        .header(header::CONTENT_LENGTH, rendering.bytes.len())
        .body(Body::from(rendering.bytes))
        .map_err(|e| ApiError::internal("response", e))?;
    no_store(&mut response);
    Ok(response)
}

/// A preview is made for one look: nothing of a person's file stays in a cache.
fn no_store(response: &mut Response) {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("private, no-store"),
    );
}

/// This very program, started as `ferry preview-render`.
fn renderer() -> Result<PdfRenderer, PreviewError> {
    let program = std::env::current_exe().map_err(|e| PreviewError::RenderUnavailable {
        reason: format!("the server's own program cannot be found: {e}"),
    })?;
    Ok(PdfRenderer::new(program, [RENDER_SUBCOMMAND]))
}

/// A preview's failure as the API answers it: its own code, its own sentence (a read
/// error's sentence goes to the log instead, as every internal one does).
fn preview_error(e: PreviewError) -> ApiError {
    match e.code() {
        Code::IoError => ApiError::internal("preview", e),
        code => ApiError::new(code, e.to_string()),
    }
}
