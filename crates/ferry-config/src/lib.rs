//! ferry's configuration: `ferry.toml` and its `FERRY_<SECTION>__<KEY>` environment
//! overrides (core C-LIMIT), and every limit of ferry, named once in [`limits`].
//!
//! The crate depends on nothing of ferry's, so every other crate can ask it.

mod error;
pub mod limits;
mod load;
mod sections;
mod validate;

pub use error::ConfigError;
pub use sections::{
    AgentConfig, AgentIds, Config, DEFAULT_HELPER_PATH, DeleteApproval, DeliveriesConfig,
    ExecConfig, LimitsConfig, MediaConfig, SandboxChoice, ServerConfig, SiteConfig, SiteMode,
    TOOL_NAMES, ToolsConfig,
};

#[cfg(test)]
mod tests;
