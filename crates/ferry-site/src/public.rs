//! A workspace's member-visible `public/`, as folders alone (spec members M-LIST, M-GET,
//! M-MANAGE, M-MIGRATE, and the folders M-UP and M-DELIVER write into).
//!
//! Nothing here needs the database or the configuration: whoever holds the handle of the
//! folder that contains `public/` (`home/<p>` or `home/<p>/projects/<proj>`) runs it. That
//! is the service in local and container mode, and the person's own worker in host mode,
//! so every byte and folder is made by whoever the mode says acts as the person.

use std::collections::BTreeMap;
use std::fs::File;
use std::time::SystemTime;

use ferry_fs::{
    Dir, EntryKind, Follow, FsError, Metadata, check_relative, is_temporary, typed_name,
};
use serde::{Deserialize, Serialize};

use ferry_config::limits::{LIST_MAX_DEPTH, LIST_MAX_ENTRIES};

use crate::SiteError;
use crate::layout::{self, ATTACHMENTS_DIR_NAME, PUBLIC_DIR_NAME};
use crate::migrate::migrate_legacy_public;
use crate::time::rfc3339;

/// The mode of every folder made under a workspace.
const DIR_MODE: u32 = 0o700;

/// A path the member gave, checked to lie under `public/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicPath {
    /// Beneath `public/`, normalized; empty for `public` itself.
    rel: String,
}

impl PublicPath {
    /// Parses `public` or `public/…`; `..` anywhere is an escape, anything else is outside.
    pub fn parse(path: &str) -> Result<PublicPath, SiteError> {
        check_relative(path)?;
        let mut parts = path.split('/').filter(|c| !c.is_empty() && *c != ".");
        if parts.next() != Some(PUBLIC_DIR_NAME) {
            return Err(SiteError::OutsidePublic);
        }
        // A temporary (an upload or a write in progress) is never shown, so it cannot be
        // named either: downloaded, moved into sight or shared half-written. Its name is
        // ferry's own, as a new folder's would be.
        if let Some(temporary) = path.split('/').find(|c| is_temporary(c)) {
            return Err(FsError::UnusableName {
                name: temporary.to_owned(),
                why: "names starting with `.ferry-tmp` are ferry's own temporaries",
            }
            .into());
        }
        Ok(PublicPath {
            rel: parts.collect::<Vec<_>>().join("/"),
        })
    }

    /// The path as the member and the agent see it: `public/…`.
    pub fn display(&self) -> String {
        if self.rel.is_empty() {
            PUBLIC_DIR_NAME.to_owned()
        } else {
            layout::in_public(&self.rel)
        }
    }

    /// The last component (`public` for the root).
    pub fn name(&self) -> &str {
        self.rel
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty())
            .unwrap_or(PUBLIC_DIR_NAME)
    }

    /// The same path with its last component `name` (the root stays the root).
    pub fn renamed(&self, name: &str) -> PublicPath {
        let rel = match self.rel.rsplit_once('/') {
            Some((parent, _)) => format!("{parent}/{name}"),
            None if self.rel.is_empty() => String::new(),
            None => name.to_owned(),
        };
        PublicPath { rel }
    }

    /// The path beneath `public/`, `/`-joined; empty for `public` itself.
    pub(crate) fn rel(&self) -> &str {
        &self.rel
    }

    /// Whether this is `public` itself.
    pub fn is_root(&self) -> bool {
        self.rel.is_empty()
    }

    /// Whether this is `public/attachments`.
    pub fn is_attachments(&self) -> bool {
        self.rel == ATTACHMENTS_DIR_NAME
    }

    /// Whether this is `public/attachments` or lies beneath it.
    pub fn in_attachments(&self) -> bool {
        self.is_attachments()
            || self
                .rel
                .strip_prefix(ATTACHMENTS_DIR_NAME)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Refuses the folders the system manages: `public` itself and `public/attachments`.
    pub(crate) fn require_member_managed(&self) -> Result<(), SiteError> {
        if self.is_root() {
            return Err(SiteError::Reserved(PUBLIC_DIR_NAME));
        }
        if self.is_attachments() {
            return Err(SiteError::ManagedBySystem);
        }
        Ok(())
    }
}

