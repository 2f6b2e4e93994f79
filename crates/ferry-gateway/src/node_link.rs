//! `GET /v1/nodes/connect` (spec nodes N-LINK): the WebSocket a node dials, its
//! handshake, the pairing record it updates, and the link the hub then holds.
//!
//! The route takes no token: a node proves itself by signing a challenge. So what a
//! stranger can make the gateway spend is bounded here: [`NODE_HANDSHAKES_MAX`]
//! handshakes at once, [`NODE_HANDSHAKES_PER_SOURCE_MAX`] of them from one source (one
//! more is `503 too_many_handshakes`), each within
//! [`NODE_HANDSHAKE_TIMEOUT`], messages no larger than one frame, and pending records
//! capped by the site (`[nodes] max_pending`). Both pending and approved nodes stay
//! connected; whoever calls a node checks its record on every call, since the hub only
//! holds links.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::Extensions;
use axum::response::Response;
use bytes::Bytes;
use ferry_codes::Code;
use ferry_config::limits::{
    NODE_HANDSHAKE_TIMEOUT, NODE_HANDSHAKES_MAX, NODE_HANDSHAKES_PER_SOURCE_MAX,
};
use ferry_node::frame::{FRAME_MAX_BYTES, LINK_READ_BUFFER_BYTES};
use ferry_node::handshake::{VerifiedNode, gateway_handshake_admitting};
use ferry_node::hub::Hub;
use ferry_node::mux::{LinkConfig, Role};
use ferry_node::{Link, NodeError};
use ferry_site::{NodeHello, NodeState, Site, SiteError};
use futures_util::future::ready;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};
use utoipa_axum::routes;

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(connect))
}

/// How often the gateway re-reads the records of connected nodes, so a revoke made with
/// `ferry node revoke` on the data dir closes the link within two of these.
pub(crate) const REVOKE_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The node links of one gateway: the hub and what bounds the handshakes.
#[derive(Clone)]
pub(crate) struct NodeLinks {
    /// The links of the connected nodes.
    pub(crate) hub: Arc<Hub>,
    /// One permit per handshake in progress.
    handshakes: Arc<Semaphore>,
    /// Handshakes in progress per source.
    sources: Arc<Mutex<HashMap<Source, usize>>>,
    /// Held while a node's `connected` mark is written, so marks written for two links
    /// of one node land in the order the hub changed.
    marks: Arc<tokio::sync::Mutex<()>>,
}

impl NodeLinks {
    pub(crate) fn new() -> NodeLinks {
        NodeLinks {
            hub: Arc::new(Hub::new()),
            handshakes: Arc::new(Semaphore::new(NODE_HANDSHAKES_MAX)),
            sources: Arc::default(),
            marks: Arc::default(),
        }
    }

    /// Writes the node's `connected` mark as the hub has it now.
    async fn mark(&self, site: &Arc<Site>, node_id: &str, gateway: &Arc<str>) {
        let _turn = self.marks.lock().await;
        let connected = self.hub.is_connected(node_id);
        let (site, id, gateway) = (site.clone(), node_id.to_owned(), gateway.clone());
        if let Err(e) = blocking(move || site.set_node_connected(&id, connected, &gateway)).await {
            tracing::warn!(node = node_id, "recording the link's state: {}", e.message);
        }
    }
}

/// Where a handshake comes from: an IPv4 address, or the /64 of an IPv6 one (one
/// machine usually holds a whole /64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    V4(u32),
    V6(u64),
    /// A connection whose peer the server did not record (tests on a router alone).
    Unknown,
}

impl Source {
    fn of(extensions: &Extensions) -> Source {
        match extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())
        {
            Some(IpAddr::V4(ip)) => Source::V4(u32::from(ip)),
            Some(IpAddr::V6(ip)) => match ip.to_ipv4_mapped() {
                Some(ip) => Source::V4(u32::from(ip)),
                None => Source::V6((u128::from(ip) >> 64) as u64),
            },
            None => Source::Unknown,
        }
    }
}

/// A source's share of the handshakes, given back when dropped.
struct SourceSlot {
    sources: Arc<Mutex<HashMap<Source, usize>>>,
    source: Source,
}

