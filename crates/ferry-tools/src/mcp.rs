//! The MCP binding (spec tools.md T-MCP): `tools/list` shows exactly the enabled tools,
//! `tools/call` runs one on a blocking thread, and a failed call is a tool result with
//! `isError: true`, never a transport failure.
//!
//! `file_delete`'s question reaches the person through elicitation when the client
//! declares it: as a server-to-client request on protocols before 2026-07-28, and as an
//! `InputRequiredResult` round trip from 2026-07-28 on (servers may no longer send
//! requests there). Without elicitation, the web client's prompt is the channel.

use std::sync::Arc;

use data_encoding::BASE64;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ErrorData as McpError, Implementation, InitializeResult, InputRequest, InputRequiredResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{Peer, ServerHandler};
use serde_json::{Value, json};

use crate::approval::{Answered, FirstChannel, WebApprover, delete_question};
use crate::{Approval, Approver, Content, Question, ToolError, ToolOutput, Toolbox};
use ferry_config::limits::MCP_MESSAGE_MAX_BYTES;

/// The key of the one input request `file_delete` makes.
const CONFIRM_KEY: &str = "confirm_delete";

/// Finds the toolbox of a person (the gateway's per-person cache).
type Lookup = Arc<dyn Fn(&str) -> Result<Arc<Toolbox>, ToolError> + Send + Sync>;

/// Where a call finds the toolbox of the person it acts for.
#[derive(Clone)]
enum Source {
    /// `ferry mcp --person P`: one person for the whole session.
    Fixed(Arc<Toolbox>),
    /// The gateway's `/mcp`: the person of the bearer token, found in the request.
    PerRequest(Lookup),
}

/// Whether a person (the first argument) may call a tool (the second) now, asked before
/// anything of the call runs: the gateway's per-person rates. `Err` is the call's answer
/// instead, a tool error.
type Admission = Arc<dyn Fn(&str, &str) -> Result<(), ToolOutput> + Send + Sync>;

/// The person a request to `/mcp` was authenticated as; the gateway puts it in the
/// HTTP request's extensions.
#[derive(Clone, Debug)]
pub struct McpPerson(pub String);

/// The MCP server over one or many toolboxes.
#[derive(Clone)]
pub struct McpServer {
    source: Source,
    /// Instructions need a toolbox; per-request servers use the site's generic text.
    instructions: String,
    /// Asked before each call of an enabled tool; none admits every call.
    admission: Option<Admission>,
}

impl McpServer {
    /// A server for one person (stdio).
    pub fn for_toolbox(toolbox: Arc<Toolbox>) -> McpServer {
        McpServer {
            instructions: toolbox.instructions(),
            source: Source::Fixed(toolbox),
            admission: None,
        }
    }

    /// A server whose person comes with each request (the gateway's `/mcp`).
    pub fn per_request(
        lookup: impl Fn(&str) -> Result<Arc<Toolbox>, ToolError> + Send + Sync + 'static,
    ) -> McpServer {
        McpServer {
            instructions: format!(
                "{}\n{}",
                ferry_docs::shipped::FILE_DELIVERY_MD,
                crate::TOOLS_NOTE
            ),
            source: Source::PerRequest(Arc::new(lookup)),
            admission: None,
        }
    }

    /// The same server, asking `admit` (person, tool) before each call of an enabled tool
    /// runs; a refusal is answered as the tool's error and nothing of the call is done.
    pub fn with_admission(
        mut self,
        admit: impl Fn(&str, &str) -> Result<(), ToolOutput> + Send + Sync + 'static,
    ) -> McpServer {
        self.admission = Some(Arc::new(admit));
        self
    }

