//! Share links (spec M-DAILY "Share a file"): `POST /v1/shares` makes one, `GET
//! /v1/shares` lists the live ones, `DELETE /v1/shares/{id}` revokes one, and the public
//! `GET /s/{id}?sig=…` downloads the file without a token, opened as the person (in host
//! mode by their own worker) with no link followed.

use std::time::{Duration, SystemTime};

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use ferry_codes::Code;
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_site::{PublicPath, Share, SiteError, rfc3339};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::auth::Member;
use crate::extract::JsonBody;
use crate::files::{RangeHeaders, file_answers, send_file};
use crate::member::out_of_turn;
use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};
use ferry_site::{AuditAction, AuditEntry};

/// How often `ferry serve` removes the records of links long past their expiry.
const SHARE_SWEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// The share routes, the public one among them.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(revoke))
        .routes(routes!(download))
}

/// A link to make.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NewShare {
    /// The file, from `public/` on.
    #[schema(example = "public/report.pdf")]
    path: String,
    /// How long the link works, in seconds: a minute to 30 days.
    // The derive takes literals only; the test below holds them to the limits.
    #[schema(minimum = 60, maximum = 2592000, example = 86400)]
    expires_in_secs: i64,
    /// The project; absent for the person's main workspace.
    project: Option<String>,
}

/// A link as the API shows it to its person.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Share)]
struct ShareView {
    /// The link's id, for a revoke.
    id: String,
    /// Relative to the gateway's address: `/s/<id>?sig=…`.
    url: String,
    /// The file, from `public/` on.
    path: String,
    /// The file's name.
    name: String,
    /// The project; null for the main workspace.
    #[schema(required = true)]
    project: Option<String>,
    /// When it was made (RFC 3339, UTC).
    #[schema(format = DateTime)]
    created_at: String,
    /// When it stops working (RFC 3339, UTC).
    #[schema(format = DateTime)]
    expires_at: String,
}

/// The person's live links.
#[derive(Serialize, ToSchema)]
struct ShareList {
    /// Newest first.
    shares: Vec<ShareView>,
}

fn view(state: &AppState, share: Share) -> Result<ShareView, SiteError> {
    let secs = |s: i64| SystemTime::UNIX_EPOCH + Duration::from_secs(s.max(0) as u64);
    Ok(ShareView {
        url: state.site.share_url(&share)?,
        name: share.path.rsplit('/').next().unwrap_or_default().to_owned(),
        created_at: rfc3339(secs(share.created)),
        expires_at: rfc3339(share.expires_at()),
        id: share.id,
        path: share.path,
        project: share.project,
    })
}

/// Makes a link to one file there now (a folder, a link or nothing is refused as downloads are).
#[utoipa::path(
    post,
    path = "/v1/shares",
    operation_id = "createShare",
    tag = "shares",
    security(("bearer" = [])),
    request_body = NewShare,
    responses((status = 201, description = "The link made.", body = ShareView))
)]
async fn create(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(body): JsonBody<NewShare>,
) -> Result<(StatusCode, Json<ShareView>), ApiError> {
    ferry_site::check_share_expiry(body.expires_in_secs).map_err(SiteError::from)?;
    let path = PublicPath::parse(&body.path)?.display();
    let project = body.project;
    let opened = state
        .member(
            &who.person,
            project.as_deref(),
            MemberAction::OpenShared { path: path.clone() },
        )
        .await
        .map_err(|e| match e.code {
            // Whatever lies outside public/ (or behind a link) does not exist for the member.
            Code::PathEscapes => ApiError::not_found(),
            _ => e,
        })?;
    let file = match opened {
        (MemberReply::Opened(meta), Some(_)) => ferry_site::file_mark(meta.inode, meta.mtime),
        _ => return Err(out_of_turn()),
    };
    let making = state.clone();
    let entry = AuditEntry::new(&who.person, who.kind.as_str(), AuditAction::Share, &path)
        .project(project.as_deref());
    let share = blocking(move || {
        let share = making.site.create_share(
            &who.person,
            project.as_deref(),
            &path,
            &file,
            body.expires_in_secs,
        )?;
        view(&making, share)
    })
    .await;
    let entry = match &share {
        Ok(share) => entry.to(&share.id),
        Err(e) => entry.failed(e.code.as_str()),
    };
    crate::audit::record(&state, entry).await;
    Ok((StatusCode::CREATED, Json(share?)))
}

/// The person's live links, newest first.
#[utoipa::path(
    get,
    path = "/v1/shares",
    operation_id = "listShares",
    tag = "shares",
    security(("bearer" = [])),
    responses((status = 200, description = "The person's live links.", body = ShareList))
)]
async fn list(
    State(state): State<AppState>,
    Member(who): Member,
) -> Result<Json<ShareList>, ApiError> {
    let listing = state.clone();
    let shares = blocking(move || {
        listing
            .site
            .shares(&who.person)?
            .into_iter()
            .map(|s| view(&listing, s))
            .collect::<Result<Vec<_>, SiteError>>()
    })
    .await?;
    Ok(Json(ShareList { shares }))
}

