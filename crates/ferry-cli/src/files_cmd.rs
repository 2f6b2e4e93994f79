//! `ferry files ls|put|get|rm|share` (spec members M-DAILY): a person's files on a running
//! gateway, from a terminal or a script.
//!
//! Exit status: 0 done, 1 failed, 2 usage (clap's own, or no token/URL), 3 not found, so a
//! script can tell "nothing there" from "something broke".

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use ferry_client::{Client, ClientError, EntryKind, Progress, ProgressRef, PutOptions, Quiet};
use indicatif::{ProgressBar, ProgressStyle};

/// The exit status of a command whose target does not exist.
const EXIT_NOT_FOUND: u8 = 3;
/// The exit status of a command that was used wrongly.
const EXIT_USAGE: u8 = 2;
/// Transfers shorter than this show no progress bar: it would only flicker.
const PROGRESS_MIN_BYTES: u64 = 1024 * 1024;

#[derive(Args)]
pub(crate) struct GatewayArgs {
    /// The gateway's address.
    #[arg(
        long,
        env = "FERRY_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// A person's token (better passed as FERRY_TOKEN: arguments are visible to others).
    #[arg(long, env = "FERRY_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// The project whose files these are [default: the person's own workspace].
    #[arg(long, global = true)]
    project: Option<String>,
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
pub(crate) enum FilesCommand {
    /// Lists the files under public/ (or under PATH), one per line.
    Ls {
        /// A folder or file, e.g. public/reports [default: public].
        path: Option<String>,
        /// Prints the gateway's JSON tree instead.
        #[arg(long)]
        json: bool,
    },
    /// Uploads files; above 8 MiB through tus, resuming where an interrupted run stopped.
    Put {
        /// The local files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// An existing folder to put them in, e.g. public/reports [default: public].
        #[arg(long)]
        to: Option<String>,
        /// The name to give the file (one file only).
        #[arg(long)]
        name: Option<String>,
        /// Keep a file that already has the name, and fail, instead of replacing it.
        #[arg(long)]
        keep: bool,
    },
    /// Downloads a file; an interrupted download to the same place resumes.
    Get {
        /// The file, e.g. public/report.pdf.
        path: String,
        /// Where to write it: a file, a folder, or - for standard output [default: its
        /// name, in the current folder].
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Moves files or folders to the trash (restorable for `files.trash_days`).
    Rm {
        /// The entries, e.g. public/old.txt.
        #[arg(required = true)]
        paths: Vec<String>,
        /// Deletes for good instead.
        #[arg(long)]
        forever: bool,
    },
    /// Prints a link that downloads a file without a token until it expires.
    Share {
        /// The file, e.g. public/report.pdf.
        #[arg(required_unless_present = "revoke", conflicts_with = "revoke")]
        path: Option<String>,
        /// How long the link works: seconds, or a number with s, m, h or d.
        #[arg(long, default_value = "1d", value_parser = parse_duration)]
        expires: Duration,
        /// Ends the link with this id instead.
        #[arg(long)]
        revoke: Option<String>,
    },
}

pub(crate) fn files(gateway: GatewayArgs, command: FilesCommand) -> ExitCode {
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClientError::Transport(format!("starting the async runtime: {e}")))
        .and_then(|runtime| runtime.block_on(run(&gateway, command)));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry files: {e}");
            ExitCode::from(exit_status(&e))
        }
    }
}

fn exit_status(e: &ClientError) -> u8 {
    match e {
        ClientError::Usage(_) => EXIT_USAGE,
        e if e.is_not_found() => EXIT_NOT_FOUND,
        _ => 1,
    }
}

