//! `/mcp`: the agent tools over MCP streamable HTTP, for a `harness` token (spec
//! tools.md T-MCP), and `GET /v1/artifacts`, the person's artifact manifest (T-FLOW).
//!
//! A session belongs to the token that opened it: its id is recorded with that token's
//! handle when rmcp creates it, and a request naming a session it does not own is
//! answered exactly as an unknown session is, before rmcp sees it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use ferry_tools::mcp::{McpPerson, McpServer};
use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::{
    SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde_json::{Value, json};

use crate::auth::{Harness, Member};
use crate::{ApiError, AppState, blocking};

/// The `/mcp` service, behind harness-token authentication.
pub(crate) fn routes(state: &AppState) -> axum::Router<AppState> {
    let lookup_state = state.clone();
    let server = McpServer::per_request(move |person| lookup_state.toolbox(person));
    let mut origins = vec![format!("http://{}", state.site.config().server.listen)];
    origins.extend(state.site.config().tools.allowed_origins.iter().cloned());
    // Every request carries a harness token, which a rebinding page cannot have, so the
    // Host check adds nothing and would break gateways reached by name.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_allowed_origins(origins)
        .with_cancellation_token(state.closing.child_token());
    let owners = Owners::default();
    let sessions = BoundSessions {
        inner: LocalSessionManager::default(),
        owners: owners.clone(),
    };
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(sessions), config);
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            harness_only,
        ))
        .layer(Extension(owners))
}

/// The header that names a session (HTTP header names are case-insensitive).
const SESSION_HEADER: &str = "mcp-session-id";

tokio::task_local! {
    /// The handle of the token whose request is being served: the owner of a session
    /// that request opens.
    static OPENER: String;
}

/// Which token (by handle) opened each live session.
#[derive(Clone, Default)]
struct Owners(Arc<Mutex<HashMap<SessionId, String>>>);

impl Owners {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the session named by `id` is live and was opened by the token `handle`.
    fn owned_by(&self, id: &[u8], handle: &str) -> bool {
        std::str::from_utf8(id).is_ok_and(|id| self.lock().get(id).is_some_and(|h| h == handle))
    }
}

/// Admits a harness token, refuses sessions it did not open, and names its person for
/// the tools.
async fn harness_only(
    Extension(owners): Extension<Owners>,
    Harness(principal): Harness,
    mut request: Request,
    next: Next,
) -> Response {
    // Every copy of the header must name a session of this token: rmcp reads the first,
    // and another reader might read another.
    let foreign = request
        .headers()
        .get_all(SESSION_HEADER)
        .iter()
        .any(|id| !owners.owned_by(id.as_bytes(), &principal.handle));
    if foreign {
        return session_not_found();
    }
    request
        .extensions_mut()
        .insert(McpPerson(principal.person.clone()));
    OPENER.scope(principal.handle, next.run(request)).await
}

