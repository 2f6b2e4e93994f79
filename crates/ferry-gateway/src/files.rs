//! The Files panel routes (spec M-LIST, M-GET, M-MANAGE).

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use ferry_exec::member::{MemberAction, MemberReply, Opened};
use ferry_fs::FsError;
use ferry_site::{Listing, SiteError};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;
use tokio_util::io::ReaderStream;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::{
    self, ContentBuilder, HeaderBuilder, RefOr, Required, ResponseBuilder, schema,
};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::auth::Member;
use crate::extract::{JsonBody, QueryParams};
use crate::member::out_of_turn;
use crate::openapi::ApiRouter;
use crate::range::{RangeRequest, etag_for, if_none_match_hits, if_range_allows, parse_range};
use crate::{ApiError, AppState, blocking};
use ferry_site::{AuditAction, AuditEntry};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(list, delete))
        .routes(routes!(download))
        .routes(routes!(mkdir))
        .routes(routes!(move_entry))
}

/// Bytes read per chunk of a download.
const DOWNLOAD_CHUNK_BYTES: usize = 64 * 1024;

/// The workspace a request is about.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ProjectQuery {
    /// The project; absent for the person's main workspace.
    pub project: Option<String>,
}

/// One file of a workspace.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PathQuery {
    /// The file, from `public/` on.
    #[param(example = "public/report.pdf")]
    path: String,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
}

/// What to delete, and whether for good.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// The file or folder, from `public/` on; a folder goes with everything in it.
    #[param(example = "public/old.txt")]
    path: String,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
    /// Deletes for good instead of moving into the trash.
    #[serde(default)]
    forever: bool,
}

/// The header a delete into the trash names the entry's trash id in, for an undo.
pub const TRASH_ID_HEADER: &str = "ferry-trash-id";

/// A folder to make.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MkdirBody {
    /// The new folder, from `public/` on; its parent must exist.
    #[schema(example = "public/reports")]
    path: String,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
}

/// An entry to move or rename.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    /// The entry, from `public/` on.
    #[schema(example = "public/a.txt")]
    from: String,
    /// Where it goes, from `public/` on; an existing entry there is never replaced.
    #[schema(example = "public/reports/a.txt")]
    to: String,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
}

/// Where a made or moved entry is now.
#[derive(Serialize, ToSchema)]
pub struct PathAnswer {
    /// The entry, from `public/` on, as the workspace names it (normalized).
    path: String,
}

/// The tree under the workspace's `public/`: links shown and never followed, folders first.
#[utoipa::path(
    get,
    path = "/v1/files",
    operation_id = "listFiles",
    tag = "files",
    security(("bearer" = [])),
    params(ProjectQuery),
    responses((status = 200, description = "The tree under `public/`.", body = Listing))
)]
pub async fn list(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<ProjectQuery>,
) -> Result<Json<Listing>, ApiError> {
    match state
        .member(&who.person, q.project.as_deref(), MemberAction::List)
        .await?
    {
        (MemberReply::Listing(flat), _) => flat
            .into_tree()
            .map(Json)
            .ok_or_else(|| ApiError::internal("listing", "the worker's listing is not a tree")),
        _ => Err(out_of_turn()),
    }
}

/// Makes a folder (not `public/attachments`, which the system keeps).
#[utoipa::path(
    post,
    path = "/v1/files/mkdir",
    operation_id = "makeFolder",
    tag = "files",
    security(("bearer" = [])),
    request_body = MkdirBody,
    responses((status = 201, description = "The folder made.", body = PathAnswer))
)]
pub async fn mkdir(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(body): JsonBody<MkdirBody>,
) -> Result<(StatusCode, Json<PathAnswer>), ApiError> {
    let project = body.project.as_deref();
    let path = moved_to(
        state
            .member(
                &who.person,
                project,
                MemberAction::Mkdir { path: body.path },
            )
            .await?,
    )?;
    state
        .events
        .publish(&who.person, project, vec![path.clone()]);
    Ok((StatusCode::CREATED, Json(PathAnswer { path })))
}

