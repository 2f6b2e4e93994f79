//! Atomic writes (spec core C-ATOMIC): a hidden temporary in the target's directory,
//! fsynced, then renamed over the target. Dropping an uncommitted writer removes it.
//!
//! The bytes go through a [`ByteSink`]. The temporary's two ends are also offered on
//! their own ([`create_temporary`], [`place_temporary`], [`remove_temporary`]) for when
//! one process makes and places the temporary and another fills it through a passed
//! descriptor.

use std::fs::File;
use std::os::unix::fs::MetadataExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::dir::{Dir, fchown};
use crate::sink::{ByteSink, Written};
use crate::{Budget, FsError};

/// Every temporary's name starts with this; listings hide such names.
pub const TEMP_PREFIX: &str = ".ferry-tmp-";

/// A file being written; it appears at its name only on [`AtomicWriter::commit`].
#[derive(Debug)]
pub struct AtomicWriter {
    dir: Dir,
    temp_name: String,
    /// Where the file appears on commit; `None` means beside the temporary.
    target_dir: Option<Dir>,
    target: String,
    sink: ByteSink,
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
        let (temp_name, file) = create_temporary(dir)?;
        Ok(AtomicWriter {
            dir: dir.try_clone()?,
            temp_name,
            target_dir: None,
            target: String::new(),
            sink: ByteSink::new(file),
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
        self.sink.set_budget(budget);
        self
    }

    /// Sets the limit of [`AtomicWriter::limit`] on a writer already made.
    pub fn set_limit(&mut self, max_bytes: u64) {
        self.sink.set_limit(max_bytes);
    }

    /// Gives the file to `uid:gid` (by descriptor) before it appears.
    pub fn owner(mut self, owner: Option<(u32, u32)>) -> Self {
        self.owner = owner;
        self
    }

    /// Sets the permission bits the file will have (0600 until then).
    pub fn set_mode(&mut self, mode: u32) -> Result<(), FsError> {
        rustix::fs::fchmod(self.sink.file(), Mode::from_raw_mode(mode)).map_err(FsError::from_errno)
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

    /// Commits without an fsync of the file: see [`ByteSink::sync_later`].
    pub fn sync_later(mut self) -> AtomicWriter {
        self.sink.sync_later();
        self
    }

    /// The bytes' side of this writer.
    pub fn sink(&mut self) -> &mut ByteSink {
        &mut self.sink
    }

    /// Bytes accepted so far.
    pub fn size(&self) -> u64 {
        self.sink.size()
    }

    /// Refuses, as [`AtomicWriter::write`] would, a file of `total` bytes.
    pub fn check_room(&self, total: u64) -> Result<(), FsError> {
        self.sink.check_room(total)
    }

    /// Appends bytes; past the limit nothing more is written and the caller should drop
    /// the writer (which removes the temporary).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), FsError> {
        self.sink.write(bytes)
    }

    /// Appends `len` zero bytes as a hole (see [`ByteSink::write_hole`]).
    pub fn write_hole(&mut self, len: u64) -> Result<(), FsError> {
        self.sink.write_hole(len)
    }

    /// Appends the whole of `source`, holes kept (see [`ByteSink::copy_sparse`]).
    pub fn copy_sparse(&mut self, source: &File) -> Result<(), FsError> {
        self.sink.copy_sparse(source)
    }

    /// Flushes the bytes to disk and renames the temporary over the target.
    pub fn commit(mut self) -> Result<Written, FsError> {
        if let Some((uid, gid)) = self.owner {
            fchown(std::os::fd::AsFd::as_fd(self.sink.file()), uid, gid)?;
        }
        let written = self.sink.finish()?;
        if self.target.is_empty() {
            return Err(FsError::EmptyPath);
        }
        let target_dir = self.target_dir.as_ref().unwrap_or(&self.dir);
        // Checked again: a link planted while the body streamed is refused, not replaced.
        check_target(target_dir, &self.target)?;
        self.dir
            .rename_to(&self.temp_name, target_dir, &self.target, true)?;
        self.committed = true;
        self.sink.settle();
        Ok(written)
    }
}

impl AtomicWriter {
    /// [`AtomicWriter::commit`], but a file already at the target is replaced only with
    /// `overwrite` (else [`FsError::Exists`], decided atomically by the rename itself,
    /// `RENAME_NOREPLACE`); says whether a file was replaced.
    pub fn commit_new_or_replace(mut self, overwrite: bool) -> Result<(Written, bool), FsError> {
        if let Some((uid, gid)) = self.owner {
            fchown(std::os::fd::AsFd::as_fd(self.sink.file()), uid, gid)?;
        }
        let written = self.sink.finish()?;
        if self.target.is_empty() {
            return Err(FsError::EmptyPath);
        }
        let target_dir = self.target_dir.as_ref().unwrap_or(&self.dir);
        check_target(target_dir, &self.target)?;
        let replaced = match self
            .dir
            .rename_to(&self.temp_name, target_dir, &self.target, false)
        {
            Ok(()) => false,
            Err(FsError::Exists) if overwrite => {
                // Checked again: what took the name meanwhile may be a link or a folder.
                check_target(target_dir, &self.target)?;
                self.dir
                    .rename_to(&self.temp_name, target_dir, &self.target, true)?;
                true
            }
            Err(e) => return Err(e),
        };
        self.committed = true;
        self.sink.settle();
        Ok((written, replaced))
    }
}

impl AsMut<ByteSink> for AtomicWriter {
    fn as_mut(&mut self) -> &mut ByteSink {
        &mut self.sink
    }
}

impl std::io::Write for AtomicWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.sink.write(buf).map_err(std::io::Error::other)?;
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

/// Makes a hidden temporary (0600) in `dir`: its name and the file, open for writing.
pub fn create_temporary(dir: &Dir) -> Result<(String, File), FsError> {
    let mut attempts = 0;
    loop {
        let temp_name = format!("{TEMP_PREFIX}{}", crate::random_base32::<10>());
        match dir.create_new_file(&temp_name, 0o600) {
            Ok(file) => return Ok((temp_name, file)),
            Err(FsError::Exists) if attempts < 8 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Which file a temporary must still be: the device and inode of its descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// The device the file lives on.
    pub dev: u64,
    /// The inode number of the file on that device.
    pub ino: u64,
}

impl FileId {
    /// The id of an open file.
    pub fn of(file: &File) -> Result<FileId, FsError> {
        let meta = file.metadata().map_err(FsError::from)?;
        Ok(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// How [`place_temporary`] leaves the placed file, and what it does to one already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The placed file's mode.
    pub mode: u32,
    /// Its owner, when it must be given away (container mode).
    pub owner: Option<(u32, u32)>,
    /// Whether a regular file already at the target is replaced (else: `Exists`, and
    /// nothing changes; the kernel decides, in the rename itself).
    pub replace: bool,
}

/// Opens the temporary `temp_name` of `dir` with `access`, only while it is still the
/// regular file `expect`: a name swapped meanwhile (a link, another file) is refused, and
/// no link is followed.
pub(crate) fn open_staged(
    dir: &Dir,
    temp_name: &str,
    expect: FileId,
    access: OFlags,
) -> Result<File, FsError> {
    check_temporary_name(temp_name)?;
    let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(
        rustix::fs::openat(dir.fd(), temp_name, flags, Mode::empty())
            .map_err(FsError::from_errno)?,
    );
    let meta = file.metadata().map_err(FsError::from)?;
    if !meta.is_file() || meta.dev() != expect.dev || meta.ino() != expect.ino {
        return Err(FsError::PathEscapes);
    }
    Ok(file)
}

/// Places the temporary `temp_name` of `dir`, which another process filled and fsynced,
/// at `target` in `target_dir`: only while it is still the regular file `expect` (a name
/// swapped meanwhile is refused), as `placement` says; a link or a folder at the target
/// is refused as [`AtomicWriter::commit`] refuses it.
pub fn place_temporary(
    dir: &Dir,
    temp_name: &str,
    target_dir: &Dir,
    target: &str,
    expect: FileId,
    placement: Placement,
) -> Result<(), FsError> {
    check_name(target)?;
    let file = open_staged(dir, temp_name, expect, OFlags::RDONLY)?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(placement.mode)).map_err(FsError::from_errno)?;
    if let Some((uid, gid)) = placement.owner {
        fchown(std::os::fd::AsFd::as_fd(&file), uid, gid)?;
    }
    check_target(target_dir, target)?;
    dir.rename_to(temp_name, target_dir, target, placement.replace)
}

/// Refuses early, before any byte is written, a target that could not be placed: a name
/// that is not one plain component, a link, a folder or anything but a regular file; and
/// without `replace`, anything at all (`Exists`). The placement itself decides in the
/// end: this only spares sending bytes that would be refused.
pub fn check_placeable(dir: &Dir, name: &str, replace: bool) -> Result<(), FsError> {
    check_name(name)?;
    match target_kind(dir, name)? {
        Some(_) if !replace => Err(FsError::Exists),
        kind => placeable(kind),
    }
}

/// Removes the temporary `temp_name` of `dir`; one already gone is fine.
pub fn remove_temporary(dir: &Dir, temp_name: &str) -> Result<(), FsError> {
    check_temporary_name(temp_name)?;
    match rustix::fs::unlinkat(dir.fd(), temp_name, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// The name under which a change keeps the previous file of the target its temporary
/// `temp` will replace: the temporary's own name with a suffix, so whoever knows the
/// temporary (a journal of the change, see ferry-exec) knows where the previous file is.
pub fn kept_name(temp: &str) -> String {
    format!("{temp}{KEPT_SUFFIX}")
}

/// The suffix of [`kept_name`].
const KEPT_SUFFIX: &str = ".was";

/// Keeps the file `name` of `dir` as `kept` (a [`kept_name`]: a second hard link to it),
/// so that a change of several files can put it back: see [`restore_previous`]. `None`
/// when there is no file at `name`.
pub fn keep_previous(dir: &Dir, name: &str, kept: &str) -> Result<Option<String>, FsError> {
    check_name(name)?;
    check_temporary_name(kept)?;
    check_target(dir, name)?;
    let from = crate::name::name_to_bytes(name);
    match rustix::fs::linkat(dir.fd(), &*from, dir.fd(), kept, AtFlags::empty()) {
        Ok(()) => Ok(Some(kept.to_owned())),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// Puts the file [`keep_previous`] kept as `kept` back at `name`, over what is there now.
pub fn restore_previous(dir: &Dir, kept: &str, name: &str) -> Result<(), FsError> {
    check_temporary_name(kept)?;
    check_name(name)?;
    dir.rename(kept, name, true)
}

/// Only a temporary's own name may be placed or removed by name.
pub(crate) fn check_temporary_name(name: &str) -> Result<(), FsError> {
    check_name(name)?;
    if !name.starts_with(TEMP_PREFIX) {
        return Err(FsError::UnsafeName(name.to_owned()));
    }
    Ok(())
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
    placeable(target_kind(dir, name)?)
}

/// What is at `name` in `dir` (a link not followed); `None` when nothing is.
fn target_kind(dir: &Dir, name: &str) -> Result<Option<FileType>, FsError> {
    match rustix::fs::statat(
        dir.fd(),
        &*crate::name::name_to_bytes(name),
        AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// Whether a file may be placed over what is there: nothing, or a regular file.
fn placeable(kind: Option<FileType>) -> Result<(), FsError> {
    match kind {
        None | Some(FileType::RegularFile) => Ok(()),
        Some(FileType::Symlink) => Err(FsError::PathEscapes),
        Some(FileType::Directory) => Err(FsError::IsDirectory),
        Some(_) => Err(FsError::NotRegular),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;
    use std::sync::Mutex;

    use sha2::{Digest, Sha256};

    use super::*;

    fn placed(mode: u32) -> Placement {
        Placement {
            mode,
            owner: None,
            replace: true,
        }
    }

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
    fn a_new_file_never_replaces_one_that_appeared_meanwhile() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        let temporaries = || {
            std::fs::read_dir(tmp.path())
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().starts_with(TEMP_PREFIX)
                })
                .count()
        };
        let mut writer = AtomicWriter::create(&dir, "f").unwrap();
        writer.write(b"mine").unwrap();
        // Free when the writer started; taken before it is placed.
        std::fs::write(tmp.path().join("f"), b"theirs").unwrap();
        let e = writer.commit_new_or_replace(false).unwrap_err();
        assert!(matches!(e, FsError::Exists), "{e:?}");
        assert_eq!(std::fs::read(tmp.path().join("f")).unwrap(), b"theirs");
        assert_eq!(temporaries(), 0);
        // With overwrite it is replaced, and says so; a free name is not "replaced".
        let mut writer = AtomicWriter::create(&dir, "f").unwrap();
        writer.write(b"mine").unwrap();
        let (written, replaced) = writer.commit_new_or_replace(true).unwrap();
        assert_eq!((written.size, replaced), (4, true));
        assert_eq!(std::fs::read(tmp.path().join("f")).unwrap(), b"mine");
        let mut writer = AtomicWriter::create(&dir, "g").unwrap();
        writer.write(b"new").unwrap();
        assert!(!writer.commit_new_or_replace(false).unwrap().1);
        assert_eq!(temporaries(), 0);
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

    #[test]
    fn a_temporary_filled_elsewhere_is_placed_only_while_it_is_the_same_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        let (temp, file) = create_temporary(&dir).unwrap();
        let id = FileId::of(&file).unwrap();
        let mut sink = ByteSink::new(file);
        sink.write(b"filled by the other side").unwrap();
        let written = sink.finish().unwrap();
        assert_eq!(written.size, 24);

        // Swapped for another file meanwhile: refused, and nothing is placed.
        let (other, other_file) = create_temporary(&dir).unwrap();
        drop(other_file);
        std::fs::rename(tmp.path().join(&other), tmp.path().join(&temp)).unwrap();
        assert!(matches!(
            place_temporary(&dir, &temp, &dir, "out.txt", id, placed(0o600)),
            Err(FsError::PathEscapes)
        ));
        assert!(!tmp.path().join("out.txt").exists());
        remove_temporary(&dir, &temp).unwrap();

        // A link planted at the target is refused, not replaced.
        let (temp, file) = create_temporary(&dir).unwrap();
        let id = FileId::of(&file).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("linked.txt")).unwrap();
        assert!(matches!(
            place_temporary(&dir, &temp, &dir, "linked.txt", id, placed(0o600)),
            Err(FsError::PathEscapes)
        ));
        // The same file at a plain name is placed, with the mode asked for.
        place_temporary(&dir, &temp, &dir, "placed.txt", id, placed(0o640)).unwrap();
        let meta = std::fs::metadata(tmp.path().join("placed.txt")).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o640);
        assert!(!tmp.path().join(&temp).exists());
    }

    #[test]
    fn a_placement_that_keeps_what_is_there_refuses_and_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        std::fs::write(tmp.path().join("kept.txt"), b"old").unwrap();
        assert!(matches!(
            check_placeable(&dir, "kept.txt", false),
            Err(FsError::Exists)
        ));
        check_placeable(&dir, "kept.txt", true).unwrap();
        check_placeable(&dir, "free.txt", false).unwrap();
        let (temp, mut file) = create_temporary(&dir).unwrap();
        std::io::Write::write_all(&mut file, b"new").unwrap();
        let id = FileId::of(&file).unwrap();
        let keep = Placement {
            replace: false,
            ..placed(0o600)
        };
        assert!(matches!(
            place_temporary(&dir, &temp, &dir, "kept.txt", id, keep),
            Err(FsError::Exists)
        ));
        assert_eq!(std::fs::read(tmp.path().join("kept.txt")).unwrap(), b"old");
        place_temporary(&dir, &temp, &dir, "free.txt", id, keep).unwrap();
        assert_eq!(std::fs::read(tmp.path().join("free.txt")).unwrap(), b"new");
    }

    #[test]
    fn only_a_temporary_is_placed_or_removed_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient(tmp.path()).unwrap();
        std::fs::write(tmp.path().join("keep.txt"), b"keep").unwrap();
        let id = FileId { dev: 0, ino: 0 };
        for name in ["keep.txt", "../x", "a/b", ""] {
            assert!(remove_temporary(&dir, name).is_err(), "{name:?}");
            assert!(place_temporary(&dir, name, &dir, "t", id, placed(0o600)).is_err());
        }
        assert!(tmp.path().join("keep.txt").exists());
        // One already gone is fine.
        remove_temporary(&dir, &format!("{TEMP_PREFIX}gone")).unwrap();
    }
}
