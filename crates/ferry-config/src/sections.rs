//! The typed sections of `ferry.toml`, each with its defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::limits::{
    AGENT_MAX_CONTEXT_BYTES, AGENT_MAX_REPLY_BYTES, BODY_IDLE_TIMEOUT_SECS, BODY_MIN_BYTES_PER_SEC,
    CHAT_TURN_TIMEOUT_SECS, DEFAULT_ALLOWED_EXTENSIONS, DEFAULT_LISTEN, DELIVERY_MAX_BYTES,
    DELIVERY_TIMEOUT_SECS, EXEC_OUTPUT_MAX_BYTES, EXEC_OUTPUT_TTL_HOURS, HEADER_READ_TIMEOUT_SECS,
    MAX_CONNECTIONS, MAX_EVENT_STREAMS, MEDIA_MAX_BYTES, MEDIA_TTL_HOURS, PERSON_MAX_BYTES,
};
use crate::limits::{DELIVERIES_PER_MINUTE, TOOL_CALLS_PER_MINUTE, UPLOADS_PER_MINUTE};
use crate::limits::{
    FOLDER_ZIP_MAX_BYTES, MEDIA_RESUMABLE_EXPIRY_SECS, MEDIA_RESUMABLE_MAX_BYTES,
    SHUTDOWN_GRACE_SECS, TRASH_DAYS, TRASH_MAX_BYTES,
};

/// The whole effective configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How this site runs agents.
    pub site: SiteConfig,
    /// The HTTP listener.
    pub server: ServerConfig,
    /// Member uploads (M-UP).
    pub media: MediaConfig,
    /// The Files panel's everyday features: trash and folder downloads (M-DAILY).
    pub files: FilesConfig,
    /// Harness deliveries (M-DELIVER).
    pub deliveries: DeliveriesConfig,
    /// The upstream agent the chat relay talks to (M-CHAT).
    pub agent: AgentConfig,
    /// The agent tools (T-MCP, T-WS).
    pub tools: ToolsConfig,
    /// How commands run (T-GUARD).
    pub exec: ExecConfig,
    /// Per-person storage limits.
    pub limits: LimitsConfig,
    /// Nodes: the transfer caps and the gateway's policy per node (N-PAIR, N-TOOLS).
    pub nodes: crate::NodesConfig,
    /// Where the metadata lives: SQLite in `.ferry/` unless a PostgreSQL URL is given (S-META).
    pub metadata: MetadataConfig,
    /// The audit trail of file movements (S-OPS).
    pub audit: AuditConfig,
}

/// The `[audit]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Days an audit record is kept; then the sweep removes it. 1 to 36500.
    pub retention_days: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            retention_days: crate::limits::AUDIT_RETENTION_DAYS,
        }
    }
}

/// The `[metadata]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetadataConfig {
    /// `postgres://user@host/db`: the metadata moves to PostgreSQL; absent, SQLite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The PostgreSQL password, best given as `FERRY_METADATA__PASSWORD`; wins over one
    /// in the URL. Never printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// How ferry is deployed relative to the agents whose files it serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SiteMode {
    /// Agents run as the same user as ferry; files keep ferry's ownership.
    #[default]
    Local,
    /// Agents run in containers under another uid; written files are chowned to it.
    Container,
    /// Agents run directly on the host.
    Host,
}

/// The `[site]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SiteConfig {
    /// Deployment mode.
    pub mode: SiteMode,
    /// Uid that owns files written for agents in container mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_uid: Option<u32>,
    /// Gid that owns files written for agents in container mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_gid: Option<u32>,
    /// Per-person uid/gid, for containers that do not all share the site-wide ids.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, AgentIds>,
    /// Where host mode installs and finds `ferry-posix-helper` (default [`DEFAULT_HELPER_PATH`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub helper_path: Option<PathBuf>,
}

/// Where the helper is installed unless `[site] helper_path` says otherwise.
pub const DEFAULT_HELPER_PATH: &str = "/usr/local/lib/ferry/ferry-posix-helper";

/// A uid/gid pair owning one person's agent files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentIds {
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
}

