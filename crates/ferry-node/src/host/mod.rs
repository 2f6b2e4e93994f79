//! The node host: what `ferry node run` serves to the gateway over the link, under the
//! node owner's own policy (spec N-PAIR, N-TOOLS).
//!
//! Every command takes an absolute, normal path, reaches it from `/` without following
//! any link (unless both the gateway asks and the node's policy allows it: then the
//! kernel's canonical path is reached without links instead), checks the node's own
//! rules on that canonical path before any content is touched, and answers with it.
//! File system work runs on the blocking pool; bodies stream through bounded channels,
//! so memory stays flat in the size of a transfer.
//!
//! A host given a [`TerminalConfig`] also serves the terminal commands (spec N-TERM):
//! the node's shell in a PTY, and files staged for it.

mod errors;
mod fetch;
mod journal;
mod list;
mod push;
mod pushing;
mod resolve;
mod stat;
mod terminal;
mod tree;
mod upload;
mod walk;

use std::path::PathBuf;
use std::sync::Arc;

use ferry_codes::Code;
use serde::de::DeserializeOwned;

use crate::mux::{Handler, handler};
use crate::policy::PathRules;
use crate::{Incoming, NodeError, commands, terminal as wire};

pub use pushing::{PUSHING_DIR_NAME, PushJournal};
pub use terminal::{GRACE as TERMINAL_END_GRACE, Shell};
pub use tree::WALK_MAX_DESCENDANTS;
pub use upload::{UPLOADS_DIR_NAME, UploadSweep, check_name as check_upload_name, sweep_once};

/// What the node's owner allows, checked on every request on the canonical path.
#[derive(Clone, Debug, Default)]
pub struct NodePolicy {
    /// Allow-read, allow-write and deny globs.
    pub rules: PathRules,
    /// Whether links may be followed at all (the gateway must ask for it too).
    pub follow_symlinks: bool,
}

/// What the terminal commands need from the node's settings.
#[derive(Clone, Debug)]
pub struct TerminalConfig {
    /// The shell a terminal runs (its name is the hello's `shell`).
    pub shell: Shell,
    /// `$HOME` as the node started with it: where a shell starts when it is a folder (else
    /// `/`).
    pub home: Option<PathBuf>,
    /// The node's state folder: uploads are staged in its [`UPLOADS_DIR_NAME`] folder.
    pub state_dir: PathBuf,
    /// When staged uploads are removed.
    pub sweep: UploadSweep,
}

/// Serves the transfer commands, and the terminal commands when it has a [`TerminalConfig`].
#[derive(Clone)]
pub struct NodeHost {
    policy: Arc<NodePolicy>,
    terminal: Option<Arc<TerminalConfig>>,
    pushes: Option<PushJournal>,
}

impl NodeHost {
    /// A host serving the transfer commands under `policy`.
    pub fn new(policy: NodePolicy) -> NodeHost {
        NodeHost {
            policy: Arc::new(policy),
            terminal: None,
            pushes: None,
        }
    }

    /// The same host, writing down each push in flight in `state_dir` so that what a
    /// node killed midway left is removed by [`NodeHost::sweep_pushes`] at its next start.
    pub fn with_push_journal(mut self, state_dir: &std::path::Path) -> NodeHost {
        self.pushes = Some(PushJournal::new(state_dir));
        self
    }

    /// Removes the temporaries of the pushes a node that died left (see
    /// [`NodeHost::with_push_journal`]); how many went. Blocking.
    pub fn sweep_pushes(&self) -> usize {
        self.pushes.as_ref().map_or(0, PushJournal::sweep)
    }

    /// Ends the terminal sessions a node that died left (their jobs in groups of their
    /// own, `nohup`ed…); how many still had processes. Blocking.
    pub fn sweep_terminals(&self) -> usize {
        self.terminal.as_ref().map_or(0, |config| {
            terminal::Sessions::new(&config.state_dir).sweep()
        })
    }

    /// The same host, serving the terminal commands too.
    pub fn with_terminal(mut self, config: TerminalConfig) -> NodeHost {
        self.terminal = Some(Arc::new(config));
        self
    }

    /// The commands it serves, as its hello advertises them.
    pub fn commands(&self) -> Vec<String> {
        let transfers = [
            commands::DIR_LIST,
            commands::FILE_STAT,
            commands::FILE_FETCH,
            commands::FILE_PUSH,
            commands::DIR_FETCH,
        ];
        let terminals = [wire::TERMINAL_OPEN, wire::TERMINAL_UPLOAD];
        let terminals = if self.terminal.is_some() {
            &terminals[..]
        } else {
            &[]
        };
        transfers
            .iter()
            .chain(terminals)
            .map(|c| (*c).to_owned())
            .collect()
    }