    /// The toolbox of the request's person. The outer error is a request with no person;
    /// the inner one is the person's toolbox failing to open, which a tool call answers
    /// as a tool error.
    fn toolbox(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Result<Arc<Toolbox>, ToolError>, McpError> {
        match &self.source {
            Source::Fixed(toolbox) => Ok(Ok(toolbox.clone())),
            Source::PerRequest(lookup) => {
                let person = context
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<McpPerson>())
                    .ok_or_else(|| McpError::invalid_request("no authenticated person", None))?;
                Ok(lookup(&person.0))
            }
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ferry", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let toolbox = self
            .toolbox(&context)?
            .map_err(|e| McpError::invalid_request(e.message, None))?;
        let tools: Vec<Value> = toolbox
            .tools()
            .iter()
            .map(|spec| {
                json!({
                    "name": spec.name,
                    "title": spec.title,
                    "description": spec.description,
                    "inputSchema": spec.input_schema().into_owned(),
                    "annotations": {
                        "title": spec.title,
                        "readOnlyHint": spec.read_only,
                        "destructiveHint": spec.destructive,
                        "openWorldHint": false,
                    },
                })
            })
            .collect();
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let toolbox = match self.toolbox(&context)? {
            Ok(toolbox) => toolbox,
            Err(e) => return Ok(to_result(ToolOutput::error(&e))?.into()),
        };
        let name = request.name.to_string();
        if !toolbox.is_enabled(&name) {
            return Err(unknown_tool(format!(
                "there is no tool `{name}` here; tools/list shows the tools you have"
            )));
        }
        // Before anything of the call runs (a node call, the delete question included):
        // a refused call does no work.
        if let Some(admit) = &self.admission
            && let Err(refused) = admit(toolbox.person(), &name)
        {
            return Ok(to_result(refused)?.into());
        }
        let args = request
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or(Value::Null);
        if toolbox.runs_on_node(&name, &args) {
            // On the runtime: a cancelled request drops the call, and the node stops.
            let output = tokio::select! {
                output = toolbox.call_on_node(&name, args) => output,
                () = context.ct.cancelled() => ToolOutput::error(&crate::ToolError::new(
                    ferry_codes::Code::CallCancelled,
                    "the call was cancelled; the node was told to stop",
                )),
            };
            return Ok(to_result(output)?.into());
        }
        let elicitation = context
            .client_capabilities()
            .is_some_and(|caps| caps.elicitation.is_some());
        let stateless = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let asks = name == "file_delete"
            && toolbox.is_enabled(&name)
            && toolbox.site().config().tools.delete_approval == ferry_config::DeleteApproval::Ask;

        // From 2026-07-28 the question is a round trip: ask first, act on the retry.
        let mut answered = None;
        if asks && elicitation && stateless {
            let state = request_state(&args);
            match request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(CONFIRM_KEY))
            {
                Some(response) if request.request_state.as_deref() == Some(state.as_str()) => {
                    answered = Some(Answered(approval_of(response)));
                }
                _ => {
                    let question = {
                        let (toolbox, args) = (toolbox.clone(), args.clone());
                        run_blocking(move || delete_question(&toolbox, &args)).await?
                    };
                    return match question {
                        Ok(question) => input_required(&question, state),
                        Err(e) => Ok(to_result(ToolOutput::error(&e))?.into()),
                    };
                }
            }
        }

        let peer = context.peer.clone();
        let handle = tokio::runtime::Handle::current();
        let output = run_blocking(move || {
            let site = toolbox.site();
            let web = WebApprover {
                site,
                person: toolbox.person(),
            };
            let elicit = ElicitApprover { peer, handle };
            let mut channels: Vec<&dyn Approver> = Vec::new();
            if let Some(answer) = &answered {
                channels.push(answer);
            } else if elicitation {
                channels.push(&elicit);
            }
            channels.push(&web);
            toolbox.call(&name, args, &FirstChannel(channels))
        })
        .await?;
        Ok(to_result(output)?.into())
    }
}

/// Asks through a server-to-client elicitation request (protocols before 2026-07-28).
struct ElicitApprover {
    peer: Peer<RoleServer>,
    handle: tokio::runtime::Handle,
}

impl Approver for ElicitApprover {
    fn ask(&self, question: &Question) -> Approval {
        let params: ElicitRequestParams = match serde_json::from_value(elicit_params(question)) {
            Ok(params) => params,
            Err(e) => return Approval::Failed(e.to_string()),
        };
        match self.handle.block_on(self.peer.create_elicitation(params)) {
            Ok(result) => approval_of(&serde_json::to_value(result).unwrap_or(Value::Null)),
            Err(e) => Approval::Failed(e.to_string()),
        }
    }
}

