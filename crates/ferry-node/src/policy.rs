//! Path rules over a node's absolute paths (spec N-PAIR): what may be read, what may be
//! written, and what never. The gateway holds one set per node (`[nodes.<id>]` in
//! ferry.toml) and the node its own (`ferry node run --allow-read …`, `node.toml`); each
//! checks every request, the node on the canonical path it is about to touch.
//!
//! Globs follow the usual shell spelling over `/`-separated paths: `*` and `?` stay
//! within one component, `**` spans any number, `{a,b}` and `[ab]` choose. A glob ending
//! in `/**` also admits the folder it names, so `--allow-read '/srv/**'` lets `/srv`
//! itself be listed. A path a deny glob matches is denied whatever the allow globs say;
//! with no allow globs nothing is allowed (the default denies everything).

use globset::GlobSet;
// The one glob compiler, shared with the configuration's check of `[nodes.<id>]`.
use ferry_config::globs::path_glob_set as build;

use crate::NodeError;
use ferry_codes::Code;
use serde::{Deserialize, Serialize};

/// What a request does with a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Lists, describes or fetches it.
    Read,
    /// Creates or replaces it.
    Write,
}

impl Access {
    fn as_str(self) -> &'static str {
        match self {
            Access::Read => "reading",
            Access::Write => "writing",
        }
    }
}

/// Allow-read, allow-write and deny globs over absolute paths.
#[derive(Clone, Debug)]
pub struct PathRules {
    read: GlobSet,
    write: GlobSet,
    deny: GlobSet,
    /// The globs as given, to say what is allowed in a refusal.
    spelled: Spelled,
    /// Another side's rules that must allow a path too, and whose they are.
    also: Option<Box<(PathRules, &'static str)>>,
}

#[derive(Clone, Debug, Default)]
struct Spelled {
    read: Vec<String>,
    write: Vec<String>,
    deny: Vec<String>,
}

/// The gateway's rules for one kind of access, as globs, sent with a call: the node
/// applies them as well as its own to the canonical path it is about to touch, before
/// it touches it. Checking the asked path alone is not enough once links are followed,
/// since only the node sees where a link leads; a listing hides what they do not allow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SentRules {
    /// The allow globs of that access.
    pub allow: Vec<String>,
    /// The deny globs.
    pub deny: Vec<String>,
}

/// At most this many globs in [`SentRules`] sent with one call.
pub const SENT_RULES_MAX_GLOBS: usize = 1024;
/// At most this many bytes in one glob of [`SentRules`].
pub const SENT_RULES_MAX_GLOB_BYTES: usize = 4096;

impl SentRules {
    /// The rules for `access`, compiled; globs past the bounds, or that do not parse,
    /// are refused.
    pub fn compile(&self, access: Access) -> Result<PathRules, NodeError> {
        let refuse = |why: String| NodeError::Remote {
            code: Code::InvalidArguments,
            message: format!("the gateway's rules sent with the call: {why}"),
        };
        let mut globs = self.allow.iter().chain(&self.deny);
        if self.allow.len() + self.deny.len() > SENT_RULES_MAX_GLOBS {
            return Err(refuse(format!("more than {SENT_RULES_MAX_GLOBS} globs")));
        }
        if globs.any(|g| g.len() > SENT_RULES_MAX_GLOB_BYTES) {
            return Err(refuse(format!(
                "a glob is longer than {SENT_RULES_MAX_GLOB_BYTES} bytes"
            )));
        }
        match access {
            Access::Read => PathRules::new(&self.allow, &[], &self.deny),
            Access::Write => PathRules::new(&[], &self.allow, &self.deny),
        }
        .map_err(refuse)
    }
}

impl Default for PathRules {
    fn default() -> Self {
        PathRules::deny_all()
    }
}

impl PathRules {
    /// Rules that allow nothing.
    pub fn deny_all() -> PathRules {
        PathRules {
            read: GlobSet::empty(),
            write: GlobSet::empty(),
            deny: GlobSet::empty(),
            spelled: Spelled::default(),
            also: None,
        }
    }

    /// Rules from globs; a glob that does not parse, or is not absolute, is refused with
    /// its reason. A glob is absolute, or starts with `**/` to match at any depth.
    pub fn new(
        allow_read: &[String],
        allow_write: &[String],
        deny: &[String],
    ) -> Result<PathRules, String> {
        Ok(PathRules {
            read: build(allow_read)?,
            write: build(allow_write)?,
            deny: build(deny)?,
            spelled: Spelled {
                read: allow_read.to_vec(),
                write: allow_write.to_vec(),
                deny: deny.to_vec(),
            },
            also: None,
        })
    }

    /// These rules, and `other` (`whose` they are, for refusals) as well: a path is
    /// allowed only when both allow it.
    pub fn and(mut self, other: PathRules, whose: &'static str) -> PathRules {
        self.also = Some(Box::new((other, whose)));
        self
    }

    /// The globs of `access` and the deny globs as spelled, to send with a call (see
    /// [`SentRules`]).
    pub fn sent(&self, access: Access) -> SentRules {
        SentRules {
            allow: match access {
                Access::Read => self.spelled.read.clone(),
                Access::Write => self.spelled.write.clone(),
            },
            deny: self.spelled.deny.clone(),
        }
    }

    /// Whether nothing at all is allowed.
    pub fn allows_nothing(&self) -> bool {
        self.read.is_empty() && self.write.is_empty()
    }