/// Moves or renames a file or folder, refusing to replace what is at `to` (`409 exists`).
#[utoipa::path(
    post,
    path = "/v1/files/move",
    operation_id = "moveFile",
    tag = "files",
    security(("bearer" = [])),
    request_body = MoveBody,
    responses((status = 200, description = "Where the entry is now.", body = PathAnswer))
)]
pub async fn move_entry(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(body): JsonBody<MoveBody>,
) -> Result<Json<PathAnswer>, ApiError> {
    let (from, to) = (body.from, body.to);
    let project = body.project.as_deref();
    let entry =
        AuditEntry::new(&who.person, who.kind.as_str(), AuditAction::Move, &from).project(project);
    let moved_from = from.clone();
    let moved = match state
        .member(
            &who.person,
            project,
            MemberAction::Move {
                from,
                to: to.clone(),
            },
        )
        .await
    {
        Ok(reply) => moved_to(reply),
        Err(e) => Err(e),
    };
    let path = match moved {
        Ok(path) => path,
        Err(e) => {
            crate::audit::record(&state, entry.to(&to).failed(e.code.as_str())).await;
            return Err(e);
        }
    };
    crate::audit::record(&state, entry.to(&path)).await;
    state
        .events
        .publish(&who.person, project, vec![moved_from, path.clone()]);
    Ok(Json(PathAnswer { path }))
}

/// Deletes into the person's trash (its id in `Ferry-Trash-Id`), or for good with `forever=true`.
#[utoipa::path(
    delete,
    path = "/v1/files",
    operation_id = "deleteFile",
    tag = "files",
    security(("bearer" = [])),
    params(DeleteQuery),
    responses((status = 204, description = "Deleted: into the trash, or for good with `forever=true`.",
               headers(("Ferry-Trash-Id" = String,
                        description = "The trash entry's id, for `POST /v1/trash/{id}/restore`; absent with `forever=true`."))))
)]
pub async fn delete(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<DeleteQuery>,
) -> Result<Response, ApiError> {
    let (deleting, person, project) = (state.clone(), who.person.clone(), q.project.clone());
    let (path, forever) = (q.path.clone(), q.forever);
    let entry = AuditEntry::new(&who.person, who.kind.as_str(), AuditAction::Delete, &q.path)
        .project(q.project.as_deref());
    let trash_id = blocking(move || {
        if !forever {
            return crate::trash::trash_now(&deleting, &person, project.as_deref(), &path)
                .map(Some);
        }
        let deleted =
            deleting.member_now(&person, project.as_deref(), MemberAction::Delete { path });
        // Even a delete that failed halfway may have freed room.
        if let Ok(workspace) = deleting.site.workspace(&person, project.as_deref()) {
            workspace.usage_changed();
        }
        deleted.map(|_| None)
    })
    .await;
    let entry = crate::audit::ended(entry, &trash_id);
    crate::audit::record(&state, entry).await;
    let trash_id = trash_id?;
    state
        .events
        .publish(&who.person, q.project.as_deref(), vec![q.path]);
    let mut response = Response::builder().status(StatusCode::NO_CONTENT);
    if let Some(id) = trash_id {
        response = response.header(TRASH_ID_HEADER, id);
    }
    response
        .body(Body::empty())
        .map_err(|e| ApiError::internal("response", e))
}

/// The conditional and range headers a download ([`send_file`]) reads.
pub(crate) struct RangeHeaders;

impl IntoParams for RangeHeaders {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        [
            (
                "Range",
                "One range of bytes: `bytes=first-last`, `bytes=first-` or `bytes=-count`; \
                 a malformed one, or several, is answered with the whole file.",
            ),
            (
                "If-None-Match",
                "The `ETag`s of the copies the client has: one that matches is answered `304`.",
            ),
            (
                "If-Range",
                "An `ETag`: the range is sent while the file still has it, the whole file otherwise.",
            ),
        ]
        .into_iter()
        .map(|(name, description)| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(description))
                .schema(Some(
                    schema::ObjectBuilder::new().schema_type(schema::Type::String),
                ))
                .build()
        })
        .collect()
    }
}

/// The answers of [`send_file`]: the whole file, a range, not modified, a range outside.
pub(crate) struct FileAnswers;

