//! SHA-256 of the whole file, streamed so memory stays flat for any size.

use std::io::{self, Read, Seek};

use sha2::{Digest, Sha256};

use crate::limits::HASH_READ_CHUNK_BYTES;

/// Hex SHA-256 of everything `reader` holds, read from its start.
pub fn sha256_hex<R: Read + Seek>(reader: &mut R) -> io::Result<String> {
    reader.rewind()?;
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; HASH_READ_CHUNK_BYTES];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => hasher.update(&chunk[..n]),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
    }
    Ok(format!("{:x}", hasher.finalize()))
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
