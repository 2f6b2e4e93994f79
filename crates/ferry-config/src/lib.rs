//! ferry's configuration: `ferry.toml` and its `FERRY_<SECTION>__<KEY>` environment
//! overrides (core C-LIMIT), and every limit of ferry, named once in [`limits`].
//!
//! The crate depends on nothing of ferry's, so every other crate can ask it; it holds the
//! one compiler of node path globs ([`globs`]) so the configuration and the node link
//! agree on what a glob means.

mod error;
pub mod globs;
pub mod limits;
mod load;
mod nodes;
mod sections;
mod validate;

pub use error::ConfigError;
pub use nodes::{NodePolicyConfig, NodesConfig};
pub use sections::{
    AgentConfig, AgentIds, ApiKey, AuditConfig, Config, DEFAULT_HELPER_PATH, DeleteApproval,
    DeliveriesConfig, ExecConfig, FilesConfig, LimitsConfig, MediaBackend, MediaConfig,
    MetadataConfig, SandboxChoice, ServerConfig, SiteConfig, SiteMode, TOOL_NAMES, ToolsConfig,
};

#[cfg(test)]
mod nodes_tests;
#[cfg(test)]
mod tests;
