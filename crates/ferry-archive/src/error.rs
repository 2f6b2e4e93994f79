//! The one error of this crate; every variant carries its [`Code`].

use ferry_codes::Code;
use ferry_fs::FsError;

/// Why an archive was refused, or could not be written or extracted.
///
/// Names in messages are quoted with escapes, so a newline or a control character in a
/// hostile name cannot forge a line of a log.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// An entry is not a regular file or a folder.
    #[error("the archive holds {what} at {path:?}; only regular files and folders are accepted")]
    UnsupportedEntry {
        /// The entry's name, as far as it could be read.
        path: String,
        /// What the entry is ("a symbolic link", "a FIFO", …).
        what: String,
    },
    /// A name is absolute, has a `..`, an empty component, a NUL or (for Windows) a backslash.
    #[error("the name {path:?} leads outside the destination: {why}")]
    PathEscapes {
        /// The name.
        path: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A name is not valid UTF-8.
    #[error("the name {path:?} is not valid UTF-8")]
    InvalidUnicode {
        /// The name, its invalid bytes replaced.
        path: String,
    },
    /// Two names would be one on the destination.
    #[error("the names {path:?} and {other:?} would be one on the destination: {why}")]
    NameCollision {
        /// The later name.
        path: String,
        /// The name it collides with.
        other: String,
        /// How they collide.
        why: &'static str,
    },
    /// A name cannot exist on the destination platform.
    #[error("the name {path:?} cannot exist on {platform}: {why}")]
    PlatformName {
        /// The name.
        path: String,
        /// The destination platform.
        platform: &'static str,
        /// Which rule it breaks.
        why: String,
    },
    /// The path policy denies a name (an implicit parent folder included).
    #[error("the path policy denies {path:?}")]
    PathDenied {
        /// The denied name.
        path: String,
    },
    /// The archive is damaged or is not a tar.
    #[error("the archive is malformed: {0}")]
    Malformed(String),
    /// The archive's bytes, as they arrive, pass their cap.
    #[error("the archive is larger than the limit of {limit} bytes")]
    ArchiveTooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// One file of the archive passes its cap.
    #[error("the file {path:?} has {size} bytes, more than the limit of {limit} bytes per file")]
    EntryTooLarge {
        /// The file's name.
        path: String,
        /// Its declared size.
        size: u64,
        /// The cap, in bytes.
        limit: u64,
    },
    /// The files of the archive (with their PAX and long-name records) together pass their cap.
    #[error(
        "the archive unpacks to more than the limit of {limit} bytes (its files with their \
         PAX and long-name records)"
    )]
    UnpackedTooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// A PAX header or GNU long name passes its cap.
    #[error("a {what} of {size} bytes is larger than the limit of {limit} bytes")]
    HeaderTooLarge {
        /// Which record ("PAX header", "GNU long name").
        what: &'static str,
        /// Its declared size.
        size: u64,
        /// The cap, in bytes.
        limit: u64,
    },
    /// The archive has more descendants than it may, implicit parents counted.
    #[error("the archive has more than {limit} files and folders (parent folders counted)")]
    TooManyEntries {
        /// The cap.
        limit: u64,
    },
    /// A file given to the writer had another size than it declared.
    #[error(
        "the file {path:?} changed while it was archived: {declared} bytes were declared, {found}"
    )]
    ChangedMeanwhile {
        /// The file's name in the archive.
        path: String,
        /// The size declared for it.
        declared: u64,
        /// What was found instead ("only 10 were read", "more were there").
        found: String,
    },
    /// A glob of the path policy does not parse.
    #[error("the glob {glob:?} is not valid: {why}")]
    BadGlob {
        /// The glob as given.
        glob: String,
        /// Why it does not parse.
        why: String,
    },
    /// A name given to the writer is not one the planner would admit.
    #[error("the name {path:?} cannot be archived: {why}")]
    BadName {
        /// The name.
        path: String,
        /// Why.
        why: &'static str,
    },
    /// The destination folder could not be written.
    #[error("extracting failed: {0}")]
    Fs(#[from] FsError),
    /// The archive could not be read, or the written archive not be written.
    #[error("reading or writing the archive failed: {0}")]
    Io(std::io::Error),
}

impl ArchiveError {
    /// The code this failure is answered with, over HTTP and MCP alike.
    pub fn code(&self) -> Code {
        match self {
            ArchiveError::UnsupportedEntry { .. } => Code::UnsupportedEntry,
            ArchiveError::PathEscapes { .. } => Code::PathEscapes,
            ArchiveError::InvalidUnicode { .. } => Code::InvalidUnicode,
            ArchiveError::NameCollision { .. } => Code::NameCollision,
            ArchiveError::PlatformName { .. } => Code::PlatformName,
            ArchiveError::PathDenied { .. } => Code::PathDenied,
            ArchiveError::Malformed(_) => Code::MalformedArchive,
            ArchiveError::ArchiveTooLarge { .. }
            | ArchiveError::EntryTooLarge { .. }
            | ArchiveError::UnpackedTooLarge { .. }
            | ArchiveError::HeaderTooLarge { .. } => Code::TooLarge,
            ArchiveError::TooManyEntries { .. } => Code::TooManyEntries,
            ArchiveError::ChangedMeanwhile { .. } => Code::ChangedMeanwhile,
            ArchiveError::BadGlob { .. } => Code::InvalidRequest,
            ArchiveError::BadName { .. } => Code::BadPath,
            ArchiveError::Fs(e) => e.code(),
            ArchiveError::Io(_) => Code::IoError,
        }
    }

    /// A malformed archive, with the sentence saying how.
    pub(crate) fn malformed(why: impl Into<String>) -> ArchiveError {
        ArchiveError::Malformed(why.into())
    }
}
