//! Links over memory for the tests, and a peer driven frame by frame.
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use ferry_node::Link;
use ferry_node::frame::Frame;
use ferry_node::mux::{Handler, LinkConfig, Role};
use futures_util::{SinkExt, StreamExt};

pub use ferry_node::memory::{Rx, Tx, duplex};

/// Settings for tests: short heartbeats so a dead link is seen quickly.
pub fn config(role: Role) -> LinkConfig {
    let mut config = LinkConfig::new(role);
    config.heartbeat_interval = Duration::from_millis(50);
    config.heartbeat_timeout = Duration::from_millis(500);
    config
}

/// A gateway link and a node link serving with `node_handler`.
pub fn linked(node_handler: Handler) -> (Link, Link) {
    ferry_node::memory::pair(config(Role::Gateway), config(Role::Node), node_handler)
}

/// A gateway link whose other end the test drives frame by frame.
pub fn raw_peer(gateway: LinkConfig, handler: Option<Handler>) -> (Link, RawPeer) {
    let ((g_tx, g_rx), (p_tx, p_rx)) = duplex();
    let link = Link::spawn(g_tx, g_rx, gateway, handler);
    (
        link,
        RawPeer {
            tx: p_tx,
            rx: p_rx,
            broken: false,
        },
    )
}

/// The far end of a link, driven frame by frame.
pub struct RawPeer {
    /// Sends to the link.
    pub tx: Tx,
    /// Receives from the link.
    pub rx: Rx,
    /// A send failed (the link is gone): the sink may not be used again.
    broken: bool,
}

impl RawPeer {
    /// Sends a frame.
    pub async fn send(&mut self, frame: Frame) {
        self.tx.send(frame.encode()).await.expect("the link reads");
    }

    /// Sends raw bytes as one message.
    pub async fn send_raw(&mut self, message: Bytes) {
        if !self.broken && self.tx.send(message).await.is_err() {
            self.broken = true;
        }
    }

    /// The next frame that is not a heartbeat, if one comes within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let message = tokio::time::timeout_at(deadline, self.rx.next())
                .await
                .ok()??
                .ok()?;
            let frame = Frame::decode(message).expect("the link sends valid frames");
            if frame.kind != ferry_node::frame::Kind::Heartbeat {
                return Some(frame);
            }
        }
    }
}

/// Reads a whole body, counting its bytes without keeping them.
pub async fn drain(body: &mut ferry_node::DataReader) -> Result<u64, ferry_node::NodeError> {
    let mut total = 0u64;
    while let Some(piece) = body.next().await {
        total += piece?.len() as u64;
    }
    Ok(total)
}

pub mod host;
