//! `/mcp`: the agent tools over MCP streamable HTTP, for a `harness` token (spec
//! tools.md T-MCP), and `GET /v1/artifacts`, the person's artifact manifest (T-FLOW).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use ferry_tools::mcp::{McpPerson, McpServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
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
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            harness_only,
        ))
}

/// Admits a harness token and names its person for the tools.
async fn harness_only(Harness(principal): Harness, mut request: Request, next: Next) -> Response {
    request
        .extensions_mut()
        .insert(McpPerson(principal.person.clone()));
    next.run(request).await
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
