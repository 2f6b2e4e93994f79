//! `dir_list` over the workspace, under the rules of spec nodes.md `dir_list`: sorted
//! by name (bytes), complete names only, an 8192-byte text budget that counts the
//! wrapper, and page tokens bound to the folder they came from.

use data_encoding::BASE32_NOPAD;
use ferry_codes::Code;
use ferry_exec::ops::{FileInfo, Kind};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::args::{self, DirList};
use crate::wrap::{overhead, sanitize, wrap};
use crate::{ToolError, ToolOutput, Toolbox};
use ferry_config::limits::{DIR_LIST_DEFAULT_ENTRIES, DIR_LIST_MAX_ENTRIES, MODEL_TEXT_MAX_BYTES};

const SOURCE: &str = "workspace";
/// Bytes of the folder's hash a page token carries.
const TOKEN_PATH_BYTES: usize = 8;

pub(crate) fn dir_list(tools: &Toolbox, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    let args: DirList = args::parse("dir_list", args)?;
    let max = match args.max_entries {
        Some(0) => {
            return Err(ToolError::new(
                Code::InvalidArguments,
                "maxEntries must be at least 1",
            ));
        }
        Some(n) => n.min(DIR_LIST_MAX_ENTRIES),
        None => DIR_LIST_DEFAULT_ENTRIES,
    } as usize;
    let folder = tools.requester().stat(&args.path)?;
    if folder.kind != Kind::Dir {
        return Err(ToolError::new(
            Code::NotADirectory,
            format!(
                "{} is not a folder; use file_read or file_preview",
                folder.path
            ),
        ));
    }
    let after = match &args.page_token {
        Some(token) => Some(decode_token(token, &folder.path)?),
        None => None,
    };
    let after = after
        .map(|raw| String::from_utf8(raw).map_err(|_| bad_token()))
        .transpose()?;
    // One more than the page, to know whether entries remain after it.
    let (mut candidates, total) =
        tools
            .requester()
            .list_page(&args.path, after.as_deref(), Some(max + 1))?;
    let more_beyond = candidates.len() > max;
    candidates.truncate(max);
    let remaining_after = |shown: usize| shown < candidates.len() || more_beyond;

    let wrapper = overhead(SOURCE);
    let mut body = format!("{} ({total} entries in all)\n", folder.path);
    let mut shown = 0;
    for entry in &candidates {
        // Measured as it will be shown: marker look-alikes in a name are neutralized.
        let line = sanitize(&line_of(entry));
        let token_room = if remaining_after(shown + 1) {
            token_line_len(&entry.path)
        } else {
            0
        };
        if wrapper + body.len() + line.len() + token_room > MODEL_TEXT_MAX_BYTES {
            break;
        }
        body.push_str(&line);
        shown += 1;
    }
    let next = (shown > 0 && remaining_after(shown))
        .then(|| encode_token(&folder.path, &candidates[shown - 1].path));
    let mut text = wrap(SOURCE, body.trim_end());
    let mut returned: Vec<&FileInfo> = candidates[..shown].iter().collect();
    if shown == 0 && !candidates.is_empty() {
        text.push_str(
            "\nThe next entry's name is too long to show within the 8192-byte budget, so \
             pagination cannot advance; its complete metadata is in the structured result.",
        );
        returned.push(&candidates[0]);
    } else if let Some(token) = &next {
        text.push_str(&format!("\nnextPageToken: {token}"));
    }
    Ok(ToolOutput::text(text).with_structured(json!({
        "path": folder.path,
        "entries": returned.iter().map(|e| json!({
            "name": e.path,
            "isDir": e.kind == Kind::Dir,
            "size": e.size,
            "mtime": e.mtime,
            "mode": format!("{:04o}", e.mode),
        })).collect::<Vec<_>>(),
        "pageToken": args.page_token,
        "nextPageToken": next,
    })))
}

fn line_of(entry: &FileInfo) -> String {
    match entry.kind {
        Kind::Dir => format!("{}/\n", entry.path),
        Kind::Symlink => format!("{} (symlink)\n", entry.path),
        _ => format!("{}  {} B\n", entry.path, entry.size),
    }
}

/// The length of the token line after `last`, without making the token.
fn token_line_len(last: &str) -> usize {
    "\nnextPageToken: ".len() + BASE32_NOPAD.encode_len(TOKEN_PATH_BYTES + last.len())
}

fn folder_hash(folder: &str) -> [u8; TOKEN_PATH_BYTES] {
    let digest = Sha256::digest(folder.as_bytes());
    let mut out = [0u8; TOKEN_PATH_BYTES];
    out.copy_from_slice(&digest[..TOKEN_PATH_BYTES]);
    out
}

/// The folder's hash, then the last displayed name: the next page starts after it.
fn encode_token(folder: &str, last: &str) -> String {
    let mut raw = folder_hash(folder).to_vec();
    raw.extend_from_slice(last.as_bytes());
    BASE32_NOPAD.encode(&raw).to_ascii_lowercase()
}

fn bad_token() -> ToolError {
    ToolError::new(
        Code::BadPageToken,
        "pageToken does not belong to this folder; pass back the nextPageToken of a \
         dir_list with the same path, or omit it to start over",
    )
}

fn decode_token(token: &str, folder: &str) -> Result<Vec<u8>, ToolError> {
    let raw = BASE32_NOPAD
        .decode(token.to_ascii_uppercase().as_bytes())
        .map_err(|_| bad_token())?;
    if raw.len() <= TOKEN_PATH_BYTES || raw[..TOKEN_PATH_BYTES] != folder_hash(folder) {
        return Err(bad_token());
    }
    Ok(raw[TOKEN_PATH_BYTES..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bound_to_their_folder() {
        let token = encode_token("/w/a", "file.txt");
        assert_eq!(decode_token(&token, "/w/a").unwrap(), b"file.txt");
        assert_eq!(
            decode_token(&token, "/w/b").unwrap_err().code,
            "bad_page_token"
        );
        assert_eq!(
            decode_token("!!", "/w/a").unwrap_err().code,
            "bad_page_token"
        );
    }
}
