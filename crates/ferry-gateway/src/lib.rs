//! The ferry gateway: the HTTP API (spec members.md).
//!
//! Handlers parse, authorize and map errors; every file operation is a `ferry-site`
//! function run on a blocking thread.

mod access_log;
mod assets;
mod audit;
mod auth;
mod body;
mod chat;
mod conn;
mod deliveries;
mod delivery_name;
mod error;
mod events;
mod events_shared;
mod extract;
mod files;
mod find;
mod forward;
mod interactions;
mod linger;
mod mcp;
mod mcp_http;
mod mcp_relay;
mod me;
mod member;
mod node_link;
mod nodes;
mod openapi;
mod ops;
pub mod preview;
mod projects;
mod range;
mod rate;
mod shares;
mod tally;
mod terminal_upload;
mod terminals;
mod trash;
mod turns;
mod tus;
mod upload;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::http::{HeaderValue, header};
use ferry_codes::Code;
use ferry_site::Site;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use openapi::ApiRouter;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::set_header::SetResponseHeaderLayer;

pub use body::Pace;
pub use error::ApiError;

/// The most a connection buffers from its socket: bounds memory per connection while
/// keeping reads large enough for full speed.
pub(crate) const READ_BUFFER_MAX_BYTES: usize = 256 * 1024;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The site every request works on: its folders, database and configuration.
    pub site: Arc<Site>,
    http: reqwest::Client,
    pace: Pace,
    events: Arc<events::Events>,
    /// The chat turns each person is running now.
    turns: tally::Tally,
    /// The harness token this gateway presents upstream for each person, minted on first use.
    relay_tokens: Arc<tokio::sync::Mutex<HashMap<String, String>>>,
    /// How the person's worker starts in host mode (the `ferry` binary).
    worker: Option<ferry_tools::WorkerProgram>,
    /// One toolbox per person, opened on first use.
    toolboxes: Arc<std::sync::Mutex<HashMap<String, Arc<ferry_tools::Toolbox>>>>,
    /// Cancelled when the gateway stops, so that streams which never end on their own
    /// (events, chat replies) let the shutdown finish.
    closing: CancellationToken,
    /// The links of the connected nodes, and what bounds their handshakes.
    nodes: node_link::NodeLinks,
    /// The terminals open on the nodes.
    terminals: terminals::Sessions,
    /// The address the gateway listens on, once bound: `/mcp` answers to its names.
    address: Option<std::net::SocketAddr>,
    /// The upstream agent's API key (`agent.api_key_env`), sent as its bearer token.
    agent_key: Option<ferry_config::ApiKey>,
    /// The resumable uploads this gateway has touched (tus, `/v1/uploads`).
    uploads: Arc<tus::Uploads>,
    /// This gateway among the site's gateways (S-GATEWAYS): what it holds for itself
    /// (relay tokens, node marks) carries it.
    gateway_id: Arc<str>,
    /// The key the site's gateways sign their calls to each other with, read once.
    gateway_key: Arc<std::sync::OnceLock<[u8; 32]>>,
    /// The calls other gateways forwarded here lately, so none is taken twice.
    forwarded: Arc<forward::Seen>,
    /// Each person's uploads, deliveries and tool calls of the last minute (`[limits]`),
    /// as this gateway counted them.
    rates: Arc<rate::Limiter>,
    /// Room for small uploads' file parts held in memory until their form has been read
    /// (`UPLOADS_HELD_MAX_BYTES`, in bytes): past it, a part streams from its start.
    held_uploads: Arc<tokio::sync::Semaphore>,
    /// Turns to place an upload or a delivery (`PLACEMENTS_PER_CORE` per core).
    placements: Arc<tokio::sync::Semaphore>,
}

/// Why the gateway could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The HTTP client for deliveries and the chat relay could not be built.
    #[error("building the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    /// A setting cannot be used as it is (an API key variable that is not set).
    #[error(transparent)]
    Config(#[from] ferry_config::ConfigError),
}

