//! H-DEF: agent definitions, Markdown with front matter, found by name.
//!
//! The front matter lies between a first line `---` and the next line `---`; each of its
//! lines is `key: value` (the value trimmed; one that starts and ends with `"` is a JSON
//! string, so a command may begin with a quoted word and still be written as it is).
//! `name`, `description` and `command` are required, `access` (`read-only` or
//! `read-write`) is optional; any other key is ignored, with what is indented beneath it,
//! since other tools' definitions carry their own (`model`, `tools`).

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use ferry_codes::Code;
use ferry_config::limits::HERD_DEFINITION_MAX_BYTES;

use crate::reader::{Reader, canonical_path};
use crate::{HerdError, check_label};

/// One agent definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    /// `name` from the front matter; also the file's stem.
    pub name: String,
    /// `description` from the front matter.
    pub description: String,
    /// `command`: run with `bash -c` in the worker's folder; `{systemPrompt}` in it is
    /// replaced by the prompt snapshot's quoted path.
    pub command: String,
    /// `access: read-only`: the worker's sandbox shows every tree read-only but the herd's.
    pub read_only: bool,
    /// The canonical path of the definition file (never handed to a worker).
    pub path: PathBuf,
    /// Everything after the front matter.
    pub body: String,
}

/// The line that opens and closes the front matter.
const FENCE: &str = "---";

/// Parses a definition read from `path` (canonical).
pub fn parse(text: &str, path: &Path) -> Result<Definition, HerdError> {
    parse_text(text, path).map_err(|why| {
        HerdError::new(
            Code::BadDefinition,
            format!("the agent definition {} {why}", path.display()),
        )
    })
}

fn parse_text(text: &str, path: &Path) -> Result<Definition, String> {
    if text.len() as u64 > HERD_DEFINITION_MAX_BYTES {
        return Err(format!(
            "is {} bytes, over the limit of {HERD_DEFINITION_MAX_BYTES}",
            text.len()
        ));
    }
    if text.contains('\0') {
        return Err("holds a NUL byte".into());
    }
    let (front, body) = split_front_matter(text)?;
    let mut fields = Fields::default();
    let mut keys = HashSet::new();
    // Whether the last key was one of ours: lines indented beneath it would be a value
    // spread over lines, which is not supported.
    let mut last_is_ours = false;
    for line in front.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if last_is_ours {
                return Err(format!(
                    "spreads a value over several lines ({:?}); write it on one line, as a \
                     JSON string if it needs escapes",
                    line.trim()
                ));
            }
            continue;
        }
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("has a front matter line that is not `key: value`: {line:?}"))?;
        let key = key.trim_end();
        if key.is_empty() {
            return Err(format!("has a front matter line with no key: {line:?}"));
        }
        if !keys.insert(key.to_owned()) {
            return Err(format!("names the key {key:?} twice"));
        }
        last_is_ours = fields.set(key, value_of(key, value.trim())?)?;
    }
    fields.finish(path, body)
}

/// The front matter and the body after it.
fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let is_fence = |line: &str| line.trim_end() == FENCE;
    let first_end = text.find('\n').map_or(text.len(), |i| i + 1);
    if !is_fence(&text[..first_end]) {
        return Err(format!(
            "has no front matter: its first line must be {FENCE:?}"
        ));
    }
    let mut at = first_end;
    while at < text.len() {
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
        if is_fence(&text[at..end]) {
            return Ok((&text[first_end..at], &text[end..]));
        }
        at = end;
    }
    Err(format!("has a front matter with no closing {FENCE:?} line"))
}

/// A value as written: trimmed, or the string it spells when the whole value is one JSON
/// string (`"…"` with escapes); a command that merely starts and ends with quoted words
/// (`"$BIN" run "$X"`) is taken as written.
fn value_of(key: &str, value: &str) -> Result<String, String> {
    let Ok(text) = serde_json::from_str::<String>(value) else {
        return Ok(value.to_owned());
    };
    if text.contains('\0') {
        return Err(format!("has a value of {key:?} holding a NUL character"));
    }
    Ok(text)
}

#[derive(Default)]
struct Fields {
    name: Option<String>,
    description: Option<String>,
    command: Option<String>,
    read_only: bool,
}

