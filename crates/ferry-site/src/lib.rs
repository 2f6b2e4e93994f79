//! The ferry site: one data directory holding people, workspaces and metadata.
//!
//! Every operation the HTTP API offers is a function here that a test can call
//! directly; the gateway only parses, authorizes and maps errors.

mod artifacts;
mod audit;
mod chat;
mod check;
mod circles;
mod db;
mod error;
mod facts;
mod folder_zip;
mod gateways;
mod ids;
mod interactions;
pub mod layout;
mod media;
mod metadata_move;
mod migrate;
mod nodes;
mod public;
mod resumable;
mod search;
mod shares;
mod shown;
mod site;
mod skills;
mod temporaries;
mod time;
mod tokens;
mod trash;
mod usage;
mod workspace;

pub use artifacts::{Artifact, ArtifactKind};
pub use audit::{AUDIT_PAGE_MAX, AuditAction, AuditEntry, AuditFilter, AuditRecord};
pub use chat::{ChatMessage, ChatPage, ChatRole, cut_reply, end_as_cut, reply_cut_note};
pub use check::Finding;
pub use circles::Circle;
pub use error::SiteError;
pub use folder_zip::ZipPlan;
pub use gateways::{
    GATEWAY_BEAT_SECS, GATEWAY_SILENT_SECS, GATEWAY_STALLED_SECS, GatewaysSwept, SiteListener,
};
pub use ids::check_id;
pub use interactions::{
    ApprovalOutcome, ClaimedPick, INTERACTION_POLL_INTERVAL, Interaction, InteractionError,
    InteractionKind, PickArrival, PickOutcome, PickRequest, PutInPlace,
    WEB_PRESENCE_TOUCH_INTERVAL, WEB_PRESENCE_TTL, is_interaction_id,
};
pub use media::DbMediaRecords;
pub use metadata_move::{TableCopied, migrate_metadata};
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
pub use shares::{SHARE_ROUTE_PREFIX, Share, ShareError, check_share_expiry, file_mark};
pub use shown::{delivery_notice, person_relative};
pub use site::{DB_FILE, DEFAULT_PERSON, Project, Site, project_folder_error};
pub use temporaries::TEMPORARY_STALE;
pub use time::{parse_instant, rfc3339};
pub use tokens::{Principal, TokenKind};
pub use trash::{TrashEntry, TrashError, TrashRoom, Trashed, open_trash, purge_trash};
pub use usage::{Counter, QuotaClaim, USAGE_RECOUNT_AFTER, uncountable};
pub use workspace::{Workspace, open_container};

#[doc(hidden)]
pub mod testing {
    //! For tests: the configuration of a test site whose metadata is on the engine the
    //! run asks for. `FERRY_TEST_METADATA=postgres` puts every test site's metadata in a
    //! PostgreSQL database of its own (on the server `FERRY_TEST_POSTGRES_URL` names),
    //! the same one each time the same data folder is opened; otherwise SQLite.

    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use ferry_config::Config;

    /// The variable that picks the engine: `postgres`, or `sqlite` (the default).
    pub const ENGINE_VARIABLE: &str = "FERRY_TEST_METADATA";

    /// The variable that picks the media store: `s3` (a bucket of its own on the test
    /// Garage for each test site), or `local` (the default).
    pub const MEDIA_VARIABLE: &str = "FERRY_TEST_MEDIA";

    /// The default configuration, with the metadata on the engine of the run and the
    /// media in the store of the run.
    pub fn config(data: &Path) -> Config {
        media(data, metadata(data, Config::default()))
    }

    /// Whether the run keeps media in S3 (`FERRY_TEST_MEDIA=s3`).
    pub fn media_on_s3() -> bool {
        match std::env::var(MEDIA_VARIABLE).as_deref() {
            Ok("s3") => true,
            Ok("local") | Err(_) => false,
            Ok(other) => panic!("{MEDIA_VARIABLE}={other:?}: say s3 or local"),
        }
    }

    /// `config` with the media in the store of the run: on S3, the same bucket each time
    /// the same data folder is opened.
    pub fn media(data: &Path, mut config: Config) -> Config {
        if !media_on_s3() {
            return config;
        }
        static BUCKETS: Mutex<Option<HashMap<PathBuf, &'static ferry_media::testing::S3Bucket>>> =
            Mutex::new(None);
        let key = std::path::absolute(data).unwrap_or_else(|_| data.to_path_buf());
        let mut buckets = BUCKETS.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets
            .get_or_insert_with(HashMap::new)
            .entry(key)
            .or_insert_with(|| Box::leak(Box::new(ferry_media::testing::S3Bucket::create())));
        bucket.configure(&mut config.media);
        config
    }

    /// The metadata database of the test site at `data`, opened beside the site (as
    /// another process would), to change it behind the site's back.
    pub fn metadata_db(data: &Path) -> ferry_sql::Db {
        let config = config(data);
        match &config.metadata.url {
            Some(url) => ferry_sql::Db::postgres(url, None),
            None => ferry_sql::Db::sqlite(
                &data
                    .join(crate::layout::SERVICE_DIR)
                    .join(crate::site::DB_FILE),
            ),
        }
        .expect("the test site's metadata database")
    }

    /// `config` with the metadata on the engine of the run.
    pub fn metadata(data: &Path, mut config: Config) -> Config {
        match std::env::var(ENGINE_VARIABLE).as_deref() {
            Ok("postgres") => {
                static DATABASES: Mutex<Option<HashMap<PathBuf, String>>> = Mutex::new(None);
                let key = std::path::absolute(data).unwrap_or_else(|_| data.to_path_buf());
                let mut databases = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
                let url = databases
                    .get_or_insert_with(HashMap::new)
                    .entry(key)
                    .or_insert_with(|| {
                        // Kept for the whole run: the server is a throwaway one.
                        let db =
                            Box::leak(Box::new(ferry_sql::testing::PostgresDatabase::create()));
                        db.url().to_owned()
                    });
                config.metadata.url = Some(url.clone());
            }
            Ok("sqlite") | Err(_) => {}
            Ok(other) => panic!("{ENGINE_VARIABLE}={other:?}: say postgres or sqlite"),
        }
        config
    }
}
