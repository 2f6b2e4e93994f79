//! Why host mode could not be set up.

use ferry_fs::FsError;
use ferry_site::SiteError;

use crate::accounts::TOOL_DIRS;

/// Why host mode could not be set up; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Run by someone other than root: the effective uid.
    #[error("host mode creates users and changes owners and must run as root (effective uid {0})")]
    NotRoot(u32),
    /// A shadow tool (`useradd`, …) is not installed.
    #[error(
        "`{0}` is needed to manage host-mode users and groups but was not found in {dirs}: install the `passwd` package",
        dirs = TOOL_DIRS.join(", ")
    )]
    ToolMissing(&'static str),
    /// A shadow tool ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Tool {
        /// The command line, as run.
        command: String,
        /// How it exited.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// Something exists that host mode would have to take over or break; fix it by hand.
    #[error("{0}")]
    Conflict(String),
    /// A folder of the layout is not as it must be, or could not be set up.
    #[error("{}: {why}", path.display())]
    Folder {
        /// The folder, beneath the data folder.
        path: std::path::PathBuf,
        /// What is wrong, and what to do.
        why: String,
    },
    /// The user or group database could not be read.
    #[error("the user and group database: {0}")]
    Accounts(#[from] nix::Error),
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the file.
        context: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The site could not be read or provisioned.
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
