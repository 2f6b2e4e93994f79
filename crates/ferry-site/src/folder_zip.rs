//! A folder under `public/` as a zip (spec members M-DAILY "Whole folders").
//!
//! Two steps, both as the person: [`PublicFolder::plan_zip`] walks the folder first (no
//! link followed, FIFOs, devices, links and temporaries left out) and refuses, before a
//! byte is sent, a folder over the byte cap, the entry cap or the depth of a listing;
//! [`ZipPlan::write`] then streams the zip, opening each file again with no link
//! followed. A file removed or replaced by a link or a FIFO in between is left out; one
//! that grew past the cap fails the stream, which the caller must then abort rather
//! than end, so no one receives a cut zip that still reads as whole.

use std::io::Write;
use std::time::SystemTime;

use ferry_archive::{ZipError, ZipWriter};
use ferry_config::limits::{FOLDER_ZIP_MAX_ENTRIES, LIST_MAX_DEPTH};
use ferry_fs::{Dir, EntryKind, Follow, FsError, Metadata, is_temporary};

use crate::SiteError;
use crate::public::{PublicFolder, PublicPath};

/// One entry to write: a folder or a file, by its path below the zipped folder.
struct Planned {
    /// `/`-joined below the zipped folder; empty for the folder itself.
    rel: String,
    is_dir: bool,
    size: u64,
    mtime: SystemTime,
    mode: u32,
}

/// A folder walked and admitted for a zip, ready to be written.
pub struct ZipPlan {
    folder: Dir,
    /// The zipped folder's own name: every entry's name begins with it.
    prefix: String,
    entries: Vec<Planned>,
    total_bytes: u64,
    max_bytes: u64,
}

impl PublicFolder {
    /// Walks the folder `path` (`public` or `public/…`) for a zip of at most `max_bytes`
    /// of file content; refuses a folder that is over that, holds more than
    /// [`FOLDER_ZIP_MAX_ENTRIES`] entries or goes deeper than [`LIST_MAX_DEPTH`].
    pub fn plan_zip(&self, path: &str, max_bytes: u64) -> Result<ZipPlan, SiteError> {
        let path = PublicPath::parse(path)?;
        let folder = if path.is_root() {
            self.dir().try_clone()?
        } else {
            self.dir().open_dir(path.rel(), Follow::Never)?
        };
        let top = folder.own_metadata()?;
        let mut plan = ZipPlan {
            folder,
            prefix: path.name().to_owned(),
            entries: vec![Planned {
                rel: String::new(),
                is_dir: true,
                size: 0,
                mtime: top.mtime,
                mode: top.mode,
            }],
            total_bytes: 0,
            max_bytes,
        };
        let folder = plan.folder.try_clone()?;
        plan.walk(&folder, "", 0)?;
        Ok(plan)
    }
}

impl ZipPlan {
    /// The name to offer the browser: the folder's name and `.zip`.
    pub fn file_name(&self) -> String {
        format!("{}.zip", self.prefix)
    }

    /// Entries (folders and files) the zip will hold, as planned.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of file content the zip will carry, as planned.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    fn walk(&mut self, dir: &Dir, rel: &str, depth: usize) -> Result<(), SiteError> {
        let mut entries = dir.entries()?;
        // A backslash is a separator to many unzippers (APPNOTE 4.4.17 names '/' alone):
        // `..\..\x`, a fine name here, would land outside the folder it is unpacked in.
        entries.retain(|e| {
            !is_temporary(&e.name)
                && !e.name.contains('\\')
                && matches!(e.meta.kind, EntryKind::File | EntryKind::Dir)
        });
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            if self.entries.len() >= FOLDER_ZIP_MAX_ENTRIES {
                return Err(SiteError::TooBig(format!(
                    "the folder holds more than {FOLDER_ZIP_MAX_ENTRIES} files and folders, \
                     the most one download may carry; download a smaller folder"
                )));
            }
            let child = join(rel, &entry.name);
            if entry.meta.kind == EntryKind::File {
                self.total_bytes = self.total_bytes.saturating_add(entry.meta.size);
                if self.total_bytes > self.max_bytes {
                    return Err(SiteError::TooBig(too_large(self.max_bytes)));
                }
                self.entries.push(Planned {
                    rel: child,
                    is_dir: false,
                    size: entry.meta.size,
                    mtime: entry.meta.mtime,
                    mode: entry.meta.mode,
                });
                continue;
            }
            if depth + 1 >= LIST_MAX_DEPTH {
                return Err(SiteError::TooBig(format!(
                    "the folder goes more than {LIST_MAX_DEPTH} folders deep, deeper than \
                     a download may go; download a folder further in"
                )));
            }
            let opened = match dir.open_dir(&entry.name, Follow::Never) {
                Ok(opened) => opened,
                // Replaced by a link or removed since it was read, or closed to its
                // owner: left out, as the listing shows it empty.
                Err(FsError::PathEscapes | FsError::NotFound | FsError::PermissionDenied) => {
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            self.entries.push(Planned {
                rel: child.clone(),
                is_dir: true,
                size: 0,
                mtime: entry.meta.mtime,
                mode: entry.meta.mode,
            });
            self.walk(&opened, &child, depth + 1)?;
        }
        Ok(())
    }

    /// Writes the zip into `out`. On an error, what was written is not a whole zip and
    /// the caller must make its reader see a failure, not an end.
    pub fn write<W: Write>(self, out: W) -> Result<W, ZipError> {
        let mut zip = ZipWriter::new(out, self.max_bytes);
        for planned in &self.entries {
            let name = join(&self.prefix, &planned.rel);
            if planned.is_dir {
                zip.add_dir(&name, planned.mtime, planned.mode)?;
                continue;
            }
            let mut file = match self.folder.open_file(&planned.rel, Follow::Never) {
                Ok(file) => file,
                // Removed, or swapped for a link, a folder or a FIFO since the walk.
                Err(
                    FsError::NotFound
                    | FsError::PathEscapes
                    | FsError::NotRegular
                    | FsError::IsDirectory
                    | FsError::NotADirectory
                    | FsError::PermissionDenied,
                ) => continue,
                Err(e) => return Err(std::io::Error::other(e.to_string()).into()),
            };
            let meta =
                Metadata::of_file(&file).map_err(|e| std::io::Error::other(e.to_string()))?;
            zip.add_file(
                &name,
                meta.mtime,
                meta.mode,
                meta.size.max(planned.size),
                &mut file,
            )?;
            // A file written while it was read would stand in the zip as neither its old
            // nor its new version: the download fails rather than end as if whole.
            let after =
                Metadata::of_file(&file).map_err(|e| std::io::Error::other(e.to_string()))?;
            if (after.size, after.mtime) != (meta.size, meta.mtime) {
                return Err(std::io::Error::other(format!(
                    "{name} changed while it was being zipped; download the folder again"
                ))
                .into());
            }
        }
        zip.finish()
    }
}

fn join(parent: &str, name: &str) -> String {
    match (parent.is_empty(), name.is_empty()) {
        (true, _) => name.to_owned(),
        (_, true) => parent.to_owned(),
        _ => format!("{parent}/{name}"),
    }
}

fn too_large(max: u64) -> String {
    format!(
        "the folder holds more than {max} bytes of files, the most one download may carry \
         (files.archive_max_bytes); download a smaller folder"
    )
}