impl AppState {
    /// Wraps an open site with the HTTP client deliveries use; reads the upstream agent's
    /// API key when `agent.api_key_env` names one.
    pub fn new(site: Arc<Site>) -> Result<AppState, StartError> {
        let agent_key = site.config().agent.api_key()?;
        ops::install();
        let server = &site.config().server;
        let pace = Pace {
            idle: Duration::from_secs(server.body_idle_timeout_secs),
            min_bytes_per_sec: server.body_min_bytes_per_sec,
        };
        let rates = Arc::new(rate::Limiter::new(&site.config().limits));
        let http = reqwest::Client::builder()
            .user_agent(concat!("ferry/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()?;
        Ok(AppState {
            site,
            http,
            pace,
            events: Arc::default(),
            turns: tally::Tally::default(),
            relay_tokens: Arc::default(),
            worker: None,
            toolboxes: Arc::default(),
            closing: CancellationToken::new(),
            nodes: node_link::NodeLinks::new(),
            terminals: terminals::Sessions::default(),
            address: None,
            agent_key,
            uploads: Arc::default(),
            gateway_id: ferry_fs::random_base32::<10>().into(),
            gateway_key: Arc::default(),
            forwarded: Arc::default(),
            rates,
            held_uploads: Arc::new(tokio::sync::Semaphore::new(
                ferry_config::limits::UPLOADS_HELD_MAX_BYTES,
            )),
            placements: Arc::new(tokio::sync::Semaphore::new(
                ferry_config::limits::PLACEMENTS_PER_CORE
                    * std::thread::available_parallelism().map_or(1, usize::from),
            )),
        })
    }

    /// Sets the address the gateway is bound to (the configuration may name port 0).
    pub fn with_address(mut self, address: std::net::SocketAddr) -> AppState {
        self.address = Some(address);
        self
    }

    /// Sets how host mode starts a person's worker.
    pub fn with_worker(mut self, worker: ferry_tools::WorkerProgram) -> AppState {
        self.worker = Some(worker);
        self
    }

    /// The tools of `person`, kept while the folders they reach stay the same; opened
    /// again once the person joined or left a circle. The old toolbox's workers end when
    /// the last request using it lets go of it.
    pub(crate) fn toolbox(
        &self,
        person: &str,
    ) -> Result<Arc<ferry_tools::Toolbox>, ferry_tools::ToolError> {
        let mut toolboxes = self.toolboxes.lock().unwrap_or_else(|e| e.into_inner());
        let mut stale = None;
        if let Some(toolbox) = toolboxes.get(person) {
            // A failed look is answered by opening again, which reports it.
            if toolbox.is_current().unwrap_or(false) {
                return Ok(toolbox.clone());
            }
            stale = toolboxes.remove(person);
        }
        let opened = ferry_tools::Toolbox::open(self.site.clone(), person, self.worker.clone());
        let nodes = ferry_tools::Nodes::new(self.hub())
            .with_forward(&self.gateway_id, Arc::new(forward::Forwarder::new(self)));
        let toolbox = opened.map(|t| Arc::new(t.with_nodes(nodes)));
        if let Ok(toolbox) = &toolbox {
            toolboxes.insert(person.to_owned(), toolbox.clone());
        }
        drop(toolboxes);
        // Ended outside the lock: ending idle workers waits for their processes.
        drop(stale);
        toolbox
    }

    /// The links of the nodes connected to this gateway. A link says only that the node
    /// proved its key: a caller checks the node's record (state, served commands) on
    /// every call.
    pub fn hub(&self) -> Arc<ferry_node::hub::Hub> {
        self.nodes.hub.clone()
    }

    /// Ends the open event and chat streams; call when the server begins to stop.
    pub fn close_streams(&self) {
        self.closing.cancel();
    }

    /// Runs `op` on a person's workspace, or one of their projects, on a blocking thread.
    pub(crate) async fn in_workspace<T: Send + 'static>(
        &self,
        person: &str,
        project: Option<&str>,
        op: impl FnOnce(&ferry_site::Workspace<'_>) -> Result<T, ferry_site::SiteError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let (site, person, project) = (
            self.site.clone(),
            person.to_owned(),
            project.map(str::to_owned),
        );
        blocking(move || op(&site.workspace(&person, project.as_deref())?)).await
    }

    /// The harness token the chat relay presents to `person`'s upstream agent.
    async fn relay_token(&self, person: &str) -> Result<String, ApiError> {
        let mut tokens = self.relay_tokens.lock().await;
        // Still valid? An operator may have revoked it with `ferry token revoke`.
        if let Some(token) = tokens.get(person)
            && self.site.authenticate_async(token).await?.is_some()
        {
            return Ok(token.clone());
        }
        let (site, who) = (self.site.clone(), person.to_owned());
        let gateway = self.gateway_id.clone();
        let token = blocking(move || site.create_relay_token(&who, &gateway)).await?;
        tokens.insert(person.to_owned(), token.clone());
        Ok(token)
    }

    /// Starts the work that runs beside the requests: noticing files agents write into
    /// `public/attachments/` for the pages that are open, sweeping, closing the links of
    /// nodes revoked on the data dir. Registers this gateway among the site's (S-GATEWAYS)
    /// and keeps marking it seen; the relay tokens and node marks of gateways that are
    /// gone (an earlier run of this one among them) are swept.
    pub fn start_background(&self) -> Result<(), ferry_site::SiteError> {
        let address = self.address.map(|a| a.to_string()).unwrap_or_default();
        self.site.register_gateway(&self.gateway_id, &address)?;
        self.site.keep_facts(&self.gateway_id);
        events_shared::start(self);
        tokio::spawn(beat(self.clone(), address));
        // The media store's folder is made here, at start, and never by `/readyz`, which
        // reports it missing instead.
        if let Err(e) = self.site.media() {
            tracing::warn!("the media store cannot be opened: {e}");
        }
        tokio::spawn(events::watch_attachments(self.clone()));
        tokio::spawn(interactions::sweep_picks(self.clone()));
        tokio::spawn(sweep_saved_output(self.clone()));
        tokio::spawn(sweep_media(self.clone()));
        tokio::spawn(sweep_temporaries(self.clone()));
        tokio::spawn(trash::sweep(self.clone()));
        tokio::spawn(shares::sweep(self.clone()));
        tokio::spawn(tus::sweep(self.clone()));
        tokio::spawn(node_link::watch_revocations(self.clone()));
        tokio::spawn(events::announce_node_changes(self.clone()));
        tokio::spawn(audit::sweep(self.clone()));
        Ok(())
    }

    /// This gateway stops: it leaves the site's gateways, and its relay tokens and node
    /// marks go with it (the other gateways' stay).
    pub async fn stopped(&self) {
        let (site, id) = (self.site.clone(), self.gateway_id.clone());
        if let Err(e) = blocking(move || site.gateway_stopped(&id)).await {
            tracing::warn!("leaving the site's gateways: {}", e.message);
        }
    }
}

/// Marks the gateway seen every [`ferry_site::GATEWAY_BEAT_SECS`], and sweeps what
/// gateways that stopped beating left behind.
async fn beat(state: AppState, address: String) {
    let mut ticks = tokio::time::interval(Duration::from_secs(ferry_site::GATEWAY_BEAT_SECS));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = state.closing.cancelled() => return,
        }
        let (site, id, address) = (
            state.site.clone(),
            state.gateway_id.clone(),
            address.clone(),
        );
        let beat = blocking(move || {
            site.gateway_seen(&id, &address)?;
            site.sweep_gateways()
        })
        .await;
        if let Err(e) = beat {
            tracing::warn!("marking this gateway seen: {}", e.message);
        }
    }
}

