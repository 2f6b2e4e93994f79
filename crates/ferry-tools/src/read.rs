//! `file_read`, `file_preview` and `image_read`: looking at files without changing them.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::json;

use ferry_codes::Code;

use crate::args::{self, FileRead, PathArg};
use crate::{Content, ToolError, ToolOutput, Toolbox};
use ferry_config::limits::FILE_READ_MAX_BYTES;

/// How much of a file is looked at to tell text from binary.
const SNIFF_BYTES: usize = 8192;

pub(crate) fn file_read(tools: &Toolbox, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    let args: FileRead = args::parse("file_read", args)?;
    if args.start_line == Some(0) || args.line_count == Some(0) {
        return Err(ToolError::new(
            Code::InvalidArguments,
            "startLine and lineCount start at 1",
        ));
    }
    let (file, info) = tools.requester().open(&args.path)?;
    let ranged =
        args.start_line.is_some() || args.line_count.is_some() || args.line_offset.is_some();
    if !ranged && info.size > FILE_READ_MAX_BYTES {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "{} is {} bytes, over the 256 KiB a whole read returns; read a range \
                 (startLine, lineCount) or use file_preview",
                info.path, info.size
            ),
        ));
    }
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    check_text(&mut reader, &info.path)?;
    let range = Range {
        first: args.start_line.unwrap_or(1),
        offset: args.line_offset.unwrap_or(0),
        count: args.line_count,
    };
    let lines = read_lines(&mut reader, &range, &info.path)?;
    let next = lines
        .next
        .map(|(line, offset)| json!({"startLine": line, "lineOffset": offset}));
    Ok(
        ToolOutput::text(lines.render(&info.path, info.size)).with_structured(json!({
            "path": info.path,
            "size": info.size,
            "startLine": lines.first,
            "lineOffset": lines.offset,
            "lineCount": lines.numbered.len(),
            "endOfFile": lines.end_of_file,
            "crlf": lines.crlf,
            "next": next,
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
            Code::NotText,
            format!(
                "{path} is not UTF-8 text; use file_preview to see what it is (or image_read \
                 for an image)"
            ),
        ));
    }
    Ok(())
}

/// Which lines a read asks for.
struct Range {
    /// The first line (1-based).
    first: u64,
    /// Bytes of the first line to leave out: where an earlier reply cut that line.
    offset: u64,
    count: Option<u64>,
}

struct Lines {
    first: u64,
    /// Where in the first line the reply starts (a byte offset on a character boundary).
    offset: u64,
    numbered: Vec<String>,
    end_of_file: bool,
    total_known: Option<u64>,
    crlf: bool,
    /// The reply reached its byte budget before the range ended: the line and byte
    /// offset to continue at.
    next: Option<(u64, u64)>,
}

impl Lines {
    fn render(&self, path: &str, size: u64) -> String {
        let last = self.first + self.numbered.len() as u64 - 1;
        let mut out = match (self.numbered.is_empty(), self.total_known) {
            (true, _) => format!("{path} ({size} bytes) is empty\n"),
            (false, _) if self.offset > 0 => format!(
                "{path} ({size} bytes), lines {}–{last}, line {} from byte {}\n",
                self.first, self.first, self.offset
            ),
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
        match self.next {
            Some((line, 0)) => out.push_str(&format!(
                "… stopped at 256 KiB; continue with startLine {line}\n"
            )),
            Some((line, offset)) => out.push_str(&format!(
                "… line {line} is longer than one reply and was cut after byte {offset}; \
                 continue with startLine {line} and lineOffset {offset}\n"
            )),
            None if self.end_of_file && (self.first != 1 || self.offset > 0) => {
                out.push_str(&format!("(end of file at line {last})\n"));
            }
            None => {}
        }
        out
    }
}

fn read_lines(reader: &mut impl BufRead, range: &Range, path: &str) -> Result<Lines, ToolError> {
    let first = range.first;
    let past_end = |lines: u64| {
        ToolError::new(
            Code::PastEnd,
            format!("startLine {first} is past the end: {path} has {lines} lines"),
        )
    };
    let mut raw = Vec::new();
    let mut number = 0u64;
    while number + 1 < first {
        if read_piece(reader, &mut raw)? == 0 {
            return Err(past_end(number));
        }
        number += 1;
        if !raw.ends_with(b"\n") {
            skip_rest_of_line(reader)?;
        }
    }
    // Every line past the last is past the end, the one right after it included; line 1
    // is the start of any file, so an empty file read from it is answered as empty.
    if first > 1 && reader.fill_buf().map_err(io_error)?.is_empty() {
        return Err(past_end(number));
    }
    let offset = skip_into_line(reader, range.offset, first, || past_end(number))?;
    let mut lines = Lines {
        first,
        offset,
        numbered: Vec::new(),
        end_of_file: false,
        total_known: None,
        crlf: false,
        next: None,
    };
    let mut budget = FILE_READ_MAX_BYTES as usize;
    loop {
        let n = read_piece(reader, &mut raw)?;
        if n == 0 {
            lines.end_of_file = true;
            lines.total_known = Some(number);
            break;
        }
        number += 1;
        if range.count.is_some_and(|c| number >= first + c) {
            break;
        }
        let whole = raw.ends_with(b"\n") || (n as u64) <= FILE_READ_MAX_BYTES;
        let mut visible = raw.as_slice();
        if whole {
            visible = visible.strip_suffix(b"\n").unwrap_or(visible);
            if let Some(rest) = visible.strip_suffix(b"\r") {
                lines.crlf |= raw.ends_with(b"\r\n");
                visible = rest;
            }
        }
        let prefix = line_prefix(number);
        // Checked whole first: `from_utf8_lossy` walks a valid line byte by byte.
        let text = match std::str::from_utf8(visible) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(visible),
        };
        if whole && prefix.len() + text.len() < budget {
            budget -= prefix.len() + text.len() + 1;
            let mut line = String::with_capacity(prefix.len() + text.len());
            line.push_str(&prefix);
            line.push_str(&text);
            lines.numbered.push(line);
            continue;
        }
        let start = if number == first { offset } else { 0 };
        if lines.numbered.is_empty() {
            // A line longer than a whole reply: as much as fits, cut between characters,
            // and where to pick it up, so that every reply moves forward.
            let (shown, used) = cut_line(visible, budget - prefix.len() - 1);
            lines.numbered.push(format!("{prefix}{shown}"));
            lines.next = Some((number, start + used as u64));
        } else {
            lines.next = Some((number, 0));
        }
        break;
    }
    Ok(lines)
}

