//! `file_fetch`: one file from a node into the media store, verified by size and sha256.
//! Every fetch answers with `localPath` and `mediaId`; only small UTF-8 text is also shown
//! inline, never an image or other binary.

use ferry_codes::Code;
use ferry_config::limits::{NODE_FETCH_DEFAULT_BYTES, NODE_FETCH_INLINE_MAX_BYTES};
use ferry_media::blob::KnownDigest;
use ferry_media::{MediaRecord, MediaSource, MediaStore};
use ferry_node::checked::CheckedReader;
use ferry_node::commands::{FILE_FETCH, FetchHead, FileFetchArgs};
use ferry_node::policy::Access;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::json;

use super::{max_bytes, reach, wire};
use crate::wrap::wrap;
use crate::{ToolError, ToolOutput, Toolbox, args};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileFetch {
    node: String,
    path: String,
    max_bytes: Option<u64>,
}

pub(crate) async fn file_fetch(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: FileFetch = args::parse("file_fetch", args)?;
    let cap = tools.site().config().nodes.fetch_max_bytes;
    let max = max_bytes(args.max_bytes, NODE_FETCH_DEFAULT_BYTES, cap)?;
    let reached = reach(tools, &args.node, FILE_FETCH, Access::Read, &args.path)?;
    // Everything from here on may carry the node's own words.
    let outcome: Result<ToolOutput, ToolError> = async {
        let request = FileFetchArgs {
            path: args.path.clone(),
            max_bytes: max,
            follow_symlinks: reached.follow_symlinks,
        };
        let (head, body): (FetchHead, _) = reached.call(FILE_FETCH, &request).await?;
        // Dropping the response on any refusal below cancels the node's stream.
        reached.check(Access::Read, &head.path)?;
        if head.size > max {
            return Err(ToolError::new(
                Code::FileTooLarge,
                format!(
                    "{} has {} bytes, over the {max} this fetch takes; pass a larger maxBytes (at most {cap})",
                    head.path, head.size
                ),
            ));
        }
        let store = tools.site().media()?.with_max_bytes(head.size);
        let failure = wire::Failure::default();
        let digest = KnownDigest::default();
        let content = wire::content(
            CheckedReader::new(body, head.size),
            Some(head.size),
            failure.clone(),
            digest.clone(),
        );
        let source = MediaSource {
            node: Some(reached.id.clone()),
            path: head.path.clone(),
            person: Some(tools.person().to_owned()),
        };
        let record = store
            .put_stream_hashed(content, digest, file_name(&head.path), source)
            .await
            .map_err(|e| failure.or(e))?;
        let inline = inline_text(&store, &record).await;
        Ok(answer(
            &reached.source,
            &head,
            &record,
            inline,
            max < args.max_bytes.unwrap_or(0),
        ))
    }
    .await;
    reached.guard(outcome)
}

/// The last component of a canonical path (the root is `/`).
pub(super) fn file_name(path: &str) -> &str {
    match path.rsplit('/').next() {
        Some("") | None => "root",
        Some(name) => name,
    }
}

/// The file's text, if it is small UTF-8 text without NUL and not an image.
async fn inline_text(store: &MediaStore, record: &MediaRecord) -> Option<String> {
    if record.size > NODE_FETCH_INLINE_MAX_BYTES || record.media_type.starts_with("image/") {
        return None;
    }
    let mut bytes = Vec::with_capacity(record.size as usize);
    let mut content = store.blobs().get(&record.sha256).await.ok()?;
    while let Some(chunk) = content.next().await {
        bytes.extend_from_slice(&chunk.ok()?);
    }
    let text = String::from_utf8(bytes).ok()?;
    (!text.contains('\0')).then_some(text)
}

fn answer(
    source: &str,
    head: &FetchHead,
    record: &MediaRecord,
    inline: Option<String>,
    clamped: bool,
) -> ToolOutput {
    let local_path = record.local_path.as_ref().map(|p| p.display().to_string());
    let mut text = format!(
        "Fetched {} bytes ({}, sha256 {}) from {source}.\nlocalPath: {}\nmediaId: {}\n",
        record.size,
        record.media_type,
        record.sha256,
        local_path
            .as_deref()
            .unwrap_or("(kept in the object store)"),
        record.id.as_str(),
    );
    if clamped {
        text.push_str("maxBytes was lowered to this gateway's cap.\n");
    }
    let shown = match &inline {
        Some(content) => format!("{}\n{content}", head.path),
        None => head.path.clone(),
    };
    text.push_str(&wrap(source, &shown));
    match (&inline, &local_path) {
        (Some(_), _) => {}
        (None, Some(_)) => {
            text.push_str("\nThe content is not shown inline; read it at localPath.")
        }
        (None, None) => text.push_str(
            "\nThe content is not shown inline and is not on this machine's disk; \
             push it to a node with sourceMediaId.",
        ),
    }
    ToolOutput::text(text).with_structured(json!({
        "path": head.path,
        "size": record.size,
        "sha256": record.sha256,
        "mediaType": record.media_type,
        "mediaId": record.id.as_str(),
        "localPath": local_path,
        "expires": record.expires,
        "mtime": head.mtime,
        "mode": format!("{:04o}", head.mode & 0o7777),
        "inline": inline.is_some(),
    }))
}
