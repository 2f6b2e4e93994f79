//! One 512-byte tar header, read field by field with every number checked.
//!
//! Only what the planner needs is read: the name (with the ustar prefix), the type, the
//! size, the mode and the checksum. Owners, link targets and device numbers are never used.

use crate::ArchiveError;

/// The size of a tar block, header or data.
pub(crate) const BLOCK_BYTES: usize = 512;

/// What a header says its entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file (`0`, or NUL in old archives).
    File,
    /// A folder (`5`).
    Dir,
    /// PAX extended attributes for the next entry (`x`).
    PaxNext,
    /// PAX attributes for every later entry (`g`).
    PaxGlobal,
    /// A GNU long name for the next entry (`L`).
    GnuLongName,
    /// Anything else; holds a sentence naming it.
    Unsupported(&'static str),
}

impl Kind {
    fn from_flag(flag: u8) -> Kind {
        match flag {
            b'0' | 0 => Kind::File,
            b'5' => Kind::Dir,
            b'x' => Kind::PaxNext,
            b'g' => Kind::PaxGlobal,
            b'L' => Kind::GnuLongName,
            b'1' => Kind::Unsupported("a hard link"),
            b'2' => Kind::Unsupported("a symbolic link"),
            b'3' => Kind::Unsupported("a character device"),
            b'4' => Kind::Unsupported("a block device"),
            b'6' => Kind::Unsupported("a FIFO"),
            b'7' => Kind::Unsupported("a contiguous file"),
            b'S' => Kind::Unsupported("a sparse file"),
            b'K' => Kind::Unsupported("a GNU long link name"),
            b'D' => Kind::Unsupported("a GNU directory dump"),
            b'M' => Kind::Unsupported("a multi-volume continuation"),
            b'V' => Kind::Unsupported("a volume label"),
            _ => Kind::Unsupported("an entry of unknown type"),
        }
    }
}

/// The fields of one header that the planner uses.
#[derive(Debug)]
pub(crate) struct Header {
    /// The name as stored: ustar prefix and name joined, without NUL padding.
    pub(crate) name: Vec<u8>,
    /// The entry's type.
    pub(crate) kind: Kind,
    /// The data bytes that follow the header (before padding).
    pub(crate) size: u64,
}

/// Is this block all zeros (the end-of-archive marker)?
pub(crate) fn is_zero_block(block: &[u8; BLOCK_BYTES]) -> bool {
    block.iter().all(|&b| b == 0)
}

/// Reads a header block, refusing a bad checksum or a malformed number.
pub(crate) fn parse(block: &[u8; BLOCK_BYTES]) -> Result<Header, ArchiveError> {
    check_checksum(block)?;
    let kind = Kind::from_flag(block[156]);
    let size = number(&block[124..136], "size")?;
    number(&block[100..108], "mode")?;
    number(&block[136..148], "mtime")?;
    let name = field(&block[0..100]);
    // Only POSIX ustar has a prefix; old GNU headers keep other fields there.
    let prefix = if &block[257..263] == b"ustar\0" {
        field(&block[345..500])
    } else {
        &[]
    };
    let mut joined = Vec::with_capacity(prefix.len() + 1 + name.len());
    if !prefix.is_empty() {
        joined.extend_from_slice(prefix);
        joined.push(b'/');
    }
    joined.extend_from_slice(name);
    Ok(Header {
        name: joined,
        kind,
        size,
    })
}

/// A text field: its bytes up to the first NUL.
fn field(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// The checksum is the sum of the header's bytes with its own field read as spaces;
/// old writers summed signed bytes, so either sum is accepted.
fn check_checksum(block: &[u8; BLOCK_BYTES]) -> Result<(), ArchiveError> {
    let stored = number(&block[148..156], "checksum")?;
    let mut unsigned: u64 = 0;
    let mut signed: i64 = 0;
    for (i, &b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    if stored == unsigned || i64::try_from(stored).is_ok_and(|s| s == signed) {
        Ok(())
    } else {
        Err(ArchiveError::malformed(format!(
            "a header's checksum is {stored}, its bytes sum to {unsigned}"
        )))
    }
}

/// A numeric field: octal digits with optional leading spaces, ended by NUL or space,
/// or GNU's base-256 (the first byte's high bit set) for values octal cannot hold.
fn number(bytes: &[u8], what: &str) -> Result<u64, ArchiveError> {
    if bytes.first().is_some_and(|&b| b & 0x80 != 0) {
        return base256(bytes, what);
    }
    let bad = || ArchiveError::malformed(format!("a header's {what} field is not an octal number"));
    let start = bytes.iter().position(|&b| b != b' ').unwrap_or(bytes.len());
    let digits_end = bytes[start..]
        .iter()
        .position(|&b| !b.is_ascii_digit())
        .map_or(bytes.len(), |i| start + i);
    if bytes[digits_end..].iter().any(|&b| b != 0 && b != b' ') {
        return Err(bad());
    }
    let mut value: u64 = 0;
    for &digit in &bytes[start..digits_end] {
        if digit > b'7' {
            return Err(bad());
        }
        value = value
            .checked_mul(8)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(value)
}

/// A GNU base-256 number: big-endian, the first byte's high bit a marker. Negative
/// values (0xff first) are refused: no field the planner reads may be negative.
fn base256(bytes: &[u8], what: &str) -> Result<u64, ArchiveError> {
    let bad = || ArchiveError::malformed(format!("a header's {what} field is out of range"));
    if bytes[0] & 0x40 != 0 {
        return Err(bad());
    }
    let mut value: u64 = u64::from(bytes[0] & 0x3f);
    for &b in &bytes[1..] {
        value = value
            .checked_mul(256)
            .and_then(|v| v.checked_add(u64::from(b)))
            .ok_or_else(bad)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_fields() {
        assert_eq!(number(b"0000644\0", "mode").unwrap(), 0o644);
        assert_eq!(number(b"   644 \0", "mode").unwrap(), 0o644);
        assert_eq!(number(b"\0\0\0\0\0\0\0\0", "mode").unwrap(), 0);
        assert!(number(b"0000648\0", "mode").is_err());
        assert!(number(b"00006x4\0", "mode").is_err());
        assert!(number(b"644\0 1\0\0", "mode").is_err());
        assert!(number(b"77777777777777777777777", "size").is_err());
    }

    #[test]
    fn base256_fields() {
        let mut size = [0u8; 12];
        size[0] = 0x80;
        size[11] = 5;
        assert_eq!(number(&size, "size").unwrap(), 5);
        size[0] = 0xff;
        assert!(number(&size, "size").is_err());
        let mut huge = [0xffu8; 12];
        huge[0] = 0x80;
        assert!(number(&huge, "size").is_err());
    }
}
