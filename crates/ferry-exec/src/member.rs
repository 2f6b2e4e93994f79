//! Member operations on a workspace's `public/` (spec members M-UP, M-LIST, M-GET,
//! M-MANAGE, M-DELIVER, M-MIGRATE), performed as the person like every other operation:
//! in this process in local and container mode, in the person's worker in host mode.
//!
//! The gateway first checks what needs the site (the person, the project, the
//! configuration, the quota: `ferry_site::Workspace`); the folders are then handled here
//! by `ferry_site::PublicFolder`, one body for every mode. The container (`home/<p>` or
//! `home/<p>/projects/<proj>`) is reached from the data folder one component at a time
//! with no link followed, so a `public/` that is a link is `path_escapes` in every mode.
//!
//! A new file's bytes never cross the socket: [`MemberAction::Stage`] makes a hidden
//! temporary as the person and hands back its descriptor, the caller fills it (see
//! `staging.rs`), and [`MemberAction::Commit`] places it.

use ferry_codes::Code;
use std::fs::File;
use std::time::SystemTime;

use ferry_fs::{Dir, FileId, FsError, MadeDirs};
use ferry_site::{
    AttachmentsState, FlatListing, PublicFolder, PublicPlace, SearchQuery, SearchResults,
    SiteError, TrashEntry, TrashRoom, Trashed, open_container, open_trash, purge_trash,
};
use serde::{Deserialize, Serialize};

use crate::RequestError;
use crate::staged_at::StagedDirs;

/// The mode a placed upload or delivery gets: the person's alone, as the temporary was.
const PLACED_FILE_MODE: u32 = 0o600;

/// What to do in one workspace's `public/`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum MemberAction {
    /// Makes the workspace's folders (a new project's `public/`), migrating a legacy one.
    Prepare,
    /// The Files panel's tree.
    List,
    /// Makes a folder under `public/`, with its missing parents.
    Mkdir {
        /// The folder to make, from `public/` on.
        path: String,
    },
    /// Moves or renames an entry under `public/`, never over an existing one.
    Move {
        /// The entry to move, from `public/` on.
        from: String,
        /// Where it goes, from `public/` on.
        to: String,
    },
    /// Deletes a file, a link or a whole folder under `public/`.
    Delete {
        /// The entry to delete, from `public/` on.
        path: String,
    },
    /// Moves a file, a link or a whole folder under `public/` into the person's trash as
    /// `id`, unless its bytes would pass `room` (spec M-DAILY).
    Trash {
        /// The entry to move, from `public/` on.
        path: String,
        /// Its id in the trash, which the service recorded first.
        id: String,
        /// What the trash holds and may hold.
        room: TrashRoom,
    },
    /// Puts a trashed entry back where it was (or under `name` in that folder), never
    /// over an existing entry.
    Restore {
        /// The entry, as the service recorded it.
        entry: TrashEntry,
        /// A new last name for it, when the old one is taken.
        name: Option<String>,
    },
    /// Removes an entry of the person's trash for good.
    Purge {
        /// Its id in the trash.
        id: String,
    },
    /// Opens a file for download; its descriptor travels beside the reply.
    Open {
        /// The file to open, from `public/` on.
        path: String,
    },
    /// Opens a file for a share link, following no link at any component; its
    /// descriptor travels beside the reply.
    OpenShared {
        /// The file to open, from `public/` on.
        path: String,
    },
    /// The mark of `public/attachments/`, and its files unless the mark is `unchanged`.
    Attachments {
        /// The mark the caller saw last; when it still holds, the files are not read.
        unchanged: Option<FolderMark>,
    },
    /// Makes a hidden temporary in `place`; its descriptor, open for writing, travels
    /// beside the reply. With `name`, a target that could not be placed there (a link,
    /// a folder) is refused first, before any byte is sent.
    Stage {
        /// Which of the two folders the temporary is made in.
        place: PublicPlace,
        /// The name the file will be placed at, checked before any byte is sent.
        name: Option<String>,
        /// What the placement will do to a file already at `name`.
        #[serde(default)]
        existing: Existing,
    },
    /// Places a temporary staged in this person's workspaces at `name` in `place` of this one.
    Commit {
        /// The temporary to place, as [`MemberAction::Stage`] left it.
        staged: StagedFile,
        /// Which folder of this workspace it goes in.
        place: PublicPlace,
        /// The file name it gets there.
        name: String,
        /// What it does to a file already there.
        #[serde(default)]
        existing: Existing,
    },
    /// Removes a temporary that will not be placed.
    Discard {
        /// The temporary to remove.
        staged: StagedFile,
    },
    /// Streams a zip of a folder under `public/`: the folder is walked and admitted (or
    /// refused) first, then its zip is written on a thread of its own into a pipe whose
    /// read end travels beside the reply, framed as `stream.rs` says.
    Archive {
        /// The folder, from `public/` on (`public` itself included).
        path: String,
        /// The most bytes of file content the zip may carry (`files.archive_max_bytes`).
        max_bytes: u64,
    },
    /// Finds entries under `public/` by name and, with `content`, text files by content.
    Search {
        /// What to find, as the person typed it (checked again here).
        query: String,
        /// Whether text files are searched inside too.
        #[serde(default)]
        content: bool,
    },
    /// A resumable upload's start (M-DAILY): checks that `folder` exists and that `name`
    /// could be placed there, then makes a hidden temporary in `public/` itself (which
    /// cannot be moved away during a long upload); its descriptor travels beside the
    /// reply.
    ResumableStage {
        /// The folder the file will be placed in (`public/…`); none for `public/`.
        folder: Option<String>,
        /// The name the file will be placed at.
        name: String,
        /// What the placement will do to a file already at `name`.
        existing: Existing,
    },
    /// Opens a resumable upload's temporary again (after a restart), read-write, only
    /// while it is still the file staged; its descriptor travels beside the reply.
    ResumableReopen {
        /// The temporary, as [`MemberAction::ResumableStage`] left it.
        staged: StagedFile,
    },
    /// Places a complete resumable upload at `name` in `folder`.
    ResumablePlace {
        /// The temporary, as [`MemberAction::ResumableStage`] left it.
        staged: StagedFile,
        /// The folder it goes in (`public/…`); none for `public/`.
        folder: Option<String>,
        /// The file name it gets there.
        name: String,
        /// What it does to a file already there.
        existing: Existing,
    },
}

