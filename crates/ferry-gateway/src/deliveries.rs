//! `POST /v1/deliveries`: the harness hands the member a file by URL (spec M-DELIVER).
//!
//! The bytes are fetched once and copied into `public/attachments/`, never proxied later.
//! The cap counts decoded bytes while they stream, so neither a missing Content-Length
//! nor a compressed bomb gets past it, and nothing is kept when it is exceeded.

use std::time::Duration;

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use ferry_codes::Code;
use ferry_exec::Staging;
use ferry_exec::member::Existing;
use ferry_fs::safe_name;
use ferry_site::PublicPlace;
use ferry_site::SiteError;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, timeout_at};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::auth::Harness;
use crate::body::Sink;
use crate::delivery_name::{choose_name, fallback_name};
use crate::extract::JsonBody;
use crate::openapi::ApiRouter;
use crate::rate::Rate;
use crate::{ApiError, AppState, blocking};
use ferry_site::{AuditAction, AuditEntry};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(deliver))
}

/// A file for the person, by URL.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryRequest {
    /// An absolute `http://` or `https://` URL; its bytes are fetched once.
    url: String,
    /// The file's name; else the answer's `Content-Disposition`, else the URL's last segment.
    filename: Option<String>,
    /// The project whose `public/attachments/` receives it; the main workspace when absent.
    project: Option<String>,
}

/// The file delivered into `public/attachments/`.
#[derive(Serialize, ToSchema)]
pub struct Delivered {
    /// Where it landed, e.g. `public/attachments/report.pdf`.
    path: String,
    /// Bytes.
    size: u64,
    /// Lower-case hex SHA-256 of the content.
    sha256: String,
    /// The line naming the file for the person: `📎 report.pdf — public/attachments/report.pdf`.
    notice: String,
}

