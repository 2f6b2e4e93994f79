//! The documents ferry ships to agents, built into the binary.

/// The file-delivery rules for agents: provisioned read-only into every
/// workspace as `memory/FILE_DELIVERY.md` and served as the MCP server's
/// instructions.
pub const FILE_DELIVERY_MD: &str = include_str!("../../../docs/agent/FILE_DELIVERY.md");
/// The name the delivery rules are provisioned under in a workspace's `memory/`.
pub const FILE_DELIVERY_FILE: &str = "FILE_DELIVERY.md";
