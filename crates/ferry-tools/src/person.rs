//! Where one person's tools may reach, and the requester that acts as them.

use std::path::{Path, PathBuf};

use ferry_codes::Code;
use ferry_config::{Config, SandboxChoice, SiteMode};
use ferry_exec::ops::{Executor, RunSettings, SandboxKind};
use ferry_exec::worker::{Hello, WorkerPool, WorkerSpawn};
use ferry_exec::{Access, Requester, Scope, Tree};
use ferry_site::{Site, layout};

use crate::ToolError;

/// The absolute folders of one person (spec core C-SITE).
#[derive(Clone, Debug)]
pub struct PersonPaths {
    /// The person these folders belong to.
    pub person: String,
    /// The site's data folder, without symlinks.
    pub data: PathBuf,
    /// `home/<p>`: the workspace, `$HOME`, `~`.
    pub home: PathBuf,
    /// `private/people/<p>`.
    pub private: PathBuf,
    /// `private/people/<p>/tmp`: drafts.
    pub tmp: PathBuf,
    /// `private/people/<p>/artifacts`: finished output.
    pub artifacts: PathBuf,
    /// `shared/public`: the site-wide folder every person may write, safe for outsiders.
    pub shared_public: PathBuf,
    /// `skills`: the site's bundled skills, each in `<skill>/SKILL.md`.
    pub skills: PathBuf,
    /// Where `terminal_run` saves output over the visible cap.
    pub terminal_output: PathBuf,
}

impl PersonPaths {
    fn new(data: &Path, person: &str) -> PersonPaths {
        let private = data.join(layout::private(person));
        PersonPaths {
            person: person.to_owned(),
            data: data.to_path_buf(),
            home: data.join(layout::home(person)),
            tmp: private.join(layout::TMP_DIR),
            artifacts: private.join(layout::ARTIFACTS_DIR),
            terminal_output: private.join(layout::TERMINAL_OUTPUT_DIR),
            private,
            shared_public: data.join(layout::SHARED_PUBLIC_DIR),
            skills: data.join(layout::SKILLS_DIR),
        }
    }

    /// `abs` as the person knows it (relative to their home, else to the site); a path
    /// outside the site (host mode only) as it is.
    pub fn relative(&self, abs: &str) -> String {
        ferry_site::person_relative(&self.data, &self.person, Path::new(abs))
            .unwrap_or_else(|| abs.to_owned())
    }

    /// The folder a delivery lands in: the workspace's (or a project's) `public/attachments`.
    pub fn attachments(&self, project: Option<&str>) -> PathBuf {
        let container = layout::container(&self.person, project);
        self.data.join(layout::attachments_of(&container))
    }
}

/// How to start the person's worker in host mode: this program, with these arguments,
/// serves operations on its stdin.
#[derive(Clone, Debug)]
pub struct WorkerProgram {
    /// The executable to run, normally the `ferry` binary itself.
    pub program: PathBuf,
    /// The arguments that make it a worker.
    pub args: Vec<String>,
}

/// The sandbox a configuration asks for, as the runner names it.
fn sandbox_kind(choice: SandboxChoice) -> SandboxKind {
    match choice {
        SandboxChoice::Auto => SandboxKind::Auto,
        SandboxChoice::None => SandboxKind::None,
        SandboxChoice::Bwrap => SandboxKind::Bwrap,
        SandboxChoice::Landlock => SandboxKind::Landlock,
    }
}

/// Logs which sandbox commands run in, once at start: what `auto` found, or why every
/// command will be refused, or that there is none by the operator's choice.
pub fn log_sandbox(config: &Config) {
    let choice = config.exec.sandbox;
    let kind = sandbox_kind(choice);
    match ferry_exec::in_force(kind) {
        Ok(_) if choice == SandboxChoice::None && config.site.mode == SiteMode::Host => {
            tracing::warn!(
                "sandbox: none ([exec] sandbox = \"none\"): commands reach whatever the \
                 person's own permissions reach"
            )
        }
        Ok(_) if choice == SandboxChoice::None => tracing::warn!(
            "sandbox: none ([exec] sandbox = \"none\"): commands run with the service's own \
             authority: they can read its database and signal it"
        ),
        Ok(found) => tracing::info!("sandbox: {found}"),
        Err(why) if choice == SandboxChoice::Auto => {
            tracing::warn!("sandbox: none works here, terminal_run is refused: {why}")
        }
        Err(why) => tracing::warn!(
            "sandbox: {} does not work here, so commands cannot run: {why}",
            kind.name()
        ),
    }
}

