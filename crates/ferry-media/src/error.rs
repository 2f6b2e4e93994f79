//! The one error of the media store, each variant with its code.

use ferry_codes::Code;

/// Why a media store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// The value is not an id this store issued: a path, a foreign or malformed id, or
    /// one whose record is gone.
    #[error("{0:?} is not a media id of this store (ids look like name~k3j9x2m1q8ab.txt)")]
    UnknownMediaId(String),
    /// The source's name or path is longer than [`ferry_fs::PATH_MAX_BYTES`].
    #[error("the source's name or path is over {max_bytes} bytes")]
    NameTooLong {
        /// The cap, in bytes.
        max_bytes: usize,
    },
    /// The content is longer than the put's cap.
    #[error("the content is over {max_bytes} bytes")]
    TooLarge {
        /// The cap, in bytes.
        max_bytes: u64,
    },
    /// Reading the content failed (the caller's reader or stream).
    #[error("reading the content failed: {0}")]
    Source(std::io::Error),
    /// The blob store failed.
    #[error("the media store failed: {0}")]
    Store(#[from] object_store::Error),
    /// A record's blob is missing from the store.
    #[error("the bytes of {0} are missing from the media store")]
    BlobMissing(String),
    /// The records failed (the metadata database).
    #[error("the media records failed: {0}")]
    Records(String),
    /// A confined file-system call failed (a fetched tree's folder).
    #[error("the media store failed: {0}")]
    Fs(#[from] ferry_fs::FsError),
    /// A local file-system call failed.
    #[error("the media store failed: {0}")]
    Io(#[from] std::io::Error),
}

impl MediaError {
    /// The sentence for whoever asked from outside (an agent, a page): a failure of the
    /// store itself is told in general words, and its own (the endpoint, the bucket, the
    /// keys' id, request ids) go to the gateway's log only.
    pub fn shown(&self) -> String {
        if self.is_no_space() {
            return ferry_fs::FsError::NoSpace.to_string();
        }
        match self {
            MediaError::Store(e) => {
                tracing::warn!("the media store failed: {e}");
                "the media store failed; the gateway's log says why".to_owned()
            }
            other => other.to_string(),
        }
    }

    /// The code this failure is answered with.
    pub fn code(&self) -> Code {
        if self.is_no_space() {
            return Code::InsufficientStorage;
        }
        match self {
            MediaError::UnknownMediaId(_) => Code::UnknownMediaId,
            MediaError::NameTooLong { .. } => Code::BadPath,
            MediaError::TooLarge { .. } => Code::TooLarge,
            MediaError::Source(_) => Code::BadBody,
            MediaError::Fs(e) => e.code(),
            MediaError::Store(_)
            | MediaError::BlobMissing(_)
            | MediaError::Records(_)
            | MediaError::Io(_) => Code::IoError,
        }
    }
}

impl MediaError {
    /// Whether the disk under the store is full (ENOSPC, or its quota is reached):
    /// somewhere in the chain of causes, as the local store wraps the system's error in
    /// its own, twice.
    fn is_no_space(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(error) = cause {
            if let Some(ferry_fs::FsError::NoSpace) = error.downcast_ref::<ferry_fs::FsError>() {
                return true;
            }
            cause = match error.downcast_ref::<std::io::Error>() {
                Some(io) if matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
                    return true;
                }
                // An error wrapped in an `io::Error` is its inner error, not its source.
                Some(io) => match io.get_ref() {
                    Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                    None => error.source(),
                },
                None => error.source(),
            };
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has its code; no wildcard, so a new variant must be listed.
    #[test]
    fn every_variant_says_its_code() {
        let io = || std::io::Error::other("x");
        for (error, code) in [
            (
                MediaError::UnknownMediaId("a/b".into()),
                Code::UnknownMediaId,
            ),
            (MediaError::NameTooLong { max_bytes: 1 }, Code::BadPath),
            (MediaError::TooLarge { max_bytes: 1 }, Code::TooLarge),
            (MediaError::Source(io()), Code::BadBody),
            (MediaError::BlobMissing("s".into()), Code::IoError),
            (MediaError::Records("r".into()), Code::IoError),
            (MediaError::Io(io()), Code::IoError),
            (MediaError::Fs(ferry_fs::FsError::NotFound), Code::NotFound),
        ] {
            let listed = match &error {
                MediaError::UnknownMediaId(_)
                | MediaError::NameTooLong { .. }
                | MediaError::TooLarge { .. }
                | MediaError::Source(_)
                | MediaError::Store(_)
                | MediaError::BlobMissing(_)
                | MediaError::Records(_)
                | MediaError::Fs(_)
                | MediaError::Io(_) => true,
            };
            assert!(listed);
            assert_eq!(error.code(), code, "{error}");
        }
        let store = MediaError::Store(object_store::Error::NotImplemented {
            operation: "x".into(),
            implementer: "y".into(),
        });
        assert_eq!(store.code(), Code::IoError);
    }

    #[test]
    fn a_full_disk_is_told_however_deep_its_cause_lies() {
        let full = || std::io::Error::from_raw_os_error(libc::ENOSPC);
        let wrapped = MediaError::Store(object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::other(full())),
        });
        for error in [
            MediaError::Io(full()),
            MediaError::Io(std::io::Error::from_raw_os_error(libc::EDQUOT)),
            MediaError::Fs(ferry_fs::FsError::NoSpace),
            wrapped,
        ] {
            assert_eq!(error.code(), Code::InsufficientStorage, "{error:?}");
            assert!(error.shown().contains("full"), "{}", error.shown());
        }
        let other = MediaError::Io(std::io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(other.code(), Code::IoError);
    }
}
