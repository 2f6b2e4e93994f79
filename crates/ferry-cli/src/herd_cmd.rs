//! `ferry herd …` (spec handoffs.md H-CLI): the `subagent` tool's semantics on the
//! command line. Every command prints one JSON object on stdout. Exit status: 0 done;
//! 1 refused, with `{"error":{"code","message"}}` (and `"rollbackOccurred":true` for an
//! assign that was undone); 2 a usage mistake; 3 `inbox` found nothing in time.
//!
//! The controller's commands act on a site and person (`--data`, `--person`); a
//! worker's (`inbox`, `ask-owner`, `complete`) find their herd in the `FERRY_HERD_*`
//! variables their supervisor set, and need nothing else of the site.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use ferry_codes::Code;
use ferry_config::Config;
use ferry_config::limits::{HERD_ARG_MAX_BYTES, HERD_INBOX_WAIT_MAX_SECS, HERD_TEXT_MAX_BYTES};
use ferry_exec::Requester;
use ferry_herd::reader::{Direct, Reader};
use ferry_herd::{Acting, Assign, HerdError, Message, Place, Request, Worker};
use ferry_site::Site;
use ferry_tools::Toolbox;
use serde::Serialize;

use crate::SiteArgs;
use crate::json_error::json_error;
use crate::mcp_cmd::{stdin_socket, worker_program};

/// Exit status of `inbox` when nothing arrived.
const NOTHING_ARRIVED: u8 = 3;

#[derive(Subcommand)]
pub(crate) enum HerdCommand {
    /// Starts (or reuses) a worker from the definition NAME and gives it its task.
    Assign {
        /// The definition's name (`<name>.md` in the project's, the home's or the site's agents).
        #[arg(long)]
        agent: String,
        /// The worker's label [default: the agent's name].
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        text: TaskText,
        #[command(flatten)]
        files: Files,
        /// The worker's folder [default: the person's home].
        #[arg(long)]
        cwd: Option<PathBuf>,
        #[command(flatten)]
        who: Who,
    },
    /// Sends more direction to an active worker.
    Steer {
        #[arg(long)]
        label: String,
        #[command(flatten)]
        text: MessageText,
        #[command(flatten)]
        files: Files,
        #[command(flatten)]
        who: Who,
    },
    /// Answers a worker's question.
    Reply {
        #[arg(long)]
        label: String,
        #[command(flatten)]
        text: MessageText,
        #[command(flatten)]
        files: Files,
        #[command(flatten)]
        who: Who,
    },
    /// (worker) Asks the owner a question.
    AskOwner {
        #[command(flatten)]
        text: MessageText,
        #[command(flatten)]
        files: Files,
    },
    /// Prints the next unread message (a worker's own, or the controller's when this is
    /// no worker) and marks it read; exit 3 when nothing arrived.
    Inbox {
        /// Seconds to wait for one [default: 0; at most 3600].
        #[arg(long, default_value_t = 0)]
        wait: u64,
        #[command(flatten)]
        who: Who,
    },
    /// (worker) Persists the whole output and tells the owner.
    Complete {
        /// The output: a file, or `-` for standard input.
        #[arg(long, value_name = "FILE|-")]
        output: String,
    },
    /// (worker) Serves the worker's side (`subagent`: inbox, ask_owner, complete) over
    /// MCP stdio, for an agent CLI that takes MCP servers.
    Mcp,
    /// Lists the workers (or one) and their states.
    Status {
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        who: Who,
    },
    /// Ends a worker's whole process tree.
    Stop {
        #[arg(long)]
        label: String,
        #[command(flatten)]
        who: Who,
    },
    /// Performs one controller's call as the person (host mode: started by the service
    /// through the helper, with its socket on stdin).
    #[command(hide = true)]
    AsPerson,
    /// Runs one worker (started by `assign`, reads its launch on stdin).
    #[command(hide = true)]
    Supervise {
        #[arg(long)]
        person: String,
        #[arg(long)]
        label: String,
        #[arg(long)]
        generation: u64,
        #[arg(long, env = "FERRY_DATA", default_value = "ferry-data")]
        data: PathBuf,
    },
}