/// What placing an upload does to a file already at its name (M-DAILY).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Existing {
    /// Replaces it (M-UP: one file per name).
    #[default]
    Replace,
    /// Leaves it, and refuses with `exists`.
    Keep,
}

/// The mtime and inode of a folder: they move when an entry is added, removed or renamed.
pub type FolderMark = (SystemTime, u64);

/// A temporary made by [`MemberAction::Stage`]: where it lies and which file it is.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StagedFile {
    /// The project it was staged in; none means the person's own workspace.
    pub project: Option<String>,
    /// Which folder of that workspace holds it.
    pub place: PublicPlace,
    /// The hidden name the temporary has there.
    pub temp: String,
    /// The device of the temporary, so a file swapped in its place is refused.
    pub dev: u64,
    /// The inode of the temporary, so a file swapped in its place is refused.
    pub ino: u64,
}

/// What a member operation returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "member", rename_all = "snake_case")]
pub enum MemberReply {
    /// The action succeeded and has nothing to report.
    Done,
    /// The `public/…` path made or moved to.
    Path {
        /// Where the entry now is, from `public/` on.
        path: String,
    },
    /// For [`MemberAction::List`]: the Files panel's tree, flat (see [`FlatListing`]).
    Listing(FlatListing),
    /// For [`MemberAction::Open`]: what the download is; the descriptor travels beside it.
    Opened(Opened),
    /// For [`MemberAction::Attachments`]: the mark and, if it moved, the files.
    Attachments {
        /// The folder's mark now; none when `public/attachments/` is not a real folder.
        mark: Option<FolderMark>,
        /// The folder's files by name, or none when the mark had not moved.
        files: Option<AttachmentsState>,
    },
    /// For [`MemberAction::Trash`]: what moved into the trash.
    Trashed(Trashed),
    /// For [`MemberAction::Archive`]: what the zip will be; the pipe travels beside it.
    Archive {
        /// The file name to offer the browser: the folder's name and `.zip`.
        name: String,
        /// Entries (files and folders) planned.
        entries: usize,
        /// Bytes of file content planned.
        bytes: u64,
    },
    /// For [`MemberAction::Search`]: what matched.
    Found(SearchResults),
    /// For [`MemberAction::Stage`]; the descriptor travels beside it.
    Staged {
        /// The hidden name of the temporary, for a later commit or discard.
        temp: String,
    },
}

/// A file opened for download.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Opened {
    /// The file name to offer the browser when saving.
    pub name: String,
    /// Bytes in the file.
    pub size: u64,
    /// When the file last changed, for `Last-Modified` and the ETag.
    pub mtime: SystemTime,
    /// The file's inode, which goes into the ETag so a replaced file gets a new one.
    pub inode: u64,
}

