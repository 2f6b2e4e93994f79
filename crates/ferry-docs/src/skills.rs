//! The skills check (spec tools T-SKILL): `skills/<name>/SKILL.md`, with front matter naming
//! the skill and describing it. A SKILL.md over [`SKILL_MAX_BYTES`] or [`SKILL_MAX_LINES`]
//! is refused: `ferry skills check` fails on it and the gateway does not load it.

use std::io::Read;
use std::path::{Path, PathBuf};

use ferry_config::limits::{SKILL_MAX_BYTES, SKILL_MAX_LINES};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// A skill that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// The front matter's `name`.
    pub name: String,
    /// The front matter's `description`: what the skill is for.
    pub description: String,
    /// The folder holding SKILL.md and whatever scripts and references go with it.
    pub dir: PathBuf,
    /// SKILL.md after its front matter.
    pub body: String,
}

/// Why a SKILL.md is refused.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// Over [`SKILL_MAX_BYTES`]: the size it has.
    #[error(
        "SKILL.md has {0} bytes; the limit is {SKILL_MAX_BYTES}: move detail into files beside it"
    )]
    TooLarge(u64),
    /// Over [`SKILL_MAX_LINES`]: the lines it has.
    #[error(
        "SKILL.md has {0} lines; the limit is {SKILL_MAX_LINES}: move detail into files beside it"
    )]
    TooManyLines(usize),
    /// Not UTF-8.
    #[error("SKILL.md is not UTF-8 text")]
    NotText,
    /// No `---` front matter block at the top.
    #[error(
        "SKILL.md must start with front matter: a line '---', 'name: …' and 'description: …', then '---'"
    )]
    NoFrontMatter,
    /// The front matter lacks this field, or it is empty.
    #[error("the front matter of SKILL.md has no {0:?}")]
    MissingField(&'static str),
    /// The file could not be read.
    #[error("SKILL.md cannot be read: {0}")]
    Io(#[from] std::io::Error),
}

/// Every skill under a skills folder, and the ones refused with why.
#[derive(Debug, Default)]
pub struct SkillSet {
    /// The skills that passed, sorted by folder.
    pub skills: Vec<Skill>,
    /// The folders refused, each with why.
    pub refused: Vec<(PathBuf, SkillError)>,
}

/// Loads one skill folder, checking its SKILL.md.
pub fn load_skill(dir: &Path) -> Result<Skill, SkillError> {
    let file = std::fs::File::open(dir.join(SKILL_FILE))?;
    // Read at most one byte past the limit: a huge file is refused without loading it.
    let mut bytes = Vec::new();
    file.take(SKILL_MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > SKILL_MAX_BYTES {
        let size = std::fs::metadata(dir.join(SKILL_FILE))?.len();
        return Err(SkillError::TooLarge(size));
    }
    let text = String::from_utf8(bytes).map_err(|_| SkillError::NotText)?;
    let lines = text.lines().count();
    if lines > SKILL_MAX_LINES {
        return Err(SkillError::TooManyLines(lines));
    }
    let (front, body) = split_front_matter(&text).ok_or(SkillError::NoFrontMatter)?;
    let field = |key: &'static str| {
        front
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().trim_matches(['"', '\'']).to_owned())
            .filter(|v| !v.is_empty())
            .ok_or(SkillError::MissingField(key))
    };
    Ok(Skill {
        name: field("name")?,
        description: field("description")?,
        dir: dir.to_path_buf(),
        body: body.to_owned(),
    })
}

/// Loads every `<name>/SKILL.md` under `root` (or `root` itself when it is one skill).
pub fn load_skills(root: &Path) -> std::io::Result<SkillSet> {
    let mut dirs = Vec::new();
    if root.join(SKILL_FILE).is_file() {
        dirs.push(root.to_path_buf());
    } else {
        for entry in std::fs::read_dir(root)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() && entry.path().join(SKILL_FILE).is_file() {
                dirs.push(entry.path());
            }
        }
    }
    dirs.sort();
    let mut set = SkillSet::default();
    for dir in dirs {
        match load_skill(&dir) {
            Ok(skill) => set.skills.push(skill),
            Err(e) => set.refused.push((dir, e)),
        }
    }
    Ok(set)
}

