//! Ids of persons, circles and projects (spec core C-SITE).

use crate::SiteError;

use ferry_config::limits::ID_MAX_BYTES;

/// Accepts `[a-z0-9][a-z0-9_-]{0,21}` and nothing else.
pub fn check_id(kind: &'static str, id: &str) -> Result<(), SiteError> {
    let bytes = id.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= ID_MAX_BYTES
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-');
    if valid {
        Ok(())
    } else {
        Err(SiteError::InvalidId {
            kind,
            id: id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_grammar_and_nothing_else() {
        for good in ["a", "me", "q2-report", "0_x", &"a".repeat(22)] {
            assert!(check_id("person", good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "A",
            "-a",
            "_a",
            "a/b",
            "a.b",
            "../a",
            "é",
            " a",
            &"a".repeat(23),
            "a\0",
        ] {
            assert!(check_id("person", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn length_at_the_edges() {
        assert!(check_id("project", &"a".repeat(ID_MAX_BYTES - 1)).is_ok());
        assert!(check_id("project", &"a".repeat(ID_MAX_BYTES)).is_ok());
        assert!(check_id("project", &"a".repeat(ID_MAX_BYTES + 1)).is_err());
    }
}
