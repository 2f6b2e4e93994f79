//! Why a configuration could not be loaded.

use std::path::PathBuf;

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
    /// `agent.api_key_env` names a variable that is not set (or is empty); holds its name.
    #[error(
        "agent.api_key_env names the environment variable {0}, which is not set: set it to \
         the upstream's API key, or remove agent.api_key_env"
    )]
    MissingApiKey(String),
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
