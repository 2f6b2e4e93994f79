//! The legacy `uploads/` name (spec members M-MIGRATE).
//!
//! Every step is one rename or one unlink, so a crash midway loses no file and the next
//! access finishes the job; steps that find their work already done by a concurrent
//! migration (ENOENT, EEXIST) move on instead of failing.

use ferry_fs::{Dir, EntryKind, FsError, is_temporary};

use crate::SiteError;
use crate::layout::{LEGACY_PUBLIC_DIR_NAME, PROJECTS_DIR, PUBLIC_DIR_NAME};

/// When `rel` (workspace-relative components) lands in a workspace's legacy `uploads/` (the
/// main workspace's or a project's), a sentence naming the `public/` path meant; `None`
/// for any other path. Nothing creates `uploads/` again.
pub fn legacy_public_target(rel: &[String]) -> Option<String> {
    let at = match rel {
        [first, ..] if first == LEGACY_PUBLIC_DIR_NAME => 0,
        [projects, _, third, ..] if projects == PROJECTS_DIR && third == LEGACY_PUBLIC_DIR_NAME => {
            2
        }
        _ => return None,
    };
    let mut meant = rel.to_vec();
    meant[at] = PUBLIC_DIR_NAME.to_owned();
    Some(format!(
        "{LEGACY_PUBLIC_DIR_NAME}/ is the old name of public/ and is never created again; \
         write to {} instead (public/attachments/ for what you deliver)",
        meant.join("/")
    ))
}

/// Moves a legacy `uploads/` under `container` into `public/`, merging when both exist.
pub fn migrate_legacy_public(container: &Dir) -> Result<(), SiteError> {
    match container.metadata(LEGACY_PUBLIC_DIR_NAME) {
        Ok(meta) if meta.kind == EntryKind::Dir => {}
        // A link or a file by the old name is not a workspace folder: leave it alone.
        Ok(_) => {
            tracing::warn!("legacy uploads entry is not a folder; left in place");
            return Ok(());
        }
        Err(FsError::NotFound) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    match container.rename(LEGACY_PUBLIC_DIR_NAME, PUBLIC_DIR_NAME, false) {
        Ok(()) | Err(FsError::NotFound) => return Ok(()),
        Err(FsError::Exists | FsError::NotEmpty) => {}
        Err(e) => return Err(e.into()),
    }
    let legacy = match container.open_dir(LEGACY_PUBLIC_DIR_NAME, ferry_fs::Follow::Never) {
        Ok(dir) => dir,
        Err(FsError::NotFound) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let public = container.open_dir(PUBLIC_DIR_NAME, ferry_fs::Follow::Never)?;
    merge(&legacy, &public)?;
    remove_empty(container, LEGACY_PUBLIC_DIR_NAME)
}

/// Moves everything in `from` into `into`; on a name held by both, the newer file wins.
fn merge(from: &Dir, into: &Dir) -> Result<(), SiteError> {
    for entry in from.entries()? {
        let name = entry.name.as_str();
        if is_temporary(name) {
            ignore_gone(from.remove(name))?;
            continue;
        }
        // First try to move it in whole: the common case, and atomic.
        match from.rename_to(name, into, name, false) {
            Ok(()) | Err(FsError::NotFound) => continue,
            Err(FsError::Exists | FsError::NotEmpty) => {}
            Err(e) => return Err(e.into()),
        }
        let theirs = match into.metadata(name) {
            Ok(meta) => meta,
            Err(FsError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        };
        match (
            entry.meta.kind == EntryKind::Dir,
            theirs.kind == EntryKind::Dir,
        ) {
            (true, true) => {
                let sub_from = open_child(from, name)?;
                let sub_into = open_child(into, name)?;
                if let (Some(sub_from), Some(sub_into)) = (sub_from, sub_into) {
                    merge(&sub_from, &sub_into)?;
                }
                remove_empty(from, name)?;
            }
            (false, false) => {
                if entry.meta.mtime > theirs.mtime {
                    ignore_gone(from.rename_to(name, into, name, true))?;
                } else {
                    ignore_gone(from.remove(name))?;
                }
            }
            // A file and a folder by one name: neither may be dropped, so the legacy one
            // moves in beside the other under a free name.
            _ => move_aside(from, into, name)?,
        }
    }
    Ok(())
}

fn move_aside(from: &Dir, into: &Dir, name: &str) -> Result<(), SiteError> {
    for n in 1..1000 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let aside = format!("{name}-from-uploads{suffix}");
        match from.rename_to(name, into, &aside, false) {
            Ok(()) | Err(FsError::NotFound) => return Ok(()),
            Err(FsError::Exists | FsError::NotEmpty) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(FsError::Exists.into())
}

fn open_child(dir: &Dir, name: &str) -> Result<Option<Dir>, SiteError> {
    match dir.open_dir(name, ferry_fs::Follow::Never) {
        Ok(d) => Ok(Some(d)),
        Err(FsError::NotFound) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes a folder the merge emptied. A concurrent migration may still be moving out of
/// it; then it is left for the next access.
fn remove_empty(parent: &Dir, name: &str) -> Result<(), SiteError> {
    match parent.remove_empty_dir(name) {
        Ok(()) | Err(FsError::NotFound | FsError::NotEmpty) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn ignore_gone(result: Result<(), FsError>) -> Result<(), SiteError> {
    match result {
        Ok(()) | Err(FsError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
