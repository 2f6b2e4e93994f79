//! `subagent` (spec handoffs.md H-API): the controller's side of the person's herd,
//! with the same semantics as `ferry herd …`.

use std::path::PathBuf;

use ferry_codes::Code;
use ferry_config::limits::HERD_TOOL_OUTPUT_MAX_BYTES;
use ferry_herd::{Acting, Assign, HerdError, Message, Performed, Place, Request};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ToolError, ToolOutput, Toolbox, args};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SubagentArgs {
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
    /// Performs one call on the person's herd as the person (`subagent`, `ferry herd`):
    /// here in local and container mode; in host mode in a process started as them, since
    /// the herd's folder is theirs alone. An answer whose text is longer than
    /// `shown_max_bytes` is persisted too (H-RESULT).
    pub fn herd_call(
        &self,
        request: Request,
        shown_max_bytes: Option<usize>,
    ) -> Result<Performed, HerdError> {
        let place = place_of(self)?;
        match self.requester().workers() {
            Some(workers) => {
                ferry_herd::perform_as_person(workers, &place, request, shown_max_bytes)
            }
            None => ferry_herd::perform(place, self.requester(), request, shown_max_bytes),
        }
    }
}

/// Where the person's herd lives and how its workers start.
fn place_of(tools: &Toolbox) -> Result<Place, HerdError> {
    let program = tools.program().ok_or_else(|| {
        HerdError::new(
            Code::HostModeUnavailable,
            "the herd needs the ferry program to start workers with",
        )
    })?;
    let config = tools.site().config();
    Ok(Place {
        person: tools.person().to_owned(),
        data: tools.paths().data.clone(),
        program,
        acting: Acting::Site {
            config: config.to_effective_toml(),
        },
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
    // The controller's folder: relative files resolve from it (H-FILES).
    let from: Option<PathBuf> = args
        .cwd
        .as_deref()
        .map(|c| ferry_herd::reader::absolute_from(&tools.paths().home, home_relative(c)));
    let request = match args.action {
        Action::Assign => Request::Assign(Assign {
            agent: need(args.agent, "agent")?,
            label: args.label,
            task: need(args.task, "task")?,
            files: args.files,
            files_from: from,
            cwd: args.cwd.as_deref().map(|c| home_relative(c).to_owned()),
        }),
        Action::Steer | Action::Reply => {
            let message = Message {
                label: need(args.label, "label")?,
                text: need(args.message, "message")?,
                files: args.files,
                files_from: from,
            };
            if matches!(args.action, Action::Reply) {
                Request::Reply(message)
            } else {
                Request::Steer(message)
            }
        }
        Action::AskOwner => {
            return Err(ToolError::new(
                Code::NotAWorker,
                "ask_owner is a worker's action: a worker asks through its own tools \
                 (`ferry herd ask-owner` or `ferry herd mcp`), and you answer with reply",
            ));
        }
        Action::Status => Request::Status { label: args.label },
        Action::Inbox => Request::Inbox {
            wait_secs: args.wait_secs.unwrap_or(0),
        },
        Action::Stop => Request::Stop {
            label: need(args.label, "label")?,
        },
    };
    match tools.herd_call(request, Some(HERD_TOOL_OUTPUT_MAX_BYTES)) {
        Ok(performed) => Ok(bounded_answer(performed)),
        Err(e) if e.rollback_occurred => Ok(rolled_back(&e)),
        Err(e) => Err(e.into()),
    }
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

/// The answer as JSON text, whole when it is short; for a longer one (persisted by the
/// herd) the model gets its start and its `fullOutputPath` (H-RESULT).
fn bounded_answer(performed: Performed) -> ToolOutput {
    let Performed {
        answer,
        full_output_path,
    } = performed;
    let text = serde_json::to_string_pretty(&answer).unwrap_or_default();
    let Some(path) = full_output_path else {
        return ToolOutput::text(text).with_structured(answer);
    };
    let (start, _) = ferry_herd::result::bounded(&text, HERD_TOOL_OUTPUT_MAX_BYTES);
    let shown = format!(
        "{start}\n[the answer is {} bytes; the first {HERD_TOOL_OUTPUT_MAX_BYTES} are shown, \
         all of it is in {} (read it with file_read and a line range)]",
        text.len(),
        path.display()
    );
    ToolOutput::text(shown).with_structured(json!({
        "fullOutputPath": path,
        "truncated": true,
        "summary": summary(&answer),
    }))
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
