//! `ferry audit [--person P] [--since T] [--path GLOB]` (spec scale S-OPS): the audit
//! trail of file movements as JSON lines, newest first, read a page at a time so a long
//! trail is never held whole.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use ferry_site::{AUDIT_PAGE_MAX, AuditFilter};

use crate::{SiteArgs, open_site};

#[derive(Args)]
pub(crate) struct AuditArgs {
    /// Only this person's files.
    #[arg(long)]
    person: Option<String>,
    /// Only movements at or after this instant: 2026-12-06T00:00:00Z (UTC) or Unix seconds.
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// Only movements of a path (or a move's new path) the glob matches, e.g. 'public/**/*.pdf'.
    #[arg(long, value_name = "GLOB")]
    path: Option<String>,
    #[command(flatten)]
    site: SiteArgs,
}

pub(crate) fn audit(args: AuditArgs) -> Result<ExitCode> {
    let since = match &args.since {
        None => None,
        Some(text) => match ferry_site::parse_instant(text) {
            Some(t) => Some(t),
            None => bail!("--since takes 2026-12-06T00:00:00Z (UTC) or Unix seconds, not {text:?}"),
        },
    };
    let glob = match &args.path {
        None => None,
        Some(pattern) => Some(
            globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .with_context(|| format!("--path {pattern:?} is not a glob"))?
                .compile_matcher(),
        ),
    };
    let site = open_site(&args.site)?;
    let mut out = std::io::stdout().lock();
    let mut before = None;
    loop {
        let page = site.audit_records(&AuditFilter {
            person: args.person.clone(),
            since,
            before,
            limit: AUDIT_PAGE_MAX,
        })?;
        for record in &page {
            let matches = glob.as_ref().is_none_or(|g| {
                g.is_match(&record.path) || record.to.as_deref().is_some_and(|to| g.is_match(to))
            });
            if matches {
                let line = serde_json::to_string(record)?;
                // A reader that stopped (`| head`) ends the listing, not in an error.
                if writeln!(out, "{line}").is_err() {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        match page.last() {
            Some(last) if page.len() == AUDIT_PAGE_MAX => before = Some(last.id),
            _ => break,
        }
    }
    let _ = out.flush();
    Ok(ExitCode::SUCCESS)
}
