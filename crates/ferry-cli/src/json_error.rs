//! The `{"error":{"code","message"}}` a command prints when it refuses, the same shape
//! the HTTP API answers with.

use serde::Serialize;

#[derive(Serialize)]
struct ErrorJson<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'a str,
    message: String,
}

/// The refusal `code` with `message`, as one line of JSON.
pub fn json_error(code: ferry_codes::Code, message: String) -> String {
    let error = ErrorJson {
        error: ErrorBody {
            code: code.as_str(),
            message,
        },
    };
    // Two strings: serializing them cannot fail.
    serde_json::to_string(&error).unwrap_or_default()
}
