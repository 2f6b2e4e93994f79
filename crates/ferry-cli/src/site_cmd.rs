//! `ferry site init` and `ferry circle …` (spec tools T-ID, core C-SITE).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use ferry_config::SiteMode;
use ferry_host as host;
use ferry_site::{Site, TokenKind};

use crate::{SiteArgs, load_config, open_site};

#[derive(Subcommand)]
pub(crate) enum SiteCommand {
    /// Makes a site (the other administration commands never do), and sets it up for a
    /// deployment mode. `local`: the folders and the database, nothing else (`ferry
    /// serve` makes them too). `host` (as root): besides, a POSIX user per person, a group
    /// per circle, owners and modes of the layout, and the setuid helper. Re-running it
    /// adds what is missing and fixes owners and modes. A person whose folders are not as
    /// they must be is left out with a warning naming the place, the others are set up,
    /// and the exit status is 3.
    Init {
        /// The mode to set up.
        #[arg(long, value_parser = ["local", "host"])]
        mode: String,
        #[command(flatten)]
        site: SiteArgs,
        /// The helper binary to install [default: ferry-posix-helper beside this ferry].
        #[arg(long)]
        helper_source: Option<PathBuf>,
        /// Where to install the helper [default: site.helper_path, else
        /// /usr/local/lib/ferry/ferry-posix-helper].
        #[arg(long)]
        helper_path: Option<PathBuf>,
    },
    /// Lists every place of the site that ferry refuses to use as it is: a root of a
    /// workspace folder that is a symbolic link, a memory/ that is not the service's.
    /// Exits 1 when it finds any.
    Check {
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Copies the site's SQLite metadata into an empty PostgreSQL database (spec S-META),
    /// in one transaction, and checks every table's row count. The SQLite file is left as
    /// it was. Stop the gateway first: what it writes during the copy stays behind. The
    /// password comes from FERRY_METADATA__PASSWORD or the URL.
    MigrateMetadata {
        /// The PostgreSQL database to copy into: postgres://user@host/db.
        #[arg(long, value_name = "URL")]
        to: String,
        #[command(flatten)]
        site: SiteArgs,
    },
}

#[derive(Subcommand)]
pub(crate) enum CircleCommand {
    /// Adds a circle, or adds members to an existing one (members it has stay). In a
    /// host-mode site run as root, also creates its group and adds the members to it
    /// (exit status 3 when a person had to be left out; the warning says why).
    Add {
        id: String,
        /// A person to add to the circle (repeat for several).
        #[arg(long = "member", value_name = "PERSON")]
        members: Vec<String>,
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Lists the circles with their members.
    List {
        #[command(flatten)]
        site: SiteArgs,
    },
}

pub(crate) fn site(command: SiteCommand) -> Result<ExitCode> {
    match command {
        SiteCommand::Init {
            mode,
            site,
            helper_source,
            helper_path,
        } => match mode.as_str() {
            "local" => init_local(&site),
            _ => init_host(&site, helper_source, helper_path),
        },
        SiteCommand::Check { site } => check(&site),
        SiteCommand::MigrateMetadata { to, site } => migrate_metadata(&site, &to),
    }
}

fn migrate_metadata(args: &SiteArgs, to: &str) -> Result<ExitCode> {
    if !to.starts_with("postgres://") && !to.starts_with("postgresql://") {
        bail!("--to takes a postgres:// address");
    }
    if !Site::exists(&args.data) {
        bail!("there is no site at {}", args.data.display());
    }
    let config = load_config(args)?;
    let copied = ferry_site::migrate_metadata(&args.data, to, config.metadata.password.as_deref())
        .context("copying the metadata to PostgreSQL")?;
    for table in &copied {
        println!(
            "{:<20} {:>8} rows in SQLite, {:>8} in PostgreSQL",
            table.table, table.sqlite, table.postgres
        );
    }
    println!(
        "copied; every count matches. Set [metadata] url in ferry.toml (its password in \
         FERRY_METADATA__PASSWORD) and start the gateway; {} is left as it was.",
        args.data
            .join(ferry_site::layout::SERVICE_DIR)
            .join(ferry_site::DB_FILE)
            .display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The exit status of a set-up that left some person out (the others were set up).
pub(crate) const EXIT_SKIPPED: u8 = 3;

pub(crate) fn circle(command: CircleCommand) -> Result<ExitCode> {
    match command {
        CircleCommand::Add { id, members, site } => {
            let site = open_site(&site)?;
            let circle = site.add_circle(&id, &members)?;
            let skipped = reconcile_host_after_change(&site)?;
            println!(
                "circle {}: {}",
                circle.id,
                if circle.members.is_empty() {
                    "no members".to_owned()
                } else {
                    circle.members.join(", ")
                }
            );
            return Ok(exit_status(&skipped));
        }
        CircleCommand::List { site } => {
            for circle in open_site(&site)?.circles()? {
                println!("{}\t{}", circle.id, circle.members.join(","));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ferry person add`: the record, then (host mode, as root) the person's user and
/// folders, then their token. When the person's own set-up fails, no token is made and
/// the error says how to finish; when only others were left out, the token is printed and
/// the exit status is [`EXIT_SKIPPED`].
pub(crate) fn add_person(args: &SiteArgs, id: &str) -> Result<ExitCode> {
    let site = open_site(args)?;
    site.add_person(id)?;
    let finish = || {
        format!(
            "{id} is recorded but not set up for host mode and has no token yet; once it is \
             fixed, `ferry site init --mode host --data {data}` finishes the set-up and \
             `ferry token create {id} --data {data}` makes the token",
            data = args.data.display()
        )
    };
    let skipped = reconcile_host_after_change(&site).with_context(finish)?;
    if let Some(mine) = skipped.iter().find(|s| s.person == id) {
        bail!("{}: {}", finish(), mine.why);
    }
    let token = site.create_token(id, TokenKind::Person)?;
    println!("added person {id}; their token:");
    println!("{token}");
    Ok(exit_status(&skipped))
}

/// `ferry site check`: one line per unsafe place, then a summary.
fn check(args: &SiteArgs) -> Result<ExitCode> {
    let site = open_site(args)?;
    if site.mode() == SiteMode::Host && !rustix::process::geteuid().is_root() {
        eprintln!(
            "ferry: note: not root: the persons' own folders of a host-mode site are not checked"
        );
    }
    let findings = site.check()?;
    for finding in &findings {
        println!("unsafe  {finding}");
    }
    let persons = site.persons()?.len();
    if findings.is_empty() {
        println!("{persons} workspace(s) checked: nothing unsafe");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} unsafe place(s) among {persons} workspace(s) and the shared folders",
        findings.len()
    );
    Ok(ExitCode::FAILURE)
}

/// After a person, project or circle is added: in a host-mode site, run as root, makes
/// their POSIX user or group and fixes the layout; elsewhere nothing (with a hint in host
/// mode). The people left out come back, already warned of.
pub(crate) fn reconcile_host_after_change(site: &Site) -> Result<Vec<host::Skipped>> {
    if site.mode() != SiteMode::Host {
        return Ok(Vec::new());
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "ferry: host mode: the POSIX users and groups were not updated (not root); \
             run `ferry site init --mode host --data {}` as root",
            site.path().display()
        );
        return Ok(Vec::new());
    }
    let report = host::reconcile_host(site).context("updating host-mode users and groups")?;
    print_changes(&report);
    Ok(report.skipped)
}

/// Success, or [`EXIT_SKIPPED`] when someone was left out.
pub(crate) fn exit_status(skipped: &[host::Skipped]) -> ExitCode {
    if skipped.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_SKIPPED)
    }
}

/// `ferry site init --mode local`: makes the site's folders and database, or says the site
/// is there already.
fn init_local(args: &SiteArgs) -> Result<ExitCode> {
    let config = load_config(args)?;
    if config.site.mode != SiteMode::Local {
        bail!(
            "the configuration of {} says site.mode = {:?}; `ferry site init --mode local` \
             makes local sites only",
            args.data.display(),
            config.site.mode
        );
    }
    let existed = Site::exists(&args.data);
    Site::open(&args.data, config)
        .with_context(|| format!("making the site at {}", args.data.display()))?;
    let shown = std::fs::canonicalize(&args.data).unwrap_or_else(|_| args.data.clone());
    let how = if existed {
        "the site is there already at"
    } else {
        "created the site at"
    };
    println!("{how} {}", shown.display());
    Ok(ExitCode::SUCCESS)
}

fn init_host(
    args: &SiteArgs,
    helper_source: Option<PathBuf>,
    helper_path: Option<PathBuf>,
) -> Result<ExitCode> {
    let euid = rustix::process::geteuid();
    if !euid.is_root() {
        bail!(
            "`ferry site init --mode host` creates users and sets owners: run it as root \
             (effective uid {})",
            euid.as_raw()
        );
    }
    let source = match helper_source {
        Some(source) => source,
        None => host::default_helper_source().context("finding the helper beside ferry")?,
    };
    if !source.is_file() {
        bail!(
            "the helper {} is missing: build it (`cargo build -p ferry-posix-helper`) or name \
             it with --helper-source",
            source.display()
        );
    }
    let mut config = load_config(args)?;
    if config.site.mode != SiteMode::Host {
        write_host_config(args, helper_path.as_deref())?;
        config = load_config(args)?;
    }
    let target = helper_path.unwrap_or_else(|| config.helper_path());
    if target != config.helper_path() {
        eprintln!(
            "ferry: note: installing the helper at {}, but the site's config names {}: \
             set site.helper_path so the gateway finds it",
            target.display(),
            config.helper_path().display()
        );
    }
    let site = Site::open(&args.data, config)
        .with_context(|| format!("opening the site at {}", args.data.display()))?;
    let report = host::init_host(&site, &source, &target)?;
    print_changes(&report);
    let persons = site.persons()?.len();
    let ready = persons - report.skipped.len();
    println!(
        "host mode ready at {} ({ready} of {persons} person(s), {} circle(s)); helper at {}",
        args.data.display(),
        site.circles()?.len(),
        target.display()
    );
    Ok(exit_status(&report.skipped))
}

/// Records `site.mode = "host"` in a new `<data>/ferry.toml`; an existing config file
/// that says otherwise is the operator's to change.
fn write_host_config(args: &SiteArgs, helper_path: Option<&Path>) -> Result<()> {
    let file = args
        .config
        .clone()
        .unwrap_or_else(|| args.data.join("ferry.toml"));
    if file.exists() {
        bail!(
            "{} does not set site.mode = \"host\": add `mode = \"host\"` under [site] and run \
             this again",
            file.display()
        );
    }
    let mut text = String::from("[site]\nmode = \"host\"\n");
    if let Some(path) = helper_path {
        // A TOML literal string: no escapes, so refuse what it cannot hold.
        let path = path
            .to_str()
            .filter(|p| !p.contains(['\'', '\n', '\r']))
            .with_context(|| format!("cannot write {} into ferry.toml", path.display()))?;
        text.push_str(&format!("helper_path = '{path}'\n"));
    }
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("creating {}", args.data.display()))?;
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    println!("wrote {} (site.mode = \"host\")", file.display());
    Ok(())
}

/// The changes on stdout; each person left out as a warning on stderr.
fn print_changes(report: &host::HostReport) {
    for change in &report.changes {
        println!("  {change}");
    }
    for skipped in &report.skipped {
        eprintln!("ferry: warning: {skipped}");
    }
}
