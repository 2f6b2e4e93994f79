//! Confined directory handles (spec core C-PATH).
//!
//! Every path below a handle is resolved by the kernel with `openat2`
//! (`RESOLVE_BENEATH`, plus `RESOLVE_NO_SYMLINKS` for writes). Where `openat2` is
//! unavailable (old kernels, seccomp filters answering ENOSYS or EPERM) the path is
//! walked one component at a time: with `O_NOFOLLOW` at every step when no symlink may be
//! followed, and by cap-std (which resolves each link itself, beneath the handle) when
//! links inside may be followed.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

use crate::FsError;
use crate::name::{name_from_bytes, name_to_bytes as raw};
use crate::path::{check_relative, split_parent};

/// How symlinks met while resolving a path are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    /// Any symlink at any component fails with [`FsError::PathEscapes`]. Every write uses this.
    Never,
    /// Symlinks are followed while they stay beneath the handle.
    Beneath,
    /// Symlinks and `..` are followed wherever they lead, as a shell would: only for a
    /// process that already is the person, whose own permissions decide what it reaches.
    Anywhere,
}

/// What kind of thing a directory entry is, seen without following links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed to tell its kind).
    Symlink,
    /// Anything else: a socket, a FIFO, a device.
    Other,
}

/// Metadata of one entry, read with `AT_SYMLINK_NOFOLLOW`.
#[derive(Clone, Debug)]
pub struct Metadata {
    /// What the entry is.
    pub kind: EntryKind,
    /// Its length in bytes (apparent size).
    pub size: u64,
    /// When its content last changed.
    pub mtime: SystemTime,
    /// Its inode number.
    pub inode: u64,
    /// Its permission bits and file type, as `st_mode`.
    pub mode: u32,
    /// The owner's uid.
    pub uid: u32,
    /// How many names (hard links) the entry has.
    pub links: u64,
}

/// One entry of a directory listing.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's name in its directory.
    pub name: String,
    /// What `lstat` says of it.
    pub meta: Metadata,
}

/// An open directory; every path given to it resolves beneath it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

const OPENAT2_UNKNOWN: u8 = 0;
const OPENAT2_YES: u8 = 1;
const OPENAT2_NO: u8 = 2;
static OPENAT2: AtomicU8 = AtomicU8::new(OPENAT2_UNKNOWN);

/// Forces the component-by-component fallback (`false`) or lets `openat2` be tried again
/// (`true`). Tests use it to run the same checks through both resolvers; operators can set
/// `FERRY_FS_NO_OPENAT2=1` for the same effect.
pub fn set_openat2_enabled(enabled: bool) {
    let state = if enabled { OPENAT2_UNKNOWN } else { OPENAT2_NO };
    OPENAT2.store(state, Ordering::Relaxed);
}

/// Whether `openat2` may be tried: not turned off by [`set_openat2_enabled`] or
/// `FERRY_FS_NO_OPENAT2`. A process acting for this one (host mode's worker) is told it.
pub fn openat2_allowed() -> bool {
    openat2_usable()
}

fn openat2_usable() -> bool {
    match OPENAT2.load(Ordering::Relaxed) {
        OPENAT2_YES => true,
        OPENAT2_NO => false,
        _ => {
            let off = std::env::var_os("FERRY_FS_NO_OPENAT2").is_some_and(|v| v != "0");
            if off {
                OPENAT2.store(OPENAT2_NO, Ordering::Relaxed);
            }
            !off
        }
    }
}

/// When a file was last written, as its status says.
fn modified(stat: &rustix::fs::Stat) -> SystemTime {
    UNIX_EPOCH
        + Duration::new(
            u64::try_from(stat.st_mtime).unwrap_or(0),
            u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
        )
}

