//! `ferry archive plan` (spec N-ADMIN): the archive planner of dir_fetch, on a local tar
//! or tar.gz, for operators and tests.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use ferry_archive::{ArchiveError, PathPolicy, Plan, PlanOptions, Platform};
use serde::Serialize;

use crate::json_error::json_error;

#[derive(Subcommand)]
pub(crate) enum ArchiveCommand {
    /// Plans FILE as dir_fetch would: prints the plan as JSON and exits 0, or prints
    /// {"error":{"code","message"}} and exits 1.
    Plan {
        /// The tar or tar.gz.
        file: PathBuf,
        /// Admits only names this glob matches (and folders holding them); repeatable.
        #[arg(long = "allow", value_name = "GLOB")]
        allow: Vec<String>,
        /// Refuses the archive if a name (implicit parents included) matches; repeatable.
        #[arg(long = "deny", value_name = "GLOB")]
        deny: Vec<String>,
        /// The platform the archive would be extracted on.
        #[arg(long, default_value = "linux", value_parser = ["linux", "windows", "macos"])]
        platform: String,
    },
}

pub(crate) fn archive(command: ArchiveCommand) -> Result<ExitCode> {
    let ArchiveCommand::Plan {
        file,
        allow,
        deny,
        platform,
    } = command;
    let (json, code) = match plan_file(&file, &allow, &deny, &platform) {
        Ok(plan) => (
            serde_json::to_string(&PlanJson::of(&plan))?,
            ExitCode::SUCCESS,
        ),
        Err(e) => (json_error(e.code(), e.to_string()), ExitCode::FAILURE),
    };
    println!("{json}");
    Ok(code)
}

/// The plan as N-ADMIN spells it, keys in its order.
#[derive(Serialize)]
struct PlanJson<'a> {
    entries: Vec<EntryJson<'a>>,
    descendants: u64,
}

#[derive(Serialize)]
struct EntryJson<'a> {
    path: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    size: u64,
}

impl PlanJson<'_> {
    fn of(plan: &Plan) -> PlanJson<'_> {
        let entries = plan
            .entries
            .iter()
            .map(|e| EntryJson {
                path: &e.path,
                kind: e.kind.as_str(),
                size: e.size,
            })
            .collect();
        PlanJson {
            entries,
            descendants: plan.descendants,
        }
    }
}

fn plan_file(
    file: &Path,
    allow: &[String],
    deny: &[String],
    platform: &str,
) -> Result<Plan, ArchiveError> {
    let options = PlanOptions {
        platform: Platform::parse(platform).unwrap_or_default(),
        policy: PathPolicy::new(allow, deny)?,
        ..PlanOptions::default()
    };
    let opened = std::fs::File::open(file).map_err(|e| match e.raw_os_error() {
        Some(errno) => ArchiveError::Fs(ferry_fs::FsError::from_raw_os_error(errno)),
        None => ArchiveError::Io(e),
    })?;
    ferry_archive::plan(std::io::BufReader::new(opened), &options)
}
