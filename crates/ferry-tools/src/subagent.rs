//! `subagent` (spec handoffs.md H-API): the controller's side of the person's herd,
//! with the same semantics as `ferry herd …`.

use std::path::PathBuf;
use std::time::Duration;

use ferry_codes::Code;
use ferry_config::limits::{HERD_INBOX_WAIT_MAX_SECS, HERD_TOOL_OUTPUT_MAX_BYTES};
use ferry_herd::{Assign, Herd, HerdError, Place};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ToolError, ToolOutput, Toolbox, args};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SubagentArgs {
    action: Action,
    agent: Option<String>,
    label: Option<String>,
    task: Option<String>,
    message: Option<String>,
    #[serde(default)]
    files: Vec<String>,
    cwd: Option<String>,
    wait_secs: Option<u64>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    Assign,
    Steer,
    Reply,
    AskOwner,
    Status,
    Stop,
    Inbox,
}

impl From<HerdError> for ToolError {
    fn from(e: HerdError) -> ToolError {
        ToolError::new(e.code, e.message)
    }
}

impl Toolbox {
    /// The person's herd, acting through their requester (`subagent`, `ferry herd`).
    pub fn herd(&self) -> Result<Herd<'_>, ToolError> {
        Ok(Herd::open(self.herd_place()?, self.requester())?)
    }

    /// `stop`: the label's processes end even when the herd's folder cannot be opened
    /// (a worker can replace its folders with links); then the herd answers.
    pub fn herd_stop(&self, label: &str) -> Result<ferry_herd::WorkerStatus, ToolError> {
        ferry_herd::check_label(label)?;
        let place = self.herd_place()?;
        match Herd::open(place.clone(), self.requester()) {
            Ok(herd) => Ok(herd.stop(label)?),
            Err(e) => {
                let ended = ferry_herd::end_label(&place, label)?;
                Err(ToolError::new(
                    e.code,
                    format!(
                        "{ended} process tree(s) of {label} were ended, but the herd's folder cannot be used: {}",
                        e.message
                    ),
                ))
            }
        }
    }

    /// Where the person's herd lives and how its workers start.
    fn herd_place(&self) -> Result<Place, ToolError> {
        place_of(self)
    }
}

fn place_of(tools: &Toolbox) -> Result<Place, ToolError> {
    // The herd's files are written by the service and by the workers alike, which in host
    // mode are different users; until every herd operation goes through the person's
    // worker, host mode has no herd.
    if tools.site().mode() == ferry_config::SiteMode::Host {
        return Err(ToolError::new(
            Code::HostModeUnavailable,
            "the herd is not available in host mode yet; run it on a local or container site",
        ));
    }
    let program = tools.program().ok_or_else(|| {
        ToolError::new(
            Code::HostModeUnavailable,
            "the herd needs the ferry program to start workers with",
        )
    })?;
    let config = tools.site().config();
    Ok(Place {
        person: tools.person().to_owned(),
        data: tools.paths().data.clone(),
        program,
        config_toml: config.to_toml_string(),
        sandboxed: config.exec.sandbox != ferry_config::SandboxChoice::None,
    })
}