async fn run(gateway: &GatewayArgs, command: FilesCommand) -> Result<(), ClientError> {
    let client = Client::new(&gateway.url, gateway.token.as_deref().unwrap_or(""))?;
    let project = gateway.project.as_deref();
    match command {
        FilesCommand::Ls { path, json } => {
            let listing = client.list(project).await?;
            let path = path.unwrap_or_else(|| listing.root.clone());
            let entries = listing.under(&path).ok_or_else(|| ClientError::Api {
                status: ferry_client::StatusCode::NOT_FOUND,
                code: "not_found".to_owned(),
                message: format!("nothing is at {path}"),
            })?;
            if json {
                let shown: Vec<_> = entries.iter().map(|(_, e)| entry_json(e)).collect();
                println!("{}", serde_json::Value::Array(shown));
            } else {
                for (_, entry) in &entries {
                    println!("{}", entry_line(entry));
                }
                if listing.truncated {
                    eprintln!("ferry files: the listing was cut short: the tree is very large");
                }
            }
        }
        FilesCommand::Put {
            files,
            to,
            name,
            keep,
        } => {
            if name.is_some() && files.len() > 1 {
                return Err(ClientError::Usage(
                    "--name names one file; give one file with it".to_owned(),
                ));
            }
            let options = PutOptions {
                project: gateway.project.clone(),
                folder: to,
                name,
                keep_existing: keep,
            };
            for file in &files {
                let bar = bar(gateway.quiet, &file.display().to_string());
                let done = client.put(file, &options, &bar.progress()).await;
                bar.finish();
                let done = done?;
                if done.resumed_from > 0 {
                    eprintln!(
                        "ferry files: resumed {} after {} already sent",
                        file.display(),
                        size(done.resumed_from)
                    );
                }
                if let Some(from) = &done.renamed_from {
                    eprintln!(
                        "ferry files: {} was saved as {}",
                        printable(from),
                        printable(&done.path)
                    );
                }
                println!(
                    "{}\t{}\t{}",
                    printable(&done.path),
                    done.size,
                    printable(done.sha256.as_deref().unwrap_or("-"))
                );
            }
        }
        FilesCommand::Get { path, output } => {
            let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
            if matches!(name.as_str(), "" | "." | "..") {
                return Err(ClientError::Usage(format!(
                    "{} does not name a file",
                    printable(&path)
                )));
            }
            if output.as_deref() == Some(Path::new("-")) {
                let mut stdout = tokio::io::stdout();
                client
                    .get_to(
                        &path,
                        project,
                        &mut stdout,
                        &(Arc::new(Quiet) as ProgressRef),
                    )
                    .await?;
                return Ok(());
            }
            let dest = match output {
                Some(out) if out.is_dir() => out.join(&name),
                Some(out) => out,
                None => PathBuf::from(&name),
            };
            // The download is renamed onto `dest` when whole: a device or a pipe there
            // would be replaced by a file, not written to.
            if std::fs::symlink_metadata(&dest).is_ok_and(|m| !m.is_file() && !m.is_symlink()) {
                return Err(ClientError::Usage(format!(
                    "{} is not a regular file; give -o - to write to standard output",
                    dest.display()
                )));
            }
            let bar = bar(gateway.quiet, &name);
            let done = client.get(&path, project, &dest, &bar.progress()).await;
            bar.finish();
            let done = done?;
            if done.resumed_from > 0 {
                eprintln!(
                    "ferry files: resumed after {} already downloaded",
                    size(done.resumed_from)
                );
            }
            println!("{}\t{}", done.path.display(), done.size);
        }
        FilesCommand::Rm { paths, forever } => {
            for path in &paths {
                match client.remove(path, project, forever).await? {
                    Some(id) => println!("{}\ttrash\t{}", printable(path), printable(&id)),
                    None => println!("{}\tdeleted", printable(path)),
                }
            }
        }
        FilesCommand::Share {
            path,
            expires,
            revoke,
        } => match (path, revoke) {
            (_, Some(id)) => {
                client.unshare(&id).await?;
                println!("revoked {id}");
            }
            (Some(path), None) => {
                let share = client.share(&path, project, expires).await?;
                println!("{}", printable(&share.url));
                eprintln!(
                    "ferry files: share {} works until {}",
                    printable(&share.id),
                    printable(share.expires_at.as_deref().unwrap_or("it expires"))
                );
            }
            (None, None) => {
                return Err(ClientError::Usage("name a file to share".to_owned()));
            }
        },
    }
    Ok(())
}

/// `type size mtime path`, the size in bytes so scripts can read it.
fn entry_line(entry: &ferry_client::Entry) -> String {
    let kind = entry.kind.as_str();
    let path = match entry.kind {
        EntryKind::Dir => format!("{}/", printable(&entry.path)),
        _ => printable(&entry.path),
    };
    format!(
        "{kind}\t{}\t{}\t{path}",
        entry.size.map_or_else(|| "-".to_owned(), |s| s.to_string()),
        printable(entry.mtime.as_deref().unwrap_or("-")),
    )
}

fn entry_json(entry: &ferry_client::Entry) -> serde_json::Value {
    serde_json::json!({
        "name": entry.name,
        "path": entry.path,
        "type": entry.kind.as_str(),
        "size": entry.size,
        "mtime": entry.mtime,
    })
}

/// `text` with every control character (escape sequences, tabs, newlines) written as
/// `\u{…}`: a name is printed for a person or a script to read, never for the terminal
/// to obey, and one entry stays one tab-separated line.
fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `n` bytes in binary units, as the web client shows them ("9.0 MiB").
fn size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A progress bar on standard error, drawn only when that is a terminal.
struct Bar(Option<ProgressBar>);

impl Bar {
    fn progress(&self) -> ProgressRef {
        match &self.0 {
            Some(bar) => Arc::new(Drawn(bar.clone())),
            None => Arc::new(Quiet),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

fn bar(quiet: bool, label: &str) -> Bar {
    if quiet {
        return Bar(None);
    }
    let bar = ProgressBar::hidden();
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(label.to_owned());
    Bar(Some(bar))
}

struct Drawn(ProgressBar);

impl Progress for Drawn {
    fn start(&self, total: u64, done: u64) {
        self.0.set_length(total);
        self.0.set_position(done);
        self.0.reset_eta();
        if total >= PROGRESS_MIN_BYTES {
            // Shown only on a terminal: a script's standard error stays clean.
            self.0
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    }

    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}

/// `90`, `90s`, `15m`, `2h`, `7d`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 3600, 30m, 12h or 7d"))?;
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit is s, m, h or d")),
    };
    n.checked_mul(unit)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert!(parse_duration("7w").is_err());
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
    }

    #[test]
    fn names_print_without_control_characters() {
        assert_eq!(printable("plain name.txt"), "plain name.txt");
        assert_eq!(
            printable("\u{1b}]0;pwned\u{7}a\tb\nc.txt"),
            "\\u{1b}]0;pwned\\u{7}a\\u{9}b\\u{a}c.txt"
        );
    }

    #[test]
    fn sizes_say_the_unit_they_are_in() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(9 * 1024 * 1024), "9.0 MiB");
    }
}
