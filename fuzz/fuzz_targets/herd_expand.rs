//! The herd's `@file` lines (spec handoffs.md H-DEF): any text as a definition's body,
//! expanded into a worker's system prompt from a folder of files of every sort (text,
//! empty, not UTF-8, holding NUL, a folder, a link, one too large to join another).
//! The prompt is exactly what H-DEF describes, checked against a plain model of it: each
//! reference line replaced by its file's text, wrapped and tagged with its canonical
//! path, once per file and never a file the caller attached; other lines as they are;
//! then the guidance. A prompt that cannot be made is refused whole.
#![no_main]

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ferry_codes::Code;
use ferry_config::limits::HERD_PROMPT_MAX_BYTES;
use ferry_herd::HerdError;
use ferry_herd::definition::Definition;
use ferry_herd::expand::build_prompt;
use ferry_herd::reader::{Direct, Reader, absolute_from, canonical_path};
use libfuzzer_sys::fuzz_target;

/// The folder of files the references reach: `<root>/agents/worker.md` is the
/// definition, and a reference leaving `<root>` finds nothing.
struct Place {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

fn place() -> &'static Place {
    static PLACE: OnceLock<Place> = OnceLock::new();
    PLACE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let agents = root.join("agents");
        std::fs::create_dir_all(agents.join("sub")).unwrap();
        std::fs::create_dir_all(agents.join("dir")).unwrap();
        let write = |name: &str, bytes: &[u8]| std::fs::write(agents.join(name), bytes).unwrap();
        write("policy.md", b"Be careful.\n");
        write("notes.txt", b"line 1\r\nline 2");
        write("sub/deep.md", "d\u{e9}j\u{e0} vu\n".as_bytes());
        write("empty.md", b"");
        write("latin1.txt", b"caf\xe9\n");
        write("nul.txt", b"a\0b");
        write("worker.md", b"---\nname: worker\n---\n");
        write("big.md", &vec![b'x'; HERD_PROMPT_MAX_BYTES - 64]);
        std::os::unix::fs::symlink("policy.md", agents.join("link.md")).unwrap();
        std::fs::write(root.join("outside.md"), b"beside the agents\n").unwrap();
        Place { _tmp: tmp, root }
    })
}

/// Opens files within the place only.
struct Confined<'a>(&'a Path);

impl Reader for Confined<'_> {
    fn open(&self, path: &Path) -> Result<File, HerdError> {
        let file = Direct.open(path)?;
        if !canonical_path(&file)?.starts_with(self.0) {
            return Err(HerdError::new(
                Code::PathDenied,
                "outside the fuzzed folder",
            ));
        }
        Ok(file)
    }
}

/// The reference a line is, as H-DEF says: trimmed, `@./…`, `@../…` or `@/…` with
/// something after the prefix.
fn reference(line: &str) -> Option<&str> {
    let path = line.trim().strip_prefix('@')?;
    ["./", "../", "/"]
        .iter()
        .any(|prefix| {
            path.strip_prefix(prefix)
                .is_some_and(|rest| !rest.is_empty())
        })
        .then_some(path)
}

/// The prompt H-DEF describes, made plainly; `None` where it cannot be made.
fn model(
    body: &str,
    folder: &Path,
    root: &Path,
    skip: &[PathBuf],
    guidance: &str,
) -> Option<(String, Vec<PathBuf>)> {
    let mut taken: HashSet<PathBuf> = skip.iter().cloned().collect();
    let mut files = Vec::new();
    let mut text = String::new();
    // Every reference is looked up before any is read.
    let mut lines = Vec::new();
    for line in body.split_inclusive('\n') {
        match reference(line) {
            None => lines.push((line, None)),
            Some(r) => {
                let path = std::fs::canonicalize(absolute_from(folder, r)).ok()?;
                if !path.starts_with(root) || !path.is_file() {
                    return None;
                }
                lines.push((line, Some(path)));
            }
        }
    }
    for (line, path) in lines {
        let Some(path) = path else {
            text.push_str(line);
            continue;
        };
        if !taken.insert(path.clone()) {
            continue;
        }
        let content = String::from_utf8(std::fs::read(&path).ok()?).ok()?;
        if content.contains('\0') {
            return None;
        }
        let ending = &line[line.trim_end_matches(['\r', '\n']).len()..];
        let quoted = serde_json::to_string(&path.to_string_lossy()).unwrap();
        text.push_str(&format!("<file path={quoted}>\n{content}\n</file>{ending}"));
        files.push(path);
    }
    if !body.is_empty() && !guidance.is_empty() {
        text.push_str(if body.ends_with('\n') { "\n" } else { "\n\n" });
    }
    text.push_str(guidance);
    (text.len() <= HERD_PROMPT_MAX_BYTES).then_some((text, files))
}

fuzz_target!(|data: &[u8]| {
    // A flags byte, then the body.
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let Ok(body) = std::str::from_utf8(body) else {
        return;
    };
    let place = place();
    let folder = place.root.join("agents");
    let definition = Definition {
        name: "worker".into(),
        description: "d".into(),
        command: "true".into(),
        read_only: false,
        path: folder.join("worker.md"),
        body: body.to_owned(),
    };
    // The caller attached notes.txt, or nothing.
    let skip = if flags & 1 == 1 {
        vec![folder.join("notes.txt")]
    } else {
        Vec::new()
    };
    let guidance = if flags & 2 == 2 {
        ""
    } else {
        "You are a worker.\n"
    };

    let built = build_prompt(&definition, &skip, guidance, &Confined(&place.root));
    let expected = model(body, &folder, &place.root, &skip, guidance);
    match (built, expected) {
        (Ok(prompt), Some((text, files))) => {
            assert_eq!(prompt.text, text);
            assert_eq!(prompt.included, files);
        }
        (Err(_), None) => {}
        (built, expected) => panic!("built {built:?}, the model {expected:?}"),
    }
});