    /// Whether `path` (absolute and normal, see [`normal_path`]) may be accessed so.
    pub fn allows(&self, access: Access, path: &str) -> bool {
        self.allows_own(access, path)
            && self
                .also
                .as_ref()
                .is_none_or(|also| also.0.allows(access, path))
    }

    /// Whether these rules alone, without [`PathRules::and`]'s other side, allow it.
    fn allows_own(&self, access: Access, path: &str) -> bool {
        let allow = match access {
            Access::Read => &self.read,
            Access::Write => &self.write,
        };
        !self.deny.is_match(path) && allow.is_match(path)
    }

    /// Refuses `path` with `path_denied` unless it may be accessed so; `whose` names the
    /// rules in the sentence ("the gateway's", "this node's").
    pub fn check(&self, access: Access, path: &str, whose: &str) -> Result<(), NodeError> {
        if self.allows(access, path) {
            return Ok(());
        }
        if let Some(also) = &self.also
            && !also.0.allows(access, path)
            && self.allows_own(access, path)
        {
            return also.0.check(access, path, also.1);
        }
        let allowed = match access {
            Access::Read => &self.spelled.read,
            Access::Write => &self.spelled.write,
        };
        let hint = if self.deny.is_match(path) {
            "a deny glob matches it".to_owned()
        } else if allowed.is_empty() {
            format!("nothing may be {}", access.as_str())
        } else {
            format!(
                "{} is allowed only under {}",
                access.as_str(),
                allowed.join(", ")
            )
        };
        Err(NodeError::Remote {
            code: Code::PathDenied,
            message: format!(
                "{whose} path policy does not allow {} {path}: {hint}",
                access.as_str()
            ),
        })
    }
}

/// Checks that `path` is absolute and normal: starts with `/`, has no empty, `.` or `..`
/// component, no trailing `/` (except the root itself) and no NUL. Rules are matched on
/// the path as given, so a path that could mean something else is refused, never
/// repaired.
pub fn normal_path(path: &str) -> Result<&str, NodeError> {
    let refuse = |why: &str| NodeError::Remote {
        code: Code::BadPath,
        message: format!("{path:?} is not a path the node takes: {why}"),
    };
    if !path.starts_with('/') {
        return Err(refuse("it must be absolute"));
    }
    if path.contains('\0') {
        return Err(refuse("it holds a NUL"));
    }
    if path == "/" {
        return Ok(path);
    }
    for component in path[1..].split('/') {
        match component {
            "" => return Err(refuse("it has an empty component or ends with /")),
            "." | ".." => return Err(refuse("it has a . or .. component")),
            _ => {}
        }
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(read: &[&str], write: &[&str], deny: &[&str]) -> PathRules {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PathRules::new(&own(read), &own(write), &own(deny)).unwrap()
    }

    #[test]
    fn nothing_is_allowed_by_default() {
        let r = PathRules::deny_all();
        assert!(!r.allows(Access::Read, "/"));
        assert!(!r.allows(Access::Read, "/etc/passwd"));
        assert!(r.allows_nothing());
    }

    #[test]
    fn a_double_star_admits_its_folder_and_everything_beneath() {
        let r = rules(&["/srv/**"], &["/srv/inbox/**"], &[]);
        for p in ["/srv", "/srv/a", "/srv/a/b/c.txt"] {
            assert!(r.allows(Access::Read, p), "{p}");
        }
        for p in ["/", "/srvx", "/sr", "/etc/srv/a"] {
            assert!(!r.allows(Access::Read, p), "{p}");
        }
        assert!(r.allows(Access::Write, "/srv/inbox/new.txt"));
        assert!(!r.allows(Access::Write, "/srv/other.txt"));
        // Writing is not reading.
        let w = rules(&[], &["/drop/**"], &[]);
        assert!(!w.allows(Access::Read, "/drop/a"));
    }

    #[test]
    fn a_single_star_stays_within_one_component() {
        let r = rules(&["/data/*.csv"], &[], &[]);
        assert!(r.allows(Access::Read, "/data/a.csv"));
        assert!(!r.allows(Access::Read, "/data/sub/a.csv"));
    }

    #[test]
    fn deny_wins_over_allow() {
        let r = rules(
            &["/srv/**"],
            &["/srv/**"],
            &["/srv/secret/**", "**/.ssh/**"],
        );
        assert!(!r.allows(Access::Read, "/srv/secret"));
        assert!(!r.allows(Access::Read, "/srv/secret/key"));
        assert!(!r.allows(Access::Write, "/srv/home/.ssh/authorized_keys"));
        assert!(r.allows(Access::Read, "/srv/public"));
        let e = r
            .check(Access::Read, "/srv/secret/key", "this node's")
            .unwrap_err();
        assert_eq!(e.code(), Code::PathDenied);
        assert!(e.to_string().contains("deny glob"), "{e}");
    }

    #[test]
    fn relative_or_broken_globs_are_refused() {
        assert!(PathRules::new(&["srv/**".into()], &[], &[]).is_err());
        assert!(PathRules::new(&["/srv/[".into()], &[], &[]).is_err());
    }

    #[test]
    fn only_normal_absolute_paths_are_taken() {
        for p in ["/", "/srv", "/srv/a b/ü.txt"] {
            assert_eq!(normal_path(p).unwrap(), p);
        }
        for p in [
            "",
            "srv",
            "/srv/",
            "/srv//a",
            "/srv/./a",
            "/srv/../etc",
            "/a\0b",
        ] {
            assert_eq!(normal_path(p).unwrap_err().code(), Code::BadPath, "{p:?}");
        }
    }
}
