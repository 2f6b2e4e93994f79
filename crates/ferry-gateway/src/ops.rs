//! Operating the gateway (spec scale S-OPS): `GET /healthz` (the process answers),
//! `GET /readyz` (the metadata database and the media store answer; 503 naming the one
//! that does not) and `GET /metrics` (Prometheus text, for an admin's token).
//!
//! Metrics go through the `metrics` facade, so any crate records them without knowing
//! the exporter; this module installs the Prometheus recorder once per process. The
//! families:
//!
//! | family | kind | labels |
//! |---|---|---|
//! | `ferry_http_requests_total` | counter | `method`, `route`, `status` |
//! | `ferry_http_request_bytes_total` | counter | `route` (request bodies read) |
//! | `ferry_http_response_bytes_total` | counter | `route` (response bodies sent) |
//! | `ferry_upload_duration_seconds` | histogram | `kind`: `media`, `resumable_part`, `delivery` |
//! | `ferry_node_call_duration_seconds` | histogram | `tool`, `outcome` (the node transfers) |
//! | `ferry_event_streams_open` | gauge | |
//! | `ferry_nodes_connected` | gauge | |
//! | `ferry_media_store_bytes`, `ferry_media_store_blobs` | gauge | |
//!
//! A route label is the route's pattern (`/v1/nodes/{id}/approve`), never a path: a
//! request for a path no route has counts as `other`, and so does a method HTTP does not
//! define, so no client can grow the label set.

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ferry_codes::Code;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::nodes::Admin;
use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};
use utoipa_axum::router::UtoipaMethodRouterExt;
use utoipa_axum::routes;

/// This module's routes, for [`crate::router`]. `/metrics` hides its other methods from a
/// non-admin like the route itself.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics).map(|r| r.fallback(crate::nodes::other_method)))
}

/// The label of a request no route matched.
pub(crate) const OTHER_ROUTE: &str = "other";

/// Bucket bounds of the duration histograms, in seconds: a keystroke-sized call to a
/// gigabyte transfer.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The process's Prometheus recorder, installed on first use; `None` when another
/// recorder was installed before (then `/metrics` says so rather than lie with zeros).
fn recorder() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            Some(handle)
        })
        .as_ref()
}

/// Installs the recorder, so that what is recorded from the start is kept.
pub(crate) fn install() {
    if recorder().is_none() {
        tracing::warn!("another metrics recorder is installed: /metrics will answer 503");
    }
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "ferry_http_requests_total",
        "HTTP requests answered, by route pattern and status"
    );
    describe_counter!(
        "ferry_http_request_bytes_total",
        Unit::Bytes,
        "bytes of request bodies read, by route pattern"
    );
    describe_counter!(
        "ferry_http_response_bytes_total",
        Unit::Bytes,
        "bytes of response bodies sent, by route pattern"
    );
    describe_histogram!(
        "ferry_upload_duration_seconds",
        Unit::Seconds,
        "uploads from the request to its answer sent: media, resumable parts, deliveries"
    );
    describe_histogram!(
        "ferry_node_call_duration_seconds",
        Unit::Seconds,
        "agent tool calls against a node (transfers and listings), by tool and outcome"
    );
    describe_gauge!("ferry_event_streams_open", "event streams open now");
    describe_gauge!(
        "ferry_http_connections_open",
        "client connections held now (server.max_connections bounds them)"
    );
    describe_counter!(
        "ferry_http_connections_refused_total",
        "connections answered 503 too_many_connections, past server.max_connections"
    );
    describe_gauge!("ferry_nodes_connected", "nodes whose link is up now");
    describe_gauge!(
        "ferry_uploads_held_bytes",
        Unit::Bytes,
        "bytes of small uploads' files held in memory until their form has been read"
    );
    describe_gauge!(
        "ferry_media_store_bytes",
        Unit::Bytes,
        "bytes of the blobs the media store's records hold"
    );
    describe_gauge!(
        "ferry_media_store_blobs",
        "blobs the media store's records hold"
    );
}

/// Which upload a request is, for `ferry_upload_duration_seconds`.
pub(crate) fn upload_kind(method: &axum::http::Method, route: &str) -> Option<&'static str> {
    use axum::http::Method;
    match (method, route) {
        (&Method::POST, "/v1/media") => Some("media"),
        (&Method::PATCH, "/v1/uploads/{id}") => Some("resumable_part"),
        (&Method::POST, "/v1/deliveries") => Some("delivery"),
        _ => None,
    }
}

