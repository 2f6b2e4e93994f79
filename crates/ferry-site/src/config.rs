//! `ferry.toml` and its `FERRY_<SECTION>__<KEY>` environment overrides (core C-LIMIT).
//!
//! Both sources are merged into one TOML table and deserialized once, so a value
//! set in the environment is checked exactly like the same value in the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Largest file a member may upload, in bytes (10 MiB).
pub const MEDIA_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Largest file the harness may deliver, in bytes, counted after decoding (64 MiB).
pub const DELIVERY_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Longest a whole delivery fetch may take, in seconds.
pub const DELIVERY_TIMEOUT_SECS: u64 = 60;
/// Address the server listens on when none is configured: loopback only, so a bare start exposes nothing.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Seconds a request body may send nothing before it is cut off.
pub const BODY_IDLE_TIMEOUT_SECS: u64 = 30;
/// Average bytes per second a request body must sustain once the idle grace period is over.
pub const BODY_MIN_BYTES_PER_SEC: u64 = 1024;
/// Seconds a client has to send the request headers.
pub const HEADER_READ_TIMEOUT_SECS: u64 = 30;
/// Live event streams (`GET /v1/events`) one person may hold open at once.
pub const MAX_EVENT_STREAMS: u32 = 16;
/// Bytes one person may keep in `public/` folders (main and projects) plus saved
/// command output (10 GiB).
pub const PERSON_MAX_BYTES: u64 = 10 * 1024 * 1024 * 1024;
/// Hours saved command output (`fullOutputPath`) is kept.
pub const EXEC_OUTPUT_TTL_HOURS: u64 = 24;
/// Bytes of saved command output one person may keep at once (1 GiB).
pub const EXEC_OUTPUT_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// Bytes of one agent reply the chat relay relays and saves (1 MiB).
pub const AGENT_MAX_REPLY_BYTES: u64 = 1024 * 1024;
/// Bytes of saved conversation the chat relay sends upstream with a new message (4 MiB):
/// the newest messages that fit, as they are written in the request.
pub const AGENT_MAX_CONTEXT_BYTES: u64 = 4 * 1024 * 1024;

/// Prefix of the environment variables that override `ferry.toml`.
const ENV_PREFIX: &str = "FERRY_";
/// Separator between section and key in an override variable's name.
const ENV_SEPARATOR: &str = "__";

/// Why the configuration could not be loaded; each message names what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file given explicitly could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file that was given.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The config file is not valid TOML or does not match the schema.
    #[error("invalid config file {}: {message}", path.display())]
    File {
        /// The file that was given.
        path: PathBuf,
        /// The parser's explanation, with the offending line where known.
        message: String,
    },
    /// An override variable names an unknown section or key, or has a value of the wrong type.
    #[error("environment variable {var} (`{key}` in ferry.toml): {message}")]
    Env {
        /// The variable, e.g. `FERRY_MEDIA__MAX_UPLOAD_BYTES`.
        var: String,
        /// The TOML key it maps to, e.g. `media.max_upload_bytes`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// A value parsed but is not allowed.
    #[error("invalid setting `{key}` (env {var}): {message}")]
    Invalid {
        /// The TOML key, e.g. `media.max_upload_bytes`.
        key: &'static str,
        /// The environment variable that sets the same key.
        var: String,
        /// What the value must be.
        message: String,
    },
}

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
    /// Where host mode installs and finds `ferry-posix-helper` (default `host::DEFAULT_HELPER_PATH`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub helper_path: Option<PathBuf>,
}

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
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.to_owned(),
            body_idle_timeout_secs: BODY_IDLE_TIMEOUT_SECS,
            body_min_bytes_per_sec: BODY_MIN_BYTES_PER_SEC,
            header_read_timeout_secs: HEADER_READ_TIMEOUT_SECS,
            max_event_streams: MAX_EVENT_STREAMS,
        }
    }
}

/// The `[media]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MediaConfig {
    /// Largest upload, in bytes of file content.
    pub max_upload_bytes: u64,
    /// Extensions a member may upload: lower-case, without the dot.
    pub allowed_extensions: Vec<String>,
}

/// Extensions accepted for member uploads unless configured otherwise (M-UP).
pub const DEFAULT_ALLOWED_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "webp", "gif", "pdf", "txt", "md", "csv", "json", "doc", "docx", "odt",
    "xls", "xlsx", "ods", "ppt", "pptx", "odp",
];

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            max_upload_bytes: MEDIA_MAX_BYTES,
            allowed_extensions: DEFAULT_ALLOWED_EXTENSIONS
                .iter()
                .map(|e| (*e).to_owned())
                .collect(),
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