    /// The link handler that serves the gateway's calls.
    pub fn handler(&self) -> Handler {
        let host = self.clone();
        handler(move |incoming: Incoming| serve(host.clone(), incoming))
    }

    /// Removes old staged uploads now and then every [`UploadSweep::interval`], for as
    /// long as the future is polled; resolves at once for a host without terminals.
    pub async fn sweep_uploads(&self) {
        if let Some(config) = &self.terminal {
            upload::sweep_forever(Arc::new(config.state_dir.clone()), config.sweep).await;
        }
    }
}

/// Serves one call: parses its arguments and runs its command.
async fn serve(host: NodeHost, incoming: Incoming) {
    let NodeHost {
        policy,
        terminal,
        pushes,
    } = host;
    let Incoming {
        command,
        args,
        body,
        reply,
    } = incoming;
    match command.as_str() {
        commands::DIR_LIST => match parse(args) {
            Ok(args) => list::serve(policy, args, reply).await,
            Err(e) => reply.fail(e),
        },
        commands::FILE_STAT => match parse(args) {
            Ok(args) => stat::serve(policy, args, reply).await,
            Err(e) => reply.fail(e),
        },
        commands::FILE_FETCH => match parse(args) {
            Ok(args) => fetch::serve(policy, args, reply).await,
            Err(e) => reply.fail(e),
        },
        commands::FILE_PUSH => match parse(args) {
            Ok(args) => push::serve(policy, pushes, args, body, reply).await,
            Err(e) => reply.fail(e),
        },
        commands::DIR_FETCH => match parse(args) {
            Ok(args) => tree::serve(policy, args, reply).await,
            Err(e) => reply.fail(e),
        },
        wire::TERMINAL_OPEN | wire::TERMINAL_UPLOAD => match terminal {
            Some(config) => serve_terminal(config, &command, args, body, reply).await,
            None => reply.fail(unknown(&command)),
        },
        _ => reply.fail(unknown(&command)),
    }
}

/// Serves one call of a terminal command.
async fn serve_terminal(
    config: Arc<TerminalConfig>,
    command: &str,
    args: serde_json::Value,
    body: crate::DataReader,
    reply: crate::Reply,
) {
    if command == wire::TERMINAL_OPEN {
        match parse(args) {
            Ok(args) => terminal::open(config, args, body, reply).await,
            Err(e) => reply.fail(e),
        }
    } else {
        match parse(args) {
            Ok(args) => upload::serve(config, args, body, reply).await,
            Err(e) => reply.fail(e),
        }
    }
}

/// The refusal of a command this host does not serve.
fn unknown(command: &str) -> NodeError {
    NodeError::Remote {
        code: Code::UnknownCommand,
        message: format!("this node does not serve {command:?}"),
    }
}

/// The arguments of a command, parsed strictly.
fn parse<T: DeserializeOwned>(args: serde_json::Value) -> Result<T, NodeError> {
    serde_json::from_value(args).map_err(|e| invalid(format!("the arguments do not parse: {e}")))
}

/// An `invalid_arguments` refusal.
/// The node's policy for one call, with the gateway's rules `sent` for `access` (when
/// the call sent them) applied as well as the node's own.
fn with_gateway_rules(
    policy: Arc<NodePolicy>,
    sent: Option<&crate::policy::SentRules>,
    access: crate::policy::Access,
) -> Result<Arc<NodePolicy>, NodeError> {
    let Some(sent) = sent else {
        return Ok(policy);
    };
    Ok(Arc::new(NodePolicy {
        rules: policy
            .rules
            .clone()
            .and(sent.compile(access)?, "the gateway's"),
        follow_symlinks: policy.follow_symlinks,
    }))
}

fn invalid(message: impl Into<String>) -> NodeError {
    NodeError::Remote {
        code: Code::InvalidArguments,
        message: message.into(),
    }
}

/// Runs blocking file system work on the blocking pool.
async fn blocking<T, F>(work: F) -> Result<T, NodeError>
where
    F: FnOnce() -> Result<T, NodeError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) => Err(NodeError::Remote {
            code: Code::Internal,
            message: format!("the node's file system work stopped: {e}"),
        }),
    }
}

/// Serializes an answer's head.
fn head<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("answer heads are plain data")
}
