//! `ferry media list|show|sweep|put` (spec scale S-STORE): the site's media store, for
//! operators. Every answer is JSON on stdout; a refusal is `{"error":{"code","message"}}`
//! with exit status 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use ferry_media::{MediaError, MediaSource, MediaStore};
use serde::Serialize;

use crate::json_error::json_error;

use crate::{SiteArgs, open_site};

#[derive(Subcommand)]
pub(crate) enum MediaCommand {
    /// Prints every record, one JSON object a line, oldest first.
    List {
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Prints one record as JSON, with where its bytes live (`location`; `localPath` on
    /// the local backend).
    Show {
        /// The media id, e.g. train~k3j9x2m1q8ab.txt.
        id: String,
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Removes expired records, then blobs no record references, now.
    Sweep {
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Stores FILE, a file of this machine the operator can read, and prints its record:
    /// bytes an agent can then push to a node by `sourceMediaId`. For operators only;
    /// nothing over the network reaches it.
    Put {
        /// The file to store.
        file: PathBuf,
        /// The name to record and to make the id's stem from [default: FILE's name].
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        site: SiteArgs,
    },
}

pub(crate) fn media(command: MediaCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run(command))
}

async fn run(command: MediaCommand) -> Result<ExitCode> {
    let outcome = match command {
        MediaCommand::List { site } => list(&store(&site)?),
        MediaCommand::Show { id, site } => store(&site)?.get(&id).map(|r| json(&r)),
        MediaCommand::Sweep { site } => store(&site)?
            .sweep(SystemTime::now())
            .await
            .map(|r| json(&r)),
        MediaCommand::Put { file, name, site } => put(&store(&site)?, &file, name).await?,
    };
    match outcome {
        Ok(text) => {
            if !text.is_empty() {
                println!("{text}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("{}", json_error(e.code(), e.to_string()));
            Ok(ExitCode::FAILURE)
        }
    }
}

fn store(site: &SiteArgs) -> Result<MediaStore> {
    Ok(open_site(site)?.media()?)
}

fn list(store: &MediaStore) -> Result<String, MediaError> {
    let lines: Vec<String> = store.list()?.iter().map(json).collect();
    Ok(lines.join("\n"))
}

/// Stores FILE. A FILE that cannot be opened is the operator's mistake, told on stderr;
/// a refusal of the store is answered as JSON like every other.
async fn put(
    store: &MediaStore,
    file: &Path,
    name: Option<String>,
) -> Result<Result<String, MediaError>> {
    let canonical = tokio::fs::canonicalize(file)
        .await
        .with_context(|| format!("opening {}", file.display()))?;
    // Without blocking: a FIFO's open would wait for a writer that may never come.
    let opened = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&canonical)
        .await
        .with_context(|| format!("opening {}", file.display()))?;
    if !opened.metadata().await?.is_file() {
        bail!("{} is not a regular file", file.display());
    }
    let name = name.unwrap_or_else(|| {
        canonical
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    // An operator's bytes, for any person's agent to push.
    let source = MediaSource {
        node: None,
        path: canonical.to_string_lossy().into_owned(),
        person: None,
    };
    Ok(store.put(opened, &name, source).await.map(|r| json(&r)))
}

fn json<T: Serialize>(value: &T) -> String {
    // Records and reports are plain data: serializing them cannot fail.
    serde_json::to_string(value).unwrap_or_default()
}
