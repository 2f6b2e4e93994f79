//! The node link: the frames a node and the gateway exchange over one WebSocket, the
//! node's ed25519 identity and the handshake that proves it, and the multiplexer that
//! carries many calls at once, each with its own flow control and cancellation.
//!
//! Everything here runs over any `Sink<Bytes>` and `Stream<Item = Result<Bytes, _>>` of
//! binary messages, so the gateway (axum's WebSocket), the node (tokio-tungstenite) and
//! the tests (an in-memory duplex) plug in the same code.

mod body;
pub mod checked;
pub mod commands;
pub mod connect;
mod error;
pub mod frame;
pub mod handshake;
pub mod host;
pub mod hub;
pub mod identity;
pub mod memory;
pub mod mux;
pub mod policy;
pub mod quote;
pub mod settings;
mod shared;
pub mod terminal;

pub use body::{Call, DataReader, DataWriter, Incoming, Reply, Response};
pub use error::NodeError;
pub use identity::Identity;
pub use mux::{Link, LinkConfig, Role};
