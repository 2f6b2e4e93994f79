//! Preview of delimited text (CSV, TSV): header, shape, and the first rows.

use std::io::{self, Read, Seek};

use crate::detect::Delimiter;
use crate::limits::{
    CSV_COLUMNS_SHOWN_MAX, CSV_ROWS_SHOWN_MAX, TEXT_HEAD_READ_MAX_BYTES, TEXT_SCAN_MAX_BYTES,
};
use crate::read::{decode_head, read_head};
use crate::wording::{count, grouped, human_bytes, shown_name};

/// The shape of a table, from one bounded pass.
#[derive(Debug, PartialEq, Eq)]
struct TableShape {
    header: Vec<String>,
    data_rows: u64,
    fewest_fields: usize,
    most_fields: usize,
    /// Why the pass stopped early, if it did.
    stopped: Option<String>,
}

/// The preview of a CSV or TSV file.
pub(crate) fn preview_table<R: Read + Seek>(
    reader: &mut R,
    size: u64,
    delimiter: Delimiter,
) -> io::Result<String> {
    let head = read_head(reader, TEXT_HEAD_READ_MAX_BYTES)?;
    let decoded = decode_head(&head, size <= TEXT_HEAD_READ_MAX_BYTES);
    let separator = match delimiter {
        Delimiter::Tab => b'\t',
        Delimiter::Sniffed => sniff_separator(&decoded.text),
    };
    reader.rewind()?;
    let shape = scan_shape(reader.take(TEXT_SCAN_MAX_BYTES), separator, size);

    let mut out = summary(&shape, separator);
    if decoded.had_invalid_utf8 {
        out.push_str(
            "\nNot valid UTF-8 (perhaps another encoding); undecodable bytes show as \u{fffd}.",
        );
    }
    out.push_str("\n\n");
    for line in decoded.text.lines().take(CSV_ROWS_SHOWN_MAX + 1) {
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// Picks `;` or tab over `,` when the header row has more of them, as
/// spreadsheets in many locales export.
pub(crate) fn sniff_separator(head: &str) -> u8 {
    let header = head.lines().next().unwrap_or_default();
    let occurrences = |separator: char| header.matches(separator).count();
    [b';', b'\t']
        .into_iter()
        .filter(|&candidate| occurrences(char::from(candidate)) > occurrences(','))
        .max_by_key(|&candidate| occurrences(char::from(candidate)))
        .unwrap_or(b',')
}

fn scan_shape<R: Read>(limited: R, separator: u8, size: u64) -> TableShape {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(separator)
        .from_reader(limited);
    let mut shape = TableShape {
        header: Vec::new(),
        data_rows: 0,
        fewest_fields: usize::MAX,
        most_fields: 0,
        stopped: None,
    };
    let mut record = csv::ByteRecord::new();
    let mut is_header = true;
    loop {
        match reader.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) if is_header => {
                shape.header = record
                    .iter()
                    .map(|field| shown_name(&String::from_utf8_lossy(field)))
                    .collect();
                is_header = false;
            }
            Ok(true) => {
                shape.data_rows += 1;
                shape.fewest_fields = shape.fewest_fields.min(record.len());
                shape.most_fields = shape.most_fields.max(record.len());
            }
            Err(error) => {
                shape.stopped = Some(format!("reading stopped at an error: {error}"));
                return shape;
            }
        }
    }
    if size > TEXT_SCAN_MAX_BYTES {
        shape.stopped = Some(format!(
            "rows counted in the first {}",
            human_bytes(TEXT_SCAN_MAX_BYTES)
        ));
    }
    shape
}

fn summary(shape: &TableShape, separator: u8) -> String {
    let separator_name = match separator {
        b'\t' => "tab",
        b';' => "semicolon",
        _ => "comma",
    };
    let columns = shape.header.len() as u64;
    let rows = count(shape.data_rows, "data row", "data rows");
    let mut out = format!(
        "Table ({separator_name}-separated), {} in the header row",
        count(columns, "column", "columns"),
    );
    match &shape.stopped {
        None => out.push_str(&format!(", {rows} after it.")),
        Some(reason) => out.push_str(&format!(", at least {rows} after it ({reason}).")),
    }
    if shape.data_rows > 0
        && (shape.fewest_fields != shape.header.len() || shape.most_fields != shape.header.len())
    {
        out.push_str(&format!(
            "\nRows have between {} and {} fields.",
            grouped(shape.fewest_fields as u64),
            grouped(shape.most_fields as u64)
        ));
    }
    if !shape.header.is_empty() {
        let listed = shape.header[..shape.header.len().min(CSV_COLUMNS_SHOWN_MAX)].join(" | ");
        out.push_str(&format!("\nColumns: {listed}"));
        let unlisted = shape.header.len().saturating_sub(CSV_COLUMNS_SHOWN_MAX);
        if unlisted > 0 {
            out.push_str(&format!(" … and {} more", grouped(unlisted as u64)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_the_separator_from_the_header() {
        assert_eq!(sniff_separator("a,b,c\n1;2"), b',');
        assert_eq!(sniff_separator("a;b;c\n"), b';');
        assert_eq!(sniff_separator("a\tb\tc,d"), b'\t');
        assert_eq!(sniff_separator(""), b',');
    }

    #[test]
    fn quoted_separators_and_newlines_do_not_split_fields() {
        let csv = "name,note\n\"Doe, J\",\"two\nlines\"\nRoe,x\n";
        let shape = scan_shape(csv.as_bytes(), b',', csv.len() as u64);
        assert_eq!(shape.header, ["name", "note"]);
        assert_eq!(shape.data_rows, 2);
        assert_eq!((shape.fewest_fields, shape.most_fields), (2, 2));
        assert_eq!(shape.stopped, None);
    }

    #[test]
    fn ragged_rows_are_reported() {
        let csv = "a,b,c\n1,2\n1,2,3,4\n";
        let shape = scan_shape(csv.as_bytes(), b',', csv.len() as u64);
        let text = summary(&shape, b',');
        assert!(text.contains("between 2 and 4 fields"), "{text}");
    }
}