/// The `[server]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// `host:port` to listen on.
    pub listen: String,
    /// Seconds a request body may send nothing before it is cut off.
    pub body_idle_timeout_secs: u64,
    /// Average bytes per second a body must sustain after the idle grace period; 0 disables the floor.
    pub body_min_bytes_per_sec: u64,
    /// Seconds a client has to send the request headers.
    pub header_read_timeout_secs: u64,
    /// Live event streams one person may hold open; more are `429`.
    pub max_event_streams: u32,
    /// Client connections held open at once; one more is `503 too_many_connections`.
    pub max_connections: usize,
    /// Seconds a stopping gateway (SIGTERM, Ctrl-C) lets requests in flight finish.
    pub shutdown_grace_secs: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.to_owned(),
            body_idle_timeout_secs: BODY_IDLE_TIMEOUT_SECS,
            body_min_bytes_per_sec: BODY_MIN_BYTES_PER_SEC,
            header_read_timeout_secs: HEADER_READ_TIMEOUT_SECS,
            max_event_streams: MAX_EVENT_STREAMS,
            max_connections: MAX_CONNECTIONS,
            shutdown_grace_secs: SHUTDOWN_GRACE_SECS,
        }
    }
}

/// The region S3 requests are signed for when `[media] region` is not set.
pub const DEFAULT_S3_REGION: &str = "us-east-1";

/// The `[media]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MediaConfig {
    /// Largest upload, in bytes of file content.
    pub max_upload_bytes: u64,
    /// Extensions a member may upload: lower-case, without the dot.
    pub allowed_extensions: Vec<String>,
    /// Hours a media store record is kept before the sweeper removes it.
    pub ttl_hours: u64,
    /// Largest file a resumable (tus) upload may declare, in bytes.
    pub max_resumable_bytes: u64,
    /// Seconds a resumable upload is kept after its last part.
    pub resumable_expiry_secs: u64,
    /// Where blobs are kept: `.ferry/media/` (`local`) or an S3 bucket (`s3`).
    pub backend: MediaBackend,
    /// The S3 endpoint, `http(s)://host:port` (absent: AWS itself, by region).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The S3 bucket (required with `backend = "s3"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// The S3 region the requests are signed for.
    pub region: String,
    /// The S3 access key id, best given as `FERRY_MEDIA__ACCESS_KEY_ID`. Never printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    /// The S3 secret key, best given as `FERRY_MEDIA__SECRET_ACCESS_KEY`. Never printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
}

/// Where the media store keeps its blobs (spec core C-MEDIA, scale S-STORE).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediaBackend {
    /// `.ferry/media/` in the data folder.
    #[default]
    Local,
    /// An S3-compatible bucket.
    S3,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            max_upload_bytes: MEDIA_MAX_BYTES,
            allowed_extensions: DEFAULT_ALLOWED_EXTENSIONS
                .iter()
                .map(|e| (*e).to_owned())
                .collect(),
            ttl_hours: MEDIA_TTL_HOURS,
            max_resumable_bytes: MEDIA_RESUMABLE_MAX_BYTES,
            resumable_expiry_secs: MEDIA_RESUMABLE_EXPIRY_SECS,
            backend: MediaBackend::Local,
            endpoint: None,
            bucket: None,
            region: DEFAULT_S3_REGION.to_owned(),
            access_key_id: None,
            secret_access_key: None,
        }
    }
}

/// The `[files]` section: the trash and folder downloads (M-DAILY).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilesConfig {
    /// Days a deleted entry is kept in its person's trash.
    pub trash_days: u64,
    /// Bytes one person's trash may hold.
    pub trash_max_bytes: u64,
    /// Bytes of file content one folder download may carry.
    pub archive_max_bytes: u64,
}

impl Default for FilesConfig {
    fn default() -> Self {
        Self {
            trash_days: TRASH_DAYS,
            trash_max_bytes: TRASH_MAX_BYTES,
            archive_max_bytes: FOLDER_ZIP_MAX_BYTES,
        }
    }
}

/// The `[deliveries]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveriesConfig {
    /// Largest delivery, in decoded bytes.
    pub max_bytes: u64,
    /// Seconds allowed for the whole fetch.
    pub timeout_secs: u64,
}

impl Default for DeliveriesConfig {
    fn default() -> Self {
        Self {
            max_bytes: DELIVERY_MAX_BYTES,
            timeout_secs: DELIVERY_TIMEOUT_SECS,
        }
    }
}

/// The `[agent]` section: where the chat relay sends a member's messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// An OpenAI-compatible streaming endpoint, e.g. `http://127.0.0.1:9000/v1/chat/completions`.
    /// Unset: `POST /v1/chat` answers `503 no_agent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The `model` named in each upstream request.
    pub model: String,
    /// Seconds one turn may take: a hard deadline, the upstream request is cancelled then.
    pub timeout_secs: u64,
    /// Bytes of one reply relayed and saved; the rest is cut, and the reply says so.
    pub max_reply_bytes: u64,
    /// Bytes of saved conversation sent upstream with each new message: the newest whole
    /// messages that fit; older ones are left out.
    pub max_context_bytes: u64,
    /// The environment variable whose value is sent upstream as a bearer token, so hosted
    /// OpenAI-compatible endpoints work; the token itself never sits in `ferry.toml`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            upstream: None,
            model: "ferry-agent".to_owned(),
            timeout_secs: CHAT_TURN_TIMEOUT_SECS,
            max_reply_bytes: AGENT_MAX_REPLY_BYTES,
            max_context_bytes: AGENT_MAX_CONTEXT_BYTES,
            api_key_env: None,
        }
    }
}

