//! `/mcp`: the agent tools over MCP streamable HTTP, for a `harness` token (spec
//! tools.md T-MCP), and `GET /v1/artifacts`, the person's artifact manifest (T-FLOW).
//!
//! A session belongs to the token that opened it: its id is recorded with that token's
//! handle when rmcp creates it, and a request naming a session it does not own is
//! answered exactly as an unknown session is, before rmcp sees it. A token holds at
//! most [`MCP_SESSIONS_PER_TOKEN_MAX`] live sessions; an `initialize` past that is
//! `429 too_many_sessions`, and nothing is made for it.
//!
//! A session's id names the gateway holding it (`<gateway id>.<rmcp's id>`): a request
//! naming another gateway's session is relayed there (`mcp_relay.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ferry_codes::Code;
use ferry_site::Artifact;
use ferry_tools::mcp::{McpPerson, McpServer};
use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::common::server_side_http;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, create_local_session,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::{
    SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde::Serialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::UtoipaMethodRouter;
use utoipa_axum::routes;

use crate::auth::{Harness, Member};
use crate::mcp_http::{OwnNames, json_rpc_errors, own_host};
use crate::mcp_relay::SESSION_ID_SEPARATOR;
use crate::openapi::ApiRouter;
use crate::tally::{Place, Tally};
use crate::{ApiError, AppState, blocking};
use ferry_config::limits::MCP_SESSIONS_PER_TOKEN_MAX;

/// The `/mcp` service behind harness-token authentication, with its description, and
/// `GET /v1/artifacts` (whose token is a member's), for [`crate::router`].
pub(crate) fn routes(state: &AppState) -> ApiRouter {
    let lookup_state = state.clone();
    let rates = state.rates.clone();
    // Each tool call takes one of the person's tool calls (and `file_deliver` one of
    // their deliveries) before it runs; a refused one is a tool error saying when to
    // try again.
    let server = McpServer::per_request(move |person| lookup_state.toolbox(person))
        .with_admission(move |person, tool| rates.admit_tool_call(person, tool));
    let site_config = state.site.config();
    let address = state.address.unwrap_or_else(|| {
        site_config
            .server
            .listen
            .parse()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
    });
    let names = OwnNames::new(address, &site_config.tools.allowed_origins);
    // The Host is checked by `own_host`, which says why in JSON.
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(ferry_config::limits::MCP_MESSAGE_MAX_BYTES)
        .disable_allowed_hosts()
        .with_allowed_origins(names.origins())
        .with_cancellation_token(state.closing.child_token());
    let owners = Owners::default();
    let mut manager = LocalSessionManager::default();
    // A session is idle only between messages: a tool call that runs long (a node
    // transfer of a raised cap) sends none until it answers, and must outlive the
    // library's default of five minutes. Idle sessions stay bounded by the cap per token.
    manager.session_config.keep_alive = Some(std::time::Duration::from_secs(
        ferry_config::limits::MCP_SESSION_IDLE_SECS,
    ));
    let sessions = BoundSessions::new(
        manager,
        owners.clone(),
        MCP_SESSIONS_PER_TOKEN_MAX,
        &state.gateway_id,
    );
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(sessions), config);
    ApiRouter::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(json_rpc_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            harness_only,
        ))
        .layer(axum::middleware::from_fn_with_state(names, own_host))
        .layer(axum::middleware::from_fn(mcp_methods))
        .layer(Extension(owners))
        .merge(mcp_description())
        .routes(routes!(artifacts))
}

/// The methods `/mcp` takes.
const MCP_METHODS: [Method; 3] = [Method::POST, Method::GET, Method::DELETE];

/// Answers another method `405` as every route does, before the token or the session
/// are looked at: the method is wrong whoever asks.
async fn mcp_methods(request: Request, next: Next) -> Response {
    if MCP_METHODS.contains(request.method()) {
        return next.run(request).await;
    }
    let mut response =
        ApiError::new(Code::MethodNotAllowed, "/mcp takes POST, GET and DELETE").into_response();
    response.headers_mut().insert(
        header::ALLOW,
        header::HeaderValue::from_static("POST, GET, DELETE"),
    );
    response
}

