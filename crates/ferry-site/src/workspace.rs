//! A person's workspace, or one of their projects, and its member-visible `public/`
//! (spec members M-UP, M-LIST, M-GET, M-MANAGE, M-DELIVER).

use std::collections::BTreeMap;
use std::fs::File;
use std::time::SystemTime;

use ferry_config::limits::{LIST_MAX_DEPTH, LIST_MAX_ENTRIES};
use ferry_fs::{
    AtomicWriter, Dir, EntryKind, Follow, FsError, Metadata, check_relative, is_temporary,
    safe_name,
};
use serde::Serialize;

use crate::layout::{self, ATTACHMENTS_DIR_NAME, PUBLIC_DIR_NAME};
use crate::migrate::migrate_legacy_public;
use crate::time::rfc3339;
use crate::{Site, SiteError};

/// One person's main workspace or one of their projects.
pub struct Workspace<'s> {
    site: &'s Site,
    person: String,
    project: Option<String>,
    owner: Option<(u32, u32)>,
}

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
        Ok(PublicPath {
            rel: parts.collect::<Vec<_>>().join("/"),
        })
    }

    /// The path as the member and the agent see it: `public/…`.
    pub fn display(&self) -> String {
        if self.rel.is_empty() {
            PUBLIC_DIR_NAME.to_owned()
        } else {
            format!("{PUBLIC_DIR_NAME}/{}", self.rel)
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

    fn is_root(&self) -> bool {
        self.rel.is_empty()
    }

    fn is_attachments(&self) -> bool {
        self.rel == ATTACHMENTS_DIR_NAME
    }

    /// Refuses the folders the system manages: `public` itself and `public/attachments`.
    fn require_member_managed(&self) -> Result<(), SiteError> {
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
#[derive(Debug, Serialize)]
pub struct Listing {
    pub root: &'static str,
    pub project: Option<String>,
    pub entries: Vec<Node>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// One entry of a listing.
#[derive(Debug, Serialize)]
pub struct Node {
    pub name: String,
    pub path: String,
    #[serde(rename = "type")]
    pub kind: NodeKind,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub managed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    pub mtime: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<Node>>,
}

/// What a listed entry is. Links are shown, never followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    File,
    Dir,
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
    pub file: File,
    pub meta: Metadata,
    pub name: String,
}

impl Site {
    /// The workspace of `person`, or of their `project`; an unknown project is
    /// [`SiteError::UnknownProject`] whoever asks (never revealing another's).
    pub fn workspace(
        &self,
        person: &str,
        project: Option<&str>,
    ) -> Result<Workspace<'_>, SiteError> {
        self.require_person(person)?;
        if let Some(project) = project {
            self.require_project(person, project)?;
        }
        Ok(Workspace {
            site: self,
            person: person.to_owned(),
            project: project.map(str::to_owned),
            owner: self.config().agent_ids(person),
        })
    }
}

impl Workspace<'_> {
    /// The project, if this is one.
    pub fn project(&self) -> Option<&str> {
        self.project.as_deref()
    }

    /// The person whose workspace this is.
    pub fn person(&self) -> &str {
        &self.person
    }

    /// The folder holding this workspace's `public/`, relative to the site.
    fn container_rel(&self) -> String {
        layout::container(&self.person, self.project.as_deref())
    }

    /// The single accessor for `public/`: migrates a legacy folder first, then makes sure
    /// `public/` and `public/attachments/` exist.
    pub fn public(&self) -> Result<Dir, SiteError> {
        let container = self.container()?;
        migrate_legacy_public(&container)?;
        let public = self.ensure_dir(&container, PUBLIC_DIR_NAME)?;
        // A missing attachments/ is made again. Something else at its name (a link or a
        // file the agent put there) is left as it is and listed as such, rather than failing
        // every access to public/; deliveries still refuse to write through it.
        match self.ensure_dir(&public, ATTACHMENTS_DIR_NAME) {
            Ok(_) | Err(SiteError::Fs(FsError::PathEscapes | FsError::NotADirectory)) => {}
            Err(e) => return Err(e),
        }
        Ok(public)
    }

    /// The folder holding `public/`, made on first use.
    fn container(&self) -> Result<Dir, SiteError> {
        let rel = self.container_rel();
        match self.site.root().open_dir(&rel, Follow::Never) {
            Ok(dir) => Ok(dir),
            Err(FsError::NotFound) => self.site.make_dir(&rel, 0o700, self.owner),
            Err(e) => Err(e.into()),
        }
    }

    fn ensure_dir(&self, parent: &Dir, name: &str) -> Result<Dir, SiteError> {
        crate::site::ensure_dir(parent, name, 0o700, self.owner)
    }

    /// Starts an upload (M-UP): the name made safe and its extension allowed. Returns the
    /// writer and the safe name; the file appears at `public/<name>` on commit.
    pub fn upload_writer(&self, raw_name: &str) -> Result<(AtomicWriter, String), SiteError> {
        let name = self.upload_name(raw_name)?;
        let public = self.public()?;
        let writer = AtomicWriter::create(&public, &name)?
            .limit(self.site.config().media.max_upload_bytes)
            .budget(Some(self.quota()?))
            .owner(self.owner);
        Ok((writer, name))
    }

    /// Starts an upload whose workspace is not known yet (the project form field may
    /// follow the file): the bytes go to a hidden temporary in this workspace's `public/`
    /// with no name claimed yet, and [`Workspace::adopt_upload`] places them, here or in
    /// a project of the same person.
    pub fn staged_upload_writer(
        &self,
        raw_name: &str,
    ) -> Result<(AtomicWriter, String), SiteError> {
        let name = self.upload_name(raw_name)?;
        let writer = AtomicWriter::create_unplaced(&self.public()?)?
            .limit(self.site.config().media.max_upload_bytes)
            .budget(Some(self.quota()?))
            .owner(self.owner);
        Ok((writer, name))
    }

    /// The person's quota, for one writer (every project of theirs shares it).
    fn quota(&self) -> Result<Box<dyn ferry_fs::Budget>, SiteError> {
        Ok(Box::new(self.site.quota_claim(&self.person)?))
    }

    /// The safe name of an upload, refused unless its extension is allowed.
    fn upload_name(&self, raw_name: &str) -> Result<String, SiteError> {
        let name = safe_name(raw_name)?;
        let media = &self.site.config().media;
        let extension = name
            .rsplit_once('.')
            .map(|(_, ext)| ext.to_ascii_lowercase());
        let allowed = extension
            .as_deref()
            .is_some_and(|ext| media.allowed_extensions.iter().any(|a| a == ext));
        if !allowed {
            return Err(SiteError::ExtensionNotAllowed(name));
        }
        Ok(name)
    }

    /// Places a staged upload (see [`Workspace::staged_upload_writer`]) of the same person
    /// at this workspace's `public/<name>`.
    pub fn adopt_upload(&self, writer: &mut AtomicWriter, name: &str) -> Result<(), SiteError> {
        let public = self.public()?;
        writer.retarget(&public, name)?;
        Ok(())
    }

    /// Starts a delivery into `public/attachments/` (M-DELIVER): no extension allowlist.
    pub fn delivery_writer(
        &self,
        raw_name: &str,
        max_bytes: u64,
    ) -> Result<(AtomicWriter, String), SiteError> {
        let name = safe_name(raw_name)?;
        let attachments = self
            .public()?
            .open_dir(ATTACHMENTS_DIR_NAME, Follow::Never)?;
        let writer = AtomicWriter::create(&attachments, &name)?
            .limit(max_bytes)
            .budget(Some(self.quota()?))
            .owner(self.owner);
        Ok((writer, layout::in_attachments(&name)))
    }

    /// Opens a file under `public/` for download; links are followed only within `public/`.
    pub fn open_public_file(&self, path: &str) -> Result<Download, SiteError> {
        let path = PublicPath::parse(path)?;
        if path.is_root() {
            return Err(FsError::IsDirectory.into());
        }
        let public = self.public()?;
        let file = public.open_file(&path.rel, Follow::Beneath)?;
        let meta = Metadata::of_file(&file)?;
        Ok(Download {
            file,
            meta,
            name: path.name().to_owned(),
        })
    }

    /// Every file directly in `public/attachments/`, by name, with its size and mtime:
    /// two snapshots tell which files appeared or changed in between. Empty when
    /// `attachments` is not a real folder.
    pub fn attachments_state(&self) -> Result<AttachmentsState, SiteError> {
        let attachments = match self.public()?.open_dir(ATTACHMENTS_DIR_NAME, Follow::Never) {
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
        check_member_name(path.name())?;
        let public = self.public()?;
        let (parent, name) = match path.rel.rsplit_once('/') {
            Some((parent, name)) => (Some(self.make_parents(&public, parent)?), name),
            None => (None, path.rel.as_str()),
        };
        let parent = parent.as_ref().unwrap_or(&public);
        parent.create_dir(name, 0o700).map_err(|e| match e {
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
    fn make_parents(&self, public: &Dir, rel: &str) -> Result<Dir, SiteError> {
        let mut current = public.try_clone()?;
        let mut parts = rel.split('/').peekable();
        while let Some(part) = parts.peek() {
            match current.open_dir(part, Follow::Never) {
                Ok(dir) => current = dir,
                Err(FsError::NotFound) => break,
                Err(e) => return Err(e.into()),
            }
            parts.next();
        }
        // Every missing name is checked before the first one is made.
        let missing: Vec<&str> = parts.collect();
        for part in &missing {
            check_member_name(part)?;
        }
        for part in missing {
            current = self.ensure_dir(&current, part)?;
        }
        Ok(current)
    }

    /// Moves or renames an entry under `public/`, never over an existing one (M-MANAGE).
    pub fn move_entry(&self, from: &str, to: &str) -> Result<String, SiteError> {
        let from = PublicPath::parse(from)?;
        let to = PublicPath::parse(to)?;
        from.require_member_managed()?;
        to.require_member_managed()?;
        check_member_name(to.name())?;
        if to.rel.starts_with(&format!("{}/", from.rel)) {
            return Err(SiteError::MoveIntoItself);
        }
        let public = self.public()?;
        public
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
        let public = self.public()?;
        public.metadata(&path.rel)?;
        let removed = public.remove(&path.rel);
        // Even a delete that failed halfway may have freed room.
        self.site.usage_changed(&self.person);
        Ok(removed?)
    }

    /// The tree under `public/` (M-LIST): folders first, then by name; links not followed.
    pub fn list(&self) -> Result<Listing, SiteError> {
        let public = self.public()?;
        let mut budget = LIST_MAX_ENTRIES;
        let mut truncated = false;
        let entries = list_dir(&public, PUBLIC_DIR_NAME, 0, &mut budget, &mut truncated)?;
        Ok(Listing {
            root: PUBLIC_DIR_NAME,
            project: self.project.clone(),
            entries,
            truncated,
        })
    }
}

/// Names the member gives must already be safe names: no control characters, no
/// leading dot, no separators.
fn check_member_name(name: &str) -> Result<(), SiteError> {
    match safe_name(name) {
        Ok(safe) if safe == name => Ok(()),
        _ => Err(FsError::UnsafeName(name.to_owned()).into()),
    }
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
    let mut nodes = Vec::with_capacity(entries.len().min(*budget));
    for entry in entries {
        if *budget == 0 {
            *truncated = true;
            break;
        }
        *budget -= 1;
        let child_path = format!("{path}/{}", entry.name);
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
                        // Replaced by a link or removed since it was read: show it empty.
                        Err(FsError::PathEscapes | FsError::NotFound) => Vec::new(),
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
