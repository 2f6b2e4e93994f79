//! Lexical checks on relative paths, done before any syscall (spec core C-PATH).

use crate::FsError;

/// The longest path, in bytes, that any handle accepts.
pub const PATH_MAX_BYTES: usize = 4096;

/// Refuses what no relative path beneath a handle may be: empty, NUL, too long,
/// absolute, or holding a `..` component.
pub fn check_relative(rel: &str) -> Result<(), FsError> {
    if rel.is_empty() {
        return Err(FsError::EmptyPath);
    }
    if rel.len() > PATH_MAX_BYTES {
        return Err(FsError::PathTooLong);
    }
    if rel.contains('\0') {
        return Err(FsError::NulByte);
    }
    if rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
        return Err(FsError::PathEscapes);
    }
    Ok(())
}

/// Splits a checked relative path into its parent (if any) and last component.
/// The last component is never `.` or empty: `a/b/` is `a` and `b`, `.` alone is refused.
pub(crate) fn split_parent(rel: &str) -> Result<(Option<&str>, &str), FsError> {
    let trimmed = rel.trim_end_matches('/');
    let (parent, name) = match trimmed.rfind('/') {
        Some(i) => (Some(&trimmed[..i]), &trimmed[i + 1..]),
        None => (None, trimmed),
    };
    if name.is_empty() || name == "." {
        return Err(FsError::EmptyPath);
    }
    let parent = parent.filter(|p| !p.trim_matches(['/', '.']).is_empty());
    Ok((parent, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_before_any_syscall() {
        assert!(matches!(check_relative(""), Err(FsError::EmptyPath)));
        assert!(matches!(check_relative("a\0b"), Err(FsError::NulByte)));
        assert!(matches!(check_relative("/etc"), Err(FsError::PathEscapes)));
        assert!(matches!(
            check_relative("a/../b"),
            Err(FsError::PathEscapes)
        ));
        assert!(matches!(check_relative(".."), Err(FsError::PathEscapes)));
        assert!(check_relative("a/..b/c..").is_ok());
    }

    #[test]
    fn length_limit_at_the_edges() {
        assert!(check_relative(&"a".repeat(PATH_MAX_BYTES - 1)).is_ok());
        assert!(check_relative(&"a".repeat(PATH_MAX_BYTES)).is_ok());
        assert!(matches!(
            check_relative(&"a".repeat(PATH_MAX_BYTES + 1)),
            Err(FsError::PathTooLong)
        ));
    }

    #[test]
    fn splits_parent_and_name() {
        assert_eq!(split_parent("a").unwrap(), (None, "a"));
        assert_eq!(split_parent("a/b/c").unwrap(), (Some("a/b"), "c"));
        assert_eq!(split_parent("a/b/").unwrap(), (Some("a"), "b"));
        assert_eq!(split_parent("./a").unwrap(), (None, "a"));
        assert!(split_parent(".").is_err());
        assert!(split_parent("a/.").is_err());
    }
}
