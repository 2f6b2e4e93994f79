//! Loading: `ferry.toml` overlaid with `FERRY_<SECTION>__<KEY>` variables.
//!
//! Both sources are merged into one TOML table and deserialized once, so a value
//! set in the environment is checked exactly like the same value in the file.

use std::path::Path;

use crate::{Config, ConfigError};

/// Prefix of the environment variables that override `ferry.toml`.
const ENV_PREFIX: &str = "FERRY_";
/// Separator between section and key in an override variable's name.
const ENV_SEPARATOR: &str = "__";

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

    /// A configuration from the TOML text [`Config::to_effective_toml`] wrote, with no
    /// environment overlaid: how a process started by the service (a herd worker's
    /// supervisor) takes the service's effective configuration as it is.
    pub fn from_effective_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::File {
            path: "(the effective configuration)".into(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// The effective configuration whole, secrets included, for a process the service
    /// starts and hands it to over a private channel (a herd supervisor's launch, on a
    /// pipe): read back with [`Config::from_effective_toml`]. Never for printing: see
    /// [`Config::to_toml_string`].
    pub fn to_effective_toml(&self) -> String {
        toml::to_string_pretty(self)
            .expect("Config holds only strings, u32/u64 below i64::MAX, lists and tables")
    }

    /// The effective configuration as pretty TOML, for `ferry serve --print-config`.
    pub fn to_toml_string(&self) -> String {
        // Printed configurations end up in tickets and chats: a password or a key written
        // into the upstream's URL stays out, as the API key of `api_key_env` does.
        let mut shown = self.clone();
        if let Some(upstream) = &mut shown.agent.upstream {
            *upstream = without_secrets(upstream);
        }
        if let Some(url) = &mut shown.metadata.url {
            *url = without_secrets(url);
        }
        for secret in [
            &mut shown.metadata.password,
            &mut shown.media.access_key_id,
            &mut shown.media.secret_access_key,
        ] {
            if secret.is_some() {
                *secret = Some("REDACTED".to_owned());
            }
        }
        if let Some(endpoint) = &mut shown.media.endpoint {
            *endpoint = without_secrets(endpoint);
        }
        let body = toml::to_string_pretty(&shown)
            .expect("Config holds only strings, u32/u64 below i64::MAX, lists and tables");
        format!(
            "# Effective ferry configuration (ferry.toml overlaid with FERRY_<SECTION>__<KEY>).\n{body}"
        )
    }
}

/// `url` with the password of its user part and its whole query replaced by `REDACTED`.
/// The user part ends at the last `@`: a lenient parser (PostgreSQL's) takes `/`, `?`
/// and `#` in a password, so they cannot be trusted to end it.
fn without_secrets(url: &str) -> String {
    const REDACTED: &str = "REDACTED";
    let redact_query = |rest: &str| match rest.split_once('?') {
        Some((before, _)) => format!("{before}?{REDACTED}"),
        None => rest.to_owned(),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return redact_query(url);
    };
    match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let end = userinfo
                .find([':', '/', '?', '#'])
                .unwrap_or(userinfo.len());
            // A name alone may be a token (`http://tok@host`): its password slot is shown
            // redacted all the same.
            let name = &userinfo[..end];
            format!(
                "{scheme}://{name}:{REDACTED}@{}",
                redact_query(&rest[at + 1..])
            )
        }
        None => format!("{scheme}://{}", redact_query(rest)),
    }
}

/// The environment variable that overrides `section.key`.
pub(crate) fn env_var_for(key: &str) -> String {
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

#[cfg(test)]
mod redaction_tests {
    use super::without_secrets;

    #[test]
    fn an_upstream_url_is_printed_without_its_secrets() {
        assert_eq!(
            without_secrets("http://user:pw@127.0.0.1:9/v1/chat?key=Q&x=1"),
            "http://user:REDACTED@127.0.0.1:9/v1/chat?REDACTED"
        );
        assert_eq!(
            without_secrets("https://api.example/v1/chat/completions"),
            "https://api.example/v1/chat/completions"
        );
        assert_eq!(without_secrets("http://tok@h/p"), "http://tok:REDACTED@h/p");
    }

    #[test]
    fn passwords_and_queries_never_show() {
        for (url, shown) in [
            (
                "postgres://ferry@db/ferry",
                "postgres://ferry:REDACTED@db/ferry",
            ),
            (
                "postgres://ferry:pw@db/ferry",
                "postgres://ferry:REDACTED@db/ferry",
            ),
            (
                "postgres://u:Zq9/Slash@h:5432/d",
                "postgres://u:REDACTED@h:5432/d",
            ),
            ("postgres://u:Sup3r?x=1@h/d", "postgres://u:REDACTED@h/d"),
            (
                "postgres://u:a@b@h/d?sslmode=require",
                "postgres://u:REDACTED@h/d?REDACTED",
            ),
            (
                "http://127.0.0.1:9000/v1?key=abc",
                "http://127.0.0.1:9000/v1?REDACTED",
            ),
        ] {
            assert_eq!(without_secrets(url), shown, "{url}");
            for secret in ["pw", "Zq9", "Slash", "Sup3r", "abc"] {
                assert!(!without_secrets(url).contains(secret), "{url}");
            }
        }
    }
}
