//! Atomic writes (spec core C-ATOMIC): a hidden temporary in the target's directory,
//! fsynced, then renamed over the target. Dropping an uncommitted writer removes it.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::dir::{Dir, fchown};
use crate::{Budget, FsError};

/// Every temporary's name starts with this; listings hide such names.
pub const TEMP_PREFIX: &str = ".ferry-tmp-";

/// Bytes written between two requests to start writing back to disk, so that the fsync
/// at commit finds little left to flush instead of the whole file.
const WRITEBACK_STEP_BYTES: u64 = 8 * 1024 * 1024;
/// Bytes read from a source at a time by [`AtomicWriter::copy_sparse`].
const COPY_CHUNK_BYTES: usize = 256 * 1024;
/// Zeros hashed at a time for a hole.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// What a committed write produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes written.
    pub size: u64,
    /// SHA-256 of those bytes.
    pub sha256: [u8; 32],
}

impl Written {
    /// The digest as lowercase hex.
    pub fn sha256_hex(&self) -> String {
        crate::hex(&self.sha256)
    }
}

/// A file being written; it appears at its name only on [`AtomicWriter::commit`].
#[derive(Debug)]
pub struct AtomicWriter {
    dir: Dir,
    temp_name: String,
    /// Where the file appears on commit; `None` means beside the temporary.
    target_dir: Option<Dir>,
    target: String,
    file: File,
    hasher: Sha256,
    size: u64,
    /// Bytes already handed to writeback.
    written_back: u64,
    max_bytes: Option<u64>,
    budget: Option<Box<dyn Budget>>,
    /// A hole was left at the end, so the length must be set at commit.
    ends_in_hole: bool,
    owner: Option<(u32, u32)>,
    committed: bool,
}

impl AtomicWriter {
    /// Starts writing the file `name` (one component) in `dir`.
    ///
    /// Fails early, before any byte is accepted, when `name` is a symlink
    /// ([`FsError::PathEscapes`]) or a directory.
    pub fn create(dir: &Dir, name: &str) -> Result<AtomicWriter, FsError> {
        check_name(name)?;
        check_target(dir, name)?;
        let mut writer = AtomicWriter::create_unplaced(dir)?;
        writer.target = name.to_owned();
        Ok(writer)
    }

    /// Starts writing a file whose place is not known yet: a hidden temporary in `dir`
    /// that [`AtomicWriter::retarget`] must place before [`AtomicWriter::commit`].
    pub fn create_unplaced(dir: &Dir) -> Result<AtomicWriter, FsError> {
        let dir = dir.try_clone()?;
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut attempts = 0;
        let (temp_name, fd) = loop {
            let temp_name = format!("{TEMP_PREFIX}{}", crate::random_base32::<10>());
            match rustix::fs::openat(
                dir.fd(),
                temp_name.as_str(),
                flags,
                Mode::from_raw_mode(0o600),
            ) {
                Ok(fd) => break (temp_name, fd),
                Err(rustix::io::Errno::EXIST) if attempts < 8 => attempts += 1,
                Err(e) => return Err(FsError::from_errno(e)),
            }
        };
        Ok(AtomicWriter {
            dir,
            temp_name,
            target_dir: None,
            target: String::new(),
            file: File::from(fd),
            hasher: Sha256::new(),
            size: 0,
            written_back: 0,
            max_bytes: None,
            budget: None,
            ends_in_hole: false,
            owner: None,
            committed: false,
        })
    }

    /// Refuses (with [`FsError::TooLarge`]) any write that would pass `max_bytes` in total.
    pub fn limit(mut self, max_bytes: u64) -> Self {
        self.set_limit(max_bytes);
        self
    }

    /// Takes room from `budget` before every byte written (holes included).
    pub fn budget(mut self, budget: Option<Box<dyn Budget>>) -> Self {
        self.budget = budget;
        self
    }

    /// Sets the limit of [`AtomicWriter::limit`] on a writer already made.
    pub fn set_limit(&mut self, max_bytes: u64) {
        self.max_bytes = Some(max_bytes);
    }

    /// Gives the file to `uid:gid` (by descriptor) before it appears.
    pub fn owner(mut self, owner: Option<(u32, u32)>) -> Self {
        self.owner = owner;
        self
    }