/// The form the person answers: one required yes/no. Every text in it is shown to the
/// person by a client ferry does not control, so none holds a hidden character.
fn elicit_params(question: &Question) -> Value {
    json!({
        "mode": "form",
        "message": ferry_fs::shown_name(&question.summary),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "confirm": {
                    "type": "boolean",
                    "title": "Delete this file",
                    "description": ferry_fs::shown_name(&question.subject),
                },
            },
            "required": ["confirm"],
        },
    })
}

/// `accept` with `confirm: true` approves; anything else (decline, cancel, false) denies.
fn approval_of(result: &Value) -> Approval {
    let accepted = result.get("action").and_then(Value::as_str) == Some("accept");
    let confirmed = result
        .get("content")
        .and_then(|c| c.get("confirm"))
        .and_then(Value::as_bool)
        == Some(true);
    if accepted && confirmed {
        Approval::Approved
    } else {
        Approval::Denied
    }
}

/// Binds an answer to the call it was asked for: a retry must repeat the same arguments.
fn request_state(args: &Value) -> String {
    // The first 128 bits are plenty to tell two argument sets apart.
    ferry_fs::sha256_hex(args.to_string().as_bytes())[..32].to_owned()
}

fn input_required(question: &Question, state: String) -> Result<CallToolResponse, McpError> {
    let request: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": elicit_params(question),
    }))
    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let requests = [(CONFIRM_KEY.to_owned(), request)].into_iter().collect();
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(state),
    )))
}

/// Runs a tool on this worker thread, with the runtime told it blocks: no hop to another
/// thread (a tenth of a millisecond on a small read). Needs the multi-threaded runtime,
/// which `ferry mcp` and the gateway both use.
async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, McpError> {
    Ok(tokio::task::block_in_place(work))
}

/// The MCP result of a tool's output, as `tools/call` answers it.
pub fn to_result(output: ToolOutput) -> Result<CallToolResult, McpError> {
    // Built directly, not through a JSON value: a listing's structured content is large.
    let content = output
        .content
        .into_iter()
        .map(|c| match c {
            Content::Text(text) => ContentBlock::text(text),
            Content::Image { mime, data } => ContentBlock::image(BASE64.encode(&data), mime),
        })
        .collect();
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output.structured;
    Ok(result)
}

/// Copies messages from `input` to `output`, each line cleaned of text that is not
/// Unicode (see [`crate::unicode`]); lines too long for the transport pass as they are.
async fn clean_messages(
    input: impl tokio::io::AsyncRead + Unpin,
    output: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let mut reader = tokio::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MCP_MESSAGE_MAX_BYTES as u64 + 1;
        if (&mut reader)
            .take(limit)
            .read_until(b'\n', &mut line)
            .await?
            == 0
        {
            return output.shutdown().await;
        }
        output.write_all(&crate::unicode::clean_line(&line)).await?;
    }
}

/// Serves `toolbox` over MCP stdio until the client closes it.
pub async fn serve_stdio(toolbox: Arc<Toolbox>) -> Result<(), std::io::Error> {
    serve_stdio_with(McpServer::for_toolbox(toolbox)).await
}

/// Serves `handler` over MCP stdio (lines cleaned and bounded) until the client closes it.
pub(crate) async fn serve_stdio_with(handler: impl ServerHandler) -> Result<(), std::io::Error> {
    use rmcp::ServiceExt;
    use rmcp::transport::async_rw::AsyncRwTransport;
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let (cleaned, mut feed) = tokio::io::duplex(1024 * 1024);
    tokio::spawn(async move {
        if let Err(e) = clean_messages(stdin, &mut feed).await {
            tracing::warn!("reading stdin: {e}");
        }
    });
    let transport =
        AsyncRwTransport::new_server(cleaned, stdout).with_max_line_length(MCP_MESSAGE_MAX_BYTES);
    let service = handler
        .serve(transport)
        .await
        .map_err(std::io::Error::other)?;
    service.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// A call of a tool that is not there: the caller's mistake about the protocol, not a
/// tool's failure, so JSON-RPC's invalid params (`-32602`), as MCP asks.
pub(crate) fn unknown_tool(message: String) -> McpError {
    McpError::invalid_params(
        message,
        Some(serde_json::json!({"code": ferry_codes::Code::UnknownTool})),
    )
}
