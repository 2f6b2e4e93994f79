//! Links over memory: both ends in one process. Tests of the link, of the node host and
//! of the tools that call nodes use them in place of a WebSocket; the frames, windows and
//! handshake-free link are exactly those a socket carries.

use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Sink, Stream};
use tokio::sync::mpsc;

use crate::Link;
use crate::mux::{Handler, LinkConfig};

/// Messages one direction holds before its sender waits.
const MESSAGES_IN_FLIGHT: usize = 8;

/// The sending half of one end.
pub type Tx = Pin<Box<dyn Sink<Bytes, Error = String> + Send>>;
/// The receiving half of one end.
pub type Rx = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

fn half(capacity: usize) -> (Tx, Rx) {
    let (tx, rx) = mpsc::channel::<Bytes>(capacity);
    let sink = futures_util::sink::unfold(tx, |tx, message: Bytes| async move {
        tx.send(message)
            .await
            .map_err(|_| "the other end is gone".to_string())?;
        Ok::<_, String>(tx)
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|message| (Ok(message), rx))
    });
    (Box::pin(sink), Box::pin(stream))
}

/// Two connected ends: what one sends, the other receives, in order.
pub fn duplex() -> ((Tx, Rx), (Tx, Rx)) {
    let (a_tx, b_rx) = half(MESSAGES_IN_FLIGHT);
    let (b_tx, a_rx) = half(MESSAGES_IN_FLIGHT);
    ((a_tx, a_rx), (b_tx, b_rx))
}

/// A gateway end and a node end of one link, the node serving with `node_handler`.
pub fn pair(gateway: LinkConfig, node: LinkConfig, node_handler: Handler) -> (Link, Link) {
    let ((g_tx, g_rx), (n_tx, n_rx)) = duplex();
    let gateway = Link::spawn(g_tx, g_rx, gateway, None);
    let node = Link::spawn(n_tx, n_rx, node, Some(node_handler));
    (gateway, node)
}