/// How often `ferry serve` sweeps the media store (expired records, then blobs no record
/// references).
const MEDIA_SWEEP_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// Sweeps the media store at start and then every [`MEDIA_SWEEP_INTERVAL`].
async fn sweep_media(state: AppState) {
    let mut ticks = tokio::time::interval(MEDIA_SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let swept = match state.site.media() {
            Ok(store) => store.sweep(std::time::SystemTime::now()).await,
            Err(e) => Err(e),
        };
        match swept {
            Ok(report) => tracing::debug!(?report, "media store swept"),
            Err(e) => tracing::warn!("sweeping the media store: {e}"),
        }
    }
}

/// How often `ferry serve` looks for the temporaries of writers that died, after the
/// first time at start: a walk of every tree people write in, so not often.
const TEMPORARY_SWEEP_INTERVAL: Duration = Duration::from_secs(6 * 3600);

/// Removes what writers that died left ([`ferry_site::Site::sweep_stale_temporaries`])
/// at start and then every [`TEMPORARY_SWEEP_INTERVAL`]; first, it undoes the changes
/// of several files they were killed in the middle of, whose kept files the sweep would
/// otherwise remove.
async fn sweep_temporaries(state: AppState) {
    let mut ticks = tokio::time::interval(TEMPORARY_SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let undoing = state.clone();
        let _ = blocking(move || {
            undo_unfinished_changes(&undoing);
            Ok::<_, ApiError>(())
        })
        .await;
        let site = state.site.clone();
        match blocking(move || Ok::<_, ApiError>(site.sweep_stale_temporaries()?)).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("removed {n} temporary file(s) left by writers that died"),
            Err(e) => tracing::warn!("removing stale temporaries: {}", e.message),
        }
    }
}

