//! Host mode (spec tools T-ID, core C-SITE): every person is the POSIX user
//! `fy_person_<id>`, every circle the group `fy_circle_<id>`, everyone is in `fy_shared`,
//! and the service runs as the user `ferry`.
//!
//! [`init_host`] (run as root by `ferry site init --mode host`) creates what is missing,
//! sets the owners and modes of the site's layout, and installs `ferry-posix-helper`
//! `root:ferry 4750`. [`reconcile_host`] is the same without the helper, for `ferry person
//! add` and `ferry circle add`. Both are idempotent: a second run adds what is missing and
//! fixes owners and modes, and never removes a user, a group, a member or a person's file.
//!
//! Accounts are made with the shadow tools (`groupadd`, `useradd`, `usermod`) and read
//! back through the user and group databases (`getpwnam_r`, `getgrnam_r`,
//! `getgrouplist`). Every folder is opened beneath the site's handle without following a
//! link, and changed through its descriptor.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use ferry_fs::{Dir, EntryKind, Follow, FsError};
use nix::unistd::{Gid, Group, Uid, User};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::config::Config;
use crate::{Site, SiteError};

/// The service user (and its group): owns `.ferry/`, may call the helper.
pub const SERVICE_USER: &str = "ferry";
/// The group every person is in; owns `shared/public` and `shared/cache/dependencies`.
pub const SHARED_GROUP: &str = "fy_shared";
/// Person `<id>` is the user `fy_person_<id>`, with a primary group of the same name.
pub const PERSON_PREFIX: &str = "fy_person_";
/// Circle `<id>` is the group `fy_circle_<id>`.
pub const CIRCLE_PREFIX: &str = "fy_circle_";
/// The first uid and gid host mode hands out; persons' ids are never below it.
pub const HOST_ID_MIN: u32 = 100_000;
/// Where the helper is installed unless `[site] helper_path` says otherwise.
pub const DEFAULT_HELPER_PATH: &str = "/usr/local/lib/ferry/ferry-posix-helper";
/// The helper's file name, also beside the `ferry` binary it ships with.
pub const HELPER_NAME: &str = "ferry-posix-helper";
/// The installed helper's mode: setuid root, run by root and the service group only.
pub const HELPER_MODE: u32 = 0o4750;
/// A person's login shell.
const PERSON_SHELL: &str = "/bin/bash";
/// Where the shadow tools are looked for (root's PATH may lack the sbin folders).
const TOOL_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The POSIX user of a person.
pub fn person_user(person: &str) -> String {
    format!("{PERSON_PREFIX}{person}")
}

/// The POSIX group of a circle.
pub fn circle_group(circle: &str) -> String {
    format!("{CIRCLE_PREFIX}{circle}")
}

/// The helper's installed path: `[site] helper_path`, else [`DEFAULT_HELPER_PATH`].
pub fn helper_path(config: &Config) -> PathBuf {
    config
        .site
        .helper_path
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_HELPER_PATH))
}

/// The helper shipped beside the running program (`ferry` and `ferry-posix-helper` are
/// built and packaged together).
pub fn default_helper_source() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or_else(|| std::io::Error::other(format!("{} has no parent folder", exe.display())))?;
    Ok(dir.join(HELPER_NAME))
}

