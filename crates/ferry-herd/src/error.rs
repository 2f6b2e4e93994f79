//! The one failure of a herd operation: a code clients match on and a sentence.

use ferry_codes::Code;
use ferry_exec::RequestError;
use ferry_fs::FsError;

/// Why a herd operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
#[serde(deny_unknown_fields)]
pub struct HerdError {
    /// What failed, as clients match on it.
    pub code: Code,
    /// A sentence a person or a model can act on.
    pub message: String,
    /// An `assign` that had started a worker undid exactly that (H-ASSIGN).
    pub rollback_occurred: bool,
}

impl HerdError {
    /// A failure with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> HerdError {
        HerdError {
            code,
            message: message.into(),
            rollback_occurred: false,
        }
    }

    /// `invalid_request` with `message`.
    pub fn invalid(message: impl Into<String>) -> HerdError {
        HerdError::new(Code::InvalidRequest, message)
    }

    /// The same failure, its sentence led by `context` (`"reading notes.md: …"`).
    pub fn context(self, context: impl std::fmt::Display) -> HerdError {
        HerdError {
            message: format!("{context}: {}", self.message),
            ..self
        }
    }
}

impl From<RequestError> for HerdError {
    fn from(e: RequestError) -> HerdError {
        HerdError::new(e.code, e.message)
    }
}

impl From<FsError> for HerdError {
    fn from(e: FsError) -> HerdError {
        RequestError::from(e).into()
    }
}

impl From<std::io::Error> for HerdError {
    fn from(e: std::io::Error) -> HerdError {
        RequestError::from(e).into()
    }
}