/// Delivers a file to the person by URL (the agent harness's token).
///
/// The bytes are fetched once into `public/attachments/`, replacing a file of that name.
#[utoipa::path(
    post,
    path = "/v1/deliveries",
    operation_id = "deliver",
    tag = "deliveries",
    security(("bearer" = [])),
    request_body = DeliveryRequest,
    responses((status = 201, description = "The file was fetched and delivered.", body = Delivered))
)]
pub async fn deliver(
    State(state): State<AppState>,
    Harness(who): Harness,
    request: Request,
) -> Result<(StatusCode, Json<Delivered>), ApiError> {
    // Before the body is read and anything fetched: a delivery refused for the person's
    // rate does nothing.
    state.rates.take(&who.person, Rate::Deliveries)?;
    let JsonBody(request) = JsonBody::<DeliveryRequest>::from_request(request, &state).await?;
    let url = reqwest::Url::parse(&request.url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        .ok_or_else(|| {
            ApiError::new(
                Code::BadUrl,
                "the url must be an absolute http:// or https:// URL",
            )
        })?;
    // What the URL parser takes, a request line may not (past 64 KiB, for one): refused
    // here as the client's, not later as the upstream's failure.
    if url.as_str().parse::<axum::http::Uri>().is_err() {
        return Err(ApiError::new(
            Code::BadUrl,
            "the url cannot be sent in an HTTP request (it is too long, or holds what a \
             request line cannot)",
        ));
    }
    let (site, person, project) = (
        state.site.clone(),
        who.person.clone(),
        request.project.clone(),
    );
    blocking(move || site.workspace(&person, project.as_deref()).map(|_| ())).await?;

    let limits = &state.site.config().deliveries;
    let deadline = Instant::now() + Duration::from_secs(limits.timeout_secs);
    let timed_out = || upstream_timeout(limits.timeout_secs);
    let delivered = fetch(
        &state,
        &who.person,
        &request,
        url,
        limits.max_bytes,
        deadline,
        timed_out,
    )
    .await;
    // The record names the workspace path it landed at, or the URL it failed to fetch.
    let kind = who.kind.as_str();
    let entry = match &delivered {
        Ok(d) => AuditEntry::new(&who.person, kind, AuditAction::Delivery, &d.path)
            .bytes(d.size, Some(&d.sha256)),
        Err(e) => AuditEntry::new(&who.person, kind, AuditAction::Delivery, &request.url)
            .failed(e.code.as_str()),
    };
    crate::audit::record(&state, entry.project(request.project.as_deref())).await;
    delivered.map(|d| (StatusCode::CREATED, Json(d)))
}

async fn fetch(
    state: &AppState,
    person: &str,
    request: &DeliveryRequest,
    url: reqwest::Url,
    max_bytes: u64,
    deadline: Instant,
    timed_out: impl Fn() -> ApiError,
) -> Result<Delivered, ApiError> {
    let response = timeout_at(deadline, state.http.get(url.clone()).send())
        .await
        .map_err(|_| timed_out())?
        .map_err(upstream_failure)?;
    if !response.status().is_success() {
        // The number only: a reason phrase is the upstream's words, not ours to repeat.
        return Err(ApiError::new(
            Code::UpstreamError,
            format!(
                "the server of the url answered HTTP {}",
                response.status().as_u16()
            ),
        ));
    }
    // reqwest drops Content-Length when it decodes, so a declared length is the real one.
    if response.content_length().is_some_and(|len| len > max_bytes) {
        return Err(ApiError::too_large(max_bytes));
    }
    let disposition = response
        .headers()
        .get(header::CONTENT_DISPOSITION)
        .map(|v| v.as_bytes().to_vec());
    let id = ferry_fs::random_hex::<8>();
    let name = choose_name(
        request.filename.as_deref(),
        disposition.as_deref(),
        url.as_str(),
        &id,
    );

    let fallback = fallback_name(&id);
    // A name nothing can be made of (`..`) still delivers, under the fallback.
    let name = safe_name(&name)
        .or_else(|_| safe_name(&fallback))
        .map_err(SiteError::from)?;
    let path = ferry_site::layout::in_attachments(&name);
    let (starting, who, project, target) = (
        state.clone(),
        person.to_owned(),
        request.project.clone(),
        name.clone(),
    );
    let staging = blocking(move || {
        let toolbox = starting.member_toolbox(&who, project.as_deref())?;
        let mut staging = Staging::start(
            toolbox.shared_requester(),
            project.as_deref(),
            PublicPlace::Attachments,
            Some(&target),
            Existing::Replace,
        )
        .map_err(ApiError::from)?;
        staging.sink().set_limit(max_bytes);
        let quota = toolbox.quota_claim().map_err(ApiError::from_tool)?;
        staging.sink().set_budget(Some(Box::new(quota)));
        Ok::<_, ApiError>(staging)
    })
    .await?;

    let mut sink = Sink::new(staging);
    let streamed = match timeout_at(deadline, stream_into(&mut sink, response)).await {
        Ok(result) => result,
        Err(_) => Err(timed_out()),
    };
    if let Err(err) = streamed {
        // Wait for the staging to be dropped (which removes its temporary) before
        // answering, so that "nothing is kept" already holds when the client hears of it.
        drop(sink.finish().await);
        return Err(err);
    }
    let filled = sink.finish().await?;
    // The delivery's record is made by its caller, which also records failures before
    // anything was staged.
    let written = crate::member::commit_filled(
        state,
        filled,
        request.project.clone(),
        PublicPlace::Attachments,
        name.clone(),
        Existing::Replace,
        None,
    )
    .await?;
    crate::events::announce_attachments(
        state,
        person,
        request.project.as_deref(),
        vec![path.clone()],
    )
    .await;
    Ok(Delivered {
        notice: ferry_site::delivery_notice(&path),
        size: written.size,
        sha256: written.sha256_hex(),
        path,
    })
}

/// Streams the response body into `sink`; stops early when the writer refuses (over the
/// cap), which [`Sink::finish`] then reports.
async fn stream_into(
    sink: &mut Sink<Staging>,
    response: reqwest::Response,
) -> Result<(), ApiError> {
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(upstream_failure)?;
        if !sink.send(chunk).await {
            break;
        }
    }
    Ok(())
}

fn upstream_failure(err: reqwest::Error) -> ApiError {
    if err.is_timeout() {
        return upstream_timeout(0);
    }
    ApiError::new(
        Code::UpstreamError,
        format!("fetching the url failed: {}", without_url(&err)),
    )
}

fn upstream_timeout(secs: u64) -> ApiError {
    let within = if secs > 0 {
        format!(" within {secs} seconds")
    } else {
        String::new()
    };
    ApiError::new(
        Code::UpstreamTimeout,
        format!("the url did not deliver the whole file{within}"),
    )
}

/// reqwest's message, without the URL (which may carry credentials in its query).
pub(crate) fn without_url(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    if let Some(url) = err.url() {
        text = text
            .replace(&format!(" ({url})"), "")
            .replace(url.as_str(), "the url");
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