/// Performs `action` in the workspace (or `project`) of the person whose home is `home`,
/// beneath the data folder `base`; `owner` is given what is made (container mode).
pub(crate) fn perform(
    base: &std::path::Path,
    home: &std::path::Path,
    staged_in: &StagedDirs,
    owner: Option<(u32, u32)>,
    project: Option<&str>,
    action: MemberAction,
) -> Result<(MemberReply, Option<File>), RequestError> {
    let person = home
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| RequestError::new(Code::BadPath, "the home folder has no name"))?;
    let root = Dir::open_ambient(base).map_err(site_error_from_fs)?;
    let opened = |project: Option<&str>| -> Result<PublicFolder, SiteError> {
        PublicFolder::open(&open_container(&root, person, project, owner)?, owner)
    };
    let public = |project: Option<&str>| opened(project).map_err(site_error);
    // A discard needs no walk when this process staged the temporary: its folder may be
    // gone from the path (moved away, or replaced by a link) by now.
    if let MemberAction::Discard { staged } = &action
        && let Some((dir, _)) = staged_in.take(&staged.temp)
    {
        ferry_fs::remove_temporary(&dir, &staged.temp).map_err(site_error_from_fs)?;
        return Ok((MemberReply::Done, None));
    }
    // The trash alone: no workspace folder is opened (or made) to empty it.
    if let MemberAction::Purge { id } = &action {
        purge_trash(&open_trash(&root, person).map_err(site_error)?, id).map_err(site_error)?;
        return Ok((MemberReply::Done, None));
    }
    let folder = match (&action, project) {
        // A new project's folders: a link in the way is named as such.
        (MemberAction::Prepare, Some(id)) => opened(project)
            .map_err(|e| site_error(ferry_site::project_folder_error(person, id, e)))?,
        _ => public(project)?,
    };
    let reply = match action {
        MemberAction::Prepare => MemberReply::Done,
        MemberAction::List => MemberReply::Listing(
            folder
                .list(project.map(str::to_owned))
                .map_err(site_error)?
                .flatten(),
        ),
        MemberAction::Archive { path, max_bytes } => {
            let plan = folder.plan_zip(&path, max_bytes).map_err(site_error)?;
            let reply = MemberReply::Archive {
                name: plan.file_name(),
                entries: plan.entries(),
                bytes: plan.total_bytes(),
            };
            let pipe =
                crate::stream::spawn_framed("ferry-zip", move |out| plan.write(out).map(drop))
                    .map_err(RequestError::from)?;
            return Ok((reply, Some(pipe)));
        }
        MemberAction::Search { query, content } => {
            let query = SearchQuery::parse(&query).map_err(site_error)?;
            MemberReply::Found(folder.search(&query, content).map_err(site_error)?)
        }
        MemberAction::Mkdir { path } => MemberReply::Path {
            path: folder.mkdir(&path).map_err(site_error)?,
        },
        MemberAction::Move { from, to } => MemberReply::Path {
            path: folder.move_entry(&from, &to).map_err(site_error)?,
        },
        MemberAction::Delete { path } => {
            folder.delete(&path).map_err(site_error)?;
            MemberReply::Done
        }
        MemberAction::Trash { path, id, room } => {
            let trash = open_trash(&root, person).map_err(site_error)?;
            MemberReply::Trashed(folder.trash(&path, &trash, &id, room).map_err(site_error)?)
        }
        MemberAction::Restore { entry, name } => {
            let trash = open_trash(&root, person).map_err(site_error)?;
            MemberReply::Path {
                path: folder
                    .restore(&trash, &entry, name.as_deref())
                    .map_err(site_error)?,
            }
        }
        MemberAction::Purge { .. } => MemberReply::Done,
        MemberAction::Open { path } => return opened_file(folder.open_file(&path)),
        MemberAction::OpenShared { path } => return opened_file(folder.open_file_no_links(&path)),
        MemberAction::Attachments { unchanged } => {
            let mark = folder.attachments_mark().map_err(site_error)?;
            let files = match (mark, unchanged) {
                (Some(now), Some(before)) if now == before => None,
                _ => Some(folder.attachments_state().map_err(site_error)?),
            };
            MemberReply::Attachments { mark, files }
        }
        MemberAction::Stage {
            place,
            name,
            existing,
        } => {
            let dir = folder.place_dir(&place).map_err(site_error)?;
            if let Some(name) = name {
                ferry_fs::check_placeable(&dir, &name, existing == Existing::Replace)
                    .map_err(site_error_from_fs)?;
            }
            let (temp, file) = ferry_fs::create_temporary(&dir).map_err(site_error_from_fs)?;
            staged_in.keep(&temp, dir, MadeDirs::default());
            return Ok((MemberReply::Staged { temp }, Some(file)));
        }
        MemberAction::Commit {
            staged,
            place,
            name,
            existing,
        } => {
            let from = match staged.project.as_deref() == project && staged.place == place {
                true => None,
                false => Some(public(staged.project.as_deref())?),
            };
            let from_dir = match staged_in.get(&staged.temp) {
                Some(kept) => kept.map_err(site_error_from_fs)?,
                None => from
                    .as_ref()
                    .unwrap_or(&folder)
                    .place_dir(&staged.place)
                    .map_err(site_error)?,
            };
            let to_dir = folder.place_dir(&place).map_err(site_error)?;
            place_staged(&from_dir, &staged, &to_dir, &name, existing, owner)?;
            staged_in.take(&staged.temp);
            MemberReply::Done
        }
        MemberAction::ResumableStage {
            folder: into,
            name,
            existing,
        } => {
            let target = folder.upload_folder(into.as_deref()).map_err(site_error)?;
            ferry_fs::check_placeable(&target, &name, existing == Existing::Replace)
                .map_err(site_error_from_fs)?;
            let dir = folder.place_dir(&PublicPlace::Public).map_err(site_error)?;
            let (temp, file) = ferry_fs::create_temporary(&dir).map_err(site_error_from_fs)?;
            return Ok((MemberReply::Staged { temp }, Some(file)));
        }
        MemberAction::ResumableReopen { staged } => {
            let dir = staged_public(project, &staged, &folder, &public)?;
            let id = FileId {
                dev: staged.dev,
                ino: staged.ino,
            };
            let file =
                ferry_fs::reopen_temporary(&dir, &staged.temp, id).map_err(site_error_from_fs)?;
            return Ok((MemberReply::Done, Some(file)));
        }
        MemberAction::ResumablePlace {
            staged,
            folder: into,
            name,
            existing,
        } => {
            let from_dir = staged_public(project, &staged, &folder, &public)?;
            let to_dir = folder.upload_folder(into.as_deref()).map_err(site_error)?;
            place_staged(&from_dir, &staged, &to_dir, &name, existing, owner)?;
            MemberReply::Done
        }
        MemberAction::Discard { staged } => {
            let from = public(staged.project.as_deref())?;
            let dir = from.place_dir(&staged.place).map_err(site_error)?;
            ferry_fs::remove_temporary(&dir, &staged.temp).map_err(site_error_from_fs)?;
            MemberReply::Done
        }
    };
    Ok((reply, None))
}

