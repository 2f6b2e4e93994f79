//! The ferry site: one data directory holding people, workspaces and metadata.
//!
//! Every operation the HTTP API offers is a function here that a test can call
//! directly; the gateway only parses, authorizes and maps errors.

mod chat;
pub mod config;
mod db;
pub mod docs;
mod error;
mod ids;
mod migrate;
mod site;
pub mod skills;
mod time;
mod tokens;
mod workspace;

pub use chat::{ChatMessage, ChatRole};
pub use config::{Config, SiteMode};
pub use error::SiteError;
pub use ids::{ID_MAX_BYTES, check_id};
pub use migrate::{LEGACY_PUBLIC_DIR_NAME, PUBLIC_DIR_NAME, migrate_legacy_public};
pub use site::{DEFAULT_PERSON, MEMORY_DIR, Project, SERVICE_DIR, Site};
pub use time::rfc3339;
pub use tokens::{Principal, TokenKind};
pub use workspace::{
    ATTACHMENTS_DIR_NAME, AttachmentsState, Download, LIST_MAX_DEPTH, LIST_MAX_ENTRIES, Listing,
    Node, NodeKind, PublicPath, Workspace, attachments_changed,
};