/// Why host mode could not be set up; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("host mode creates users and changes owners and must run as root (effective uid {0})")]
    NotRoot(u32),
    #[error(
        "`{0}` is needed to manage host-mode users and groups but was not found in {dirs}: install the `passwd` package",
        dirs = TOOL_DIRS.join(", ")
    )]
    ToolMissing(&'static str),
    #[error("`{command}` failed ({status}): {stderr}")]
    Tool {
        command: String,
        status: String,
        stderr: String,
    },
    /// Something exists that host mode would have to take over or break; fix it by hand.
    #[error("{0}")]
    Conflict(String),
    #[error("the user and group database: {0}")]
    Accounts(#[from] nix::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Site(#[from] SiteError),
}

impl From<FsError> for HostError {
    fn from(e: FsError) -> Self {
        HostError::Site(e.into())
    }
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostError {
    let context = context.into();
    move |source| HostError::Io { context, source }
}

/// What a run changed, one line per change, in order; empty when all was in place.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostReport {
    pub changes: Vec<String>,
}

impl HostReport {
    fn note(&mut self, change: String) {
        self.changes.push(change);
    }
}

/// `ferry site init --mode host`: [`reconcile_host`], then installs the helper from
/// `helper_source` at `helper_path` (`root:ferry 4750`).
pub fn init_host(
    site: &Site,
    helper_source: &Path,
    helper_path: &Path,
) -> Result<HostReport, HostError> {
    require_root()?;
    check_helper_path(helper_path)?;
    // Read first: a missing helper stops the run before any account is made.
    let helper = read_helper(helper_source)?;
    let mut report = reconcile_host(site)?;
    let service = service_ids()?;
    install_helper(helper_source, &helper, helper_path, service.1, &mut report)?;
    Ok(report)
}

/// Creates the service user, `fy_shared`, a group per circle and a user per person (with
/// their circles), then sets the owners and modes of the layout (core C-SITE). As root.
pub fn reconcile_host(site: &Site) -> Result<HostReport, HostError> {
    require_root()?;
    let mut report = HostReport::default();
    let service = ensure_service_user(&mut report)?;
    let shared = ensure_group(SHARED_GROUP, &mut report)?;

    let circles = site.circles()?;
    let mut circle_gids = Vec::with_capacity(circles.len());
    for circle in &circles {
        circle_gids.push((
            circle.id.clone(),
            ensure_group(&circle_group(&circle.id), &mut report)?,
        ));
    }

    let data = std::fs::canonicalize(site.path())
        .map_err(io_error(format!("resolving {}", site.path().display())))?;
    let persons = site.persons()?;
    let mut person_ids = Vec::with_capacity(persons.len());
    for person in &persons {
        let mut groups = vec![SHARED_GROUP.to_owned()];
        groups.extend(site.circles_of(person)?.iter().map(|c| circle_group(c)));
        let home = data.join("home").join(person);
        person_ids.push(ensure_person(person, &home, &groups, &mut report)?);
    }

    let layout = Layout {
        site,
        root: site.root(),
        report: &mut report,
    };
    layout.apply(service, shared, &circle_gids, &persons, &person_ids)?;
    Ok(report)
}

fn require_root() -> Result<(), HostError> {
    let euid = rustix::process::geteuid();
    if euid.is_root() {
        Ok(())
    } else {
        Err(HostError::NotRoot(euid.as_raw()))
    }
}

// ---- accounts ----------------------------------------------------------------------

/// The service user's uid and the service group's gid, which must exist.
fn service_ids() -> Result<(u32, u32), HostError> {
    let user = User::from_name(SERVICE_USER)?
        .ok_or_else(|| HostError::Conflict(format!("there is no user {SERVICE_USER:?} yet")))?;
    let group = Group::from_name(SERVICE_USER)?
        .ok_or_else(|| HostError::Conflict(format!("there is no group {SERVICE_USER:?} yet")))?;
    Ok((user.uid.as_raw(), group.gid.as_raw()))
}

/// The system user `ferry` in the group `ferry`, without a login shell.
fn ensure_service_user(report: &mut HostReport) -> Result<(u32, u32), HostError> {
    let gid = match Group::from_name(SERVICE_USER)? {
        Some(group) => group.gid,
        None => {
            run_tool("groupadd", &["--system", SERVICE_USER])?;
            report.note(format!("created the system group {SERVICE_USER}"));
            lookup_group(SERVICE_USER)?
        }
    };
    let user = match User::from_name(SERVICE_USER)? {
        Some(user) => user,
        None => {
            let gid_arg = gid.to_string();
            run_tool(
                "useradd",
                &[
                    "--system",
                    "--gid",
                    &gid_arg,
                    "--home-dir",
                    "/nonexistent",
                    "--no-create-home",
                    "--shell",
                    nologin_shell(),
                    "--comment",
                    "ferry service",
                    SERVICE_USER,
                ],
            )?;
            report.note(format!("created the system user {SERVICE_USER}"));
            lookup_user(SERVICE_USER)?
        }
    };
    if user.uid.is_root() {
        return Err(HostError::Conflict(format!(
            "the user {SERVICE_USER:?} has uid 0; the service must not be root"
        )));
    }
    if !group_list(&user)?.contains(&gid.as_raw()) {
        run_tool(
            "usermod",
            &["--append", "--groups", SERVICE_USER, SERVICE_USER],
        )?;
        report.note(format!("added {SERVICE_USER} to the group {SERVICE_USER}"));
    }
    Ok((user.uid.as_raw(), gid.as_raw()))
}

fn nologin_shell() -> &'static str {
    ["/usr/sbin/nologin", "/sbin/nologin"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/bin/false")
}

/// A group with a gid of [`HOST_ID_MIN`] or above, made if missing.
fn ensure_group(name: &str, report: &mut HostReport) -> Result<u32, HostError> {
    if let Some(group) = Group::from_name(name)? {
        return Ok(group.gid.as_raw());
    }
    let gid = free_id(false)?;
    run_tool("groupadd", &["--gid", &gid.to_string(), name])?;
    report.note(format!("created the group {name} (gid {gid})"));
    Ok(lookup_group(name)?.as_raw())
}

/// The person's user (uid = gid of its own group, both from [`HOST_ID_MIN`]), with `home`
/// as its home and at least `groups` as supplementary groups. Returns (uid, gid).
fn ensure_person(
    person: &str,
    home: &Path,
    groups: &[String],
    report: &mut HostReport,
) -> Result<(u32, u32), HostError> {
    let name = person_user(person);
    let home_arg = home
        .to_str()
        .ok_or_else(|| HostError::Conflict(format!("{} is not UTF-8", home.display())))?;
    let user = match User::from_name(&name)? {
        Some(user) => user,
        None => {
            let gid = match Group::from_name(&name)? {
                Some(group) => group.gid.as_raw(),
                None => {
                    let id = free_id(true)?;
                    run_tool("groupadd", &["--gid", &id.to_string(), &name])?;
                    report.note(format!("created the group {name} (gid {id})"));
                    id
                }
            };
            let uid = if User::from_uid(Uid::from_raw(gid))?.is_none() && gid >= HOST_ID_MIN {
                gid
            } else {
                free_id(true)?
            };
            run_tool(
                "useradd",
                &[
                    "--no-log-init",
                    "--uid",
                    &uid.to_string(),
                    "--gid",
                    &gid.to_string(),
                    "--groups",
                    &groups.join(","),
                    "--home-dir",
                    home_arg,
                    "--no-create-home",
                    "--shell",
                    PERSON_SHELL,
                    "--comment",
                    &format!("ferry person {person}"),
                    &name,
                ],
            )?;
            report.note(format!("created the user {name} (uid {uid}, gid {gid})"));
            lookup_user(&name)?
        }
    };
    let (uid, gid) = (user.uid.as_raw(), user.gid.as_raw());
    if uid < HOST_ID_MIN || gid < HOST_ID_MIN {
        return Err(HostError::Conflict(format!(
            "the user {name} exists with uid {uid} and gid {gid}; a person's ids must be \
             {HOST_ID_MIN} or above (remove or renumber that user)"
        )));
    }
    match Group::from_gid(user.gid)? {
        Some(group) if group.name == name => {}
        other => {
            return Err(HostError::Conflict(format!(
                "the user {name} has primary group {}, not {name}",
                other.map_or_else(|| gid.to_string(), |g| g.name)
            )));
        }
    }
    if user.dir != home {
        run_tool("usermod", &["--home", home_arg, &name])?;
        report.note(format!(
            "set the home of {name} to {} (was {})",
            home.display(),
            user.dir.display()
        ));
    }
    let have = group_list(&user)?;
    let mut missing = Vec::new();
    for group in groups {
        if !have.contains(&lookup_group(group)?.as_raw()) {
            missing.push(group.as_str());
        }
    }
    if !missing.is_empty() {
        let list = missing.join(",");
        run_tool("usermod", &["--append", "--groups", &list, &name])?;
        report.note(format!("added {name} to {list}"));
    }
    Ok((uid, gid))
}

/// The lowest id from [`HOST_ID_MIN`] that no group uses (and, for a person, no user).
fn free_id(also_uid: bool) -> Result<u32, HostError> {
    for id in HOST_ID_MIN..u32::MAX {
        if Group::from_gid(Gid::from_raw(id))?.is_some() {
            continue;
        }
        if also_uid && User::from_uid(Uid::from_raw(id))?.is_some() {
            continue;
        }
        return Ok(id);
    }
    Err(HostError::Conflict("no free id left".to_owned()))
}

fn lookup_user(name: &str) -> Result<User, HostError> {
    User::from_name(name)?.ok_or_else(|| {
        HostError::Conflict(format!(
            "the user {name} was created but cannot be looked up"
        ))
    })
}

fn lookup_group(name: &str) -> Result<Gid, HostError> {
    Ok(Group::from_name(name)?
        .ok_or_else(|| HostError::Conflict(format!("there is no group {name}")))?
        .gid)
}

/// Every group of `user`: its primary group and its supplementary groups.
fn group_list(user: &User) -> Result<BTreeSet<u32>, HostError> {
    let name = CString::new(user.name.as_bytes())
        .map_err(|_| HostError::Conflict(format!("user name {:?} has a NUL", user.name)))?;
    Ok(nix::unistd::getgrouplist(&name, user.gid)?
        .into_iter()
        .map(Gid::as_raw)
        .collect())
}

/// Runs one shadow tool by absolute path; a non-zero exit is an error with its stderr.
fn run_tool(tool: &'static str, args: &[&str]) -> Result<(), HostError> {
    let path = TOOL_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|p| p.is_file())
        .ok_or(HostError::ToolMissing(tool))?;
    let command = format!("{tool} {}", args.join(" "));
    let output = Command::new(&path)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .map_err(io_error(format!("running {}", path.display())))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(HostError::Tool {
            command,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

// ---- layout --------------------------------------------------------------------------

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

struct Layout<'a> {
    site: &'a Site,
    root: &'a Dir,
    report: &'a mut HostReport,
}

impl Layout<'_> {
    fn apply(
        mut self,
        service: (u32, u32),
        shared: u32,
        circles: &[(String, u32)],
        persons: &[String],
        person_ids: &[(u32, u32)],
    ) -> Result<(), HostError> {
        self.fix_dir(self.root, ".", Want::root(0o755))?;
        let service_dir = Want {
            uid: service.0,
            gid: service.1,
            mode: Some(0o700),
            take: Take::Always,
        };
        let dot_ferry = self.ensure(crate::SERVICE_DIR, service_dir)?;
        self.hand_to_service(&dot_ferry, crate::SERVICE_DIR, service)?;

        for (rel, want) in [
            ("home", Want::root(0o755)),
            ("private", Want::root(0o755)),
            ("private/people", Want::root(0o755)),
            ("circles", Want::root(0o755)),
            ("shared", Want::root(0o755)),
            ("shared/public", Want::root_group(shared, 0o2775)),
            ("shared/cache", Want::root(0o755)),
            (
                "shared/cache/dependencies",
                Want::root_group(shared, 0o2775),
            ),
            ("skills", Want::root(0o755)),
        ] {
            self.ensure(rel, want)?;
        }
        for (circle, gid) in circles {
            self.ensure(&format!("circles/{circle}"), Want::root_group(*gid, 0o2770))?;
        }
        for (person, ids) in persons.iter().zip(person_ids) {
            self.person(person, *ids)?;
        }
        Ok(())
    }

    /// A person's workspace, private folders and every `public/` they have.
    fn person(&mut self, person: &str, ids: (u32, u32)) -> Result<(), HostError> {
        // The shipped documents and folders first (as root: made root's, handed over below).
        // A memory/ the person replaced is named, not a reason to stop for everyone.
        match self.site.provision_person(person) {
            Ok(()) => {}
            Err(SiteError::Unsafe { path, why }) => self
                .report
                .note(format!("skipped the documents of {path}: it {why}")),
            Err(e) => return Err(e.into()),
        }
        self.site.workspace(person, None)?.public()?;
        let projects = self.site.projects(person)?;
        for project in &projects {
            self.site.workspace(person, Some(&project.id))?.public()?;
        }

        let home = format!("home/{person}");
        self.ensure(&home, Want::person(ids, Some(0o700)))?;
        let private = format!("private/people/{person}");
        self.ensure(&private, Want::person(ids, Some(0o700)))?;
        for sub in ["tmp", "artifacts"] {
            self.ensure(&format!("{private}/{sub}"), Want::person(ids, Some(0o700)))?;
        }
        let mut publics = vec![home.clone()];
        if !projects.is_empty() {
            self.ensure(&format!("{home}/projects"), Want::person(ids, None))?;
        }
        for project in &projects {
            let dir = format!("{home}/projects/{}", project.id);
            self.ensure(&dir, Want::person(ids, None))?;
            publics.push(dir);
        }
        for container in publics {
            let public = format!("{container}/{}", crate::PUBLIC_DIR_NAME);
            self.ensure(&public, Want::person(ids, None))?;
            let attachments = format!("{public}/{}", crate::ATTACHMENTS_DIR_NAME);
            // Something else at attachments/ is left as it is, as the workspace does.
            match self.root.open_dir(&attachments, Follow::Never) {
                Ok(dir) => self.fix_dir(&dir, &attachments, Want::person(ids, None))?,
                Err(FsError::NotFound | FsError::PathEscapes | FsError::NotADirectory) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Opens `rel` beneath the site (making it if missing) and sets its owner and mode.
    fn ensure(&mut self, rel: &str, want: Want) -> Result<Dir, HostError> {
        let dir = match self.root.open_dir(rel, Follow::Never) {
            Ok(dir) => dir,
            Err(FsError::NotFound) => {
                match self.root.create_dir(rel, want.mode.unwrap_or(0o700)) {
                    Ok(()) | Err(FsError::Exists) => {}
                    Err(e) => return Err(e.into()),
                }
                self.report.note(format!("created {rel}/"));
                self.root.open_dir(rel, Follow::Never)?
            }
            Err(e) => {
                return Err(HostError::Conflict(format!(
                    "{rel} in the site must be a folder: {e}"
                )));
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
                return Err(HostError::Conflict(format!(
                    "{rel} is owned by uid {uid}, expected uid {} (or root, to hand it over); \
                     fix it by hand",
                    want.uid
                )));
            }
            dir.chown(want.uid, want.gid)?;
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

fn fs_error(rel: &str, e: rustix::io::Errno) -> HostError {
    HostError::Io {
        context: rel.to_owned(),
        source: e.into(),
    }
}

// ---- the helper ----------------------------------------------------------------------

/// Copies the helper to `target` as `root:<service gid> 4750`, replacing an older copy in
/// one rename. The folder holding it must be root's and writable by no one else.
fn install_helper(
    source: &Path,
    bytes: &[u8],
    target: &Path,
    service_gid: u32,
    report: &mut HostReport,
) -> Result<(), HostError> {
    check_helper_path(target)?;
    let folder = target.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(folder)
        .map_err(io_error(format!("creating {}", folder.display())))?;
    let meta = std::fs::metadata(folder).map_err(io_error(folder.display().to_string()))?;
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(HostError::Conflict(format!(
            "{} must be owned by root and writable by no one else to hold a setuid helper \
             (owner uid {}, mode {:04o})",
            folder.display(),
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }

    if let Ok(existing) = std::fs::symlink_metadata(target)
        && existing.is_file()
        && existing.uid() == 0
        && existing.gid() == service_gid
        && existing.mode() & 0o7777 == HELPER_MODE
        && std::fs::read(target).is_ok_and(|current| current == bytes)
    {
        return Ok(());
    }

    let temp = folder.join(format!(".{HELPER_NAME}.ferry-tmp-{}", std::process::id()));
    let written = write_helper(&temp, bytes, service_gid).and_then(|()| {
        std::fs::rename(&temp, target).map_err(io_error(format!(
            "moving the helper into place at {}",
            target.display()
        )))
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    report.note(format!(
        "installed {} from {} (root:{SERVICE_USER} {HELPER_MODE:04o})",
        target.display(),
        source.display()
    ));
    Ok(())
}

fn check_helper_path(target: &Path) -> Result<(), HostError> {
    if target.is_absolute() && target.file_name().is_some() {
        Ok(())
    } else {
        Err(HostError::Conflict(format!(
            "the helper path {} must be an absolute file path (site.helper_path)",
            target.display()
        )))
    }
}

fn read_helper(source: &Path) -> Result<Vec<u8>, HostError> {
    let context = || {
        format!(
            "reading the helper {} (build it with `cargo build -p ferry-posix-helper`, \
             or name it with --helper-source)",
            source.display()
        )
    };
    let mut file = std::fs::File::open(source).map_err(io_error(context()))?;
    let meta = file.metadata().map_err(io_error(context()))?;
    if !meta.is_file() || meta.len() == 0 {
        return Err(HostError::Conflict(format!(
            "{} is not a helper binary",
            source.display()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).map_err(io_error(context()))?;
    Ok(bytes)
}

fn write_helper(temp: &Path, bytes: &[u8], service_gid: u32) -> Result<(), HostError> {
    let context = || format!("writing {}", temp.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(temp)
        .map_err(io_error(context()))?;
    file.write_all(bytes).map_err(io_error(context()))?;
    // Owner before mode: a chown clears the setuid bit.
    rustix::fs::fchown(
        file.as_fd(),
        Some(rustix::fs::Uid::from_raw(0)),
        Some(rustix::fs::Gid::from_raw(service_gid)),
    )
    .map_err(|e| fs_error(&temp.display().to_string(), e))?;
    rustix::fs::fchmod(file.as_fd(), Mode::from_raw_mode(HELPER_MODE))
        .map_err(|e| fs_error(&temp.display().to_string(), e))?;
    file.sync_all().map_err(io_error(context()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        assert_eq!(person_user("ann"), "fy_person_ann");
        assert_eq!(circle_group("team"), "fy_circle_team");
        let mut config = Config::default();
        assert_eq!(helper_path(&config), Path::new(DEFAULT_HELPER_PATH));
        config.site.helper_path = Some("/opt/ferry/helper".into());
        assert_eq!(helper_path(&config), Path::new("/opt/ferry/helper"));
        assert!(
            default_helper_source()
                .unwrap()
                .ends_with("ferry-posix-helper")
        );
    }

    #[test]
    fn a_relative_helper_path_is_refused() {
        for bad in ["lib/helper", "", "/"] {
            let err = check_helper_path(Path::new(bad)).unwrap_err();
            assert!(err.to_string().contains("absolute"), "{bad:?}: {err}");
        }
        check_helper_path(Path::new(DEFAULT_HELPER_PATH)).unwrap();
    }

    #[test]
    fn a_missing_or_empty_helper_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_helper(&dir.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("--helper-source"), "{err}");
        std::fs::write(dir.path().join("empty"), "").unwrap();
        let err = read_helper(&dir.path().join("empty")).unwrap_err();
        assert!(err.to_string().contains("not a helper"), "{err}");
        let err = read_helper(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not a helper"), "{err}");
    }
}
