//! SHA-256 of the whole file, streamed so memory stays flat for any size.

use std::io::{self, Read, Seek};

/// Hex SHA-256 of everything `reader` holds, read from its start.
pub(crate) fn sha256_hex<R: Read + Seek>(reader: &mut R) -> io::Result<String> {
    reader.rewind()?;
    ferry_fs::sha256_hex_of_reader(reader)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn known_digests() {
        let empty = sha256_hex(&mut Cursor::new(Vec::new())).unwrap();
        assert_eq!(
            empty,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let abc = sha256_hex(&mut Cursor::new(b"abc".to_vec())).unwrap();
        assert_eq!(
            abc,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hashes_from_the_start_whatever_the_position() {
        let mut cursor = Cursor::new(b"abc".to_vec());
        cursor.set_position(2);
        assert!(sha256_hex(&mut cursor).unwrap().starts_with("ba7816bf"));
    }
}
