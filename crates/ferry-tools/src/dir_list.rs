//! `dir_list` under the rules of spec nodes.md `dir_list`, for the workspace and for a
//! node alike: sorted by name (bytes), complete names only, an 8192-byte text budget that
//! counts the wrapper, and page tokens bound to the folder they came from.

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
    let max = page_size(args.max_entries)?;
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
    let after = start_after(args.page_token.as_deref(), &folder.path)?;
    // One more than the page, to know whether entries remain after it.
    let (mut candidates, total) =
        tools
            .requester()
            .list_page(&args.path, after.as_deref(), Some(max + 1))?;
    let more_beyond = candidates.len() > max;
    candidates.truncate(max);
    Ok(Page {
        source: SOURCE,
        header: format!("{} ({total} entries in all)", folder.path),
        binding: &folder.path,
        path: &folder.path,
        candidates: &candidates,
        more_beyond,
        page_token: args.page_token.as_deref(),
    }
    .render())
}

/// How many entries a page holds: the default, or the caller's number clamped to the
/// ceiling; 0 is refused.
pub(crate) fn page_size(max_entries: Option<u64>) -> Result<usize, ToolError> {
    match max_entries {
        Some(0) => Err(ToolError::new(
            Code::InvalidArguments,
            "maxEntries must be at least 1",
        )),
        Some(n) => Ok(n.min(DIR_LIST_MAX_ENTRIES) as usize),
        None => Ok(DIR_LIST_DEFAULT_ENTRIES as usize),
    }
}

/// The name a page starts after, from a token that must have been made for `binding`.
pub(crate) fn start_after(token: Option<&str>, binding: &str) -> Result<Option<String>, ToolError> {
    token
        .map(|token| {
            let raw = decode_token(token, binding)?;
            String::from_utf8(raw).map_err(|_| bad_token())
        })
        .transpose()
}

/// One page of a listing, about to be shown.
pub(crate) struct Page<'a> {
    /// The wrapper's `source`.
    pub source: &'a str,
    /// The first line of the text (the folder, and what is known of its size).
    pub header: String,
    /// What page tokens are bound to: the folder, and for a node the node too.
    pub binding: &'a str,
    /// The folder as the structured result names it.
    pub path: &'a str,
    /// The entries that may be shown, in order; at most a page.
    pub candidates: &'a [FileInfo],
    /// Whether entries remain after the candidates.
    pub more_beyond: bool,
    /// The token the call was given.
    pub page_token: Option<&'a str>,
}

impl Page<'_> {
    /// The text within the budget and the structured result with every shown entry.
    pub fn render(self) -> ToolOutput {
        let candidates = self.candidates;
        let remaining_after = |shown: usize| shown < candidates.len() || self.more_beyond;
        let wrapper = overhead(self.source);
        let mut body = format!("{}\n", self.header);
        let mut shown = 0;
        for entry in candidates {
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
            .then(|| encode_token(self.binding, &candidates[shown - 1].path));
        let mut text = wrap(self.source, body.trim_end());
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
        ToolOutput::text(text).with_structured(json!({
            "path": self.path,
            "entries": returned.iter().map(|e| json!({
                "name": e.path,
                "isDir": e.kind == Kind::Dir,
                "size": e.size,
                "mtime": e.mtime,
                "mode": format!("{:04o}", e.mode),
            })).collect::<Vec<_>>(),
            "pageToken": self.page_token,
            "nextPageToken": next,
        }))
    }
}

fn line_of(entry: &FileInfo) -> String {
    let name = in_text(&entry.path);
    match entry.kind {
        Kind::Dir => format!("{name}/\n"),
        Kind::Symlink => format!("{name} (symlink)\n"),
        Kind::Other => format!("{name} (not a file)\n"),
        Kind::File => format!("{name}  {} B\n", entry.size),
    }
}

/// A name as a line of text shows it: as it is, unless it holds what would break the
/// line or hide its spelling (a newline, an escape, a bidirectional override, a
/// backslash) or starts with a quote; then as a quoted, escaped string (`"a\nb"`), which
/// still spells it exactly.
pub(crate) fn in_text(name: &str) -> std::borrow::Cow<'_, str> {
    // Printable ASCII but for `"` and `\\` is what `{:?}` leaves as it is: most names.
    if name
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        return std::borrow::Cow::Borrowed(name);
    }
    let escaped = format!("{name:?}");
    if escaped.len() == name.len() + 2 && !name.starts_with('"') {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(escaped)
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
pub(crate) fn encode_token(folder: &str, last: &str) -> String {
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

pub(crate) fn decode_token(token: &str, folder: &str) -> Result<Vec<u8>, ToolError> {
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
    fn names_that_would_break_a_line_are_shown_quoted_and_exact() {
        assert_eq!(in_text("plain ü.txt"), "plain ü.txt");
        assert_eq!(in_text("a\nb  1 B"), "\"a\\nb  1 B\"");
        assert_eq!(in_text("x\u{202e}txt.exe"), "\"x\\u{202e}txt.exe\"");
        assert_eq!(in_text("e\u{1b}[31m"), "\"e\\u{1b}[31m\"");
        assert_eq!(in_text("\"quoted\""), "\"\\\"quoted\\\"\"");
    }

    /// The quick way for plain names gives what the rule gives, for every ASCII character.
    #[test]
    fn plain_names_are_shown_as_debug_formatting_would() {
        for byte in 0u8..=127 {
            let name = format!("a{}b", byte as char);
            let escaped = format!("{name:?}");
            let by_rule = if escaped.len() == name.len() + 2 {
                name.clone()
            } else {
                escaped
            };
            assert_eq!(in_text(&name), by_rule, "byte {byte}");
        }
        assert_eq!(in_text("\"hi"), "\"\\\"hi\"");
    }

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
