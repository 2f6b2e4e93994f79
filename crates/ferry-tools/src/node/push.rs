//! `file_push`: bytes from this media store (`sourceMediaId`) or from the call itself
//! (`contentBase64`) written to a file on a node, atomically there. Both sources are
//! checked, and their size capped, before the node is contacted.

use bytes::Bytes;
use data_encoding::BASE64;
use ferry_codes::Code;
use ferry_node::checked::CheckedWriter;
use ferry_node::commands::{FILE_PUSH, FilePushArgs, PushResult};
use ferry_node::policy::Access;
use ferry_node::{Call, NodeError};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{reach, wire};
use crate::wrap::wrap;
use crate::{ToolError, ToolOutput, Toolbox, args};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FilePush {
    node: String,
    path: String,
    content_base64: Option<String>,
    source_media_id: Option<String>,
    #[serde(default)]
    overwrite: bool,
    #[serde(default)]
    create_parents: bool,
}

/// The bytes to push, checked.
struct Source {
    size: u64,
    sha256: String,
    bytes: BoxStream<'static, std::io::Result<Bytes>>,
    /// What the answer says the bytes came from.
    from: String,
}

pub(crate) async fn file_push(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: FilePush = args::parse("file_push", args)?;
    let cap = tools.site().config().nodes.push_max_bytes;
    let source = match (&args.content_base64, &args.source_media_id) {
        (Some(text), None) => from_base64(text, cap)?,
        (None, Some(id)) => from_media(tools, id, cap).await?,
        _ => {
            return Err(ToolError::new(
                Code::InvalidArguments,
                "give exactly one of contentBase64 and sourceMediaId",
            ));
        }
    };
    let reached = reach(tools, &args.node, FILE_PUSH, Access::Write, &args.path)?;
    // Everything from here on may carry the node's own words.
    let outcome: Result<ToolOutput, ToolError> = async {
        let request = FilePushArgs {
            path: args.path.clone(),
            size: source.size,
            sha256: source.sha256.clone(),
            overwrite: args.overwrite,
            create_parents: args.create_parents,
            follow_symlinks: reached.follow_symlinks,
            // Only the node sees where a link it follows leads: it checks there.
            gateway_rules: Some(reached.rules.sent(Access::Write)),
        };
        let call = reached
            .link
            .open_queued(
                FILE_PUSH,
                serde_json::to_value(&request).unwrap_or_default(),
                true,
            )
            .await?;
        let result: PushResult = push(call, source.bytes).await?;
        if result.size != source.size || result.sha256 != source.sha256 {
            return Err(NodeError::Mismatch(format!(
                "the node says it wrote {} bytes with sha256 {}; {} bytes with sha256 {} were sent",
                result.size, result.sha256, source.size, source.sha256
            ))
            .into());
        }
        // The node resolved the path itself; what it wrote must be where the gateway allows.
        reached.check(Access::Write, &result.path)?;
        let replaced = if result.replaced {
            "; it replaced the file there"
        } else {
            ""
        };
        let text = format!(
            "Wrote {} bytes (sha256 {}) from {} to {}{replaced}:\n{}",
            result.size,
            result.sha256,
            source.from,
            reached.source,
            wrap(&reached.source, &result.path)
        );
        Ok(ToolOutput::text(text).with_structured(json!({
            "path": result.path,
            "size": result.size,
            "sha256": result.sha256,
            "replaced": result.replaced,
        })))
    }
    .await;
    reached.guard(outcome)
}

/// Sends the body and waits for the node's answer at once.
async fn push(
    mut call: Call,
    mut bytes: BoxStream<'static, std::io::Result<Bytes>>,
) -> Result<PushResult, ToolError> {
    let writer = call
        .take_body()
        .ok_or_else(|| ToolError::new(Code::Internal, "the push was opened without a body"))?;
    let send = async move {
        let mut writer = CheckedWriter::new(writer);
        while let Some(chunk) = bytes.next().await {
            match chunk {
                // Waiting for window counts as the node bringing nothing.
                Ok(chunk) => tokio::time::timeout(wire::STALL, writer.send(chunk))
                    .await
                    .map_err(|_| NodeError::Stalled(wire::STALL))??,
                Err(e) => {
                    writer.fail(NodeError::Cancelled);
                    return Err(ToolError::new(
                        Code::IoError,
                        format!("reading the bytes to push failed: {e}"),
                    ));
                }
            }
        }
        writer.finish().await?;
        Ok::<(), ToolError>(())
    };
    // The node may answer while the body is still going (a refusal): that answer is the
    // one that counts. Once the body is sent, its answer may take at most the stall time.
    let answer = call.response();
    tokio::pin!(answer);
    let early = tokio::select! {
        answered = &mut answer => Some(answered),
        sent = send => match sent {
            Ok(()) => None,
            // A body cut short is most often the node having refused it: say why it did.
            Err(e) => match tokio::time::timeout(std::time::Duration::from_secs(1), &mut answer).await {
                Ok(Err(refusal)) => return Err(refusal.into()),
                _ => return Err(e),
            },
        }
    };
    let response = match early {
        Some(answered) => answered?,
        None => tokio::time::timeout(wire::STALL, answer)
            .await
            .map_err(|_| NodeError::Stalled(wire::STALL))??,
    };
    wire::head(FILE_PUSH, response.result)
}

fn from_base64(text: &str, cap: u64) -> Result<Source, ToolError> {
    // Sized from the text before anything is decoded.
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    let decoded_len = (text.len() as u64 * 3 / 4).saturating_sub(padding as u64);
    if decoded_len > cap {
        return Err(too_large(decoded_len, cap));
    }
    let bytes = BASE64.decode(text.as_bytes()).map_err(|e| {
        ToolError::new(
            Code::InvalidArguments,
            format!(
                "contentBase64 is not valid base64 (standard alphabet, padded with =, no \
                 spaces): {e}; nothing was sent"
            ),
        )
    })?;
    let sha256 = ferry_fs::hex(&Sha256::digest(&bytes));
    let size = bytes.len() as u64;
    Ok(Source {
        size,
        sha256,
        bytes: futures_util::stream::iter([Ok(Bytes::from(bytes))]).boxed(),
        from: "contentBase64".into(),
    })
}

async fn from_media(tools: &Toolbox, id: &str, cap: u64) -> Result<Source, ToolError> {
    let store = tools.site().media()?;
    let (record, bytes) = store.open_as(id, tools.person()).await?;
    if record.size > cap {
        return Err(too_large(record.size, cap));
    }
    Ok(Source {
        size: record.size,
        sha256: record.sha256,
        bytes,
        from: format!("media {}", record.id.as_str()),
    })
}

fn too_large(size: u64, cap: u64) -> ToolError {
    ToolError::new(
        Code::TooLarge,
        format!("the content has {size} bytes, over the {cap} a push may carry; nothing was sent"),
    )
}