/// The Files panel's tree (M-LIST).
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = FileTree)]
pub struct Listing {
    /// The name the tree hangs from, always `public`.
    #[schema(example = "public")]
    pub root: String,
    /// The project whose `public/` this is, or null for the workspace's own.
    #[schema(required = true)]
    pub project: Option<String>,
    /// The top-level entries, each folder carrying its own children.
    pub entries: Vec<Node>,
    /// Set when the entry or depth limit cut the tree short.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A [`Listing`] as a flat list of (depth, entry), folders before their entries: how it
/// crosses the worker's socket, where a tree 64 folders deep would otherwise be a JSON
/// document nested past what a parser accepts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlatListing {
    /// As [`Listing::root`].
    pub root: String,
    /// As [`Listing::project`].
    pub project: Option<String>,
    /// Each entry with its depth below `public/`; a folder's children are left empty.
    pub entries: Vec<(usize, Node)>,
    /// As [`Listing::truncated`].
    pub truncated: bool,
}

impl Listing {
    /// The tree as a flat list, folders first, each before its entries.
    pub fn flatten(self) -> FlatListing {
        fn walk(nodes: Vec<Node>, depth: usize, out: &mut Vec<(usize, Node)>) {
            for mut node in nodes {
                let children = node.children.as_mut().map(std::mem::take);
                out.push((depth, node));
                if let Some(children) = children {
                    walk(children, depth + 1, out);
                }
            }
        }
        let mut entries = Vec::new();
        walk(self.entries, 0, &mut entries);
        FlatListing {
            root: self.root,
            project: self.project,
            entries,
            truncated: self.truncated,
        }
    }
}

impl FlatListing {
    /// The tree again; `None` when the depths do not describe one (an entry deeper than
    /// one below the entry before it, or below a file).
    pub fn into_tree(self) -> Option<Listing> {
        // `open[d]`: the entries collected at depth d; `folders[d]`: the folder they go in.
        let mut open: Vec<Vec<Node>> = vec![Vec::new()];
        let mut folders: Vec<Node> = Vec::new();
        let close = |open: &mut Vec<Vec<Node>>, folders: &mut Vec<Node>| {
            let children = open.pop().unwrap_or_default();
            if let (Some(mut folder), Some(parent)) = (folders.pop(), open.last_mut()) {
                folder.children = Some(children);
                parent.push(folder);
            }
        };
        for (depth, node) in self.entries {
            if depth >= open.len() {
                return None;
            }
            while open.len() > depth + 1 {
                close(&mut open, &mut folders);
            }
            if node.children.is_some() {
                folders.push(node);
                open.push(Vec::new());
            } else {
                open.last_mut()?.push(node);
            }
        }
        while open.len() > 1 {
            close(&mut open, &mut folders);
        }
        Some(Listing {
            root: self.root,
            project: self.project,
            entries: open.pop()?,
            truncated: self.truncated,
        })
    }
}

/// One entry of a listing.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = FileTreeEntry)]
pub struct Node {
    /// The entry's file name, without its folder.
    pub name: String,
    /// Where the entry lies, from `public/` on, e.g. `public/docs/a.pdf`.
    pub path: String,
    /// Whether it is a file, a folder or a link.
    #[serde(rename = "type")]
    pub kind: NodeKind,
    /// Set on `public/attachments`, which the system keeps and the member may not move.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub managed: bool,
    /// Bytes in a file; absent for folders and links.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub size: Option<u64>,
    /// Last modification time, as RFC 3339.
    #[schema(format = DateTime)]
    pub mtime: String,
    /// A folder's entries (empty past the depth limit); absent for files and links.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(no_recursion, nullable = false)]
    pub children: Option<Vec<Node>>,
}

/// What a listed entry is. Links are shown, never followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = EntryKind)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A regular file.
    File,
    /// A folder, listed with its children.
    Dir,
    /// A symbolic link, shown but never followed.
    Link,
}

/// The files directly in a `public/attachments/`: name → (size, mtime).
pub type AttachmentsState = BTreeMap<String, (u64, SystemTime)>;

/// The `public/attachments/…` paths of the files that appeared or changed from `before`
/// to `after`, sorted.
pub fn attachments_changed(before: &AttachmentsState, after: &AttachmentsState) -> Vec<String> {
    after
        .iter()
        .filter(|(name, now)| before.get(*name) != Some(now))
        .map(|(name, _)| layout::in_attachments(name))
        .collect()
}