impl AgentConfig {
    /// The API key sent upstream as the bearer token: the value of the variable
    /// `api_key_env` names; none when no variable is named. A named variable that is
    /// unset or empty is an error, so a mistyped name fails at start, not at the first
    /// message.
    pub fn api_key(&self) -> Result<Option<ApiKey>, crate::ConfigError> {
        let Some(var) = &self.api_key_env else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => Ok(Some(ApiKey(value.trim().to_owned()))),
            _ => Err(crate::ConfigError::MissingApiKey(var.clone())),
        }
    }
}

/// The upstream's API key: shown as `ApiKey(…)` by `Debug`, so it cannot reach a log.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key itself, for the `Authorization` header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(…)")
    }
}

/// Every tool ferry offers, in the order `tools/list` shows them.
pub const TOOL_NAMES: [&str; 15] = [
    "file_read",
    "file_write",
    "file_edit",
    "file_preview",
    "file_delete",
    "file_deliver",
    "image_read",
    "terminal_run",
    "dir_list",
    "file_fetch",
    "file_push",
    "dir_fetch",
    "skill_search",
    "file_pick",
    "subagent",
];

/// The `[tools]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// The tools that exist; a tool not named here is neither listed nor callable.
    pub enabled: Vec<String>,
    /// `"ask"`: `file_delete` needs the person's approval; `"auto"`: it does not.
    pub delete_approval: DeleteApproval,
    /// Origins a browser may call `/mcp` from; the gateway's own origin is always allowed.
    pub allowed_origins: Vec<String>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            enabled: TOOL_NAMES.iter().map(|name| (*name).to_owned()).collect(),
            delete_approval: DeleteApproval::Ask,
            allowed_origins: Vec::new(),
        }
    }
}

/// Whether deleting a file needs the person's approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeleteApproval {
    /// The person is asked, in the web client or through the MCP client.
    #[default]
    Ask,
    /// Deletions go ahead without asking.
    Auto,
}

/// The `[exec]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecConfig {
    /// `"auto"` (the strongest the machine has), `"landlock"`, `"bwrap"` or `"none"`.
    pub sandbox: SandboxChoice,
    /// Whether sandboxed commands may use the network.
    pub network: bool,
    /// Hours saved command output is kept before it is removed.
    pub output_ttl_hours: u64,
    /// Bytes of saved command output one person may keep; the oldest goes first.
    pub output_max_bytes: u64,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            sandbox: SandboxChoice::Auto,
            network: false,
            output_ttl_hours: EXEC_OUTPUT_TTL_HOURS,
            output_max_bytes: EXEC_OUTPUT_MAX_BYTES,
        }
    }
}

/// Which sandbox commands run in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxChoice {
    /// Landlock where the kernel has it, else bubblewrap; with neither, commands are
    /// refused (the opt-out is an explicit `"none"`).
    #[default]
    Auto,
    /// No confinement beyond the person's own permissions: in local mode the agent then
    /// has the service's authority.
    None,
    /// Bubblewrap (`exec.sandbox = "bwrap"`); refused where it cannot run.
    Bwrap,
    /// Landlock rules set by the command's own process; refused where the kernel lacks them.
    Landlock,
}

/// The `[limits]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Bytes one person may keep in their `public/` folders plus saved command output;
    /// a write past it is `507 quota_exceeded` and leaves nothing.
    pub person_max_bytes: u64,
    /// Uploads (`POST /v1/media`, `POST /v1/uploads`) one person may start a minute, all
    /// their tokens together; one more is `429 rate_limited`. 0: no limit.
    pub uploads_per_minute: u32,
    /// Deliveries (`POST /v1/deliveries`, `file_deliver`) one person may make a minute;
    /// one more is `429 rate_limited`. 0: no limit.
    pub deliveries_per_minute: u32,
    /// MCP tool calls at `/mcp` one person may make a minute; one more is a tool error
    /// `rate_limited`. 0: no limit.
    pub tool_calls_per_minute: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            person_max_bytes: PERSON_MAX_BYTES,
            uploads_per_minute: UPLOADS_PER_MINUTE,
            deliveries_per_minute: DELIVERIES_PER_MINUTE,
            tool_calls_per_minute: TOOL_CALLS_PER_MINUTE,
        }
    }
}
