//! Typed arguments: a call whose JSON does not fit the schema gets a tool error that
//! says what was wrong, never a transport failure.

use ferry_codes::Code;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ToolError;

/// Parses a tool's arguments; unknown names and wrong types are refused.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    let args = match args {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => args,
        // serde would take an array for the arguments, its items as the fields in order.
        _ => {
            return Err(ToolError::new(
                Code::InvalidArguments,
                format!(
                    "the arguments do not fit {tool}'s input schema: they are an object of \
                     named arguments"
                ),
            ));
        }
    };
    serde_json::from_value(args).map_err(|e| {
        ToolError::new(
            Code::InvalidArguments,
            format!("the arguments do not fit {tool}'s input schema: {e}"),
        )
    })
}

/// The most characters of a prompt or a query, as their schemas say.
pub(crate) const SHORT_TEXT_MAX_CHARS: usize = 1024;

/// Refuses `value` (the argument `field` of `tool`) unless it holds 1 to
/// [`SHORT_TEXT_MAX_CHARS`] characters, counted as JSON Schema counts them.
pub(crate) fn check_short_text(tool: &str, field: &str, value: &str) -> Result<(), ToolError> {
    let chars = value.chars().count();
    if (1..=SHORT_TEXT_MAX_CHARS).contains(&chars) {
        return Ok(());
    }
    Err(ToolError::new(
        Code::InvalidArguments,
        format!(
            "the arguments do not fit {tool}'s input schema: {field} must hold 1 to \
             {SHORT_TEXT_MAX_CHARS} characters (got {chars}); nothing was done"
        ),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PathArg {
    pub path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileRead {
    pub path: String,
    pub start_line: Option<u64>,
    pub line_count: Option<u64>,
    pub line_offset: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileWrite {
    pub path: String,
    pub content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileEdit {
    pub edits: Vec<Edit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Edit {
    pub path: String,
    pub old_text: String,
    pub new_text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileDeliver {
    pub paths: Vec<String>,
    pub project: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TerminalRun {
    pub command: String,
    pub cwd: Option<String>,
    pub timeout_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DirList {
    /// A node's id or name: the listing is of a folder there.
    pub node: Option<String>,
    pub path: String,
    pub page_token: Option<String>,
    pub max_entries: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Query {
    pub query: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Prompt {
    pub prompt: String,
}