impl Dir {
    /// Opens a directory named by the operator (the site root). The only ambient open.
    pub fn open_ambient(path: &Path) -> Result<Dir, FsError> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(FsError::from_errno)?;
        Ok(Dir { fd })
    }

    /// A handle to the folder `path`, reached as the kernel resolves it (links followed),
    /// that only names entries beneath it (`O_PATH`): it needs search permission alone,
    /// like a shell's `cd`. Cannot be listed; open a child with [`Dir::open_dir`] for that.
    /// For a process that already is the person, whose own permissions decide.
    pub fn open_path(path: &Path) -> Result<Dir, FsError> {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(FsError::from_errno)?;
        Ok(Dir { fd })
    }

    /// A handle to a folder the caller opened itself.
    pub(crate) fn from_fd(fd: OwnedFd) -> Dir {
        Dir { fd }
    }

    /// A second handle to the same directory.
    pub fn try_clone(&self) -> Result<Dir, FsError> {
        let fd = self.fd.try_clone().map_err(FsError::Io)?;
        Ok(Dir { fd })
    }

    /// Opens a directory beneath this one.
    pub fn open_dir(&self, rel: &str, follow: Follow) -> Result<Dir, FsError> {
        check_relative(rel)?;
        let fd = self.resolve(
            rel,
            follow,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )?;
        Ok(Dir { fd })
    }

    /// Opens a regular file beneath this one for reading.
    pub fn open_file(&self, rel: &str, follow: Follow) -> Result<File, FsError> {
        check_relative(rel)?;
        // O_NONBLOCK so that a FIFO planted at the name cannot hang the open.
        let fd = self.resolve(
            rel,
            follow,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        let stat = rustix::fs::fstat(&fd).map_err(FsError::from_errno)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(FsError::IsDirectory),
            _ => return Err(FsError::NotRegular),
        }
        rustix::fs::fcntl_setfl(&fd, OFlags::RDONLY).map_err(FsError::from_errno)?;
        Ok(File::from(fd))
    }

    /// Metadata of the entry at `rel`, without following a symlink at its last component.
    pub fn metadata(&self, rel: &str) -> Result<Metadata, FsError> {
        check_relative(rel)?;
        let (parent, name) = self.parent_of(rel)?;
        let dir = parent.as_ref().unwrap_or(self);
        let stat = rustix::fs::statat(&dir.fd, &*raw(name), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(FsError::from_errno)?;
        Ok(Metadata::from_stat(&stat))
    }

    /// Metadata of this directory itself.
    pub fn own_metadata(&self) -> Result<Metadata, FsError> {
        let stat = rustix::fs::fstat(&self.fd).map_err(FsError::from_errno)?;
        Ok(Metadata::from_stat(&stat))
    }

    /// Creates one directory; its parents must exist and no component may be a symlink.
    pub fn create_dir(&self, rel: &str, mode: u32) -> Result<(), FsError> {
        check_relative(rel)?;
        let (parent, name) = self.parent_of(rel)?;
        let dir = parent.as_ref().unwrap_or(self);
        rustix::fs::mkdirat(&dir.fd, &*raw(name), Mode::from_raw_mode(mode))
            .map_err(FsError::from_errno)
    }

    /// Creates `rel` and its missing parents (never through a symlink) and opens it.
    pub fn create_dir_all(&self, rel: &str, mode: u32) -> Result<Dir, FsError> {
        self.create_dir_all_owned(rel, mode, None)
    }

    /// [`Dir::create_dir_all`], giving each folder it creates (none that existed) to
    /// `owner`, through the folder's own descriptor.
    pub fn create_dir_all_owned(
        &self,
        rel: &str,
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<Dir, FsError> {
        self.create_dir_all_made(rel, mode, owner)
            .map(|(dir, _made)| dir)
    }

    /// [`Dir::create_dir_all_owned`], also saying which folders it made, so that a write
    /// they were made for can take them back when it fails ([`MadeDirs::remove_empty`]).
    pub fn create_dir_all_made(
        &self,
        rel: &str,
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(Dir, MadeDirs), FsError> {
        check_relative(rel)?;
        let mut made = MadeDirs::default();
        let mut current = self.try_clone()?;
        for component in components(rel) {
            // Opened first: on all but the first use, the folder is there.
            current = match current.open_component(component) {
                Err(FsError::NotFound) => {
                    let (child, new) = current.make_component(component, mode, owner)?;
                    if new {
                        made.0.push((current, component.to_owned()));
                    }
                    child
                }
                opened => opened?,
            };
        }
        Ok((current, made))
    }

    /// Makes the folder `name` here (given to `owner`) and opens it, saying whether this
    /// call made it; one a concurrent caller made meanwhile is opened as it is.
    fn make_component(
        &self,
        name: &str,
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(Dir, bool), FsError> {
        match rustix::fs::mkdirat(&self.fd, &*raw(name), Mode::from_raw_mode(mode)) {
            Ok(()) => {
                let made = self.open_component(name)?;
                if let Some((uid, gid)) = owner {
                    made.chown(uid, gid)?;
                }
                Ok((made, true))
            }
            Err(Errno::EXIST) => Ok((self.open_component(name)?, false)),
            Err(e) => Err(FsError::from_errno(e)),
        }
    }

    /// The names in this directory (without `.` and `..`), unsorted, with no metadata:
    /// one `getdents` pass, for listings that stat only the part they show.
    pub fn names(&self) -> Result<Vec<String>, FsError> {
        let mut out = Vec::new();
        self.for_each_name(|name| {
            out.push(name_from_bytes(name.to_bytes()).into_owned());
            Ok(())
        })?;
        Ok(out)
    }

    /// The names in this directory (without `.` and `..`) with what each is, as the
    /// directory itself says (`d_type`), stat'ing (without following links) only where
    /// the file system does not say: a walk that describes only some entries (a search)
    /// costs one `getdents` pass. Entries that vanish while listing are skipped.
    pub fn kinds(&self) -> Result<Vec<(String, EntryKind)>, FsError> {
        let mut out = Vec::new();
        let mut reader = rustix::fs::Dir::read_from(&self.fd).map_err(FsError::from_errno)?;
        while let Some(entry) = reader.read() {
            let entry = entry.map_err(FsError::from_errno)?;
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => Metadata::from_stat(&stat).kind,
                        Err(Errno::NOENT) => continue,
                        Err(e) => return Err(FsError::from_errno(e)),
                    }
                }
                FileType::RegularFile => EntryKind::File,
                FileType::Directory => EntryKind::Dir,
                FileType::Symlink => EntryKind::Symlink,
                _ => EntryKind::Other,
            };
            out.push((name_from_bytes(name.to_bytes()).into_owned(), kind));
        }
        Ok(out)
    }

    /// Lists this directory (without `.` and `..`), each entry's metadata read without
    /// following links. Entries that vanish while listing are skipped.
    pub fn entries(&self) -> Result<Vec<Entry>, FsError> {
        let mut out = Vec::new();
        self.for_each_name(|name| {
            match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => out.push(Entry {
                    name: name_from_bytes(name.to_bytes()).into_owned(),
                    meta: Metadata::from_stat(&stat),
                }),
                Err(Errno::NOENT) => {}
                Err(e) => return Err(FsError::from_errno(e)),
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The apparent size (`st_size`) of every regular file beneath this directory, at
    /// any depth, links not followed, temporaries left out (a writer counts its own), a
    /// file with several links counted once. A sparse file counts at its full length.
    pub fn file_bytes(&self) -> Result<u64, FsError> {
        let mut total = 0u64;
        let mut linked = std::collections::HashSet::new();
        self.walk_files(true, |_, name, stat| {
            let temporary = name.to_bytes().starts_with(crate::TEMP_PREFIX.as_bytes());
            if !temporary && (stat.st_nlink <= 1 || linked.insert(stat.st_ino)) {
                total = total.saturating_add(stat.st_size as u64);
            }
            Ok(())
        })?;
        Ok(total)
    }

    /// Removes every hidden temporary (a regular file named [`crate::TEMP_PREFIX`]…)
    /// beneath this directory, at any depth and links not followed, last modified before
    /// `cutoff`, whose name `keep` does not claim: what writers that died left (a writer
    /// that lives touches its temporary as its bytes come). How many went.
    pub fn remove_stale_temporaries(
        &self,
        cutoff: SystemTime,
        keep: impl Fn(&str) -> bool,
    ) -> Result<usize, FsError> {
        self.remove_stale(true, cutoff, keep)
    }

    /// [`Dir::remove_stale_temporaries`] in this directory alone, not beneath it.
    pub fn remove_stale_temporaries_here(
        &self,
        cutoff: SystemTime,
        keep: impl Fn(&str) -> bool,
    ) -> Result<usize, FsError> {
        self.remove_stale(false, cutoff, keep)
    }

    fn remove_stale(
        &self,
        beneath: bool,
        cutoff: SystemTime,
        keep: impl Fn(&str) -> bool,
    ) -> Result<usize, FsError> {
        let mut removed = 0;
        self.walk_files(beneath, |dir, name, stat| {
            let Some(name) = name.to_str().ok().filter(|n| crate::is_temporary(n)) else {
                return Ok(());
            };
            if modified(stat) < cutoff && !keep(name) {
                crate::remove_temporary(dir, name)?;
                removed += 1;
            }
            Ok(())
        })?;
        Ok(removed)
    }

    /// Calls `visit` with the folder, name and status of every regular file in this
    /// directory and, when `beneath`, at any depth below it, no link followed; a folder
    /// gone or replaced by a link while the walk went on is left out.
    fn walk_files(
        &self,
        beneath: bool,
        mut visit: impl FnMut(&Dir, &std::ffi::CStr, &rustix::fs::Stat) -> Result<(), FsError>,
    ) -> Result<(), FsError> {
        // Folders still to walk, by parent and name: a parent stays open only while a
        // child of it waits, so open handles grow with the depth, not the width.
        let mut pending: Vec<(std::rc::Rc<Dir>, String)> = Vec::new();
        let mut next = Some(self.try_clone()?);
        loop {
            let dir = match next.take() {
                Some(dir) => dir,
                None => match pending.pop() {
                    None => return Ok(()),
                    Some((parent, name)) => match parent.open_component(&name) {
                        Ok(child) => child,
                        Err(FsError::NotFound | FsError::PathEscapes) => continue,
                        Err(e) => return Err(e),
                    },
                },
            };
            let dir = std::rc::Rc::new(dir);
            dir.for_each_name(|name| {
                let stat = match rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => stat,
                    Err(Errno::NOENT) => return Ok(()),
                    Err(e) => return Err(FsError::from_errno(e)),
                };
                match FileType::from_raw_mode(stat.st_mode) {
                    FileType::Directory if beneath => pending.push((
                        dir.clone(),
                        String::from_utf8_lossy(name.to_bytes()).into_owned(),
                    )),
                    FileType::RegularFile => visit(&dir, name, &stat)?,
                    _ => {}
                }
                Ok(())
            })?;
        }
    }

    /// Calls `f` with each name in this directory but `.` and `..`.
    pub(crate) fn for_each_name(
        &self,
        mut f: impl FnMut(&std::ffi::CStr) -> Result<(), FsError>,
    ) -> Result<(), FsError> {
        let mut reader = rustix::fs::Dir::read_from(&self.fd).map_err(FsError::from_errno)?;
        while let Some(entry) = reader.read() {
            let entry = entry.map_err(FsError::from_errno)?;
            let name = entry.file_name();
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                f(name)?;
            }
        }
        Ok(())
    }

    /// Renames `from` to `to` (both beneath this handle). The last component of `from`
    /// is moved as it is, link or not; no other component may be a symlink.
    pub fn rename(&self, from: &str, to: &str, replace: bool) -> Result<(), FsError> {
        self.rename_to(from, self, to, replace)
    }

    /// Renames `from` beneath this handle to `to` beneath `target`.
    pub fn rename_to(
        &self,
        from: &str,
        target: &Dir,
        to: &str,
        replace: bool,
    ) -> Result<(), FsError> {
        check_relative(from)?;
        check_relative(to)?;
        let (from_parent, from_name) = self.parent_of(from)?;
        let (to_parent, to_name) = target.parent_of(to)?;
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        rustix::fs::renameat_with(
            &from_parent.as_ref().unwrap_or(self).fd,
            &*raw(from_name),
            &to_parent.as_ref().unwrap_or(target).fd,
            &*raw(to_name),
            flags,
        )
        .map_err(FsError::from_errno)
    }

    /// Creates the file `name` (one component) here with `mode`, open for writing; an
    /// existing entry of that name, a symlink included, is [`FsError::Exists`]. For
    /// folders nobody else sees yet (a tree being extracted before it is published),
    /// where a file needs no temporary of its own.
    pub fn create_new_file(&self, name: &str, mode: u32) -> Result<File, FsError> {
        check_relative(name)?;
        if name.contains('/') || name == "." {
            return Err(FsError::UnsafeName(name.to_owned()));
        }
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(&self.fd, &*raw(name), flags, Mode::from_raw_mode(mode))
            .map(File::from)
            .map_err(FsError::from_errno)
    }

    /// Removes a file, a symlink (not its target) or a whole directory tree.
    pub fn remove(&self, rel: &str) -> Result<(), FsError> {
        check_relative(rel)?;
        let (parent, name) = self.parent_of(rel)?;
        parent.as_ref().unwrap_or(self).remove_entry(name)
    }

    /// Makes everything written on this folder's file system durable (`syncfs`): one
    /// call for a tree of files written with [`crate::AtomicWriter::sync_later`].
    pub fn sync_filesystem(&self) -> Result<(), FsError> {
        rustix::fs::syncfs(&self.fd).map_err(FsError::from_errno)
    }

    /// Makes this folder's own entries durable (`fsync` of the folder): a rename into
    /// it survives a crash.
    pub fn sync(&self) -> Result<(), FsError> {
        rustix::fs::fsync(&self.fd).map_err(FsError::from_errno)
    }

    /// Removes an empty folder (`NotEmpty` otherwise).
    pub fn remove_empty_dir(&self, rel: &str) -> Result<(), FsError> {
        check_relative(rel)?;
        let (parent, name) = self.parent_of(rel)?;
        let dir = parent.as_ref().unwrap_or(self);
        rustix::fs::unlinkat(&dir.fd, &*raw(name), AtFlags::REMOVEDIR).map_err(FsError::from_errno)
    }

    fn remove_entry(&self, name: &str) -> Result<(), FsError> {
        // Fails only for a name holding NUL, which no entry can have.
        let name = std::ffi::CString::new(raw(name).into_owned())
            .map_err(|_| FsError::from_errno(Errno::INVAL))?;
        self.remove_tree(&name)
    }

    /// Changes the owner of this directory through its descriptor.
    pub fn chown(&self, uid: u32, gid: u32) -> Result<(), FsError> {
        fchown(self.fd.as_fd(), uid, gid)
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Opens the parent directory of `rel` (never through a symlink) and returns it with the
    /// last component. `None` means the parent is this handle itself.
    fn parent_of<'a>(&self, rel: &'a str) -> Result<(Option<Dir>, &'a str), FsError> {
        let (parent, name) = split_parent(rel)?;
        match parent {
            Some(parent) => Ok((Some(self.open_dir(parent, Follow::Never)?), name)),
            None => Ok((None, name)),
        }
    }

    /// Opens one child directory by name, refusing a symlink.
    fn open_component(&self, name: &str) -> Result<Dir, FsError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(&self.fd, &*raw(name), flags, Mode::empty()) {
            Ok(fd) => Ok(Dir { fd }),
            Err(e) => Err(self.classify_component_error(name, e)),
        }
    }

    /// Turns the error of an `O_NOFOLLOW` open into the reason: a symlink is an escape.
    fn classify_component_error(&self, name: &str, e: Errno) -> FsError {
        if matches!(e, Errno::LOOP | Errno::NOTDIR)
            && let Ok(stat) = rustix::fs::statat(&self.fd, &*raw(name), AtFlags::SYMLINK_NOFOLLOW)
            && FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
        {
            return FsError::PathEscapes;
        }
        FsError::from_errno(e)
    }

    /// Opens `rel` (already checked) beneath this handle with `flags`.
    pub(crate) fn resolve(
        &self,
        rel: &str,
        follow: Follow,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, FsError> {
        let flags = flags | OFlags::CLOEXEC;
        if follow == Follow::Anywhere {
            return rustix::fs::openat(&self.fd, &*raw(rel), flags, mode)
                .map_err(FsError::from_errno);
        }
        if openat2_usable() {
            let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            if follow == Follow::Never {
                resolve |= ResolveFlags::NO_SYMLINKS;
            }
            // EAGAIN: the kernel saw a concurrent rename and asks for a retry.
            for _ in 0..16 {
                match rustix::fs::openat2(&self.fd, &*raw(rel), flags, mode, resolve) {
                    Ok(fd) => {
                        OPENAT2.store(OPENAT2_YES, Ordering::Relaxed);
                        return Ok(fd);
                    }
                    Err(Errno::AGAIN) => continue,
                    Err(Errno::NOSYS | Errno::PERM)
                        if OPENAT2.load(Ordering::Relaxed) != OPENAT2_YES =>
                    {
                        OPENAT2.store(OPENAT2_NO, Ordering::Relaxed);
                        return self.resolve_by_components(rel, follow, flags, mode);
                    }
                    Err(Errno::LOOP) if follow == Follow::Never => {
                        return Err(FsError::PathEscapes);
                    }
                    Err(e) => return Err(FsError::from_errno(e)),
                }
            }
            return Err(FsError::Io(std::io::Error::other(
                "path kept changing during resolution",
            )));
        }
        self.resolve_by_components(rel, follow, flags, mode)
    }

    fn resolve_by_components(
        &self,
        rel: &str,
        follow: Follow,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, FsError> {
        if follow == Follow::Beneath {
            return self.resolve_with_cap_std(rel, flags);
        }
        let mut parts: Vec<&str> = components(rel).collect();
        let last = parts.pop().unwrap_or(".");
        let mut current: Option<Dir> = None;
        for part in parts {
            let dir = current.as_ref().unwrap_or(self);
            current = Some(dir.open_component(part)?);
        }
        let dir = current.as_ref().unwrap_or(self);
        rustix::fs::openat(&dir.fd, &*raw(last), flags | OFlags::NOFOLLOW, mode)
            .map_err(|e| dir.classify_component_error(last, e))
    }
}

impl Dir {
    /// Opens `rel` for reading through cap-std, which follows links only beneath the handle.
    fn resolve_with_cap_std(&self, rel: &str, flags: OFlags) -> Result<OwnedFd, FsError> {
        use cap_std::fs::OpenOptionsExt;
        let base =
            cap_std::fs::Dir::from_std_file(File::from(self.fd.try_clone().map_err(FsError::Io)?));
        let opened = if flags.contains(OFlags::DIRECTORY) {
            base.open_dir(os_path(rel))
                .map(|d| OwnedFd::from(d.into_std_file()))
        } else {
            let mut options = cap_std::fs::OpenOptions::new();
            options
                .read(true)
                .custom_flags((flags & !OFlags::RDONLY).bits() as i32);
            base.open_with(os_path(rel), &options)
                .map(|f| OwnedFd::from(f.into_std()))
        };
        opened.map_err(|e| match e.raw_os_error() {
            Some(code) => FsError::from_errno(Errno::from_raw_os_error(code)),
            // cap-std reports an escape without an errno.
            None if e.kind() == std::io::ErrorKind::PermissionDenied => FsError::PathEscapes,
            None => FsError::Io(e),
        })
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

pub(crate) fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> Result<(), FsError> {
    // SAFETY-free: from_raw only wraps the number; the kernel checks it.
    let uid = rustix::fs::Uid::from_raw(uid);
    let gid = rustix::fs::Gid::from_raw(gid);
    rustix::fs::fchown(fd, Some(uid), Some(gid)).map_err(FsError::from_errno)
}

/// A relative path as cap-std takes it, with its names' bytes as on disk.
fn os_path(rel: &str) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(&raw(rel))).to_path_buf()
}

/// The folders a [`Dir::create_dir_all_made`] call made, each as its parent's handle and
/// its name, outermost first.
#[derive(Debug, Default)]
pub struct MadeDirs(Vec<(Dir, String)>);

impl MadeDirs {
    /// Whether no folder was made.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes the folders made, innermost first, each only while it is empty: a folder
    /// something was put in meanwhile (another writer's file) stays, and so do those
    /// around it. Through the parents' handles, so a folder moved away is not looked
    /// for by its old path; best effort, as it follows a failure that is the one told.
    pub fn remove_empty(self) {
        for (parent, name) in self.0.into_iter().rev() {
            if rustix::fs::unlinkat(&parent.fd, &*raw(&name), AtFlags::REMOVEDIR).is_err() {
                break;
            }
        }
    }
}

/// The non-empty, non-`.` components of a checked relative path.
fn components(rel: &str) -> impl Iterator<Item = &str> {
    rel.split('/').filter(|c| !c.is_empty() && *c != ".")
}

impl Metadata {
    /// Metadata of an open file.
    pub fn of_file(file: &File) -> Result<Metadata, FsError> {
        let stat = rustix::fs::fstat(file).map_err(FsError::from_errno)?;
        Ok(Metadata::from_stat(&stat))
    }

    fn from_stat(stat: &rustix::fs::Stat) -> Metadata {
        let kind = match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Dir,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        };
        let mtime = if stat.st_mtime >= 0 {
            UNIX_EPOCH + Duration::new(stat.st_mtime as u64, stat.st_mtime_nsec as u32)
        } else {
            UNIX_EPOCH
        };
        Metadata {
            kind,
            size: stat.st_size as u64,
            mtime,
            inode: stat.st_ino,
            mode: stat.st_mode & 0o7777,
            uid: stat.st_uid,
            // st_nlink is narrower than u64 on some targets.
            #[allow(clippy::unnecessary_cast)]
            links: stat.st_nlink as u64,
        }
    }
}

/// Is `name` one of ours? Listings never show temporaries.
pub fn is_temporary(name: &str) -> bool {
    name.starts_with(crate::atomic::TEMP_PREFIX)
}
