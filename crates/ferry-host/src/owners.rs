//! The owners and modes of the site's layout (core C-SITE) in host mode. Every folder is
//! opened beneath the site's handle without following a link, and changed through its
//! descriptor.

use std::os::fd::OwnedFd;
use std::path::Path;

use ferry_fs::{Dir, EntryKind, Follow, FsError};
use ferry_site::{Site, SiteError, layout};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::HostReport;
use crate::error::{HostError, fs_error};

/// How a folder's current owner is treated when it is not the wanted one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Take {
    /// Any owner is replaced: the folder becomes root's or the service's, giving no one more.
    Always,
    /// Only a folder root made (or the person's own) is handed to the person: a folder of
    /// anyone else is a conflict, never silently given away.
    FromRoot,
}

/// What one folder should be.
#[derive(Clone, Copy)]
struct Want {
    uid: u32,
    gid: u32,
    /// The exact mode, or `None` to leave the mode as the owner set it (made 0700).
    mode: Option<u32>,
    take: Take,
}

impl Want {
    fn root(mode: u32) -> Want {
        Want::root_group(0, mode)
    }

    fn root_group(gid: u32, mode: u32) -> Want {
        Want {
            uid: 0,
            gid,
            mode: Some(mode),
            take: Take::Always,
        }
    }

    fn person((uid, gid): (u32, u32), mode: Option<u32>) -> Want {
        Want {
            uid,
            gid,
            mode,
            take: Take::FromRoot,
        }
    }
}

pub(crate) struct Layout<'a> {
    pub(crate) site: &'a Site,
    pub(crate) root: &'a Dir,
    /// The data folder, resolved: paths in messages are shown beneath it.
    pub(crate) data: &'a Path,
    pub(crate) report: &'a mut HostReport,
}

