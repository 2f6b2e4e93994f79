//! The hub: the links of the nodes connected to a gateway, by node id.
//!
//! It only holds links. Whether a node may serve a call (its pairing state, the commands
//! approved) is the caller's to check on every call, from the pairing record: a link in
//! the hub says that a node proved its key, not that it is trusted.
//!
//! Whoever shows the nodes live subscribes to [`Hub::changes`]: the id of each node whose
//! link was attached or detached.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::broadcast;

use crate::{Link, NodeError};

/// Changes a slow subscriber may fall behind before it hears `Lagged`.
const CHANGES_BACKLOG: usize = 64;

/// The links of the nodes connected to this gateway, by node id.
pub struct Hub {
    links: Mutex<HashMap<String, Attached>>,
    /// Numbers the links attached, so a link that ends detaches itself and never a newer
    /// link of the same node.
    generations: AtomicU64,
    /// The id of each node whose link came or went.
    changes: broadcast::Sender<String>,
}

struct Attached {
    generation: u64,
    link: Link,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    /// A hub with no node connected.
    pub fn new() -> Hub {
        Hub {
            links: Mutex::new(HashMap::new()),
            generations: AtomicU64::new(1),
            changes: broadcast::channel(CHANGES_BACKLOG).0,
        }
    }

    /// The ids of the nodes whose link is attached or detached from now on, one per
    /// change; a subscriber that falls behind hears `Lagged` and should read everything.
    pub fn changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    fn changed(&self, node_id: &str) {
        // No subscriber is not an error: nobody shows the nodes live.
        let _ = self.changes.send(node_id.to_owned());
    }

    fn links(&self) -> MutexGuard<'_, HashMap<String, Attached>> {
        // The map is replaced or read whole under the lock: a panic cannot leave it torn.
        self.links.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers the link of a verified node; an older link of the same node is closed.
    /// Returns the generation to detach with.
    pub fn attach(&self, node_id: &str, link: Link) -> u64 {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let older = self
            .links()
            .insert(node_id.to_owned(), Attached { generation, link });
        // Closed outside the lock: closing fails the old link's calls, whose owners may
        // come back to the hub.
        if let Some(older) = older {
            older.link.close();
        }
        self.changed(node_id);
        generation
    }

    /// Forgets the link of `generation` (a newer link of the same node stays).
    pub fn detach(&self, node_id: &str, generation: u64) {
        let mut links = self.links();
        if links
            .get(node_id)
            .is_some_and(|a| a.generation == generation)
        {
            links.remove(node_id);
            drop(links);
            self.changed(node_id);
        }
    }

    /// The node's open link, or `node_offline` at once (never waits).
    pub fn link(&self, node_id: &str) -> Result<Link, NodeError> {
        match self.links().get(node_id) {
            Some(attached) if attached.link.is_open() => Ok(attached.link.clone()),
            _ => Err(NodeError::Offline(format!(
                "node {} is not connected",
                shown(node_id)
            ))),
        }
    }

    /// Whether the node has an open link.
    pub fn is_connected(&self, node_id: &str) -> bool {
        self.links()
            .get(node_id)
            .is_some_and(|attached| attached.link.is_open())
    }

