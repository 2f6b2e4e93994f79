//! How one person's commands run: plain settings that cross the worker's socket.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How commands run for this person.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunSettings {
    /// The `USER` and `LOGNAME` commands see.
    pub user: String,
    /// Where over-cap output is saved; the model reads it back with `file_read`.
    pub full_output_dir: PathBuf,
    /// Which sandbox a command runs in.
    pub sandbox: SandboxKind,
    /// Share the network with a sandboxed command.
    pub network: bool,
    /// Seconds saved output is kept.
    pub output_ttl_secs: u64,
    /// Bytes of saved output the person may keep in all.
    pub output_max_bytes: u64,
}

/// Which sandbox, if any (T-GUARD `[exec] sandbox`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SandboxKind {
    /// The strongest that works where the command runs ([`crate::strongest`]); with
    /// none, commands are refused.
    #[default]
    Auto,
    /// No sandbox: file ownership and modes alone limit the command.
    None,
    /// bubblewrap, which builds the command a view of only the person's folders.
    Bwrap,
    /// Landlock, the kernel's own rules for which folders a process may reach.
    Landlock,
}

impl SandboxKind {
    /// The name `[exec] sandbox` gives it.
    pub fn name(self) -> &'static str {
        match self {
            SandboxKind::Auto => "auto",
            SandboxKind::None => "none",
            SandboxKind::Bwrap => "bwrap",
            SandboxKind::Landlock => "landlock",
        }
    }
}