/// The reply to an open, with the file's descriptor beside it.
fn opened_file(
    download: Result<ferry_site::Download, SiteError>,
) -> Result<(MemberReply, Option<File>), RequestError> {
    let download = download.map_err(site_error)?;
    let opened = Opened {
        name: download.name,
        size: download.meta.size,
        mtime: download.meta.mtime,
        inode: download.meta.inode,
    };
    Ok((MemberReply::Opened(opened), Some(download.file)))
}

/// Places the temporary `staged`, lying in `from`, at `name` in `to`: the person's alone,
/// given to `owner` (container mode), replacing a file there only when `existing` says so.
fn place_staged(
    from: &Dir,
    staged: &StagedFile,
    to: &Dir,
    name: &str,
    existing: Existing,
    owner: Option<(u32, u32)>,
) -> Result<(), RequestError> {
    let id = FileId {
        dev: staged.dev,
        ino: staged.ino,
    };
    let placement = ferry_fs::Placement {
        mode: PLACED_FILE_MODE,
        owner,
        replace: existing == Existing::Replace,
    };
    ferry_fs::place_temporary(from, &staged.temp, to, name, id, placement)
        .map_err(site_error_from_fs)
}

/// The folder a resumable upload's temporary lies in: `public/` of the workspace it was
/// staged in (this one, or another of the same person's).
fn staged_public(
    project: Option<&str>,
    staged: &StagedFile,
    here: &PublicFolder,
    public: &dyn Fn(Option<&str>) -> Result<PublicFolder, RequestError>,
) -> Result<Dir, RequestError> {
    if staged.place != PublicPlace::Public {
        return Err(RequestError::new(
            Code::BadPath,
            "a resumable upload is staged in public/ itself",
        ));
    }
    let dir = match staged.project.as_deref() == project {
        true => here.place_dir(&PublicPlace::Public),
        false => public(staged.project.as_deref())?.place_dir(&PublicPlace::Public),
    };
    dir.map_err(site_error)
}

fn site_error_from_fs(e: FsError) -> RequestError {
    site_error(SiteError::Fs(e))
}

/// A site failure as it crosses the worker's socket: the code the member API answers
/// with, and the site's own sentence.
pub fn site_error(e: SiteError) -> RequestError {
    RequestError::new(e.code(), e.to_string())
}
