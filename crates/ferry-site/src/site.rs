//! The site: one data directory (spec core C-SITE), its layout, people and projects.

use std::path::{Path, PathBuf};

use ferry_fs::{AtomicWriter, Dir, Follow, FsError};

use ferry_config::limits::PROJECT_ID_TRIES_MAX;
use ferry_config::{Config, SiteMode};

use crate::db::{Db, Exec, now_secs, params};
use crate::ids::check_id;
use crate::layout::{self, SERVICE_DIR};
use crate::{SiteError, TokenKind};

/// The SQLite file under [`SERVICE_DIR`], when the metadata is not in PostgreSQL.
pub const DB_FILE: &str = "site.db";
/// The person `ferry serve` creates on a new data dir.
pub const DEFAULT_PERSON: &str = "me";

/// The folders of a new site, with their modes in local and container mode.
const LAYOUT: &[(&str, u32)] = &[
    (SERVICE_DIR, 0o700),
    (layout::MEDIA_DIR, 0o700),
    (layout::HOME_DIR, 0o755),
    (layout::PRIVATE_DIR, 0o755),
    (layout::PEOPLE_DIR, 0o755),
    (layout::TRASH_DIR, 0o755),
    (layout::HERD_KEYS_DIR, 0o755),
    (layout::CIRCLES_DIR, 0o755),
    (layout::SHARED_DIR, 0o755),
    (layout::SHARED_PUBLIC_DIR, 0o775),
    (layout::SHARED_CACHE_DIR, 0o755),
    (layout::DEPENDENCY_CACHE_DIR, 0o775),
    (layout::SKILLS_DIR, 0o755),
];

/// An open site: the data directory's handle, its database and the effective configuration.
pub struct Site {
    root_path: PathBuf,
    root: Dir,
    pub(crate) db: std::sync::Arc<Db>,
    config: Config,
    pub(crate) usage: crate::usage::Usage,
    /// The S3 client, made once (a client holds a connection pool; a local store is
    /// opened anew on each call, as cheap as a folder).
    pub(crate) s3_blobs: std::sync::OnceLock<ferry_media::Blobs>,
    /// Tokens, circles and persons remembered (`facts.rs`).
    pub(crate) facts: std::sync::Arc<crate::facts::Facts>,
    /// The lease under which a gateway remembers them, while it runs.
    pub(crate) keeper: std::sync::Mutex<Option<crate::facts::Keeper>>,
}

/// A project of one person (spec members M-PROJ).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    /// The project's id, unique within its person and safe as a folder name.
    pub id: String,
    /// The name people see: as typed when the project was made from a name, else its id.
    pub name: String,
    /// When the project was made, in seconds since the epoch.
    pub created: i64,
}

