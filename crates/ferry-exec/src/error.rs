use std::path::PathBuf;

use ferry_codes::Code;
use ferry_fs::FsError;

/// Why a command was not run, or could not be watched to its end.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The service runs as root, so a command would run with every power on the machine.
    #[error("commands are never run while the service is effectively root; run it as its own user")]
    RefusedAsRoot,
    /// A timeout of zero seconds was asked for.
    #[error("the timeout must be more than zero seconds (at most 600)")]
    InvalidTimeout,
    /// The command line holds a NUL byte, which a shell cannot be handed.
    #[error("the command contains a NUL byte")]
    InvalidCommand,
    /// A herd worker's lifetime of zero seconds was asked for.
    #[error(
        "a worker's lifetime must be more than zero seconds (at most {})",
        ferry_config::limits::HERD_WORKER_MAX_LIFETIME.as_secs()
    )]
    InvalidLifetime,
    /// What a herd worker's run adds (its variables, its programs) breaks a rule; the
    /// text says which, and nothing was started.
    #[error("{0}")]
    InvalidWorkerRun(String),
    /// The workspace folder the command must run in could not be opened.
    #[error("the workspace folder {path} cannot be opened: {source}")]
    RootUnavailable {
        /// The workspace folder.
        path: PathBuf,
        /// Why opening it failed.
        source: FsError,
    },
    /// A tree a command may use is a symbolic link, or lies under one.
    #[error(
        "the folder {path} is a symbolic link or lies under one; links are never followed at \
         the root of a workspace folder, so nothing in it can be used until the operator \
         replaces the link with a real folder"
    )]
    RootIsLink {
        /// The folder that is, or lies under, a link.
        path: PathBuf,
    },
    /// The working folder asked for lies outside the workspace.
    #[error(
        "the working folder {path} is outside the workspace; use a folder inside it, without `..`"
    )]
    CwdOutside {
        /// The working folder as it resolved.
        path: PathBuf,
    },
    /// The working folder asked for does not exist.
    #[error("the working folder {path} does not exist; create it first or pick another")]
    CwdNotFound {
        /// The missing working folder.
        path: PathBuf,
    },
    /// The working folder exists but could not be opened as a folder.
    #[error("the working folder {path} cannot be used: {source}")]
    CwdUnusable {
        /// The working folder.
        path: PathBuf,
        /// Why it could not be used.
        source: FsError,
    },
    /// The working folder lies in no tree the sandbox shows the command.
    #[error(
        "the working folder {path} is not visible inside the sandbox; use a folder in a bound tree"
    )]
    CwdNotInSandbox {
        /// The working folder the command would not see.
        path: PathBuf,
    },
    /// The sandbox the configuration names cannot run here.
    #[error(
        "the sandbox is required but {what} (looked at {path}); commands are not run without it"
    )]
    SandboxUnavailable {
        /// What is wrong with it, as part of a sentence.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// `auto` found no sandbox that works here; each field says why one does not.
    #[error(
        "no sandbox works on this machine ({landlock}; {bwrap}), and commands are not run \
         unconfined unless the operator says so: install bubblewrap where user namespaces \
         are allowed, or run a kernel with Landlock ABI 6 or later, or set \
         `[exec] sandbox = \"none\"` to run them unconfined (in local mode: with the \
         service's own authority)"
    )]
    NoSandbox {
        /// Why Landlock cannot be used here.
        landlock: String,
        /// Why bubblewrap cannot be used here.
        bwrap: String,
    },
    /// A folder for the sandbox to show the command could not be prepared for it.
    #[error("the sandbox path {path} cannot be bound: {source}")]
    SandboxBind {
        /// The folder that could not be bound.
        path: PathBuf,
        /// Why binding it failed.
        source: std::io::Error,
    },
    /// The folder for saved output and private temporary files could not be made or opened.
    #[error("the output folder {path} cannot be prepared: {source}")]
    OutputDir {
        /// The output folder.
        path: PathBuf,
        /// Why preparing it failed.
        source: std::io::Error,
    },
    /// Starting the shell for the command failed.
    #[error("the command could not be started: {0}")]
    Spawn(std::io::Error),
    /// Reading the command's output or waiting for it failed.
    #[error("watching the command failed: {0}")]
    Io(std::io::Error),
    /// The process watching the command went away before the command finished.
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
            ExecError::InvalidCommand | ExecError::InvalidWorkerRun(_) => Code::InvalidCommand,
            ExecError::InvalidLifetime => Code::InvalidTimeout,
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
