//! What writers that died left in the site's trees (spec core C-ATOMIC: "no temporaries
//! past the next start"). Every write goes through a hidden temporary beside its target
//! (`.ferry-tmp-…`); a writer killed midway (a gateway, `ferry mcp`, a person's worker)
//! leaves it there. Listings never show one; this removes them.
//!
//! Which are dead is told by age: a writer that lives touches its temporary as the
//! bytes come, and a body that stalls for [`ferry_config::limits::BODY_IDLE_TIMEOUT_SECS`]
//! is cut off, so one untouched for [`TEMPORARY_STALE`] has no writer. Only the resumable
//! uploads' temporaries wait longer between their parts; their rows claim them, and
//! their own sweep removes them when they expire.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use crate::db::{Exec, params};
use crate::layout::{CIRCLES_DIR, HOME_DIR, PRIVATE_DIR, SHARED_DIR};
use crate::{Site, SiteError};

/// How long a temporary may go untouched before it counts as left by a writer that died:
/// twenty times the longest a live upload may stall.
pub const TEMPORARY_STALE: Duration = Duration::from_secs(600);

impl Site {
    /// Removes, beneath the trees people and agents write in, every temporary untouched
    /// for [`TEMPORARY_STALE`] that no resumable upload holds. How many went.
    pub fn sweep_stale_temporaries(&self) -> Result<usize, SiteError> {
        let claimed: HashSet<String> = self
            .db
            .rows("SELECT temp FROM resumable_uploads", params![], |r| {
                r.get(0)
            })?
            .into_iter()
            .collect();
        let cutoff = SystemTime::now() - TEMPORARY_STALE;
        let mut removed = 0;
        // Tree by tree and folder by folder (each person's, each circle's…): one that
        // cannot be walked is said in the log and the others are still swept.
        for tree in [HOME_DIR, PRIVATE_DIR, CIRCLES_DIR, SHARED_DIR] {
            let dir = match self.root().open_dir(tree, ferry_fs::Follow::Never) {
                Ok(dir) => dir,
                Err(ferry_fs::FsError::NotFound) => continue,
                Err(e) => return Err(e.into()),
            };
            removed += dir.remove_stale_temporaries_here(cutoff, |n| claimed.contains(n))?;
            for entry in dir.entries()? {
                if entry.meta.kind != ferry_fs::EntryKind::Dir {
                    continue;
                }
                let swept = dir
                    .open_dir(&entry.name, ferry_fs::Follow::Never)
                    .and_then(|d| d.remove_stale_temporaries(cutoff, |n| claimed.contains(n)));
                match swept {
                    Ok(n) => removed += n,
                    Err(e) => {
                        tracing::warn!("removing stale temporaries in {tree}/{}: {e}", entry.name)
                    }
                }
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::path::Path;

    use super::*;

    fn aged(path: &Path, age: Duration) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        File::create(path)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
    }

    #[test]
    fn stale_temporaries_go_from_every_tree_but_those_uploads_hold() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), crate::testing::config(tmp.path())).unwrap();
        site.add_person("ann").unwrap();
        let data = tmp.path();
        let old = TEMPORARY_STALE + Duration::from_secs(60);
        let temp = |dir: &str, name: &str| data.join(dir).join(format!(".ferry-tmp-{name}"));
        aged(&temp("home/ann/public", "upload"), old);
        aged(&temp("home/ann/public/deep/er", "write"), old);
        aged(&temp("private/people/ann/tmp", "draft"), old);
        aged(&temp("shared/public", "shared"), old);
        aged(&temp("home", "top"), old);
        // Written a moment ago: its writer may live.
        aged(&temp("home/ann/public", "young"), TEMPORARY_STALE / 2);
        // A resumable upload between its parts.
        aged(&temp("home/ann/public", "resumable"), old);
        site.db
            .execute(
                "INSERT INTO resumable_uploads (id, person, name, given, metadata,
                     replace_existing, length, received, temp, dev, ino, created, expires)
                 VALUES ('u1', 'ann', 'a.bin', 'a.bin', '', 0, 10, 5, ?1, 0, 0, 0, ?2)",
                params![".ferry-tmp-resumable", i64::MAX / 2],
            )
            .unwrap();
        // Not a temporary, however old.
        aged(&data.join("home/ann/public/report.txt"), old);

        assert_eq!(site.sweep_stale_temporaries().unwrap(), 5);
        for gone in ["upload", "top"] {
            let dir = if gone == "top" {
                "home"
            } else {
                "home/ann/public"
            };
            assert!(!temp(dir, gone).exists(), "{gone}");
        }
        assert!(!temp("home/ann/public/deep/er", "write").exists());
        assert!(!temp("private/people/ann/tmp", "draft").exists());
        assert!(!temp("shared/public", "shared").exists());
        assert!(temp("home/ann/public", "young").exists());
        assert!(temp("home/ann/public", "resumable").exists());
        assert!(data.join("home/ann/public/report.txt").exists());
        assert_eq!(site.sweep_stale_temporaries().unwrap(), 0);
    }
}
