//! A file filled across many requests and, possibly, many runs of the service: a
//! resumable upload's staged temporary. Parts are appended at its end; the sha256 of
//! everything written is kept as it goes; a part that must not be kept (its checksum did
//! not match) is cut off again, digest included. Found again by its identity after a
//! restart ([`reopen_temporary`]), its bytes are hashed once more from the disk.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;

use rustix::fs::OFlags;
use sha2::{Digest, Sha256};

use crate::sink::start_writeback;
use crate::{Dir, FileId, FsError};

/// Bytes read at a time when a reopened file is hashed again.
const REHASH_CHUNK_BYTES: usize = 1024 * 1024;
/// Bytes written between two requests to start writeback (as [`crate::ByteSink`]).
const WRITEBACK_STEP_BYTES: u64 = 8 * 1024 * 1024;

/// Opens the temporary `temp_name` of `dir` for reading and writing, only while it is
/// still the regular file `expect` (a name swapped meanwhile is refused); no link is
/// followed.
pub fn reopen_temporary(dir: &Dir, temp_name: &str, expect: FileId) -> Result<File, FsError> {
    crate::atomic::open_staged(dir, temp_name, expect, OFlags::RDWR)
}

/// Where a [`PartFile`] stood before a part: [`PartFile::rewind`] goes back to it.
#[derive(Clone, Debug)]
pub struct PartMark {
    size: u64,
    hasher: Sha256,
}

/// A staged file that grows by parts.
#[derive(Debug)]
pub struct PartFile {
    file: File,
    hasher: Sha256,
    size: u64,
    written_back: u64,
}

impl PartFile {
    /// A new, empty temporary.
    pub fn new(file: File) -> PartFile {
        PartFile {
            file,
            hasher: Sha256::new(),
            size: 0,
            written_back: 0,
        }
    }

    /// A temporary written before (by an earlier run): its first `keep` bytes at most are
    /// kept, anything past them cut off, and what is kept is hashed again.
    pub fn reopen(mut file: File, keep: u64) -> Result<PartFile, FsError> {
        let len = file.metadata().map_err(FsError::from)?.len();
        let size = len.min(keep);
        if len > size {
            file.set_len(size).map_err(FsError::from)?;
        }
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; REHASH_CHUNK_BYTES];
        let mut left = size;
        let mut reader = (&mut file).take(size);
        while left > 0 {
            let n = reader.read(&mut buf).map_err(FsError::from)?;
            if n == 0 {
                return Err(FsError::Io(std::io::Error::other(
                    "the staged file shrank while it was read",
                )));
            }
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        Ok(PartFile {
            file,
            hasher,
            size,
            written_back: size,
        })
    }

    /// Bytes in the file.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where the file stands now, to come back to.
    pub fn mark(&self) -> PartMark {
        PartMark {
            size: self.size,
            hasher: self.hasher.clone(),
        }
    }

    /// Appends `bytes` at the end.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), FsError> {
        self.file
            .write_all_at(bytes, self.size)
            .map_err(FsError::from)?;
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        if self.size - self.written_back >= WRITEBACK_STEP_BYTES {
            start_writeback(&self.file, self.written_back, self.size - self.written_back);
            self.written_back = self.size;
        }
        Ok(())
    }

    /// Cuts the file back to `mark`, digest included.
    pub fn rewind(&mut self, mark: PartMark) -> Result<(), FsError> {
        self.file.set_len(mark.size).map_err(FsError::from)?;
        self.size = mark.size;
        self.written_back = self.written_back.min(mark.size);
        self.hasher = mark.hasher;
        Ok(())
    }

    /// Makes the bytes durable.
    pub fn sync(&self) -> Result<(), FsError> {
        self.file.sync_all().map_err(FsError::from)
    }

    /// The SHA-256 of every byte in the file.
    pub fn sha256(&self) -> [u8; 32] {
        self.hasher.clone().finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        (tmp, dir)
    }

    #[test]
    fn parts_rewind_and_reopen_keep_the_digest_of_the_bytes() {
        let (_tmp, dir) = temp_dir();
        let (name, file) = crate::create_temporary(&dir).unwrap();
        let id = FileId::of(&file).unwrap();
        let mut part = PartFile::new(file);
        part.append(b"hello ").unwrap();
        let mark = part.mark();
        part.append(b"junk").unwrap();
        part.rewind(mark).unwrap();
        part.append(b"world").unwrap();
        assert_eq!(part.size(), 11);
        assert_eq!(
            crate::hex(&part.sha256()),
            crate::sha256_hex(b"hello world")
        );
        drop(part);
        let again = reopen_temporary(&dir, &name, id).unwrap();
        let part = PartFile::reopen(again, 6).unwrap();
        assert_eq!(part.size(), 6);
        assert_eq!(crate::hex(&part.sha256()), crate::sha256_hex(b"hello "));
    }

    #[test]
    fn a_swapped_or_linked_temporary_is_refused() {
        let (_tmp, dir) = temp_dir();
        let (name, file) = crate::create_temporary(&dir).unwrap();
        let id = FileId::of(&file).unwrap();
        // Another file (another inode) at a temporary's name is not the one staged.
        let (other, _f) = crate::create_temporary(&dir).unwrap();
        assert!(reopen_temporary(&dir, &other, id).is_err());
        assert!(reopen_temporary(&dir, &name, id).is_ok());
        assert!(reopen_temporary(&dir, "plain.txt", id).is_err());
    }
}
