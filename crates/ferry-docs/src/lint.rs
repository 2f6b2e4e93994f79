//! The check on documents shipped to agents (spec M-DOCS).
//!
//! Behind `ferry docs check DIR` and the regression test over the shipped
//! skills and memory documents. Two rules, both per document:
//!
//! 1. **It names `public/attachments`.** A document that never contains the
//!    literal text `public/attachments` gives one violation, without a line.
//! 2. **No line points a write at `uploads/`.** `uploads/` is the legacy name of
//!    `public/` (spec M-MIGRATE); an agent that writes there creates the very
//!    folder the migration removes. Call *bare `uploads`* the word `uploads`
//!    (any case) not joined to a longer word: no letter, digit, `-`, `_` or `.`
//!    right before it, and no letter, digit, `-`, `_` or `.`+letter/digit right
//!    after it (so not `file-uploads-guide`, `uploads.md`, `myuploads`). A line
//!    is a violation when it contains a bare `uploads`, is **not a
//!    prohibition**, and
//!    - (a) **a path with a write verb**: some bare `uploads` has `/` or `\` on
//!      at least one side (`uploads/`, `./uploads`, `~/uploads`, `/uploads/`,
//!      `$HOME/uploads`) and the line contains one of the whole words in
//!      [`WRITE_VERBS`] (save, write, deliver, put, copy, move, store, place,
//!      create, upload, export, send, drop, keep, … with their inflections), or
//!    - (b) **a shell write**: the line contains one of the whole words in
//!      [`SHELL_COMMANDS`] (`cp`, `mv`, `mkdir`, `tee`, `touch`, `rsync`,
//!      `install`, `ln`), or a bare `uploads` is the target of a redirect
//!      (`>` or `>>` before its path; a leading Markdown `>` quote marker does
//!      not count). Here even `mkdir -p uploads` without a slash is caught.
//!
//!    A line is a prohibition when it contains one of the whole words "never",
//!    "don't", "mustn't" or the word pairs "do not", "must not" (any case,
//!    typographic apostrophes included). Verbs and commands are compared as
//!    words after splitting the line at every character that is not a letter
//!    or digit, with each bare `uploads` blanked out first (so it never counts
//!    as the verb "uploads"); `file_write` thus contains the verb "write".
//!
//! The rule is deliberately per line and errs on the side of flagging: a
//! prohibition on the previous line does not cover the next one, and
//! `cp uploads/a public/attachments/` is flagged although `uploads/` is the
//! source. Write such lines as one sentence that says "never", or leave the
//! verb out ("`uploads/` is the old name of `public/`").

use std::fmt;
use std::fs;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The text every shipped document must contain.
pub const REQUIRED_PATH: &str = "public/attachments";

/// Words that make a line mentioning an `uploads` path a write into it
/// (compared as whole, lower-cased words).
pub const WRITE_VERBS: &[&str] = &[
    "save",
    "saves",
    "saved",
    "saving",
    "write",
    "writes",
    "wrote",
    "written",
    "writing",
    "deliver",
    "delivers",
    "delivered",
    "delivering",
    "put",
    "puts",
    "putting",
    "copy",
    "copies",
    "copied",
    "copying",
    "move",
    "moves",
    "moved",
    "moving",
    "store",
    "stores",
    "stored",
    "storing",
    "place",
    "places",
    "placed",
    "placing",
    "create",
    "creates",
    "created",
    "creating",
    "upload",
    "uploads",
    "uploaded",
    "uploading",
    "export",
    "exports",
    "exported",
    "exporting",
    "output",
    "outputs",
    "send",
    "sends",
    "sent",
    "drop",
    "drops",
    "dropped",
    "dump",
    "dumps",
    "dumped",
    "keep",
    "keeps",
    "kept",
];

/// Shell commands that write to their arguments: a line with one of them (as
/// a whole, lower-cased word) and `uploads`, even without a `/`, is a write.
pub const SHELL_COMMANDS: &[&str] = &[
    "cp", "mv", "mkdir", "tee", "touch", "rsync", "install", "ln",
];

/// One problem in one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The document, as given to [`check_document`] or found by [`check_dir`].
    pub path: PathBuf,
    /// The 1-based line, or `None` for a problem of the whole document.
    pub line: Option<usize>,
    /// What is wrong and what to do instead.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Checks one document's text against the rules in the module documentation.
/// `path` is only used to label the violations.
#[must_use]
pub fn check_document(path: &Path, text: &str) -> Vec<Violation> {
    let mut violations = Vec::new();
    if !text.contains(REQUIRED_PATH) {
        violations.push(Violation {
            path: path.to_path_buf(),
            line: None,
            message: format!(
                "never names `{REQUIRED_PATH}`: tell the agent to deliver files into \
                 {REQUIRED_PATH}/"
            ),
        });
    }
    for (index, line) in text.lines().enumerate() {
        if points_write_at_uploads(line) {
            violations.push(Violation {
                path: path.to_path_buf(),
                line: Some(index + 1),
                message: "points a write at `uploads/`, the legacy name of public/: deliver \
                          into public/attachments/ instead, or word the line as a prohibition \
                          (never, do not, don't, must not)"
                    .to_owned(),
            });
        }
    }
    violations
}

