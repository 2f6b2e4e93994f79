//! Share links (spec M-DAILY "Share a file"): `POST /v1/shares` makes one, `GET
//! /v1/shares` lists the live ones, `DELETE /v1/shares/{id}` revokes one, and the public
//! `GET /s/{id}?sig=…` downloads the file without a token, opened as the person (in host
//! mode by their own worker) with no link followed.

use std::time::{Duration, SystemTime};

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{delete, get};
use ferry_codes::Code;
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_site::{PublicPath, Share, SiteError, rfc3339};
use serde::{Deserialize, Serialize};

use crate::auth::Member;
use crate::extract::JsonBody;
use crate::files::send_file;
use crate::member::out_of_turn;
use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};
use ferry_site::{AuditAction, AuditEntry};

/// How often `ferry serve` removes the records of links long past their expiry.
const SHARE_SWEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// The share routes, the public one among them.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .route("/v1/shares", get(list).post(create))
        .route("/v1/shares/{id}", delete(revoke))
        .route("/s/{id}", get(download))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NewShare {
    path: String,
    expires_in_secs: i64,
    project: Option<String>,
}

/// A link as the API shows it to its person.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShareView {
    id: String,
    /// Relative to the gateway's address: `/s/<id>?sig=…`.
    url: String,
    path: String,
    name: String,
    project: Option<String>,
    created_at: String,
    expires_at: String,
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

/// `POST /v1/shares {"path","expiresInSecs"[,"project"]}`: a link to one file that is
/// there now (a folder, a link or nothing is refused as a download would be).
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
    if !matches!(opened, (MemberReply::Opened(_), Some(_))) {
        return Err(out_of_turn());
    }
    let making = state.clone();
    let entry = AuditEntry::new(&who.person, who.kind.as_str(), AuditAction::Share, &path)
        .project(project.as_deref());
    let share = blocking(move || {
        let share = making.site.create_share(
            &who.person,
            project.as_deref(),
            &path,
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

/// `GET /v1/shares`: the person's live links, newest first.
async fn list(
    State(state): State<AppState>,
    Member(who): Member,
) -> Result<Json<serde_json::Value>, ApiError> {
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
    Ok(Json(serde_json::json!({ "shares": shares })))
}

/// `DELETE /v1/shares/{id}`: the link stops working at once.
async fn revoke(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let site = state.site.clone();
    blocking(move || site.revoke_share(&who.person, &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /s/{id}?sig=…`, without a token: the file, as a download that no cache keeps.
/// Every way a link can fail to lead to a file is `404` (nothing said of why), except
/// a link whose signature verifies and whose time is over or that was revoked: `410`.
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