pub(crate) fn subagent(tools: &Toolbox, args: Value) -> Result<ToolOutput, ToolError> {
    let args: SubagentArgs = args::parse("subagent", args)?;
    let need = |value: Option<String>, name: &str| {
        value.ok_or_else(|| {
            ToolError::new(
                Code::InvalidArguments,
                format!("this action needs `{name}`; nothing was done"),
            )
        })
    };
    let herd = match tools.herd() {
        Ok(herd) => herd,
        // `stop` ends the label's processes even where the herd's folder cannot be opened.
        Err(_) if matches!(args.action, Action::Stop) => {
            let stopped = json!(tools.herd_stop(&need(args.label, "label")?)?);
            let text = serde_json::to_string_pretty(&stopped).unwrap_or_default();
            return Ok(ToolOutput::text(text).with_structured(stopped));
        }
        Err(e) => return Err(e),
    };
    // The controller's folder: relative files resolve from it (H-FILES).
    let from: Option<PathBuf> = args
        .cwd
        .as_deref()
        .map(|c| ferry_herd::reader::absolute_from(&tools.paths().home, home_relative(c)));
    let answer = match args.action {
        Action::Assign => {
            let assigned = herd.assign(Assign {
                agent: need(args.agent, "agent")?,
                label: args.label,
                task: need(args.task, "task")?,
                files: args.files,
                files_from: from.clone(),
                cwd: args.cwd.as_deref().map(|c| home_relative(c).to_owned()),
            });
            match assigned {
                Ok(a) => json!(a),
                Err(e) if e.rollback_occurred => return Ok(rolled_back(&e)),
                Err(e) => return Err(e.into()),
            }
        }
        Action::Steer | Action::Reply => {
            let send = if matches!(args.action, Action::Reply) {
                Herd::reply
            } else {
                Herd::steer
            };
            let (label, message) = (need(args.label, "label")?, need(args.message, "message")?);
            json!(send(&herd, &label, message, &args.files, from.as_deref())?)
        }
        Action::AskOwner => {
            return Err(ToolError::new(
                Code::NotAWorker,
                "ask_owner is a worker's action: a worker asks through its own tools \
                 (`ferry herd ask-owner` or `ferry herd mcp`), and you answer with reply",
            ));
        }
        Action::Status => json!(herd.status(args.label.as_deref())?),
        Action::Inbox => {
            let wait = args.wait_secs.unwrap_or(0).min(HERD_INBOX_WAIT_MAX_SECS);
            json!({"envelope": herd.inbox(Duration::from_secs(wait))?})
        }
        Action::Stop => json!(herd.stop(&need(args.label, "label")?)?),
    };
    bounded_answer(&herd, answer)
}

/// `~` and `~/…` as the home, as the other tools take them.
fn home_relative(path: &str) -> &str {
    match path {
        "~" => ".",
        _ => path.strip_prefix("~/").unwrap_or(path),
    }
}

/// An `assign` that overflowed once the worker existed and was undone (H-ASSIGN).
fn rolled_back(e: &HerdError) -> ToolOutput {
    ToolOutput {
        content: vec![crate::Content::Text(format!(
            "{} (rollbackOccurred: true; the label is free)",
            e.message
        ))],
        structured: Some(json!({
            "error": {"code": e.code, "message": e.message},
            "rollbackOccurred": true,
        })),
        is_error: true,
    }
}

/// The answer as JSON text, whole when it is short; a longer one is persisted and the
/// model gets its start and its `fullOutputPath` (H-RESULT).
fn bounded_answer(herd: &Herd<'_>, answer: Value) -> Result<ToolOutput, ToolError> {
    let text = serde_json::to_string_pretty(&answer).unwrap_or_default();
    if text.len() <= HERD_TOOL_OUTPUT_MAX_BYTES {
        return Ok(ToolOutput::text(text).with_structured(answer));
    }
    let path = herd.persist_answer(&text)?;
    let (start, _) = ferry_herd::result::bounded(&text, HERD_TOOL_OUTPUT_MAX_BYTES);
    let shown = format!(
        "{start}\n[the answer is {} bytes; the first {HERD_TOOL_OUTPUT_MAX_BYTES} are shown, \
         all of it is in {} (read it with file_read and a line range)]",
        text.len(),
        path.display()
    );
    Ok(ToolOutput::text(shown).with_structured(json!({
        "fullOutputPath": path,
        "truncated": true,
        "summary": summary(&answer),
    })))
}

/// A long answer without its bulk: embedded file contents dropped (their paths and sizes
/// kept), the text cut.
fn summary(answer: &Value) -> Value {
    let mut answer = answer.clone();
    if let Some(envelope) = answer.get_mut("envelope").and_then(Value::as_object_mut) {
        if let Some(files) = envelope.get_mut("files").and_then(Value::as_array_mut) {
            for file in files.iter_mut().filter_map(Value::as_object_mut) {
                file.remove("content");
            }
        }
        if let Some(Value::String(text)) = envelope.get_mut("text") {
            let (start, cut) = ferry_herd::result::bounded(text, 4096);
            if cut {
                *text = format!("{start}…");
            }
        }
    }
    answer
}