/// `     7\t`: a line's number right-aligned in six columns and a tab, as `cat -n` shows
/// it. Written without `format!`, whose padding was most of a read's own time.
fn line_prefix(number: u64) -> String {
    let digits = number.to_string();
    let mut prefix = String::with_capacity(digits.len().max(6) + 1);
    for _ in digits.len()..6 {
        prefix.push(' ');
    }
    prefix.push_str(&digits);
    prefix.push('\t');
    prefix
}

/// Reads the next line into `raw`, at most one byte more than a reply holds: one huge
/// line cannot take all the memory. Returns the bytes read (0 at the end).
fn read_piece(reader: &mut impl BufRead, raw: &mut Vec<u8>) -> Result<usize, ToolError> {
    raw.clear();
    reader
        .take(FILE_READ_MAX_BYTES + 1)
        .read_until(b'\n', raw)
        .map_err(io_error)
}

/// Skips the first `offset` bytes of the line the reader is at (without passing its end),
/// then forward to the next character boundary; returns where the reply starts.
fn skip_into_line(
    reader: &mut impl BufRead,
    offset: u64,
    line: u64,
    past_end: impl FnOnce() -> ToolError,
) -> Result<u64, ToolError> {
    if offset == 0 {
        return Ok(0);
    }
    let mut skipped = 0u64;
    while skipped < offset {
        let buf = reader.fill_buf().map_err(io_error)?;
        if buf.is_empty() {
            break;
        }
        let want = (offset - skipped).min(buf.len() as u64) as usize;
        let take = buf[..want].iter().position(|b| *b == b'\n').unwrap_or(want);
        reader.consume(take);
        skipped += take as u64;
        if take < want {
            break;
        }
    }
    if skipped < offset {
        if skipped == 0 && reader.fill_buf().map_err(io_error)?.is_empty() {
            return Err(past_end());
        }
        return Err(ToolError::new(
            Code::InvalidArguments,
            format!(
                "lineOffset {offset} is past the end of line {line}, which has {skipped} bytes"
            ),
        ));
    }
    // An offset inside a character starts at the next one (a UTF-8 character has at
    // most three continuation bytes).
    for _ in 0..3 {
        match reader.fill_buf().map_err(io_error)?.first() {
            Some(b) if (0x80..0xC0).contains(b) => {
                reader.consume(1);
                skipped += 1;
            }
            _ => break,
        }
    }
    Ok(skipped)
}

