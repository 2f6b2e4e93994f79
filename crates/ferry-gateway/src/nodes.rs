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
use ferry_codes::Code;
use ferry_site::{NodeRecord, NodeView, TokenKind};
use serde::{Deserialize, Serialize};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::UtoipaMethodRouterExt;
use utoipa_axum::routes;

use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};

/// The node routes, for [`crate::router`]. Each keeps [`other_method`] as its fallback, so
/// another method is hidden from a non-admin like the route itself.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(list).map(|r| r.fallback(other_method)))
        .routes({
            // The body is referenced by name, not typed in the attribute: typed, an optional
            // body would be described as admitting `null`, which is refused.
            let (mut schemas, paths, router) = routes!(approve);
            schemas.push((Approval::name().into_owned(), Approval::schema()));
            (schemas, paths, router.fallback(other_method))
        })
        .routes(routes!(revoke).map(|r| r.fallback(other_method)))
        .routes(routes!(crate::terminals::terminal).map(|r| r.fallback(other_method)))
        .routes(routes!(crate::terminal_upload::upload).map(|r| r.fallback(other_method)))
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
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NodeApproval)]
pub struct Approval {
    /// The commands approved, each one the node advertises, e.g. `["dir.list", "file.fetch"]`.
    #[schema(max_items = 32)]
    commands: Option<Vec<String>>,
}

/// Every node the site has a pairing record of.
#[derive(Serialize, ToSchema)]
pub struct NodeList<'a> {
    nodes: Vec<NodeView<'a>>,
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
fn shown<'a>(state: &AppState, node: &'a NodeRecord) -> NodeView<'a> {
    let elsewhere =
        node.connected && !node.gateway.is_empty() && *node.gateway != *state.gateway_id;
    let connected = state.nodes.hub.is_connected(&node.id) || elsewhere;
    node.view(connected)
}

/// An id that is not even a path segment is no node.
fn node_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    id.map(|Path(id)| id)
        .map_err(|_| ApiError::new(Code::UnknownNode, "there is no such node"))
}

/// The site's nodes: pending, approved and revoked.
#[utoipa::path(
    get,
    path = "/v1/nodes",
    operation_id = "listNodes",
    tag = "nodes",
    security(("bearer" = [])),
    responses((status = 200, description = "Every node of the site; for an admin's token only \
               (anyone else is answered 404 no_route).", body = NodeList))
)]
pub(crate) async fn list(State(state): State<AppState>, _: Admin) -> Result<Response, ApiError> {
    let site = state.site.clone();
    let nodes = blocking(move || site.nodes()).await?;
    let nodes = nodes.iter().map(|n| shown(&state, n)).collect();
    Ok(Json(NodeList { nodes }).into_response())
}

/// Approves a node, or its pairing upgrade, for the commands sent.
///
/// With no body, or no `commands`, it is approved for everything it advertised.
#[utoipa::path(
    post,
    path = "/v1/nodes/{id}/approve",
    operation_id = "approveNode",
    tag = "nodes",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The node's id.")),
    request_body(content = ref("#/components/schemas/NodeApproval"), content_type = "application/json",
                 description = "The commands approved; no body approves everything advertised."),
    responses((status = 200, description = "The node as approved.", body = NodeView))
)]
pub(crate) async fn approve(
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

/// Revokes a node: its link closes now, and it is never approved again.
///
/// It pairs again only with a new key, as a new node.
#[utoipa::path(
    delete,
    path = "/v1/nodes/{id}",
    operation_id = "revokeNode",
    tag = "nodes",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The node's id.")),
    responses((status = 200, description = "The node as revoked.", body = NodeView))
)]
pub(crate) async fn revoke(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The description's bound is the one the site enforces (an attribute takes no constant).
    #[test]
    fn the_described_bound_of_an_approval_is_the_sites() {
        let schema = serde_json::to_value(Approval::schema()).unwrap();
        assert_eq!(
            schema["properties"]["commands"]["maxItems"],
            ferry_site::NODE_COMMANDS_MAX
        );
    }
}
