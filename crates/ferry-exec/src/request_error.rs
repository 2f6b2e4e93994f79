use ferry_fs::FsError;
use serde::{Deserialize, Serialize};

use crate::ExecError;

/// Why a requested operation failed: a stable code and a sentence a model can act on.
///
/// It crosses the worker's socket in host mode, so it is plain data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub code: String,
    pub message: String,
}

impl RequestError {
    pub fn new(code: &str, message: impl Into<String>) -> RequestError {
        RequestError {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

impl From<FsError> for RequestError {
    fn from(e: FsError) -> RequestError {
        let (code, message) = match &e {
            FsError::PathEscapes => (
                "path_escapes",
                "the path leads outside the workspace or through a symbolic link; use a plain \
                 path inside it"
                    .to_owned(),
            ),
            FsError::EmptyPath => ("invalid_path", "the path is empty".to_owned()),
            FsError::PathTooLong => ("invalid_path", "the path is longer than 4096 bytes".into()),
            FsError::NulByte => ("invalid_path", "the path contains a NUL byte".into()),
            FsError::UnsafeName(_) => ("unsafe_name", e.to_string()),
            FsError::NotFound => (
                "not_found",
                "no such file or folder; check the path (dir_list shows what exists)".into(),
            ),
            FsError::Exists => ("exists", e.to_string()),
            FsError::IsDirectory => ("is_directory", "the path is a folder, not a file".into()),
            FsError::NotADirectory => ("not_a_directory", e.to_string()),
            FsError::NotRegular => ("not_regular", e.to_string()),
            FsError::NotEmpty => ("not_empty", e.to_string()),
            FsError::TooLarge(_) => ("too_large", e.to_string()),
            FsError::QuotaExceeded { .. } => ("quota_exceeded", e.to_string()),
            FsError::PermissionDenied => (
                "permission_denied",
                "permission denied: the person this workspace belongs to may not do that here"
                    .into(),
            ),
            FsError::Io(io) => ("io_error", format!("the file system failed: {io}")),
        };
        RequestError::new(code, message)
    }
}

impl From<std::io::Error> for RequestError {
    fn from(e: std::io::Error) -> RequestError {
        match e.raw_os_error() {
            Some(errno) => FsError::from_raw_os_error(errno).into(),
            None => RequestError::new("io_error", format!("the file system failed: {e}")),
        }
    }
}

impl From<ExecError> for RequestError {
    fn from(e: ExecError) -> RequestError {
        RequestError::new(e.code(), e.to_string())
    }
}