/// The description of `/mcp`, without a route.
///
/// `/mcp` is the one route served by a service rather than by handlers of ours: rmcp's
/// [`StreamableHttpService`] answers its POST, GET and DELETE itself (sessions, streams,
/// JSON-RPC), behind the middleware of [`routes`]. So the `#[utoipa::path]`s that
/// describe it sit on functions that only carry them ([`mcp_post`], [`mcp_get`],
/// [`mcp_delete`]), and only their paths reach the document: their method router is
/// dropped here, so nothing but rmcp ever answers `/mcp`.
fn mcp_description() -> ApiRouter {
    let (schemas, paths, _never_served): UtoipaMethodRouter<AppState> =
        routes!(mcp_post, mcp_get, mcp_delete);
    let mut described = ApiRouter::new();
    let openapi = described.get_openapi_mut();
    openapi.paths.paths.extend(paths.paths);
    openapi
        .components
        .get_or_insert_with(Default::default)
        .schemas
        .extend(schemas);
    described
}

/// One event of `/mcp`'s event streams, as rmcp writes it.
// Never built: rmcp writes these events, and this only describes them.
struct McpEvent;

impl PartialSchema for McpEvent {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .property(
                "data",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some(
                        "One JSON-RPC message; empty in an event that only primes the stream.",
                    )),
            )
            .property(
                "id",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some(
                        "The event's id, to resume after with `Last-Event-ID`.",
                    )),
            )
            .property(
                "retry",
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0))
                    .description(Some(
                        "How long to wait before reconnecting, in milliseconds.",
                    )),
            )
            .required("data")
            .description(Some("One event of an MCP stream."))
            .into()
    }
}

impl ToSchema for McpEvent {}

/// Sends one JSON-RPC message of an MCP session (the agent harness's token).
///
/// First `initialize`, which opens the session; then requests, notifications and
/// responses naming it.
#[utoipa::path(
    post,
    path = "/mcp",
    operation_id = "mcpPost",
    tag = "mcp",
    security(("bearer" = [])),
    params(
        ("Mcp-Session-Id" = Option<String>, Header, nullable = false,
         description = "The session, as the answer to `initialize` named it; every message but `initialize` sends it."),
        ("MCP-Protocol-Version" = Option<String>, Header, nullable = false,
         description = "The MCP revision the session agreed on, e.g. `2025-06-18`."),
    ),
    request_body(content = Object, content_type = "application/json",
                 description = "One JSON-RPC 2.0 message. Send it with \
                 `Accept: application/json, text/event-stream`."),
    responses(
        (status = 200, description = "The answer to a request: a JSON-RPC message, or an event \
         stream of them, one per event, ending with the answer.",
         content((Object = "application/json"), (McpEvent = "text/event-stream")),
         headers(("Mcp-Session-Id" = String,
                  description = "On the answer to `initialize`: the new session's id."))),
        (status = 202, description = "A notification or a response, taken; no body."),
        (status = 400, description = "The body is not JSON or not a JSON-RPC message (a JSON-RPC \
         error), or a header does not fit the message (a JSON-RPC error, or a sentence in plain \
         text).", content_type = "application/json", body = Object),
        (status = 404, description = "No such session (never opened, closed, expired, or another \
         token's): initialize a new one. A sentence in plain text."),
        (status = 406, description = "`Accept` does not take both `application/json` and \
         `text/event-stream`. A sentence in plain text."),
        (status = 415, description = "The body is not sent as `application/json`. A sentence in \
         plain text."),
    )
)]
async fn mcp_post() {}

