//! `GET /v1/me`: who the request's token speaks for, so the web client shows what that
//! token may use (the Nodes panel for an admin) without probing routes that answer 404.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Member;
use crate::openapi::ApiRouter;
use utoipa_axum::routes;

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(me))
}

/// The token's person and whether it is an admin's.
#[derive(Serialize, ToSchema)]
pub struct Me {
    person: String,
    admin: bool,
}

/// Answers a member's (person or admin) token; a harness token gets 401 like on every
/// member route.
#[utoipa::path(
    get,
    path = "/v1/me",
    operation_id = "me",
    tag = "members",
    security(("bearer" = [])),
    responses((status = 200, description = "The token's person, and whether it is an admin's.", body = Me))
)]
pub async fn me(Member(who): Member) -> Json<Me> {
    Json(Me {
        admin: who.kind == ferry_site::TokenKind::Admin,
        person: who.person,
    })
}
