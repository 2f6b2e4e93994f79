//! Atomic writes (spec core C-ATOMIC): a hidden temporary in the target's directory,
//! fsynced, then renamed over the target. Dropping an uncommitted writer removes it.

use std::fs::File;
use std::io::Write;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use sha2::{Digest, Sha256};

use crate::FsError;
use crate::dir::{Dir, fchown};

/// Every temporary's name starts with this; listings hide such names.
pub const TEMP_PREFIX: &str = ".ferry-tmp-";

/// Bytes written between two requests to start writing back to disk, so that the fsync
/// at commit finds little left to flush instead of the whole file.
const WRITEBACK_STEP_BYTES: u64 = 8 * 1024 * 1024;

/// What a committed write produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub size: u64,
    pub sha256: [u8; 32],
}

impl Written {
    /// The digest as lowercase hex.
    pub fn sha256_hex(&self) -> String {
        data_encoding::HEXLOWER.encode(&self.sha256)
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
            let temp_name = format!("{TEMP_PREFIX}{}", random_suffix());
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
            owner: None,
            committed: false,
        })
    }

    /// Refuses (with [`FsError::TooLarge`]) any write that would pass `max_bytes` in total.
    pub fn limit(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
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
        self.check_room(bytes.len() as u64)?;
        self.file.write_all(bytes).map_err(FsError::Io)?;
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        if self.size - self.written_back >= WRITEBACK_STEP_BYTES {
            start_writeback(&self.file, self.written_back, self.size - self.written_back);
            self.written_back = self.size;
        }
        Ok(())
    }

    /// Flushes the bytes to disk and renames the temporary over the target.
    pub fn commit(mut self) -> Result<Written, FsError> {
        if let Some((uid, gid)) = self.owner {
            fchown(std::os::fd::AsFd::as_fd(&self.file), uid, gid)?;
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

/// 16 base32 characters (80 random bits): unguessable temporaries.
pub(crate) fn random_suffix() -> String {
    let mut bytes = [0u8; 10];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    data_encoding::BASE32_NOPAD
        .encode(&bytes)
        .to_ascii_lowercase()
}