/// A file opened for download.
pub struct Download {
    /// The open file to stream the bytes from.
    pub file: File,
    /// Its size, times and kind, read from the open descriptor.
    pub meta: Metadata,
    /// The file name to offer the browser when saving.
    pub name: String,
}

/// The `public/` of one workspace, opened through its container.
pub struct PublicFolder {
    public: Dir,
    /// Owner given to what is made here (container mode: the agent's ids).
    owner: Option<(u32, u32)>,
}

/// The folder of `public/` a new file is written into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublicPlace {
    /// `public/` itself: uploads.
    Public,
    /// `public/attachments/`: deliveries.
    Attachments,
    /// A folder the member made under `public/` (M-DAILY uploads into a folder): its
    /// path beneath `public/`, never empty and never `attachments`.
    Folder(String),
}

impl PublicPlace {
    /// The place of an upload sent with `folder` (`public/reports`): `public` itself is
    /// [`PublicPlace::Public`]; `public/attachments`, which only the system fills, is
    /// refused, and so is a folder beneath it (whatever lands there is announced as a
    /// delivery), as is anything outside `public/` or with `..` in it.
    pub fn upload_folder(folder: &str) -> Result<PublicPlace, SiteError> {
        let path = PublicPath::parse(folder)?;
        if path.is_root() {
            return Ok(PublicPlace::Public);
        }
        if path.in_attachments() {
            return Err(SiteError::ManagedBySystem);
        }
        Ok(PublicPlace::Folder(path.rel))
    }

    /// Where a file named `name` placed here lies, as the member and the agent see it.
    pub fn display(&self, name: &str) -> String {
        match self {
            PublicPlace::Public => layout::in_public(name),
            PublicPlace::Attachments => layout::in_attachments(name),
            PublicPlace::Folder(rel) => layout::in_public(&format!("{rel}/{name}")),
        }
    }
}

impl PublicFolder {
    /// The single accessor for `public/`: migrates a legacy folder in `container` first,
    /// then makes sure `public/` and `public/attachments/` exist.
    pub fn open(container: &Dir, owner: Option<(u32, u32)>) -> Result<PublicFolder, SiteError> {
        migrate_legacy_public(container)?;
        let public = ensure_dir(container, PUBLIC_DIR_NAME, owner)?;
        // A missing attachments/ is made again. Something else at its name (a link or a
        // file the agent put there) is left as it is and listed as such, rather than failing
        // every access to public/; deliveries still refuse to write through it.
        match ensure_dir(&public, ATTACHMENTS_DIR_NAME, owner) {
            Ok(_) | Err(SiteError::Fs(FsError::PathEscapes | FsError::NotADirectory)) => {}
            Err(e) => return Err(e),
        }
        Ok(PublicFolder { public, owner })
    }

    /// The handle of `public/`.
    pub fn dir(&self) -> &Dir {
        &self.public
    }

    /// The folder new files of `place` are written into; never through a link, at any
    /// component of a folder's path.
    pub fn place_dir(&self, place: &PublicPlace) -> Result<Dir, SiteError> {
        Ok(match place {
            PublicPlace::Public => self.public.try_clone()?,
            PublicPlace::Attachments => {
                self.public.open_dir(ATTACHMENTS_DIR_NAME, Follow::Never)?
            }
            PublicPlace::Folder(rel) => {
                // Checked again here: the place may come over the worker's socket.
                let path = PublicPath::parse(&layout::in_public(rel))?;
                if path.is_root() || path.in_attachments() {
                    return Err(SiteError::ManagedBySystem);
                }
                match self.public.open_dir(&path.rel, Follow::Never) {
                    Ok(dir) => dir,
                    Err(FsError::NotFound) => return Err(SiteError::NoSuchFolder(path.display())),
                    Err(e) => return Err(e.into()),
                }
            }
        })
    }

    /// Opens a file under `public/` for download; links are followed only within `public/`.
    pub fn open_file(&self, path: &str) -> Result<Download, SiteError> {
        let path = PublicPath::parse(path)?;
        if path.is_root() {
            return Err(FsError::IsDirectory.into());
        }
        let file = self.public.open_file(&path.rel, Follow::Beneath)?;
        let meta = Metadata::of_file(&file)?;
        Ok(Download {
            file,
            meta,
            name: path.name().to_owned(),
        })
    }

