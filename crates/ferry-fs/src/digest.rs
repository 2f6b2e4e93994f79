//! The one spelling of a SHA-256 digest: lowercase hex.

use std::io::{self, Read};

use sha2::{Digest, Sha256};

/// Bytes hashed at a time by [`sha256_hex_of_reader`].
const HASH_CHUNK_BYTES: usize = 256 * 1024;
/// What a hash reads first, on the stack.
const SMALL_CHUNK_BYTES: usize = 16 * 1024;

/// Lowercase hex of `bytes` (a digest, or any short binary value).
pub fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of everything `reader` yields from where it stands, streamed so
/// memory stays flat whatever the size.
pub fn sha256_hex_of_reader<R: Read>(reader: &mut R) -> io::Result<String> {
    let mut hasher = Sha256::new();
    // Most files checked are small (an edit's, a delivery's): they are read through a
    // buffer on the stack, and only a file that fills it gets the big one. A fresh
    // 256 KiB buffer cost an edit more than everything else it did.
    let mut small = [0u8; SMALL_CHUNK_BYTES];
    let mut big: Vec<u8> = Vec::new();
    loop {
        let chunk: &mut [u8] = if big.is_empty() { &mut small } else { &mut big };
        match reader.read(chunk) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&chunk[..n]);
                if n == SMALL_CHUNK_BYTES && big.is_empty() {
                    big = vec![0u8; HASH_CHUNK_BYTES];
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
    }
    Ok(hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn known_digests_whole_and_streamed() {
        assert_eq!(sha256_hex(b""), EMPTY);
        assert_eq!(sha256_hex(b"abc"), ABC);
        assert_eq!(sha256_hex_of_reader(&mut &b"abc"[..]).unwrap(), ABC);
        assert_eq!(sha256_hex_of_reader(&mut io::empty()).unwrap(), EMPTY);
    }

    #[test]
    fn streamed_across_chunks_equals_whole() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(HASH_CHUNK_BYTES * 2 + 1).collect();
        let streamed = sha256_hex_of_reader(&mut io::Cursor::new(&bytes)).unwrap();
        assert_eq!(streamed, sha256_hex(&bytes));
    }

    /// Around the size where the big buffer takes over, and with reads that come short.
    #[test]
    fn streamed_around_the_small_buffer_equals_whole() {
        for len in [
            SMALL_CHUNK_BYTES - 1,
            SMALL_CHUNK_BYTES,
            SMALL_CHUNK_BYTES + 1,
        ] {
            let bytes: Vec<u8> = (0..=250u8).cycle().take(len).collect();
            let whole = sha256_hex(&bytes);
            assert_eq!(sha256_hex_of_reader(&mut &bytes[..]).unwrap(), whole);
            // A first read that comes short.
            let (a, rest) = bytes.split_at(3);
            let mut short = a.chain(rest);
            assert_eq!(sha256_hex_of_reader(&mut short).unwrap(), whole);
        }
    }

    #[test]
    fn hex_is_lowercase_and_two_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
    }
}