impl utoipa::IntoResponses for FileAnswers {
    fn responses() -> BTreeMap<String, RefOr<openapi::Response>> {
        file_answers(&[])
    }
}

/// The answers of [`send_file`], with `extra` headers on each.
pub(crate) fn file_answers(extra: &[(&str, &str)]) -> BTreeMap<String, RefOr<openapi::Response>> {
    let text = || schema::ObjectBuilder::new().schema_type(schema::Type::String);
    let count = || {
        schema::ObjectBuilder::new()
            .schema_type(schema::Type::Integer)
            .format(Some(schema::SchemaFormat::KnownFormat(
                schema::KnownFormat::Int64,
            )))
            .minimum(Some(0))
    };
    let header = |schema: schema::ObjectBuilder, description: &str| {
        HeaderBuilder::new()
            .schema(Some(schema))
            .description(Some(description))
            .build()
    };
    // Said of every answer: what the file is, and that a browser never renders it.
    let described = |mut response: ResponseBuilder| {
        for (name, description) in [
            (
                "ETag",
                "The file's version, for `If-None-Match` and `If-Range`.",
            ),
            ("Last-Modified", "When the file last changed."),
            ("Accept-Ranges", "Always `bytes`."),
            (
                "Content-Disposition",
                "`attachment`, with the file's name (`filename*=UTF-8''…`).",
            ),
            ("Cache-Control", "What a cache may keep of the answer."),
        ]
        .iter()
        .chain(extra)
        {
            response = response.header(*name, header(text(), description));
        }
        response
    };
    // Any bytes, of the type the content shows: no schema says more.
    let bytes = || ContentBuilder::new().build();
    let length = || header(count(), "The bytes in this answer.");
    let mut answers = BTreeMap::new();
    let whole = described(ResponseBuilder::new())
        .description("The whole file, with the type its content shows.")
        .content("*/*", bytes())
        .header("Content-Length", length());
    answers.insert("200".to_owned(), whole.build().into());
    let part = described(ResponseBuilder::new())
        .description("The range asked for.")
        .content("*/*", bytes())
        .header("Content-Length", length())
        .header("Content-Range", header(text(), "`bytes first-last/size`."));
    answers.insert("206".to_owned(), part.build().into());
    let same = described(ResponseBuilder::new())
        .description("The copy the client has (`If-None-Match`) is the file as it is: no body.");
    answers.insert("304".to_owned(), same.build().into());
    let outside = described(ResponseBuilder::new())
        .description("The range lies past the file's end: no body.")
        .header(
            "Content-Range",
            header(text(), "`bytes */size`: the file's size."),
        );
    answers.insert("416".to_owned(), outside.build().into());
    answers
}

/// The file's bytes, as an attachment a browser never renders, with ranges (M-GET).
#[utoipa::path(
    get,
    path = "/v1/files/content",
    operation_id = "downloadFile",
    tag = "files",
    security(("bearer" = [])),
    params(PathQuery, RangeHeaders),
    responses(FileAnswers)
)]
pub async fn download(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<PathQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let entry = AuditEntry::new(
        &who.person,
        who.kind.as_str(),
        AuditAction::Download,
        &q.path,
    )
    .project(q.project.as_deref());
    let opened = state
        .member(
            &who.person,
            q.project.as_deref(),
            MemberAction::Open { path: q.path },
        )
        .await
        .map_err(|e| match e.code {
            // Whatever lies outside public/ does not exist for the member.
            ferry_codes::Code::PathEscapes => ApiError::not_found(),
            _ => e,
        })
        .and_then(|opened| match opened {
            (MemberReply::Opened(meta), Some(file)) => Ok((meta, file)),
            _ => Err(out_of_turn()),
        });
    let (meta, file) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            crate::audit::record(&state, entry.failed(e.code.as_str())).await;
            return Err(e);
        }
    };
    let answered = send_file(meta, file, &headers, "private, no-cache").await;
    // The bytes this answer carries: a range's, none for `304`, the file's otherwise.
    let entry = match &answered {
        Ok(response) if response.status() == StatusCode::RANGE_NOT_SATISFIABLE => {
            entry.failed("range_not_satisfiable")
        }
        Ok(response) => entry.bytes(content_length(response), None),
        Err(e) => entry.failed(e.code.as_str()),
    };
    crate::audit::record(&state, entry).await;
    answered
}

