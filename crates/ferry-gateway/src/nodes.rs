//! The admin's node routes (spec nodes N-ADMIN): `GET /v1/nodes`,
//! `POST /v1/nodes/{id}/approve` `{"commands"?:[…]}`, `DELETE /v1/nodes/{id}` (revoke),
//! and a node's terminal (`GET /v1/nodes/{id}/terminal`, see `terminals`) and terminal
//! uploads (`POST /v1/nodes/{id}/terminal/upload`, see `terminal_upload`).
//!
//! Only an admin token sees them. Anyone else, with no token or another kind, gets the
//! answer of a route that does not exist, so the routes tell nothing to a non-admin.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use ferry_codes::Code;
use ferry_site::{NodeRecord, TokenKind};
use serde::Deserialize;
use serde_json::json;

use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};

/// The node routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .route("/v1/nodes", get(list).fallback(other_method))
        .route(
            "/v1/nodes/{id}/approve",
            post(approve).fallback(other_method),
        )
        .route("/v1/nodes/{id}", delete(revoke).fallback(other_method))
        .route(
            "/v1/nodes/{id}/terminal",
            get(crate::terminals::terminal).fallback(other_method),
        )
        .route(
            "/v1/nodes/{id}/terminal/upload",
            post(crate::terminal_upload::upload).fallback(other_method),
        )
}

/// Another method on a node route: told to an admin, hidden from anyone else like the
/// route itself.
pub(crate) async fn other_method(_: Admin) -> ApiError {
    ApiError::new(
        Code::MethodNotAllowed,
        "this route does not take that method",
    )
}

/// A request made with an admin token.
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let hidden = || ApiError::new(Code::NoRoute, "no such route");
        match crate::auth::principal(parts, state).await {
            Ok(p) if p.kind == TokenKind::Admin => Ok(Admin),
            Ok(_) => Err(hidden()),
            // A token that does not authenticate is answered like no token at all.
            Err(e) if e.code == Code::Unauthorized => Err(hidden()),
            Err(e) => Err(e),
        }
    }
}

/// The body of an approval; without `commands`, everything the node advertised.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    commands: Option<Vec<String>>,
}

/// The approval's body: none at all means everything advertised; anything else must be
/// the JSON object, so a broken body is refused rather than read as "approve all".
fn approval(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<Approval>, ApiError> {
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(Code::TooLarge, "the JSON body is too large")
        } else {
            ApiError::new(Code::BadJson, e.body_text())
        }
    })?;
    if body.is_empty() {
        return Ok(None);
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(ApiError::new(
            Code::BadContentType,
            "send the body as JSON with 'Content-Type: application/json'",
        ));
    }
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        ApiError::new(
            Code::BadJson,
            format!("the approval is not {{\"commands\"?:[…]}}: {e}"),
        )
    })
}

/// A node as the admin sees it: `connected` when this gateway's hub holds its link, or
/// another gateway of the site does (its mark, which goes when that gateway does).
fn shown(state: &AppState, node: &NodeRecord) -> serde_json::Value {
    let elsewhere =
        node.connected && !node.gateway.is_empty() && *node.gateway != *state.gateway_id;
    let connected = state.nodes.hub.is_connected(&node.id) || elsewhere;
    serde_json::to_value(node.view(connected)).unwrap_or_default()
}

/// An id that is not even a path segment is no node.
fn node_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    id.map(|Path(id)| id)
        .map_err(|_| ApiError::new(Code::UnknownNode, "there is no such node"))
}

async fn list(
    State(state): State<AppState>,
    _: Admin,
) -> Result<Json<serde_json::Value>, ApiError> {
    let site = state.site.clone();
    let nodes = blocking(move || site.nodes()).await?;
    let nodes: Vec<serde_json::Value> = nodes.iter().map(|n| shown(&state, n)).collect();
    Ok(Json(json!({ "nodes": nodes })))
}

async fn approve(
    State(state): State<AppState>,
    _: Admin,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let id = node_id(id)?;
    let commands = approval(&headers, body)?.and_then(|a| a.commands);
    let site = state.site.clone();
    let node = blocking(move || site.approve(&id, commands)).await?;
    state.events.publish_nodes(&node.id);
    Ok(Json(shown(&state, &node)).into_response())
}

async fn revoke(
    State(state): State<AppState>,
    _: Admin,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = node_id(id)?;
    let site = state.site.clone();
    let node = blocking(move || site.revoke(&id)).await?;
    // A revoked node serves nothing: its link is closed now, not at its next call.
    state.nodes.hub.disconnect(&node.id);
    state.events.publish_nodes(&node.id);
    Ok(Json(shown(&state, &node)).into_response())
}
