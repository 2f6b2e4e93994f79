//! Bearer-token authentication (spec members M-AUTH).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use ferry_codes::Code;
use ferry_site::{Principal, TokenKind};

use crate::{ApiError, AppState};

/// A member: a `person` token, or an `admin` token acting for its own person.
pub struct Member(pub Principal);

/// The agent runtime of one person's workspace.
pub struct Harness(pub Principal);

pub(crate) async fn principal(parts: &Parts, state: &AppState) -> Result<Principal, ApiError> {
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(ApiError::unauthorized)?;
    let token = header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
        .ok_or_else(ApiError::unauthorized)?;
    // A point lookup by primary key through a cached statement, made here rather than
    // paying a trip to the blocking pool on every request: microseconds on SQLite; on
    // PostgreSQL a round trip this task awaits, the runtime's thread free meanwhile.
    state
        .site
        .authenticate_async(token)
        .await?
        .ok_or_else(ApiError::unauthorized)
}

impl FromRequestParts<AppState> for Member {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let p = principal(parts, state).await?;
        match p.kind {
            TokenKind::Person | TokenKind::Admin => Ok(Member(p)),
            TokenKind::Harness => Err(ApiError::new(
                Code::Unauthorized,
                "this is a harness token, which only /mcp takes; the member API takes a \
                 person's token (ferry token create <person> --kind person)",
            )),
        }
    }
}

impl FromRequestParts<AppState> for Harness {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let p = principal(parts, state).await?;
        match p.kind {
            TokenKind::Harness => Ok(Harness(p)),
            TokenKind::Person | TokenKind::Admin => Err(ApiError::new(
                Code::Unauthorized,
                "this is a person's token, for the web client and the member API; /mcp takes \
                 the agent harness's token (ferry token create <person> --kind harness)",
            )),
        }
    }
}
