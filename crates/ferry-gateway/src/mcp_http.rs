//! What `/mcp` checks of a request before rmcp sees it, and what it says instead of
//! rmcp's plain-text refusals:
//!
//! - **Whose name the request uses.** Without an `Origin`, the `Host` must be one of the
//!   gateway's own names (an address, `localhost`, or the host of an allowed origin):
//!   a page on a rebinding domain reaches a loopback gateway under that domain's name,
//!   and is refused with `403 host_not_allowed`. (With an `Origin`, rmcp checks it
//!   against the allowed origins.)
//! - **That a JSON body is JSON.** A POST whose body does not parse is answered with
//!   JSON-RPC's parse error (`-32700`), and one that parses but is no JSON-RPC message
//!   with its invalid request (`-32600`), both `400`, where rmcp answers `415` in text.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ferry_codes::Code;
use ferry_config::limits::MCP_MESSAGE_MAX_BYTES;
use serde_json::json;

use crate::ApiError;

/// The origins and host names the gateway answers to on `/mcp`.
#[derive(Clone, Debug)]
pub(crate) struct OwnNames {
    origins: Vec<String>,
    /// Host names (lower case, no port) of the allowed origins.
    hosts: Arc<Vec<String>>,
}

impl OwnNames {
    /// The names of a gateway listening at `address`, and the operator's `allowed`
    /// origins. On a loopback address the page's origin may name it as `127.0.0.1`,
    /// `localhost` or `[::1]`, whichever the person typed.
    pub(crate) fn new(address: SocketAddr, allowed: &[String]) -> OwnNames {
        let port = address.port();
        let mut origins = Vec::new();
        if address.ip().is_loopback() || address.ip().is_unspecified() {
            for host in ["127.0.0.1", "localhost", "[::1]"] {
                origins.push(format!("http://{host}:{port}"));
            }
        }
        if !address.ip().is_loopback() {
            origins.push(format!("http://{address}"));
        }
        origins.extend(allowed.iter().cloned());
        let hosts = allowed
            .iter()
            .filter_map(|origin| host_of_origin(origin))
            .collect();
        OwnNames {
            origins,
            hosts: Arc::new(hosts),
        }
    }

    /// The origins rmcp lets through.
    pub(crate) fn origins(&self) -> Vec<String> {
        self.origins.clone()
    }

    /// Whether `host` (a `Host` header: a name or address, perhaps with a port) names
    /// this gateway.
    fn owns(&self, host: &str) -> bool {
        let name = host_without_port(host).to_ascii_lowercase();
        let name = name.trim_end_matches('.');
        let unbracketed = name.trim_start_matches('[').trim_end_matches(']');
        unbracketed.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || self.hosts.iter().any(|h| h == name)
    }
}

/// `host[:port]` → `host`; `[v6]:port` → `[v6]`.
fn host_without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_inclusive(']').next().unwrap_or(host);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// The host name of an origin (`https://files.example.org:8443` → `files.example.org`).
fn host_of_origin(origin: &str) -> Option<String> {
    let rest = origin.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let name = host_without_port(authority).to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

/// Refuses a request from a page of another origin, and one without an `Origin` whose
/// `Host` is not one of the gateway's names.
pub(crate) async fn own_host(
    State(names): State<OwnNames>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        // The same list rmcp checks, refused here in this API's error shape (rmcp's own
        // refusal is a sentence without a content type).
        if names
            .origins
            .iter()
            .any(|own| own.as_bytes() == origin.as_bytes())
        {
            return next.run(request).await;
        }
        return ApiError::new(
            Code::HostNotAllowed,
            "this request comes from a page of an origin the gateway does not answer to \
             (a page on another domain cannot reach /mcp); add it to [tools] allowed_origins \
             if it is the operator's own",
        )
        .into_response();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    match host {
        Some(host) if names.owns(host) => next.run(request).await,
        _ => ApiError::new(
            Code::HostNotAllowed,
            "this request names the gateway by a host it does not answer to (a page on \
             another domain cannot reach /mcp); use its address, localhost, or a name in \
             [tools] allowed_origins",
        )
        .into_response(),
    }
}

/// Answers a POST whose JSON body is not JSON, or not a JSON-RPC message, the way
/// JSON-RPC says; everything else goes to rmcp untouched.
pub(crate) async fn json_rpc_errors(request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !says_json(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MCP_MESSAGE_MAX_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(
                Code::TooLarge,
                format!(
                    "an MCP message is at most {MCP_MESSAGE_MAX_BYTES} bytes, or its body \
                     could not be read"
                ),
            )
            .into_response();
        }
    };
    // Checked without building anything: rmcp parses it for real.
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        return json_rpc_error(-32700, format!("Parse error: the body is not JSON ({e})"));
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    // rmcp says 415 of a JSON body it could not take as a message.
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return json_rpc_error(
            -32600,
            "Invalid Request: the body is JSON but not a JSON-RPC 2.0 request, notification \
             or response"
                .to_owned(),
        );
    }
    response
}

fn says_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// A JSON-RPC error with no id (the request's could not be read), as a `400`.
fn json_rpc_error(code: i64, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_gateway_answers_to_each_loopback_name() {
        let names = OwnNames::new("127.0.0.1:8080".parse().unwrap(), &[]);
        let origins = names.origins();
        for origin in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "http://[::1]:8080",
        ] {
            assert!(origins.iter().any(|o| o == origin), "{origin}");
        }
        assert!(!origins.iter().any(|o| o.contains("8081")));
    }

    #[test]
    fn hosts_are_addresses_localhost_or_allowed_names() {
        let allowed = ["https://Files.Example.org:8443".to_owned()];
        let names = OwnNames::new("0.0.0.0:8080".parse().unwrap(), &allowed);
        for host in [
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "localhost:8080",
            "LOCALHOST",
            "files.example.org:8443",
            "files.example.org.",
        ] {
            assert!(names.owns(host), "{host}");
        }
        for host in [
            "evil.example.com:8080",
            "127.0.0.1.evil.example.com",
            "localhost.evil.example.com",
            "example.org",
            "",
        ] {
            assert!(!names.owns(host), "{host}");
        }
    }
}
