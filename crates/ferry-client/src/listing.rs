//! The Files panel's tree as the gateway sends it (M-LIST), and walking it.

use serde::Deserialize;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link, never followed.
    Link,
    /// Anything else the gateway may list later.
    #[serde(other)]
    Other,
}

impl EntryKind {
    /// The word the gateway uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Link => "link",
            EntryKind::Other => "other",
        }
    }
}

/// One entry of the tree.
#[derive(Debug, Clone, Deserialize)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// Its path from the workspace, `public/…`.
    pub path: String,
    /// What it is.
    #[serde(rename = "type")]
    pub kind: EntryKind,
    /// Its size in bytes (files).
    #[serde(default)]
    pub size: Option<u64>,
    /// When it last changed (RFC 3339).
    #[serde(default)]
    pub mtime: Option<String>,
    /// A folder's entries.
    #[serde(default)]
    pub children: Vec<Entry>,
}

/// `GET /v1/files`.
#[derive(Debug, Clone, Deserialize)]
pub struct Listing {
    /// Always `public`.
    pub root: String,
    /// The project listed, if any.
    pub project: Option<String>,
    /// The top-level entries.
    pub entries: Vec<Entry>,
    /// Set when the gateway cut a very large tree short.
    #[serde(default)]
    pub truncated: bool,
}

impl Listing {
    /// The entries at and under `path` (`public` for all), depth first, each with its
    /// depth below `path`; `None` when nothing is at `path`.
    pub fn under(&self, path: &str) -> Option<Vec<(usize, &Entry)>> {
        let path = path.trim_end_matches('/');
        let mut out = Vec::new();
        if path == self.root || path.is_empty() {
            for entry in &self.entries {
                walk(entry, 0, &mut out);
            }
            return Some(out);
        }
        let found = find(&self.entries, path)?;
        if found.kind == EntryKind::Dir {
            for child in &found.children {
                walk(child, 0, &mut out);
            }
        } else {
            out.push((0, found));
        }
        Some(out)
    }
}

fn walk<'a>(entry: &'a Entry, depth: usize, out: &mut Vec<(usize, &'a Entry)>) {
    out.push((depth, entry));
    for child in &entry.children {
        walk(child, depth + 1, out);
    }
}

fn find<'a>(entries: &'a [Entry], path: &str) -> Option<&'a Entry> {
    for entry in entries {
        if entry.path == path {
            return Some(entry);
        }
        if entry.kind == EntryKind::Dir
            && path.starts_with(&entry.path)
            && path.as_bytes().get(entry.path.len()) == Some(&b'/')
        {
            return find(&entry.children, path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> Listing {
        serde_json::from_str(
            r#"{"root":"public","project":null,"entries":[
              {"name":"a","path":"public/a","type":"dir","children":[
                {"name":"b.txt","path":"public/a/b.txt","type":"file","size":3,"mtime":"2026-01-01T00:00:00Z"}]},
              {"name":"ab","path":"public/ab","type":"dir","children":[]},
              {"name":"l","path":"public/l","type":"link"},
              {"name":"x","path":"public/x","type":"socket"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn finds_entries_by_path_not_by_prefix() {
        let l = listing();
        let all = l.under("public").unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(all[1].0, 1);
        let a = l.under("public/a/").unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].1.name, "b.txt");
        assert!(l.under("public/ab").unwrap().is_empty());
        assert_eq!(l.under("public/a/b.txt").unwrap()[0].1.size, Some(3));
        assert!(l.under("public/a/c").is_none());
        assert!(l.under("public/abc").is_none());
        assert_eq!(l.under("public/x").unwrap()[0].1.kind, EntryKind::Other);
    }
}