impl Layout<'_> {
    /// The site's own folders: the root, `.ferry/` (handed to the service), the shared
    /// folders and one folder per circle.
    pub(crate) fn apply_site(
        &mut self,
        service: (u32, u32),
        shared: u32,
        circles: &[(String, u32)],
    ) -> Result<(), HostError> {
        self.fix_dir(self.root, ".", Want::root(0o755))?;
        let service_dir = Want {
            uid: service.0,
            gid: service.1,
            mode: Some(0o700),
            take: Take::Always,
        };
        let dot_ferry = self.ensure(layout::SERVICE_DIR, service_dir)?;
        self.hand_to_service(&dot_ferry, layout::SERVICE_DIR, service)?;

        for (rel, want) in [
            (layout::HOME_DIR, Want::root(0o755)),
            (layout::PRIVATE_DIR, Want::root(0o755)),
            (layout::PEOPLE_DIR, Want::root(0o755)),
            (layout::TRASH_DIR, Want::root(0o755)),
            (layout::HERD_KEYS_DIR, Want::root(0o755)),
            (layout::CIRCLES_DIR, Want::root(0o755)),
            (layout::SHARED_DIR, Want::root(0o755)),
            (layout::SHARED_PUBLIC_DIR, Want::root_group(shared, 0o2775)),
            (layout::SHARED_CACHE_DIR, Want::root(0o755)),
            (
                layout::DEPENDENCY_CACHE_DIR,
                Want::root_group(shared, 0o2775),
            ),
            (layout::SKILLS_DIR, Want::root(0o755)),
        ] {
            self.ensure(rel, want)?;
        }
        for (circle, gid) in circles {
            self.ensure(&layout::circle(circle), Want::root_group(*gid, 0o2770))?;
        }
        Ok(())
    }

    /// A person's workspace, private folders and the `public/` of the workspace and of
    /// each of `projects`. Every failure names the place it happened.
    pub(crate) fn person(
        &mut self,
        person: &str,
        projects: &[String],
        ids: (u32, u32),
    ) -> Result<(), HostError> {
        // The shipped documents and folders first (as root: made root's, handed over below).
        // A memory/ the person replaced is named, not a reason to stop for everyone.
        match self.site.provision_person(person) {
            Ok(()) => {}
            Err(SiteError::Unsafe { path, why }) => self
                .report
                .note(format!("skipped the documents of {path}: it {why}")),
            Err(e) => return Err(self.failed_at(&layout::home(person), e.into())),
        }
        for project in std::iter::once(None).chain(projects.iter().map(|p| Some(p.as_str()))) {
            let workspace = self.site.workspace(person, project)?;
            if let Err(e) = workspace.public() {
                let public = layout::public_of(&workspace.container_rel());
                return Err(self.failed_at(&public, e.into()));
            }
        }

        let home = layout::home(person);
        self.ensure(&home, Want::person(ids, Some(0o700)))?;
        self.ensure(&layout::private(person), Want::person(ids, Some(0o700)))?;
        // The person's own herd process keeps its workers' keys here (spec H-WHERE).
        self.ensure(&layout::herd_keys(person), Want::person(ids, Some(0o700)))?;
        // The person's worker moves deleted entries in and out of it (M-DAILY).
        self.ensure(&layout::trash(person), Want::person(ids, Some(0o700)))?;
        for sub in [layout::TMP_DIR, layout::ARTIFACTS_DIR] {
            let dir = layout::private_sub(person, sub);
            self.ensure(&dir, Want::person(ids, Some(0o700)))?;
        }
        let mut publics = vec![home];
        if !projects.is_empty() {
            self.ensure(&layout::projects(person), Want::person(ids, None))?;
        }
        for project in projects {
            let dir = layout::project(person, project);
            self.ensure(&dir, Want::person(ids, None))?;
            publics.push(dir);
        }
        for container in publics {
            let public = layout::public_of(&container);
            self.ensure(&public, Want::person(ids, None))?;
            let attachments = layout::attachments_of(&container);
            // Something else at attachments/ is left as it is, as the workspace does.
            match self.root.open_dir(&attachments, Follow::Never) {
                Ok(dir) => self.fix_dir(&dir, &attachments, Want::person(ids, None))?,
                Err(FsError::NotFound | FsError::PathEscapes | FsError::NotADirectory) => {}
                Err(e) => return Err(self.failed_at(&attachments, e.into())),
            }
        }
        Ok(())
    }

    /// `error`, said of the place `rel` of the site (shown beneath the data folder).
    fn failed_at(&self, rel: &str, error: HostError) -> HostError {
        match error {
            // Already names its place.
            HostError::Folder { .. } | HostError::Conflict(_) => error,
            error => HostError::Folder {
                path: self.data.join(rel),
                why: error.to_string(),
            },
        }
    }

    /// Opens `rel` beneath the site (making it if missing) and sets its owner and mode.
    fn ensure(&mut self, rel: &str, want: Want) -> Result<Dir, HostError> {
        let dir = match self.root.open_dir(rel, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => {
                match self.root.create_dir(rel, want.mode.unwrap_or(0o700)) {
                    Ok(()) | Err(FsError::Exists) => {}
                    Err(e) => return Err(self.failed_at(rel, e.into())),
                }
                self.report.note(format!("created {rel}/"));
                self.root
                    .open_dir(rel, Follow::Never)
                    .map_err(|e| self.failed_at(rel, e.into()))?
            }
            Err(e) => {
                return Err(HostError::Folder {
                    path: self.data.join(rel),
                    why: format!("must be a folder ({e}); links are never followed"),
                });
            }
        };
        self.fix_dir(&dir, rel, want)?;
        Ok(dir)
    }

    fn fix_dir(&mut self, dir: &Dir, rel: &str, want: Want) -> Result<(), HostError> {
        let stat = rustix::fs::fstat(dir).map_err(|e| fs_error(rel, e))?;
        let (uid, gid) = (stat.st_uid, stat.st_gid);
        if (uid, gid) != (want.uid, want.gid) {
            if want.take == Take::FromRoot && uid != 0 && uid != want.uid {
                return Err(HostError::Folder {
                    path: self.data.join(rel),
                    why: format!(
                        "is owned by uid {uid}, expected uid {} (or root, to hand it over); \
                         fix it by hand",
                        want.uid
                    ),
                });
            }
            dir.chown(want.uid, want.gid)
                .map_err(|e| self.failed_at(rel, e.into()))?;
            self.report.note(format!(
                "owner of {rel}: {uid}:{gid} -> {}:{}",
                want.uid, want.gid
            ));
        }
        if let Some(mode) = want.mode {
            let current = stat.st_mode & 0o7777;
            // chown may have cleared the setgid bit: always compare and set after it.
            let now = rustix::fs::fstat(dir)
                .map_err(|e| fs_error(rel, e))?
                .st_mode
                & 0o7777;
            if now != mode {
                rustix::fs::fchmod(dir, Mode::from_raw_mode(mode)).map_err(|e| fs_error(rel, e))?;
                self.report
                    .note(format!("mode of {rel}: {current:04o} -> {mode:04o}"));
            }
        }
        Ok(())
    }

    /// Hands everything under `.ferry/` that root made (the database, the media store) to
    /// the service. Only root's own entries move, links are never followed, and a file
    /// with more than one link is left alone, so a link planted there cannot make the
    /// service the owner of a file elsewhere.
    fn hand_to_service(
        &mut self,
        dir: &Dir,
        rel: &str,
        service: (u32, u32),
    ) -> Result<(), HostError> {
        for entry in dir.entries()? {
            let path = format!("{rel}/{}", entry.name);
            match entry.meta.kind {
                EntryKind::Dir => {
                    let child = match dir.open_dir(&entry.name, Follow::Never) {
                        Ok(child) => child,
                        Err(FsError::NotFound) => continue,
                        Err(e) => return Err(e.into()),
                    };
                    let stat = rustix::fs::fstat(&child).map_err(|e| fs_error(&path, e))?;
                    if stat.st_uid == 0 {
                        child.chown(service.0, service.1)?;
                        self.report.note(format!("owner of {path}: the service"));
                    }
                    self.hand_to_service(&child, &path, service)?;
                }
                EntryKind::File => self.hand_file_to_service(dir, &entry.name, &path, service)?,
                EntryKind::Symlink | EntryKind::Other => {}
            }
        }
        Ok(())
    }

    fn hand_file_to_service(
        &mut self,
        dir: &Dir,
        name: &str,
        path: &str,
        service: (u32, u32),
    ) -> Result<(), HostError> {
        // O_PATH pins the inode that is checked and changed: no swap in between.
        let fd: OwnedFd = match rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(()),
            Err(e) => return Err(fs_error(path, e)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| fs_error(path, e))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
            || stat.st_uid != 0
            || stat.st_nlink != 1
        {
            return Ok(());
        }
        rustix::fs::chownat(
            &fd,
            "",
            Some(rustix::fs::Uid::from_raw(service.0)),
            Some(rustix::fs::Gid::from_raw(service.1)),
            AtFlags::EMPTY_PATH,
        )
        .map_err(|e| fs_error(path, e))?;
        self.report.note(format!("owner of {path}: the service"));
        Ok(())
    }
}
