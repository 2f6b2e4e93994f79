//! `file_write` and `file_edit`: changing text files, atomically.

use std::io::Read;

use ferry_codes::Code;
use ferry_exec::{Change, RequestError};
use ferry_fs::{FileId, sha256_hex};
use serde_json::json;

use crate::args::{self, FileEdit};
use crate::read::io_error;
use crate::{ToolError, ToolOutput, Toolbox};
use ferry_config::limits::{FILE_EDIT_MAX_EDITS, FILE_EDIT_MAX_FILES, TEXT_FILE_MAX_BYTES};

/// Refuses a write into a workspace's `uploads/` (the old name of `public/`, spec
/// M-MIGRATE: nothing creates it), pointing to the `public/` path meant. The main
/// workspace's and each project's count; the path is read lexically, as it would land.
fn refuse_legacy_public(tools: &Toolbox, path: &str) -> Result<(), ToolError> {
    use std::path::{Component, PathBuf};
    let home = &tools.paths().home;
    let abs = match path.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if path == "~" => home.clone(),
        None => home.join(path),
    };
    let mut lexical = PathBuf::new();
    for part in abs.components() {
        match part {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let Ok(rel) = lexical.strip_prefix(home) else {
        return Ok(());
    };
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match ferry_site::legacy_public_target(&parts) {
        Some(why) => Err(ToolError::new(Code::LegacyFolder, why)),
        None => Ok(()),
    }
}

pub(crate) fn file_write(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: args::FileWrite = args::parse("file_write", args)?;
    if args.content.len() > TEXT_FILE_MAX_BYTES {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "content is {} bytes, over the {TEXT_FILE_MAX_BYTES}-byte limit; write the file \
                 in a command (terminal_run) or in smaller files",
                args.content.len()
            ),
        ));
    }
    refuse_legacy_public(tools, &args.path)?;
    let mut change = Change::new(tools.shared_requester());
    change
        .stage(&args.path, None)?
        .write(args.content.as_bytes())
        .map_err(RequestError::from)?;
    let written = change.commit()?.remove(0);
    Ok(
        ToolOutput::text(format!("Wrote {} bytes to {}", written.size, written.path))
            .with_structured(
                json!({"path": written.path, "size": written.size, "sha256": written.sha256}),
            ),
    )
}

/// One file's edits, applied in memory before anything is written.
struct Pending {
    path: String,
    display: String,
    /// Which file it is: two paths to one file (through a link, or spelled two ways)
    /// are one file, edited once.
    id: FileId,
    before_sha256: String,
    text: String,
}