impl SourceSlot {
    fn take(links: &NodeLinks, source: Source) -> Option<SourceSlot> {
        let mut sources = links.sources.lock().unwrap_or_else(|p| p.into_inner());
        let held = sources.entry(source).or_default();
        if *held >= NODE_HANDSHAKES_PER_SOURCE_MAX {
            return None;
        }
        *held += 1;
        Some(SourceSlot {
            sources: links.sources.clone(),
            source,
        })
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = sources.get_mut(&self.source) {
            *held -= 1;
            if *held == 0 {
                sources.remove(&self.source);
            }
        }
    }
}

/// The WebSocket a node dials (`ferry node run`); it takes no token.
///
/// Binary frames of the node link, opened by a handshake in which the node signs the
/// gateway's challenge with its key; a node the site does not know yet is recorded as
/// pending.
#[utoipa::path(
    get,
    path = "/v1/nodes/connect",
    operation_id = "connectNode",
    tag = "nodes",
    responses((status = 101, description = "Switched to the node link's WebSocket, if a \
               handshake slot is free (else 503 too_many_handshakes).",
               headers(
                   ("Upgrade" = String, description = "`websocket`."),
                   ("Connection" = String, description = "`upgrade`."),
                   ("Sec-WebSocket-Accept" = String,
                    description = "The digest of the request's `Sec-WebSocket-Key` (RFC 6455)."),
               )))
)]
pub(crate) async fn connect(
    State(state): State<AppState>,
    extensions: Extensions,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|e| {
        ApiError::new(
            Code::InvalidRequest,
            format!(
                "/v1/nodes/connect takes a WebSocket upgrade: {}",
                e.body_text()
            ),
        )
    })?;
    let source = SourceSlot::take(&state.nodes, Source::of(&extensions)).ok_or_else(|| {
        ApiError::new(
            Code::TooManyHandshakes,
            format!(
                "{NODE_HANDSHAKES_PER_SOURCE_MAX} nodes are connecting from this address already; \
                 try again in a few seconds"
            ),
        )
    })?;
    let slot = state
        .nodes
        .handshakes
        .clone()
        .try_acquire_owned()
        .map_err(|_| {
            ApiError::new(
                Code::TooManyHandshakes,
                format!(
                    "{NODE_HANDSHAKES_MAX} nodes are connecting already; try again in a few seconds"
                ),
            )
        })?;
    Ok(upgrade
        .max_message_size(FRAME_MAX_BYTES)
        .max_frame_size(FRAME_MAX_BYTES)
        .read_buffer_size(LINK_READ_BUFFER_BYTES)
        .on_upgrade(move |socket| serve_node(state, socket, (slot, source))))
}

/// The socket's binary messages as the link takes them. Pings are answered below this
/// (by the WebSocket itself), a close ends the stream, and a text message is a breach of
/// the protocol that ends the link.
fn adapt(
    socket: WebSocket,
) -> (
    impl Sink<Bytes, Error = axum::Error> + Send + Unpin + 'static,
    impl Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
) {
    let (sink, stream) = socket.split();
    let sink = sink.with(|bytes: Bytes| ready(Ok::<_, axum::Error>(Message::Binary(bytes))));
    let stream = stream
        .take_while(|message| ready(!matches!(message, Ok(Message::Close(_)))))
        .filter_map(|message| {
            ready(match message {
                Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
                Ok(Message::Text(_)) => Some(Err("a text message on the node link".to_owned())),
                Ok(_) => None,
                Err(e) => Some(Err(e.to_string())),
            })
        });
    (sink, stream)
}

