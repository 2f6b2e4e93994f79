//! A file filled across many requests and, possibly, many runs of the service: a
//! resumable upload's staged temporary. Parts are appended at its end; the sha256 of
//! everything written is kept as it goes; a part that must not be kept (its checksum did
//! not match) is cut off again, digest included. Found again by its identity after a
//! restart ([`reopen_temporary`]), its bytes are hashed once more from the disk.
//!
//! While a part streams in, its bytes are hashed on a thread of their own beside the
//! writes ([`Digest`]): hashing costs more than writing into the page cache, and done in
//! turn with it every part took their sum.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use bytes::Bytes;
use rustix::fs::OFlags;
use sha2::{Digest as _, Sha256};

use crate::sink::start_writeback;
use crate::{Dir, FileId, FsError};

/// Bytes read at a time when a reopened file is hashed again.
const REHASH_CHUNK_BYTES: usize = 1024 * 1024;
/// Bytes written between two requests to start writeback (as [`crate::ByteSink`]).
const WRITEBACK_STEP_BYTES: u64 = 8 * 1024 * 1024;
/// Chunks written but not yet hashed: the memory a part may hold beyond the writes.
const UNHASHED_CHUNKS_MAX: usize = 8;

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

/// The sha256 of everything appended: idle, or running on its own thread while a part
/// streams in.
#[derive(Debug)]
enum Digest {
    Idle(Sha256),
    Running {
        chunks: SyncSender<Bytes>,
        hashing: JoinHandle<Sha256>,
    },
}

impl Digest {
    /// Hashes `chunk` after everything before it, on the hashing thread (started on the
    /// first chunk of a part).
    fn feed(&mut self, chunk: Bytes) {
        if let Digest::Idle(hasher) = self {
            let (chunks, queued) = sync_channel::<Bytes>(UNHASHED_CHUNKS_MAX);
            let mut running = hasher.clone();
            let started = std::thread::Builder::new()
                .name("ferry-part-hash".into())
                .spawn(move || {
                    for chunk in queued {
                        running.update(&chunk);
                    }
                    running
                });
            match started {
                Ok(hashing) => *self = Digest::Running { chunks, hashing },
                // No thread to be had: hashed here, in turn with the writes.
                Err(_) => return hasher.update(&chunk),
            }
        }
        if let Digest::Running { chunks, .. } = self
            && chunks.send(chunk).is_err()
        {
            // Only a panic ends the thread while its sender lives: settling says so.
            self.settle();
        }
    }

    /// Waits for every chunk fed so far to be hashed.
    fn settle(&mut self) -> &mut Sha256 {
        if matches!(self, Digest::Running { .. }) {
            let Digest::Running { chunks, hashing } =
                std::mem::replace(self, Digest::Idle(Sha256::new()))
            else {
                unreachable!("matched above")
            };
            drop(chunks);
            // A hashing thread that panicked lost bytes: no digest would be true.
            let hasher = hashing.join().expect("the hashing thread does not panic");
            *self = Digest::Idle(hasher);
        }
        match self {
            Digest::Idle(hasher) => hasher,
            Digest::Running { .. } => unreachable!("settled above"),
        }
    }
}

/// A staged file that grows by parts.
#[derive(Debug)]
pub struct PartFile {
    file: File,
    digest: Digest,
    size: u64,
    written_back: u64,
}

impl PartFile {
    /// A new, empty temporary.
    pub fn new(file: File) -> PartFile {
        PartFile {
            file,
            digest: Digest::Idle(Sha256::new()),
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
            digest: Digest::Idle(hasher),
            size,
            written_back: size,
        })
    }

    /// Bytes in the file.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where the file stands now, to come back to.
    pub fn mark(&mut self) -> PartMark {
        PartMark {
            size: self.size,
            hasher: self.digest.settle().clone(),
        }
    }

    /// Appends `bytes` at the end (hashed beside the write; see [`Digest`]).
    pub fn append(&mut self, bytes: Bytes) -> Result<(), FsError> {
        self.file
            .write_all_at(&bytes, self.size)
            .map_err(FsError::from)?;
        self.size += bytes.len() as u64;
        self.digest.feed(bytes);
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
        self.digest.settle();
        self.digest = Digest::Idle(mark.hasher);
        Ok(())
    }

    /// Makes the bytes durable.
    pub fn sync(&self) -> Result<(), FsError> {
        self.file.sync_all().map_err(FsError::from)
    }

    /// The SHA-256 of every byte in the file.
    pub fn sha256(&mut self) -> [u8; 32] {
        self.digest.settle().clone().finalize().into()
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
        part.append(Bytes::from_static(b"hello ")).unwrap();
        let mark = part.mark();
        part.append(Bytes::from_static(b"junk")).unwrap();
        part.rewind(mark).unwrap();
        part.append(Bytes::from_static(b"world")).unwrap();
        assert_eq!(part.size(), 11);
        assert_eq!(
            crate::hex(&part.sha256()),
            crate::sha256_hex(b"hello world")
        );
        drop(part);
        let again = reopen_temporary(&dir, &name, id).unwrap();
        let mut part = PartFile::reopen(again, 6).unwrap();
        assert_eq!(part.size(), 6);
        assert_eq!(crate::hex(&part.sha256()), crate::sha256_hex(b"hello "));
    }

    #[test]
    fn the_digest_hashed_beside_the_writes_is_that_of_the_kept_bytes_in_order() {
        let (tmp, dir) = temp_dir();
        let (name, file) = crate::create_temporary(&dir).unwrap();
        let mut part = PartFile::new(file);
        let mut kept = Vec::new();
        // More chunks per part than the hashing thread queues, of uneven sizes, and a
        // part cut off while its chunks are still being hashed.
        for round in 0u32..6 {
            let mark = part.mark();
            let mut this_part = Vec::new();
            for i in 0u32..(3 * UNHASHED_CHUNKS_MAX as u32) {
                let chunk: Vec<u8> = (0..(i * 37 + round) % 5000 + 1)
                    .map(|b| (b ^ i ^ round) as u8)
                    .collect();
                this_part.extend_from_slice(&chunk);
                part.append(Bytes::from(chunk)).unwrap();
            }
            if round % 3 == 1 {
                part.rewind(mark).unwrap();
            } else {
                kept.extend_from_slice(&this_part);
            }
        }
        assert_eq!(part.size(), kept.len() as u64);
        assert_eq!(crate::hex(&part.sha256()), crate::sha256_hex(&kept));
        // Asking twice changes nothing, and appending goes on after it.
        assert_eq!(crate::hex(&part.sha256()), crate::sha256_hex(&kept));
        part.append(Bytes::from_static(b"tail")).unwrap();
        kept.extend_from_slice(b"tail");
        assert_eq!(crate::hex(&part.sha256()), crate::sha256_hex(&kept));
        assert_eq!(std::fs::read(tmp.path().join(name)).unwrap(), kept);
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
