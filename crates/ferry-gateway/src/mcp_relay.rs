//! `/mcp` requests naming a session another gateway of the site holds (spec S-GATEWAYS:
//! any gateway answers any request, so a harness behind a balancer needs no sticky
//! sessions). A session's id names the gateway that made it, `<gateway id>.<rmcp's
//! id>`; a request naming another live gateway's session goes on to that gateway as the
//! harness made it (its token, headers and body), which checks it from the start and
//! answers. The answer comes back as it comes: JSON, or an event stream frame by frame.
//!
//! Relaying adds no authority: the harness's own token is what the holder checks, and
//! this gateway has checked it too. A relayed request is never relayed again. A holder
//! that is gone, unreachable or stopped (its mark in the gateways table no longer
//! moves, [`crate::forward::stalled`]) is answered as a session that does not exist, so
//! the client initializes a new one, here.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::forward::{RELAYED, reachable, stalled, while_beating};
use crate::{AppState, blocking};

/// Between the holder's id and rmcp's own in a session id.
pub(crate) const SESSION_ID_SEPARATOR: char = '.';

/// The headers of an MCP request that travel with it; the rest (hop by hop, `Host`)
/// are the relay's own.
const CARRIED: [header::HeaderName; 5] = [
    header::AUTHORIZATION,
    header::ACCEPT,
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::ORIGIN,
];
/// MCP's own headers, carried too.
const CARRIED_MCP: [&str; 3] = ["mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// The gateway holding the session a request names.
pub(crate) struct Holder {
    id: String,
    address: String,
}

/// The live gateway holding the session `headers` name, when that is another gateway
/// of the site and the request was not relayed already.
pub(crate) async fn holder(state: &AppState, headers: &HeaderMap) -> Option<Holder> {
    if headers.contains_key(RELAYED) {
        return None;
    }
    let session = headers.get(CARRIED_MCP[0])?.to_str().ok()?;
    let (gateway, _) = session.split_once(SESSION_ID_SEPARATOR)?;
    if gateway.is_empty() || gateway == &*state.gateway_id {
        return None;
    }
    let (site, id) = (state.site.clone(), gateway.to_owned());
    let address = blocking(move || site.gateway_address(&id)).await.ok()??;
    Some(Holder {
        id: gateway.to_owned(),
        address: reachable(&address),
    })
}

/// `request`, made on `holder`; its answer.
pub(crate) async fn relay(
    state: &AppState,
    holder: Holder,
    request: Request,
    gone: impl FnOnce() -> Response,
) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(method) = reqwest::Method::from_bytes(parts.method.as_str().as_bytes()) else {
        return gone();
    };
    let path = parts.uri.path_and_query().map_or("/mcp", |p| p.as_str());
    let mut outgoing = state
        .http
        .request(method, format!("http://{}{path}", holder.address))
        .header(RELAYED, "1")
        .body(reqwest::Body::wrap_stream(body.into_data_stream()));
    for name in CARRIED.iter().map(|h| h.as_str()).chain(CARRIED_MCP) {
        for value in parts.headers.get_all(name) {
            outgoing = outgoing.header(name, value.as_bytes());
        }
    }
    let answer = match while_beating(&state.site, &holder.id, outgoing.send()).await {
        Some(Ok(answer)) => answer,
        // Gone, unreachable, or stopped: its sessions are as good as gone.
        Some(Err(_)) | None => return gone(),
    };
    let Ok(status) = StatusCode::from_u16(answer.status().as_u16()) else {
        return gone();
    };
    let mut headers = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::CACHE_CONTROL]
        .iter()
        .map(|h| h.as_str())
        .chain(CARRIED_MCP)
    {
        if let Some(value) = answer.headers().get(name)
            && let Ok(value) = HeaderValue::from_bytes(value.as_bytes())
            && let Ok(name) = header::HeaderName::from_bytes(name.as_bytes())
        {
            headers.insert(name, value);
        }
    }
    // An event stream lasts as long as the session's work: it ends when the holder
    // stops marking itself seen, rather than hang with it.
    let stopped = stalled(state.site.clone(), holder.id);
    let stream = answer.bytes_stream().take_until(Box::pin(stopped));
    let mut response = Body::from_stream(stream).into_response();
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