/// Records one answered request (called once its body is done with).
pub(crate) fn request_done(
    method: &axum::http::Method,
    route: &str,
    status: StatusCode,
    bytes_out: u64,
    took: Duration,
) {
    metrics::counter!(
        "ferry_http_requests_total",
        "method" => method_label(method),
        "route" => route.to_owned(),
        "status" => status.as_str().to_owned(),
    )
    .increment(1);
    metrics::counter!("ferry_http_response_bytes_total", "route" => route.to_owned())
        .increment(bytes_out);
    if let Some(kind) = upload_kind(method, route) {
        metrics::histogram!("ferry_upload_duration_seconds", "kind" => kind).record(took);
    }
}

/// The method's label: one of the methods HTTP defines, else `other`, since a client
/// may send any token as a method and each would be a series of its own.
fn method_label(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

/// Records bytes read of a request's body.
pub(crate) fn request_bytes(route: &str, bytes: u64) {
    metrics::counter!("ferry_http_request_bytes_total", "route" => route.to_owned())
        .increment(bytes);
}

/// Counts an open event stream while it lives.
pub(crate) struct OpenStream(());

impl OpenStream {
    pub(crate) fn open() -> OpenStream {
        metrics::gauge!("ferry_event_streams_open").increment(1.0);
        OpenStream(())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        metrics::gauge!("ferry_event_streams_open").decrement(1.0);
    }
}

/// The process is up and answering.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "ops",
    responses((status = 200, description = "`ok`.", content_type = "text/plain",
               body = String, example = "ok"))
)]
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// How long `/readyz` waits for the media store's bucket.
const READY_STORE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the gateway can serve: its metadata database and media store answer.
///
/// `ok` when the metadata database and the media store both answer (and, on a site
/// several gateways share, this one hears the others' events), else 503 `not_ready`
/// naming which does not, and why.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "ops",
    responses((status = 200, description = "`ok`: ready to serve.", content_type = "text/plain",
               body = String, example = "ok"))
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    let site = state.site.clone();
    let metadata = blocking(move || site.ping()).await;
    if let Err(e) = metadata {
        // The engine's own words go to the log only: they may name hosts and users.
        tracing::warn!(
            "/readyz: the metadata database does not answer: {}",
            e.message
        );
        return Err(not_ready(format!(
            "the metadata database ({}) does not answer",
            state.site.metadata_engine()
        )));
    }
    if state.site.config().media.backend == ferry_config::MediaBackend::S3 {
        // Bounded here too: a store that takes the connection and never answers is
        // not ready, and `/readyz` says so within seconds.
        let answered = match state.site.blobs() {
            Ok(blobs) => tokio::time::timeout(READY_STORE_WAIT, blobs.check())
                .await
                .unwrap_or_else(|_| Err(std::io::Error::other("no answer within 5 s").into())),
            Err(e) => Err(e),
        };
        if let Err(e) = answered {
            // The store's own words (endpoint, bucket, request ids) go to the log only.
            tracing::warn!("/readyz: the media store does not answer: {e}");
            return Err(not_ready(
                "the media store (the S3 bucket) does not answer".into(),
            ));
        }
        return shared_events_ready(&state);
    }
    // Looked at without opening the store, which would make a missing folder anew.
    let store = state.site.media_dir();
    blocking(move || {
        std::fs::read_dir(&store).map(drop).map_err(|e| {
            not_ready(format!(
                "the media store's folder (.ferry/media in the data folder) cannot be read: {e}"
            ))
        })
    })
    .await?;
    shared_events_ready(&state)
}

fn shared_events_ready(state: &AppState) -> Result<&'static str, ApiError> {
    if !crate::events_shared::hearing(state) {
        return Err(not_ready(
            "not yet hearing the other gateways' events (PostgreSQL notifications)".into(),
        ));
    }
    Ok("ok")
}

fn not_ready(message: String) -> ApiError {
    ApiError::new(Code::NotReady, message)
}

/// Every metric family, in the Prometheus text format, for an admin's token.
///
/// Anyone else is told the route does not exist, as for the node routes.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "ops",
    security(("bearer" = [])),
    responses((status = 200, description = "The Prometheus text exposition (format 0.0.4); for \
               an admin's token only (anyone else is answered 404 no_route).",
               content_type = "text/plain; version=0.0.4", body = String))
)]
pub(crate) async fn metrics(_: Admin, State(state): State<AppState>) -> Result<Response, ApiError> {
    let Some(handle) = recorder() else {
        return Err(not_ready(
            "another metrics recorder was installed in this process before ferry's".into(),
        ));
    };
    metrics::gauge!("ferry_nodes_connected").set(state.nodes.hub.connected().len() as f64);
    metrics::gauge!("ferry_uploads_held_bytes").set(state.uploads_held_bytes() as f64);
    let site = state.site.clone();
    let (bytes, blobs) = blocking(move || site.media_stored()).await?;
    metrics::gauge!("ferry_media_store_bytes").set(bytes as f64);
    metrics::gauge!("ferry_media_store_blobs").set(blobs as f64);
    handle.run_upkeep();
    let text = handle.render();
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(response)
}