/// Opens the session's stream of messages the server sends unasked.
#[utoipa::path(
    get,
    path = "/mcp",
    operation_id = "mcpGet",
    tag = "mcp",
    security(("bearer" = [])),
    params(
        ("Mcp-Session-Id" = Option<String>, Header, nullable = false, description = "The session."),
        ("MCP-Protocol-Version" = Option<String>, Header, nullable = false,
         description = "The MCP revision the session agreed on."),
        ("Last-Event-ID" = Option<String>, Header, nullable = false,
         description = "Resumes a stream after this event."),
    ),
    responses(
        (status = 200, description = "An event stream of JSON-RPC messages, one per event.",
         content_type = "text/event-stream", body = McpEvent),
        (status = 400, description = "No `Mcp-Session-Id`, or a protocol version it does not \
         know. A sentence in plain text."),
        (status = 404, description = "No such session: initialize a new one. A sentence in plain \
         text."),
        (status = 405, description = "A request of a revision without sessions. A sentence in \
         plain text."),
        (status = 406, description = "`Accept` does not take `text/event-stream`. A sentence in \
         plain text."),
    )
)]
async fn mcp_get() {}

/// Closes a session.
#[utoipa::path(
    delete,
    path = "/mcp",
    operation_id = "mcpDelete",
    tag = "mcp",
    security(("bearer" = [])),
    params(
        ("Mcp-Session-Id" = Option<String>, Header, nullable = false, description = "The session to close."),
        ("MCP-Protocol-Version" = Option<String>, Header, nullable = false,
         description = "The MCP revision the session agreed on."),
    ),
    responses(
        (status = 202, description = "The session is closed; no body."),
        (status = 400, description = "No `Mcp-Session-Id`, or a protocol version it does not \
         know. A sentence in plain text."),
        (status = 404, description = "No such session of this token. A sentence in plain text."),
        (status = 405, description = "A request of a revision without sessions. A sentence in \
         plain text."),
    )
)]
async fn mcp_delete() {}

/// The header that names a session (HTTP header names are case-insensitive).
const SESSION_HEADER: &str = "mcp-session-id";

tokio::task_local! {
    /// The token whose request is being served: the owner of a session that request opens.
    static OPENER: Opener;
}

/// The token a request came with, and whether a session it asked for was refused.
#[derive(Clone)]
struct Opener {
    handle: String,
    /// Set when the token already held its most sessions: rmcp answers a failed
    /// creation with a 500, which the middleware replaces with the 429 it is.
    refused: Arc<AtomicBool>,
}

impl Opener {
    fn new(handle: String) -> Opener {
        Opener {
            handle,
            refused: Arc::default(),
        }
    }
}

/// Which token (by handle) opened each live session, each holding one of that token's
/// places in `places`, given back when its record goes.
#[derive(Clone, Default)]
struct Owners {
    sessions: Arc<Mutex<HashMap<SessionId, Place>>>,
    places: Tally,
}

impl Owners {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Place>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the session named by `id` is live and was opened by the token `handle`.
    fn owned_by(&self, id: &[u8], handle: &str) -> bool {
        std::str::from_utf8(id)
            .is_ok_and(|id| self.lock().get(id).is_some_and(|p| p.key() == handle))
    }

    /// Forgets session `id`, giving its place back.
    fn forget(&self, id: &SessionId) {
        // Taken out under the lock, given back after it.
        let place = self.lock().remove(id);
        drop(place);
    }
}

/// Admits a harness token, refuses sessions it did not open, and names its person for
/// the tools.
async fn harness_only(
    State(state): State<AppState>,
    Extension(owners): Extension<Owners>,
    Harness(principal): Harness,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(holder) = crate::mcp_relay::holder(&state, request.headers()).await {
        return crate::mcp_relay::relay(&state, holder, request, session_not_found).await;
    }
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
    let opener = Opener::new(principal.handle);
    let refused = opener.refused.clone();
    let response = OPENER.scope(opener, next.run(request)).await;
    if refused.load(Ordering::Relaxed) {
        return too_many_sessions().into_response();
    }
    response
}

