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
                let line = one_line(&serde_json::to_string(record)?);
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

/// A JSON record that stays one line for every reader: JSON leaves DEL, NEL (U+0085),
/// the line and paragraph separators (U+2028, U+2029) and the bidirectional controls
/// unescaped, and some readers split lines on them or show them reordered; each is
/// written as its `\uXXXX` escape (the same JSON).
fn one_line(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '\u{7f}'
            | '\u{80}'..='\u{9f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn records_stay_one_line_and_the_same_json() {
        let name = "a\u{85}b\u{2028}c\u{2029}d\u{7f}e\u{202e}f";
        let json = serde_json::to_string(&serde_json::json!({ "path": name })).unwrap();
        let line = one_line(&json);
        assert_eq!(line.lines().count(), 1);
        assert!(line.is_ascii(), "{line}");
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back["path"], name);
    }
}
