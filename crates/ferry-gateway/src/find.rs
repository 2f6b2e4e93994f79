//! Finding things and taking whole folders (spec members M-DAILY "Find things" and
//! "Whole folders"): `GET /v1/files/search` and `GET /v1/files/archive`. The person's
//! files are read by the person's requester (ferry-exec `member.rs`), never here.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_site::{SearchQuery, SearchResults};
use serde::Deserialize;

use crate::auth::Member;
use crate::extract::QueryParams;
use crate::member::out_of_turn;
use crate::{ApiError, AppState};

/// The routes of this module, merged into the gateway's router.
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/files/search", get(search))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    q: String,
    project: Option<String>,
    #[serde(default)]
    content: bool,
}

/// `GET /v1/files/search?q=…[&project=P][&content=true]`: at most 200 matches by path.
pub async fn search(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(params): QueryParams<SearchParams>,
) -> Result<Json<SearchResults>, ApiError> {
    // Refused here first, so a bad query never reaches the person's worker; the worker
    // checks it again.
    SearchQuery::parse(&params.q)?;
    let action = MemberAction::Search {
        query: params.q,
        content: params.content,
    };
    match state
        .member(&who.person, params.project.as_deref(), action)
        .await?
    {
        (MemberReply::Found(found), _) => Ok(Json(found)),
        _ => Err(out_of_turn()),
    }
}
