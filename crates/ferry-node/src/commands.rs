//! The transfer commands a node serves (spec N-PAIR, N-TOOLS), as they travel on the
//! link: each command's arguments, the head of its answer, and what its body holds.
//!
//! Both ends parse these strictly (`deny_unknown_fields`), so a field one end does not
//! know is refused rather than ignored. Paths are absolute paths on the node; the node
//! answers with the canonical path it acted on, which the gateway checks against its own
//! policy again. Every body that carries file bytes is a *checked body* ([`crate::checked`]):
//! the bytes, then their length and sha256, which the receiver verifies.
//!
//! | command | args | answer head | body |
//! |---|---|---|---|
//! | `dir.list` | [`DirListArgs`] | [`DirListHead`] | JSON lines, one [`NodeEntry`] each |
//! | `file.stat` | [`FileStatArgs`] | [`NodeEntry`] (`name` is the canonical path) | none |
//! | `file.fetch` | [`FileFetchArgs`] | [`FetchHead`] | checked: the file's bytes |
//! | `file.push` | [`FilePushArgs`] + checked request body | [`PushResult`] | none |
//! | `dir.fetch` | [`DirFetchArgs`] | [`DirFetchHead`] | checked: a gzip tar of the tree |

use crate::policy::SentRules;
use serde::{Deserialize, Serialize};

/// Lists a folder.
pub const DIR_LIST: &str = "dir.list";
/// Describes one path.
pub const FILE_STAT: &str = "file.stat";
/// Streams one regular file.
pub const FILE_FETCH: &str = "file.fetch";
/// Writes one regular file atomically.
pub const FILE_PUSH: &str = "file.push";
/// Streams a folder's tree as a gzip tar.
pub const DIR_FETCH: &str = "dir.fetch";

/// Most bytes of one JSON line of a `dir.list` body (a name is at most 255 bytes on the
/// file systems nodes run on; escaping can at most sextuple it).
pub const ENTRY_LINE_MAX_BYTES: usize = 4096;

/// What a path is on the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else: a device, a FIFO, a socket.
    Other,
}

/// One entry of a listing, or the answer of `file.stat`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeEntry {
    /// The entry's complete name (for `file.stat`: the canonical path).
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Its size in bytes (0 for what is not a regular file).
    pub size: u64,
    /// Its modification time, in seconds since the Unix epoch.
    pub mtime: i64,
    /// Its permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

impl NodeEntry {
    /// Whether the entry is a folder.
    pub fn is_dir(&self) -> bool {
        self.kind == EntryKind::Dir
    }
}

/// `dir.list`: the entries of the folder at `path`, sorted by name in byte order,
/// starting after `after`, at most `limit`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirListArgs {
    /// The folder, an absolute path.
    pub path: String,
    /// Start after this name (exclusive); none: from the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Most entries to send.
    pub limit: u32,
    /// Whether a link on the way (the last component included) may be followed; the
    /// node follows only when its own policy allows it too.
    #[serde(default)]
    pub follow_symlinks: bool,
    /// The gateway's read rules: the node lists only what they allow too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_rules: Option<SentRules>,
}

/// The head of a `dir.list` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirListHead {
    /// The folder's canonical path.
    pub path: String,
    /// Entries in the body.
    pub count: u32,
    /// Whether entries remain after the last one sent.
    pub more: bool,
    /// Entries left out of every page because their names are not UTF-8 (a name is
    /// never shown altered).
    #[serde(default)]
    pub unlisted: u64,
}

/// `file.stat`: what is at `path`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileStatArgs {
    /// An absolute path.
    pub path: String,
    /// As in [`DirListArgs::follow_symlinks`].
    #[serde(default)]
    pub follow_symlinks: bool,
}

/// `file.fetch`: the regular file at `path`, if it has at most `max_bytes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileFetchArgs {
    /// An absolute path.
    pub path: String,
    /// The most bytes the gateway takes; a larger file is refused (`file_too_large`).
    pub max_bytes: u64,
    /// As in [`DirListArgs::follow_symlinks`].
    #[serde(default)]
    pub follow_symlinks: bool,
}

/// The head of a `file.fetch` answer; the checked body follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FetchHead {
    /// The file's canonical path.
    pub path: String,
    /// Its size, as the body will carry it.
    pub size: u64,
    /// Its modification time, in seconds since the Unix epoch.
    pub mtime: i64,
    /// Its permission bits.
    pub mode: u32,
}

/// `file.push`: write the request's checked body to `path` atomically.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilePushArgs {
    /// An absolute path.
    pub path: String,
    /// The body's length (checked again against its trailer).
    pub size: u64,
    /// The body's sha256, lowercase hex.
    pub sha256: String,
    /// Replace a file already there (otherwise `exists`).
    #[serde(default)]
    pub overwrite: bool,
    /// Make missing parent folders.
    #[serde(default)]
    pub create_parents: bool,
    /// Whether links on the way may be followed (as in [`DirListArgs`]).
    #[serde(default)]
    pub follow_symlinks: bool,
    /// The gateway's write rules, which the node applies to the canonical path as well
    /// as its own, before it writes anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_rules: Option<SentRules>,
}

/// The answer of `file.push`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushResult {
    /// The canonical path written.
    pub path: String,
    /// Bytes written.
    pub size: u64,
    /// Their sha256, lowercase hex.
    pub sha256: String,
    /// Whether a file was replaced.
    pub replaced: bool,
}

/// `dir.fetch`: the tree under `path` as a gzip tar of regular files and folders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirFetchArgs {
    /// The folder, an absolute path.
    pub path: String,
    /// The most bytes of the gzip tar the gateway takes.
    pub max_bytes: u64,
    /// The most descendants (files and folders, each implicit parent once).
    pub max_descendants: u64,
    /// As in [`DirListArgs::follow_symlinks`] (for the root; links inside the tree are
    /// never followed: they are left out and counted in [`DirFetchHead::skipped`]).
    #[serde(default)]
    pub follow_symlinks: bool,
}

/// The head of a `dir.fetch` answer; the checked gzip tar follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirFetchHead {
    /// The folder's canonical path.
    pub path: String,
    /// Files and folders in the archive (the root not counted).
    pub descendants: u64,
    /// Entries of the tree left out because they are neither regular files nor
    /// folders (links, devices, FIFOs, sockets); none is ever followed.
    pub skipped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_field_is_refused() {
        let parsed: Result<FileFetchArgs, _> = serde_json::from_value(serde_json::json!({
            "path": "/a", "maxBytes": 1, "extra": true
        }));
        assert!(parsed.is_err());
    }

    #[test]
    fn names_travel_in_camel_case() {
        let args = DirListArgs {
            path: "/srv".into(),
            after: None,
            limit: 5,
            follow_symlinks: true,
            gateway_rules: None,
        };
        assert_eq!(
            serde_json::to_value(&args).unwrap(),
            serde_json::json!({"path": "/srv", "limit": 5, "followSymlinks": true})
        );
        let args = DirListArgs {
            gateway_rules: Some(SentRules {
                allow: vec!["/srv/**".into()],
                deny: vec![],
            }),
            ..args
        };
        assert_eq!(
            serde_json::to_value(&args).unwrap()["gatewayRules"],
            serde_json::json!({"allow": ["/srv/**"], "deny": []})
        );
    }
}
