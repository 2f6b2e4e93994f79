use ferry_codes::Code;
use ferry_fs::FsError;

/// Why a site operation failed; [`SiteError::code`] says how it is answered.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// An id that breaks the naming rule, so it cannot be a folder or a key.
    #[error(
        "{kind} id {id:?} is invalid: use 1 to 22 of a-z, 0-9, '_' and '-', starting with a letter or digit"
    )]
    InvalidId {
        /// What the id was for, e.g. `person` or `project`.
        kind: &'static str,
        /// The id as it was given.
        id: String,
    },
    /// A project's display name breaks a rule; holds what is wrong with it.
    #[error("the project name {0}")]
    BadProjectName(String),
    /// A project's display name gives no id (no letter or digit a-z, 0-9 in it); holds
    /// the name.
    #[error(
        "the project name {0:?} has no letter or digit a-z, 0-9 to make its id from: \
         add one, as in \"Q2 {0}\""
    )]
    NameGivesNoId(String),
    /// No person has this id on the site; holds the id asked for.
    #[error("there is no person {0:?}")]
    UnknownPerson(String),
    /// The person has no project with this id; holds the id asked for.
    #[error("there is no project {0:?}")]
    UnknownProject(String),
    /// Something is already there; holds what it is, for the message.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// An upload's file name ends in an extension the site refuses; holds the name.
    #[error("the extension of {0:?} is not allowed for uploads")]
    ExtensionNotAllowed(String),
    /// The path lies in `public/attachments`, which only the system writes.
    #[error("{} is managed by the system", crate::layout::ATTACHMENTS_PATH)]
    ManagedBySystem,
    /// A folder the system keeps was asked to be moved or deleted; holds its name.
    #[error("{0} is managed by the system and cannot be moved or deleted")]
    Reserved(&'static str),
    /// More than one request may carry (a folder download over its caps); says which.
    #[error("{0}")]
    TooBig(String),
    /// A search query that cannot be run (empty, or too long); says why.
    #[error("{0}")]
    BadQuery(String),
    /// A path given for the Files panel does not begin with `public/`.
    #[error("the path must start with public/")]
    OutsidePublic,
    /// The folder an upload was to be placed in is not there; holds its `public/…` path.
    #[error("there is no folder {0}: make it first, or upload into one that exists")]
    NoSuchFolder(String),
    /// A folder was to be moved to a place inside itself.
    #[error("a folder cannot be moved into itself")]
    MoveIntoItself,
    /// A path the site will not use because of what lies there, such as a symbolic link.
    #[error("{path} {why}")]
    Unsafe {
        /// The place, relative to the site's data folder.
        path: String,
        /// The rest of the sentence: what is wrong there and what to do.
        why: String,
    },
    /// No token of the person has an id beginning with the given prefix.
    #[error("no token starts with {0:?}")]
    UnknownToken(String),
    /// What was given to revoke cannot name tokens: says what can.
    #[error("{0}")]
    BadTokenPrefix(String),
    /// No node has this id; holds the id as a message may show it.
    #[error("there is no node {0}")]
    UnknownNode(String),
    /// A node's hello breaks a rule of the pairing records; says which.
    #[error("{0}")]
    BadNodeHello(String),
    /// Another key already holds this node id; holds the id.
    #[error("another key already holds node id {0}")]
    NodeKeyMismatch(String),
    /// Commands an approval may not name; says which and why.
    #[error("{0}")]
    BadNodeCommands(String),
    /// The node was revoked: it cannot be approved again; holds its id.
    #[error("node {0} is revoked; it cannot be approved again")]
    NodeRevoked(String),
    /// A new key came while as many nodes are pending as the site keeps; holds the cap.
    #[error(
        "{0} nodes are already waiting for approval; approve or revoke some before a new one can pair"
    )]
    TooManyPendingNodes(usize),
    /// A database row this code did not write; says which.
    #[error("metadata database: {0}")]
    CorruptRow(String),
    /// A question to the person failed or went unanswered.
    #[error(transparent)]
    Interaction(#[from] crate::InteractionError),
    /// Moving into the trash or restoring from it failed.
    #[error(transparent)]
    Trash(#[from] crate::TrashError),
    /// A share link could not be made or used.
    #[error(transparent)]
    Share(#[from] crate::ShareError),
    /// A confined file operation failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The metadata database refused a query.
    #[error("metadata database: {0}")]
    Db(#[from] ferry_sql::Error),
    /// Laying out or reading the site's folders failed outside the confined operations.
    #[error("site layout: {0}")]
    Io(#[from] std::io::Error),
}

impl SiteError {
    /// The code this failure is answered with, over HTTP and MCP alike.
    pub fn code(&self) -> Code {
        match self {
            SiteError::InvalidId { .. } => Code::InvalidId,
            SiteError::BadProjectName(_) | SiteError::NameGivesNoId(_) => Code::InvalidProjectName,
            SiteError::UnknownPerson(_) => Code::UnknownPerson,
            SiteError::UnknownProject(_) => Code::UnknownProject,
            SiteError::AlreadyExists(_) => Code::Exists,
            SiteError::ExtensionNotAllowed(_) => Code::ExtensionNotAllowed,
            SiteError::ManagedBySystem | SiteError::Reserved(_) => Code::ManagedBySystem,
            // The spec answers a path outside `public/` as one that does not exist.
            SiteError::OutsidePublic => Code::NotFound,
            SiteError::BadQuery(_) => Code::BadQuery,
            SiteError::TooBig(_) => Code::TooLarge,
            SiteError::MoveIntoItself => Code::InvalidMove,
            SiteError::NoSuchFolder(_) => Code::FolderNotFound,
            SiteError::Unsafe { .. } => Code::PathEscapes,
            SiteError::UnknownToken(_) => Code::UnknownToken,
            SiteError::BadTokenPrefix(_) => Code::InvalidId,
            SiteError::UnknownNode(_) => Code::UnknownNode,
            SiteError::BadNodeHello(_) => Code::BadHello,
            SiteError::NodeKeyMismatch(_) => Code::BadProof,
            SiteError::BadNodeCommands(_) => Code::CommandNotAdvertised,
            SiteError::NodeRevoked(_) => Code::NodeRevoked,
            SiteError::TooManyPendingNodes(_) => Code::TooManyPendingNodes,
            SiteError::CorruptRow(_) => Code::Internal,
            SiteError::Interaction(e) => e.code(),
            SiteError::Trash(e) => e.code(),
            SiteError::Share(e) => e.code(),
            SiteError::Fs(e) => e.code(),
            SiteError::Db(e) if e.is_disk_full() => Code::InsufficientStorage,
            // The server is down or the connection was cut: for now, not the request's
            // fault nor a failure of ferry's.
            SiteError::Db(e) if e.is_unreachable() => Code::SiteUnavailable,
            // A NUL in a name, an id or a message: the request's text, never a stored one.
            SiteError::Db(e) if e.is_unstorable_parameter() => Code::BadRequest,
            SiteError::Db(_) | SiteError::Io(_) => Code::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_under_the_metadata_is_insufficient_storage() {
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            Some("database or disk is full".into()),
        );
        let error = SiteError::Db(ferry_sql::Error::Sqlite(full));
        assert_eq!(error.code(), Code::InsufficientStorage);
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        assert_eq!(
            SiteError::Db(ferry_sql::Error::Sqlite(busy)).code(),
            Code::Internal
        );
    }
}
