//! The ferry site: one data directory holding people, workspaces and metadata.
//!
//! Every operation the HTTP API offers is a function here that a test can call
//! directly; the gateway only parses, authorizes and maps errors.

mod artifacts;
mod chat;
mod check;
mod circles;
mod db;
mod error;
mod folder_zip;
mod ids;
mod interactions;
pub mod layout;
mod media;
mod migrate;
mod nodes;
mod public;
mod resumable;
mod search;
mod shares;
mod shown;
mod site;
mod skills;
mod time;
mod tokens;
mod trash;
mod usage;
mod workspace;

pub use artifacts::{Artifact, ArtifactKind};
pub use chat::{ChatMessage, ChatPage, ChatRole, cut_reply, end_as_cut, reply_cut_note};
pub use check::Finding;
pub use circles::Circle;
pub use error::SiteError;
pub use folder_zip::ZipPlan;
pub use ids::check_id;
pub use interactions::{
    ApprovalOutcome, ClaimedPick, INTERACTION_POLL_INTERVAL, Interaction, InteractionError,
    InteractionKind, PickArrival, PickOutcome, PickRequest, PutInPlace,
    WEB_PRESENCE_TOUCH_INTERVAL, WEB_PRESENCE_TTL, is_interaction_id,
};
pub use media::SqliteMediaRecords;
pub use migrate::{legacy_public_target, migrate_legacy_public};
pub use nodes::{
    NODE_COMMANDS_MAX, NODE_FIELD_MAX_BYTES, NodeHello, NodeRecord, NodeState, NodeView,
};
pub use public::{
    AttachmentsState, Download, FlatListing, Listing, Node, NodeKind, PublicFolder, PublicPath,
    PublicPlace, attachments_changed,
};
pub use resumable::ResumableRecord;
pub use search::{Found, FoundLine, SearchQuery, SearchResults, fold};
pub use shares::{SHARE_ROUTE_PREFIX, Share, ShareError, check_share_expiry};
pub use shown::{delivery_notice, person_relative};
pub use site::{DEFAULT_PERSON, Project, Site, project_folder_error};
pub use time::rfc3339;
pub use tokens::{Principal, TokenKind};
pub use trash::{TrashEntry, TrashError, TrashRoom, Trashed, open_trash, purge_trash};
pub use usage::{Counter, QuotaClaim, USAGE_RECOUNT_AFTER};
pub use workspace::{Workspace, open_container};
