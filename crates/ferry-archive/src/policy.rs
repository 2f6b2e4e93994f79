//! The path policy: allow and deny globs over the archive's relative names.
//!
//! Every name is checked: files, folders, implicit parents and AppleDouble `._name`
//! entries alike. A name matching a deny glob is denied. When there are allow globs, a
//! file must match one; a folder must match one or hold an entry that does, so
//! `--allow '*.txt'` admits `docs/a.txt` with its folder `docs` but not an empty `docs/`.

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::ArchiveError;

/// Allow and deny globs (globset syntax; `*` also matches `/`, as in `**`).
#[derive(Clone, Debug)]
pub struct PathPolicy {
    allow: Option<GlobSet>,
    deny: GlobSet,
}

impl Default for PathPolicy {
    fn default() -> Self {
        PathPolicy::allow_all()
    }
}

impl PathPolicy {
    /// A policy that admits every name.
    pub fn allow_all() -> PathPolicy {
        PathPolicy {
            allow: None,
            deny: GlobSet::empty(),
        }
    }

    /// A policy from allow and deny globs; no allow globs means every name not denied.
    pub fn new<A, D>(allow: A, deny: D) -> Result<PathPolicy, ArchiveError>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        D: IntoIterator,
        D::Item: AsRef<str>,
    {
        let allow = build(allow)?;
        let deny = build(deny)?;
        Ok(PathPolicy {
            allow: (!allow.is_empty()).then_some(allow),
            deny,
        })
    }

    /// Refuses a name a deny glob matches.
    pub(crate) fn check_deny(&self, path: &str) -> Result<(), ArchiveError> {
        if self.deny.is_match(path) {
            return Err(ArchiveError::PathDenied {
                path: path.to_owned(),
            });
        }
        Ok(())
    }

    /// Whether the allow globs name `path` itself (true when there are none).
    pub(crate) fn allows(&self, path: &str) -> bool {
        self.allow.as_ref().is_none_or(|set| set.is_match(path))
    }

    /// Whether there are allow globs at all.
    pub(crate) fn has_allow(&self) -> bool {
        self.allow.is_some()
    }
}

fn build<I>(globs: I) -> Result<GlobSet, ArchiveError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let glob = glob.as_ref();
        let parsed = Glob::new(glob).map_err(|e| ArchiveError::BadGlob {
            glob: glob.to_owned(),
            why: e.kind().to_string(),
        })?;
        builder.add(parsed);
    }
    builder.build().map_err(|e| ArchiveError::BadGlob {
        glob: String::new(),
        why: e.to_string(),
    })
}
