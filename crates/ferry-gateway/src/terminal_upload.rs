//! `POST /v1/nodes/{id}/terminal/upload` (spec nodes N-TERM): an admin drops files onto a
//! node's terminal. Each `file` part streams, as it arrives, to the node's
//! `terminal.upload` as a checked body; the node stages it privately and answers its path,
//! which comes back quoted for the node's shell.
//!
//! The answer lists every file in the order sent, each staged or with its own error: a
//! file over [`UPLOAD_MAX_BYTES`] (its call is given up, so the node keeps nothing), a name
//! that is missing or holds a control character (refused before the node is contacted),
//! a name the node refuses, or an answer that is not an absolute, quotable path (the node
//! may be hostile). Refused for the whole request, before anything is staged: a non-admin
//! (`404 no_route`), the node (`404`, `403 command_not_allowed`, `503`), a shell whose
//! quoting is unknown (`422 unsupported_shell`). Refused midway, with what was staged
//! before left to expire on the node: a part named other than `file` (`400
//! unexpected_field`, as `POST /v1/media` answers it) and the file after
//! [`TERMINAL_UPLOAD_FILES_MAX`] (`400 too_many_files`).

use std::borrow::Cow;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use ferry_codes::Code;
use ferry_config::limits::{MULTIPART_ALLOWANCE_BYTES, NODE_STALL_SECS, TERMINAL_UPLOAD_FILES_MAX};
use ferry_node::checked::{CheckedWriter, Verified};
use ferry_node::host::UPLOADS_DIR_NAME;
use ferry_node::quote::quote_path;
use ferry_node::terminal::{
    TERMINAL_UPLOAD, TerminalUploadArgs, TerminalUploadHead, UPLOAD_MAX_BYTES,
};
use ferry_node::{Link, NodeError};
use serde::Serialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::nodes::Admin;
use crate::terminals::{Reached, Route, node_error, reach, relay_upload, shown};
use crate::upload::{multipart_error, open_multipart};
use crate::{ApiError, AppState};

/// How long a node may bring nothing while a file goes to it, or before it answers.
const STALL: Duration = Duration::from_secs(NODE_STALL_SECS);

/// One file of the answer, in the order sent: staged on the node, or why not.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = TerminalUploadFile)]
enum Staged {
    /// The file staged on the node.
    Staged {
        /// The file's name, as sent.
        name: String,
        /// Where the node staged it: an absolute path on the node.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// `path` quoted for the node's shell, to paste as one word.
        quoted: String,
    },
    /// The file was not staged.
    Failed {
        /// The file's name, as sent.
        name: String,
        error: Failure,
    },
}

/// Why a file was not staged, as `{"code","message"}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TerminalUploadFailure)]
struct Failure {
    #[schema(schema_with = crate::openapi::code_schema)]
    code: Code,
    /// A sentence to act on.
    message: String,
}

impl Failure {
    fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    fn of(e: NodeError) -> Failure {
        let e = node_error(e);
        Failure::new(e.code, e.message)
    }
}

/// The files of a terminal upload, in the order sent.
#[derive(Serialize, ToSchema)]
#[schema(as = TerminalUploads)]
pub(crate) struct Answer {
    files: Vec<Staged>,
}

/// The form of a terminal upload, read part by part as it streams (so no type holds it).
pub(crate) struct UploadForm;

impl PartialSchema for UploadForm {
    fn schema() -> RefOr<Schema> {
        let file = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type("application/octet-stream");
        ObjectBuilder::new()
            .property(
                "file",
                ArrayBuilder::new()
                    .items(file)
                    .min_items(Some(1))
                    .max_items(Some(TERMINAL_UPLOAD_FILES_MAX))
                    .description(Some(format!(
                        "The files, each in a part named `file` with its filename; one over \
                         {UPLOAD_MAX_BYTES} bytes is answered with its own error."
                    ))),
            )
            .required("file")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .into()
    }
}

impl ToSchema for UploadForm {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TerminalUploadForm")
    }
}

/// The node a batch goes to: its link, and what its paths are quoted for.
struct Target {
    link: Link,
    platform: String,
    shell: String,
}

/// A path for asking the node's shell whether its quoting is known at all.
fn dummy_path(platform: &str) -> &'static str {
    if platform == "windows" {
        "C:\\ferry"
    } else {
        "/ferry"
    }
}

