//! Host mode's provisioning (spec tools T-ID, core C-SITE): every person is the POSIX user
//! `fy_person_<id>`, every circle the group `fy_circle_<id>`, everyone is in `fy_shared`,
//! and the service runs as the user `ferry`.
//!
//! [`init_host`] (run as root by `ferry site init --mode host`) creates what is missing,
//! sets the owners and modes of the site's layout, and installs `ferry-posix-helper`
//! `root:ferry 4750`. [`reconcile_host`] is the same without the helper, for `ferry person
//! add` and `ferry circle add`. Both are idempotent: a second run adds what is missing and
//! fixes owners and modes, and never removes a user, a group, a member or a person's file.
//!
//! The site's own folders and accounts are set up first; a failure there stops the run.
//! People are then set up one at a time: a person whose folders are not as they must be
//! (a `public/` the person replaced with a link, say) or whose set-up fails is left out
//! and named in [`HostReport::skipped`], and everyone else is still set up.

mod accounts;
mod error;
mod folders;
mod helper;
mod names;
mod owners;

use std::path::Path;

use ferry_site::{Site, layout};

pub use error::HostError;
pub use helper::{HELPER_MODE, HELPER_NAME, default_helper_source};
pub use names::{
    CIRCLE_PREFIX, HOST_ID_MIN, PERSON_PREFIX, SERVICE_USER, SHARED_GROUP, circle_group,
    person_user,
};

use accounts::{ensure_group, ensure_person, ensure_service_user, service_ids};
use error::io_error;
use folders::{first_misplaced, person_folders};
use helper::{check_helper_path, install_helper, read_helper};
use owners::Layout;

/// What a run changed, one line per change, in order, and who it left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostReport {
    /// One sentence per change; empty when all was in place.
    pub changes: Vec<String>,
    /// The people not set up (or only partly), each with why and what to do.
    pub skipped: Vec<Skipped>,
}

/// A person the run could not set up; the others were set up all the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The person's id.
    pub person: String,
    /// Why, naming the exact place, and what the operator should do.
    pub why: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "person {} was not set up: {}", self.person, self.why)
    }
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
/// A person who cannot be set up is left out and named in [`HostReport::skipped`].
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
    let mut layout = Layout {
        site,
        root: site.root(),
        data: &data,
        report: &mut report,
    };
    layout.apply_site(service, shared, &circle_gids)?;
    for person in site.persons()? {
        if let Err(why) = reconcile_person(&mut layout, &person) {
            layout.report.skipped.push(Skipped { person, why });
        }
    }
    Ok(report)
}

/// One person: their folders checked before anything of theirs is touched, then their
/// user (with their circles) and the owners and modes of their folders. The error is the
/// sentence the operator reads.
fn reconcile_person(layout: &mut Layout, person: &str) -> Result<(), String> {
    let site = layout.site;
    let projects: Vec<String> = site
        .projects(person)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|p| p.id)
        .collect();
    let folders = person_folders(person, &projects);
    match first_misplaced(site.root(), &folders) {
        Ok(None) => {}
        Ok(Some(misplaced)) => return Err(misplaced.explain(person, layout.data)),
        Err(e) => return Err(format!("their folders could not be checked: {e}")),
    }
    let again = "; fix it, then run `ferry site init --mode host` again";
    let mut groups = vec![SHARED_GROUP.to_owned()];
    let circles = site.circles_of(person).map_err(|e| e.to_string())?;
    groups.extend(circles.iter().map(|c| circle_group(c)));
    let home = layout.data.join(layout::home(person));
    let ids =
        ensure_person(person, &home, &groups, layout.report).map_err(|e| format!("{e}{again}"))?;
    layout
        .person(person, &projects, ids)
        .map_err(|e| format!("{e}{again}"))
}

fn require_root() -> Result<(), HostError> {
    let euid = rustix::process::geteuid();
    if euid.is_root() {
        Ok(())
    } else {
        Err(HostError::NotRoot(euid.as_raw()))
    }
}
