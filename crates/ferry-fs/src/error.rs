use ferry_codes::Code;
use rustix::io::Errno;

/// Why a confined file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path would leave its root, or a symbolic link lies on the way.
    #[error("the path leads outside its folder or through a symbolic link")]
    PathEscapes,
    /// No path was given at all.
    #[error("the path is empty")]
    EmptyPath,
    /// The path is over the 4096-byte limit the kernel accepts, or a name in it over
    /// the 255 bytes of a name (the kernel's `ENAMETOOLONG` says either).
    #[error("the path is longer than 4096 bytes, or a name in it longer than 255 bytes")]
    PathTooLong,
    /// The path holds a NUL byte, which no system call can pass on.
    #[error("the path contains a NUL byte")]
    NulByte,
    /// A name with control characters, separators or a leading dot; holds the name.
    #[error("the name {0:?} is not a safe file name")]
    UnsafeName(String),
    /// A name a person typed that cannot be a name at all, and why.
    #[error("the name {name:?} cannot be used: {why}")]
    UnusableName {
        /// The name as typed.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Nothing exists at the path.
    #[error("no such file or folder")]
    NotFound,
    /// The target is already taken, and the operation will not replace it.
    #[error("something already exists at that path")]
    Exists,
    /// A file was asked for, but the path names a folder.
    #[error("the path is a folder")]
    IsDirectory,
    /// A component on the way to the target is not a folder.
    #[error("a parent in the path is not a folder")]
    NotADirectory,
    /// The path names a device, socket, pipe or link where a plain file is needed.
    #[error("the path is not a regular file")]
    NotRegular,
    /// A folder still has entries, so it cannot be removed as empty.
    #[error("the folder is not empty")]
    NotEmpty,
    /// The file passed a size limit; holds that limit in bytes.
    #[error("the file is larger than the limit of {0} bytes")]
    TooLarge(u64),
    /// A write would take the owner past their storage quota.
    #[error(
        "this would pass the storage quota of {limit} bytes: {used} bytes are in use \
         (public/ folders and saved command output); delete files there first, or ask the \
         operator for a larger [limits] person_max_bytes"
    )]
    QuotaExceeded {
        /// The quota, in bytes.
        limit: u64,
        /// Bytes counted against it, besides the refused write.
        used: u64,
    },
    /// The disk is full, or the file system's own quota for the owner is reached (ENOSPC,
    /// EDQUOT). The write that met it is undone like any failed write: its temporary goes,
    /// and the file it would have replaced stays.
    #[error(
        "the disk that holds the files is full: nothing was written, and the file that \
         was there is unchanged; free some space, or ask the operator for a larger disk"
    )]
    NoSpace,
    /// The kernel refused the operation (EACCES or EPERM).
    #[error(
        "permission denied (the permissions of the file or of a folder on its way do not allow this)"
    )]
    PermissionDenied,
    /// What the process acting as the person answered when it did file work for this
    /// one (counting their files, say): its code and sentence, kept as they came.
    #[error("{message}")]
    Relayed {
        /// The code it failed with.
        code: Code,
        /// Its sentence.
        message: String,
    },
    /// Any other failure of the operating system, kept as it came.
    #[error(transparent)]
    Io(std::io::Error),
}

impl FsError {
    /// The code this failure is answered with, over HTTP and MCP alike.
    pub fn code(&self) -> Code {
        match self {
            FsError::PathEscapes => Code::PathEscapes,
            FsError::EmptyPath | FsError::PathTooLong | FsError::NulByte => Code::BadPath,
            FsError::UnsafeName(_) | FsError::UnusableName { .. } => Code::UnsafeName,
            FsError::NotFound => Code::NotFound,
            FsError::Exists => Code::Exists,
            FsError::IsDirectory => Code::IsDirectory,
            FsError::NotADirectory => Code::NotADirectory,
            FsError::NotRegular => Code::NotAFile,
            FsError::NotEmpty => Code::NotEmpty,
            FsError::TooLarge(_) => Code::TooLarge,
            FsError::QuotaExceeded { .. } => Code::QuotaExceeded,
            FsError::NoSpace => Code::InsufficientStorage,
            FsError::PermissionDenied => Code::PermissionDenied,
            FsError::Relayed { code, .. } => *code,
            FsError::Io(_) => Code::IoError,
        }
    }

    /// The error for an `errno` seen outside this crate (an operation done as a person
    /// through plain paths), mapped as the confined operations map theirs.
    pub fn from_raw_os_error(errno: i32) -> FsError {
        FsError::from_errno(Errno::from_raw_os_error(errno))
    }

    /// The error for a failed `std` call: mapped by its `errno` like every confined
    /// operation (so EACCES is [`FsError::PermissionDenied`], never an `io_error`), kept as
    /// it came when it has none.
    pub fn from_io(e: std::io::Error) -> FsError {
        match e.raw_os_error() {
            Some(errno) => FsError::from_raw_os_error(errno),
            None => FsError::Io(e),
        }
    }

    pub(crate) fn from_errno(e: Errno) -> FsError {
        match e {
            // EXDEV: RESOLVE_BENEATH saw an escape; ELOOP: a link where none may be.
            Errno::XDEV | Errno::LOOP => FsError::PathEscapes,
            Errno::NOENT => FsError::NotFound,
            Errno::EXIST => FsError::Exists,
            Errno::ISDIR => FsError::IsDirectory,
            Errno::NOTDIR => FsError::NotADirectory,
            Errno::NOTEMPTY => FsError::NotEmpty,
            Errno::ACCESS | Errno::PERM => FsError::PermissionDenied,
            Errno::NAMETOOLONG => FsError::PathTooLong,
            Errno::NOSPC | Errno::DQUOT => FsError::NoSpace,
            // Opening a socket (or a device with no driver) for reading: not a file.
            Errno::NXIO => FsError::NotRegular,
            other => FsError::Io(other.into()),
        }
    }
}

impl From<std::io::Error> for FsError {
    fn from(e: std::io::Error) -> FsError {
        FsError::from_io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_opened_for_reading_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("s")).unwrap();
        let root = crate::Dir::open_ambient(dir.path()).unwrap();
        let e = root.open_file("s", crate::Follow::Never).unwrap_err();
        assert_eq!(e.code(), Code::NotAFile, "{e:?}");
    }

    #[test]
    fn a_refused_std_call_is_permission_denied_not_io() {
        for errno in [Errno::ACCESS, Errno::PERM].map(Errno::raw_os_error) {
            let e = FsError::from(std::io::Error::from_raw_os_error(errno));
            assert_eq!(e.code(), Code::PermissionDenied, "{errno}: {e:?}");
        }
        let e = FsError::from(std::io::Error::from_raw_os_error(
            Errno::NOENT.raw_os_error(),
        ));
        assert_eq!(e.code(), Code::NotFound);
        // No errno: kept as it came.
        let e = FsError::from(std::io::Error::other("gone wrong"));
        assert_eq!(e.code(), Code::IoError);
    }

    #[test]
    fn a_relayed_failure_keeps_its_code_and_sentence() {
        let e = FsError::Relayed {
            code: Code::WorkerFailed,
            message: "the worker went away".into(),
        };
        assert_eq!(e.code(), Code::WorkerFailed);
        assert_eq!(e.to_string(), "the worker went away");
    }
}
