//! The one source of random names: ids, tokens, temporaries and fences.

/// `N` bytes from the OS random source. Linux's `getrandom` does not fail once the pool
/// is initialised at boot, so a failure here is a broken host, not bad input.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes
}

/// `N` random bytes as lowercase base32 without padding (`a-z2-7`, 8 characters per 5
/// bytes): ids and tokens that must be unguessable.
pub fn random_base32<const N: usize>() -> String {
    data_encoding::BASE32_NOPAD
        .encode(&random_bytes::<N>())
        .to_ascii_lowercase()
}

/// `N` random bytes as lowercase hex (2 digits a byte).
pub fn random_hex<const N: usize>() -> String {
    crate::digest::hex(&random_bytes::<N>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelled_as_promised_and_never_repeated() {
        let a = random_base32::<10>();
        assert_eq!(a.len(), 16);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
        );
        let h = random_hex::<8>();
        assert_eq!(h.len(), 16);
        assert!(
            h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(random_base32::<10>(), a);
        assert_ne!(random_hex::<8>(), h);
    }
}
