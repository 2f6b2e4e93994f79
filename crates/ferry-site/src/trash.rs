//! The trash (spec M-DAILY "Undo a delete"): a member's delete moves the entry into
//! the person's trash folder, `private/trash/<person>/<id>`, and the record here says
//! where it came from, so it can be put back.
//!
//! The records are the service's; the folder is the person's (in host mode their own
//! worker renames entries in and out, see `PublicFolder::trash`). A record is written
//! *before* the entry moves, so an entry in the folder always has a record: a failed move
//! takes the record back, and a record whose move never finished (the service stopped
//! between the two) is never listed and is swept at its expiry like any other.

use std::time::{Duration, SystemTime};

use ferry_codes::Code;
use ferry_fs::{Dir, EntryKind, Follow, FsError, typed_name};

use crate::db::{Exec, now_secs, params};
use crate::ids::{check_id, is_record_id, new_record_id};
use crate::public::{NodeKind, PublicFolder, PublicPath};
use crate::{Site, SiteError, layout};

/// Seconds in a day, for `files.trash_days`.
const SECS_PER_DAY: u64 = 24 * 60 * 60;

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS trash (
    id TEXT PRIMARY KEY,
    person TEXT NOT NULL REFERENCES persons(id),
    -- '' for the person's main workspace
    project TEXT NOT NULL,
    -- public/... as it was when deleted
    path TEXT NOT NULL,
    -- file|dir|link once the entry is in the trash; '' while it is being moved there
    kind TEXT NOT NULL DEFAULT '',
    size INTEGER NOT NULL DEFAULT 0,
    inode INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL,
    expires INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS trash_by_person ON trash (person, deleted);
CREATE INDEX IF NOT EXISTS trash_by_expiry ON trash (expires);
";

/// Why a trash operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TrashError {
    /// The entry does not fit in the trash; nothing was deleted.
    #[error(
        "{path} ({size} bytes) does not fit in the trash: it holds {held} of {max} bytes \
         (files.trash_max_bytes). Nothing was deleted; empty some of the trash (Delete \
         forever) or delete this entry for good"
    )]
    Full {
        /// The entry, `public/…`.
        path: String,
        /// Its bytes.
        size: u64,
        /// Bytes the trash holds already.
        held: u64,
        /// Bytes the trash may hold.
        max: u64,
    },
    /// No entry with that id is in this person's trash (or the id is not one).
    #[error("there is no such entry in your trash")]
    Unknown,
    /// The entry in the trash is not the one that was deleted (replaced, say by a link).
    #[error(
        "the trashed copy of {0} was changed or replaced since it was deleted, so it is not \
         restored; delete it forever"
    )]
    Changed(String),
}

impl TrashError {
    /// The code this failure is answered with.
    pub fn code(&self) -> Code {
        match self {
            TrashError::Full { .. } => Code::TrashFull,
            TrashError::Unknown => Code::NotFound,
            TrashError::Changed(_) => Code::ChangedMeanwhile,
        }
    }
}

/// One entry of a person's trash.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TrashEntry {
    /// Its id: unguessable, the name of its folder entry in the trash.
    pub id: String,
    /// The person whose trash it is in.
    pub person: String,
    /// The project it was deleted from; none for the main workspace.
    pub project: Option<String>,
    /// Where it was, `public/…`.
    pub path: String,
    /// What it is; none while it is being moved into the trash.
    pub kind: Option<NodeKind>,
    /// Bytes of its files.
    pub size: u64,
    /// Its inode in the trash, so an entry swapped in its place is refused.
    pub inode: u64,
    /// When it was deleted, in seconds since the epoch.
    pub deleted: i64,
    /// When the sweep removes it for good, in seconds since the epoch.
    pub expires: i64,
}

/// What moving an entry into the trash found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Trashed {
    /// What the entry is.
    pub kind: NodeKind,
    /// Bytes of its files (a folder's, at every depth; a link counts nothing).
    pub size: u64,
    /// Its inode.
    pub inode: u64,
}

/// What an entry is, as the trash records it (anything not a folder or a link, a FIFO
/// the agent made say, is kept as a file).
fn kind_of(kind: EntryKind) -> NodeKind {
    match kind {
        EntryKind::Dir => NodeKind::Dir,
        EntryKind::Symlink => NodeKind::Link,
        EntryKind::File | EntryKind::Other => NodeKind::File,
    }
}

fn kind_text(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::File => "file",
        NodeKind::Dir => "dir",
        NodeKind::Link => "link",
    }
}

fn kind_parse(text: &str) -> Option<NodeKind> {
    match text {
        "file" => Some(NodeKind::File),
        "dir" => Some(NodeKind::Dir),
        "link" => Some(NodeKind::Link),
        _ => None,
    }
}

const ENTRY_COLUMNS: &str = "id, person, project, path, kind, size, inode, deleted, expires";

