//! The site's layout (spec core C-SITE), spelled once.
//!
//! Every path here is relative to the site's data folder (or, where said, to a
//! container: `home/<p>` or `home/<p>/projects/<proj>`), so it can be opened beneath the
//! site's handle one component at a time. Callers that need an absolute path join it to
//! the data folder. No other module spells these names; a test greps the sources for
//! stray spellings.
//!
//! Ids passed in must already be checked (`check_id`): these functions only spell.

/// Where the metadata, media and logs live; the service's own, never a person's.
pub const SERVICE_DIR: &str = ".ferry";
/// Where host mode stages picked files before the person's worker places them, under
/// [`SERVICE_DIR`].
pub const PICK_STAGING_DIR: &str = ".ferry/picks";
/// The media store, under [`SERVICE_DIR`].
pub const MEDIA_DIR: &str = ".ferry/media";
/// The journals of changes of several files while they are placed (ferry-exec's
/// `Journal`), under [`SERVICE_DIR`]; made when first needed.
pub const CHANGES_DIR: &str = ".ferry/changes";
/// The folder holding every person's workspace.
pub const HOME_DIR: &str = "home";
/// The folder above the persons' private folders.
pub const PRIVATE_DIR: &str = "private";
/// The folder holding every person's private folder.
pub const PEOPLE_DIR: &str = "private/people";
/// The folder holding each person's trash (`<person>/`, spec M-DAILY): beside the
/// private folders rather than under [`SERVICE_DIR`], because in host mode the person's
/// own worker moves entries in and out of it (a rename, so on the file system of the
/// workspaces), and the service's folder is closed to people; outside every tree the
/// agent's tools are shown.
pub const TRASH_DIR: &str = "private/trash";
/// The folder holding each person's herd keys (`<person>/`): outside every tree a
/// person's tools and commands are shown, so a sandboxed worker cannot read them, yet in
/// host mode the person's own herd process can.
pub const HERD_KEYS_DIR: &str = "private/herd-keys";
/// The folder holding every circle's shared folder.
pub const CIRCLES_DIR: &str = "circles";
/// The folder above the site-wide shared folders.
pub const SHARED_DIR: &str = "shared";
/// Safe for outsiders; every person may write.
pub const SHARED_PUBLIC_DIR: &str = "shared/public";
/// The folder above the shared caches.
pub const SHARED_CACHE_DIR: &str = "shared/cache";
/// Package caches only.
pub const DEPENDENCY_CACHE_DIR: &str = "shared/cache/dependencies";
/// The site's bundled skills, `skills/<skill>/SKILL.md`.
pub const SKILLS_DIR: &str = "skills";

/// In a person's home: the documents provisioned for its agent.
pub const MEMORY_DIR: &str = "memory";
/// In a person's home: the folder holding their projects.
pub const PROJECTS_DIR: &str = "projects";
/// In a container: the member-visible folder.
pub const PUBLIC_DIR_NAME: &str = "public";
/// In `public/`: the folder the system manages, where the agent delivers.
pub const ATTACHMENTS_DIR_NAME: &str = "attachments";
/// In a container: `public/attachments`, as agents and members see it.
pub const ATTACHMENTS_PATH: &str = "public/attachments";
/// In a container: the old name of `public/`, referred to by the migration only (M-MIGRATE).
pub const LEGACY_PUBLIC_DIR_NAME: &str = "uploads";

/// In a person's private folder: drafts and build intermediates (ephemeral).
pub const TMP_DIR: &str = "tmp";
/// In a person's private folder: finished personal output (durable).
pub const ARTIFACTS_DIR: &str = "artifacts";
/// In a person's private folder: saved command output (`fullOutputPath`).
pub const TERMINAL_OUTPUT_DIR: &str = "tmp/terminal-output";
/// In a person's private folder: picked files, `<pick id>/<name>`.
pub const PICKS_DIR: &str = "tmp/picks";

/// The folders every site has, parents before children.
pub const SITE_DIRS: [&str; 13] = [
    SERVICE_DIR,
    MEDIA_DIR,
    HOME_DIR,
    PRIVATE_DIR,
    PEOPLE_DIR,
    TRASH_DIR,
    HERD_KEYS_DIR,
    CIRCLES_DIR,
    SHARED_DIR,
    SHARED_PUBLIC_DIR,
    SHARED_CACHE_DIR,
    DEPENDENCY_CACHE_DIR,
    SKILLS_DIR,
];

/// `home/<person>`: the person's workspace, the agent's working folder and `$HOME`.
pub fn home(person: &str) -> String {
    format!("{HOME_DIR}/{person}")
}