pub(crate) fn file_edit(tools: &Toolbox, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    let args: FileEdit = args::parse("file_edit", args)?;
    if args.edits.is_empty() {
        return Err(ToolError::new(Code::InvalidArguments, "edits is empty"));
    }
    if args.edits.len() > FILE_EDIT_MAX_EDITS {
        return Err(ToolError::new(
            Code::InvalidArguments,
            format!(
                "{} edits; file_edit applies at most {FILE_EDIT_MAX_EDITS} at once: split them \
                 over several calls",
                args.edits.len()
            ),
        ));
    }
    let mut files: Vec<Pending> = Vec::new();
    for (index, edit) in args.edits.iter().enumerate() {
        let number = index + 1;
        if edit.old_text.is_empty() {
            return Err(ToolError::new(
                Code::InvalidArguments,
                format!("edit {number} ({}): oldText is empty", edit.path),
            ));
        }
        // Several paths to one file (`a.txt`, `~/a.txt`, a link to it) are one file.
        let (mut file, info) = tools.requester().open(&edit.path)?;
        let id = FileId::of(&file).map_err(RequestError::from)?;
        let slot = match files.iter().position(|p| p.id == id) {
            Some(slot) => slot,
            None if files.len() == FILE_EDIT_MAX_FILES => {
                return Err(ToolError::new(
                    Code::InvalidArguments,
                    format!(
                        "edit {number} ({}): file_edit changes at most {FILE_EDIT_MAX_FILES} \
                         files at once: split the edits over several calls",
                        info.path
                    ),
                ));
            }
            None => {
                files.push(read_for_edit(
                    &mut file, &edit.path, &info.path, info.size, id,
                )?);
                files.len() - 1
            }
        };
        let pending = &mut files[slot];
        let (old, new) = line_endings_of(&pending.text, &edit.old_text, &edit.new_text);
        match pending.text.matches(old.as_str()).count() {
            1 => pending.text = pending.text.replacen(old.as_str(), &new, 1),
            0 => {
                return Err(ToolError::new(
                    Code::NoMatch,
                    format!(
                        "edit {number} ({}): oldText was not found (0 matches); nothing was \
                         changed. Read the file again and copy the text exactly",
                        pending.display
                    ),
                ));
            }
            n => {
                return Err(ToolError::new(
                    Code::AmbiguousMatch,
                    format!(
                        "edit {number} ({}): oldText occurs {n} times; nothing was changed. \
                         Include surrounding lines so it occurs exactly once",
                        pending.display
                    ),
                ));
            }
        }
    }
    let mut change = Change::new(tools.shared_requester()).journaled(tools.journal());
    for pending in &files {
        if pending.text.len() > TEXT_FILE_MAX_BYTES {
            return Err(ToolError::new(
                Code::TooLarge,
                format!(
                    "{} would be {} bytes after the edits, over the {TEXT_FILE_MAX_BYTES}-byte \
                     limit; nothing was changed",
                    pending.display,
                    pending.text.len()
                ),
            ));
        }
        change
            .stage(&pending.path, Some(pending.before_sha256.clone()))?
            .write(pending.text.as_bytes())
            .map_err(RequestError::from)?;
    }
    let written = change.commit()?;
    let summary: Vec<String> = written
        .iter()
        .map(|w| format!("{} ({} bytes)", w.path, w.size))
        .collect();
    Ok(ToolOutput::text(format!(
        "Applied {} edit(s) to {}",
        args.edits.len(),
        summary.join(", ")
    ))
    .with_structured(json!({"files": written.iter().map(|w| json!({"path": w.path, "size": w.size, "sha256": w.sha256})).collect::<Vec<_>>()})))
}

fn read_for_edit(
    file: &mut std::fs::File,
    path: &str,
    display: &str,
    size: u64,
    id: FileId,
) -> Result<Pending, ToolError> {
    if size > TEXT_FILE_MAX_BYTES as u64 {
        return Err(ToolError::new(
            Code::TooLarge,
            format!("{display} is {size} bytes; file_edit edits files up to 16 MiB"),
        ));
    }
    let mut bytes = Vec::new();
    file.take(TEXT_FILE_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    let before_sha256 = sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::new(
            Code::NotText,
            format!(
                "{display} is not valid UTF-8 text; file_edit edits text only (use terminal_run \
                 for binary files)"
            ),
        )
    })?;
    Ok(Pending {
        path: path.to_owned(),
        display: display.to_owned(),
        id,
        before_sha256,
        text,
    })
}

/// Models write `\n`; in a CRLF file the same text is spelled with `\r\n`. When the
/// text as given is absent but its CRLF spelling is present, edit with that.
fn line_endings_of(text: &str, old: &str, new: &str) -> (String, String) {
    if old.contains('\n') && !old.contains('\r') && !text.contains(old) {
        let crlf = old.replace('\n', "\r\n");
        if text.contains(&crlf) {
            return (crlf, new.replace("\r\n", "\n").replace('\n', "\r\n"));
        }
    }
    (old.to_owned(), new.to_owned())
}

#[cfg(test)]
mod tests {
    use super::line_endings_of;

    #[test]
    fn crlf_files_take_lf_edits() {
        let text = "a\r\nb\r\nc\r\n";
        let (old, new) = line_endings_of(text, "a\nb", "x\ny");
        assert_eq!(old, "a\r\nb");
        assert_eq!(new, "x\r\ny");
        // Text found as given is left alone.
        assert_eq!(line_endings_of("a\nb", "a\nb", "z").0, "a\nb");
    }
}
