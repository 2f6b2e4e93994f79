//! The ferry site: one data directory holding people, workspaces and metadata.
//!
//! Every operation the HTTP API offers is a function here that a test can call
//! directly; the gateway only parses, authorizes and maps errors.

mod artifacts;
mod chat;
mod check;
mod circles;
pub mod config;
mod db;
pub mod docs;
mod error;
pub mod host;
mod ids;
mod interactions;
mod migrate;
mod public;
mod shown;
mod site;
pub mod skills;
mod time;
mod tokens;
mod usage;
mod workspace;

pub use artifacts::{Artifact, ArtifactKind};
pub use chat::{
    CHAT_PAGE_DEFAULT_MESSAGES, CHAT_PAGE_MAX_BYTES, CHAT_PAGE_MAX_MESSAGES, ChatMessage, ChatPage,
    ChatRole, cut_reply, end_as_cut, reply_cut_note,
};
pub use check::Finding;
pub use circles::Circle;
pub use config::{Config, DeleteApproval, SandboxChoice, SiteMode, TOOL_NAMES};
pub use error::SiteError;
pub use ids::{ID_MAX_BYTES, check_id};
pub use interactions::{
    APPROVAL_MAX_WAIT, ApprovalOutcome, ClaimedPick, INTERACTION_POLL_INTERVAL,
    INTERACTION_RECORD_TTL, INTERACTION_TEXT_MAX_BYTES, Interaction, InteractionError,
    InteractionKind, PICK_FILE_TTL, PICK_LINK_TTL, PickArrival, PickOutcome, PickRequest,
    WEB_PRESENCE_TOUCH_INTERVAL, WEB_PRESENCE_TTL, is_interaction_id,
};
pub use migrate::{
    LEGACY_PUBLIC_DIR_NAME, PUBLIC_DIR_NAME, legacy_public_target, migrate_legacy_public,
};
pub use public::{
    ATTACHMENTS_DIR_NAME, AttachmentsState, Download, LIST_MAX_DEPTH, LIST_MAX_ENTRIES, Listing,
    Node, NodeKind, PublicFolder, PublicPath, PublicPlace, attachments_changed,
};
pub use shown::{delivery_notice, person_relative};
pub use site::{DEFAULT_PERSON, MEMORY_DIR, Project, SERVICE_DIR, Site, project_folder_error};
pub use time::rfc3339;
pub use tokens::{Principal, TokenKind};
pub use usage::{Counter, QuotaClaim, TERMINAL_OUTPUT_DIR, USAGE_RECOUNT_AFTER};
pub use workspace::{Workspace, container_rel, open_container};
