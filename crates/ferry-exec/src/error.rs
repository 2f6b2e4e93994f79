use std::path::PathBuf;

use ferry_codes::Code;
use ferry_fs::FsError;

/// Why a command was not run, or could not be watched to its end.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("commands are never run while the service is effectively root; run it as its own user")]
    RefusedAsRoot,
    #[error("the timeout must be more than zero seconds (at most 600)")]
    InvalidTimeout,
    #[error("the command contains a NUL byte")]
    InvalidCommand,
    #[error("the workspace folder {path} cannot be opened: {source}")]
    RootUnavailable { path: PathBuf, source: FsError },
    #[error(
        "the folder {path} is a symbolic link or lies under one; links are never followed at \
         the root of a workspace folder, so nothing in it can be used until the operator \
         replaces the link with a real folder"
    )]
    RootIsLink { path: PathBuf },
    #[error(
        "the working folder {path} is outside the workspace; use a folder inside it, without `..`"
    )]
    CwdOutside { path: PathBuf },
    #[error("the working folder {path} does not exist; create it first or pick another")]
    CwdNotFound { path: PathBuf },
    #[error("the working folder {path} cannot be used: {source}")]
    CwdUnusable { path: PathBuf, source: FsError },
    #[error(
        "the working folder {path} is not visible inside the sandbox; use a folder in a bound tree"
    )]
    CwdNotInSandbox { path: PathBuf },
    #[error(
        "the sandbox is required but {what} (looked at {path}); commands are not run without it"
    )]
    SandboxUnavailable { what: &'static str, path: PathBuf },
    /// `auto` found no sandbox that works here; each field says why one does not.
    #[error(
        "no sandbox works on this machine ({landlock}; {bwrap}), and commands are not run \
         unconfined unless the operator says so: install bubblewrap where user namespaces \
         are allowed, or run a kernel with Landlock ABI 6 or later, or set \
         `[exec] sandbox = \"none\"` to run them unconfined (in local mode: with the \
         service's own authority)"
    )]
    NoSandbox { landlock: String, bwrap: String },
    #[error("the sandbox path {path} cannot be bound: {source}")]
    SandboxBind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the output folder {path} cannot be prepared: {source}")]
    OutputDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the command could not be started: {0}")]
    Spawn(std::io::Error),
    #[error("watching the command failed: {0}")]
    Io(std::io::Error),
    #[error(
        "the process that watches the command was stopped or killed, from inside the command \
         it seems; what the command started may still be running and its output is lost"
    )]
    Unwatched,
}

impl ExecError {
    /// The code this failure is answered with, over HTTP and MCP alike.
    pub fn code(&self) -> Code {
        match self {
            ExecError::RefusedAsRoot => Code::RefusedAsRoot,
            ExecError::InvalidTimeout => Code::InvalidTimeout,
            ExecError::InvalidCommand => Code::InvalidCommand,
            ExecError::RootUnavailable { .. } => Code::RootUnavailable,
            ExecError::RootIsLink { .. } => Code::PathEscapes,
            ExecError::CwdOutside { .. } => Code::CwdOutside,
            ExecError::CwdNotFound { .. } => Code::CwdNotFound,
            ExecError::CwdUnusable { .. } => Code::CwdUnusable,
            ExecError::CwdNotInSandbox { .. } => Code::CwdNotInSandbox,
            ExecError::SandboxUnavailable { .. } | ExecError::NoSandbox { .. } => {
                Code::SandboxUnavailable
            }
            ExecError::SandboxBind { .. } => Code::SandboxBindFailed,
            ExecError::OutputDir { .. } => Code::OutputDirUnavailable,
            ExecError::Spawn(_) => Code::SpawnFailed,
            ExecError::Io(_) => Code::ExecIo,
            ExecError::Unwatched => Code::Unwatched,
        }
    }
}
