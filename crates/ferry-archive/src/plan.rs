//! The planner: reads an archive once and admits it whole, or refuses it with one reason.

use std::collections::HashMap;
use std::io::Read;

use crate::input::Input;
use crate::names::{self, Platform};
use crate::stream::{MemberKind, Stream};
use crate::{ArchiveError, PathPolicy};

/// The caps of one archive (core C-ARCHIVE), all enforced while it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The archive's bytes as they arrive (compressed, for gzip).
    pub archive_max_bytes: u64,
    /// Files and folders, each implicit parent counted once.
    pub max_descendants: u64,
    /// Bytes of one file.
    pub entry_max_bytes: u64,
    /// Bytes of all files together.
    pub unpacked_max_bytes: u64,
    /// Bytes of one PAX header's records.
    pub pax_max_bytes: u64,
    /// Bytes of one GNU long name record.
    pub long_name_max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        use ferry_config::limits::*;
        Limits {
            archive_max_bytes: ARCHIVE_MAX_BYTES,
            max_descendants: ARCHIVE_MAX_DESCENDANTS,
            entry_max_bytes: ARCHIVE_ENTRY_MAX_BYTES,
            unpacked_max_bytes: ARCHIVE_UNPACKED_MAX_BYTES,
            pax_max_bytes: ARCHIVE_PAX_MAX_BYTES,
            long_name_max_bytes: ARCHIVE_LONG_NAME_MAX_BYTES,
        }
    }
}

/// How an archive is planned: its caps, its destination and its path policy.
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    /// The caps.
    pub limits: Limits,
    /// The platform the archive is extracted on.
    pub platform: Platform,
    /// Which names may be admitted.
    pub policy: PathPolicy,
}

/// What an admitted entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryType {
    /// A regular file.
    File,
    /// A folder.
    Dir,
}

impl EntryType {
    /// `file` or `dir`, as the plan's JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::File => "file",
            EntryType::Dir => "dir",
        }
    }

    pub(crate) fn of(kind: MemberKind) -> EntryType {
        match kind {
            MemberKind::File => EntryType::File,
            MemberKind::Dir => EntryType::Dir,
        }
    }
}

/// One admitted entry, as the archive has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEntry {
    /// Its relative path, exact UTF-8, `.` components dropped, no trailing `/`.
    pub path: String,
    /// File or folder.
    pub kind: EntryType,
    /// Its bytes (0 for a folder).
    pub size: u64,
}

/// An admitted archive: what extraction will write, and nothing else.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The entries, in archive order.
    pub entries: Vec<PlannedEntry>,
    /// Files and folders the tree will hold, each implicit parent counted once.
    pub descendants: u64,
    pub(crate) limits: Limits,
    pub(crate) platform: Platform,
}

impl Plan {
    /// Bytes of all files together.
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }
}

/// Reads the archive in `reader` (tar, or gzip of a tar) and admits it, or refuses it.
pub fn plan(reader: impl Read, options: &PlanOptions) -> Result<Plan, ArchiveError> {
    let limits = options.limits;
    let mut stream = Stream::new(Input::new(reader, limits.archive_max_bytes)?, limits);
    let mut tree = Tree::new(options);
    let mut entries = Vec::new();
    let mut root_entry = RootEntry::default();
    while let Some(member) = stream.next_member()? {
        let Some(path) = names::admit(&member.name, member.kind, options.platform)? else {
            root_entry.met()?;
            continue;
        };
        tree.add(&path, member.kind)?;
        entries.push(PlannedEntry {
            path,
            kind: EntryType::of(member.kind),
            size: member.size,
        });
    }
    tree.check_allowed()?;
    Ok(Plan {
        entries,
        descendants: tree.nodes.len() as u64,
        limits,
        platform: options.platform,
    })
}

/// The archive's entry for the destination itself (`./`), which is no descendant: one is
/// accepted, a second collides, so entries that are never counted cannot be repeated
/// without end.
#[derive(Default)]
pub(crate) struct RootEntry {
    seen: bool,
}

impl RootEntry {
    pub(crate) fn met(&mut self) -> Result<(), ArchiveError> {
        if std::mem::replace(&mut self.seen, true) {
            return Err(ArchiveError::NameCollision {
                path: ".".into(),
                other: ".".into(),
                why: "the archive names the destination itself twice",
            });
        }
        Ok(())
    }
}

/// Every name the tree will hold, by the key names collide by on the destination.
struct Tree<'a> {
    options: &'a PlanOptions,
    nodes: HashMap<String, Node>,
}

struct Node {
    exact: String,
    dir: bool,
    /// The archive has a header for it (not only children).
    explicit: bool,
    /// It, or an entry beneath it, matches an allow glob.
    allowed: bool,
    /// When it was first met, to name the first one refused.
    order: usize,
}

impl<'a> Tree<'a> {
    fn new(options: &'a PlanOptions) -> Tree<'a> {
        Tree {
            options,
            nodes: HashMap::new(),
        }
    }

    fn add(&mut self, path: &str, kind: MemberKind) -> Result<(), ArchiveError> {
        for parent in names::parents(path) {
            self.add_name(parent, MemberKind::Dir, false)?;
        }
        self.add_name(path, kind, true)?;
        let policy = &self.options.policy;
        if policy.allows(path) {
            self.mark_allowed(path);
        } else if kind == MemberKind::File {
            return Err(ArchiveError::PathDenied {
                path: path.to_owned(),
            });
        }
        Ok(())
    }

    fn add_name(
        &mut self,
        path: &str,
        kind: MemberKind,
        explicit: bool,
    ) -> Result<(), ArchiveError> {
        let key = self.options.platform.collision_key(path);
        let is_dir = kind == MemberKind::Dir;
        if let Some(node) = self.nodes.get_mut(&key) {
            let collide = |why| ArchiveError::NameCollision {
                path: path.to_owned(),
                other: node.exact.clone(),
                why,
            };
            if node.exact != path {
                return Err(collide("they differ only in case or Unicode normalization"));
            }
            if node.dir != is_dir {
                return Err(collide("a file and a folder have the same name"));
            }
            if explicit && node.explicit {
                return Err(collide("the archive has the same name twice"));
            }
            node.explicit |= explicit;
            return Ok(());
        }
        let limit = self.options.limits.max_descendants;
        if self.nodes.len() as u64 >= limit {
            return Err(ArchiveError::TooManyEntries { limit });
        }
        self.options.policy.check_deny(path)?;
        let order = self.nodes.len();
        self.nodes.insert(
            key,
            Node {
                exact: path.to_owned(),
                dir: is_dir,
                explicit,
                allowed: false,
                order,
            },
        );
        Ok(())
    }

    /// Marks `path` and every folder above it as holding an allowed name.
    fn mark_allowed(&mut self, path: &str) {
        let platform = self.options.platform;
        let mut current = Some(path);
        while let Some(name) = current {
            match self.nodes.get_mut(&platform.collision_key(name)) {
                // Its parents were marked when it was.
                Some(node) if node.allowed => return,
                Some(node) => node.allowed = true,
                None => {}
            }
            current = name.rsplit_once('/').map(|(parent, _)| parent);
        }
    }

    /// With allow globs, refuses the first folder that neither matches one nor holds an
    /// entry that does.
    fn check_allowed(&self) -> Result<(), ArchiveError> {
        if !self.options.policy.has_allow() {
            return Ok(());
        }
        match self
            .nodes
            .values()
            .filter(|n| !n.allowed)
            .min_by_key(|n| n.order)
        {
            Some(node) => Err(ArchiveError::PathDenied {
                path: node.exact.clone(),
            }),
            None => Ok(()),
        }
    }
}