/// The site and the person a controller's command acts for.
#[derive(Args)]
pub(crate) struct Who {
    #[command(flatten)]
    site: SiteArgs,
    /// The person whose herd it is.
    #[arg(long, env = "FERRY_PERSON")]
    person: Option<String>,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub(crate) struct TaskText {
    /// The task (at most 128 KiB; longer in --task-file).
    #[arg(long)]
    task: Option<String>,
    /// The task from a file, or `-` for standard input.
    #[arg(long, value_name = "FILE|-")]
    task_file: Option<String>,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub(crate) struct MessageText {
    /// The message (at most 128 KiB; longer in --message-file).
    #[arg(long)]
    message: Option<String>,
    /// The message from a file, or `-` for standard input.
    #[arg(long, value_name = "FILE|-")]
    message_file: Option<String>,
}

#[derive(Args)]
pub(crate) struct Files {
    /// A file to hand over as evidence (repeat for more); relative to this folder.
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<String>,
}

/// Runs one `ferry herd` command.
pub(crate) fn herd(command: HerdCommand) -> Result<ExitCode> {
    if let HerdCommand::Supervise {
        person,
        label,
        generation,
        data,
    } = command
    {
        return supervise(&data, &person, &label, generation);
    }
    if let HerdCommand::Mcp = command {
        return worker_mcp();
    }
    if let HerdCommand::AsPerson = command {
        return as_person();
    }
    Ok(match answer(command) {
        Ok(Answer::Json(value)) => print_line(&value, ExitCode::SUCCESS),
        Ok(Answer::Nothing) => print_line(
            &serde_json::json!({"envelope": null}),
            ExitCode::from(NOTHING_ARRIVED),
        ),
        Err(e) => {
            let mut line = json_error(e.code, e.message.clone());
            if e.rollback_occurred {
                line = serde_json::json!({
                    "error": {"code": e.code.as_str(), "message": e.message},
                    "rollbackOccurred": true,
                })
                .to_string();
            }
            let _ = writeln!(std::io::stdout(), "{line}");
            ExitCode::FAILURE
        }
    })
}

enum Answer {
    Json(serde_json::Value),
    Nothing,
}

fn json(value: impl Serialize) -> Answer {
    Answer::Json(serde_json::to_value(value).unwrap_or_default())
}

fn answer(command: HerdCommand) -> Result<Answer, HerdError> {
    let here = std::env::current_dir()
        .map_err(|e| HerdError::new(Code::BadPath, format!("this folder is unusable: {e}")))?;
    let message = |label: String, text: MessageText, files: Files| {
        Ok::<_, HerdError>(Message {
            label,
            text: text_of(text.message, text.message_file, "message")?,
            files: files.files,
            files_from: Some(here.clone()),
        })
    };
    let (request, who) = match command {
        HerdCommand::Assign {
            agent,
            label,
            text,
            files,
            cwd,
            who,
        } => {
            let assign = Assign {
                agent,
                label,
                task: text_of(text.task, text.task_file, "task")?,
                files: files.files,
                files_from: Some(here.clone()),
                cwd: cwd.map(|c| here.join(c).display().to_string()),
            };
            (Request::Assign(assign), who)
        }
        HerdCommand::Steer {
            label,
            text,
            files,
            who,
        } => (Request::Steer(message(label, text, files)?), who),
        HerdCommand::Reply {
            label,
            text,
            files,
            who,
        } => (Request::Reply(message(label, text, files)?), who),
        HerdCommand::AskOwner { text, files } => {
            let text = text_of(text.message, text.message_file, "message")?;
            let sent = Worker::from_env()?.ask_owner(text, &files.files, &here)?;
            return Ok(json(sent));
        }
        HerdCommand::Inbox { wait, who } => {
            if wait > HERD_INBOX_WAIT_MAX_SECS {
                return Err(HerdError::invalid(format!(
                    "--wait is at most {HERD_INBOX_WAIT_MAX_SECS} seconds"
                )));
            }
            if std::env::var_os("FERRY_HERD_LABEL").is_some() {
                let next = Worker::from_env()?.inbox(Duration::from_secs(wait))?;
                return Ok(next.map_or(Answer::Nothing, json));
            }
            (Request::Inbox { wait_secs: wait }, who)
        }
        HerdCommand::Complete { output } => {
            let worker = Worker::from_env()?;
            let completed = if output == "-" {
                worker.complete(&mut std::io::stdin().lock())?
            } else {
                let mut file = Direct.open(&ferry_herd::reader::absolute_from(&here, &output))?;
                worker.complete(&mut file)?
            };
            return Ok(json(completed));
        }
        HerdCommand::Status { label, who } => (Request::Status { label }, who),
        HerdCommand::Stop { label, who } => (Request::Stop { label }, who),
        HerdCommand::Supervise { .. } | HerdCommand::Mcp | HerdCommand::AsPerson => {
            return Err(HerdError::invalid("this command runs on its own"));
        }
    };
    let inbox = matches!(request, Request::Inbox { .. });
    let answer = toolbox_of(&who)?.herd_call(request, None)?.answer;
    if inbox {
        // `inbox` prints the envelope itself, or exits 3 without one.
        return Ok(match answer.get("envelope") {
            Some(envelope) if !envelope.is_null() => Answer::Json(envelope.clone()),
            _ => Answer::Nothing,
        });
    }
    Ok(Answer::Json(answer))
}

/// The toolbox of the person a controller's command names.
fn toolbox_of(who: &Who) -> Result<Toolbox, HerdError> {
    let person = who.person.as_deref().ok_or_else(|| {
        HerdError::new(
            Code::InvalidArguments,
            "name the person whose herd it is: --person (or FERRY_PERSON)",
        )
    })?;
    let site = crate::open_site(&who.site)
        .map_err(|e| HerdError::new(Code::SiteUnavailable, format!("{e:#}")))?;
    open_toolbox(Arc::new(site), person)
}

fn open_toolbox(site: Arc<Site>, person: &str) -> Result<Toolbox, HerdError> {
    let program = worker_program().map_err(|e| HerdError::new(Code::Internal, format!("{e:#}")))?;
    Toolbox::open(site, person, Some(program)).map_err(|e| HerdError::new(e.code, e.message))
}

/// `--task TEXT` (bounded as one argument is), or the text of a file or stdin.
fn text_of(inline: Option<String>, file: Option<String>, what: &str) -> Result<String, HerdError> {
    if let Some(text) = inline {
        if text.len() > HERD_ARG_MAX_BYTES {
            return Err(HerdError::invalid(format!(
                "--{what} is {} bytes, over {HERD_ARG_MAX_BYTES}; pass a longer {what} with \
                 --{what}-file",
                text.len()
            )));
        }
        return Ok(text);
    }
    let file = file.unwrap_or_default();
    let mut bytes = Vec::new();
    let limit = HERD_TEXT_MAX_BYTES as u64 + 1;
    if file == "-" {
        std::io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)?;
    } else {
        let here = std::env::current_dir()?;
        Direct
            .open(&ferry_herd::reader::absolute_from(&here, &file))?
            .take(limit)
            .read_to_end(&mut bytes)?;
    }
    if bytes.len() > HERD_TEXT_MAX_BYTES {
        return Err(HerdError::invalid(format!(
            "the {what} is over {HERD_TEXT_MAX_BYTES} bytes; hand the rest over as a file"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        HerdError::new(
            Code::InvalidUnicode,
            format!("the {what} is not UTF-8 text"),
        )
    })
}

fn print_line(value: &serde_json::Value, code: ExitCode) -> ExitCode {
    // A reader that went away is not a failure of the command.
    let _ = writeln!(std::io::stdout(), "{value}");
    code
}

/// `ferry herd supervise`: takes the launch from stdin (nothing: the assign rolled
/// back), opens the site with the service's own configuration, runs the worker.
fn supervise(data: &Path, person: &str, label: &str, generation: u64) -> Result<ExitCode> {
    let Some(launch) = ferry_herd::read_launch(&mut std::io::stdin().lock())? else {
        return Ok(ExitCode::SUCCESS);
    };
    let ran = run_supervised(data, person, label, generation, launch.clone());
    if let Err(e) = &ran {
        let herd = std::fs::canonicalize(data).map(|d| {
            d.join(ferry_site::layout::private_sub(
                person,
                ferry_site::layout::HERD_DIR,
            ))
        });
        if let Ok(herd) = herd {
            let why = format!("{e:#}");
            let _ = ferry_herd::record_failure(&herd, label, generation, &launch, &why);
        }
    }
    ran
}

fn run_supervised(
    data: &Path,
    person: &str,
    label: &str,
    generation: u64,
    launch: ferry_herd::Launch,
) -> Result<ExitCode> {
    let program = worker_program()?.program;
    let place = |data: PathBuf, sandboxed: bool| Place {
        person: person.to_owned(),
        data,
        program: program.clone(),
        acting: launch.acting.clone(),
        sandboxed,
    };
    match &launch.acting {
        Acting::AsPerson(setup) => {
            // Host mode: this process is the person, who may not open the site; it acts
            // as them as their worker would.
            let requester = Requester::InProcess(setup.executor()?);
            let sandboxed = setup.hello.run.sandbox != ferry_exec::ops::SandboxKind::None;
            let place = place(setup.hello.base.clone(), sandboxed);
            ferry_herd::supervise(&place, label, generation, launch, &requester)?;
        }
        Acting::Site { config } => {
            let config = Config::from_effective_toml(config)?;
            let sandboxed = config.exec.sandbox != ferry_config::SandboxChoice::None;
            let site = Site::open(data, config)
                .with_context(|| format!("opening the site at {}", data.display()))?;
            let toolbox = open_toolbox(Arc::new(site), person)?;
            let place = place(toolbox.paths().data.clone(), sandboxed);
            ferry_herd::supervise(&place, label, generation, launch, toolbox.requester())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ferry herd as-person`: one controller's call, performed as the person in host mode
/// (the service started this process through the helper; its socket is stdin).
fn as_person() -> Result<ExitCode> {
    ferry_exec::worker::serve_once(stdin_socket(), ferry_herd::serve_as_person)
        .context("serving the herd's call")?;
    Ok(ExitCode::SUCCESS)
}

/// `ferry herd mcp`: the worker's side over MCP stdio; a refusal to start (not a worker)
/// is the one JSON error line.
fn worker_mcp() -> Result<ExitCode> {
    let worker = match Worker::from_env() {
        Ok(worker) => worker,
        Err(e) => {
            let _ = writeln!(std::io::stdout(), "{}", json_error(e.code, e.message));
            return Ok(ExitCode::FAILURE);
        }
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime
        .block_on(ferry_tools::serve_worker_stdio(worker))
        .context("serving the worker's MCP on stdio")?;
    Ok(ExitCode::SUCCESS)
}