/// Seconds one chat turn may take, upstream reply included.
pub const CHAT_TURN_TIMEOUT_SECS: u64 = 300;

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
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            upstream: None,
            model: "ferry-agent".to_owned(),
            timeout_secs: CHAT_TURN_TIMEOUT_SECS,
            max_reply_bytes: AGENT_MAX_REPLY_BYTES,
            max_context_bytes: AGENT_MAX_CONTEXT_BYTES,
        }
    }
}

/// Every tool ferry offers, in the order `tools/list` shows them.
pub const TOOL_NAMES: [&str; 11] = [
    "file_read",
    "file_write",
    "file_edit",
    "file_preview",
    "file_delete",
    "file_deliver",
    "image_read",
    "terminal_run",
    "dir_list",
    "skill_search",
    "file_pick",
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
    #[default]
    Ask,
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
    Bwrap,
    Landlock,
}

/// The `[limits]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Bytes one person may keep in their `public/` folders plus saved command output;
    /// a write past it is `507 quota_exceeded` and leaves nothing.
    pub person_max_bytes: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            person_max_bytes: PERSON_MAX_BYTES,
        }
    }
}

/// The environment variable that overrides `section.key`.
fn env_var_for(key: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        key.replacen('.', ENV_SEPARATOR, 1).to_ascii_uppercase()
    )
}