/// Revokes a link: it stops working at once.
#[utoipa::path(
    delete,
    path = "/v1/shares/{id}",
    operation_id = "revokeShare",
    tag = "shares",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The link's id.")),
    responses((status = 204, description = "The link no longer works."))
)]
async fn revoke(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let site = state.site.clone();
    blocking(move || site.revoke_share(&who.person, &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A shared file, without a token: a download that no cache keeps.
///
/// A link that fails is `404` (nothing said of why), but a signed one expired or revoked: `410`.
#[utoipa::path(
    get,
    path = "/s/{id}",
    operation_id = "downloadShared",
    tag = "shares",
    params(
        ("id" = String, Path, description = "The link's id."),
        ("sig" = String, Query, description = "The link's signature, as its `url` has it; the query holds nothing else."),
        RangeHeaders,
    ),
    responses(SharedFileAnswers)
)]
async fn download(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let sig = query
        .as_deref()
        .and_then(|q| q.strip_prefix("sig="))
        .unwrap_or_default()
        .to_owned();
    let site = state.site.clone();
    let share = blocking(move || site.open_share(&id, &sig)).await?;
    // A download through a link is the link's maker's file moving; token kind `share`.
    let entry = AuditEntry::new(&share.person, "share", AuditAction::Download, &share.path)
        .project(share.project.as_deref())
        .to(&format!("share:{}", share.id));
    let answered = send_shared(&state, &share, &headers).await;
    let entry = match &answered {
        Ok((_, size)) => entry.bytes(*size, None),
        Err(e) => entry.failed(e.code.as_str()),
    };
    crate::audit::record(&state, entry).await;
    answered.map(|(response, _)| response)
}

/// The answers of a download through a link: a file's, kept out of search engines.
struct SharedFileAnswers;

impl utoipa::IntoResponses for SharedFileAnswers {
    fn responses()
    -> std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::Response>> {
        file_answers(&[("X-Robots-Tag", "`noindex, nofollow`.")])
    }
}

/// The shared file's bytes, and its size.
async fn send_shared(
    state: &AppState,
    share: &ferry_site::Share,
    headers: &HeaderMap,
) -> Result<(Response, u64), ApiError> {
    let action = MemberAction::OpenShared {
        path: share.path.clone(),
    };
    let opened = state
        .member(&share.person, share.project.as_deref(), action)
        .await
        .map_err(|e| {
            if e.status().is_client_error() {
                // Gone, a folder now, or a link now: the same answer as an unknown link.
                ApiError::from(SiteError::from(ferry_site::ShareError::Unknown))
            } else {
                e
            }
        })?;
    let (meta, file) = match opened {
        (MemberReply::Opened(meta), Some(file)) => (meta, file),
        _ => return Err(out_of_turn()),
    };
    // Another file where the shared one was (deleted and put again, replaced, changed):
    // not the file the link was made for, and the same answer as an unknown link.
    if !share.file_mark.is_empty()
        && share.file_mark != ferry_site::file_mark(meta.inode, meta.mtime)
    {
        return Err(SiteError::from(ferry_site::ShareError::Unknown).into());
    }
    let size = meta.size;
    let mut response = send_file(meta, file, headers, "private, no-store").await?;
    response.headers_mut().insert(
        header::HeaderName::from_static("x-robots-tag"),
        HeaderValue::from_static("noindex, nofollow"),
    );
    Ok((response, size))
}

/// Removes the records of links long expired, at start and then every
/// [`SHARE_SWEEP_INTERVAL`].
pub(crate) async fn sweep(state: AppState) {
    let mut ticks = tokio::time::interval(SHARE_SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let site = state.site.clone();
        match blocking(move || site.sweep_shares(SystemTime::now())).await {
            Ok(n) => tracing::debug!(records = n, "share links swept"),
            Err(e) => tracing::warn!("sweeping share links: {}", e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use ferry_config::limits::{SHARE_MAX_EXPIRY_SECS, SHARE_MIN_EXPIRY_SECS};
    use utoipa::PartialSchema;

    #[test]
    fn the_described_expiry_bounds_are_the_enforced_ones() {
        let schema = serde_json::to_value(super::NewShare::schema()).unwrap();
        let expiry = &schema["properties"]["expiresInSecs"];
        assert_eq!(expiry["minimum"], SHARE_MIN_EXPIRY_SECS);
        assert_eq!(expiry["maximum"], SHARE_MAX_EXPIRY_SECS);
    }
}
