//! Who may reach a node's terminal commands, and the node they reach: the checks the
//! terminal WebSocket and the terminal upload share, in the order their answers are
//! given (admin, node, command, link).

use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::{HeaderMap, header};
use ferry_codes::Code;
use ferry_node::Link;
use ferry_site::{NodeRecord, Principal, TokenKind};

use crate::{ApiError, AppState, blocking};

/// The subprotocol a terminal's page speaks; the server selects it.
pub(crate) const TERMINAL_PROTOCOL: &str = "ferry.terminal.v1";
/// A browser cannot set headers on a WebSocket: it offers its token as a subprotocol
/// with this prefix, which the server never selects (nor echoes).
const TOKEN_PROTOCOL_PREFIX: &str = "ferry.token.";

/// Where a terminal command for a node is served: here, on its link, or by the gateway
/// of the site that holds the link (the request is relayed there, see `relay.rs`).
pub(crate) enum Route {
    Here(Box<Reached>),
    /// The gateway holding the link.
    Elsewhere(super::relay::Holder),
}

/// A node an admin may reach for a terminal command, with its open link.
pub(crate) struct Reached {
    /// The node's pairing record as read for this request.
    pub record: NodeRecord,
    /// Its link.
    pub link: Link,
}

/// What a non-admin hears: the answer of a route that does not exist.
fn hidden() -> ApiError {
    ApiError::new(Code::NoRoute, "no such route")
}

/// The token of a request: `Authorization: Bearer`, else the `ferry.token.` subprotocol.
pub(crate) fn token_of(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_owned());
    bearer.or_else(|| {
        headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .find_map(|p| p.trim().strip_prefix(TOKEN_PROTOCOL_PREFIX))
            .map(str::to_owned)
    })
}

/// The admin making the request; anyone else (no token, a bad one, another kind) gets
/// `404 no_route`.
pub(crate) async fn admin(state: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let token = token_of(headers).ok_or_else(hidden)?;
    match state.site.authenticate_async(&token).await {
        Ok(Some(p)) if p.kind == TokenKind::Admin => Ok(p),
        Ok(_) => Err(hidden()),
        Err(e) => Err(e.into()),
    }
}

/// The node `id` for `command`: `404 unknown_node` when there is none, `403
/// command_not_allowed` unless it may serve `command` now (its approval ∩ its hello ∩
/// `[nodes.<id>] commands`); then its link here, or the gateway holding it, or `503
/// node_offline`.
pub(crate) async fn reach(
    state: &AppState,
    id: Result<Path<String>, PathRejection>,
    command: &str,
    headers: &HeaderMap,
) -> Result<Route, ApiError> {
    let unknown = || ApiError::new(Code::UnknownNode, "there is no such node");
    let Path(id) = id.map_err(|_| unknown())?;
    let site = state.site.clone();
    let record = blocking(move || site.node(&id)).await?;
    let policy = state.site.config().nodes.policy(&record.id);
    if record.state == ferry_site::NodeState::Revoked {
        return Err(ApiError::new(
            Code::NodeRevoked,
            format!(
                "node {:?} was revoked; a revoked node is never approved again (pair it anew)",
                record.name
            ),
        ));
    }
    if !ferry_tools::serves_command(policy, &record, command) {
        return Err(ApiError::new(
            Code::CommandNotAllowed,
            format!(
                "node {:?} is not approved for {command}: approve it (or its pairing upgrade) \
                 in the Nodes panel or with `ferry node approve {}`",
                record.name, record.id
            ),
        ));
    }
    match state.nodes.hub.link(&record.id) {
        Ok(link) => Ok(Route::Here(Box::new(Reached { record, link }))),
        Err(e) => match super::relay::holder(state, &record, headers).await? {
            Some(holder) => Ok(Route::Elsewhere(holder)),
            None => Err(node_error(e)),
        },
    }
}

/// A failure of the node or its link, as the API answers it. A node may answer any code:
/// one that would ask the client to authenticate is not passed on as such.
pub(crate) fn node_error(e: ferry_node::NodeError) -> ApiError {
    let code = match e.code() {
        Code::Unauthorized | Code::NoRoute => Code::BadFrame,
        code => code,
    };
    ApiError::new(code, shown(&e.to_string()))
}

/// A sentence that came from a node, fit to show: control characters replaced, cut short.
pub(crate) fn shown(text: &str) -> String {
    const MAX_CHARS: usize = 300;
    let mut out: String = text
        .chars()
        .take(MAX_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > MAX_CHARS {
        out.push('…');
    }
    out
}

/// Refuses a request whose `Origin` is not this gateway's own (compared with `Host`): a
/// page of another site must not drive a terminal with a token it got hold of.
pub(crate) fn same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let authority = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.trim_end_matches('/'));
    match (authority, host) {
        (Some(a), Some(h)) if a.eq_ignore_ascii_case(h) => Ok(()),
        _ => Err(ApiError::new(
            Code::PermissionDenied,
            "a terminal opens only from this gateway's own page (the Origin is another site's)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_token_comes_from_the_header_or_the_subprotocol() {
        let bearer = headers(&[(header::AUTHORIZATION, "Bearer abc")]);
        assert_eq!(token_of(&bearer).as_deref(), Some("abc"));
        let offered = headers(&[(
            header::SEC_WEBSOCKET_PROTOCOL,
            "ferry.terminal.v1, ferry.token.xyz",
        )]);
        assert_eq!(token_of(&offered).as_deref(), Some("xyz"));
        let none = headers(&[(header::SEC_WEBSOCKET_PROTOCOL, "ferry.terminal.v1")]);
        assert_eq!(token_of(&none), None);
    }

    #[test]
    fn only_the_gateways_own_origin_passes() {
        let host = (header::HOST, "127.0.0.1:8080");
        assert!(same_origin(&headers(std::slice::from_ref(&host))).is_ok());
        assert!(
            same_origin(&headers(&[
                host.clone(),
                (header::ORIGIN, "http://127.0.0.1:8080")
            ]))
            .is_ok()
        );
        for other in [
            "http://evil.example",
            "http://127.0.0.1:8081",
            "null",
            "http://127.0.0.1:8080.evil",
        ] {
            let refused = same_origin(&headers(&[host.clone(), (header::ORIGIN, other)]));
            assert_eq!(refused.unwrap_err().code, Code::PermissionDenied, "{other}");
        }
        assert!(same_origin(&headers(&[(header::ORIGIN, "http://a")])).is_err());
    }

    #[test]
    fn a_nodes_words_lose_their_controls() {
        assert_eq!(shown("a\nb\u{1b}[2J"), "a b [2J");
        assert!(shown(&"x".repeat(1000)).ends_with('…'));
    }
}
