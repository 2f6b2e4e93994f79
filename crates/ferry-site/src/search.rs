//! Finding things under a workspace's `public/` (spec members M-DAILY "Find things"): by
//! name, case- and accent-insensitively, and inside text files when asked.
//!
//! Like the rest of `public.rs`, this runs as the person (in their worker in host mode)
//! and never follows a link: folders are opened one component at a time with no link
//! followed, files with `Follow::Never`, and a link is matched by its own name only.

use std::io::Read;

use ferry_config::limits::{
    LIST_MAX_DEPTH, SEARCH_CONTENT_FILE_MAX_BYTES, SEARCH_CONTENT_MAX_TOTAL_BYTES,
    SEARCH_LINE_MAX_BYTES, SEARCH_MAX_ENTRIES, SEARCH_MAX_RESULTS, SEARCH_QUERY_MAX_BYTES,
};
use ferry_fs::{Dir, EntryKind, Follow, FsError, Metadata, is_temporary};
use memchr::memmem::Finder;
use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::SiteError;
use crate::layout::PUBLIC_DIR_NAME;
use crate::public::{NodeKind, PublicFolder};
use crate::time::rfc3339;

/// A search query, checked and folded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchQuery {
    /// The query folded as names are ([`fold`]); never empty.
    folded: String,
}

impl SearchQuery {
    /// Checks `query` (not empty, at most [`SEARCH_QUERY_MAX_BYTES`]) and folds it. Every
    /// character is taken literally: `.*` finds a name containing `.*`.
    pub fn parse(query: &str) -> Result<SearchQuery, SiteError> {
        if query.len() > SEARCH_QUERY_MAX_BYTES {
            return Err(SiteError::BadQuery(format!(
                "the search query is {} bytes; at most {SEARCH_QUERY_MAX_BYTES} are accepted",
                query.len()
            )));
        }
        let folded = fold(query);
        if folded.trim().is_empty() {
            return Err(SiteError::BadQuery(
                "the search query is empty; type part of a name or a phrase".to_owned(),
            ));
        }
        Ok(SearchQuery { folded })
    }

    /// The query as it is matched.
    pub fn folded(&self) -> &str {
        &self.folded
    }
}

/// Folds `text` for matching: compatibility decomposition (NFKD), combining marks
/// dropped, lowercase. `Relatório` and `RELATORIO` both fold to `relatorio`, `ﬁ` to `fi`.
pub fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.nfkd().filter(|c| !is_combining_mark(*c)) {
        // Lowercasing may itself give a combining mark (İ → i + U+0307).
        out.extend(c.to_lowercase().filter(|c| !is_combining_mark(*c)));
    }
    out
}

/// What one search found.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SearchResults {
    /// The matches, by path.
    pub results: Vec<Found>,
    /// Set when more matched than the results hold, or a limit stopped the search early.
    #[serde(default)]
    #[schema(required = true)]
    pub truncated: bool,
}

/// One match.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = SearchMatch)]
pub struct Found {
    /// Where the entry lies, from `public/` on.
    pub path: String,
    /// The entry's own name.
    pub name: String,
    /// Whether it is a file, a folder or a link.
    #[serde(rename = "type")]
    pub kind: NodeKind,
    /// Bytes in a file; absent for folders and links.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub size: Option<u64>,
    /// Last modification time, as RFC 3339.
    #[schema(format = DateTime)]
    pub mtime: String,
    /// For a file matched by its content: the first line that matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub line: Option<FoundLine>,
}

/// The line of a file that matched a content search.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct FoundLine {
    /// Its number, from 1.
    pub number: u64,
    /// The line, or an excerpt around the match (`…` where cut); control characters as spaces.
    pub text: String,
}

impl PublicFolder {
    /// Finds the entries under `public/` whose names contain `query` and, with `content`,
    /// the text files (under [`SEARCH_CONTENT_FILE_MAX_BYTES`]) whose content does.
    /// Links are matched by name and never followed; temporaries are never shown.
    pub fn search(&self, query: &SearchQuery, content: bool) -> Result<SearchResults, SiteError> {
        let mut search = Search {
            query,
            finder: Finder::new(query.folded.as_bytes()).into_owned(),
            content,
            found: SearchResults::default(),
            entries_left: SEARCH_MAX_ENTRIES,
            content_left: SEARCH_CONTENT_MAX_TOTAL_BYTES,
            buffer: Vec::new(),
            lowered: Vec::new(),
        };
        // Err(Stop) means the result list is full: what was found stands.
        let _ = search.walk(self.dir(), PUBLIC_DIR_NAME, 0)?;
        search.found.results.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(search.found)
    }
}

/// The result list is full and one more matched: the walk ends.
struct Stop;