/// The answer to an `initialize` of a token that holds its most sessions.
fn too_many_sessions() -> ApiError {
    ApiError::new(
        Code::TooManySessions,
        format!(
            "this token already holds {MCP_SESSIONS_PER_TOKEN_MAX} open MCP sessions, the most \
             one token may hold; close sessions it no longer uses with DELETE /mcp (their \
             Mcp-Session-Id header) and initialize again"
        ),
    )
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
/// so the record never outgrows the live sessions, and at most `max_per_token` of them
/// for one token. Their ids carry `prefix`, this gateway's id, so that another gateway
/// of the site knows where to relay a request naming one.
struct BoundSessions {
    inner: LocalSessionManager,
    owners: Owners,
    max_per_token: usize,
    prefix: String,
}

impl BoundSessions {
    /// The sessions of the gateway `gateway`.
    fn new(
        inner: LocalSessionManager,
        owners: Owners,
        max_per_token: usize,
        gateway: &str,
    ) -> BoundSessions {
        BoundSessions {
            inner,
            owners,
            max_per_token,
            prefix: format!("{gateway}{SESSION_ID_SEPARATOR}"),
        }
    }
}

impl SessionManager for BoundSessions {
    type Error = SessionFailure;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), SessionFailure> {
        // Only requests admitted by `harness_only` reach rmcp; an unowned session would
        // answer anyone, so none is made.
        let opener = OPENER
            .try_with(Clone::clone)
            .map_err(|_| SessionFailure("no token opened this session".to_owned()))?;
        // The place is taken before the session is made, so a refused `initialize`
        // makes nothing, and concurrent ones never pass the cap together.
        let Some(place) = self.owners.places.take(&opener.handle, self.max_per_token) else {
            opener.refused.store(true, Ordering::Relaxed);
            return Err(SessionFailure(format!(
                "a token asked for more than {} MCP sessions",
                self.max_per_token
            )));
        };
        // rmcp's own making of a session, under an id that names this gateway.
        let id = SessionId::from(format!("{}{}", self.prefix, server_side_http::session_id()));
        let (handle, worker) = create_local_session(id.clone(), self.inner.session_config.clone());
        self.inner.sessions.write().await.insert(id.clone(), handle);
        self.owners.lock().insert(id.clone(), place);
        Ok((id, WorkerTransport::spawn(worker)))
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
        self.owners.forget(id);
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

/// The person's artifact manifest, oldest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct ArtifactList {
    artifacts: Vec<Artifact>,
}

/// The person's artifact manifest.
///
/// Every file under their `artifacts/` and every delivery; what is new under
/// `artifacts/` is recorded first.
#[utoipa::path(
    get,
    path = "/v1/artifacts",
    operation_id = "listArtifacts",
    tag = "artifacts",
    security(("bearer" = [])),
    responses((status = 200, description = "The person's artifacts and deliveries, oldest first.",
               body = ArtifactList))
)]
pub(crate) async fn artifacts(
    State(state): State<AppState>,
    Member(principal): Member,
) -> Result<Json<ArtifactList>, ApiError> {
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
    Ok(Json(ArtifactList { artifacts: records }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http;
    use tower::ServiceExt;

    /// What rmcp itself answers to `request` for a session it never made.
    async fn rmcp_answer(method: &str) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
        let server = McpServer::per_request(|_| {
            Err(ferry_tools::ToolError::new(
                Code::UnknownPerson,
                "no person",
            ))
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
        let owners = Owners::default();
        let sessions = BoundSessions::new(LocalSessionManager::default(), owners.clone(), 4, "gw");
        let (id, _transport) = OPENER
            .scope(
                Opener::new("fy_abcdefghi".to_owned()),
                sessions.create_session(),
            )
            .await
            .unwrap();
        assert!(owners.owned_by(id.as_bytes(), "fy_abcdefghi"));
        assert!(!owners.owned_by(id.as_bytes(), "fy_abcdefghj"));
        assert!(!owners.owned_by(b"\xff", "fy_abcdefghi"));
        assert_eq!(owners.places.held("fy_abcdefghi"), 1);
        sessions.close_session(&id).await.unwrap();
        assert!(owners.lock().is_empty());
        assert!(owners.places.is_empty());
        assert!(!sessions.has_session(&id).await.unwrap());
        // Closed twice (a DELETE, then the end of its worker): given back once.
        sessions.close_session(&id).await.unwrap();
        assert!(owners.places.is_empty());
        // Outside a request admitted with a token, no session is made at all.
        assert!(sessions.create_session().await.is_err());
        assert!(sessions.inner.sessions.read().await.is_empty());
        assert!(owners.lock().is_empty());
    }

    #[tokio::test]
    async fn a_token_holds_its_most_sessions_and_one_more_makes_nothing() {
        let owners = Owners::default();
        let sessions = BoundSessions::new(LocalSessionManager::default(), owners.clone(), 2, "gw");
        let open = |handle: &str| {
            let opener = Opener::new(handle.to_owned());
            let refused = opener.refused.clone();
            let created = OPENER.scope(opener, sessions.create_session());
            async move {
                (
                    created.await.map(|(id, _)| id),
                    refused.load(Ordering::Relaxed),
                )
            }
        };
        let (first, refused) = open("fy_a").await;
        assert!(first.is_ok() && !refused, "limit - 1");
        let (second, refused) = open("fy_a").await;
        assert!(second.is_ok() && !refused, "at the limit");
        let (third, refused) = open("fy_a").await;
        assert!(third.is_err() && refused, "limit + 1");
        assert_eq!(
            sessions.inner.sessions.read().await.len(),
            2,
            "nothing made"
        );
        let (other, refused) = open("fy_b").await;
        assert!(other.is_ok() && !refused, "another token");
        sessions.close_session(&first.unwrap()).await.unwrap();
        let (again, refused) = open("fy_a").await;
        assert!(again.is_ok() && !refused, "a closed session's place");
        assert!(open("fy_a").await.1);
    }

    #[tokio::test]
    async fn an_expired_session_gives_its_place_back() {
        let owners = Owners::default();
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(std::time::Duration::from_millis(300));
        let sessions = BoundSessions::new(inner, owners.clone(), 1, "gw");
        let server = McpServer::per_request(|_| {
            Err(ferry_tools::ToolError::new(
                Code::UnknownPerson,
                "no person",
            ))
        });
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(sessions),
            StreamableHttpServerConfig::default().disable_allowed_hosts(),
        );
        let initialize = || async {
            let request = http::Request::builder()
                .method("POST")
                .uri("/mcp")
                .header("host", "127.0.0.1")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(Body::from(
                    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                        "protocolVersion":"2025-06-18","capabilities":{},
                        "clientInfo":{"name":"test","version":"1"}}}"#,
                ))
                .unwrap();
            let opener = Opener::new("fy_a".to_owned());
            let refused = opener.refused.clone();
            let response = OPENER
                .scope(opener, service.clone().oneshot(request))
                .await
                .unwrap();
            let status = response.status();
            let _ = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX).await;
            (status, refused.load(Ordering::Relaxed))
        };
        assert_eq!(initialize().await, (StatusCode::OK, false));
        assert_eq!(owners.places.held("fy_a"), 1);
        assert!(initialize().await.1, "the token holds its one session");
        // Alive until its keep-alive has passed (nothing else ends it early) …
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(owners.places.held("fy_a"), 1);
        // … then rmcp ends it, and its place comes back.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while owners.places.held("fy_a") > 0 {
            assert!(tokio::time::Instant::now() < deadline, "never expired");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(owners.lock().is_empty());
        assert_eq!(initialize().await, (StatusCode::OK, false));
    }
}