    /// Sets the permission bits the file will have (0600 until then).
    pub fn set_mode(&mut self, mode: u32) -> Result<(), FsError> {
        rustix::fs::fchmod(&self.file, Mode::from_raw_mode(mode)).map_err(FsError::from_errno)
    }

    /// Makes the file appear as `name` in `dir` instead, which must be on the same file
    /// system (for example, another folder of the same workspace).
    pub fn retarget(&mut self, dir: &Dir, name: &str) -> Result<(), FsError> {
        check_name(name)?;
        check_target(dir, name)?;
        self.target_dir = Some(dir.try_clone()?);
        self.target = name.to_owned();
        Ok(())
    }

    /// Bytes accepted so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Refuses, as [`AtomicWriter::write`] would, a file of `total` bytes.
    pub fn check_room(&self, total: u64) -> Result<(), FsError> {
        match self.max_bytes {
            Some(max) if self.size + total > max => Err(FsError::TooLarge(max)),
            _ => Ok(()),
        }
    }

    /// Appends bytes; past the limit nothing more is written and the caller should drop
    /// the writer (which removes the temporary).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), FsError> {
        self.take(bytes.len() as u64)?;
        self.file.write_all(bytes).map_err(FsError::Io)?;
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
            .map_err(FsError::Io)?;
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
        let len = source.metadata().map_err(FsError::Io)?.len();
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
                let n = source.read_at(&mut buf[..want], pos).map_err(FsError::Io)?;
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

    /// Flushes the bytes to disk and renames the temporary over the target.
    pub fn commit(mut self) -> Result<Written, FsError> {
        if let Some((uid, gid)) = self.owner {
            fchown(std::os::fd::AsFd::as_fd(&self.file), uid, gid)?;
        }
        if self.ends_in_hole {
            // Seeking past the end wrote nothing: the length makes the trailing hole.
            self.file.set_len(self.size).map_err(FsError::Io)?;
        }
        self.file.sync_all().map_err(FsError::Io)?;
        if self.target.is_empty() {
            return Err(FsError::EmptyPath);
        }
        let target_dir = self.target_dir.as_ref().unwrap_or(&self.dir);
        // Checked again: a link planted while the body streamed is refused, not replaced.
        check_target(target_dir, &self.target)?;
        self.dir
            .rename_to(&self.temp_name, target_dir, &self.target, true)?;
        self.committed = true;
        if let Some(budget) = &self.budget {
            budget.commit();
        }
        Ok(Written {
            size: self.size,
            sha256: self.hasher.clone().finalize().into(),
        })
    }
}

impl Write for AtomicWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        AtomicWriter::write(self, buf).map_err(std::io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for AtomicWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = rustix::fs::unlinkat(self.dir.fd(), self.temp_name.as_str(), AtFlags::empty());
            if let Some(budget) = &self.budget {
                budget.release();
            }
        }
    }
}

