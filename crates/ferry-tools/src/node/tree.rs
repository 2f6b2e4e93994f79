//! `dir_fetch`: a folder's tree from a node, as the node's own gzip tar, verified,
//! planned by the archive planner, checked member by member against the gateway's rules,
//! and only then extracted into `dir-fetch-<media id>/` beside the media store's blobs.

use std::collections::BTreeSet;

use ferry_archive::{EntryType, Limits, Plan, PlanOptions};
use ferry_codes::Code;
use ferry_config::limits::{
    ARCHIVE_ENTRY_MAX_BYTES, ARCHIVE_MAX_DESCENDANTS, ARCHIVE_UNPACKED_MAX_BYTES,
    MODEL_TEXT_MAX_BYTES,
};
use ferry_media::blob::KnownDigest;
use ferry_media::trees::{TREE_PREFIX, TREE_TEMPORARY_PREFIX};
use ferry_media::{MediaRecord, MediaSource, MediaStore};
use ferry_node::checked::CheckedReader;
use ferry_node::commands::{DIR_FETCH, DirFetchArgs, DirFetchHead};
use ferry_node::policy::Access;
use serde::Deserialize;
use serde_json::json;

use super::fetch::file_name;
use super::{Reached, max_bytes, reach, wire};
use crate::wrap::{overhead, sanitize, wrap};
use crate::{ToolError, ToolOutput, Toolbox, args};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DirFetch {
    node: String,
    path: String,
    max_bytes: Option<u64>,
}

pub(crate) async fn dir_fetch(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: DirFetch = args::parse("dir_fetch", args)?;
    let cap = tools.site().config().nodes.dir_fetch_max_bytes;
    let max = max_bytes(args.max_bytes, cap, cap)?;
    let reached = reach(tools, &args.node, DIR_FETCH, Access::Read, &args.path)?;
    // Everything from here on may carry the node's own words.
    let outcome: Result<ToolOutput, ToolError> = async {
        let request = DirFetchArgs {
            path: args.path.clone(),
            max_bytes: max,
            max_descendants: ARCHIVE_MAX_DESCENDANTS,
            follow_symlinks: reached.follow_symlinks,
        };
        let (head, body): (DirFetchHead, _) = reached.call(DIR_FETCH, &request).await?;
        reached.check(Access::Read, &head.path)?;
        if head.descendants > ARCHIVE_MAX_DESCENDANTS {
            return Err(ToolError::new(
                Code::TooManyEntries,
                format!(
                    "{} holds {} entries, over the {ARCHIVE_MAX_DESCENDANTS} a dir_fetch takes",
                    head.path, head.descendants
                ),
            ));
        }
        let store = tools.site().media()?.with_max_bytes(max);
        let failure = wire::Failure::default();
        let digest = KnownDigest::default();
        let content = wire::content(
            CheckedReader::new(body, max),
            None,
            failure.clone(),
            digest.clone(),
        );
        let source = MediaSource {
            node: Some(reached.id.clone()),
            path: head.path.clone(),
            person: Some(tools.person().to_owned()),
        };
        let name = format!("{}.tar.gz", file_name(&head.path));
        let record = store
            .put_stream_hashed(content, digest, &name, source)
            .await
            .map_err(|e| failure.or(e))?;
        // From here on a refusal forgets the archive: nothing of a refused tree stays.
        match admit(&store, &record, &head, &reached, max).await {
            Ok(plan) => Ok(answer(&reached.source, &store, &record, &head, &plan)),
            Err(e) => {
                if let Err(forget) = store.remove(&record.id) {
                    tracing::warn!(
                        "forgetting the refused tree {}: {forget}",
                        record.id.as_str()
                    );
                }
                Err(e)
            }
        }
    }
    .await;
    reached.guard(outcome)
}

