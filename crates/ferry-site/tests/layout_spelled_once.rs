//! The layout is spelled once (`ferry_site::layout`): no other source file of the
//! workspace spells a path of the site's layout. A new spelling fails here; ask the
//! layout module instead.

use std::path::{Path, PathBuf};

use ferry_site::layout;

/// Spellings of the layout's paths, as they would appear in Rust source.
const SPELLINGS: &[&str] = &[
    "\".ferry\"",
    "\".ferry/",
    "\"home\"",
    "\"home/",
    "join(\"home\")",
    "\"private\"",
    "\"private/people",
    "\"people\"",
    "\"public\"",
    "\"public/",
    "\"attachments\"",
    "\"projects\"",
    "\"uploads\"",
    "\"memory\"",
    "\"skills\"",
    "\"circles\"",
    "\"circles/",
    "\"shared\"",
    "\"shared/",
    "\"tmp/terminal-output",
    "\"terminal-output",
    "\"tmp/picks",
];

/// Files that may spell a layout path, with why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "ferry-site/src/layout.rs",
        "the one place the layout is spelled",
    ),
    (
        "ferry-docs/src/lint.rs",
        "the M-DOCS check looks for the words documents must or must not carry; \
         `layout_and_docs_check_agree` below ties them to the layout",
    ),
    (
        "ferry-site/src/db.rs",
        "the metadata schema's migrations name tables (`projects`), not folders",
    ),
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every non-test Rust source file under `crates/*/src`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" && name != "target" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// The text of a source file before its inline test module, without comment lines and
/// without the API's description (`#[utoipa::path(…)]`, `#[schema(…)]`, `#[param(…)]`):
/// an example there shows a path as a client writes it, and builds none.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    let mut in_description = false;
    let mut kept = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("#[utoipa::path(") {
            in_description = !trimmed.ends_with(")]");
            continue;
        }
        if in_description {
            in_description = trimmed != ")]";
            continue;
        }
        if trimmed.starts_with("//")
            || trimmed.starts_with("#[schema(")
            || trimmed.starts_with("#[param(")
        {
            continue;
        }
        kept.push((i + 1, *line));
    }
    kept
}

fn stray_spellings() -> Vec<String> {
    let crates = crates_dir();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&crates)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if ALLOWED.iter().any(|(allowed, _)| *allowed == rel) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            if let Some(spelling) = SPELLINGS.iter().find(|s| line.contains(*s)) {
                found.push(format!("{rel}:{n}: {spelling} in `{}`", line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_source_file_spells_the_layout_but_the_layout_module() {
    let found = stray_spellings();
    assert!(
        found.is_empty(),
        "spell these with ferry_site::layout:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_finds_a_stray_spelling() {
    let text = "fn f() -> String {\n    format!(\"home/{p}\")\n}\n#[cfg(test)]\nmod tests {\n    \"home/a\";\n}\n";
    let hits: Vec<_> = code_lines(text)
        .into_iter()
        .filter(|(_, line)| SPELLINGS.iter().any(|s| line.contains(s)))
        .collect();
    assert_eq!(hits, [(2, "    format!(\"home/{p}\")")]);
    // Comments are not code.
    assert!(code_lines("// \"home/x\"\n").is_empty());
}

#[test]
fn layout_and_docs_check_agree() {
    assert_eq!(ferry_docs::lint::REQUIRED_PATH, layout::ATTACHMENTS_PATH);
}