fn content_length(response: &Response) -> u64 {
    response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(0)
}

/// Answers with an opened file's bytes: never rendered by the browser (attachment,
/// nosniff), a sniffed type, `ETag` and `Last-Modified`, `Range` and `If-Range`, and the
/// `cache_control` the route wants. The downloads and the share links use it alike.
pub(crate) async fn send_file(
    meta: Opened,
    mut file: std::fs::File,
    headers: &HeaderMap,
    cache_control: &'static str,
) -> Result<Response, ApiError> {
    let name = meta.name.clone();
    // The one sniffer, so the download and file_preview name the same type.
    let sniffed = name.clone();
    let (content_type, file) = blocking(move || {
        ferry_preview::content_type(&mut file, &sniffed)
            .map(|t| (t, file))
            .map_err(|e| SiteError::from(FsError::Io(e)))
    })
    .await?;
    let len = meta.size;
    let mtime_nanos = meta
        .mtime
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    let etag = etag_for(len, mtime_nanos, meta.inode);
    let header_str = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };

    let mut response = Response::builder()
        .header(header::ETAG, &etag)
        .header(header::LAST_MODIFIED, httpdate::fmt_http_date(meta.mtime))
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::CONTENT_DISPOSITION, content_disposition(&name))
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::CACHE_CONTROL, cache_control);
    if if_none_match_hits(header_str(header::IF_NONE_MATCH), &etag) {
        return response
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .map_err(|e| ApiError::internal("response", e));
    }
    response = response.header(header::CONTENT_TYPE, content_type);
    let range = if if_range_allows(header_str(header::IF_RANGE), &etag) {
        parse_range(header_str(header::RANGE), len)
    } else {
        RangeRequest::Full
    };
    let (status, start, count) = match range {
        RangeRequest::Full => (StatusCode::OK, 0, len),
        RangeRequest::Partial {
            start,
            end_inclusive,
        } => {
            response = response.header(
                header::CONTENT_RANGE,
                format!("bytes {start}-{end_inclusive}/{len}"),
            );
            (
                StatusCode::PARTIAL_CONTENT,
                start,
                end_inclusive - start + 1,
            )
        }
        RangeRequest::Unsatisfiable => {
            return response
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{len}"))
                .body(Body::empty())
                .map_err(|e| ApiError::internal("response", e));
        }
    };
    let mut file = file;
    file.seek(SeekFrom::Start(start))
        .map_err(|e| ApiError::internal("seek", e))?;
    let file = tokio::fs::File::from_std(file);
    let stream = ReaderStream::with_capacity(file.take(count), DOWNLOAD_CHUNK_BYTES);
    response
        .status(status)
        .header(header::CONTENT_LENGTH, count)
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal("response", e))
}

/// The `public/…` path a mkdir or a move answered.
fn moved_to(reply: (MemberReply, Option<std::fs::File>)) -> Result<String, ApiError> {
    match reply {
        (MemberReply::Path { path }, _) => Ok(path),
        _ => Err(out_of_turn()),
    }
}

/// `attachment; filename*=UTF-8''<percent-encoded name>`, with an ASCII fallback.
pub(crate) fn content_disposition(name: &str) -> String {
    const ATTR_CHAR: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'!')
        .remove(b'#')
        .remove(b'$')
        .remove(b'&')
        .remove(b'+')
        .remove(b'-')
        .remove(b'.')
        .remove(b'^')
        .remove(b'_')
        .remove(b'`')
        .remove(b'|')
        .remove(b'~');
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "attachment; filename=\"{ascii}\"; filename*=UTF-8''{}",
        percent_encoding::utf8_percent_encode(name, ATTR_CHAR)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disposition_encodes_every_name() {
        assert_eq!(
            content_disposition("relatório final.pdf"),
            "attachment; filename=\"relat_rio_final.pdf\"; filename*=UTF-8''relat%C3%B3rio%20final.pdf"
        );
        assert!(!content_disposition("a\"b\r\n.txt").contains(['\r', '\n']));
    }
}