impl Fields {
    /// Takes `key`'s value; whether the key is one a definition reads.
    fn set(&mut self, key: &str, value: String) -> Result<bool, String> {
        match key {
            "name" => self.name = Some(value),
            "description" => self.description = Some(value),
            "command" => self.command = Some(value),
            "access" => {
                self.read_only = match value.as_str() {
                    "read-only" => true,
                    "read-write" => false,
                    other => {
                        return Err(format!(
                            "has access {other:?}; it is \"read-only\" or \"read-write\""
                        ));
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn finish(self, path: &Path, body: &str) -> Result<Definition, String> {
        let required = |value: Option<String>, key: &str| match value {
            Some(value) if !value.is_empty() => Ok(value),
            _ => Err(format!("has no {key:?} in its front matter")),
        };
        let name = required(self.name, "name")?;
        let description = required(self.description, "description")?;
        let command = required(self.command, "command")?;
        if let Err(e) = check_label(&name) {
            return Err(format!("has an unusable name: {}", e.message));
        }
        let stem = path.file_stem().and_then(|s| s.to_str());
        if stem != Some(name.as_str()) || path.extension().is_none_or(|e| e != "md") {
            return Err(format!(
                "is named {name:?}, so it must be the file {name}.md"
            ));
        }
        Ok(Definition {
            name,
            description,
            command,
            read_only: self.read_only,
            path: path.to_path_buf(),
            body: body.to_owned(),
        })
    }
}

/// Finds the definition `name` in `places`, in order (the project's
/// `.ferry-herd/agents/`, the home's, the site's `agents/`), each read through its own
/// reader; the first `<name>.md` found wins. None is `unknown_agent`. One whose real path
/// (every link followed) is beneath none of `within` is refused (`path_denied`) before
/// it is read: a definition chooses what runs as the person, and must come from where
/// no one else writes.
pub fn find(
    name: &str,
    places: &[(PathBuf, &dyn Reader)],
    within: &[PathBuf],
) -> Result<Definition, HerdError> {
    // Checked before any path is built from it: a name is one plain file name.
    if check_label(name).is_err() {
        return Err(HerdError::invalid(format!(
            "the agent name {name:?} is not usable: an agent is named by letters, digits, \
             '.', '_' or '-', starting with a letter or a digit"
        )));
    }
    for (dir, reader) in places {
        let path = dir.join(format!("{name}.md"));
        match reader.open(&path) {
            Ok(file) => return read(name, &path, file, within),
            // Nothing there: the next place may have it. Anything else is a definition
            // that is there and broken, which is worth telling rather than passing over.
            Err(e) if e.code == Code::NotFound => continue,
            Err(e) => return Err(e.context(format!("the agent definition {}", path.display()))),
        }
    }
    let looked: Vec<String> = places
        .iter()
        .map(|(dir, _)| dir.display().to_string())
        .collect();
    Err(HerdError::new(
        Code::UnknownAgent,
        format!(
            "no agent definition {name}.md in {}",
            if looked.is_empty() {
                "any place (none is configured)".to_owned()
            } else {
                looked.join(", ")
            }
        ),
    ))
}

/// Reads and parses the definition `name` opened at `path`.
fn read(
    name: &str,
    path: &Path,
    file: std::fs::File,
    within: &[PathBuf],
) -> Result<Definition, HerdError> {
    let bad = |why: String| {
        HerdError::new(
            Code::BadDefinition,
            format!("the agent definition {} {why}", path.display()),
        )
    };
    let canonical = canonical_path(&file)?;
    if !within.iter().any(|root| canonical.starts_with(root)) {
        return Err(HerdError::new(
            Code::PathDenied,
            format!(
                "the agent definition {} leads to {}, outside the person's home and the \
                 site's agents: a definition chooses what runs as the person, so it is \
                 taken only from where no one else writes",
                path.display(),
                canonical.display()
            ),
        ));
    }
    // One byte past the limit tells a file that is too large, without reading it all.
    let mut bytes = Vec::new();
    (&file)
        .take(HERD_DEFINITION_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| HerdError::from(e).context(format!("reading {}", path.display())))?;
    if bytes.len() as u64 > HERD_DEFINITION_MAX_BYTES {
        return Err(bad(format!(
            "is over the limit of {HERD_DEFINITION_MAX_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| bad("is not valid UTF-8".into()))?;
    let definition = parse(&text, &canonical)?;
    if definition.name != name {
        return Err(bad(format!(
            "leads to {}, which defines {:?}",
            canonical.display(),
            definition.name
        )));
    }
    Ok(definition)
}