/// Checks every `*.md` file under `dir` (see [`markdown_files`]), in sorted
/// path order. A file that is not valid UTF-8 is checked lossily.
///
/// # Errors
///
/// The first error listing `dir` or reading a document.
pub fn check_dir(dir: &Path) -> io::Result<Vec<Violation>> {
    let mut violations = Vec::new();
    for path in markdown_files(dir)? {
        let bytes = fs::read(&path)?;
        violations.extend(check_document(&path, &String::from_utf8_lossy(&bytes)));
    }
    Ok(violations)
}

/// The `*.md` files (extension compared case-insensitively) under `dir`,
/// recursively, sorted. Symbolic links inside the tree are never followed,
/// neither to folders nor to files; `dir` itself is taken as given. If `dir`
/// is a regular file, it alone is returned, whatever its extension.
///
/// # Errors
///
/// `dir` is missing, or a folder in the tree cannot be listed.
pub fn markdown_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    if fs::metadata(dir)?.is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder)? {
            let entry = entry?;
            // DirEntry::file_type does not follow symlinks.
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && is_markdown(&path) {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn is_markdown(path: &Path) -> bool {
    path.extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("md"))
}

/// Rule 2 of the module documentation, for one line.
fn points_write_at_uploads(line: &str) -> bool {
    let bare = bare_uploads(line);
    if bare.is_empty() || is_prohibition(line) {
        return false;
    }
    // Blank out every `uploads` itself, so that it is not read as the verb.
    let mut masked = line.to_owned().into_bytes();
    for range in &bare {
        masked[range.clone()].fill(b' ');
    }
    let masked = String::from_utf8_lossy(&masked).to_lowercase();
    let words: Vec<&str> = masked.split(|c: char| !c.is_alphanumeric()).collect();
    let has = |list: &[&str]| words.iter().any(|word| list.contains(word));

    // `mkdir uploads`, `cp a uploads`, `> uploads`: a shell write, path or not.
    if has(SHELL_COMMANDS) || bare.iter().any(|range| is_redirect_target(line, range)) {
        return true;
    }
    let separator = |c: Option<char>| matches!(c, Some('/' | '\\'));
    let path_like = bare.iter().any(|range| {
        separator(line[..range.start].chars().next_back())
            || separator(line[range.end..].chars().next())
    });
    path_like && has(WRITE_VERBS)
}

/// Byte ranges of the word `uploads` (any case) not joined to a longer word:
/// no letter, digit, `-`, `_` or `.` right before it; no letter, digit, `-`,
/// `_`, or `.` followed by a letter or digit, right after it.
fn bare_uploads(line: &str) -> Vec<Range<usize>> {
    const WORD: &str = "uploads";
    // ASCII lower-casing keeps every byte offset.
    let lower = line.to_ascii_lowercase();
    let mut found = Vec::new();
    for (start, _) in lower.match_indices(WORD) {
        let end = start + WORD.len();
        let before = line[..start].chars().next_back();
        let mut rest = line[end..].chars();
        let after = rest.next();
        let after_after = rest.next();
        let joined_before =
            before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'));
        let joined_after = after.is_some_and(|c| {
            c.is_alphanumeric()
                || matches!(c, '-' | '_')
                || (c == '.' && after_after.is_some_and(char::is_alphanumeric))
        });
        if !joined_before && !joined_after {
            found.push(start..end);
        }
    }
    found
}

/// Whether the path containing `range` is the target of `>` or `>>`.
fn is_redirect_target(line: &str, range: &Range<usize>) -> bool {
    // Step back over the rest of the path (`~/`, `./`, `$HOME/`, quotes).
    let before = line[..range.start].trim_end_matches(|c: char| {
        c.is_alphanumeric()
            || matches!(c, '/' | '\\' | '.' | '~' | '$' | '{' | '}' | '_' | '-')
            || matches!(c, '"' | '\'' | '`')
    });
    let before = before.trim_end();
    // A leading `>` with nothing else before it is a Markdown block quote.
    let quote_marker = before.chars().all(|c| c == '>' || c.is_whitespace());
    before.ends_with('>') && !quote_marker
}

/// Whether the line says "never", "do not", "don't", "must not" or "mustn't".
fn is_prohibition(line: &str) -> bool {
    let normalized = line.to_lowercase().replace(['\u{2019}', '\u{2018}'], "'");
    let words: Vec<&str> = normalized
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|word| word.trim_matches('\''))
        .filter(|word| !word.is_empty())
        .collect();
    words
        .iter()
        .any(|word| matches!(*word, "never" | "don't" | "mustn't"))
        || words
            .windows(2)
            .any(|pair| matches!(pair, ["do" | "must", "not"]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shipped::FILE_DELIVERY_MD;

    fn check(text: &str) -> Vec<Violation> {
        check_document(Path::new("doc.md"), text)
    }

    /// A document that names public/attachments, plus `line`.
    fn line_violations(line: &str) -> Vec<Violation> {
        check(&format!("Deliver into public/attachments/.\n{line}\n"))
    }

    #[test]
    fn shipped_file_delivery_md_passes() {
        assert_eq!(check(FILE_DELIVERY_MD), vec![]);
        assert!(FILE_DELIVERY_MD.contains("public/attachments/report-q2.pdf"));
    }

    #[test]
    fn document_without_public_attachments_fails() {
        let violations = check("# Notes\nSave your work in public/.\n");
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].line, None);
        assert!(violations[0].message.contains("public/attachments"));
    }

    #[test]
    fn save_to_uploads_fails() {
        let violations = line_violations("Save the file to uploads/report.pdf");
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].line, Some(2));
        assert_eq!(
            violations[0].to_string(),
            format!("doc.md:2: {}", violations[0].message)
        );
    }

    #[test]
    fn prohibition_passes() {
        assert_eq!(line_violations("Never create an uploads/ folder"), vec![]);
        assert_eq!(line_violations("Do NOT write to ./uploads"), vec![]);
        assert_eq!(
            line_violations("You don\u{2019}t save into uploads/."),
            vec![]
        );
        assert_eq!(line_violations("Agents must not mkdir uploads/"), vec![]);
    }

    #[test]
    fn cp_to_home_uploads_fails() {
        assert_eq!(line_violations("`cp out.pdf ~/uploads/`").len(), 1);
    }

    #[test]
    fn other_writes_into_uploads_fail() {
        for line in [
            "mkdir -p uploads",
            "mkdir -p ./uploads",
            "echo done > uploads/status.txt",
            "cat a >>\"$HOME/uploads/log.txt\"",
            "Deliver it into /srv/ws/uploads/.",
            "Put finished files in Uploads/",
            "Use the file_write tool on uploads/x.md",
            "Uploading to uploads\\ is fine.",
            "Please store drafts under ~/uploads.",
        ] {
            assert_eq!(line_violations(line).len(), 1, "{line}");
        }
    }

    #[test]
    fn mentions_without_a_write_pass() {
        for line in [
            "`uploads/` is the old name of `public/`; it is migrated automatically.",
            "See file-uploads-guide for the web client.",
            "Read uploads.md for the history of the folder.",
            "The member uploads files; they arrive in public/.",
            "> uploads/ was renamed to public/ in 2026.",
            "Write the report to public/attachments/report.pdf.",
            "Old paths like uploads/x.pdf now resolve under public/.",
        ] {
            assert_eq!(line_violations(line), vec![], "{line}");
        }
    }

    #[test]
    fn prohibition_is_per_line() {
        let violations = check(
            "Deliver into public/attachments/.\nNever do the following:\nsave to uploads/a.pdf\n",
        );
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].line, Some(3));
    }

    #[test]
    fn words_are_matched_whole() {
        // "undo nothing" contains "do not" only as a substring.
        assert_eq!(line_violations("undo nothing; save to uploads/a").len(), 1);
        // "placeholder" is not "place".
        assert_eq!(
            line_violations("a placeholder for uploads/ history"),
            vec![]
        );
    }

    #[test]
    fn display_without_line() {
        let violation = Violation {
            path: PathBuf::from("skills/pdf/SKILL.md"),
            line: None,
            message: "m".to_owned(),
        };
        assert_eq!(violation.to_string(), "skills/pdf/SKILL.md: m");
    }

    #[test]
    fn check_dir_reports_the_bad_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("memory").join("GOOD.md");
        let bad = dir.path().join("skills").join("report").join("SKILL.md");
        fs::create_dir_all(good.parent().unwrap()).unwrap();
        fs::create_dir_all(bad.parent().unwrap()).unwrap();
        fs::write(&good, "Deliver into public/attachments/.\n").unwrap();
        fs::write(
            &bad,
            "Write into public/attachments/.\nThen copy it to uploads/ too.\n",
        )
        .unwrap();
        // Not markdown: not checked.
        fs::write(dir.path().join("notes.txt"), "save to uploads/x").unwrap();

        let violations = check_dir(dir.path()).unwrap();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].path, bad);
        assert_eq!(violations[0].line, Some(2));
        assert_eq!(markdown_files(dir.path()).unwrap(), vec![good, bad]);
    }

    #[cfg(unix)]
    #[test]
    fn check_dir_does_not_follow_symlinks() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("BAD.md"), "nothing here").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("linked-dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("BAD.md"), dir.path().join("LINK.md"))
            .unwrap();
        assert_eq!(check_dir(dir.path()).unwrap(), vec![]);
        assert_eq!(markdown_files(dir.path()).unwrap(), Vec::<PathBuf>::new());
    }

    #[test]
    fn check_dir_on_missing_dir_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_dir(&dir.path().join("absent")).is_err());
    }
}
