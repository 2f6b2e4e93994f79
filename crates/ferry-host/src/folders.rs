//! Whether a person's folders are fit to be set up: each one ferry makes for them
//! (home, `public/`, projects, private folders) is a real folder or is still missing.
//!
//! The person owns these folders and may replace any of them at their shell, with a link
//! to `/etc` or to someone else's folder, say. Host provisioning runs as root, so such a
//! person is left out before anything of theirs is touched, and the operator is told the
//! exact place; nothing is ever changed through the link.

use std::path::Path;

use ferry_fs::{Dir, EntryKind, Follow, FsError};
use ferry_site::layout;

/// A place of a person's workspace that is there but is not a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Misplaced {
    /// Where it is, relative to the site.
    pub(crate) rel: String,
    /// What is there instead, as a phrase (`a symbolic link to "/etc"`).
    pub(crate) found: String,
}

/// The folders of `person` that provisioning makes or changes, parents first.
pub(crate) fn person_folders(person: &str, projects: &[String]) -> Vec<String> {
    let home = layout::home(person);
    let mut folders = vec![
        home.clone(),
        layout::public_of(&home),
        layout::private(person),
        layout::private_sub(person, layout::TMP_DIR),
        layout::private_sub(person, layout::ARTIFACTS_DIR),
    ];
    if !projects.is_empty() {
        folders.push(layout::projects(person));
    }
    for project in projects {
        let container = layout::project(person, project);
        let public = layout::public_of(&container);
        folders.extend([container, public]);
    }
    folders
}

/// The first of `folders` (relative to `root`, parents first) that exists but is not a
/// real folder; `Ok(None)` when each is a folder or missing.
pub(crate) fn first_misplaced(
    root: &Dir,
    folders: &[String],
) -> Result<Option<Misplaced>, FsError> {
    for rel in folders {
        let meta = match root.metadata(rel) {
            Ok(meta) => meta,
            // Missing: provisioning makes it. A missing parent was checked before it.
            Err(FsError::NotFound) => continue,
            Err(e) => return Err(e),
        };
        let found = match meta.kind {
            EntryKind::Dir => continue,
            EntryKind::Symlink => match link_target(root, rel) {
                Some(target) => format!("a symbolic link to {target:?}"),
                None => "a symbolic link".to_owned(),
            },
            EntryKind::File => "a file".to_owned(),
            EntryKind::Other => "a device, pipe or socket".to_owned(),
        };
        return Ok(Some(Misplaced {
            rel: rel.clone(),
            found,
        }));
    }
    Ok(None)
}

/// Where the link at `rel` points, read without following it (shown escaped, since the
/// person chose it).
fn link_target(root: &Dir, rel: &str) -> Option<String> {
    let (parent, name) = match rel.rsplit_once('/') {
        Some((parent, name)) => (root.open_dir(parent, Follow::Never).ok()?, name),
        None => (root.try_clone().ok()?, rel),
    };
    let target = rustix::fs::readlinkat(&parent, name, Vec::new()).ok()?;
    Some(target.to_string_lossy().into_owned())
}

impl Misplaced {
    /// What the operator reads: the person, the exact place, and what to do about it.
    pub(crate) fn explain(&self, person: &str, data: &Path) -> String {
        format!(
            "{path} is {found}, not a folder; ferry never follows or changes it, so nothing \
             of {person:?} was set up or changed. Put a real folder there (as root, move \
             the entry aside with `mv {path} {path}.moved` and move the files back that \
             belong in it), then run `ferry site init --mode host` again",
            path = data.join(&self.rel).display(),
            found = self.found,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site_with(person: &str) -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home").join(person);
        std::fs::create_dir_all(home.join("public")).unwrap();
        std::fs::create_dir_all(home.join("projects/p1")).unwrap();
        let root = Dir::open_ambient(tmp.path()).unwrap();
        (tmp, root)
    }

    #[test]
    fn real_and_missing_folders_pass() {
        let (_tmp, root) = site_with("ann");
        let folders = person_folders("ann", &["p1".to_owned(), "p2".to_owned()]);
        assert_eq!(first_misplaced(&root, &folders).unwrap(), None);
    }

    #[test]
    fn a_linked_public_is_named_with_its_target_and_never_entered() {
        let (tmp, root) = site_with("ann");
        let public = tmp.path().join("home/ann/public");
        std::fs::remove_dir(&public).unwrap();
        std::os::unix::fs::symlink("/etc", &public).unwrap();
        let got = first_misplaced(&root, &person_folders("ann", &[])).unwrap();
        assert_eq!(
            got,
            Some(Misplaced {
                rel: "home/ann/public".into(),
                found: "a symbolic link to \"/etc\"".into(),
            })
        );
        let said = got.unwrap().explain("ann", tmp.path());
        assert!(said.contains(&public.display().to_string()), "{said}");
        assert!(said.contains("ferry site init --mode host"), "{said}");
    }

    #[test]
    fn a_file_or_a_link_in_a_project_is_named() {
        let (tmp, root) = site_with("ann");
        let project = tmp.path().join("home/ann/projects/p1");
        std::fs::write(project.join("public"), b"not a folder").unwrap();
        let folders = person_folders("ann", &["p1".to_owned()]);
        let got = first_misplaced(&root, &folders).unwrap().unwrap();
        assert_eq!(
            (got.rel.as_str(), got.found.as_str()),
            ("home/ann/projects/p1/public", "a file")
        );
        // A link to a folder with a control character in its name is shown escaped.
        std::fs::remove_dir_all(&project).unwrap();
        std::os::unix::fs::symlink("/tmp/\x1b[2J", &project).unwrap();
        let got = first_misplaced(&root, &folders).unwrap().unwrap();
        assert_eq!(got.rel, "home/ann/projects/p1");
        assert!(!got.found.contains('\x1b'), "{:?}", got.found);
    }
}
