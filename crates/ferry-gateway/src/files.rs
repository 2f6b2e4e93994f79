//! The Files panel routes (spec M-LIST, M-GET, M-MANAGE).

use std::io::{Seek, SeekFrom};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use ferry_exec::member::{MemberAction, MemberReply, Opened};
use ferry_fs::FsError;
use ferry_site::{Listing, SiteError};
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio_util::io::ReaderStream;

use crate::auth::Member;
use crate::extract::{JsonBody, QueryParams};
use crate::member::out_of_turn;
use crate::openapi::ApiRouter;
use crate::range::{RangeRequest, etag_for, if_none_match_hits, if_range_allows, parse_range};
use crate::{ApiError, AppState, blocking};
use axum::routing::{get, post};
use ferry_site::{AuditAction, AuditEntry};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .route("/v1/files", get(list).delete(delete))
        .route("/v1/files/content", get(download))
        .route("/v1/files/mkdir", post(mkdir))
        .route("/v1/files/move", post(move_entry))
}

/// Bytes read per chunk of a download.
const DOWNLOAD_CHUNK_BYTES: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectQuery {
    pub project: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathQuery {
    path: String,
    project: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    path: String,
    project: Option<String>,
    /// Deletes for good instead of moving into the trash.
    #[serde(default)]
    forever: bool,
}

/// The header a delete into the trash names the entry's trash id in, for an undo.
pub const TRASH_ID_HEADER: &str = "ferry-trash-id";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MkdirBody {
    path: String,
    project: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    from: String,
    to: String,
    project: Option<String>,
}

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

pub async fn mkdir(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(body): JsonBody<MkdirBody>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
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
    Ok((StatusCode::CREATED, Json(json!({ "path": path }))))
}

pub async fn move_entry(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(body): JsonBody<MoveBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
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
    Ok(Json(json!({ "path": path })))
}

/// `DELETE /v1/files`: into the person's trash (M-DAILY), its id in [`TRASH_ID_HEADER`];
/// with `forever=true`, for good.
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

/// `GET /v1/files/content`: the bytes, never rendered by the browser, with ranges.
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
