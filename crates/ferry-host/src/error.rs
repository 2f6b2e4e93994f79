//! Why host mode could not be set up.

use ferry_fs::FsError;
use ferry_site::SiteError;

use crate::accounts::TOOL_DIRS;

/// Why host mode could not be set up; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("host mode creates users and changes owners and must run as root (effective uid {0})")]
    NotRoot(u32),
    #[error(
        "`{0}` is needed to manage host-mode users and groups but was not found in {dirs}: install the `passwd` package",
        dirs = TOOL_DIRS.join(", ")
    )]
    ToolMissing(&'static str),
    #[error("`{command}` failed ({status}): {stderr}")]
    Tool {
        command: String,
        status: String,
        stderr: String,
    },
    /// Something exists that host mode would have to take over or break; fix it by hand.
    #[error("{0}")]
    Conflict(String),
    #[error("the user and group database: {0}")]
    Accounts(#[from] nix::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Site(#[from] SiteError),
}

impl From<FsError> for HostError {
    fn from(e: FsError) -> Self {
        HostError::Site(e.into())
    }
}

pub(crate) fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostError {
    let context = context.into();
    move |source| HostError::Io { context, source }
}

pub(crate) fn fs_error(rel: &str, e: rustix::io::Errno) -> HostError {
    HostError::Io {
        context: rel.to_owned(),
        source: e.into(),
    }
}
