//! The one error shape of the HTTP edge:
//! `{"error":{"code":"snake_case","message":"…"}}` with the status the spec names.

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use ferry_fs::FsError;
use ferry_site::SiteError;
use serde_json::json;

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send a valid token as 'Authorization: Bearer <token>'",
        )
    }

    pub fn not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such file or folder")
    }

    pub fn too_large(limit: u64) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the file is larger than the limit of {limit} bytes"),
        )
    }

    /// A tool's failure where the API, not the model, is the caller.
    pub fn from_tool(err: ferry_tools::ToolError) -> ApiError {
        match err.code.as_str() {
            "unknown_person" => ApiError::new(StatusCode::NOT_FOUND, "not_found", err.message),
            "permission_denied" => {
                ApiError::new(StatusCode::FORBIDDEN, "permission_denied", err.message)
            }
            "quota_exceeded" => ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "quota_exceeded",
                err.message,
            ),
            _ => ApiError::internal("tool", err.message),
        }
    }

    pub fn internal(context: &str, err: impl std::fmt::Display) -> ApiError {
        tracing::error!("{context}: {err}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed; the operator's log has the details",
        )
    }
}

impl From<SiteError> for ApiError {
    fn from(err: SiteError) -> ApiError {
        use StatusCode as S;
        let message = err.to_string();
        let (status, code) = match &err {
            SiteError::InvalidId { .. } => (S::BAD_REQUEST, "invalid_id"),
            SiteError::UnknownPerson(_) | SiteError::OutsidePublic => (S::NOT_FOUND, "not_found"),
            SiteError::UnknownProject(_) => (S::NOT_FOUND, "unknown_project"),
            SiteError::UnknownToken(_) => (S::NOT_FOUND, "unknown_token"),
            SiteError::AlreadyExists(_) => (S::CONFLICT, "exists"),
            SiteError::ManagedBySystem | SiteError::Reserved(_) => {
                (S::FORBIDDEN, "managed_by_system")
            }
            SiteError::MoveIntoItself => (S::BAD_REQUEST, "invalid_move"),
            SiteError::Unsafe { .. } => (S::BAD_REQUEST, "path_escapes"),
            SiteError::ExtensionNotAllowed(_) => (S::BAD_REQUEST, "extension_not_allowed"),
            SiteError::Fs(fs) => return fs_error(fs, message),
            SiteError::Interaction(e) => return crate::interactions::api_error(e, message),
            SiteError::Db(_) | SiteError::Io(_) => return ApiError::internal("site", err),
        };
        ApiError::new(status, code, message)
    }
}

fn fs_error(err: &FsError, message: String) -> ApiError {
    use StatusCode as S;
    let (status, code) = match err {
        FsError::PathEscapes => (S::BAD_REQUEST, "path_escapes"),
        FsError::EmptyPath | FsError::PathTooLong | FsError::NulByte => {
            (S::BAD_REQUEST, "bad_path")
        }
        FsError::UnsafeName(_) => (S::BAD_REQUEST, "unsafe_name"),
        FsError::NotFound => (S::NOT_FOUND, "not_found"),
        FsError::Exists => (S::CONFLICT, "exists"),
        FsError::NotEmpty => (S::CONFLICT, "not_empty"),
        FsError::IsDirectory => (S::BAD_REQUEST, "is_directory"),
        FsError::NotADirectory => (S::BAD_REQUEST, "not_a_directory"),
        FsError::NotRegular => (S::BAD_REQUEST, "not_a_file"),
        FsError::TooLarge(limit) => return ApiError::too_large(*limit),
        FsError::QuotaExceeded { .. } => (S::INSUFFICIENT_STORAGE, "quota_exceeded"),
        FsError::PermissionDenied => (S::FORBIDDEN, "permission_denied"),
        FsError::Io(_) => return ApiError::internal("file system", err),
    };
    ApiError::new(status, code, message)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({"error": {"code": self.code, "message": self.message}}));
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
