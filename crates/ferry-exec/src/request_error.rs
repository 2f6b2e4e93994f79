use ferry_codes::Code;
use ferry_fs::FsError;
use serde::{Deserialize, Serialize};

use crate::ExecError;

/// Why a requested operation failed: a stable code and a sentence a model can act on.
///
/// It crosses the worker's socket in host mode, so it is plain data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    /// What failed.
    pub code: Code,
    /// A sentence a model can act on.
    pub message: String,
}

impl RequestError {
    /// A failure with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> RequestError {
        RequestError {
            code,
            message: message.into(),
        }
    }
}

impl From<FsError> for RequestError {
    fn from(e: FsError) -> RequestError {
        // The code is the file system's own; only the sentence is said for a model.
        let message = match &e {
            FsError::PathEscapes => "the path leads outside the workspace or through a symbolic \
                                     link; use a plain path inside it"
                .to_owned(),
            FsError::NotFound => {
                "no such file or folder; check the path (dir_list shows what exists)".to_owned()
            }
            FsError::IsDirectory => "the path is a folder, not a file".to_owned(),
            FsError::PermissionDenied => "permission denied: the person this workspace belongs \
                                          to may not do that here"
                .to_owned(),
            FsError::Io(io) => format!("the file system failed: {io}"),
            _ => e.to_string(),
        };
        RequestError::new(e.code(), message)
    }
}

impl From<std::io::Error> for RequestError {
    fn from(e: std::io::Error) -> RequestError {
        match e.raw_os_error() {
            Some(errno) => FsError::from_raw_os_error(errno).into(),
            None => RequestError::new(Code::IoError, format!("the file system failed: {e}")),
        }
    }
}

impl From<ExecError> for RequestError {
    fn from(e: ExecError) -> RequestError {
        RequestError::new(e.code(), e.to_string())
    }
}
