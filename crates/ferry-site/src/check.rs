//! The places of a site that cannot be used safely as they are: a root of a workspace
//! folder that is a symbolic link (core C-PATH: roots are reached with no link followed),
//! or a `memory/` whose provisioned documents the service could not place without
//! trusting what an agent put there. `ferry site check` lists them; `ferry serve` logs
//! them and skips what they concern.

use std::fmt;

use ferry_fs::{Dir, EntryKind, Follow, FsError};

use ferry_config::SiteMode;

use crate::layout;
use crate::layout::MEMORY_DIR;
use crate::{Site, SiteError};
use ferry_docs::shipped::FILE_DELIVERY_FILE;

/// One place of the site that ferry will not use as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The person whose workspace it is; `None` for a place all persons share.
    pub person: Option<String>,
    /// Relative to the data folder.
    pub path: String,
    /// What is wrong, and what ferry does about it.
    pub why: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.person {
            Some(person) => write!(f, "person {person}: {}: {}", self.path, self.why),
            None => write!(f, "site: {}: {}", self.path, self.why),
        }
    }
}

/// What every root that is a link is told.
const LINK_WHY: &str = "is a symbolic link or lies under one; links are never followed at the \
     root of a workspace folder, so it is refused until it is replaced with a real folder";

impl Site {
    /// Every root of a workspace folder (shared ones, each person's and each project's)
    /// and every `memory/` that cannot be used safely, in a stable order. Folders this
    /// user may not open are not judged (run as root to see all of a host-mode site).
    pub fn check(&self) -> Result<Vec<Finding>, SiteError> {
        let mut found = Vec::new();
        let mut shared = vec![
            layout::SHARED_PUBLIC_DIR.to_owned(),
            layout::SKILLS_DIR.to_owned(),
        ];
        shared.extend(self.circles()?.into_iter().map(|c| layout::circle(&c.id)));
        self.check_roots(None, &shared, &mut found);
        for person in self.persons()? {
            let home = layout::home(&person);
            let mut roots = vec![
                home.clone(),
                layout::public_of(&home),
                layout::private(&person),
                layout::private_sub(&person, layout::TMP_DIR),
                layout::private_sub(&person, layout::ARTIFACTS_DIR),
            ];
            let projects = self.projects(&person)?;
            if !projects.is_empty() {
                roots.push(layout::projects(&person));
            }
            for project in projects {
                let container = layout::project(&person, &project.id);
                let public = layout::public_of(&container);
                roots.extend([container, public]);
            }
            let before = found.len();
            self.check_roots(Some(&person), &roots, &mut found);
            if found.len() == before {
                let memory = format!("{home}/{MEMORY_DIR}");
                if let Some(why) = self.memory_finding(&memory) {
                    found.push(Finding {
                        person: Some(person.clone()),
                        path: memory,
                        why,
                    });
                }
            }
        }
        Ok(found)
    }

    /// Adds a finding for each root in `roots` that is not a usable folder; a root beneath
    /// one already found is not named again.
    fn check_roots(&self, person: Option<&str>, roots: &[String], found: &mut Vec<Finding>) {
        let mut bad: Vec<&str> = Vec::new();
        for rel in roots {
            if bad.iter().any(|b| rel.starts_with(&format!("{b}/"))) {
                continue;
            }
            let why = match self.root().open_dir(rel, Follow::Never) {
                // What this user may not open it cannot judge (host mode, not as root).
                Ok(_) | Err(FsError::NotFound | FsError::PermissionDenied) => continue,
                Err(FsError::PathEscapes) => LINK_WHY.to_owned(),
                Err(FsError::NotADirectory) => "is not a folder".to_owned(),
                Err(e) => format!("cannot be opened: {e}"),
            };
            bad.push(rel);
            found.push(Finding {
                person: person.map(str::to_owned),
                path: rel.clone(),
                why,
            });
        }
    }

    /// What is wrong with the `memory/` at `rel`, if anything; a missing one is made at
    /// the next start.
    fn memory_finding(&self, rel: &str) -> Option<String> {
        let memory = match self.root().open_dir(rel, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound | FsError::PermissionDenied) => return None,
            Err(e) => return Some(memory_refusal(e).why()),
        };
        if let Err(e) = self.trusted_memory(&memory) {
            return Some(e.why());
        }
        let document = match memory.metadata(FILE_DELIVERY_FILE) {
            Ok(meta) => meta,
            Err(FsError::NotFound) => return None,
            Err(e) => return Some(format!("{FILE_DELIVERY_FILE} cannot be read: {e}")),
        };
        let replaced = "; it is replaced (never written through) at the next start";
        match document.kind {
            EntryKind::Symlink => {
                Some(format!("{FILE_DELIVERY_FILE} is a symbolic link{replaced}"))
            }
            EntryKind::File if document.links > 1 => Some(format!(
                "{FILE_DELIVERY_FILE} has {} names (hard links){replaced}",
                document.links
            )),
            EntryKind::File => None,
            _ => Some(format!(
                "{FILE_DELIVERY_FILE} is not a regular file{replaced}"
            )),
        }
    }

    /// Opens the workspace's `memory/` for provisioning, making it when missing: a real
    /// folder (not a link), owned by the service, so that no agent can have planted
    /// anything in it.
    pub(crate) fn memory_dir(&self, home: &Dir) -> Result<Dir, SiteError> {
        let memory = home
            .create_dir_all(MEMORY_DIR, 0o755)
            .map_err(memory_refusal)?;
        self.trusted_memory(&memory)?;
        Ok(memory)
    }

    /// Refuses a `memory/` that is not the service's own.
    fn trusted_memory(&self, memory: &Dir) -> Result<(), SiteError> {
        // Host mode provisions as root (`ferry site init`); the other modes as the service.
        let service = match self.mode() {
            SiteMode::Host => 0,
            _ => rustix::process::geteuid().as_raw(),
        };
        let owner = memory.own_metadata()?.uid;
        if owner != service {
            return Err(SiteError::Unsafe {
                path: MEMORY_DIR.into(),
                why: format!(
                    "is owned by uid {owner}, not by the service (uid {service}); its documents \
                     are not provisioned until the operator gives the folder back"
                ),
            });
        }
        Ok(())
    }
}

/// The error for a `memory/` that cannot be opened as a folder.
fn memory_refusal(e: FsError) -> SiteError {
    let why = match e {
        FsError::PathEscapes => "is a symbolic link; its documents are not provisioned until it \
             is replaced with a real folder"
            .to_owned(),
        FsError::NotADirectory | FsError::Exists => "is not a folder; its documents are not \
             provisioned until it is replaced with a real folder"
            .to_owned(),
        e => return e.into(),
    };
    SiteError::Unsafe {
        path: MEMORY_DIR.into(),
        why,
    }
}

impl SiteError {
    /// The reason of an [`SiteError::Unsafe`], or the error's own sentence.
    fn why(&self) -> String {
        match self {
            SiteError::Unsafe { why, .. } => why.clone(),
            e => e.to_string(),
        }
    }
}
