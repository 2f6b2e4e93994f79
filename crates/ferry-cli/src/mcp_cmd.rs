//! `ferry mcp` (the agent tools over MCP stdio) and the hidden `ferry worker` that acts
//! as a person in host mode.

use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use ferry_tools::{Toolbox, WorkerProgram};

use crate::{SiteArgs, open_site};

/// The worker subcommand the helper execs after its privilege drop.
pub(crate) const WORKER_COMMAND: &str = "worker";

/// How the person's worker is started in host mode: this very binary.
pub(crate) fn worker_program() -> Result<WorkerProgram> {
    Ok(WorkerProgram {
        program: std::env::current_exe().context("finding the ferry binary")?,
        args: vec![WORKER_COMMAND.to_owned()],
    })
}

pub(crate) fn mcp(site: &SiteArgs, person: &str) -> Result<ExitCode> {
    let site = Arc::new(open_site(site)?);
    ferry_tools::log_sandbox(site.config());
    let toolbox = Toolbox::open(site, person, Some(worker_program()?))
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let toolbox = Arc::new(toolbox);
    sweep_saved_output(toolbox.clone());
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime
        .block_on(ferry_tools::mcp::serve_stdio(toolbox))
        .context("serving MCP on stdio")?;
    Ok(ExitCode::SUCCESS)
}

/// Removes the person's expired saved command output now and then every
/// [`ferry_tools::OUTPUT_SWEEP_INTERVAL`], on a thread of its own; failures go to the log.
fn sweep_saved_output(toolbox: Arc<Toolbox>) {
    std::thread::spawn(move || {
        loop {
            if let Err(e) = toolbox.sweep_saved_output() {
                tracing::warn!("removing expired command output: {}", e.message);
            }
            std::thread::sleep(ferry_tools::OUTPUT_SWEEP_INTERVAL);
        }
    });
}

pub(crate) fn worker() -> Result<ExitCode> {
    ferry_exec::worker::serve(stdin_socket()).context("serving as the person")?;
    Ok(ExitCode::SUCCESS)
}

/// The socket the service started this process with, through the helper, as its stdin.
pub(crate) fn stdin_socket() -> UnixStream {
    // SAFETY: fd 0 is the socket the helper was started with; only this takes it.
    unsafe { UnixStream::from_raw_fd(0) }
}
