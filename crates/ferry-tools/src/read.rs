//! `file_read`, `file_preview` and `image_read`: looking at files without changing them.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::json;

use crate::args::{self, FileRead, PathArg};
use crate::{Content, ToolError, ToolOutput, Toolbox};

/// A whole file is read only up to this size; larger ones need a line range.
pub const FILE_READ_MAX_BYTES: u64 = 256 * 1024;
/// How much of a file is looked at to tell text from binary.
const SNIFF_BYTES: usize = 8192;

pub(crate) fn file_read(tools: &Toolbox, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    let args: FileRead = args::parse("file_read", args)?;
    if args.start_line == Some(0) || args.line_count == Some(0) {
        return Err(ToolError::new(
            "invalid_arguments",
            "startLine and lineCount start at 1",
        ));
    }
    let (file, info) = tools.requester().open(&args.path)?;
    let ranged = args.start_line.is_some() || args.line_count.is_some();
    if !ranged && info.size > FILE_READ_MAX_BYTES {
        return Err(ToolError::new(
            "too_large",
            format!(
                "{} is {} bytes, over the 256 KiB a whole read returns; read a range \
                 (startLine, lineCount) or use file_preview",
                info.path, info.size
            ),
        ));
    }
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    check_text(&mut reader, &info.path)?;
    let lines = read_lines(
        &mut reader,
        args.start_line.unwrap_or(1),
        args.line_count,
        &info.path,
    )?;
    Ok(
        ToolOutput::text(lines.render(&info.path, info.size)).with_structured(json!({
            "path": info.path,
            "size": info.size,
            "startLine": lines.first,
            "lineCount": lines.numbered.len(),
            "endOfFile": lines.end_of_file,
            "crlf": lines.crlf,
        })),
    )
}

/// Refuses files whose start is not UTF-8 text (a NUL byte, or bytes that do not decode).
fn check_text(reader: &mut BufReader<File>, path: &str) -> Result<(), ToolError> {
    let head = reader.fill_buf().map_err(io_error)?;
    let head = &head[..head.len().min(SNIFF_BYTES)];
    let text = match std::str::from_utf8(head) {
        Ok(_) => true,
        // A character cut by the sniff window's end is fine.
        Err(e) => e.error_len().is_none() && head.len() == SNIFF_BYTES,
    };
    if !text || head.contains(&0) {
        return Err(ToolError::new(
            "not_text",
            format!(
                "{path} is not UTF-8 text; use file_preview to see what it is (or image_read \
                 for an image)"
            ),
        ));
    }
    Ok(())
}

struct Lines {
    first: u64,
    numbered: Vec<String>,
    end_of_file: bool,
    total_known: Option<u64>,
    crlf: bool,
    /// The reply reached its byte budget before the range ended.
    cut: bool,
}

impl Lines {
    fn render(&self, path: &str, size: u64) -> String {
        let last = self.first + self.numbered.len() as u64 - 1;
        let mut out = match (self.numbered.is_empty(), self.total_known) {
            (true, _) => format!("{path} ({size} bytes) is empty\n"),
            (false, Some(total)) if self.first == 1 && self.end_of_file => {
                format!("{path} ({size} bytes, {total} lines)\n")
            }
            (false, _) => format!("{path} ({size} bytes), lines {}–{last}\n", self.first),
        };
        if self.crlf {
            out.push_str("(line endings are CRLF; they are not shown)\n");
        }
        for line in &self.numbered {
            out.push_str(line);
            out.push('\n');
        }
        if self.cut {
            out.push_str(&format!(
                "… stopped at 256 KiB; continue with startLine {}\n",
                last + 1
            ));
        } else if self.end_of_file && self.first != 1 {
            out.push_str(&format!("(end of file at line {last})\n"));
        }
        out
    }
}

fn read_lines(
    reader: &mut impl BufRead,
    first: u64,
    count: Option<u64>,
    path: &str,
) -> Result<Lines, ToolError> {
    let mut lines = Lines {
        first,
        numbered: Vec::new(),
        end_of_file: false,
        total_known: None,
        crlf: false,
        cut: false,
    };
    let mut number = 0u64;
    let mut budget = FILE_READ_MAX_BYTES as usize;
    let mut raw = Vec::new();
    loop {
        raw.clear();
        // Lines are read in bounded pieces: one huge line cannot take all the memory.
        let n = reader
            .by_ref()
            .take(FILE_READ_MAX_BYTES + 1)
            .read_until(b'\n', &mut raw)
            .map_err(io_error)?;
        if n == 0 {
            lines.end_of_file = true;
            lines.total_known = Some(number);
            break;
        }
        number += 1;
        let whole = raw.ends_with(b"\n") || (n as u64) <= FILE_READ_MAX_BYTES;
        if number < first {
            if !whole {
                skip_rest_of_line(reader)?;
            }
            continue;
        }
        if count.is_some_and(|c| number >= first + c) {
            break;
        }
        if raw.ends_with(b"\r\n") {
            lines.crlf = true;
        }
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        let line = format!("{number:>6}\t{text}");
        if line.len() + 1 > budget {
            lines.cut = true;
            break;
        }
        budget -= line.len() + 1;
        lines.numbered.push(line);
    }
    if lines.numbered.is_empty() && first > 1 && !lines.cut {
        return Err(ToolError::new(
            "past_end",
            format!("startLine {first} is past the end: {path} has {number} lines"),
        ));
    }
    Ok(lines)
}

/// Consumes the remainder of a line too long to hold, so line numbers stay right.
fn skip_rest_of_line(reader: &mut impl BufRead) -> Result<(), ToolError> {
    loop {
        let buf = reader.fill_buf().map_err(io_error)?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let len = buf.len();
                reader.consume(len);
            }
        }
    }
}

pub(crate) fn file_preview(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: PathArg = args::parse("file_preview", args)?;
    let (mut file, info) = tools.requester().open(&args.path)?;
    let name = file_name(&info.path);
    let preview = ferry_preview::preview(&mut file, &name, info.size).map_err(preview_error)?;
    let mut out = ToolOutput::text(format!(
        "{}\ntype: {}\nsize: {} bytes\nsha256: {}\n\n{}",
        info.path, preview.media_type, preview.size, preview.sha256, preview.text
    ))
    .with_structured(json!({
        "path": info.path,
        "mediaType": preview.media_type,
        "size": preview.size,
        "sha256": preview.sha256,
    }));
    if let Some(image) = preview.image {
        out.content.push(Content::Image {
            mime: image.mime.to_owned(),
            data: image.bytes,
        });
    }
    Ok(out)
}

pub(crate) fn image_read(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: PathArg = args::parse("image_read", args)?;
    let (mut file, info) = tools.requester().open(&args.path)?;
    let image = ferry_preview::model_image(&mut file, info.size).map_err(preview_error)?;
    let mut out = ToolOutput::text(format!(
        "{}: {}×{} shown as {}×{} {}",
        info.path, image.source_width, image.source_height, image.width, image.height, image.mime
    ))
    .with_structured(json!({
        "path": info.path,
        "width": image.width,
        "height": image.height,
        "sourceWidth": image.source_width,
        "sourceHeight": image.source_height,
        "mimeType": image.mime,
    }));
    out.content.push(Content::Image {
        mime: image.mime.to_owned(),
        data: image.bytes,
    });
    Ok(out)
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn preview_error(e: ferry_preview::PreviewError) -> ToolError {
    ToolError::new(e.code(), e.to_string())
}

pub(crate) fn io_error(e: std::io::Error) -> ToolError {
    ferry_exec::RequestError::from(e).into()
}
