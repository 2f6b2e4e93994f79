//! Worker labels: one path component, safe to name a folder and a file.

use ferry_config::limits::HERD_LABEL_MAX_BYTES;

use crate::HerdError;

/// Checks a label: 1 to [`HERD_LABEL_MAX_BYTES`] bytes of ASCII letters, digits, `.`,
/// `_` and `-`, starting with a letter or a digit (so never `.`, `..`, a hidden name or
/// an option), and no `/`.
pub fn check_label(label: &str) -> Result<(), HerdError> {
    let ok = !label.is_empty()
        && label.len() <= HERD_LABEL_MAX_BYTES
        && label.as_bytes()[0].is_ascii_alphanumeric()
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(HerdError::invalid(format!(
            "the label {label:?} is not usable: 1 to {HERD_LABEL_MAX_BYTES} letters, digits, \
             '.', '_' or '-', starting with a letter or a digit"
        )))
    }
}

/// A label made from an agent's name when the caller gives none: the name itself when
/// it is a label, else `worker`.
pub fn default_label(agent: &str) -> String {
    if check_label(agent).is_ok() {
        agent.to_owned()
    } else {
        "worker".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_one_safe_component_of_at_most_the_limit() {
        for ok in ["a", "reviewer-2", "A.b_c", "9lives"] {
            check_label(ok).unwrap();
        }
        check_label(&"a".repeat(HERD_LABEL_MAX_BYTES - 1)).unwrap();
        check_label(&"a".repeat(HERD_LABEL_MAX_BYTES)).unwrap();
        check_label(&"a".repeat(HERD_LABEL_MAX_BYTES + 1)).unwrap_err();
        for bad in [
            "", ".", "..", ".hidden", "-x", "_x", "a/b", "a b", "@owner", "é", "a\0b",
        ] {
            assert_eq!(
                check_label(bad).unwrap_err().code,
                ferry_codes::Code::InvalidRequest,
                "{bad:?}"
            );
        }
        assert_eq!(default_label("reviewer"), "reviewer");
        assert_eq!(default_label("../x"), "worker");
    }
}