fn entry_row(r: &ferry_sql::Row) -> Result<TrashEntry, SiteError> {
    let project: String = r.get(2)?;
    let kind: String = r.get(4)?;
    Ok(TrashEntry {
        id: r.get(0)?,
        person: r.get(1)?,
        project: (!project.is_empty()).then_some(project),
        path: r.get(3)?,
        kind: kind_parse(&kind),
        size: r.get::<i64>(5)?.max(0) as u64,
        inode: r.get::<i64>(6)? as u64,
        deleted: r.get(7)?,
        expires: r.get(8)?,
    })
}

impl Site {
    /// Records that `path` of `person`'s workspace (or `project`) is about to move into
    /// the trash, and returns the entry's new id. Call [`Site::trash_moved`] once it has,
    /// or [`Site::trash_forget`] if it did not.
    pub fn trash_begin(
        &self,
        person: &str,
        project: Option<&str>,
        path: &str,
    ) -> Result<String, SiteError> {
        check_id("person", person)?;
        if let Some(project) = project {
            check_id("project", project)?;
        }
        let id = new_record_id();
        let now = now_secs();
        let keep = self
            .config()
            .files
            .trash_days
            .saturating_mul(SECS_PER_DAY)
            .min(i64::MAX as u64) as i64;
        self.db.execute(
            "INSERT INTO trash (id, person, project, path, deleted, expires) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                person,
                project.unwrap_or(""),
                path,
                now,
                now.saturating_add(keep)
            ],
        )?;
        Ok(id)
    }

    /// Completes the record of an entry now in the trash.
    pub fn trash_moved(&self, id: &str, trashed: Trashed) -> Result<(), SiteError> {
        self.db.execute(
            "UPDATE trash SET kind = ?2, size = ?3, inode = ?4 WHERE id = ?1",
            params![
                id,
                kind_text(trashed.kind),
                trashed.size.min(i64::MAX as u64) as i64,
                trashed.inode as i64
            ],
        )?;
        Ok(())
    }

    /// Removes the record `id` (restored, deleted for good, never moved, or swept).
    pub fn trash_forget(&self, id: &str) -> Result<(), SiteError> {
        self.db
            .execute("DELETE FROM trash WHERE id = ?1", params![id])?;
        Ok(())
    }

    /// The entries of `person`'s trash, newest first (every project's), not yet expired.
    pub fn trash_entries(&self, person: &str) -> Result<Vec<TrashEntry>, SiteError> {
        self.db.rows(
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM trash WHERE person = ?1 AND kind != '' \
                 AND expires > ?2 ORDER BY deleted DESC, id"
            ),
            params![person, now_secs()],
            entry_row,
        )
    }

    /// The entry `id` of `person`'s trash; anything else (another person's, a malformed
    /// id, one still being moved, one whose time is over) is [`TrashError::Unknown`].
    pub fn trash_entry(&self, person: &str, id: &str) -> Result<TrashEntry, SiteError> {
        if !is_record_id(id) {
            return Err(TrashError::Unknown.into());
        }
        self.db
            .row(
                &format!("SELECT {ENTRY_COLUMNS} FROM trash WHERE id = ?1 AND person = ?2"),
                params![id, person],
                entry_row,
            )?
            .filter(|e| e.kind.is_some() && e.expires > now_secs())
            .ok_or_else(|| TrashError::Unknown.into())
    }

    /// Bytes `person`'s trash holds, entries being moved in included.
    pub fn trash_held_bytes(&self, person: &str) -> Result<u64, SiteError> {
        let held: i64 = self
            .db
            .row(
                "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM trash WHERE person = ?1",
                params![person],
                |r| r.get(0),
            )?
            .unwrap_or(0);
        Ok(held.max(0) as u64)
    }

    /// Every entry whose time in the trash is over at `now`, of every person (entries
    /// whose move never finished included).
    pub fn trash_expired(&self, now: SystemTime) -> Result<Vec<TrashEntry>, SiteError> {
        let now = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs()
            .min(i64::MAX as u64) as i64;
        self.db.rows(
            &format!("SELECT {ENTRY_COLUMNS} FROM trash WHERE expires <= ?1 ORDER BY expires"),
            params![now],
            entry_row,
        )
    }
}

