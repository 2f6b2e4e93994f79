//! PAX extended header records (`LEN KEY=VALUE\n`), parsed strictly.

use crate::ArchiveError;

/// What the planner takes from one set of PAX records.
#[derive(Debug, Default)]
pub(crate) struct Pax {
    /// `path`: the entry's name, overriding the header's.
    pub(crate) path: Option<Vec<u8>>,
    /// `size`: the entry's size, overriding the header's.
    pub(crate) size: Option<u64>,
    /// A `linkpath` record: the entry is a link, whatever its type says.
    pub(crate) link: bool,
    /// A `GNU.sparse.*` record: the entry is a sparse file.
    pub(crate) sparse: bool,
}

/// Parses the records of one PAX header; later records of a key override earlier ones.
pub(crate) fn parse(mut data: &[u8]) -> Result<Pax, ArchiveError> {
    let bad = |why: &str| ArchiveError::malformed(format!("a PAX header {why}"));
    let mut pax = Pax::default();
    // Writers pad the last record's block with NULs only after the records.
    while !data.is_empty() && data[0] != 0 {
        let space = data
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("record has no length"))?;
        let len_text = &data[..space];
        if len_text.is_empty() || len_text.len() > 20 || !len_text.iter().all(u8::is_ascii_digit) {
            return Err(bad("record's length is not a number"));
        }
        let len: usize = std::str::from_utf8(len_text)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad("record's length is not a number"))?;
        if len <= space + 1 || len > data.len() {
            return Err(bad("record's length does not fit"));
        }
        let record = &data[space + 1..len];
        let Some((&b'\n', key_value)) = record.split_last() else {
            return Err(bad("record does not end with a newline"));
        };
        let equals = key_value
            .iter()
            .position(|&b| b == b'=')
            .ok_or_else(|| bad("record has no '='"))?;
        let (key, value) = (&key_value[..equals], &key_value[equals + 1..]);
        if key.is_empty() {
            return Err(bad("record has an empty key"));
        }
        apply(&mut pax, key, value)?;
        data = &data[len..];
    }
    if data.iter().any(|&b| b != 0) {
        return Err(bad("has bytes after its records"));
    }
    Ok(pax)
}

fn apply(pax: &mut Pax, key: &[u8], value: &[u8]) -> Result<(), ArchiveError> {
    match key {
        b"path" => pax.path = Some(value.to_vec()),
        b"size" => {
            let size = std::str::from_utf8(value)
                .ok()
                .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| ArchiveError::malformed("a PAX size record is not a number"))?;
            pax.size = Some(size);
        }
        b"linkpath" => pax.link = true,
        _ if key.starts_with(b"GNU.sparse.") => pax.sparse = true,
        // Times, owners, extended attributes and comments do not reach the plan.
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_and_later_ones_win() {
        let pax = parse(b"12 path=abc\n12 path=xyz\n11 size=42\n\0\0").unwrap();
        assert_eq!(pax.path.as_deref(), Some(&b"xyz"[..]));
        assert_eq!(pax.size, Some(42));
        assert!(!pax.link && !pax.sparse);
        let pax = parse("14 path=a\nb c\n".as_bytes()).unwrap();
        assert_eq!(pax.path.as_deref(), Some(&b"a\nb c"[..]));
    }

    #[test]
    fn broken_records_are_refused() {
        for data in [
            &b"13 path=abc\n"[..],
            b"11 path=abc\n",
            b"x path=abc\n",
            b"12 pathabc\n\n",
            b"13 path=abcd",
            b"6 =ab\n",
            b"11 size=1x\n",
            b"99999999999999999999999 path=a\n",
            b"12 path=abc\nrest",
            b"0 \n",
            b" 13 path=abc\n",
        ] {
            assert!(parse(data).is_err(), "{:?}", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn links_and_sparse_files_are_seen() {
        assert!(parse(b"15 linkpath=/x\n").unwrap().link);
        assert!(parse(b"22 GNU.sparse.major=1\n").unwrap().sparse);
    }
}
