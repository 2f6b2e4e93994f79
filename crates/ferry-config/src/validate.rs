//! The checks the types alone cannot express, and what is derived from the settings.

use std::path::PathBuf;

use crate::limits::{MAX_CONNECTIONS_CEILING, RATE_PER_MINUTE_MAX, SHUTDOWN_GRACE_MAX_SECS};
use crate::load::env_var_for;
use crate::sections::DEFAULT_HELPER_PATH;
use crate::{Config, ConfigError, MediaBackend, SiteMode, TOOL_NAMES};

impl Config {
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
        if !(1..=MAX_CONNECTIONS_CEILING).contains(&self.server.max_connections) {
            return Err(invalid(
                "server.max_connections",
                &format!("must be 1 to {MAX_CONNECTIONS_CEILING} (connections held at once)"),
            ));
        }
        if self.server.shutdown_grace_secs > SHUTDOWN_GRACE_MAX_SECS {
            return Err(invalid(
                "server.shutdown_grace_secs",
                &format!("must be at most {SHUTDOWN_GRACE_MAX_SECS} (an hour)"),
            ));
        }
        if !(1..=crate::limits::AUDIT_RETENTION_MAX_DAYS).contains(&self.audit.retention_days) {
            return Err(invalid(
                "audit.retention_days",
                &format!(
                    "must be 1 to {} (days an audit record is kept)",
                    crate::limits::AUDIT_RETENTION_MAX_DAYS
                ),
            ));
        }
        if let Some(url) = &self.metadata.url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            return Err(invalid(
                "metadata.url",
                "must be a postgres:// address (leave it out for SQLite in .ferry/)",
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
        for (key, rate) in [
            ("limits.uploads_per_minute", self.limits.uploads_per_minute),
            (
                "limits.deliveries_per_minute",
                self.limits.deliveries_per_minute,
            ),
            (
                "limits.tool_calls_per_minute",
                self.limits.tool_calls_per_minute,
            ),
        ] {
            if rate > RATE_PER_MINUTE_MAX {
                return Err(invalid(
                    key,
                    &format!("must be 0 (no limit) to {RATE_PER_MINUTE_MAX} a minute"),
                ));
            }
        }
        self.validate_media_backend()?;
        if self.media.max_upload_bytes == 0 {
            return Err(invalid("media.max_upload_bytes", "must be greater than 0"));
        }
        if self.media.resumable_expiry_secs == 0 {
            return Err(invalid(
                "media.resumable_expiry_secs",
                "must be greater than 0, or every resumable upload expires at once",
            ));
        }
        if !(1..=crate::limits::MEDIA_TTL_MAX_HOURS).contains(&self.media.ttl_hours) {
            return Err(invalid(
                "media.ttl_hours",
                &format!(
                    "must be 1 to {} (hours a fetched file is kept; 0 would drop it at once)",
                    crate::limits::MEDIA_TTL_MAX_HOURS
                ),
            ));
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
        if let Err((key, message)) = self.nodes.check() {
            return Err(invalid(key, &message));
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

    /// Where host mode's setuid helper is installed and run from: `[site] helper_path`,
    /// else [`DEFAULT_HELPER_PATH`].
    pub fn helper_path(&self) -> PathBuf {
        self.site
            .helper_path
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_HELPER_PATH))
    }
}

impl Config {
    /// `[media]`'s backend settings: an S3 store needs a bucket and both keys, and an
    /// endpoint or bucket given to the local store is a forgotten `backend = "s3"`.
    fn validate_media_backend(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, message: &str| ConfigError::Invalid {
            key,
            var: env_var_for(key),
            message: message.to_owned(),
        };
        let media = &self.media;
        if media.backend == MediaBackend::Local {
            for (key, value) in [
                ("media.endpoint", &media.endpoint),
                ("media.bucket", &media.bucket),
            ] {
                if value.is_some() {
                    return Err(invalid(
                        key,
                        "is for an S3 store; set media.backend = \"s3\" too, or leave it out",
                    ));
                }
            }
            return Ok(());
        }
        match &media.bucket {
            None => {
                return Err(invalid(
                    "media.bucket",
                    "is required with media.backend = \"s3\"",
                ));
            }
            Some(bucket) if !is_bucket_name(bucket) => {
                return Err(invalid(
                    "media.bucket",
                    "must be an S3 bucket name: 3 to 63 lower-case letters, digits, '-' and '.'",
                ));
            }
            Some(_) => {}
        }
        if let Some(endpoint) = &media.endpoint
            && !is_endpoint(endpoint)
        {
            return Err(invalid(
                "media.endpoint",
                "must be the S3 API's address alone, http(s)://host[:port] (no user, \
                 password, path, query or spaces; leave it out for AWS)",
            ));
        }
        if !is_header_word(&media.region) {
            return Err(invalid(
                "media.region",
                "must be a region name: letters, digits, '-', '_' and '.'",
            ));
        }
        for (key, value) in [
            ("media.access_key_id", &media.access_key_id),
            ("media.secret_access_key", &media.secret_access_key),
        ] {
            match value.as_deref() {
                None | Some("") => {
                    return Err(invalid(
                        key,
                        "is required with media.backend = \"s3\"; give it in the environment",
                    ));
                }
                // Signed into request headers: a space or control character there would
                // make every request fail, so it is told now.
                Some(key_text) if !key_text.bytes().all(|b| b.is_ascii_graphic()) => {
                    return Err(invalid(
                        key,
                        "holds a space or a control character; keys are printable ASCII",
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// S3's rules for a bucket name, so a typo is told at start rather than by the store.
fn is_bucket_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let looks_like_an_address =
        name.split('.').count() == 4 && name.split('.').all(|part| part.parse::<u8>().is_ok());
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && edge(name.chars().next())
        && edge(name.chars().last())
        && !name.contains("..")
        && !looks_like_an_address
}

/// An S3 endpoint: `http://` or `https://`, a host (a name, an IPv4 address or a
/// bracketed IPv6 one) and an optional port from 1 to 65535, and at most a trailing `/`.
/// Nothing the client would have to carry in every request (a user and password, a path
/// that would address another bucket, a query) and nothing it could not parse.
fn is_endpoint(endpoint: &str) -> bool {
    let Some(rest) = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((address, after)) => {
                if address.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                (address, after.strip_prefix(':'))
            }
            None => return false,
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let host_ok = !host.is_empty()
        && (authority.starts_with('[')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    host_ok && port_ok
}

/// A word fit for a signed header: letters, digits, `-`, `_` and `.`, not empty.
fn is_header_word(word: &str) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}