    /// Ids of the nodes with an open link.
    pub fn connected(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .links()
            .iter()
            .filter(|(_, attached)| attached.link.is_open())
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Closes the node's link (a revoke), if it has one; the node is told `node_revoked`.
    pub fn disconnect(&self, node_id: &str) {
        let removed = self.links().remove(node_id);
        if let Some(attached) = removed {
            attached.link.close_with(&NodeError::Remote {
                code: ferry_codes::Code::NodeRevoked,
                message: "this node was revoked; it needs a new key to pair again".into(),
            });
            self.changed(node_id);
        }
    }
}

/// A node id from a caller, as a message may show it: cut short, quoted.
fn shown(id: &str) -> String {
    let cut: String = id.chars().take(64).collect();
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::{LinkConfig, Role};
    use bytes::Bytes;
    use ferry_codes::Code;
    use futures_util::StreamExt;

    /// The far end of a test link: it reads nothing and sends nothing; dropping it ends
    /// the link's stream.
    type FarEnd = (
        tokio::sync::mpsc::Receiver<Bytes>,
        tokio::sync::mpsc::Sender<Result<Bytes, String>>,
    );

    /// A link whose other end never answers, open while the far end is kept.
    fn quiet_link() -> (Link, FarEnd) {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(8);
        let (far_tx, far_rx) = tokio::sync::mpsc::channel::<Result<Bytes, String>>(8);
        let sink = futures_util::sink::unfold(tx, |tx, message: Bytes| async move {
            tx.send(message).await.map_err(|_| "gone".to_string())?;
            Ok::<_, String>(tx)
        });
        let stream = futures_util::stream::unfold(far_rx, |mut rx| async move {
            rx.recv().await.map(|message| (message, rx))
        })
        .boxed();
        let link = Link::spawn(Box::pin(sink), stream, LinkConfig::new(Role::Gateway), None);
        (link, (rx, far_tx))
    }

    #[tokio::test]
    async fn a_node_without_a_link_is_offline_at_once() {
        let hub = Hub::new();
        let Err(e) = hub.link("0123456789abcdef0123") else {
            panic!("a link from nowhere")
        };
        assert_eq!(e.code(), Code::NodeOffline);
        assert!(!hub.is_connected("0123456789abcdef0123"));
        assert!(hub.connected().is_empty());
    }

    #[tokio::test]
    async fn a_newer_link_closes_the_older_and_survives_its_detach() {
        let hub = Hub::new();
        let (old, _keep_old) = quiet_link();
        let (new, _keep_new) = quiet_link();
        let first = hub.attach("aa", old.clone());
        let second = hub.attach("aa", new.clone());
        assert_ne!(first, second);
        assert!(!old.is_open(), "the older link is closed");
        // The old link's watcher detaches with its own generation: the new link stays.
        hub.detach("aa", first);
        assert!(hub.is_connected("aa"));
        assert!(hub.link("aa").unwrap().is_open());
        assert_eq!(hub.connected(), vec!["aa".to_string()]);
        hub.detach("aa", second);
        assert!(!hub.is_connected("aa"));
    }

    #[tokio::test]
    async fn attaching_detaching_and_disconnecting_are_told() {
        let hub = Hub::new();
        let mut changes = hub.changes();
        let (one, _keep_one) = quiet_link();
        let (two, _keep_two) = quiet_link();
        let first = hub.attach("ee", one);
        assert_eq!(changes.try_recv().unwrap(), "ee");
        let second = hub.attach("ee", two);
        assert_eq!(changes.try_recv().unwrap(), "ee");
        // The older link's own detach changes nothing: the newer link stays.
        hub.detach("ee", first);
        assert!(changes.try_recv().is_err());
        hub.detach("ee", second);
        assert_eq!(changes.try_recv().unwrap(), "ee");
        let (three, _keep_three) = quiet_link();
        hub.attach("ff", three);
        assert_eq!(changes.try_recv().unwrap(), "ff");
        hub.disconnect("ff");
        assert_eq!(changes.try_recv().unwrap(), "ff");
        // Nothing to disconnect, nothing told.
        hub.disconnect("ff");
        assert!(changes.try_recv().is_err());
    }

    #[tokio::test]
    async fn disconnect_closes_the_link() {
        let hub = Hub::new();
        let (link, _keep) = quiet_link();
        hub.attach("bb", link.clone());
        hub.disconnect("bb");
        assert!(!link.is_open());
        assert!(!hub.is_connected("bb"));
        assert_eq!(
            hub.link("bb").err().map(|e| e.code()),
            Some(Code::NodeOffline)
        );
        // Nothing to do for a node without a link.
        hub.disconnect("cc");
    }

    #[tokio::test]
    async fn a_link_that_died_is_not_connected_before_its_detach() {
        let hub = Hub::new();
        let (link, keep) = quiet_link();
        hub.attach("dd", link.clone());
        drop(keep);
        tokio::time::timeout(std::time::Duration::from_secs(5), link.closed())
            .await
            .unwrap();
        assert!(!hub.is_connected("dd"));
        assert!(hub.connected().is_empty());
        assert_eq!(
            hub.link("dd").err().map(|e| e.code()),
            Some(Code::NodeOffline)
        );
    }
}
