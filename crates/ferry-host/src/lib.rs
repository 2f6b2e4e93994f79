//! Host mode's provisioning (spec tools T-ID, core C-SITE): every person is the POSIX user
//! `fy_person_<id>`, every circle the group `fy_circle_<id>`, everyone is in `fy_shared`,
//! and the service runs as the user `ferry`.
//!
//! [`init_host`] (run as root by `ferry site init --mode host`) creates what is missing,
//! sets the owners and modes of the site's layout, and installs `ferry-posix-helper`
//! `root:ferry 4750`. [`reconcile_host`] is the same without the helper, for `ferry person
//! add` and `ferry circle add`. Both are idempotent: a second run adds what is missing and
//! fixes owners and modes, and never removes a user, a group, a member or a person's file.

mod accounts;
mod error;
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
use helper::{check_helper_path, install_helper, read_helper};
use owners::Layout;

/// What a run changed, one line per change, in order; empty when all was in place.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostReport {
    /// One sentence per change.
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
        let home = data.join(layout::home(person));
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
