//! `file_deliver` and the artifact manifest (spec tools.md T-FLOW).

use std::path::Path;

use ferry_codes::Code;
use ferry_exec::ops::Kind;
use ferry_fs::Budget;
use ferry_site::{Artifact, ArtifactKind, check_id};
use serde_json::json;

use crate::args::{self, FileDeliver};
use crate::read::io_error;
use crate::{ToolError, ToolOutput, Toolbox};
use ferry_config::limits::DELIVER_MAX_FILES;

/// How deep and how many files a scan of `artifacts/` goes; beyond, it stops and says so.
const ARTIFACT_SCAN_MAX_DEPTH: usize = 16;
const ARTIFACT_SCAN_MAX_FILES: usize = 10_000;

pub(crate) fn file_deliver(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: FileDeliver = args::parse("file_deliver", args)?;
    if args.paths.is_empty() || args.paths.len() > DELIVER_MAX_FILES {
        return Err(ToolError::new(
            Code::InvalidArguments,
            format!(
                "paths must name 1 to {DELIVER_MAX_FILES} files (got {})",
                args.paths.len()
            ),
        ));
    }
    let project = args.project.as_deref();
    if let Some(project) = project {
        check_id("project", project)?;
        if !tools
            .site()
            .projects(tools.person())?
            .iter()
            .any(|p| p.id == project)
        {
            return Err(ToolError::new(
                Code::UnknownProject,
                format!("there is no project `{project}` in this workspace"),
            ));
        }
    }
    // Every source is checked before the first copy: a bad path, a file over the cap or
    // a total over the quota delivers nothing.
    let max_bytes = tools.site().config().deliveries.max_bytes;
    let mut sources = Vec::with_capacity(args.paths.len());
    let mut total = 0u64;
    for path in &args.paths {
        let info = tools.requester().stat(path)?;
        if info.kind != Kind::File {
            return Err(ToolError::new(
                Code::NotAFile,
                format!(
                    "{} is not a regular file; deliver files, not folders",
                    info.path
                ),
            ));
        }
        if info.size > max_bytes {
            return Err(too_large(&info.path, info.size, max_bytes));
        }
        total = total.saturating_add(info.size);
        sources.push((info.path, info.size));
    }
    let quota = quota_for(tools)?;
    quota.take(total).map_err(ferry_exec::RequestError::from)?;
    let attachments = tools.paths().attachments(project);
    let attachments_str = attachments.display().to_string();
    sync_artifacts(tools)?;
    let mut delivered = Vec::new();
    let mut lines = Vec::new();
    for (path, (source, size)) in args.paths.iter().zip(sources) {
        // Room was taken for the size seen above: a file grown since is refused.
        let limit = size;
        let written = match tools.requester().deliver(path, &attachments_str, limit) {
            Err(e) if e.code == Code::TooLarge && limit < max_bytes => {
                return Err(ToolError::new(
                    Code::ChangedMeanwhile,
                    format!("{source} grew while it was delivered; deliver it again"),
                ));
            }
            other => other?,
        };
        let name = Path::new(&written.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let public_path = ferry_site::layout::in_attachments(&name);
        let (task, slug) = task_and_slug(tools, &source);
        tools.site().record_artifact(
            tools.person(),
            &Artifact {
                kind: ArtifactKind::Delivery,
                task,
                slug,
                path: tools.paths().relative(&source),
                size: written.size,
                sha256: written.sha256.clone(),
                delivered_as: match project {
                    Some(p) => format!("projects/{p}/{public_path}"),
                    None => public_path.clone(),
                },
                created: String::new(),
                mtime: 0,
            },
        )?;
        let notice = ferry_site::delivery_notice(&public_path);
        lines.push(notice.clone());
        delivered.push(json!({
            "source": source,
            "path": public_path,
            "project": project,
            "size": written.size,
            "sha256": written.sha256,
            "notice": notice,
        }));
    }
    quota.commit();
    Ok(ToolOutput::text(format!(
        "Delivered {} file(s). Repeat these lines in your reply:\n{}",
        delivered.len(),
        lines.join("\n")
    ))
    .with_structured(json!({"delivered": delivered})))
}

fn too_large(path: &str, size: u64, max_bytes: u64) -> ToolError {
    ToolError::new(
        Code::TooLarge,
        format!(
            "{path} is {size} bytes, over the {max_bytes} bytes one delivery may have \
             ([deliveries] max_bytes); nothing was delivered. Deliver a smaller file (compress \
             or split it)"
        ),
    )
}

/// The person's quota for this delivery.
fn quota_for(tools: &Toolbox) -> Result<ferry_site::QuotaClaim, ToolError> {
    tools.quota_claim()
}

/// The task and slug of a file: the first folder under `artifacts/` or `tmp/`.
fn task_and_slug(tools: &Toolbox, abs: &str) -> (String, String) {
    let paths = tools.paths();
    let slug = [&paths.artifacts, &paths.tmp]
        .iter()
        .find_map(|root| Path::new(abs).strip_prefix(root).ok())
        .and_then(|rest| {
            let mut parts = rest.components();
            let first = parts.next()?;
            // A file directly in artifacts/ has no slug of its own.
            parts.next()?;
            Some(first.as_os_str().to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    (slug.clone(), slug)
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Records every file under the person's `artifacts/` that the manifest does not hold
/// with its current content. Runs as the person, like every other file access.
pub fn sync_artifacts(tools: &Toolbox) -> Result<usize, ToolError> {
    let root = tools.paths().artifacts.display().to_string();
    let mut pending = vec![(root, 0usize)];
    let mut seen = 0usize;
    let mut recorded = 0usize;
    while let Some((dir, depth)) = pending.pop() {
        let entries = match tools.requester().list(&dir) {
            Ok(entries) => entries,
            Err(e) if e.code == Code::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        for entry in entries {
            let path = format!("{dir}/{}", entry.path);
            match entry.kind {
                Kind::Dir if depth < ARTIFACT_SCAN_MAX_DEPTH => pending.push((path, depth + 1)),
                Kind::File => {
                    seen += 1;
                    if seen > ARTIFACT_SCAN_MAX_FILES {
                        tracing::warn!(
                            person = tools.person(),
                            "artifacts/ scan stopped at {ARTIFACT_SCAN_MAX_FILES} files"
                        );
                        return Ok(recorded);
                    }
                    // Hashed once per content: an unchanged size and time is not read again
                    // (times are in seconds, so a file changed this very second is read).
                    let recorded_as = tools.paths().relative(&path);
                    if entry.mtime < now_secs() - 1
                        && tools.site().artifact_unchanged(
                            tools.person(),
                            &recorded_as,
                            entry.size,
                            entry.mtime,
                        )?
                    {
                        continue;
                    }
                    let (mut file, info) = tools.requester().open(&path)?;
                    let sha256 = ferry_fs::sha256_hex_of_reader(&mut file).map_err(io_error)?;
                    let (task, slug) = task_and_slug(tools, &info.path);
                    let new = tools.site().record_artifact(
                        tools.person(),
                        &Artifact {
                            kind: ArtifactKind::Artifact,
                            task,
                            slug,
                            path: recorded_as,
                            size: info.size,
                            sha256,
                            delivered_as: String::new(),
                            created: String::new(),
                            mtime: info.mtime,
                        },
                    )?;
                    recorded += usize::from(new);
                }
                _ => {}
            }
        }
    }
    Ok(recorded)
}