/// The person's folders, the trees their tools reach, and the requester acting as them
/// over those trees.
pub(crate) fn requester_for(
    site: &Site,
    person: &str,
    worker: Option<WorkerProgram>,
) -> Result<(PersonPaths, Vec<Tree>, Requester), ToolError> {
    site.require_person(person)?;
    let data = std::fs::canonicalize(site.path()).map_err(|e| {
        ToolError::new(
            Code::SiteUnavailable,
            format!("the data folder cannot be resolved: {e}"),
        )
    })?;
    let paths = PersonPaths::new(&data, person);
    let trees = trees_of(site, &paths)?;
    // A tree a link has moved (onto the site, or another person's folder) is refused on
    // its own by the scope, which reaches every tree from the real data folder with no
    // link followed: paths into it are told why, the other trees and the sandbox go on.
    let config = site.config();
    let run = RunSettings {
        user: person.to_owned(),
        full_output_dir: paths.terminal_output.clone(),
        sandbox: sandbox_kind(config.exec.sandbox),
        network: config.exec.network,
        output_ttl_secs: config.exec.output_ttl_hours.saturating_mul(60 * 60),
        output_max_bytes: config.exec.output_max_bytes,
    };
    let requester = match site.mode() {
        SiteMode::Local | SiteMode::Container => {
            // The service owns the files here, so only ferry itself keeps the provisioned
            // documents unwritten (host mode leaves that to their owner, root).
            let scope = Scope::new(
                data.clone(),
                paths.home.clone(),
                trees.clone(),
                Access::Confined,
            )?
            .with_locked(vec![paths.home.join(layout::MEMORY_DIR)]);
            for (tree, why) in scope.refused() {
                tracing::warn!(
                    "person {person}: the folder {} is refused: {why}",
                    tree.path.display()
                );
            }
            Requester::InProcess(Executor::new(scope, run, config.agent_ids(person)))
        }
        SiteMode::Host => {
            let worker = worker.ok_or_else(|| {
                ToolError::new(
                    Code::HostModeUnavailable,
                    "host mode needs the worker program to act as the person",
                )
            })?;
            Requester::Worker(WorkerPool::new(WorkerSpawn {
                helper: config.helper_path(),
                person: person.to_owned(),
                program: worker.program,
                args: worker.args,
                hello: Hello {
                    base: data.clone(),
                    home: paths.home.clone(),
                    trees: trees.clone(),
                    run,
                },
                account: ferry_host::person_user(person),
            }))
        }
    };
    Ok((paths, trees, requester))
}

/// The folders `paths`' person may reach now: their own, `shared/public`, the circles
/// they belong to, and the skills (read only). Projects lie within the home, so only a
/// circle joined or left changes this list.
pub(crate) fn trees_of(site: &Site, paths: &PersonPaths) -> Result<Vec<Tree>, ToolError> {
    let writable = |path: &Path| Tree {
        path: path.to_path_buf(),
        writable: true,
    };
    let mut trees = vec![
        writable(&paths.home),
        writable(&paths.private),
        writable(&paths.shared_public),
    ];
    for circle in site.circles_of(&paths.person)? {
        trees.push(writable(&paths.data.join(layout::circle(&circle))));
    }
    trees.push(Tree {
        path: paths.skills.clone(),
        writable: false,
    });
    Ok(trees)
}

/// Whether two lists name the same trees, the same way, in the same order.
pub(crate) fn same_trees(a: &[Tree], b: &[Tree]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| a.path == b.path && a.writable == b.writable)
}