/// Stages files on the node for its terminal, and answers their paths quoted for its shell.
///
/// Each `file` part streams to the node as it arrives. A file that fails has its own
/// error in the answer; the request fails as a whole only before anything is staged, or
/// on a part not named `file` or one file too many.
#[utoipa::path(
    post,
    path = "/v1/nodes/{id}/terminal/upload",
    operation_id = "uploadToNodeTerminal",
    tag = "nodes",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The node's id.")),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "Every file in the order sent, staged or with its \
               own error; for an admin's token only (anyone else is answered 404 no_route).",
               body = Answer))
)]
pub(crate) async fn upload(
    State(state): State<AppState>,
    _: Admin,
    id: Result<Path<String>, PathRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let headers = request.headers().clone();
    let Reached { record, link } = match reach(&state, id, TERMINAL_UPLOAD, &headers).await? {
        Route::Here(reached) => *reached,
        Route::Elsewhere(holder) => {
            let token = crate::terminals::token_of(&headers).unwrap_or_default();
            let (parts, body) = request.into_parts();
            let uri = parts.uri;
            return relay_upload(&state, &holder, &uri, &token, &headers, body).await;
        }
    };
    // Asked with a harmless path: the shell's quoting is known, or nothing is staged.
    if let Err(e) = quote_path(
        &record.platform,
        &record.shell,
        dummy_path(&record.platform),
    ) && e.code() == Code::UnsupportedShell
    {
        return Err(ApiError::new(e.code(), e.to_string()));
    }
    let target = Target {
        link,
        platform: record.platform,
        shell: record.shell,
    };
    let per_file = UPLOAD_MAX_BYTES + MULTIPART_ALLOWANCE_BYTES;
    let max = per_file * TERMINAL_UPLOAD_FILES_MAX as u64;
    let mut multipart = open_multipart(request, max, state.pace)?;
    let mut files = Vec::new();
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        if field.name() != Some("file") {
            return Err(ApiError::new(
                Code::UnexpectedField,
                format!(
                    "unexpected form field {:?}: send each file in a part named 'file'",
                    shown(field.name().unwrap_or(""))
                ),
            ));
        }
        if files.len() == TERMINAL_UPLOAD_FILES_MAX {
            return Err(ApiError::new(
                Code::TooManyFiles,
                format!(
                    "send at most {TERMINAL_UPLOAD_FILES_MAX} files at once; the first \
                     {TERMINAL_UPLOAD_FILES_MAX} were staged and expire unused"
                ),
            ));
        }
        let name = field.file_name().unwrap_or_default().to_owned();
        let staged = match stage(&target, &name, &mut field).await? {
            Ok(staged) => staged,
            Err(error) => {
                // Whatever is left of the part is read and dropped, so the next part comes.
                while let Ok(Some(_)) = field.chunk().await {}
                Staged::Failed { name, error }
            }
        };
        files.push(staged);
    }
    if files.is_empty() {
        return Err(ApiError::new(
            Code::MissingFile,
            "send the files in parts named 'file'",
        ));
    }
    Ok(Json(Answer { files }).into_response())
}

/// Stages one part as `name`. The outer error fails the request (the body itself broke);
/// the inner one is this file's.
async fn stage(
    target: &Target,
    name: &str,
    field: &mut multer::Field<'_>,
) -> Result<Result<Staged, Failure>, ApiError> {
    if name.is_empty() {
        return Ok(Err(Failure::new(
            Code::BadMultipart,
            "the part has no filename: send each file with its name",
        )));
    }
    if name.chars().any(char::is_control) {
        return Ok(Err(Failure::new(
            Code::UnsafeName,
            "the file's name holds a control character",
        )));
    }
    let args = TerminalUploadArgs { name: name.into() };
    let args = serde_json::to_value(args).map_err(|e| ApiError::internal("upload args", e))?;
    let opened = tokio::time::timeout(STALL, target.link.open_queued(TERMINAL_UPLOAD, args, true))
        .await
        .unwrap_or(Err(NodeError::Stalled(STALL)));
    let mut call = match opened {
        Ok(call) => call,
        Err(e) => return Ok(Err(Failure::of(e))),
    };
    let Some(body) = call.take_body() else {
        return Err(ApiError::internal("terminal.upload", "no request body"));
    };
    let mut writer = CheckedWriter::new(body);
    let sent = match send_part(&mut writer, field).await? {
        Ok(()) => finish(writer).await,
        Err(e) => Err(e),
    };
    let verified = match sent {
        Ok(verified) => verified,
        // Given up: dropping the call (and the writer, already gone) tells the node to
        // keep nothing. A node that refused the file says why in its answer.
        Err(Sent::TooLarge) => {
            return Ok(Err(Failure::new(
                Code::TooLarge,
                format!("the file is larger than the limit of {UPLOAD_MAX_BYTES} bytes"),
            )));
        }
        Err(Sent::Failed(e)) => {
            let said = tokio::time::timeout(Duration::from_secs(5), call.response()).await;
            let e = match said {
                Ok(Err(told)) => told,
                _ => e,
            };
            return Ok(Err(Failure::of(e)));
        }
    };
    let answered = tokio::time::timeout(STALL, call.response())
        .await
        .unwrap_or(Err(NodeError::Stalled(STALL)));
    let response = match answered {
        Ok(response) => response,
        Err(e) => return Ok(Err(Failure::of(e))),
    };
    Ok(staged(
        &target.platform,
        &target.shell,
        name,
        &verified,
        response.result,
    ))
}