/// Asks the kernel to start writing a range back now (it does not wait for it).
fn start_writeback(file: &File, offset: u64, len: u64) {
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

/// A target is one plain component.
fn check_name(name: &str) -> Result<(), FsError> {
    crate::path::check_relative(name)?;
    if name.contains('/') || name == "." {
        return Err(FsError::UnsafeName(name.to_owned()));
    }
    Ok(())
}

/// The target may be absent or a regular file; a link or a directory is refused.
fn check_target(dir: &Dir, name: &str) -> Result<(), FsError> {
    match rustix::fs::statat(
        dir.fd(),
        &*crate::name::name_to_bytes(name),
        AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Ok(()),
            FileType::Symlink => Err(FsError::PathEscapes),
            FileType::Directory => Err(FsError::IsDirectory),
            _ => Err(FsError::NotRegular),
        },
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::sync::Mutex;

    use super::*;

    fn sparse_source(dir: &std::path::Path, len: u64, data: &[(u64, &[u8])]) -> File {
        let path = dir.join("source");
        let file = File::create(&path).unwrap();
        file.set_len(len).unwrap();
        for (offset, bytes) in data {
            file.write_all_at(bytes, *offset).unwrap();
        }
        file.sync_all().unwrap();
        File::open(&path).unwrap()
    }

    #[test]
    fn a_sparse_copy_keeps_holes_and_the_content() {
        let tmp = tempfile::tempdir().unwrap();
        let len = 64 * 1024 * 1024;
        let source = sparse_source(tmp.path(), len, &[(5 << 20, b"middle"), (len - 3, b"end")]);
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        let mut writer = AtomicWriter::create(&dir, "copy").unwrap().limit(len);
        writer.copy_sparse(&source).unwrap();
        let written = writer.commit().unwrap();
        assert_eq!(written.size, len);
        let copy = std::fs::read(tmp.path().join("copy")).unwrap();
        assert_eq!(&copy[5 << 20..(5 << 20) + 6], b"middle");
        assert_eq!(&copy[copy.len() - 3..], b"end");
        let digest: [u8; 32] = Sha256::digest(&copy).into();
        assert_eq!(written.sha256, digest);
        let meta = std::fs::metadata(tmp.path().join("copy")).unwrap();
        assert!(
            meta.blocks() * 512 < 1024 * 1024,
            "{} blocks",
            meta.blocks()
        );

        // A file ending in a hole keeps its length.
        let source = sparse_source(tmp.path(), 1 << 20, &[(0, b"head")]);
        let mut writer = AtomicWriter::create(&dir, "tail").unwrap();
        writer.copy_sparse(&source).unwrap();
        assert_eq!(writer.commit().unwrap().size, 1 << 20);
        assert_eq!(
            std::fs::metadata(tmp.path().join("tail")).unwrap().len(),
            1 << 20
        );
    }

    #[test]
    fn a_sparse_copy_over_the_limit_is_refused_before_copying() {
        let tmp = tempfile::tempdir().unwrap();
        let source = sparse_source(tmp.path(), 2 << 30, &[]);
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        let mut writer = AtomicWriter::create(&dir, "copy").unwrap().limit(64 << 20);
        assert!(matches!(
            writer.copy_sparse(&source),
            Err(FsError::TooLarge(n)) if n == 64 << 20
        ));
        assert_eq!(writer.size(), 0);
        drop(writer);
        let names = dir.names().unwrap();
        assert_eq!(names, ["source"], "nothing is left behind");
    }

    /// A budget of `room` bytes that records what happened.
    #[derive(Debug)]
    struct Room(Mutex<(u64, u64, &'static str)>);

    impl Budget for Room {
        fn take(&self, bytes: u64) -> Result<(), FsError> {
            let mut state = self.0.lock().unwrap();
            if state.1 + bytes > state.0 {
                return Err(FsError::QuotaExceeded {
                    limit: state.0,
                    used: state.1,
                });
            }
            state.1 += bytes;
            Ok(())
        }
        fn release(&self) {
            self.0.lock().unwrap().2 = "released";
        }
        fn commit(&self) {
            self.0.lock().unwrap().2 = "committed";
        }
    }

    #[test]
    fn writes_and_holes_take_from_the_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        let room = std::sync::Arc::new(Room(Mutex::new((10, 0, ""))));
        #[derive(Debug)]
        struct Shared(std::sync::Arc<Room>);
        impl Budget for Shared {
            fn take(&self, bytes: u64) -> Result<(), FsError> {
                self.0.take(bytes)
            }
            fn release(&self) {
                self.0.release()
            }
            fn commit(&self) {
                self.0.commit()
            }
        }
        let mut writer = AtomicWriter::create(&dir, "a")
            .unwrap()
            .budget(Some(Box::new(Shared(room.clone()))));
        writer.write(b"12345").unwrap();
        writer.write_hole(5).unwrap();
        assert!(matches!(
            writer.write(b"x"),
            Err(FsError::QuotaExceeded {
                limit: 10,
                used: 10
            })
        ));
        drop(writer);
        assert_eq!(room.0.lock().unwrap().2, "released");
        assert!(dir.names().unwrap().is_empty());

        let room = std::sync::Arc::new(Room(Mutex::new((10, 0, ""))));
        let mut writer = AtomicWriter::create(&dir, "b")
            .unwrap()
            .budget(Some(Box::new(Shared(room.clone()))));
        writer.write(b"0123456789").unwrap();
        writer.commit().unwrap();
        assert_eq!(room.0.lock().unwrap().2, "committed");
    }
}
