//! The one error of the node link, each variant with its [`Code`].

use std::path::PathBuf;

use ferry_codes::Code;

/// Why something on the node link failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NodeError {
    /// The other end sent a frame that breaks the protocol.
    #[error("the other end of the node link sent a bad frame: {0}")]
    BadFrame(String),
    /// The node's hello is malformed.
    #[error("the node's hello is not valid: {0}")]
    BadHello(String),
    /// The node's proof of identity does not verify.
    #[error("the node's proof of identity does not verify: {0}")]
    BadProof(String),
    /// The node's state folder or key file cannot be used.
    #[error("{}: {reason}", path.display())]
    State {
        /// The folder or file at fault.
        path: PathBuf,
        /// What is wrong with it and what to do.
        reason: String,
    },
    /// The link is down (or went down during the call).
    #[error("the node is offline: {0}")]
    Offline(String),
    /// As many calls are in flight on the link as it carries.
    #[error("the node link carries {0} calls already; try again when one has finished")]
    Busy(usize),
    /// The call was cancelled.
    #[error("the call was cancelled")]
    Cancelled,
    /// A checked body does not match the length or sha256 it carries, or stops short.
    #[error("the transfer is not what the node said it is: {0}")]
    Mismatch(String),
    /// The other end sent nothing on a call for this long.
    #[error("the node sent nothing for {} s; the call was cancelled", .0.as_secs())]
    Stalled(std::time::Duration),
    /// A body is larger than the receiver takes.
    #[error("the transfer is larger than the {0} bytes it may be")]
    TooLarge(u64),
    /// The other end answered the call with an error.
    #[error("{message}")]
    Remote {
        /// The code the other end answered.
        code: Code,
        /// Its sentence (length-limited by the frame format).
        message: String,
    },
}

impl NodeError {
    /// The code this failure is answered with.
    pub fn code(&self) -> Code {
        match self {
            NodeError::BadFrame(_) => Code::BadFrame,
            NodeError::BadHello(_) => Code::BadHello,
            NodeError::BadProof(_) => Code::BadProof,
            NodeError::State { .. } => Code::NodeStateUnusable,
            NodeError::Offline(_) => Code::NodeOffline,
            NodeError::Busy(_) => Code::LinkBusy,
            NodeError::Cancelled => Code::CallCancelled,
            NodeError::Mismatch(_) => Code::TransferMismatch,
            NodeError::TooLarge(_) => Code::TooLarge,
            NodeError::Stalled(_) => Code::TransferStalled,
            NodeError::Remote { code, .. } => *code,
        }
    }

    pub(crate) fn frame(reason: impl Into<String>) -> NodeError {
        NodeError::BadFrame(reason.into())
    }

    pub(crate) fn state(path: impl Into<PathBuf>, reason: impl Into<String>) -> NodeError {
        NodeError::State {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
