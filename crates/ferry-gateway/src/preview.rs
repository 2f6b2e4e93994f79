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
use ferry_codes::Code;
use ferry_config::limits::{PREVIEW_QUEUE_WAIT_SECS, PREVIEWS_AT_ONCE};
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_preview::{PanelPreview, PdfRenderer, PreviewError};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

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
    ApiRouter::new().routes(routes!(preview))
}

/// The file to preview, and as what.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PreviewQuery {
    /// The file, from `public/` on.
    #[param(example = "public/report.pdf")]
    path: String,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
    /// `json` (the default) or `image`.
    #[param(inline)]
    format: Option<Format>,
}

/// Which representation the request asks for.
#[derive(Clone, Copy, PartialEq, Eq, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    /// What the file shows, as JSON.
    #[default]
    Json,
    /// The picture: an image scaled, a PDF's first page drawn, as PNG.
    Image,
}

/// A file's preview as the Files panel shows it, and which file it is.
#[derive(Serialize, ToSchema)]
struct FilePreview {
    /// The file, as asked for.
    path: String,
    /// Its name.
    name: String,
    /// The project; null for the person's main workspace.
    #[schema(required = true)]
    project: Option<String>,
    #[serde(flatten)]
    preview: PanelPreview,
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

/// What the Files panel shows of a file: JSON, or with `format=image` the picture.
#[utoipa::path(
    get,
    path = "/v1/files/preview",
    operation_id = "previewFile",
    tag = "files",
    security(("bearer" = [])),
    params(PreviewQuery),
    responses((status = 200,
               description = "The preview as JSON; with `format=image`, the picture as PNG (width and height in the headers). Never stored by a cache.",
               content((FilePreview = "application/json"), ("image/png")),
               headers(("Cache-Control" = String, description = "`private, no-store`."),
                       ("X-Preview-Width" = u32, description = "With `format=image`: the picture's width in pixels."),
                       ("X-Preview-Height" = u32, description = "With `format=image`: the picture's height in pixels."))))
)]
async fn preview(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<PreviewQuery>,
) -> Result<Response, ApiError> {
    let format = q.format.unwrap_or_default();
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
            let body = FilePreview {
                path: q.path,
                name: meta.name,
                project: q.project,
                preview,
            };
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
