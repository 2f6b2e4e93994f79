//! A person's workspace, or one of their projects, as the site knows it: the person and
//! the project checked, the rules of the configuration (allowed extensions, the upload
//! cap) and the person's quota. What happens in its folders is `public.rs`, run by
//! whoever acts as the person.

use ferry_fs::{Dir, FsError, safe_name};

use crate::public::PublicFolder;
use crate::{Site, SiteError};

/// One person's main workspace or one of their projects.
pub struct Workspace<'s> {
    site: &'s Site,
    person: String,
    project: Option<String>,
    owner: Option<(u32, u32)>,
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

    /// The safe name of an upload (M-UP), refused unless its extension is allowed: the
    /// same in every workspace, so it can be told before any is opened.
    pub fn upload_name(&self, raw_name: &str) -> Result<String, SiteError> {
        let name = safe_name(raw_name)?;
        let media = &self.config().media;
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
    pub fn container_rel(&self) -> String {
        crate::layout::container(&self.person, self.project.as_deref())
    }

    /// `public/`, opened with this process's own authority (provisioning, and sites whose
    /// service owns the workspaces); the container is made on first use.
    pub fn public(&self) -> Result<PublicFolder, SiteError> {
        let container = open_container(
            self.site.root(),
            &self.person,
            self.project.as_deref(),
            self.owner,
        )?;
        PublicFolder::open(&container, self.owner)
    }

    /// The most bytes one upload may have.
    pub fn max_upload_bytes(&self) -> u64 {
        self.site.config().media.max_upload_bytes
    }

    /// Tells the quota that files of this person went away (a delete, even a failed one).
    pub fn usage_changed(&self) {
        self.site.usage_changed(&self.person);
    }

    /// The safe name of an upload (M-UP), refused unless its extension is allowed.
    pub fn upload_name(&self, raw_name: &str) -> Result<String, SiteError> {
        self.site.upload_name(raw_name)
    }
}

/// Opens the folder holding the `public/` of `person`'s workspace or `project` beneath the
/// site's `root`, one component at a time with no link followed, making what is missing
/// (0700, given to `owner`).
pub fn open_container(
    root: &Dir,
    person: &str,
    project: Option<&str>,
    owner: Option<(u32, u32)>,
) -> Result<Dir, SiteError> {
    let plain = |id: &str| !id.is_empty() && id != "." && id != ".." && !id.contains('/');
    if !plain(person) || !project.is_none_or(plain) {
        return Err(FsError::PathEscapes.into());
    }
    let rel = crate::layout::container(person, project);
    Ok(root.create_dir_all_owned(&rel, 0o700, owner)?)
}