/// Plans the archive, checks every member and every parent against the gateway's read
/// rules, and extracts it whole into the tree's folder.
async fn admit(
    store: &MediaStore,
    record: &MediaRecord,
    head: &DirFetchHead,
    reached: &Reached,
    max: u64,
) -> Result<Plan, ToolError> {
    // The copy (on S3) goes when `copy` does, after the blocking work below.
    let copy = store.local_copy(record).await?;
    let archive = copy.path().to_owned();
    let trees = store.trees()?;
    let id = record.id.as_str().to_owned();
    let root = head.path.clone();
    let rules = reached.rules.clone();
    let task = tokio::task::spawn_blocking(move || -> Result<Plan, ToolError> {
        let options = PlanOptions {
            limits: limits_for(max),
            ..PlanOptions::default()
        };
        let plan = ferry_archive::plan(std::fs::File::open(&archive)?, &options)?;
        for path in members_and_parents(&plan) {
            rules.check(Access::Read, &under(&root, path), "the gateway's")?;
        }
        let temporary = format!("{TREE_TEMPORARY_PREFIX}{id}");
        ferry_archive::extract(std::fs::File::open(&archive)?, &plan, &trees, &temporary)?;
        if let Err(e) = trees.rename(&temporary, &format!("{TREE_PREFIX}{id}"), false) {
            let _ = trees.remove(&temporary);
            return Err(e.into());
        }
        // The extraction made the files durable; this makes their folder's name so.
        trees.sync()?;
        Ok(plan)
    });
    task.await
        .map_err(|e| ToolError::new(Code::Internal, format!("extracting the tree failed: {e}")))?
}

/// The caps of a tree: the archive's bytes as the call allows, the descendants of the
/// spec, and room unpacked for what a raised cap lets in.
fn limits_for(max: u64) -> Limits {
    Limits {
        archive_max_bytes: max,
        max_descendants: ARCHIVE_MAX_DESCENDANTS,
        entry_max_bytes: ARCHIVE_ENTRY_MAX_BYTES.max(max),
        unpacked_max_bytes: ARCHIVE_UNPACKED_MAX_BYTES.max(max.saturating_mul(4)),
        ..Limits::default()
    }
}

/// Every admitted name and every folder above one, each once.
fn members_and_parents(plan: &Plan) -> BTreeSet<&str> {
    let mut paths = BTreeSet::new();
    for entry in &plan.entries {
        let mut path = entry.path.as_str();
        paths.insert(path);
        while let Some((parent, _)) = path.rsplit_once('/') {
            paths.insert(parent);
            path = parent;
        }
    }
    paths
}

/// `rel` under the node's folder `root`.
fn under(root: &str, rel: &str) -> String {
    if root == "/" {
        format!("/{rel}")
    } else {
        format!("{root}/{rel}")
    }
}

fn answer(
    source: &str,
    store: &MediaStore,
    record: &MediaRecord,
    head: &DirFetchHead,
    plan: &Plan,
) -> ToolOutput {
    let root_dir = store.tree_path(&record.id).display().to_string();
    let mut files: Vec<(&str, u64)> = Vec::new();
    let mut dirs: Vec<&str> = Vec::new();
    for entry in &plan.entries {
        match entry.kind {
            EntryType::File => files.push((&entry.path, entry.size)),
            EntryType::Dir => dirs.push(&entry.path),
        }
    }
    files.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    dirs.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));

    let mut header = format!(
        "{} on {source}: {} files, {} folders",
        head.path,
        files.len(),
        dirs.len()
    );
    if head.skipped > 0 {
        header.push_str(&format!(
            "; {} entries that are neither files nor folders (links, devices) were left out and never followed",
            head.skipped
        ));
    }
    header.push('\n');
    let tail = |omitted: usize| {
        let mut tail = format!(
            "\nrootDir: {root_dir}\nfileCount: {}\nmediaId: {}",
            files.len(),
            record.id.as_str()
        );
        if omitted > 0 {
            tail.push_str(&format!(
                "\n{omitted} files are not listed here; they are saved under rootDir too, and \
                 the structured result lists every one."
            ));
        }
        tail
    };
    // Room for the longest tail this answer can have.
    let budget = MODEL_TEXT_MAX_BYTES - overhead(source) - tail(files.len()).len();
    let mut body = header;
    let mut shown = 0usize;
    for (path, size) in &files {
        let line = format!("{}  {size} B\n", crate::dir_list::in_text(path));
        // Shown exactly or not at all: the wrapper would alter it.
        if sanitize(&line) != line {
            continue;
        }
        if body.len() + line.len() > budget {
            break;
        }
        body.push_str(&line);
        shown += 1;
    }
    let omitted = files.len() - shown;
    let text = format!("{}{}", wrap(source, body.trim_end()), tail(omitted));
    ToolOutput::text(text).with_structured(json!({
        "path": head.path,
        "rootDir": root_dir,
        "mediaId": record.id.as_str(),
        "archiveBytes": record.size,
        "sha256": record.sha256,
        "fileCount": files.len(),
        "dirCount": dirs.len(),
        "skipped": head.skipped,
        "shownFiles": shown,
        "omittedFiles": omitted,
        "files": files.iter().map(|(p, s)| json!({"relPath": p, "size": s})).collect::<Vec<_>>(),
        "dirs": dirs,
    }))
}