    /// Opens a file under `public/` for a share link: no link is followed at any
    /// component, so a path replaced by a link since it was shared is refused.
    pub fn open_file_no_links(&self, path: &str) -> Result<Download, SiteError> {
        let path = PublicPath::parse(path)?;
        if path.is_root() {
            return Err(FsError::IsDirectory.into());
        }
        let file = self.public.open_file(&path.rel, Follow::Never)?;
        let meta = Metadata::of_file(&file)?;
        Ok(Download {
            file,
            meta,
            name: path.name().to_owned(),
        })
    }

    /// The mark of `public/attachments/` (its mtime and inode), which moves whenever a
    /// file is added, removed or renamed there; `None` when it is not a real folder.
    pub fn attachments_mark(&self) -> Result<Option<(SystemTime, u64)>, SiteError> {
        match self.public.open_dir(ATTACHMENTS_DIR_NAME, Follow::Never) {
            Ok(dir) => {
                let meta = dir.own_metadata()?;
                Ok(Some((meta.mtime, meta.inode)))
            }
            Err(FsError::PathEscapes | FsError::NotADirectory | FsError::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Every file directly in `public/attachments/`, by name, with its size and mtime:
    /// two snapshots tell which files appeared or changed in between. Empty when
    /// `attachments` is not a real folder.
    pub fn attachments_state(&self) -> Result<AttachmentsState, SiteError> {
        let attachments = match self.public.open_dir(ATTACHMENTS_DIR_NAME, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::PathEscapes | FsError::NotADirectory | FsError::NotFound) => {
                return Ok(BTreeMap::new());
            }
            Err(e) => return Err(e.into()),
        };
        Ok(attachments
            .entries()?
            .into_iter()
            .filter(|e| e.meta.kind == EntryKind::File && !is_temporary(&e.name))
            .map(|e| (e.name, (e.meta.size, e.meta.mtime)))
            .collect())
    }

    /// Makes a folder under `public/`, with its missing parents (M-MANAGE).
    pub fn mkdir(&self, path: &str) -> Result<String, SiteError> {
        let path = PublicPath::parse(path)?;
        if path.is_root() {
            return Err(SiteError::AlreadyExists(PUBLIC_DIR_NAME.into()));
        }
        path.require_member_managed()?;
        let path = path.renamed(&typed_name(path.name())?);
        let (parent, name) = match path.rel.rsplit_once('/') {
            Some((parent, name)) => (Some(self.make_parents(parent)?), name),
            None => (None, path.rel.as_str()),
        };
        let parent = parent.as_ref().unwrap_or(&self.public);
        parent.create_dir(name, DIR_MODE).map_err(|e| match e {
            FsError::Exists => SiteError::AlreadyExists(path.display()),
            e => e.into(),
        })?;
        if let Some((uid, gid)) = self.owner {
            parent.open_dir(name, Follow::Never)?.chown(uid, gid)?;
        }
        Ok(path.display())
    }

    /// Opens the parents of a new folder, making the missing ones; a parent the member
    /// makes must have a safe name like the folder itself (existing ones may be anything).
    pub(crate) fn make_parents(&self, rel: &str) -> Result<Dir, SiteError> {
        let mut current = self.public.try_clone()?;
        let mut parts = rel.split('/').peekable();
        while let Some(part) = parts.peek() {
            match current.open_dir(part, Follow::Never) {
                Ok(dir) => current = dir,
                Err(FsError::NotFound) => break,
                Err(e) => return Err(e.into()),
            }
            parts.next();
        }
        // Every missing name is checked (and normalized) before the first one is made.
        let missing = parts.map(typed_name).collect::<Result<Vec<_>, _>>()?;
        if missing.is_empty() {
            return Ok(current);
        }
        Ok(current.create_dir_all_owned(&missing.join("/"), DIR_MODE, self.owner)?)
    }

    /// Moves or renames an entry under `public/`, never over an existing one (M-MANAGE).
    pub fn move_entry(&self, from: &str, to: &str) -> Result<String, SiteError> {
        let from = PublicPath::parse(from)?;
        let to = PublicPath::parse(to)?;
        from.require_member_managed()?;
        to.require_member_managed()?;
        let to = to.renamed(&typed_name(to.name())?);
        if to.rel.starts_with(&format!("{}/", from.rel)) {
            return Err(SiteError::MoveIntoItself);
        }
        self.public
            .rename(&from.rel, &to.rel, false)
            .map_err(|e| match e {
                FsError::Exists | FsError::NotEmpty => SiteError::AlreadyExists(to.display()),
                e => e.into(),
            })?;
        Ok(to.display())
    }

    /// Deletes a file, a link or a whole folder under `public/` (M-MANAGE).
    pub fn delete(&self, path: &str) -> Result<(), SiteError> {
        let path = PublicPath::parse(path)?;
        path.require_member_managed()?;
        self.public.metadata(&path.rel)?;
        Ok(self.public.remove(&path.rel)?)
    }

    /// The tree under `public/` (M-LIST): folders first, then by name; links not followed.
    pub fn list(&self, project: Option<String>) -> Result<Listing, SiteError> {
        let mut budget = LIST_MAX_ENTRIES;
        let mut truncated = false;
        let entries = list_dir(
            &self.public,
            PUBLIC_DIR_NAME,
            0,
            &mut budget,
            &mut truncated,
        )?;
        Ok(Listing {
            root: PUBLIC_DIR_NAME.to_owned(),
            project,
            entries,
            truncated,
        })
    }
}

/// Opens the folder `name` in `parent`, making it (0700, given to `owner`) when missing.
fn ensure_dir(parent: &Dir, name: &str, owner: Option<(u32, u32)>) -> Result<Dir, SiteError> {
    Ok(parent.create_dir_all_owned(name, DIR_MODE, owner)?)
}

fn list_dir(
    dir: &Dir,
    path: &str,
    depth: usize,
    budget: &mut usize,
    truncated: &mut bool,
) -> Result<Vec<Node>, SiteError> {
    let mut entries: Vec<_> = dir
        .entries()?
        .into_iter()
        .filter(|e| !is_temporary(&e.name) && e.meta.kind != EntryKind::Other)
        .collect();
    entries.sort_by(|a, b| {
        let rank = |k: EntryKind| u8::from(k != EntryKind::Dir);
        rank(a.meta.kind)
            .cmp(&rank(b.meta.kind))
            .then_with(|| a.name.cmp(&b.name))
    });
    // A folder's own entries are counted before any folder beneath it is read, so one
    // big subfolder cannot hide its siblings: the cut falls on the deepest entries.
    if entries.len() > *budget {
        *truncated = true;
        entries.truncate(*budget);
    }
    *budget -= entries.len();
    let mut nodes = Vec::with_capacity(entries.len());
    for entry in entries {
        let mut child_path = String::with_capacity(path.len() + 1 + entry.name.len());
        child_path.push_str(path);
        child_path.push('/');
        child_path.push_str(&entry.name);
        let managed =
            depth == 0 && entry.name == ATTACHMENTS_DIR_NAME && entry.meta.kind == EntryKind::Dir;
        let (kind, size, children) = match entry.meta.kind {
            EntryKind::Dir => {
                let children = if depth + 1 >= LIST_MAX_DEPTH {
                    *truncated = true;
                    Vec::new()
                } else {
                    match dir.open_dir(&entry.name, Follow::Never) {
                        Ok(child) => list_dir(&child, &child_path, depth + 1, budget, truncated)?,
                        // Replaced by a link or removed since it was read, or its own
                        // permissions keep its owner out: shown empty, the rest listed.
                        Err(
                            FsError::PathEscapes | FsError::NotFound | FsError::PermissionDenied,
                        ) => Vec::new(),
                        Err(e) => return Err(e.into()),
                    }
                };
                (NodeKind::Dir, None, Some(children))
            }
            EntryKind::Symlink => (NodeKind::Link, None, None),
            _ => (NodeKind::File, Some(entry.meta.size), None),
        };
        nodes.push(Node {
            name: entry.name,
            path: child_path,
            kind,
            managed,
            size,
            mtime: rfc3339(entry.meta.mtime),
            children,
        });
    }
    Ok(nodes)
}
