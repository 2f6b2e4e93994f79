use ferry_codes::Code;
use ferry_fs::FsError;

/// Why a site operation failed; [`SiteError::code`] says how it is answered.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error(
        "{kind} id {id:?} is invalid: use 1 to 22 of a-z, 0-9, '_' and '-', starting with a letter or digit"
    )]
    InvalidId { kind: &'static str, id: String },
    #[error("there is no person {0:?}")]
    UnknownPerson(String),
    #[error("there is no project {0:?}")]
    UnknownProject(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error("the extension of {0:?} is not allowed for uploads")]
    ExtensionNotAllowed(String),
    #[error("{} is managed by the system", crate::layout::ATTACHMENTS_PATH)]
    ManagedBySystem,
    #[error("{0} is managed by the system and cannot be moved or deleted")]
    Reserved(&'static str),
    #[error("the path must start with public/")]
    OutsidePublic,
    #[error("a folder cannot be moved into itself")]
    MoveIntoItself,
    #[error("{path} {why}")]
    Unsafe { path: String, why: String },
    #[error("no token starts with {0:?}")]
    UnknownToken(String),
    #[error(transparent)]
    Interaction(#[from] crate::InteractionError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("metadata database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("site layout: {0}")]
    Io(#[from] std::io::Error),
}

impl SiteError {
    /// The code this failure is answered with, over HTTP and MCP alike.
    pub fn code(&self) -> Code {
        match self {
            SiteError::InvalidId { .. } => Code::InvalidId,
            SiteError::UnknownPerson(_) => Code::UnknownPerson,
            SiteError::UnknownProject(_) => Code::UnknownProject,
            SiteError::AlreadyExists(_) => Code::Exists,
            SiteError::ExtensionNotAllowed(_) => Code::ExtensionNotAllowed,
            SiteError::ManagedBySystem | SiteError::Reserved(_) => Code::ManagedBySystem,
            // The spec answers a path outside `public/` as one that does not exist.
            SiteError::OutsidePublic => Code::NotFound,
            SiteError::MoveIntoItself => Code::InvalidMove,
            SiteError::Unsafe { .. } => Code::PathEscapes,
            SiteError::UnknownToken(_) => Code::UnknownToken,
            SiteError::Interaction(e) => e.code(),
            SiteError::Fs(e) => e.code(),
            SiteError::Db(_) | SiteError::Io(_) => Code::Internal,
        }
    }
}
