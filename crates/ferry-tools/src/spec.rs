//! The one declaration of the tools: each tool's name, description and input schema as
//! `tools/list` shows them, and the function a call runs. Every schema has
//! `additionalProperties: false` (T-MCP).

use std::borrow::Cow;
use std::sync::OnceLock;

use ferry_codes::Code;
use serde_json::{Value, json};

use futures_util::future::BoxFuture;

use crate::{Approver, ToolError, ToolOutput, Toolbox};

/// What a call runs here: the toolbox, the checked arguments, and who answers a
/// question to the person. Blocking.
type Run = fn(&Toolbox, Value, &dyn Approver) -> Result<ToolOutput, ToolError>;

/// What a call against a node runs: a future on the runtime, so that dropping it (a
/// cancelled request) drops the node's stream and the node stops.
pub(crate) type NodeRun =
    for<'a> fn(&'a Toolbox, Value) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;

/// Where a tool's body runs.
pub(crate) enum Body {
    /// Here, as the person.
    Here(Run),
    /// Against a node.
    OnNode(NodeRun),
    /// Against a node when the call names one (`node`), here otherwise.
    Either(Run, NodeRun),
}

/// One tool: what the model sees of it, and what a call runs.
#[derive(Debug)]
pub struct ToolSpec {
    /// The name a call gives, and `[tools] enabled` lists.
    pub name: &'static str,
    /// A short human title.
    pub title: &'static str,
    /// What the tool does, for the model.
    pub description: &'static str,
    /// Properties of the input object, and which are required.
    properties: fn() -> Value,
    required: &'static [&'static str],
    /// Hint for clients (MCP annotations): the tool changes nothing.
    pub read_only: bool,
    /// Hint for clients (MCP annotations): the tool may remove or overwrite.
    pub destructive: bool,
    /// The tool's body.
    pub(crate) body: Body,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Body::Here(_) => "Here",
            Body::OnNode(_) => "OnNode",
            Body::Either(..) => "Either",
        })
    }
}

impl ToolSpec {
    /// The body a call with `args` runs against a node, if it does.
    pub(crate) fn on_node(&self, args: &Value) -> Option<NodeRun> {
        match self.body {
            Body::OnNode(run) => Some(run),
            Body::Either(_, run) if args.get("node").is_some() => Some(run),
            _ => None,
        }
    }

    /// The body a call with `args` runs here, if it does.
    pub(crate) fn here(&self, args: &Value) -> Option<Run> {
        match self.body {
            Body::Here(run) => Some(run),
            Body::Either(run, _) if args.get("node").is_none() => Some(run),
            _ => None,
        }
    }

    /// Whether the tool only ever works against a node.
    pub(crate) fn needs_node(&self) -> bool {
        matches!(self.body, Body::OnNode(_))
    }

    /// The input schema: a closed object. Made once per tool of [`ALL`]: every call's
    /// arguments are checked against it.
    pub fn input_schema(&self) -> Cow<'static, Value> {
        static MADE: OnceLock<Vec<Value>> = OnceLock::new();
        let made = MADE.get_or_init(|| ALL.iter().map(ToolSpec::make_input_schema).collect());
        match ALL.iter().position(|spec| spec.name == self.name) {
            Some(at) => Cow::Borrowed(&made[at]),
            None => Cow::Owned(self.make_input_schema()),
        }
    }

    fn make_input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": (self.properties)(),
            "required": self.required,
            "additionalProperties": false,
        })
    }

    #[cfg(test)]
    fn check_bounds(&self, args: &Value) -> Result<(), ToolError> {
        check_bounds(self.name, &self.input_schema(), args, "")
    }
}