/// `(front matter, body)` of a text that starts with a `---` line and has a closing one.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "---\nname: report\ndescription: Builds a report\n---\n";

    fn skill_with(text: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("report");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(SKILL_FILE), text).unwrap();
        (tmp, dir)
    }

    /// A SKILL.md of exactly `bytes` bytes.
    fn of_size(bytes: usize) -> String {
        let mut text = HEAD.to_owned();
        text.push_str(&"x".repeat(bytes - HEAD.len()));
        text
    }

    /// A SKILL.md of exactly `lines` lines.
    fn of_lines(lines: usize) -> String {
        let mut text = HEAD.to_owned();
        text.push_str(&"line\n".repeat(lines - HEAD.lines().count()));
        text
    }

    #[test]
    fn reads_front_matter_and_body() {
        let (_tmp, dir) = skill_with(&format!("{HEAD}Write to public/attachments/.\n"));
        let skill = load_skill(&dir).unwrap();
        assert_eq!(skill.name, "report");
        assert_eq!(skill.description, "Builds a report");
        assert_eq!(skill.body, "Write to public/attachments/.\n");
    }

    #[test]
    fn byte_limit_at_the_edges() {
        let limit = SKILL_MAX_BYTES as usize;
        for size in [limit - 1, limit] {
            let (_tmp, dir) = skill_with(&of_size(size));
            assert!(load_skill(&dir).is_ok(), "{size} bytes");
        }
        let (_tmp, dir) = skill_with(&of_size(limit + 1));
        assert!(
            matches!(load_skill(&dir), Err(SkillError::TooLarge(n)) if n == SKILL_MAX_BYTES + 1)
        );
    }

    #[test]
    fn line_limit_at_the_edges() {
        for lines in [SKILL_MAX_LINES - 1, SKILL_MAX_LINES] {
            let (_tmp, dir) = skill_with(&of_lines(lines));
            assert!(load_skill(&dir).is_ok(), "{lines} lines");
        }
        let (_tmp, dir) = skill_with(&of_lines(SKILL_MAX_LINES + 1));
        assert!(
            matches!(load_skill(&dir), Err(SkillError::TooManyLines(n)) if n == SKILL_MAX_LINES + 1)
        );
    }

    #[test]
    fn refuses_what_is_not_a_skill() {
        let (_tmp, dir) = skill_with("no front matter\n");
        assert!(matches!(load_skill(&dir), Err(SkillError::NoFrontMatter)));
        let (_tmp, dir) = skill_with("---\nname: x\n---\nbody\n");
        assert!(matches!(
            load_skill(&dir),
            Err(SkillError::MissingField("description"))
        ));
        let (_tmp, dir) = skill_with("---\nname: x\ndescription: y\n");
        assert!(matches!(load_skill(&dir), Err(SkillError::NoFrontMatter)));
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(SKILL_FILE), [0xff, 0xfe]).unwrap();
        assert!(matches!(load_skill(tmp.path()), Err(SkillError::NotText)));
    }

    #[test]
    fn a_folder_of_skills_keeps_the_good_and_names_the_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("good", HEAD.to_owned()),
            ("big", of_size(SKILL_MAX_BYTES as usize + 1)),
        ] {
            std::fs::create_dir(tmp.path().join(name)).unwrap();
            std::fs::write(tmp.path().join(name).join(SKILL_FILE), text).unwrap();
        }
        std::fs::create_dir(tmp.path().join("not-a-skill")).unwrap();
        let set = load_skills(tmp.path()).unwrap();
        assert_eq!(set.skills.len(), 1);
        assert_eq!(set.skills[0].dir, tmp.path().join("good"));
        assert_eq!(set.refused.len(), 1);
        assert_eq!(set.refused[0].0, tmp.path().join("big"));
    }
}
