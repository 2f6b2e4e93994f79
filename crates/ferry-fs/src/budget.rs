//! Room for bytes that writers take before they write: how a storage quota shared by
//! several writers holds while they run at the same time.

use crate::FsError;

/// One writer's share of a shared allowance (a person's storage quota).
///
/// [`AtomicWriter`](crate::AtomicWriter) takes room before each byte it writes, holes
/// included, so that writers running at once together never pass the allowance.
pub trait Budget: Send + Sync + std::fmt::Debug {
    /// Takes room for `bytes` more, or refuses with [`FsError::QuotaExceeded`].
    fn take(&self, bytes: u64) -> Result<(), FsError>;
    /// The writer was dropped before committing: everything it took is free again.
    fn release(&self);
    /// The writer committed: what it took now lies in a file.
    fn commit(&self);
}
