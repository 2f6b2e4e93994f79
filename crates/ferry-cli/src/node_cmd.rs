//! `ferry node list|approve|revoke` (spec nodes N-ADMIN): the pairing records, on the data
//! dir like every admin command. Every answer is JSON on stdout; a refusal is
//! `{"error":{"code","message"}}` with exit status 1.
//!
//! `ferry node run` (spec nodes N-PAIR, N-LINK) runs on the node itself: it dials the
//! gateway and serves it. Exit status 2 for settings or a state folder that cannot work,
//! 4 when the gateway says the node is revoked, 0 after a signal.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use ferry_node::settings::{Flags, Settings};
use ferry_site::{NodeRecord, Site, SiteError};

use crate::json_error::json_error;
use crate::{SiteArgs, open_site};

#[derive(Subcommand)]
pub(crate) enum NodeCommand {
    /// Prints every node, one JSON object a line, first seen first.
    List {
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Approves node ID for the commands it advertised, or only for --commands; approving
    /// again replaces the approval (a pairing upgrade). Prints the node.
    Approve {
        /// The node's id, as `ferry node list` shows it.
        id: String,
        /// The commands to approve, comma-separated; each must be advertised by the node.
        #[arg(long, value_delimiter = ',', value_name = "A,B")]
        commands: Option<Vec<String>>,
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Revokes node ID: it serves nothing from now on and is never approved again.
    /// Prints the node.
    Revoke {
        /// The node's id.
        id: String,
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Runs this machine as a node: dials the gateway, serves it under this node's own
    /// path policy and reconnects by itself. Settings may also come from node.toml in the
    /// state folder; a flag given replaces that key.
    Run(RunArgs),
}

/// `ferry node run`'s flags; each replaces the same key of node.toml.
#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The gateway's base URL: ws://HOST:PORT (loopback or private addresses only) or
    /// wss://HOST[:PORT].
    #[arg(long, value_name = "URL")]
    gateway: Option<String>,
    /// The name the admin sees [default: the host name].
    #[arg(long)]
    name: Option<String>,
    /// The state folder (identity key, node.toml) [default:
    /// $XDG_STATE_HOME/ferry-node, else ~/.local/state/ferry-node].
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// A glob of absolute paths the gateway may read (repeat for more).
    #[arg(long, value_name = "GLOB")]
    allow_read: Vec<String>,
    /// A glob of absolute paths the gateway may write (repeat for more).
    #[arg(long, value_name = "GLOB")]
    allow_write: Vec<String>,
    /// A glob of absolute paths never to touch, whatever the allow globs say.
    #[arg(long, value_name = "GLOB")]
    deny: Vec<String>,
    /// Lets requests follow symbolic links (the gateway must ask for it too).
    #[arg(long)]
    follow_symlinks: bool,
    /// Trusts exactly the gateway certificate with this SHA-256 (64 hex digits).
    #[arg(long, value_name = "HEX")]
    gateway_cert_sha256: Option<String>,
}

impl RunArgs {
    fn flags(self) -> Flags {
        // A list flag given replaces the file's list; one not given leaves it.
        let given = |list: Vec<String>| (!list.is_empty()).then_some(list);
        Flags {
            gateway: self.gateway,
            name: self.name,
            state: self.state,
            allow_read: given(self.allow_read),
            allow_write: given(self.allow_write),
            deny: given(self.deny),
            follow_symlinks: self.follow_symlinks.then_some(true),
            gateway_cert_sha256: self.gateway_cert_sha256,
        }
    }
}

/// `ferry node run`.
pub(crate) fn run(args: RunArgs) -> Result<ExitCode> {
    let settings = match Settings::resolve(args.flags(), |name| std::env::var_os(name)) {
        Ok(settings) => settings,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "ferry node run: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    for warning in settings.warnings() {
        // A node whose stderr is gone still runs (as its own log lines do).
        let _ = writeln!(std::io::stderr(), "ferry node run: warning: {warning}");
    }
    // One thread runs the node's tasks (file reads and hashing of archives go to the
    // blocking pool): a keystroke crosses the link reader, the terminal's pumps and the
    // link writer, and on one thread each hand-off is a queue push, not a wake-up of
    // another thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let exit = runtime.block_on(ferry_node::connect::run(settings));
    if exit.status() != 0 {
        let _ = writeln!(std::io::stderr(), "ferry node run: {exit}");
    }
    Ok(ExitCode::from(exit.status()))
}

pub(crate) fn node(command: NodeCommand) -> Result<ExitCode> {
    // A site that cannot be opened is the operator's mistake, told on stderr like every
    // admin command; a refusal about a node is answered as JSON.
    let outcome = match command {
        NodeCommand::List { site } => list(&open_site(&site)?),
        NodeCommand::Approve { id, commands, site } => {
            open_site(&site)?.approve(&id, commands).map(|n| line(&n))
        }
        NodeCommand::Revoke { id, site } => open_site(&site)?.revoke(&id).map(|n| line(&n)),
        NodeCommand::Run(args) => return run(args),
    };
    match outcome {
        Ok(text) => {
            if !text.is_empty() {
                println!("{text}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.code().is_internal() => Err(e.into()),
        Err(e) => {
            println!("{}", json_error(e.code(), e.to_string()));
            Ok(ExitCode::FAILURE)
        }
    }
}

fn list(site: &Site) -> Result<String, SiteError> {
    let lines: Vec<String> = site.nodes()?.iter().map(line).collect();
    Ok(lines.join("\n"))
}

fn line(node: &NodeRecord) -> String {
    // `connected` is the mark the serving gateway keeps in the record for its links.
    // A record is plain data: serializing it cannot fail.
    serde_json::to_string(&node.view(node.connected)).unwrap_or_default()
}