struct Search<'q> {
    query: &'q SearchQuery,
    finder: Finder<'static>,
    content: bool,
    found: SearchResults,
    entries_left: usize,
    content_left: u64,
    /// A file's content, reused from file to file.
    buffer: Vec<u8>,
    /// Its ASCII-lowercased copy, reused likewise.
    lowered: Vec<u8>,
}

impl Search<'_> {
    fn walk(&mut self, dir: &Dir, path: &str, depth: usize) -> Result<Result<(), Stop>, SiteError> {
        let mut entries: Vec<(String, EntryKind)> = dir
            .kinds()?
            .into_iter()
            .filter(|(name, kind)| !is_temporary(name) && *kind != EntryKind::Other)
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        if entries.len() > self.entries_left {
            self.found.truncated = true;
            entries.truncate(self.entries_left);
        }
        self.entries_left -= entries.len();
        for (name, kind) in entries {
            let child_path = || format!("{path}/{name}");
            if name_matches(&name, &self.query.folded) {
                if let Some(found) = described(dir, &name, &child_path())
                    && let Err(stop) = self.push(found)
                {
                    return Ok(Err(stop));
                }
            } else if self.content
                && kind == EntryKind::File
                && let Some(found) = self.in_content(dir, &name, &child_path())?
                && let Err(stop) = self.push(found)
            {
                return Ok(Err(stop));
            }
            if kind != EntryKind::Dir {
                continue;
            }
            if depth + 1 >= LIST_MAX_DEPTH {
                self.found.truncated = true;
                continue;
            }
            match dir.open_dir(&name, Follow::Never) {
                Ok(child) => {
                    if let Err(stop) = self.walk(&child, &child_path(), depth + 1)? {
                        return Ok(Err(stop));
                    }
                }
                // Replaced by a link or removed since it was read, or closed to its owner.
                Err(FsError::PathEscapes | FsError::NotFound | FsError::PermissionDenied) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Ok(()))
    }

    fn push(&mut self, found: Found) -> Result<(), Stop> {
        if self.found.results.len() >= SEARCH_MAX_RESULTS {
            self.found.truncated = true;
            return Err(Stop);
        }
        self.found.results.push(found);
        Ok(())
    }

    /// The file `name` as a match when it is text and its content holds the query.
    fn in_content(
        &mut self,
        dir: &Dir,
        name: &str,
        path: &str,
    ) -> Result<Option<Found>, SiteError> {
        let file = match dir.open_file(name, Follow::Never) {
            Ok(file) => file,
            // Gone, swapped for a link or a FIFO, or closed to its owner: not searched.
            Err(
                FsError::NotFound
                | FsError::PathEscapes
                | FsError::NotRegular
                | FsError::IsDirectory
                | FsError::PermissionDenied,
            ) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let meta = Metadata::of_file(&file)?;
        if meta.size == 0 || meta.size > SEARCH_CONTENT_FILE_MAX_BYTES {
            return Ok(None);
        }
        if meta.size > self.content_left {
            self.found.truncated = true;
            return Ok(None);
        }
        self.buffer.clear();
        // One byte past the cap tells a file that grew since its size was read.
        file.take(SEARCH_CONTENT_FILE_MAX_BYTES + 1)
            .read_to_end(&mut self.buffer)
            .map_err(FsError::Io)?;
        self.content_left = self.content_left.saturating_sub(self.buffer.len() as u64);
        if self.buffer.len() as u64 > SEARCH_CONTENT_FILE_MAX_BYTES {
            return Ok(None);
        }
        // ASCII is searched first and sniffed only when it matches: most files do not.
        // Anything else is sniffed first, so binary is never folded line by line.
        let line = if self.buffer.is_ascii() {
            match self.matching_line() {
                Some(line) if ferry_preview::is_text(&self.buffer, name) => line,
                _ => return Ok(None),
            }
        } else {
            if !ferry_preview::is_text(&self.buffer, name) {
                return Ok(None);
            }
            match self.matching_line() {
                Some(line) => line,
                None => return Ok(None),
            }
        };
        Ok(Some(Found {
            path: path.to_owned(),
            name: name.to_owned(),
            kind: NodeKind::File,
            size: Some(meta.size),
            mtime: rfc3339(meta.mtime),
            line: Some(line),
        }))
    }

    /// The first line of the buffer that holds the query, folded.
    fn matching_line(&mut self) -> Option<FoundLine> {
        let bytes = &self.buffer;
        if bytes.is_ascii() {
            // ASCII folds to its lowercase alone: one pass over the whole file.
            if !self.query.folded.is_ascii() {
                return None;
            }
            self.lowered.clear();
            self.lowered
                .extend(bytes.iter().map(u8::to_ascii_lowercase));
            let at = self.finder.find(&self.lowered)?;
            let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
            let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
            let number = memchr::memchr_iter(b'\n', &bytes[..start]).count() as u64 + 1;
            let line = std::str::from_utf8(&bytes[start..end]).unwrap_or_default();
            return Some(FoundLine {
                number,
                text: excerpt(line, at - start),
            });
        }
        let text = String::from_utf8_lossy(bytes);
        text.split('\n')
            .enumerate()
            .find(|(_, line)| fold(line).contains(&self.query.folded))
            .map(|(i, line)| FoundLine {
                number: i as u64 + 1,
                text: excerpt(line, locate(line, &self.query.folded)),
            })
    }
}

/// Whether the name `name` holds the folded query; ASCII names are folded without
/// allocating.
fn name_matches(name: &str, folded: &str) -> bool {
    if name.is_ascii() && folded.is_ascii() {
        let (name, folded) = (name.as_bytes(), folded.as_bytes());
        return folded.len() <= name.len()
            && name
                .windows(folded.len())
                .any(|w| w.eq_ignore_ascii_case(folded));
    }
    fold(name).contains(folded)
}

/// The byte in `line` where `folded` (a folded query) begins once `line` is folded; 0
/// when folding character by character does not find it.
fn locate(line: &str, folded: &str) -> usize {
    let mut text = String::with_capacity(line.len());
    let mut origin = Vec::with_capacity(line.len());
    let mut one = [0u8; 4];
    for (at, c) in line.char_indices() {
        text.push_str(&fold(c.encode_utf8(&mut one)));
        origin.resize(text.len(), at);
    }
    text.find(folded).map_or(0, |i| origin[i])
}

/// An entry matched by name, described without following a link; none when it is gone.
fn described(dir: &Dir, name: &str, path: &str) -> Option<Found> {
    let meta = dir.metadata(name).ok()?;
    let (kind, size) = match meta.kind {
        EntryKind::Dir => (NodeKind::Dir, None),
        EntryKind::Symlink => (NodeKind::Link, None),
        EntryKind::File => (NodeKind::File, Some(meta.size)),
        EntryKind::Other => return None,
    };
    Some(Found {
        path: path.to_owned(),
        name: name.to_owned(),
        kind,
        size,
        mtime: rfc3339(meta.mtime),
        line: None,
    })
}

/// `line` as shown: at most [`SEARCH_LINE_MAX_BYTES`], starting a little before the byte
/// `at` where the match is, cut on character boundaries, control characters as spaces.
fn excerpt(line: &str, at: usize) -> String {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let floor = |mut i: usize| {
        while i > 0 && !line.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let (mut start, mut end) = (0, line.len());
    if line.len() > SEARCH_LINE_MAX_BYTES {
        start = floor(at.min(line.len()).saturating_sub(SEARCH_LINE_MAX_BYTES / 4));
        end = floor((start + SEARCH_LINE_MAX_BYTES).min(line.len()));
    }
    let mut out = String::with_capacity(end - start + 8);
    if start > 0 {
        out.push('…');
    }
    out.extend(
        line[start..end]
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c }),
    );
    if end < line.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_ignores_case_accents_and_compatibility_forms() {
        assert_eq!(fold("Relatório FINAL"), "relatorio final");
        assert_eq!(fold("ÉCOLE"), "ecole");
        assert_eq!(fold("ﬁle"), "file");
        assert_eq!(fold("İstanbul"), "istanbul");
        assert_eq!(fold("Crème Brûlée"), "creme brulee");
    }

    #[test]
    fn query_length_is_tested_at_its_limit() {
        let at = "a".repeat(SEARCH_QUERY_MAX_BYTES);
        assert!(SearchQuery::parse(&at[1..]).is_ok());
        assert!(SearchQuery::parse(&at).is_ok());
        let over = format!("{at}a");
        assert!(matches!(
            SearchQuery::parse(&over),
            Err(SiteError::BadQuery(_))
        ));
        assert!(matches!(
            SearchQuery::parse(""),
            Err(SiteError::BadQuery(_))
        ));
        assert!(matches!(
            SearchQuery::parse("\u{301}"),
            Err(SiteError::BadQuery(_))
        ));
    }

    #[test]
    fn excerpts_stay_bounded_and_on_char_boundaries() {
        let line = "é".repeat(400) + "needle" + &"ü".repeat(400);
        let at = line.find("needle").unwrap();
        let shown = excerpt(&line, at);
        assert!(shown.contains("needle"));
        assert!(shown.len() <= SEARCH_LINE_MAX_BYTES + 2 * '…'.len_utf8());
        assert!(shown.starts_with('…') && shown.ends_with('…'));
        assert_eq!(excerpt("a\tb\r", 0), "a b");
    }
}