/// The longest start of `line` whose text (bytes that are not UTF-8 shown as U+FFFD)
/// fits in `room` bytes, cut between characters; and how many bytes of `line` it covers.
fn cut_line(line: &[u8], room: usize) -> (String, usize) {
    let mut text = String::new();
    let mut used = 0;
    for chunk in line.utf8_chunks() {
        for c in chunk.valid().chars() {
            if text.len() + c.len_utf8() > room {
                return (text, used);
            }
            text.push(c);
            used += c.len_utf8();
        }
        if !chunk.invalid().is_empty() {
            if text.len() + char::REPLACEMENT_CHARACTER.len_utf8() > room {
                return (text, used);
            }
            text.push(char::REPLACEMENT_CHARACTER);
            used += chunk.invalid().len();
        }
    }
    (text, used)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_are_right_aligned_in_six_columns() {
        for number in [0u64, 1, 9, 10, 99_999, 999_999, 1_000_000, u64::MAX] {
            assert_eq!(line_prefix(number), format!("{number:>6}\t"));
        }
    }

    /// The longest first line one reply holds whole: the budget less `     1\t` and `\n`.
    const LINE_1_MAX_BYTES: usize = FILE_READ_MAX_BYTES as usize - 8;

    fn read(content: &[u8], first: u64, offset: u64) -> Result<Lines, ToolError> {
        let range = Range {
            first,
            offset,
            count: None,
        };
        read_lines(&mut std::io::Cursor::new(content), &range, "f.txt")
    }

    /// Follows every continuation from the start; returns the text of each line, glued
    /// back together, and how many reads it took.
    fn follow(content: &[u8]) -> (Vec<String>, usize) {
        let (mut first, mut offset, mut reads) = (1, 0, 0);
        let mut out: Vec<String> = Vec::new();
        loop {
            reads += 1;
            assert!(reads < 100, "no end after 100 reads");
            let lines = read(content, first, offset).unwrap();
            for (i, line) in lines.numbered.iter().enumerate() {
                let text = line.split_once('\t').unwrap().1;
                if i == 0 && lines.offset > 0 {
                    out.last_mut().unwrap().push_str(text);
                } else {
                    out.push(text.to_owned());
                }
            }
            match lines.next {
                Some((line, at)) => {
                    assert!((line, at) > (first, offset), "no progress at {line}:{at}");
                    (first, offset) = (line, at);
                }
                None => {
                    assert!(lines.end_of_file);
                    return (out, reads);
                }
            }
        }
    }

    #[test]
    fn a_line_at_the_cap_is_whole_and_one_over_is_cut_with_a_continuation() {
        for len in [LINE_1_MAX_BYTES - 1, LINE_1_MAX_BYTES] {
            let line = "a".repeat(len);
            let lines = read(format!("{line}\nnext\n").as_bytes(), 1, 0).unwrap();
            assert_eq!(lines.numbered, [format!("     1\t{line}")], "{len}");
            assert_eq!(lines.next, Some((2, 0)), "{len}");
        }
        let line = "a".repeat(LINE_1_MAX_BYTES + 1);
        let lines = read(format!("{line}\nnext\n").as_bytes(), 1, 0).unwrap();
        assert_eq!(
            lines.numbered,
            [format!("     1\t{}", &line[..LINE_1_MAX_BYTES])]
        );
        assert_eq!(lines.next, Some((1, LINE_1_MAX_BYTES as u64)));
        let text = lines.render("f.txt", 0);
        assert!(
            text.contains(&format!("startLine 1 and lineOffset {LINE_1_MAX_BYTES}")),
            "{}",
            &text[text.len() - 200..]
        );
        let rest = read(
            format!("{line}\nnext\n").as_bytes(),
            1,
            LINE_1_MAX_BYTES as u64,
        )
        .unwrap();
        assert_eq!(rest.numbered, ["     1\ta", "     2\tnext"]);
        assert!(rest.end_of_file && rest.next.is_none());
        assert!(rest.render("f.txt", 0).contains("line 1 from byte"));
    }

    #[test]
    fn a_cut_never_splits_a_character_and_following_it_reaches_the_end() {
        // "é" is two bytes and "🦀" four: the cap falls inside one of them.
        for (c, pad) in [("é", 1), ("🦀", 1), ("🦀", 2), ("🦀", 3)] {
            let line = format!(
                "{}{}",
                "a".repeat(pad),
                c.repeat(3 * LINE_1_MAX_BYTES / c.len())
            );
            let content = format!("{line}\nshort\n{line}\n");
            let lines = read(content.as_bytes(), 1, 0).unwrap();
            let (_, at) = lines.next.unwrap();
            assert!(line.is_char_boundary(at as usize), "{c} {pad}: {at}");
            assert!(at as usize > LINE_1_MAX_BYTES - c.len() && at as usize <= LINE_1_MAX_BYTES);
            let (glued, reads) = follow(content.as_bytes());
            assert_eq!(glued, [line.as_str(), "short", line.as_str()], "{c} {pad}");
            assert!(reads <= 10, "{reads} reads");
        }
    }

    #[test]
    fn an_offset_inside_a_character_or_past_the_line_is_handled() {
        let content = "aé\nb\n".as_bytes();
        // Byte 2 is inside "é": the reply starts at the next character.
        let lines = read(content, 1, 2).unwrap();
        assert_eq!((lines.offset, lines.numbered[0].as_str()), (3, "     1\t"));
        let err = read(content, 1, 9).err().unwrap();
        assert_eq!(err.code, "invalid_arguments");
        assert!(err.message.contains("has 3 bytes"), "{}", err.message);
        assert_eq!(read(content, 3, 1).err().unwrap().code, "past_end");
        assert_eq!(read(content, 9, 0).err().unwrap().code, "past_end");
        // Bytes that are not UTF-8 show as U+FFFD and still move the offset on.
        let mut bad = vec![b'a'; LINE_1_MAX_BYTES + 10];
        bad[LINE_1_MAX_BYTES - 2] = 0xff;
        let (glued, _) = follow(&bad);
        assert_eq!(glued.len(), 1);
        assert_eq!(glued[0].chars().filter(|c| *c == '\u{fffd}').count(), 1);
        assert_eq!(glued[0].len(), LINE_1_MAX_BYTES + 10 + 2);
    }
}