/// One node's connection, from its handshake to the end of its link.
async fn serve_node(state: AppState, socket: WebSocket, slot: (OwnedSemaphorePermit, SourceSlot)) {
    let (mut sink, mut stream) = adapt(socket);
    let session = format!("ferry gateway link {}", ferry_fs::random_hex::<16>());
    let site = state.site.clone();
    let handshake = gateway_handshake_admitting(
        &mut sink,
        &mut stream,
        &session,
        NODE_HANDSHAKE_TIMEOUT,
        |node| admit(site, hello_of(node)),
    );
    // One deadline for the whole handshake, not one per frame.
    let node = match tokio::time::timeout(NODE_HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(node)) => node,
        Ok(Err(e)) => {
            tracing::info!("a node was refused: {e}");
            return;
        }
        Err(_) => {
            let secs = NODE_HANDSHAKE_TIMEOUT.as_secs();
            tracing::info!("a node did not finish its handshake within {secs} s");
            return;
        }
    };
    let link = Link::spawn(sink, stream, LinkConfig::new(Role::Gateway), None);
    let links = &state.nodes;
    let generation = links.hub.attach(&node.id, link.clone());
    links.mark(&state.site, &node.id, &state.gateway_id).await;
    drop(slot);
    // A revoke that came between the admission and the attach found no link to close.
    if revoked_meanwhile(&state.site, &node.id).await {
        links.hub.disconnect(&node.id);
    }
    tracing::info!(node = node.id, name = node.info.name, "node connected");
    let cause = link.closed().await;
    links.hub.detach(&node.id, generation);
    drop(link);
    links.mark(&state.site, &node.id, &state.gateway_id).await;
    tracing::info!(node = node.id, "node disconnected: {cause}");
}

/// Whether the node's record says revoked now (a failed read is left to the watcher).
async fn revoked_meanwhile(site: &Arc<Site>, node_id: &str) -> bool {
    let (site, id) = (site.clone(), node_id.to_owned());
    blocking(move || site.node(&id))
        .await
        .is_ok_and(|record| record.state == NodeState::Revoked)
}

/// What the pairing records take of a verified node.
fn hello_of(node: &VerifiedNode) -> NodeHello {
    NodeHello {
        id: node.id.clone(),
        public_key: ferry_fs::hex(node.public_key.as_bytes()),
        name: node.info.name.clone(),
        platform: node.info.platform.clone(),
        shell: node.info.shell.clone(),
        commands: node.info.commands.clone(),
    }
}

/// Records the verified hello; refuses a revoked node, and a new one past the pending
/// cap (nothing is recorded then).
async fn admit(site: Arc<Site>, hello: NodeHello) -> Result<(), NodeError> {
    let recorded = tokio::task::spawn_blocking(move || site.record_hello(&hello)).await;
    let refuse = |code: Code, message: String| Err(NodeError::Remote { code, message });
    match recorded {
        Ok(Ok(record)) if record.state == NodeState::Revoked => refuse(
            Code::NodeRevoked,
            "this node was revoked; it needs a new key to pair again".into(),
        ),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if !e.code().is_internal() => refuse(e.code(), e.to_string()),
        Ok(Err(e)) => internal(&e),
        Err(e) => internal(&e),
    }
}

/// The gateway's own failure: the operator's log has it, the node a plain sentence.
fn internal(e: &dyn std::fmt::Display) -> Result<(), NodeError> {
    tracing::error!("recording a node's hello: {e}");
    Err(NodeError::Remote {
        code: Code::Internal,
        message: "the gateway could not record this node; its operator's log has the details"
            .into(),
    })
}

/// Closes the links of nodes revoked (or removed) since they connected, every
/// [`REVOKE_WATCH_INTERVAL`]: a revoke through the HTTP route closes the link at once, one
/// with `ferry node revoke` on the data dir reaches this gateway only through the records.
pub(crate) async fn watch_revocations(state: AppState) {
    let mut ticks = tokio::time::interval(REVOKE_WATCH_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let connected = state.nodes.hub.connected();
        if connected.is_empty() {
            continue;
        }
        let site = state.site.clone();
        let ended = blocking(move || {
            let mut ended = Vec::new();
            for id in connected {
                match site.node(&id) {
                    Ok(record) if record.state == NodeState::Revoked => ended.push(id),
                    Err(SiteError::UnknownNode(_)) => ended.push(id),
                    Ok(_) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok::<_, SiteError>(ended)
        })
        .await;
        match ended {
            Ok(ended) => {
                for id in ended {
                    tracing::info!(node = id, "node revoked: its link is closed");
                    state.nodes.hub.disconnect(&id);
                }
            }
            Err(e) => tracing::warn!("reading the connected nodes' records: {}", e.message),
        }
    }
}
