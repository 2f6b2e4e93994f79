//! The worker's side of the herd over MCP stdio (`ferry herd mcp`, spec handoffs.md
//! H-API): one tool, `subagent`, with the worker's actions — `inbox`, `ask_owner` and
//! `complete` — for an agent CLI that speaks MCP rather than running `ferry herd`. It
//! runs inside the worker's process (already the person, in its sandbox) and needs
//! nothing of the site but the herd folder its environment names.

use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use ferry_codes::Code;
use ferry_config::limits::{HERD_FILES_MAX, HERD_INBOX_WAIT_MAX_SECS, HERD_TEXT_MAX_BYTES};
use ferry_herd::Worker;
use ferry_herd::reader::{Direct, Reader};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData as McpError, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::mcp::to_result;
use crate::{ToolError, ToolOutput, args};

/// The one tool's name, as the controller's.
const TOOL: &str = "subagent";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct WorkerArgs {
    action: WorkerAction,
    message: Option<String>,
    #[serde(default)]
    files: Vec<String>,
    wait_secs: Option<u64>,
    output: Option<String>,
    output_path: Option<String>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WorkerAction {
    Inbox,
    AskOwner,
    Complete,
}

/// The MCP server of one worker.
#[derive(Clone)]
struct WorkerServer {
    worker: Arc<Worker>,
}

pub(crate) fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["inbox", "ask_owner", "complete"]},
            "message": {"type": "string", "minLength": 1, "maxLength": HERD_TEXT_MAX_BYTES, "description": "ask_owner: the question"},
            "files": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": HERD_FILES_MAX, "description": "ask_owner: evidence files (relative to your folder)"},
            "waitSecs": {"type": "integer", "minimum": 0, "maximum": HERD_INBOX_WAIT_MAX_SECS, "description": "inbox: how long to wait for a message"},
            "output": {"type": "string", "description": "complete: your whole output as text"},
            "outputPath": {"type": "string", "minLength": 1, "description": "complete: or a file holding it"},
        },
        "required": ["action"],
        "additionalProperties": false,
    })
}

impl WorkerServer {
    fn call(&self, args: Value) -> Result<ToolOutput, ToolError> {
        crate::admit_to(TOOL, &input_schema(), &args)?;
        let args: WorkerArgs = args::parse(TOOL, args)?;
        let herd = |e: ferry_herd::HerdError| ToolError::new(e.code, e.message);
        let answer = match args.action {
            WorkerAction::Inbox => {
                let wait = args.wait_secs.unwrap_or(0);
                json!({"envelope": self.worker.inbox(Duration::from_secs(wait)).map_err(herd)?})
            }
            WorkerAction::AskOwner => {
                let message = args.message.ok_or_else(|| needs("message"))?;
                let here = std::env::current_dir()
                    .map_err(|e| ToolError::new(Code::BadPath, e.to_string()))?;
                json!(
                    self.worker
                        .ask_owner(message, &args.files, &here)
                        .map_err(herd)?
                )
            }
            WorkerAction::Complete => {
                let completed = match (args.output, args.output_path) {
                    (Some(text), None) => self.worker.complete(&mut Cursor::new(text)),
                    (None, Some(path)) => {
                        let here = std::env::current_dir()
                            .map_err(|e| ToolError::new(Code::BadPath, e.to_string()))?;
                        let path = ferry_herd::reader::absolute_from(&here, &path);
                        let mut file = Direct.open(&path).map_err(herd)?;
                        self.worker.complete(&mut file)
                    }
                    _ => {
                        return Err(ToolError::new(
                            Code::InvalidArguments,
                            "complete needs exactly one of `output` and `outputPath`",
                        ));
                    }
                };
                json!(completed.map_err(herd)?)
            }
        };
        let text = serde_json::to_string_pretty(&answer).unwrap_or_default();
        Ok(ToolOutput::text(text).with_structured(answer))
    }
}

fn needs(name: &str) -> ToolError {
    ToolError::new(
        Code::InvalidArguments,
        format!("this action needs `{name}`; nothing was done"),
    )
}

impl ServerHandler for WorkerServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "ferry-herd-worker",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(ferry_herd::WORKER_GUIDANCE.to_owned())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        serde_json::from_value(json!({"tools": [{
            "name": TOOL,
            "title": "Talk to your owner",
            "description": "You are a worker agent. inbox reads your next message (your task, \
                more direction, a reply; waitSecs to wait); ask_owner asks your owner a question \
                (then read the inbox for the reply); complete hands over your whole output \
                (output, or outputPath) and tells your owner.",
            "inputSchema": input_schema(),
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false},
        }]}))
        .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != TOOL {
            return Err(crate::mcp::unknown_tool(format!(
                "no tool {:?}; a worker has {TOOL}",
                request.name
            )));
        }
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let server = self.clone();
        let output = tokio::task::block_in_place(move || server.call(args))
            .unwrap_or_else(|e| ToolOutput::error(&e));
        Ok(to_result(output)?.into())
    }
}

/// Serves this process's worker side over MCP stdio until the client closes it.
pub async fn serve_worker_stdio(worker: Worker) -> Result<(), std::io::Error> {
    crate::mcp::serve_stdio_with(WorkerServer {
        worker: Arc::new(worker),
    })
    .await
}