impl Site {
    /// Opens the site at `data`, creating the directory, its layout and database on first use.
    pub fn open(data: &Path, config: Config) -> Result<Site, SiteError> {
        std::fs::create_dir_all(data)?;
        let root = Dir::open_ambient(data)?;
        for (rel, mode) in LAYOUT {
            match root.create_dir(rel, *mode) {
                Ok(()) | Err(FsError::Exists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // The service dir must be ours: refuse a link planted in its place.
        root.open_dir(SERVICE_DIR, Follow::Never)?;
        let db = crate::db::open(data, &config.metadata)?;
        crate::artifacts::relativize_legacy_paths(&db, &std::fs::canonicalize(data)?)?;
        Ok(Site {
            root_path: data.to_path_buf(),
            root,
            db: std::sync::Arc::new(db),
            config,
            usage: Default::default(),
            s3_blobs: Default::default(),
            facts: Default::default(),
            keeper: Default::default(),
        })
    }

    /// Whether a site lives at `data` (its service folder is there; its metadata may be
    /// in it or in PostgreSQL), without making anything.
    pub fn exists(data: &Path) -> bool {
        data.join(SERVICE_DIR).is_dir()
    }

    /// The engine the metadata is on, as people name it: `SQLite` or `PostgreSQL`.
    pub fn metadata_engine(&self) -> &'static str {
        match self.db.engine() {
            ferry_sql::Engine::Sqlite => "SQLite",
            ferry_sql::Engine::Postgres => "PostgreSQL",
        }
    }

    /// Whether the metadata database answers a query (`GET /readyz`).
    pub fn ping(&self) -> Result<(), SiteError> {
        self.db.exists("SELECT 1", params![])?;
        Ok(())
    }

    /// The data directory as the operator named it.
    pub fn path(&self) -> &Path {
        &self.root_path
    }

    /// The effective configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The data folder's handle: every path of the site is opened beneath it.
    pub fn root(&self) -> &Dir {
        &self.root
    }

    /// On a site without people, creates [`DEFAULT_PERSON`] and returns its admin token.
    pub fn ensure_default_person(&self) -> Result<Option<String>, SiteError> {
        if self.db.exists("SELECT 1 FROM persons LIMIT 1", params![])? {
            return Ok(None);
        }
        self.add_person(DEFAULT_PERSON)?;
        self.create_token(DEFAULT_PERSON, TokenKind::Admin)
            .map(Some)
    }

    /// Adds a person and provisions their workspace.
    pub fn add_person(&self, id: &str) -> Result<(), SiteError> {
        check_id("person", id)?;
        let inserted = self.db.execute(
            "INSERT INTO persons (id, created) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![id, now_secs()],
        )?;
        if inserted == 0 {
            return Err(SiteError::AlreadyExists(format!("person {id:?}")));
        }
        self.provision_person(id)
    }

    /// Every person, sorted.
    pub fn persons(&self) -> Result<Vec<String>, SiteError> {
        Ok(self
            .db
            .rows("SELECT id FROM persons ORDER BY id", params![], |r| {
                r.get(0)
            })?)
    }

    /// Creates what a person's workspace needs, and refreshes the shipped documents.
    /// Safe to repeat: nothing of the person's is removed.
    pub fn provision_person(&self, id: &str) -> Result<(), SiteError> {
        check_id("person", id)?;
        let owner = self.config.agent_ids(id);
        let home = self.make_dir(&layout::home(id), 0o700, owner)?;
        let private = self.root.create_dir_all(&layout::private(id), 0o700)?;
        for sub in [layout::TMP_DIR, layout::ARTIFACTS_DIR] {
            let dir = private.create_dir_all(sub, 0o700)?;
            if let Some((uid, gid)) = owner {
                dir.chown(uid, gid)?;
            }
        }
        if let Some((uid, gid)) = owner {
            private.chown(uid, gid)?;
        }
        // The trash is made now rather than by the first delete, so a refused delete
        // changes nothing; in host mode `ferry site init` gives it to the person.
        match self.root.create_dir_all(&layout::trash(id), 0o700) {
            Ok(_) | Err(FsError::PermissionDenied) => {}
            Err(e) => return Err(e.into()),
        }
        // The memory folder stays the service's, so the agent can read but not rewrite it.
        let memory = self.memory_dir(&home).map_err(|e| match e {
            SiteError::Unsafe { path, why } => SiteError::Unsafe {
                path: format!("{}/{path}", layout::home(id)),
                why,
            },
            e => e,
        })?;
        provision_document(
            &memory,
            ferry_docs::shipped::FILE_DELIVERY_FILE,
            ferry_docs::shipped::FILE_DELIVERY_MD,
        )?;
        Ok(())
    }

    /// Adds a project to a person's workspace, making its folders with this process's
    /// own authority.
    pub fn add_project(&self, person: &str, id: &str) -> Result<Project, SiteError> {
        self.add_project_with(person, id, |id| {
            self.workspace(person, Some(id))?
                .public()
                .map(|_| ())
                .map_err(|e| project_folder_error(person, id, e))
        })
    }

    /// Adds a project whose folders `make_folders` makes (in host mode, the person's own
    /// worker); when it fails, the record is taken back and its error returned.
    pub fn add_project_with<E: From<SiteError>>(
        &self,
        person: &str,
        id: &str,
        make_folders: impl FnOnce(&str) -> Result<(), E>,
    ) -> Result<Project, E> {
        self.require_person(person)?;
        check_id("project", id)?;
        if !self.insert_project(person, id, "")? {
            return Err(SiteError::AlreadyExists(format!("project {id:?}")).into());
        }
        self.finish_project(person, id, "", make_folders)
    }

    /// Adds a project named `name` (M-DAILY): its id is derived from the name
    /// ([`crate::ids::project_id_from_name`]), with `-2`, `-3`… when the person already
    /// has a project of that id; or `id` when one is given. The name is kept and shown.
    pub fn add_named_project_with<E: From<SiteError>>(
        &self,
        person: &str,
        name: &str,
        id: Option<&str>,
        make_folders: impl FnOnce(&str) -> Result<(), E>,
    ) -> Result<Project, E> {
        self.require_person(person)?;
        let name = crate::ids::project_name(name)?;
        if let Some(id) = id {
            check_id("project", id)?;
            if !self.insert_project(person, id, &name)? {
                return Err(SiteError::AlreadyExists(format!("project {id:?}")).into());
            }
            return self.finish_project(person, id, &name, make_folders);
        }
        let base = crate::ids::project_id_from_name(&name)
            .ok_or_else(|| SiteError::NameGivesNoId(name.clone()))?;
        for n in 1..=PROJECT_ID_TRIES_MAX {
            let id = crate::ids::project_id_candidate(&base, n);
            if self.insert_project(person, &id, &name)? {
                return self.finish_project(person, &id, &name, make_folders);
            }
        }
        Err(SiteError::AlreadyExists(format!(
            "{PROJECT_ID_TRIES_MAX} projects with ids from {base:?}"
        ))
        .into())
    }

    /// Records a project; `false` when the person already has one of that id.
    fn insert_project(&self, person: &str, id: &str, name: &str) -> Result<bool, SiteError> {
        let inserted = self.db.execute(
            "INSERT INTO projects (person, id, created, name) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO NOTHING",
            params![person, id, now_secs(), name],
        )?;
        Ok(inserted == 1)
    }

    /// Makes a recorded project's folders; the record stands only once they exist, so a
    /// project whose folder cannot be made (a link in the way) is not listed.
    fn finish_project<E: From<SiteError>>(
        &self,
        person: &str,
        id: &str,
        name: &str,
        make_folders: impl FnOnce(&str) -> Result<(), E>,
    ) -> Result<Project, E> {
        if let Err(e) = make_folders(id) {
            self.db
                .execute(
                    "DELETE FROM projects WHERE person = ?1 AND id = ?2",
                    params![person, id],
                )
                .map_err(SiteError::from)?;
            return Err(e);
        }
        let created = self
            .db
            .row(
                "SELECT created FROM projects WHERE person = ?1 AND id = ?2",
                params![person, id],
                |r| r.get(0),
            )
            .map_err(SiteError::from)?
            .unwrap_or_else(now_secs);
        Ok(Project {
            id: id.to_owned(),
            name: shown_project_name(id, name),
            created,
        })
    }

    /// A person's projects, sorted by id.
    pub fn projects(&self, person: &str) -> Result<Vec<Project>, SiteError> {
        self.db.rows(
            "SELECT id, created, name FROM projects WHERE person = ?1 ORDER BY id",
            params![person],
            |r| {
                let id: String = r.get(0)?;
                let name: String = r.get(2)?;
                Ok(Project {
                    name: shown_project_name(&id, &name),
                    id,
                    created: r.get(1)?,
                })
            },
        )
    }

    /// Fails with [`SiteError::UnknownPerson`] unless `person` exists.
    pub fn require_person(&self, person: &str) -> Result<(), SiteError> {
        if self.facts.person_exists(person) {
            return Ok(());
        }
        if self
            .db
            .exists("SELECT 1 FROM persons WHERE id = ?1", params![person])?
        {
            self.facts.person_found(person);
            Ok(())
        } else {
            Err(SiteError::UnknownPerson(person.to_owned()))
        }
    }

    pub(crate) fn require_project(&self, person: &str, project: &str) -> Result<(), SiteError> {
        check_id("project", project).map_err(|_| SiteError::UnknownProject(project.to_owned()))?;
        if self.db.exists(
            "SELECT 1 FROM projects WHERE person = ?1 AND id = ?2",
            params![person, project],
        )? {
            Ok(())
        } else {
            Err(SiteError::UnknownProject(project.to_owned()))
        }
    }

    /// Creates `rel` and its missing parents beneath the site; every folder it creates
    /// (not one that existed) is handed to `owner`, so an agent can walk its whole workspace.
    pub(crate) fn make_dir(
        &self,
        rel: &str,
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<Dir, SiteError> {
        Ok(self.root.create_dir_all_owned(rel, mode, owner)?)
    }

    /// Whether files written into workspaces are handed to an agent uid:gid.
    pub fn mode(&self) -> SiteMode {
        self.config.site.mode
    }
}

/// The name a project is shown by: its own, or its id when it was made by id.
fn shown_project_name(id: &str, name: &str) -> String {
    match name {
        "" => id.to_owned(),
        name => name.to_owned(),
    }
}

/// Why a project's folders could not be made: a link in the way is named as such.
pub fn project_folder_error(person: &str, id: &str, e: SiteError) -> SiteError {
    match e {
        SiteError::Fs(FsError::PathEscapes) => SiteError::Unsafe {
            path: layout::project(person, id),
            why: "cannot be made: a symbolic link is in the way (links are never \
                  followed in a workspace's folders); remove it and try again"
                .into(),
        },
        e => e,
    }
}

/// Writes a shipped document read-only, replacing an older copy; unchanged copies are left.
fn provision_document(dir: &Dir, name: &str, text: &str) -> Result<(), SiteError> {
    if let Ok(mut current) = dir.open_file(name, Follow::Never) {
        let mut existing = String::new();
        if std::io::Read::read_to_string(&mut current, &mut existing).is_ok() && existing == text {
            return Ok(());
        }
    }
    let mut writer = AtomicWriter::create(dir, name)?;
    writer.write(text.as_bytes())?;
    writer.set_mode(0o444)?;
    writer.commit()?;
    Ok(())
}