/// Refuses a number outside the `minimum` and `maximum` `schema` states, and an array
/// where it states an object, at any depth, naming the argument: the schema the model
/// reads is the rule it is held to.
pub(crate) fn check_bounds(
    tool: &str,
    schema: &Value,
    value: &Value,
    at: &str,
) -> Result<(), ToolError> {
    let refuse = |bound: &str, limit: &Value| {
        ToolError::new(
            Code::InvalidArguments,
            format!(
                "the arguments do not fit {tool}'s input schema: {at} must be {bound} {limit} \
                 (got {value}); nothing was done"
            ),
        )
    };
    // serde would take an array for an object's struct, its items as the fields in order.
    if value.is_array() && schema.get("type").and_then(Value::as_str) == Some("object") {
        return Err(ToolError::new(
            Code::InvalidArguments,
            format!(
                "the arguments do not fit {tool}'s input schema: {} must be an object of \
                 named fields, not an array; nothing was done",
                if at.is_empty() { "the arguments" } else { at }
            ),
        ));
    }
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema
                .get("minimum")
                .filter(|m| m.as_f64().is_some_and(|m| x < m))
            {
                return Err(refuse("at least", min));
            }
            if let Some(max) = schema
                .get("maximum")
                .filter(|m| m.as_f64().is_some_and(|m| x > m))
            {
                return Err(refuse("at most", max));
            }
        }
        Value::Object(fields) => {
            for (name, field) in fields {
                if let Some(inner) = schema.get("properties").and_then(|p| p.get(name)) {
                    let at = if at.is_empty() {
                        name.clone()
                    } else {
                        format!("{at}.{name}")
                    };
                    check_bounds(tool, inner, field, &at)?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(inner) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_bounds(tool, inner, item, &format!("{at}[{i}]"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The enabled tools, in the order of [`ALL`]; unknown names were refused by the config.
pub(crate) fn enabled(names: &[String]) -> Vec<&'static ToolSpec> {
    ALL.iter()
        .filter(|spec| names.iter().any(|n| n == spec.name))
        .collect()
}

fn path_prop(what: &str) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 4096,
           "description": format!("{what}: relative to the workspace, `~/…`, or absolute")})
}

fn node_prop() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 64,
           "description": "A paired node's id or name"})
}

fn node_path_prop(what: &str) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 4096,
           "description": format!("{what}: an absolute path on the node")})
}

