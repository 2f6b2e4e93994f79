//! File system failures as the gateway is told them: a ferry code and a sentence that
//! names only the path the gateway asked for.

use ferry_codes::Code;
use ferry_fs::FsError;

use crate::NodeError;

/// A refusal with `code` and `message`.
pub(super) fn refuse(code: Code, message: impl Into<String>) -> NodeError {
    NodeError::Remote {
        code,
        message: message.into(),
    }
}

/// What `error`, met while acting on `shown` (the path as asked), is answered with.
pub(super) fn fs_error(error: FsError, shown: &str) -> NodeError {
    let (code, message) = match &error {
        FsError::PathEscapes => (
            Code::PathDenied,
            format!(
                "a symbolic link is on the way to {shown}, and this node does not follow \
                 links (unless its policy allows it and the call asks for it)"
            ),
        ),
        FsError::NotFound => (Code::NotFound, format!("{shown} does not exist")),
        FsError::NotADirectory => (
            Code::NotADirectory,
            format!("a component of {shown} is not a folder"),
        ),
        FsError::IsDirectory => (Code::IsDirectory, format!("{shown} is a folder")),
        FsError::NotRegular => (
            Code::NotAFile,
            format!("{shown} is not a regular file (a device, a FIFO or a socket)"),
        ),
        FsError::Exists => (Code::Exists, format!("{shown} exists already")),
        FsError::PermissionDenied => (
            Code::PermissionDenied,
            format!("the node's permissions do not allow this on {shown}"),
        ),
        FsError::EmptyPath | FsError::PathTooLong | FsError::NulByte => {
            (Code::BadPath, format!("{shown} cannot be used: {error}"))
        }
        _ => (error.code(), format!("{shown}: {error}")),
    };
    refuse(code, message)
}