/// Why a file's bytes did not all reach the node.
enum Sent {
    TooLarge,
    Failed(NodeError),
}

/// Sends the part's bytes, at most [`UPLOAD_MAX_BYTES`] of them.
async fn send_part(
    writer: &mut CheckedWriter,
    field: &mut multer::Field<'_>,
) -> Result<Result<(), Sent>, ApiError> {
    let mut size = 0u64;
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        size += chunk.len() as u64;
        if size > UPLOAD_MAX_BYTES {
            return Ok(Err(Sent::TooLarge));
        }
        let sent = tokio::time::timeout(STALL, writer.send(chunk))
            .await
            .unwrap_or(Err(NodeError::Stalled(STALL)));
        if let Err(e) = sent {
            return Ok(Err(Sent::Failed(e)));
        }
    }
    Ok(Ok(()))
}

async fn finish(writer: CheckedWriter) -> Result<Verified, Sent> {
    tokio::time::timeout(STALL, writer.finish())
        .await
        .unwrap_or(Err(NodeError::Stalled(STALL)))
        .map_err(Sent::Failed)
}

/// The node's answer for a file, checked: the size and digest of what was sent, and a
/// path that is absolute, free of controls and quotable for the shell.
fn staged(
    platform: &str,
    shell: &str,
    name: &str,
    verified: &Verified,
    head: serde_json::Value,
) -> Result<Staged, Failure> {
    let head: TerminalUploadHead = serde_json::from_value(head).map_err(|e| {
        Failure::new(
            Code::BadFrame,
            format!(
                "the node's answer does not parse: {}",
                shown(&e.to_string())
            ),
        )
    })?;
    if head.size != verified.size || head.sha256 != verified.sha256_hex() {
        return Err(Failure::new(
            Code::TransferMismatch,
            "the node's size or sha256 of the file is not what was sent",
        ));
    }
    if !is_absolute(platform, &head.path) {
        return Err(Failure::new(
            Code::BadFrame,
            "the node answered a staged path that is not absolute",
        ));
    }
    let quoted = quote_path(platform, shell, &head.path)
        .map_err(|e| Failure::new(e.code(), e.to_string()))?;
    if !in_staging_layout(platform, &head.path, name) {
        return Err(Failure::new(
            Code::BadFrame,
            format!(
                "the node answered a path that is not a staged upload \
                 (…/{UPLOADS_DIR_NAME}/<folder>/<the file's name>, with no `.` or `..`)"
            ),
        ));
    }
    Ok(Staged::Staged {
        name: name.to_owned(),
        path: head.path,
        size: head.size,
        quoted,
    })
}

/// Whether `path` is laid out as the node stages an upload (spec N-TERM; `ferry node run`
/// stages under `<state>/terminal-uploads/<folder>/<name>`): normal (no empty, `.` or `..`
/// component), the file's own `name` last, in a folder of 26 base32 characters, in
/// [`UPLOADS_DIR_NAME`]. A node that answers another path (`/etc/passwd`) would have the page paste
/// it as the dropped file.
fn in_staging_layout(platform: &str, path: &str, name: &str) -> bool {
    let separators: &[char] = if platform == "windows" {
        &['/', '\\']
    } else {
        &['/']
    };
    let parts: Vec<&str> = path.split(separators).collect();
    // The root's own empty part, or a drive (`C:`), or a UNC path's two.
    let start = if platform == "windows" && path.starts_with("\\\\") {
        2
    } else {
        1
    };
    let inner = parts.get(start..).unwrap_or_default();
    let normal = inner
        .iter()
        .all(|p| !p.is_empty() && *p != "." && *p != "..");
    let folder = |p: &str| {
        p.len() == 26
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
    };
    normal
        && matches!(inner, [.., uploads, id, file] if *uploads == UPLOADS_DIR_NAME && folder(id) && *file == name)
}