pub(crate) const ALL: &[ToolSpec] = &[
    ToolSpec {
        name: "file_read",
        title: "Read a text file",
        description: "Reads a UTF-8 text file, or a range of its lines, with line numbers. \
            Files over 256 KiB need a range (startLine, lineCount); non-text files need \
            file_preview or image_read. A line longer than one reply is cut between \
            characters; continue with the startLine and lineOffset the reply names.",
        properties: || {
            json!({
                "path": path_prop("The file"),
                "startLine": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                "lineCount": {"type": "integer", "minimum": 1, "description": "How many lines"},
                "lineOffset": {"type": "integer", "minimum": 0, "description": "Bytes of startLine to skip: the offset a reply names when it cut a line too long for one reply"},
            })
        },
        required: &["path"],
        read_only: true,
        destructive: false,
        body: Body::Here(|tools, args, _| crate::read::file_read(tools, args)),
    },
    ToolSpec {
        name: "file_write",
        title: "Write a text file",
        description: "Creates or replaces one text file atomically, creating missing parent \
            folders. Drafts belong in your tmp/ folder; finished output in artifacts/.",
        properties: || {
            json!({
                "path": path_prop("The file to write"),
                "content": {"type": "string", "description": "The complete new content"},
            })
        },
        required: &["path", "content"],
        read_only: false,
        destructive: true,
        body: Body::Here(|tools, args, _| crate::edit::file_write(tools, args)),
    },
    ToolSpec {
        name: "file_edit",
        title: "Edit text files",
        description: "Exact text replacements applied as one atomic edit. Every oldText must \
            occur exactly once in its file (include surrounding lines to make it unique); \
            otherwise nothing changes. Edits to several files land all or none.",
        properties: || {
            json!({
                "edits": {
                    "type": "array", "minItems": 1, "maxItems": 64,
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": path_prop("The file to edit"),
                            "oldText": {"type": "string", "minLength": 1, "description": "Exact text to replace; must occur once"},
                            "newText": {"type": "string", "description": "The replacement"},
                        },
                        "required": ["path", "oldText", "newText"],
                        "additionalProperties": false,
                    },
                },
            })
        },
        required: &["edits"],
        read_only: false,
        destructive: true,
        body: Body::Here(|tools, args, _| crate::edit::file_edit(tools, args)),
    },
    ToolSpec {
        name: "file_preview",
        title: "Preview any file",
        description: "Type, size, sha256 and a preview fit for you: the head of text, CSV \
            and JSON; image size and a small rendering; PDF page count and first-page text; \
            zip and office member lists; archive listings.",
        properties: || json!({"path": path_prop("The file")}),
        required: &["path"],
        read_only: true,
        destructive: false,
        body: Body::Here(|tools, args, _| crate::read::file_preview(tools, args)),
    },
    ToolSpec {
        name: "file_delete",
        title: "Delete a file",
        description: "Removes one file after the person approves. If they decline, or \
            cannot be asked, nothing is deleted.",
        properties: || json!({"path": path_prop("The file to delete")}),
        required: &["path"],
        read_only: false,
        destructive: true,
        body: Body::Here(crate::approval::file_delete),
    },
    ToolSpec {
        name: "file_deliver",
        title: "Deliver files to the person",
        description: "Copies finished files into public/attachments/ (or a project's) under \
            safe names, records them in the artifact manifest, and returns the 📎 lines to \
            repeat in your reply.",
        properties: || {
            json!({
                "paths": {"type": "array", "minItems": 1, "maxItems": 32,
                          "items": path_prop("A finished file")},
                "project": {"type": "string", "description": "Deliver into this project's public/ instead"},
            })
        },
        required: &["paths"],
        read_only: false,
        destructive: false,
        body: Body::Here(|tools, args, _| crate::deliver::file_deliver(tools, args)),
    },
    ToolSpec {
        name: "image_read",
        title: "Look at an image",
        description: "Returns the image itself, scaled to fit 2000×2000 and 5 MiB.",
        properties: || json!({"path": path_prop("The image")}),
        required: &["path"],
        read_only: true,
        destructive: false,
        body: Body::Here(|tools, args, _| crate::read::image_read(tools, args)),
    },
    ToolSpec {
        name: "terminal_run",
        title: "Run a command",
        description: "Runs one command with bash -c in the workspace (or cwd), as the person. \
            Returns stdout, stderr, the exit code and timedOut; output over 64 KiB is saved \
            to a file returned as fullOutputPath. Timeout 120 s by default, at most 600.",
        properties: || {
            json!({
                "command": {"type": "string", "minLength": 1, "maxLength": 65536},
                "cwd": path_prop("The working folder (default: the workspace)"),
                "timeoutSecs": {"type": "integer", "minimum": 1, "maximum": 600},
            })
        },
        required: &["command"],
        read_only: false,
        destructive: true,
        body: Body::Here(|tools, args, _| {
            let ran = crate::terminal::terminal_run(tools, args);
            // A command may have changed what the tools refuse to write.
            tools.restore_documents();
            ran
        }),
    },
    ToolSpec {
        name: "dir_list",
        title: "List a folder",
        description: "Lists a folder of the workspace, or with `node` a folder on that paired \
            node, sorted by name, with sizes. Long folders come in pages: pass nextPageToken \
            back as pageToken with the same path (and node).",
        properties: || {
            json!({
                "node": node_prop(),
                "path": path_prop("The folder (on a node: an absolute path there)"),
                "pageToken": {"type": "string"},
                "maxEntries": {"type": "integer", "minimum": 1, "description": "Default 200, at most 5000"},
            })
        },
        required: &["path"],
        read_only: true,
        destructive: false,
        body: Body::Either(
            |tools, args, _| crate::dir_list::dir_list(tools, args),
            |tools, args| Box::pin(crate::node::dir_list(tools, args)),
        ),
    },
    ToolSpec {
        name: "file_fetch",
        title: "Fetch a file from a node",
        description: "Fetches one file from a paired node into the media store and returns \
            its localPath and mediaId (pass the mediaId to file_push as sourceMediaId). Small \
            UTF-8 text is also shown inline; nothing else is.",
        properties: || {
            json!({
                "node": node_prop(),
                "path": node_path_prop("The file"),
                "maxBytes": {"type": "integer", "minimum": 1, "description": "Default 8 MiB; at most the gateway's cap (16 MiB unless raised)"},
            })
        },
        required: &["node", "path"],
        read_only: true,
        destructive: false,
        body: Body::OnNode(|tools, args| Box::pin(crate::node::file_fetch(tools, args))),
    },
    ToolSpec {
        name: "file_push",
        title: "Write a file on a node",
        description: "Writes one file on a paired node, atomically, from a mediaId of this \
            gateway's media store (sourceMediaId) or from base64 content (contentBase64, at \
            most 16 MiB decoded). Refuses to replace a file unless overwrite is true.",
        properties: || {
            json!({
                "node": node_prop(),
                "path": node_path_prop("The file to write"),
                "sourceMediaId": {"type": "string", "minLength": 1, "maxLength": 512, "description": "A mediaId from file_fetch or dir_fetch"},
                "contentBase64": {"type": "string", "description": "The bytes, base64 (standard alphabet)"},
                "overwrite": {"type": "boolean", "description": "Replace a file already there (default false)"},
                "createParents": {"type": "boolean", "description": "Make missing folders (default false)"},
            })
        },
        required: &["node", "path"],
        read_only: false,
        destructive: true,
        body: Body::OnNode(|tools, args| Box::pin(crate::node::file_push(tools, args))),
    },
    ToolSpec {
        name: "dir_fetch",
        title: "Fetch a folder from a node",
        description: "Fetches a whole folder from a paired node (regular files and folders, \
            at most 5000 entries) and saves it under rootDir; returns the file list within a \
            bounded text and the full manifest in the structured result.",
        properties: || {
            json!({
                "node": node_prop(),
                "path": node_path_prop("The folder"),
                "maxBytes": {"type": "integer", "minimum": 1, "description": "Most bytes of the compressed archive; at most the gateway's cap (16 MiB unless raised)"},
            })
        },
        required: &["node", "path"],
        read_only: true,
        destructive: false,
        body: Body::OnNode(|tools, args| Box::pin(crate::node::dir_fetch(tools, args))),
    },
    ToolSpec {
        name: "skill_search",
        title: "Find a skill",
        description: "Finds a bundled skill by name and description and returns its SKILL.md; \
            the scripts and references beside it are in its folder, to read when needed.",
        properties: || json!({"query": {"type": "string", "minLength": 1, "maxLength": crate::args::SHORT_TEXT_MAX_CHARS}}),
        required: &["query"],
        read_only: true,
        destructive: false,
        body: Body::Here(|tools, args, _| crate::skills::skill_search(tools, args)),
    },
    ToolSpec {
        name: "file_pick",
        title: "Ask the person for a file",
        description: "Asks the person to pick a file on their own computer. Returns a \
            temporary path in your workspace and when it expires.",
        properties: || json!({"prompt": {"type": "string", "minLength": 1, "maxLength": crate::args::SHORT_TEXT_MAX_CHARS}}),
        required: &["prompt"],
        read_only: false,
        destructive: false,
        body: Body::Here(|tools, args, _| crate::pick::file_pick(tools, args)),
    },
    ToolSpec {
        name: "subagent",
        title: "Direct worker agents",
        description: "Starts and directs worker agents (a herd) and hands them files as \
            evidence. assign starts (or reuses) a worker from the definition `agent` under \
            `label` and gives it `task`; steer sends more `message`; reply answers a \
            worker's question; inbox reads your next question or completion (waitSecs to \
            wait); status lists workers; stop ends one. `files` are paths (relative to cwd): \
            text that fits is embedded, the rest named by path. Pass a completion's \
            resultPath in files to the next worker.",
        properties: || {
            json!({
                "action": {"type": "string", "enum": ["assign", "steer", "reply", "ask_owner", "status", "stop", "inbox"]},
                "agent": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The definition's name (assign)"},
                "label": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The worker (default for assign: the agent's name)"},
                "task": {"type": "string", "minLength": 1, "description": "What the worker should do (assign)"},
                "message": {"type": "string", "minLength": 1, "description": "The direction or answer (steer, reply)"},
                "files": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": ferry_config::limits::HERD_FILES_MAX, "description": "Evidence files, each once"},
                "cwd": path_prop("Your folder, where relative files resolve, and the new worker's folder (default: the workspace)"),
                "waitSecs": {"type": "integer", "minimum": 0, "maximum": ferry_config::limits::HERD_INBOX_WAIT_MAX_SECS, "description": "inbox: how long to wait for a message"},
            })
        },
        required: &["action"],
        read_only: false,
        destructive: true,
        body: Body::Here(|tools, args, _| crate::subagent::subagent(tools, args)),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> &'static ToolSpec {
        ALL.iter().find(|s| s.name == name).unwrap()
    }

    #[test]
    fn the_config_names_exactly_the_declared_tools_in_their_order() {
        let declared: Vec<&str> = ALL.iter().map(|spec| spec.name).collect();
        assert_eq!(declared, ferry_config::TOOL_NAMES);
    }

    #[test]
    fn numbers_outside_the_schema_bounds_are_refused_at_the_bound_and_not_before() {
        let run = spec("terminal_run");
        for ok in [1, 2, 599, 600] {
            run.check_bounds(&json!({"command": "true", "timeoutSecs": ok}))
                .unwrap();
        }
        for (bad, says) in [
            (json!(0), "timeoutSecs must be at least 1 (got 0)"),
            (json!(601), "timeoutSecs must be at most 600 (got 601)"),
            (json!(600.5), "at most 600"),
            (json!(u64::MAX), "at most 600"),
            (json!(-1), "at least 1"),
        ] {
            let err = run
                .check_bounds(&json!({"command": "true", "timeoutSecs": bad}))
                .unwrap_err();
            assert_eq!(err.code, "invalid_arguments");
            assert!(err.message.contains(says), "{}", err.message);
        }
        // Strings and unknown names are left to the tool's own parsing.
        run.check_bounds(&json!({"command": "true", "timeoutSecs": "9", "x": 1}))
            .unwrap();
        let read = spec("file_read");
        read.check_bounds(&json!({"path": "a", "lineOffset": 0}))
            .unwrap();
        let err = read
            .check_bounds(&json!({"path": "a", "lineOffset": -1}))
            .unwrap_err();
        assert!(
            err.message.contains("lineOffset must be at least 0"),
            "{}",
            err.message
        );
    }
}