/// Undoes, as each person, the changes of several files whose writer died between two
/// of its files (a `ferry mcp` killed meanwhile, or this gateway's last run).
fn undo_unfinished_changes(state: &AppState) {
    let journals = state.site.path().join(ferry_site::layout::CHANGES_DIR);
    for person in ferry_exec::persons_with_unfinished_changes(&journals) {
        match state.toolbox(&person) {
            Ok(toolbox) => {
                toolbox.journal().undo_unfinished(toolbox.requester());
            }
            Err(e) => tracing::warn!(
                person,
                "undoing an unfinished change of several files: {}",
                e.message
            ),
        }
    }
}

/// Removes every person's expired saved command output at start and then every
/// [`ferry_tools::OUTPUT_SWEEP_INTERVAL`], each person's as that person.
async fn sweep_saved_output(state: AppState) {
    let mut ticks = tokio::time::interval(ferry_tools::OUTPUT_SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let swept = state.clone();
        let result = blocking(move || {
            for person in swept.site.persons().map_err(ApiError::from)? {
                let swept = swept
                    .toolbox(&person)
                    .and_then(|toolbox| toolbox.sweep_saved_output());
                if let Err(e) = swept {
                    tracing::warn!(person, "removing expired command output: {}", e.message);
                }
            }
            Ok::<_, ApiError>(())
        })
        .await;
        if let Err(e) = result {
            tracing::warn!("removing expired command output: {}", e.message);
        }
    }
}

/// Runs a site operation on a blocking thread.
pub(crate) async fn blocking<T, E>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError>
where
    T: Send + 'static,
    E: Into<ApiError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map_err(Into::into),
        Err(e) => Err(ApiError::internal("blocking task", e)),
    }
}