/// Whether `path` is absolute on `platform`: `/…`, or on Windows `X:\…`, `X:/…`, `\\…`.
fn is_absolute(platform: &str, path: &str) -> bool {
    if platform != "windows" {
        return path.starts_with('/');
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'\\' | b'/');
    drive || path.starts_with("\\\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_staged_uploads_path_is_taken() {
        let ok = |platform: &str, path: &str, name: &str| in_staging_layout(platform, path, name);
        let good = format!(
            "/home/a/state/terminal-uploads/{}/it's.txt",
            "a2b3c4d5e6f7g2h3i4j5k6l7m2"
        );
        assert!(ok("linux", &good, "it's.txt"));
        assert!(ok(
            "windows",
            "C:\\n\\terminal-uploads\\a2b3c4d5e6f7g2h3i4j5k6l7m2\\f.txt",
            "f.txt"
        ));
        for (path, name) in [
            ("/etc/passwd", "passwd"),
            ("/tmp/x/../../../etc/f.txt", "f.txt"),
            (&good[..], "other.txt"),
            (
                "/s/terminal-uploads/a2b3c4d5e6f7g2h3i4j5k6l7m2/../f.txt",
                "f.txt",
            ),
            (
                "/s/terminal-uploads//a2b3c4d5e6f7g2h3i4j5k6l7m2/f.txt",
                "f.txt",
            ),
            (
                "/s/terminal-uploads/./a2b3c4d5e6f7g2h3i4j5k6l7m2/f.txt",
                "f.txt",
            ),
            ("/s/other/a2b3c4d5e6f7g2h3i4j5k6l7m2/f.txt", "f.txt"),
            (
                "/s/terminal-uploads/A2B3C4D5E6F7G2H3I4J5K6L7M2/f.txt",
                "f.txt",
            ),
            (
                "/s/terminal-uploads/a2b3c4d5e6f7g2h3i4j5k6l7m/f.txt",
                "f.txt",
            ),
            (
                "/s/terminal-uploads/a2b3c4d5e6f7g2h3i4j5k6l7m2/f.txt/",
                "f.txt",
            ),
            (
                "/terminal-uploads/a2b3c4d5e6f7g2h3i4j5k6l7m2",
                "a2b3c4d5e6f7g2h3i4j5k6l7m2",
            ),
        ] {
            assert!(!ok("linux", path, name), "{path}");
        }
    }

    #[test]
    fn absolute_paths_by_platform() {
        assert!(is_absolute("linux", "/tmp/x"));
        assert!(!is_absolute("linux", "tmp/x"));
        assert!(!is_absolute("linux", ""));
        assert!(is_absolute("windows", "C:\\Users\\a"));
        assert!(is_absolute("windows", "c:/Users/a"));
        assert!(is_absolute("windows", "\\\\server\\share"));
        assert!(!is_absolute("windows", "C:relative"));
        assert!(!is_absolute("windows", "/tmp/x"));
    }

    fn verified(bytes: &[u8]) -> Verified {
        use sha2::Digest;
        Verified {
            size: bytes.len() as u64,
            sha256: sha2::Sha256::digest(bytes).into(),
        }
    }

    fn answer(path: &str, size: u64, sha256: &str) -> serde_json::Value {
        serde_json::json!({"path": path, "size": size, "sha256": sha256})
    }

    const STAGED: &str = "/tmp/s/terminal-uploads/a2b3c4d5e6f7g2h3i4j5k6l7m2";

    #[test]
    fn a_nodes_answer_is_checked_before_it_is_quoted() {
        let sent = verified(b"hello");
        let hex = sent.sha256_hex();
        let code = |r: Result<Staged, Failure>| r.err().map(|f| f.code);
        let ok = staged(
            "linux",
            "bash",
            "a'b",
            &sent,
            answer(&format!("{STAGED}/a'b"), 5, &hex),
        )
        .unwrap();
        let Staged::Staged { quoted, .. } = ok else {
            panic!("staged")
        };
        assert_eq!(quoted, format!(r"'{STAGED}/a'\''b'"));
        for (head, want) in [
            (answer("tmp/s/a", 5, &hex), Code::BadFrame),
            (answer("/tmp/s/a\nrm -rf ~", 5, &hex), Code::UnquotablePath),
            (
                answer(&format!("{STAGED}/a"), 6, &hex),
                Code::TransferMismatch,
            ),
            (answer("/etc/passwd", 5, &hex), Code::BadFrame),
            (
                answer("/tmp/s/a", 5, &"0".repeat(64)),
                Code::TransferMismatch,
            ),
            (serde_json::json!({"path": "/tmp/a"}), Code::BadFrame),
        ] {
            assert_eq!(
                code(staged("linux", "bash", "a", &sent, head.clone())),
                Some(want),
                "{head}"
            );
        }
        let cmd = staged(
            "windows",
            "cmd.exe",
            "a",
            &sent,
            answer("C:\\t\\100%", 5, &hex),
        );
        assert_eq!(code(cmd), Some(Code::UnquotablePath));
    }
}
