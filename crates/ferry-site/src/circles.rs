//! Circles (spec core C-SITE): named groups of persons sharing `circles/<circle>/`.
//! In host mode each circle is the group `fy_circle_<circle>` (spec tools T-ID).

use crate::db::{Exec, now_secs, params};
use crate::facts::{Recall, circles};
use crate::ids::check_id;
use crate::{Site, SiteError};

/// The circles' tables.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS circles (
    id TEXT PRIMARY KEY,
    created INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS circle_members (
    circle TEXT NOT NULL REFERENCES circles(id),
    person TEXT NOT NULL REFERENCES persons(id),
    PRIMARY KEY (circle, person)
);
CREATE INDEX IF NOT EXISTS circle_members_by_person ON circle_members (person, circle);
";

/// Mode of a new `circles/<circle>/` outside host mode (host mode sets root:group 2770).
const CIRCLE_DIR_MODE: u32 = 0o770;

/// A circle and its members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Circle {
    /// The circle's id.
    pub id: String,
    /// Member person ids, sorted.
    pub members: Vec<String>,
    /// Seconds since the Unix epoch.
    pub created: i64,
}

impl Site {
    /// Creates the circle `id` if it is new, adds `members` to it (members it already
    /// has stay), and makes its folder `circles/<id>/`. Every member must be a person of
    /// the site; otherwise nothing changes. Returns the circle as it now is.
    pub fn add_circle(&self, id: &str, members: &[String]) -> Result<Circle, SiteError> {
        check_id("circle", id)?;
        for person in members {
            check_id("person", person)?;
            self.require_person(person)?;
        }
        // Answered once no gateway remembers the members' circles as they were.
        self.change_facts(|tx| {
            tx.execute(
                "INSERT INTO circles (id, created) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![id, now_secs()],
            )?;
            let mut joined = 0;
            for person in members {
                joined += tx.execute(
                    "INSERT INTO circle_members (circle, person) VALUES (?1, ?2)
                     ON CONFLICT DO NOTHING",
                    params![id, person],
                )?;
            }
            Ok(joined)
        })?;
        self.make_dir(&crate::layout::circle(id), CIRCLE_DIR_MODE, None)?;
        // Circles are never removed, so the one just written is there.
        self.circle(id)?
            .ok_or_else(|| SiteError::Io(std::io::Error::other(format!("circle {id:?} vanished"))))
    }

    /// One circle, or `None` if there is none by that id.
    pub fn circle(&self, id: &str) -> Result<Option<Circle>, SiteError> {
        let created = self.db.row(
            "SELECT created FROM circles WHERE id = ?1",
            params![id],
            |r| r.get::<i64>(0),
        )?;
        let Some(created) = created else {
            return Ok(None);
        };
        let members = self.db.rows(
            "SELECT person FROM circle_members WHERE circle = ?1 ORDER BY person",
            params![id],
            |r| r.get(0),
        )?;
        Ok(Some(Circle {
            id: id.to_owned(),
            members,
            created,
        }))
    }

    /// Every circle with its members, sorted by id.
    pub fn circles(&self) -> Result<Vec<Circle>, SiteError> {
        let ids: Vec<String> =
            self.db
                .rows("SELECT id FROM circles ORDER BY id", params![], |r| {
                    r.get(0)
                })?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(circle) = self.circle(&id)? {
                out.push(circle);
            }
        }
        Ok(out)
    }

    /// The ids of the circles `person` belongs to, sorted.
    pub fn circles_of(&self, person: &str) -> Result<Vec<String>, SiteError> {
        let stamp = match self.facts.recall(circles, person) {
            Recall::Known(ids) => return Ok(ids),
            Recall::Ask(stamp) => stamp,
        };
        let ids: Vec<String> = self.db.rows(
            "SELECT circle FROM circle_members WHERE person = ?1 ORDER BY circle",
            params![person],
            |r| r.get(0),
        )?;
        self.facts.remember(stamp, circles, person, ids.clone());
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Site, SiteError};

    fn site() -> (tempfile::TempDir, Site) {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), crate::testing::config(tmp.path())).unwrap();
        (tmp, site)
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn circles_hold_members_and_grow() {
        let (tmp, site) = site();
        for p in ["ann", "bob", "cy"] {
            site.add_person(p).unwrap();
        }
        let c = site.add_circle("team", &ids(&["bob", "ann"])).unwrap();
        assert_eq!(c.members, ["ann", "bob"]);
        assert!(tmp.path().join("circles/team").is_dir());

        // Adding again keeps the members it had and adds the new ones.
        let c = site.add_circle("team", &ids(&["cy", "ann"])).unwrap();
        assert_eq!(c.members, ["ann", "bob", "cy"]);
        site.add_circle("empty", &[]).unwrap();

        let all = site.circles().unwrap();
        assert_eq!(
            all.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["empty", "team"]
        );
        assert!(all[0].members.is_empty());
        assert_eq!(site.circles_of("ann").unwrap(), ["team"]);
        assert!(site.circles_of("nobody").unwrap().is_empty());
        assert_eq!(site.circle("none").unwrap(), None);
    }

    #[test]
    fn unknown_members_and_bad_ids_change_nothing() {
        let (_tmp, site) = site();
        site.add_person("ann").unwrap();
        let err = site
            .add_circle("team", &ids(&["ann", "ghost"]))
            .unwrap_err();
        assert!(matches!(err, SiteError::UnknownPerson(p) if p == "ghost"));
        assert!(site.circles().unwrap().is_empty());
        assert!(matches!(
            site.add_circle("Team", &[]).unwrap_err(),
            SiteError::InvalidId { kind: "circle", .. }
        ));
        assert!(matches!(
            site.add_circle("../x", &[]).unwrap_err(),
            SiteError::InvalidId { .. }
        ));
    }
}