/// Every route of the API.
pub fn router(state: AppState) -> Router {
    let (routes, openapi) = ApiRouter::new()
        .merge(ops::routes())
        .merge(events::routes())
        .merge(chat::routes())
        .merge(upload::routes())
        .merge(files::routes())
        .merge(projects::routes())
        .merge(me::routes())
        .merge(audit::routes())
        .merge(forward::routes())
        .merge(deliveries::routes())
        .merge(mcp::routes(&state))
        .merge(node_link::routes())
        .merge(find::routes())
        .merge(interactions::routes())
        .merge(trash::routes())
        .merge(shares::routes())
        .merge(nodes::routes())
        .merge(tus::routes())
        .merge(preview::routes())
        .merge(openapi::routes())
        .split_for_parts();
    let app: Router = routes
        .layer(Extension(openapi::Described::new(openapi)))
        .fallback(assets::serve)
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                Code::MethodNotAllowed,
                "this route does not take that method",
            )
        })
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        // A route may only set a stricter policy of its own (a preview's picture answers
        // `default-src 'none'`); every other answer gets the page's.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(assets::CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(
            // The span names the path alone: a query may hold a secret (a share link's
            // or a pick link's signature), which no log line may carry.
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(|request: &axum::http::Request<axum::body::Body>| {
                    tracing::debug_span!(
                        "request",
                        method = %request.method(),
                        path = %request.uri().path(),
                    )
                })
                // The access log says each answer once, a 5xx at WARN: the layer's own ERROR
                // line would repeat it for answers that are the client's to act on (503
                // no_agent, 507 trash_full).
                .on_failure(()),
        )
        // Inside the access log, so that a refusal's logged time includes its wait.
        .layer(axum::middleware::from_fn(linger::finish_small_bodies))
        .layer(axum::middleware::from_fn(access_log::access_log))
        .with_state(state);
    // Around the whole router, to see each answer after axum's method routing is done
    // with it (it adds `Allow` there, outside every route's own layers).
    Router::new()
        .fallback_service(app)
        .layer(axum::middleware::map_response(no_allow_on_not_found))
}

/// A 404 says nothing of the methods a path takes. axum adds `Allow` to the answer of a
/// method a route does not take, even when that answer is the admin routes' "no such
/// route" to anyone else, which would tell them the route is there.
async fn no_allow_on_not_found(mut response: axum::response::Response) -> axum::response::Response {
    if response.status() == axum::http::StatusCode::NOT_FOUND {
        response.headers_mut().remove(header::ALLOW);
    }
    response
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open requests finish.
/// At most `max_connections` client connections are held at once (`conn.rs`).
///
/// hyper-util directly rather than `axum::serve`, for the header read timeout that keeps a
/// client who never finishes its headers from holding a connection.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
    grace: Duration,
) -> std::io::Result<()> {
    let mut admission = conn::Admission::new(max_connections);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(READ_BUFFER_MAX_BYTES);
    // An HTTP/2 connection has no header timeout between its streams: one whose peer
    // stops answering pings (gone, or never finishing its own preface) is closed, so
    // only live clients hold the connections `max_connections` counts.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(header_read_timeout)
        .keep_alive_timeout(header_read_timeout)
        // Each stream may hold an upload, with its file and buffers: a connection counts
        // once against `max_connections`, so it carries no more than a few.
        .max_concurrent_streams(ferry_config::limits::HTTP2_STREAMS_PER_CONNECTION);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                // Out of descriptors and the like: back off instead of spinning.
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Some(stream) = admission.admit(stream, header_read_timeout) else {
            continue;
        };
        // Who is on the other end, for the routes that bound what one source may hold.
        let router = tower::ServiceExt::map_request(
            router.clone(),
            move |mut request: axum::http::Request<_>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                request
            },
        );
        let service = hyper_util::service::TowerToHyperService::new(router);
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    // Closed now, so a new connection is refused at once rather than left waiting in
    // the backlog of a server that will never take it.
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!("closing with requests still open after {} s", grace.as_secs());
        }
    }
    Ok(())
}

#[doc(hidden)]
pub mod fuzzing {
    //! For the fuzz targets (`fuzz/`): the gateway's parsers of outside input.

    use axum::body::Body;
    use axum::http::{Request, header};
    use ferry_codes::Code;

    use crate::ApiError;

    pub use crate::delivery_name::{
        choose_name, filename_from_content_disposition, filename_from_url,
    };
    pub use crate::range::{
        RangeRequest, etag_for, if_none_match_hits, if_range_allows, parse_range,
    };

    /// The `Content-Disposition` a download of a file named `name` is sent with.
    pub fn content_disposition(name: &str) -> String {
        crate::files::content_disposition(name)
    }

