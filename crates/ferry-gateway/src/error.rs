//! The one error shape of the HTTP edge:
//! `{"error":{"code":"snake_case","message":"…"}}` with the status of its [`Code`].

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use ferry_codes::Code;
use ferry_site::SiteError;
use serde::Serialize;
use utoipa::ToSchema;

/// The member of an error object that says, in whole seconds, when to try again; an
/// answer carrying it has the same number in `Retry-After`.
pub(crate) const RETRY_AFTER_SECS: &str = "retryAfterSecs";

/// The body of every error answer over HTTP.
#[derive(Serialize, ToSchema)]
#[schema(as = Error)]
pub(crate) struct ErrorBody {
    error: ErrorObject,
}

/// What failed, a sentence to act on, and the members some codes add (`existing` of
/// `409 exists`, `retryAfterSecs` of `429 rate_limited`).
#[derive(Serialize, ToSchema)]
struct ErrorObject {
    #[schema(schema_with = crate::openapi::code_schema)]
    code: Code,
    message: String,
    #[serde(flatten)]
    #[schema(ignore)]
    details: serde_json::Map<String, serde_json::Value>,
}

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    /// What failed; also says the status.
    pub code: Code,
    /// A sentence the client can act on.
    pub message: String,
    /// More members of the error object, for a client to act on (`existing` of a `409
    /// exists`).
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    /// An error with `code`, answered with the code's status.
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: serde_json::Map::new(),
        }
    }

    /// The same error with `key: value` in its object.
    pub fn with(mut self, key: &str, value: serde_json::Value) -> ApiError {
        self.details.insert(key.to_owned(), value);
        self
    }

    /// The HTTP status, the code's own.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// No valid token was sent.
    pub fn unauthorized() -> ApiError {
        ApiError::new(
            Code::Unauthorized,
            "send a valid token as 'Authorization: Bearer <token>'",
        )
    }

    /// No such file or folder.
    pub fn not_found() -> ApiError {
        ApiError::new(Code::NotFound, "no such file or folder")
    }

    /// A file over the limit of `limit` bytes.
    pub fn too_large(limit: u64) -> ApiError {
        ApiError::new(
            Code::TooLarge,
            format!("the file is larger than the limit of {limit} bytes"),
        )
    }

    /// A tool's failure where the API, not the model, is the caller.
    pub fn from_tool(err: ferry_tools::ToolError) -> ApiError {
        ApiError::failure(err.code, err.message, "tool")
    }

    /// The server's own failure: `err` goes to the log under `context`, not to the client.
    pub fn internal(context: &str, err: impl std::fmt::Display) -> ApiError {
        ApiError::failure(Code::Internal, err.to_string(), context)
    }

    /// A failure from below the HTTP edge, with its own code. An internal one keeps its
    /// code but not its sentence, which can name the server's files: that goes to the
    /// operator's log.
    fn failure(code: Code, message: String, context: &str) -> ApiError {
        if !code.is_internal() {
            return ApiError::new(code, message);
        }
        tracing::error!("{context}: {message}");
        ApiError::new(
            code,
            "the server failed; the operator's log has the details",
        )
    }
}

impl From<ferry_exec::RequestError> for ApiError {
    /// A failure of an operation done as the person, with the operation's own code.
    fn from(err: ferry_exec::RequestError) -> ApiError {
        ApiError::failure(err.code, err.message, "requester")
    }
}

impl From<SiteError> for ApiError {
    fn from(err: SiteError) -> ApiError {
        if let SiteError::Db(e) = &err
            && e.is_unreachable()
        {
            // The details (the server's address, the driver's words) go to the log only.
            tracing::warn!("site: {e}");
            return ApiError::new(
                err.code(),
                "the metadata database does not answer now; try again shortly",
            )
            .with(RETRY_AFTER_SECS, serde_json::json!(1));
        }
        let message = err.to_string();
        ApiError::failure(err.code(), message, "site")
    }
}

impl From<ferry_media::MediaError> for ApiError {
    fn from(err: ferry_media::MediaError) -> ApiError {
        ApiError::failure(err.code(), err.shown(), "media store")
    }
}

impl From<ferry_archive::ArchiveError> for ApiError {
    fn from(err: ferry_archive::ArchiveError) -> ApiError {
        ApiError::failure(err.code(), err.to_string(), "archive")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        // A refusal for now says when to come back, in the header HTTP clients know as
        // well as in the body (`retryAfterSecs`, whole seconds).
        let retry_after = self
            .details
            .get(RETRY_AFTER_SECS)
            .and_then(serde_json::Value::as_u64);
        let body = Json(ErrorBody {
            error: ErrorObject {
                code: self.code,
                message: self.message,
                details: self.details,
            },
        });
        let mut response = (status, body).into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