/// rmcp's answer to a session it does not know, byte for byte, so that a session of
/// another token cannot be told from one that never existed.
fn session_not_found() -> Response {
    let mut response = Response::new(Body::from("Not Found: Session not found"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

/// Why a session operation failed, said without the session's id (rmcp logs it).
#[derive(Debug)]
struct SessionFailure(String);

impl std::fmt::Display for SessionFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SessionFailure {}

impl From<LocalSessionManagerError> for SessionFailure {
    fn from(e: LocalSessionManagerError) -> SessionFailure {
        match e {
            LocalSessionManagerError::SessionNotFound(_) => {
                SessionFailure("the session is gone".to_owned())
            }
            other => SessionFailure(other.to_string()),
        }
    }
}

/// rmcp's in-memory sessions, each recorded with the token that opened it and
/// forgotten when rmcp closes it (a DELETE, the idle timeout, the end of its service),
/// so the record never outgrows the live sessions.
struct BoundSessions {
    inner: LocalSessionManager,
    owners: Owners,
}

impl SessionManager for BoundSessions {
    type Error = SessionFailure;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), SessionFailure> {
        let (id, transport) = self.inner.create_session().await?;
        match OPENER.try_with(Clone::clone) {
            Ok(handle) => {
                self.owners.lock().insert(id.clone(), handle);
                Ok((id, transport))
            }
            // Only requests admitted by `harness_only` reach rmcp; an unowned session
            // would answer anyone, so none is kept.
            Err(_) => {
                let _ = self.inner.close_session(&id).await;
                Err(SessionFailure("no token opened this session".to_owned()))
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionFailure> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionFailure> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionFailure> {
        self.owners.lock().remove(id);
        // A session whose worker cannot be told is closed anyway; rmcp would log the
        // failure with the session's id.
        if let Err(e) = self.inner.close_session(id).await {
            tracing::debug!("closing an MCP session: {}", SessionFailure::from(e));
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionFailure> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionFailure> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionFailure> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionFailure> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// `GET /v1/artifacts`: the person's manifest, after recording what is new under
/// `artifacts/`.
pub(crate) async fn artifacts(
    State(state): State<AppState>,
    Member(principal): Member,
) -> Result<Json<Value>, ApiError> {
    let toolbox = state
        .toolbox(&principal.person)
        .map_err(ApiError::from_tool)?;
    let records = blocking(move || {
        ferry_tools::sync_artifacts(&toolbox).map_err(ApiError::from_tool)?;
        toolbox
            .site()
            .artifacts(toolbox.person())
            .map_err(ApiError::from)
    })
    .await?;
    Ok(Json(json!({ "artifacts": records })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http;
    use tower::ServiceExt;

    /// What rmcp itself answers to `request` for a session it never made.
    async fn rmcp_answer(method: &str) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
        let server = McpServer::per_request(|_| {
            Err(ferry_tools::ToolError::new("unknown_person", "no person"))
        });
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default().disable_allowed_hosts(),
        );
        let request = http::Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", "127.0.0.1")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18")
            .header(SESSION_HEADER, "3f1e7a52-0000-4000-8000-000000000000")
            .body(Body::from(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            ))
            .unwrap();
        let response = service.oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = axum::body::to_bytes(Body::new(body), usize::MAX)
            .await
            .unwrap();
        (parts.status, parts.headers, body)
    }

    #[tokio::test]
    async fn a_foreign_session_is_answered_as_rmcp_answers_an_unknown_one() {
        let ours = session_not_found();
        let (status, headers) = (ours.status(), ours.headers().clone());
        let body = axum::body::to_bytes(ours.into_body(), usize::MAX)
            .await
            .unwrap();
        for method in ["POST", "GET"] {
            let (rmcp_status, rmcp_headers, rmcp_body) = rmcp_answer(method).await;
            assert_eq!(status, rmcp_status, "{method}: {rmcp_body:?}");
            assert_eq!(headers, rmcp_headers, "{method}");
            assert_eq!(body, rmcp_body, "{method}");
        }
    }

    #[tokio::test]
    async fn a_session_is_recorded_with_its_opener_and_forgotten_when_closed() {
        let sessions = BoundSessions {
            inner: LocalSessionManager::default(),
            owners: Owners::default(),
        };
        let (id, _transport) = OPENER
            .scope("fy_abcdefghi".to_owned(), sessions.create_session())
            .await
            .unwrap();
        assert!(sessions.owners.owned_by(id.as_bytes(), "fy_abcdefghi"));
        assert!(!sessions.owners.owned_by(id.as_bytes(), "fy_abcdefghj"));
        assert!(!sessions.owners.owned_by(b"\xff", "fy_abcdefghi"));
        sessions.close_session(&id).await.unwrap();
        assert!(sessions.owners.lock().is_empty());
        assert!(!sessions.has_session(&id).await.unwrap());
        // Outside a request admitted with a token, no session is made at all.
        assert!(sessions.create_session().await.is_err());
        assert!(sessions.inner.sessions.read().await.is_empty());
        assert!(sessions.owners.lock().is_empty());
    }
}