/// Opens `person`'s trash folder beneath the site's `root`, one component at a time with
/// no link followed. Where this process may (local and container mode), a missing one is
/// made, 0700; in host mode `ferry site init --mode host` makes it the person's.
pub fn open_trash(root: &Dir, person: &str) -> Result<Dir, SiteError> {
    check_id("person", person)?;
    let rel = layout::trash(person);
    let unusable = |e: FsError| -> SiteError {
        match e {
            FsError::PathEscapes | FsError::NotADirectory => SiteError::Unsafe {
                path: rel.clone(),
                why: "cannot hold the trash: a link or a file is in the way (links are never \
                      followed there); nothing was moved"
                    .into(),
            },
            FsError::PermissionDenied => SiteError::Unsafe {
                path: rel.clone(),
                why: "is missing or not this person's; run `ferry site init --mode host` \
                      again to make it; nothing was moved"
                    .into(),
            },
            e => e.into(),
        }
    };
    match root.open_dir(&rel, Follow::Never) {
        Ok(dir) => Ok(dir),
        Err(FsError::NotFound) => {
            let parent = root
                .create_dir_all(layout::TRASH_DIR, 0o755)
                .map_err(unusable)?;
            match parent.create_dir(person, 0o700) {
                Ok(()) | Err(FsError::Exists) => {}
                Err(e) => return Err(unusable(e)),
            }
            root.open_dir(&rel, Follow::Never).map_err(unusable)
        }
        Err(e) => Err(unusable(e)),
    }
}

/// Removes the entry `id` from a trash folder for good; one already gone is no failure.
pub fn purge_trash(trash: &Dir, id: &str) -> Result<(), SiteError> {
    if !is_record_id(id) {
        return Err(TrashError::Unknown.into());
    }
    match trash.remove(id) {
        Ok(()) | Err(FsError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl PublicFolder {
    /// Moves the entry at `path` (a file, a link or a whole folder under `public/`) into
    /// `trash` as `id`, by one rename: nothing is copied, and nothing is lost if it fails.
    /// Refused, with nothing moved, when its bytes would pass `room`.
    pub fn trash(
        &self,
        path: &str,
        trash: &Dir,
        id: &str,
        room: TrashRoom,
    ) -> Result<Trashed, SiteError> {
        let path = PublicPath::parse(path)?;
        path.require_member_managed()?;
        if !is_record_id(id) {
            return Err(TrashError::Unknown.into());
        }
        let meta = self.dir().metadata(path.rel())?;
        let kind = kind_of(meta.kind);
        let size = match kind {
            NodeKind::Dir => self
                .dir()
                .open_dir(path.rel(), Follow::Never)?
                .file_bytes()?,
            NodeKind::Link => 0,
            NodeKind::File => meta.size,
        };
        if room.held.saturating_add(size) > room.max {
            return Err(TrashError::Full {
                path: path.display(),
                size,
                held: room.held,
                max: room.max,
            }
            .into());
        }
        self.dir()
            .rename_to(path.rel(), trash, id, false)
            .map_err(|e| match e {
                // A rename across file systems is EXDEV, which the confined calls spell
                // as an escape.
                FsError::PathEscapes => SiteError::Unsafe {
                    path: path.display(),
                    why: "could not be moved into the trash (a link in its way, or the \
                          trash on another file system than the workspace); nothing was \
                          deleted"
                        .into(),
                },
                e => e.into(),
            })?;
        trash.sync()?;
        Ok(Trashed {
            kind,
            size,
            inode: meta.inode,
        })
    }

    /// Puts the trashed entry `entry` back at its path, or at `name` in its folder, never
    /// over an existing entry; missing folders on the way are made again. Refused when the
    /// entry in the trash is not the one that was deleted (a link swapped in its place).
    pub fn restore(
        &self,
        trash: &Dir,
        entry: &TrashEntry,
        name: Option<&str>,
    ) -> Result<String, SiteError> {
        if !is_record_id(&entry.id) {
            return Err(TrashError::Unknown.into());
        }
        let original = PublicPath::parse(&entry.path)?;
        let target = match name {
            Some(name) => original.renamed(&typed_name(name)?),
            None => original,
        };
        target.require_member_managed()?;
        let meta = match trash.metadata(&entry.id) {
            Ok(meta) => meta,
            Err(FsError::NotFound) => return Err(TrashError::Unknown.into()),
            Err(e) => return Err(e.into()),
        };
        if Some(kind_of(meta.kind)) != entry.kind || meta.inode != entry.inode {
            return Err(TrashError::Changed(entry.path.clone()).into());
        }
        let (parent, leaf) = match target.rel().rsplit_once('/') {
            Some((parent, leaf)) => (Some(self.make_parents(parent)?), leaf),
            None => (None, target.rel()),
        };
        let parent = match parent {
            Some(dir) => dir,
            None => self.dir().try_clone()?,
        };
        trash
            .rename_to(&entry.id, &parent, leaf, false)
            .map_err(|e| match e {
                FsError::Exists | FsError::NotEmpty => SiteError::AlreadyExists(target.display()),
                e => e.into(),
            })?;
        parent.sync()?;
        Ok(target.display())
    }
}

/// How much a trash holds and may hold, for [`PublicFolder::trash`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TrashRoom {
    /// Bytes the trash holds already.
    pub held: u64,
    /// Bytes it may hold (`files.trash_max_bytes`).
    pub max: u64,
}