/// `home/<person>/projects`: the folder of the person's projects.
pub fn projects(person: &str) -> String {
    format!("{HOME_DIR}/{person}/{PROJECTS_DIR}")
}

/// `home/<person>/projects/<project>`: one project's container.
pub fn project(person: &str, project: &str) -> String {
    format!("{HOME_DIR}/{person}/{PROJECTS_DIR}/{project}")
}

/// The container of a workspace: the person's home, or one of their projects.
pub fn container(person: &str, project: Option<&str>) -> String {
    match project {
        None => home(person),
        Some(id) => self::project(person, id),
    }
}

/// `<container>/public`.
pub fn public_of(container: &str) -> String {
    format!("{container}/{PUBLIC_DIR_NAME}")
}

/// `<container>/public/attachments`.
pub fn attachments_of(container: &str) -> String {
    format!("{container}/{ATTACHMENTS_PATH}")
}

/// `public/<rest>`: a path inside a container's `public/`, as members and agents name it.
pub fn in_public(rest: &str) -> String {
    format!("{PUBLIC_DIR_NAME}/{rest}")
}

/// `public/attachments/<name>`: a delivered file, as members and agents name it.
pub fn in_attachments(name: &str) -> String {
    format!("{ATTACHMENTS_PATH}/{name}")
}

/// `private/people/<person>`: the person's private folder.
pub fn private(person: &str) -> String {
    format!("{PEOPLE_DIR}/{person}")
}

/// `private/people/<person>/<sub>`, for `sub` one of [`TMP_DIR`], [`ARTIFACTS_DIR`],
/// [`TERMINAL_OUTPUT_DIR`], [`PICKS_DIR`].
pub fn private_sub(person: &str, sub: &str) -> String {
    format!("{PEOPLE_DIR}/{person}/{sub}")
}

/// `private/trash/<person>`: the person's trash, one entry per trashed file or folder,
/// named by its trash id.
pub fn trash(person: &str) -> String {
    format!("{TRASH_DIR}/{person}")
}

/// `private/herd-keys/<person>`: the keys of the person's herd's workers, 0700.
pub fn herd_keys(person: &str) -> String {
    format!("{HERD_KEYS_DIR}/{person}")
}

/// `private/people/<p>/herd`: the person's herd (spec handoffs.md H-WHERE), 0700.
pub const HERD_DIR: &str = "herd";
/// A project's coordination folder (H-COORD), and the start of its definitions' folder.
pub const COORDINATION_DIR: &str = ".ferry-herd";
/// Agent definitions beneath a project or a home: `.ferry-herd/agents/<name>.md`.
pub const AGENTS_OF_PROJECT: &str = ".ferry-herd/agents";
/// The site's bundled agent definitions (read-only): `agents/<name>.md`.
pub const SITE_AGENTS_DIR: &str = "agents";

/// `circles/<circle>`: a circle's shared folder.
pub fn circle(circle: &str) -> String {
    format!("{CIRCLES_DIR}/{circle}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_of_core_c_site() {
        assert_eq!(home("ann"), "home/ann");
        assert_eq!(public_of(&home("ann")), "home/ann/public");
        assert_eq!(attachments_of(&home("ann")), "home/ann/public/attachments");
        assert_eq!(projects("ann"), "home/ann/projects");
        assert_eq!(
            public_of(&container("ann", Some("q3"))),
            "home/ann/projects/q3/public"
        );
        assert_eq!(container("ann", None), "home/ann");
        assert_eq!(private("ann"), "private/people/ann");
        assert_eq!(private_sub("ann", TMP_DIR), "private/people/ann/tmp");
        assert_eq!(
            private_sub("ann", ARTIFACTS_DIR),
            "private/people/ann/artifacts"
        );
        assert_eq!(
            private_sub("ann", TERMINAL_OUTPUT_DIR),
            "private/people/ann/tmp/terminal-output"
        );
        assert_eq!(
            private_sub("ann", PICKS_DIR),
            "private/people/ann/tmp/picks"
        );
        assert_eq!(circle("team"), "circles/team");
        assert_eq!(trash("ann"), "private/trash/ann");
        assert_eq!(in_public("a/b.txt"), "public/a/b.txt");
        assert_eq!(in_attachments("r.pdf"), "public/attachments/r.pdf");
        assert_eq!(ATTACHMENTS_PATH, in_public(ATTACHMENTS_DIR_NAME));
    }

    #[test]
    fn every_site_folder_comes_after_its_parent() {
        for (i, dir) in SITE_DIRS.iter().enumerate() {
            if let Some((parent, _)) = dir.rsplit_once('/') {
                assert!(SITE_DIRS[..i].contains(&parent), "{dir} before {parent}");
            }
        }
    }
}
