//! `ferry node list|approve|revoke` (spec nodes N-ADMIN): the pairing records, on the data
//! dir like every admin command. Every answer is JSON on stdout; a refusal is
//! `{"error":{"code","message"}}` with exit status 1.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
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
    // `connected` is false until the gateway's link endpoint exists to say otherwise; a
    // command on the data dir will then still not see the serving gateway's links.
    // A record is plain data: serializing it cannot fail.
    serde_json::to_string(&node.view(false)).unwrap_or_default()
}
