//! The byte side of a write: a size limit, a budget taken before each byte, the sha256 of
//! what was written, writeback started as it goes, holes kept as holes, and the fsync at
//! the end. [`crate::AtomicWriter`] writes through one, and so does a process that was
//! handed the descriptor of a temporary another process made (host mode: the person's
//! worker makes it, the service fills it).

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::{Budget, FsError};

/// Bytes written between two requests to start writing back to disk, so that the fsync
/// at the end finds little left to flush instead of the whole file.
const WRITEBACK_STEP_BYTES: u64 = 8 * 1024 * 1024;
/// Bytes read from a source at a time by [`ByteSink::copy_sparse`].
const COPY_CHUNK_BYTES: usize = 256 * 1024;
/// Zeros hashed at a time for a hole.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// What a finished write produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes in the file when the write finished, holes included.
    pub size: u64,
    /// The SHA-256 digest of every byte written, holes read as zeros.
    pub sha256: [u8; 32],
}

impl Written {
    /// The digest as lowercase hex.
    pub fn sha256_hex(&self) -> String {
        data_encoding::HEXLOWER.encode(&self.sha256)
    }
}

/// Bytes going into one open file, from its start.
#[derive(Debug)]
pub struct ByteSink {
    file: File,
    hasher: Sha256,
    size: u64,
    /// Bytes already handed to writeback.
    written_back: u64,
    max_bytes: Option<u64>,
    budget: Option<Box<dyn Budget>>,
    /// A hole was left at the end, so the length must be set when finishing.
    ends_in_hole: bool,
    /// The budget was told the bytes now lie in a file.
    settled: bool,
    /// `finish` makes the bytes durable (off when the caller syncs many files at once).
    sync: bool,
}

impl ByteSink {
    /// Writes into `file` (empty, open for writing) from its start.
    pub fn new(file: File) -> ByteSink {
        ByteSink {
            file,
            hasher: Sha256::new(),
            size: 0,
            written_back: 0,
            max_bytes: None,
            budget: None,
            ends_in_hole: false,
            settled: false,
            sync: true,
        }
    }

    /// Leaves durability to the caller: `finish` does not fsync. For many files that are
    /// published together, made durable by one sync of their file system
    /// ([`crate::Dir::sync_filesystem`]) before anything points at them.
    pub fn sync_later(&mut self) {
        self.sync = false;
    }

    /// The file written to.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Refuses (with [`FsError::TooLarge`]) any write that would pass `max_bytes` in total.
    pub fn set_limit(&mut self, max_bytes: u64) {
        self.max_bytes = Some(max_bytes);
    }

    /// Takes room from `budget` before every byte written (holes included).
    pub fn set_budget(&mut self, budget: Option<Box<dyn Budget>>) {
        self.budget = budget;
    }

    /// Bytes accepted so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Refuses, as [`ByteSink::write`] would, `total` more bytes.
    pub fn check_room(&self, total: u64) -> Result<(), FsError> {
        match self.max_bytes {
            Some(max) if self.size + total > max => Err(FsError::TooLarge(max)),
            _ => Ok(()),
        }
    }

    /// Appends bytes; past the limit or the budget nothing more is written.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), FsError> {
        self.take(bytes.len() as u64)?;
        self.file.write_all(bytes).map_err(FsError::from)?;
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        self.ends_in_hole = false;
        if self.size - self.written_back >= WRITEBACK_STEP_BYTES {
            start_writeback(&self.file, self.written_back, self.size - self.written_back);
            self.written_back = self.size;
        }
        Ok(())
    }

    /// Appends `len` zero bytes as a hole: they count (against the limit, the budget and
    /// in the digest) but take no disk space.
    pub fn write_hole(&mut self, len: u64) -> Result<(), FsError> {
        if len == 0 {
            return Ok(());
        }
        self.take(len)?;
        let offset = i64::try_from(len).map_err(|_| FsError::TooLarge(i64::MAX as u64))?;
        self.file
            .seek(SeekFrom::Current(offset))
            .map_err(FsError::from)?;
        let mut left = len;
        while left > 0 {
            let n = left.min(ZEROS.len() as u64) as usize;
            self.hasher.update(&ZEROS[..n]);
            left -= n as u64;
        }
        self.size += len;
        self.written_back = self.size;
        self.ends_in_hole = true;
        Ok(())
    }

    /// Appends the whole of `source` as it is now, copying only its data and leaving its
    /// holes as holes (`SEEK_DATA`/`SEEK_HOLE`), so a sparse file stays sparse. The
    /// limit and the budget count its apparent size, and refuse before anything is
    /// copied when that alone is over them.
    pub fn copy_sparse(&mut self, source: &File) -> Result<(), FsError> {
        let len = source.metadata().map_err(FsError::from)?.len();
        self.check_room(len)?;
        let mut buf = vec![0u8; COPY_CHUNK_BYTES];
        let mut pos = 0u64;
        while pos < len {
            let data = match rustix::fs::seek(source, rustix::fs::SeekFrom::Data(pos)) {
                Ok(data) => data.min(len),
                // Nothing but a hole from `pos` to the end.
                Err(Errno::NXIO) => len,
                Err(e) => return Err(FsError::Io(e.into())),
            };
            self.write_hole(data - pos)?;
            pos = data;
            if pos >= len {
                break;
            }
            let hole = match rustix::fs::seek(source, rustix::fs::SeekFrom::Hole(pos)) {
                Ok(hole) => hole.min(len),
                Err(e) => return Err(FsError::Io(e.into())),
            };
            while pos < hole {
                let want = ((hole - pos) as usize).min(buf.len());
                let n = source
                    .read_at(&mut buf[..want], pos)
                    .map_err(FsError::from)?;
                if n == 0 {
                    return Err(FsError::Io(std::io::Error::other(
                        "the file shrank while it was copied",
                    )));
                }
                self.write(&buf[..n])?;
                pos += n as u64;
            }
        }
        Ok(())
    }

    /// Room for `bytes` more: within the limit, and taken from the budget.
    fn take(&mut self, bytes: u64) -> Result<(), FsError> {
        self.check_room(bytes)?;
        if let Some(budget) = &self.budget {
            budget.take(bytes)?;
        }
        Ok(())
    }

    /// Sets the length a trailing hole needs and flushes the bytes to disk; what was
    /// written comes back. The file is not placed anywhere by this.
    pub fn finish(&mut self) -> Result<Written, FsError> {
        if self.ends_in_hole {
            // Seeking past the end wrote nothing: the length makes the trailing hole.
            self.file.set_len(self.size).map_err(FsError::from)?;
        }
        if self.sync {
            self.file.sync_all().map_err(FsError::from)?;
        }
        Ok(Written {
            size: self.size,
            sha256: self.hasher.clone().finalize().into(),
        })
    }

    /// The file now stands at its name: what the budget gave is kept for good.
    pub fn settle(&mut self) {
        if !self.settled {
            self.settled = true;
            if let Some(budget) = &self.budget {
                budget.commit();
            }
        }
    }
}

impl Write for ByteSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        ByteSink::write(self, buf).map_err(std::io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ByteSink {
    fn drop(&mut self) {
        // Never placed: everything taken from the budget is free again.
        if !self.settled
            && let Some(budget) = &self.budget
        {
            budget.release();
        }
    }
}

/// Asks the kernel to start writing a range back now (it does not wait for it).
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscall on a descriptor we own; a failure only loses the head start.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as i64,
            len as i64,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}
