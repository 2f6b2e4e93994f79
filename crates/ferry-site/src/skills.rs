//! The site's bundled skills (spec tools T-SKILL), `skills/<skill>/SKILL.md`, loaded
//! through the skills check of `ferry-docs`.

use ferry_docs::skills::{SkillSet, load_skills};
use ferry_fs::{Follow, FsError};

use crate::layout::SKILLS_DIR;
use crate::{Site, SiteError};

impl Site {
    /// The site's bundled skills. `skills/` is a root like any other: when it is a
    /// symbolic link nothing is loaded through it ([`SiteError::Unsafe`]).
    pub fn skills(&self) -> Result<SkillSet, SiteError> {
        match self.root().open_dir(SKILLS_DIR, Follow::Never) {
            Ok(_) => {}
            Err(FsError::NotFound) => return Ok(SkillSet::default()),
            Err(FsError::PathEscapes) => {
                return Err(SiteError::Unsafe {
                    path: SKILLS_DIR.into(),
                    why: "is a symbolic link; no skill is loaded through it".into(),
                });
            }
            Err(e) => return Err(e.into()),
        }
        Ok(load_skills(&self.path().join(SKILLS_DIR))?)
    }
}