    /// One part of a multipart body, as `POST /v1/media` reads it.
    #[derive(Debug)]
    pub struct Part {
        /// The part's form field name.
        pub name: Option<String>,
        /// The file name the part was sent with.
        pub file_name: Option<String>,
        /// Its bytes; for `project` and `folder`, the text the upload reads.
        pub bytes: Vec<u8>,
    }

    /// Reads a multipart body as an upload whose file may hold `max` bytes does: the
    /// request's `Content-Type` and `Content-Length` as given, the body arriving in
    /// `chunks`, the `project` and `folder` fields read as text.
    pub async fn multipart(
        content_type: &[u8],
        content_length: Option<u64>,
        chunks: Vec<Vec<u8>>,
        max: u64,
    ) -> Result<Vec<Part>, ApiError> {
        // hyper refuses a header value it could not carry before any handler sees it.
        let content_type = header::HeaderValue::from_bytes(content_type)
            .map_err(|_| ApiError::new(Code::BadMultipart, "not a header value"))?;
        let mut request = Request::builder()
            .method("POST")
            .uri("/v1/media")
            .header(header::CONTENT_TYPE, content_type);
        if let Some(len) = content_length {
            request = request.header(header::CONTENT_LENGTH, len);
        }
        let stream = futures_util::stream::iter(
            chunks
                .into_iter()
                .map(|chunk| Ok::<_, std::io::Error>(bytes::Bytes::from(chunk))),
        );
        let request = request
            .body(Body::from_stream(stream))
            .map_err(|e| ApiError::internal("request", e))?;
        let pace = crate::Pace {
            idle: std::time::Duration::from_secs(60),
            min_bytes_per_sec: 0,
        };
        let mut multipart = crate::upload::open_multipart(request, max, pace)?;
        let mut parts = Vec::new();
        while let Some(mut field) = multipart
            .next_field()
            .await
            .map_err(crate::upload::multipart_error)?
        {
            let name = field.name().map(str::to_owned);
            let file_name = field.file_name().map(str::to_owned);
            let text = match name.as_deref() {
                Some("project") => Some("project"),
                Some("folder") => Some("folder"),
                _ => None,
            };
            let bytes = match text {
                Some(text) => crate::upload::read_text_field(&mut field, text)
                    .await?
                    .into_bytes(),
                None => {
                    let mut bytes = Vec::new();
                    while let Some(chunk) = field
                        .chunk()
                        .await
                        .map_err(crate::upload::multipart_error)?
                    {
                        bytes.extend_from_slice(&chunk);
                    }
                    bytes
                }
            };
            parts.push(Part {
                name,
                file_name,
                bytes,
            });
        }
        Ok(parts)
    }

    /// What a resumable upload's headers declare, as `POST /v1/uploads` and `PATCH` read
    /// them with a largest file of `max` bytes: the tus version, then the length, name,
    /// project, folder and overwrite of a creation, and a part's offset and checksum.
    pub use crate::tus::fuzzing::{TUS_HEADERS, TusHeaders, tus_headers};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persons_toolbox_is_kept_until_their_folders_change() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), ferry_config::Config::default()).unwrap();
        site.add_person("ann").unwrap();
        site.add_person("bob").unwrap();
        let site = Arc::new(site);
        let state = AppState::new(site.clone()).unwrap();
        let first = state.toolbox("ann").unwrap();
        assert!(Arc::ptr_eq(&first, &state.toolbox("ann").unwrap()));
        // Another person's circle leaves ann's toolbox as it is.
        site.add_circle("others", &["bob".to_owned()]).unwrap();
        assert!(Arc::ptr_eq(&first, &state.toolbox("ann").unwrap()));
        site.add_circle("team", &["ann".to_owned()]).unwrap();
        let second = state.toolbox("ann").unwrap();
        assert!(
            !Arc::ptr_eq(&first, &second),
            "opened again for the new circle"
        );
        assert!(second.is_current().unwrap());
        assert!(Arc::ptr_eq(&second, &state.toolbox("ann").unwrap()));
        assert!(state.toolbox("nobody").is_err());
    }
}
