//! Confined extraction: writes exactly a plan into a fresh folder, or leaves nothing.
//!
//! The archive is read a second time and each entry must be the plan's next one, so an
//! archive that changed since it was planned writes nothing it was not admitted for.
//! Every folder is made 0700 and every file 0600 (no mode of the archive is kept, so
//! none is ever setuid, setgid or sticky), owners are never changed, and no link is
//! ever followed: all writes go through ferry-fs handles.

use std::io::{Read, Write};

use ferry_fs::{Dir, Follow, FsError};

use crate::ArchiveError;
use crate::input::Input;
use crate::names;
use crate::plan::{EntryType, Plan, PlannedEntry, RootEntry};
use crate::stream::{MemberKind, Stream};

/// The mode of every folder extraction makes.
const DIR_MODE: u32 = 0o700;
/// The mode of every file extraction makes.
const FILE_MODE: u32 = 0o600;

/// What an extraction wrote.
#[derive(Debug)]
pub struct Extracted {
    /// The new folder, open.
    pub dir: Dir,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Makes the folder `name` (0700, which must not exist) in `parent` and writes the
/// archive in `reader` into it, as `plan` admitted it. On any failure the folder is
/// removed with everything written into it.
pub fn extract(
    reader: impl Read,
    plan: &Plan,
    parent: &Dir,
    name: &str,
) -> Result<Extracted, ArchiveError> {
    if name.contains('/') || name == "." {
        return Err(ArchiveError::BadName {
            path: name.to_owned(),
            why: "the destination must be one name in its folder",
        });
    }
    ferry_fs::check_relative(name)?;
    parent.create_dir(name, DIR_MODE)?;
    let result = parent
        .open_dir(name, Follow::Never)
        .map_err(ArchiveError::from)
        .and_then(|dir| {
            let (files, bytes) = write_plan(reader, plan, &dir)?;
            Ok(Extracted { dir, files, bytes })
        });
    if result.is_err() {
        // Best effort: the error that stopped extraction is the one to report.
        let _ = parent.remove(name);
    }
    result
}

/// Writes every entry of the archive, checking each against the plan.
fn write_plan(reader: impl Read, plan: &Plan, root: &Dir) -> Result<(u64, u64), ArchiveError> {
    let mut stream = Stream::new(
        Input::new(reader, plan.limits.archive_max_bytes)?,
        plan.limits,
    );
    let mut expected = plan.entries.iter();
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut index = 0usize;
    let mut root_entry = RootEntry::default();
    let mut folders = Folders::new(root);
    let mut buf = vec![0u8; 64 * 1024];
    while let Some(member) = stream.next_member()? {
        let Some(path) = names::admit(&member.name, member.kind, plan.platform)? else {
            root_entry.met()?;
            continue;
        };
        let differs = || {
            ArchiveError::malformed(format!(
                "entry {index} ({path:?}) is not the one planned; the archive changed"
            ))
        };
        let want = expected.next().ok_or_else(differs)?;
        let got = PlannedEntry {
            path: path.clone(),
            kind: EntryType::of(member.kind),
            size: member.size,
        };
        if *want != got {
            return Err(differs());
        }
        match member.kind {
            MemberKind::Dir => {
                folders.open(&path)?;
            }
            MemberKind::File => {
                let (parent, name) = match path.rsplit_once('/') {
                    Some((parent, name)) => (folders.open(parent)?, name),
                    None => (root, path.as_str()),
                };
                write_file(&mut stream, parent, &path, name, &mut buf)?;
                files += 1;
                bytes += member.size;
            }
        }
        index += 1;
    }
    if expected.next().is_some() {
        return Err(ArchiveError::malformed(
            "the archive has fewer entries than planned; it changed",
        ));
    }
    // The tree is unseen until its folder is published: one sync of the file system
    // makes every file durable, instead of an fsync each.
    root.sync_filesystem()?;
    Ok((files, bytes))
}

/// The folders of the tree being written. The tar writer sends a folder's files
/// together, so the last folder opened is kept, and a file beside the one before it
/// costs no walk from the root.
struct Folders<'a> {
    root: &'a Dir,
    last: Option<(String, Dir)>,
}

impl<'a> Folders<'a> {
    fn new(root: &'a Dir) -> Self {
        Folders { root, last: None }
    }

    /// The folder `path` (relative to the root), made with its parents if missing.
    fn open(&mut self, path: &str) -> Result<&Dir, ArchiveError> {
        let kept = matches!(&self.last, Some((last, _)) if last == path);
        if !kept {
            let dir = self.root.create_dir_all(path, DIR_MODE)?;
            self.last = Some((path.to_owned(), dir));
        }
        Ok(&self.last.as_ref().expect("kept or just opened").1)
    }
}

/// Writes one file of the member's size as `name` in `dir` (`path` names it in errors).
/// The tree is private and unpublished, so the file is made at its name at once; one
/// that is already there is never replaced.
fn write_file(
    stream: &mut Stream<'_>,
    dir: &Dir,
    path: &str,
    name: &str,
    buf: &mut [u8],
) -> Result<(), ArchiveError> {
    // The plan has no two equal names, but the folder may fold case where the plan
    // thought it would not (a case-insensitive folder on Linux).
    let mut file = match dir.create_new_file(name, FILE_MODE) {
        Ok(file) => file,
        Err(FsError::Exists) => {
            return Err(ArchiveError::NameCollision {
                path: path.to_owned(),
                other: path.to_owned(),
                why: "the destination folder already has that name (it folds case?)",
            });
        }
        Err(e) => return Err(e.into()),
    };
    loop {
        let n = stream.read_data(buf)?;
        if n == 0 {
            return Ok(());
        }
        file.write_all(&buf[..n])
            .map_err(|e| ArchiveError::from(FsError::from_io(e)))?;
    }
}