/// Splits `FERRY_SECTION__KEY` into lower-case `(section, key)`; `None` for other FERRY_ variables.
fn split_env_name(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(ENV_PREFIX)?;
    let (section, key) = rest.split_once(ENV_SEPARATOR)?;
    let well_formed = |s: &str| {
        !s.is_empty()
            && !s.starts_with('_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !well_formed(section) || !well_formed(key) {
        return None;
    }
    Some((section.to_ascii_lowercase(), key.to_ascii_lowercase()))
}

/// `table` with `section.key = value` set, creating the section if the file had none.
fn overlaid(table: &toml::Table, section: &str, key: &str, value: toml::Value) -> toml::Table {
    let mut table = table.clone();
    let entry = table
        .entry(section.to_owned())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    match entry {
        toml::Value::Table(t) => {
            t.insert(key.to_owned(), value);
        }
        // Only reachable if a section was given a scalar, which deserialization then reports.
        other => *other = toml::Value::Table(toml::Table::from_iter([(key.to_owned(), value)])),
    }
    table
}

fn deserialize(table: toml::Table) -> Result<Config, toml::de::Error> {
    toml::Value::Table(table).try_into()
}

impl Config {
    /// Reads `file` (if given), overlays `FERRY_<SECTION>__<KEY>` variables from `env`, and validates.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut table = match file {
            Some(path) => Self::read_file(path)?,
            None => toml::Table::new(),
        };

        // Sorted so that the outcome never depends on the order the OS lists variables in.
        let mut overrides: Vec<(String, String, String, String)> = env
            .into_iter()
            .filter_map(|(name, value)| {
                split_env_name(&name).map(|(section, key)| (name, section, key, value))
            })
            .collect();
        overrides.sort();

        for (var, section, key, raw) in overrides {
            table = Self::apply_env(&table, &var, &section, &key, &raw)?;
        }

        // The table was checked after every step, so this cannot fail; map it anyway rather than panic.
        let config = deserialize(table).map_err(|e| ConfigError::File {
            path: file.map(Path::to_path_buf).unwrap_or_default(),
            message: e.message().to_owned(),
        })?;
        config.validate()?;
        Ok(config)
    }

    fn read_file(path: &Path) -> Result<toml::Table, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let file_error = |e: toml::de::Error| ConfigError::File {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_owned(),
        };
        let table: toml::Table = toml::from_str(&text).map_err(file_error)?;
        // Checked from the text, not the table, so schema errors point at the offending line.
        toml::from_str::<Config>(&text).map_err(file_error)?;
        Ok(table)
    }

    /// Overlays one variable, checking the result so an error names that variable.
    fn apply_env(
        table: &toml::Table,
        var: &str,
        section: &str,
        key: &str,
        raw: &str,
    ) -> Result<toml::Table, ConfigError> {
        let as_string = toml::Value::String(raw.to_owned());
        let typed = raw
            .parse::<toml::Value>()
            .unwrap_or_else(|_| as_string.clone());
        let candidate = overlaid(table, section, key, typed.clone());
        let first_error = match deserialize(candidate.clone()) {
            Ok(_) => return Ok(candidate),
            Err(e) => e,
        };
        // A string setting whose value happens to look like a number (a port, say) is still meant as text.
        if !typed.is_str() {
            let candidate = overlaid(table, section, key, as_string);
            if deserialize(candidate.clone()).is_ok() {
                return Ok(candidate);
            }
        }
        Err(ConfigError::Env {
            var: var.to_owned(),
            key: format!("{section}.{key}"),
            message: first_error.message().to_owned(),
        })
    }

    /// Checks the limits and the mode's requirements that the types alone cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, message: &str| ConfigError::Invalid {
            key,
            var: env_var_for(key),
            message: message.to_owned(),
        };
        if self.server.listen.trim().is_empty() {
            return Err(invalid("server.listen", "must be a host:port address"));
        }
        if self.server.body_idle_timeout_secs == 0 {
            return Err(invalid(
                "server.body_idle_timeout_secs",
                "must be greater than 0, or every upload is cut off",
            ));
        }
        if self.server.header_read_timeout_secs == 0 {
            return Err(invalid(
                "server.header_read_timeout_secs",
                "must be greater than 0, or every request is cut off",
            ));
        }
        if let Some(upstream) = &self.agent.upstream
            && !(upstream.starts_with("http://") || upstream.starts_with("https://"))
        {
            return Err(invalid(
                "agent.upstream",
                "must be an http:// or https:// URL of a chat completions endpoint",
            ));
        }
        if let Some(unknown) = self
            .tools
            .enabled
            .iter()
            .find(|name| !TOOL_NAMES.contains(&name.as_str()))
        {
            return Err(invalid(
                "tools.enabled",
                &format!(
                    "names no tool `{unknown}`; the tools are {}",
                    TOOL_NAMES.join(", ")
                ),
            ));
        }
        if self.agent.timeout_secs == 0 {
            return Err(invalid("agent.timeout_secs", "must be greater than 0"));
        }
        if self.agent.max_reply_bytes == 0 {
            return Err(invalid("agent.max_reply_bytes", "must be greater than 0"));
        }
        if self.agent.max_context_bytes == 0 {
            return Err(invalid(
                "agent.max_context_bytes",
                "must be greater than 0, or the agent never sees the conversation",
            ));
        }
        if self.server.max_event_streams == 0 {
            return Err(invalid(
                "server.max_event_streams",
                "must be greater than 0, or no page gets live updates",
            ));
        }
        if self.exec.output_ttl_hours == 0 {
            return Err(invalid("exec.output_ttl_hours", "must be greater than 0"));
        }
        if self.limits.person_max_bytes == 0 {
            return Err(invalid("limits.person_max_bytes", "must be greater than 0"));
        }
        if self.media.max_upload_bytes == 0 {
            return Err(invalid("media.max_upload_bytes", "must be greater than 0"));
        }
        if self.media.allowed_extensions.is_empty() {
            return Err(invalid(
                "media.allowed_extensions",
                "must list at least one extension, or no upload can succeed",
            ));
        }
        for ext in &self.media.allowed_extensions {
            let ok = !ext.is_empty()
                && !ext.contains('.')
                && ext.chars().all(|c| !c.is_uppercase() && !c.is_whitespace());
            if !ok {
                return Err(invalid(
                    "media.allowed_extensions",
                    &format!(
                        "{ext:?} must be a non-empty lower-case extension without the dot, like \"pdf\""
                    ),
                ));
            }
        }
        if self.deliveries.max_bytes == 0 {
            return Err(invalid("deliveries.max_bytes", "must be greater than 0"));
        }
        if self.deliveries.timeout_secs == 0 {
            return Err(invalid("deliveries.timeout_secs", "must be greater than 0"));
        }
        if self.site.mode == SiteMode::Container {
            if self.site.agent_uid.is_none() {
                return Err(invalid(
                    "site.agent_uid",
                    "is required when site.mode = \"container\", so written files can be chowned to the agent",
                ));
            }
            if self.site.agent_gid.is_none() {
                return Err(invalid(
                    "site.agent_gid",
                    "is required when site.mode = \"container\", so written files can be chowned to the agent",
                ));
            }
        }
        Ok(())
    }

    /// The uid:gid that files written for `person`'s agent are chowned to; `None` outside container mode.
    pub fn agent_ids(&self, person: &str) -> Option<(u32, u32)> {
        if self.site.mode != SiteMode::Container {
            return None;
        }
        if let Some(ids) = self.site.agents.get(person) {
            return Some((ids.uid, ids.gid));
        }
        Some((self.site.agent_uid?, self.site.agent_gid?))
    }

    /// The effective configuration as pretty TOML, for `ferry serve --print-config`.
    pub fn to_toml_string(&self) -> String {
        let body = toml::to_string_pretty(self)
            .expect("Config holds only strings, u32/u64 below i64::MAX, lists and tables");
        format!(
            "# Effective ferry configuration (ferry.toml overlaid with FERRY_<SECTION>__<KEY>).\n{body}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn config_defaults() {
        let c = Config::load(None, env(&[])).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.site.mode, SiteMode::Local);
        assert_eq!(c.server.listen, "127.0.0.1:8080");
        assert_eq!(c.server.body_idle_timeout_secs, 30);
        assert_eq!(c.server.body_min_bytes_per_sec, 1024);
        assert_eq!(c.server.header_read_timeout_secs, 30);
        assert_eq!(c.media.max_upload_bytes, 10 * 1024 * 1024);
        assert_eq!(c.media.allowed_extensions.len(), 19);
        assert!(c.media.allowed_extensions.iter().any(|e| e == "pptx"));
        assert_eq!(c.deliveries.max_bytes, 64 * 1024 * 1024);
        assert_eq!(c.deliveries.timeout_secs, 60);
        assert_eq!(c.server.max_event_streams, 16);
        assert_eq!(c.agent.max_reply_bytes, 1024 * 1024);
        assert_eq!(c.agent.max_context_bytes, 4 * 1024 * 1024);
        assert_eq!(c.exec.sandbox, SandboxChoice::Auto);
        assert_eq!(c.exec.output_ttl_hours, 24);
        assert_eq!(c.limits.person_max_bytes, 10 * 1024 * 1024 * 1024);
        assert_eq!(c.agent_ids("alice"), None);
    }

    #[test]
    fn config_file_parsing() {
        let f = file(
            r#"
[site]
mode = "container"
agent_uid = 1000
agent_gid = 1001
[site.agents.bob]
uid = 2000
gid = 2001

[server]
listen = "0.0.0.0:9000"

[media]
max_upload_bytes = 4096
allowed_extensions = ["txt"]
"#,
        );
        let c = Config::load(Some(f.path()), env(&[])).unwrap();
        assert_eq!(c.site.mode, SiteMode::Container);
        assert_eq!(c.server.listen, "0.0.0.0:9000");
        assert_eq!(c.server.header_read_timeout_secs, 30);
        assert_eq!(c.media.max_upload_bytes, 4096);
        assert_eq!(c.media.allowed_extensions, vec!["txt".to_owned()]);
        assert_eq!(c.deliveries, DeliveriesConfig::default());
        assert_eq!(c.agent_ids("alice"), Some((1000, 1001)));
        assert_eq!(c.agent_ids("bob"), Some((2000, 2001)));
    }

    #[test]
    fn config_missing_explicit_file_is_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.toml");
        let err = Config::load(Some(&path), env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err}");
        assert!(err.to_string().contains("nope.toml"), "{err}");
    }

    #[test]
    fn config_env_overrides_file() {
        let f = file("[media]\nmax_upload_bytes = 4096\n[server]\nlisten = \"0.0.0.0:1\"\n");
        let c = Config::load(
            Some(f.path()),
            env(&[
                ("FERRY_MEDIA__MAX_UPLOAD_BYTES", "2048"),
                ("FERRY_SERVER__LISTEN", "[::1]:7000"),
            ]),
        )
        .unwrap();
        assert_eq!(c.media.max_upload_bytes, 2048);
        assert_eq!(c.server.listen, "[::1]:7000");
    }

    #[test]
    fn config_env_arrays_numbers_and_enums() {
        let c = Config::load(
            None,
            env(&[
                ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"["txt","pdf"]"#),
                ("FERRY_DELIVERIES__TIMEOUT_SECS", "5"),
                ("FERRY_SITE__MODE", "container"),
                ("FERRY_SITE__AGENT_UID", "10"),
                ("FERRY_SITE__AGENT_GID", "11"),
                ("FERRY_SITE__AGENTS", "{ carol = { uid = 12, gid = 13 } }"),
            ]),
        )
        .unwrap();
        assert_eq!(c.media.allowed_extensions, vec!["txt", "pdf"]);
        assert_eq!(c.deliveries.timeout_secs, 5);
        assert_eq!(c.site.mode, SiteMode::Container);
        assert_eq!(c.agent_ids("dave"), Some((10, 11)));
        assert_eq!(c.agent_ids("carol"), Some((12, 13)));
    }

    #[test]
    fn config_env_number_like_string_stays_a_string() {
        let c = Config::load(None, env(&[("FERRY_SERVER__LISTEN", "8080")])).unwrap();
        assert_eq!(c.server.listen, "8080");
    }

    #[test]
    fn config_env_wrong_type_names_variable() {
        let err =
            Config::load(None, env(&[("FERRY_MEDIA__MAX_UPLOAD_BYTES", "lots")])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("FERRY_MEDIA__MAX_UPLOAD_BYTES"), "{msg}");
        assert!(msg.contains("media.max_upload_bytes"), "{msg}");
    }

    #[test]
    fn config_unknown_file_key_is_error() {
        let f = file("[media]\nmax_upload_byte = 1\n");
        let err = Config::load(Some(f.path()), env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::File { .. }), "{err}");
        assert!(err.to_string().contains("max_upload_byte"), "{err}");

        let f = file("[medias]\nmax_upload_bytes = 1\n");
        let err = Config::load(Some(f.path()), env(&[])).unwrap_err();
        assert!(err.to_string().contains("medias"), "{err}");
    }

    #[test]
    fn config_unknown_env_key_is_error() {
        let err = Config::load(None, env(&[("FERRY_MEDIA__MAX_UPLOAD", "1")])).unwrap_err();
        assert!(matches!(err, ConfigError::Env { .. }), "{err}");
        assert!(err.to_string().contains("FERRY_MEDIA__MAX_UPLOAD"), "{err}");

        let err = Config::load(None, env(&[("FERRY_MEDIUM__MAX_UPLOAD_BYTES", "1")])).unwrap_err();
        assert!(
            err.to_string().contains("FERRY_MEDIUM__MAX_UPLOAD_BYTES"),
            "{err}"
        );
    }

    #[test]
    fn config_non_override_ferry_vars_ignored() {
        let c = Config::load(
            None,
            env(&[
                ("FERRY_DATA", "/var/lib/ferry"),
                ("FERRY_CONFIG", "/etc/ferry.toml"),
                ("FERRY___X", "1"),
                ("PATH", "/bin"),
            ]),
        )
        .unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn config_container_requires_ids() {
        let err = Config::load(None, env(&[("FERRY_SITE__MODE", "container")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    key: "site.agent_uid",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("FERRY_SITE__AGENT_UID"), "{err}");

        let err = Config::load(
            None,
            env(&[
                ("FERRY_SITE__MODE", "container"),
                ("FERRY_SITE__AGENT_UID", "1"),
            ]),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    key: "site.agent_gid",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn config_validation_limits() {
        for (var, value) in [
            ("FERRY_MEDIA__MAX_UPLOAD_BYTES", "0"),
            ("FERRY_DELIVERIES__MAX_BYTES", "0"),
            ("FERRY_DELIVERIES__TIMEOUT_SECS", "0"),
            ("FERRY_AGENT__MAX_CONTEXT_BYTES", "0"),
            ("FERRY_MEDIA__ALLOWED_EXTENSIONS", "[]"),
            ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"["PDF"]"#),
            ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"[".pdf"]"#),
            ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"[""]"#),
        ] {
            let err = Config::load(None, env(&[(var, value)])).unwrap_err();
            assert!(
                matches!(err, ConfigError::Invalid { .. }),
                "{var}={value}: {err}"
            );
            assert!(err.to_string().contains(var), "{err}");
        }
    }

    #[test]
    fn config_agent_ids_only_in_container_mode() {
        let mut c = Config::default();
        c.site.agent_uid = Some(1);
        c.site.agent_gid = Some(2);
        assert_eq!(c.agent_ids("a"), None);
        c.site.mode = SiteMode::Host;
        assert_eq!(c.agent_ids("a"), None);
        c.site.mode = SiteMode::Container;
        assert_eq!(c.agent_ids("a"), Some((1, 2)));
    }

    #[test]
    fn config_print_round_trips() {
        let mut c = Config::default();
        let printed = c.to_toml_string();
        assert_eq!(toml::from_str::<Config>(&printed).unwrap(), c);

        c.site.mode = SiteMode::Container;
        c.site.agent_uid = Some(1000);
        c.site.agent_gid = Some(1000);
        c.site
            .agents
            .insert("bob".into(), AgentIds { uid: 5, gid: 6 });
        c.server.listen = "0.0.0.0:80".into();
        c.media.allowed_extensions = vec!["txt".into()];
        let printed = c.to_toml_string();
        assert!(printed.contains("mode = \"container\""), "{printed}");
        let f = file(&printed);
        assert_eq!(Config::load(Some(f.path()), env(&[])).unwrap(), c);
    }
}
