//! What a call to the gateway can end in.

use ferry_codes::Code;
use reqwest::{Response, StatusCode};
use serde::Deserialize;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The caller asked for something that cannot be sent (a bad URL, no token).
    #[error("{0}")]
    Usage(String),
    /// The gateway answered with an error.
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        /// The HTTP status.
        status: StatusCode,
        /// The error code the gateway named (`not_found`, `exists`, …).
        code: String,
        /// The gateway's sentence.
        message: String,
    },
    /// The gateway could not be reached, or the connection broke.
    #[error("the gateway could not be reached: {0}")]
    Transport(String),
    /// A local file could not be read or written.
    #[error("{path}: {source}")]
    Local {
        /// The local path.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The gateway answered something this client does not understand.
    #[error("the gateway answered unexpectedly: {0}")]
    Protocol(String),
}

impl ClientError {
    pub(crate) fn transport(e: reqwest::Error) -> ClientError {
        // reqwest's Display leaves out the cause ("error sending request"); its source
        // chain says what actually happened (connection refused, reset…).
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        ClientError::Transport(text)
    }

    pub(crate) fn local(path: &std::path::Path, source: std::io::Error) -> ClientError {
        ClientError::Local {
            path: path.display().to_string(),
            source,
        }
    }

    /// True when the thing asked for does not exist (HTTP 404, or a code that means it).
    pub fn is_not_found(&self) -> bool {
        match self {
            // A route the gateway does not have is a gateway too old, not a missing file.
            ClientError::Api { code, .. } if code == Code::NoRoute.as_str() => false,
            ClientError::Api { status, code, .. } => {
                *status == StatusCode::NOT_FOUND
                    || Code::parse(code).is_some_and(|c| c.status() == 404)
            }
            ClientError::Local { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }

    /// True when a retry may succeed: the connection broke, or the gateway was briefly away.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            ClientError::Transport(_) => true,
            ClientError::Api { status, .. } => {
                matches!(status.as_u16(), 502..=504)
            }
            _ => false,
        }
    }
}

#[derive(Deserialize)]
struct ErrorJson {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: String,
    message: String,
}

/// `response` itself when it succeeded, else its error as [`ClientError::Api`].
pub(crate) async fn check(response: Response) -> Result<Response, ClientError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.bytes().await.unwrap_or_default();
    Err(match serde_json::from_slice::<ErrorJson>(&body) {
        Ok(ErrorJson { error }) => ClientError::Api {
            status,
            code: error.code,
            message: error.message,
        },
        Err(_) => ClientError::Api {
            status,
            code: format!("http_{}", status.as_u16()),
            message: status
                .canonical_reason()
                .unwrap_or("the gateway refused the request")
                .to_owned(),
        },
    })
}
