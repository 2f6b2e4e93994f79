//! Share links (spec M-DAILY "Share a file"): a URL that downloads one file of a
//! person's `public/` without a token, until it expires or is revoked.
//!
//! A link is `/s/<id>?sig=<hex>`. The id (160 random bits) names the record here; the
//! signature is an HMAC, keyed with the site's link key (in the service's folder, never
//! in the database), over everything the record says: id, person, project, path and
//! expiry. So the database alone cannot make a working link, a record changed by hand
//! stops verifying, and revoking or expiring is a field of the record the check reads.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_codes::Code;
use ferry_config::limits::{
    SHARE_MAX_EXPIRY_SECS, SHARE_MIN_EXPIRY_SECS, SHARE_RECORD_KEEP_SECS,
    SHARES_MAX_LIVE_PER_PERSON,
};
use hmac::Mac;

use crate::db::{Exec, now_secs, params};
use crate::ids::{check_id, is_record_id, new_record_id};
use crate::{Site, SiteError};

/// Hex digits in a share link's signature (HMAC-SHA256).
const SHARE_SIG_HEX_CHARS: usize = 64;
/// The path of a share link, before its id.
pub const SHARE_ROUTE_PREFIX: &str = "/s/";

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS shares (
    id TEXT PRIMARY KEY,
    person TEXT NOT NULL REFERENCES persons(id),
    -- '' for the person's main workspace
    project TEXT NOT NULL,
    -- public/... of the one file the link downloads
    path TEXT NOT NULL,
    created INTEGER NOT NULL,
    expires INTEGER NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS shares_by_person ON shares (person, expires);
";

/// Why a share link could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// No such link: an unknown id, a signature that does not verify, another person's
    /// link, a malformed link. One answer for all, so nothing is learnt by trying.
    #[error("this link does not exist or does not work any more")]
    Unknown,
    /// The link's time is over.
    #[error("this link has expired; ask for a new one")]
    Expired,
    /// The person who made the link revoked it.
    #[error("this link was revoked by the person who shared it")]
    Revoked,
    /// The life asked for is outside what a link may have; holds what was asked.
    #[error(
        "expiresInSecs must be from {SHARE_MIN_EXPIRY_SECS} to {SHARE_MAX_EXPIRY_SECS} \
         seconds (1 minute to 30 days), not {0}"
    )]
    BadExpiry(i64),
    /// The person has [`SHARES_MAX_LIVE_PER_PERSON`] live links already.
    #[error(
        "you have {SHARES_MAX_LIVE_PER_PERSON} live share links, as many as one may; \
         revoke some first"
    )]
    TooMany,
}

impl ShareError {
    /// The code this failure is answered with.
    pub fn code(&self) -> Code {
        match self {
            ShareError::Unknown => Code::NotFound,
            ShareError::Expired => Code::ShareExpired,
            ShareError::Revoked => Code::ShareRevoked,
            ShareError::BadExpiry(_) => Code::InvalidRequest,
            ShareError::TooMany => Code::TooManyShares,
        }
    }
}

/// One share link's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// Its id, the first part of the link.
    pub id: String,
    /// The person whose file it downloads, as that person.
    pub person: String,
    /// The project the file is in; none for the main workspace.
    pub project: Option<String>,
    /// The file, `public/…`.
    pub path: String,
    /// When it was made, in seconds since the epoch.
    pub created: i64,
    /// When it stops working, in seconds since the epoch.
    pub expires: i64,
    /// Whether its person revoked it.
    pub revoked: bool,
    /// The file it was made for ([`file_mark`]): a file at `path` without this mark is
    /// another one, which the link does not download. Empty for a link made before
    /// links were bound to their file, which names its path only.
    pub file_mark: String,
}

/// What tells the file a link was made for from any other at its path: its inode and
/// the moment it last changed, to the nanosecond. A file deleted and another put in its
/// place (even at the same inode, which file systems reuse), a file replaced by an
/// upload or an edit, and a file changed in place all answer another mark.
pub fn file_mark(inode: u64, modified: SystemTime) -> String {
    let nanos = modified
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{inode}:{nanos}")
}

impl Share {
    /// When it stops working.
    pub fn expires_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.expires.max(0) as u64)
    }
}

const COLUMNS: &str = "id, person, project, path, created, expires, revoked, file_mark";

fn share_row(r: &ferry_sql::Row) -> Result<Share, SiteError> {
    let project: String = r.get(2)?;
    Ok(Share {
        id: r.get(0)?,
        person: r.get(1)?,
        project: (!project.is_empty()).then_some(project),
        path: r.get(3)?,
        created: r.get(4)?,
        expires: r.get(5)?,
        revoked: r.get::<i64>(6)? != 0,
        file_mark: r.get(7)?,
    })
}

/// Checks a life asked for in seconds against the bounds of a link.
pub fn check_share_expiry(secs: i64) -> Result<u64, ShareError> {
    match u64::try_from(secs) {
        Ok(s) if (SHARE_MIN_EXPIRY_SECS..=SHARE_MAX_EXPIRY_SECS).contains(&s) => Ok(s),
        _ => Err(ShareError::BadExpiry(secs)),
    }
}

impl Site {
    /// Makes a link to the file `path` (`public/…`, already normalized and checked to be
    /// a file, whose [`file_mark`] is `file`) of `person`'s workspace or `project`,
    /// working for `expires_in_secs`.
    pub fn create_share(
        &self,
        person: &str,
        project: Option<&str>,
        path: &str,
        file: &str,
        expires_in_secs: i64,
    ) -> Result<Share, SiteError> {
        check_id("person", person)?;
        if let Some(project) = project {
            check_id("project", project)?;
        }
        let life = check_share_expiry(expires_in_secs)?;
        let now = now_secs();
        let live: i64 = self
            .db
            .row(
                "SELECT COUNT(*) FROM shares WHERE person = ?1 AND revoked = 0 AND expires > ?2",
                params![person, now],
                |r| r.get(0),
            )?
            .unwrap_or(0);
        if live >= SHARES_MAX_LIVE_PER_PERSON as i64 {
            return Err(ShareError::TooMany.into());
        }
        let share = Share {
            id: new_record_id(),
            person: person.to_owned(),
            project: project.map(str::to_owned),
            path: path.to_owned(),
            created: now,
            expires: now.saturating_add(life as i64),
            revoked: false,
            file_mark: file.to_owned(),
        };
        self.db.execute(
            "INSERT INTO shares (id, person, project, path, created, expires, file_mark) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                share.id,
                share.person,
                project.unwrap_or(""),
                share.path,
                share.created,
                share.expires,
                share.file_mark
            ],
        )?;
        Ok(share)
    }

    /// The link of `share`, relative to the gateway: `/s/<id>?sig=<hex>`.
    pub fn share_url(&self, share: &Share) -> Result<String, SiteError> {
        let sig = data_encoding::HEXLOWER.encode(&self.share_mac(share)?.finalize().into_bytes());
        Ok(format!("{SHARE_ROUTE_PREFIX}{}?sig={sig}", share.id))
    }

    /// The HMAC of a share's record: each field with its length first, so no two
    /// records sign alike.
    fn share_mac(&self, share: &Share) -> Result<crate::interactions::HmacSha256, SiteError> {
        let mut mac = self.link_mac()?;
        mac.update(b"ferry share link\n");
        let expires = share.expires.to_string();
        for field in [
            share.id.as_str(),
            share.person.as_str(),
            share.project.as_deref().unwrap_or(""),
            share.path.as_str(),
            expires.as_str(),
        ] {
            mac.update(&(field.len() as u64).to_le_bytes());
            mac.update(field.as_bytes());
        }
        // Signed too once links had it, so the links made before still verify.
        if !share.file_mark.is_empty() {
            mac.update(&(share.file_mark.len() as u64).to_le_bytes());
            mac.update(share.file_mark.as_bytes());
        }
        Ok(mac)
    }

    /// `person`'s live links (neither expired nor revoked), newest first.
    pub fn shares(&self, person: &str) -> Result<Vec<Share>, SiteError> {
        self.db.rows(
            &format!(
                "SELECT {COLUMNS} FROM shares WHERE person = ?1 AND revoked = 0 AND expires > ?2 \
                 ORDER BY created DESC, id"
            ),
            params![person, now_secs()],
            share_row,
        )
    }

    /// Revokes `person`'s link `id`; anyone else's, or none, is [`ShareError::Unknown`].
    pub fn revoke_share(&self, person: &str, id: &str) -> Result<(), SiteError> {
        if !is_record_id(id) {
            return Err(ShareError::Unknown.into());
        }
        let changed = self.db.execute(
            "UPDATE shares SET revoked = 1 WHERE id = ?1 AND person = ?2",
            params![id, person],
        )?;
        if changed == 0 {
            return Err(ShareError::Unknown.into());
        }
        Ok(())
    }

    /// The record a link `/s/<id>?sig=<sig>` stands for, if it still works at `now`. A
    /// malformed link, an unknown id and a signature that does not verify (compared in
    /// constant time) are all [`ShareError::Unknown`]; only a link that verifies may
    /// learn that it expired or was revoked.
    pub fn open_share_at(&self, id: &str, sig: &str, now: SystemTime) -> Result<Share, SiteError> {
        let unknown = || SiteError::from(ShareError::Unknown);
        if !is_record_id(id) || sig.len() != SHARE_SIG_HEX_CHARS {
            return Err(unknown());
        }
        let sig = data_encoding::HEXLOWER
            .decode(sig.as_bytes())
            .map_err(|_| unknown())?;
        let share = self
            .db
            .row(
                &format!("SELECT {COLUMNS} FROM shares WHERE id = ?1"),
                params![id],
                share_row,
            )?
            .ok_or_else(unknown)?;
        self.share_mac(&share)?
            .verify_slice(&sig)
            .map_err(|_| unknown())?;
        if share.revoked {
            return Err(ShareError::Revoked.into());
        }
        if now >= share.expires_at() {
            return Err(ShareError::Expired.into());
        }
        Ok(share)
    }

    /// [`Site::open_share_at`] now.
    pub fn open_share(&self, id: &str, sig: &str) -> Result<Share, SiteError> {
        self.open_share_at(id, sig, SystemTime::now())
    }

    /// Removes the records of links past their expiry by more than
    /// [`SHARE_RECORD_KEEP_SECS`]; the number removed.
    pub fn sweep_shares(&self, now: SystemTime) -> Result<usize, SiteError> {
        let now = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs()
            .min(i64::MAX as u64) as i64;
        let before = now.saturating_sub(SHARE_RECORD_KEEP_SECS as i64);
        Ok(self
            .db
            .execute("DELETE FROM shares WHERE expires <= ?1", params![before])?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> (tempfile::TempDir, Site) {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), crate::testing::config(tmp.path())).unwrap();
        site.add_person("ann").unwrap();
        site.add_person("bob").unwrap();
        (tmp, site)
    }

    fn sig_of(url: &str) -> &str {
        url.split_once("?sig=").unwrap().1
    }

    #[test]
    fn expiry_bounds_at_each_limit() {
        let min = SHARE_MIN_EXPIRY_SECS as i64;
        let max = SHARE_MAX_EXPIRY_SECS as i64;
        for ok in [min, min + 1, max - 1, max] {
            assert_eq!(check_share_expiry(ok).unwrap(), ok as u64);
        }
        for bad in [-1, 0, min - 1, max + 1, i64::MIN, i64::MAX] {
            assert!(matches!(
                check_share_expiry(bad),
                Err(ShareError::BadExpiry(_))
            ));
        }
    }

    #[test]
    fn a_link_verifies_only_as_made() {
        let (_tmp, site) = site();
        let share = site
            .create_share("ann", None, "public/a.txt", "", 3600)
            .unwrap();
        let url = site.share_url(&share).unwrap();
        assert!(url.starts_with(&format!("/s/{}?sig=", share.id)), "{url}");
        let sig = sig_of(&url).to_owned();
        assert_eq!(site.open_share(&share.id, &sig).unwrap(), share);

        // One digit changed, upper case, cut short, another link's signature: unknown.
        let mut flipped = sig.clone().into_bytes();
        flipped[10] = if flipped[10] == b'0' { b'1' } else { b'0' };
        let other = site
            .create_share("ann", None, "public/b.txt", "", 3600)
            .unwrap();
        let other_sig = sig_of(&site.share_url(&other).unwrap()).to_owned();
        for bad in [
            String::from_utf8(flipped).unwrap(),
            sig.to_uppercase(),
            sig[..63].to_owned(),
            other_sig,
            String::new(),
        ] {
            let e = site.open_share(&share.id, &bad).unwrap_err();
            assert_eq!(e.code(), Code::NotFound, "{bad}");
        }
        // A record changed by hand no longer verifies.
        site.db
            .execute(
                "UPDATE shares SET path = 'public/other.txt' WHERE id = ?1",
                params![&share.id],
            )
            .unwrap();
        assert_eq!(
            site.open_share(&share.id, &sig).unwrap_err().code(),
            Code::NotFound
        );
    }

    #[test]
    fn expired_and_revoked_say_so_and_are_swept() {
        let (_tmp, site) = site();
        let share = site
            .create_share("ann", None, "public/a.txt", "", 60)
            .unwrap();
        let sig = sig_of(&site.share_url(&share).unwrap()).to_owned();
        let at = |secs: u64| share.expires_at() + Duration::from_secs(secs);
        let just_before = share.expires_at() - Duration::from_secs(1);
        assert!(site.open_share_at(&share.id, &sig, just_before).is_ok());
        let e = site.open_share_at(&share.id, &sig, at(0)).unwrap_err();
        assert_eq!(e.code(), Code::ShareExpired);

        // Only its person may revoke it.
        let e = site.revoke_share("bob", &share.id).unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        site.revoke_share("ann", &share.id).unwrap();
        let e = site.open_share(&share.id, &sig).unwrap_err();
        assert_eq!(e.code(), Code::ShareRevoked);
        assert!(site.shares("ann").unwrap().is_empty());

        assert_eq!(
            site.sweep_shares(at(SHARE_RECORD_KEEP_SECS - 1)).unwrap(),
            0
        );
        assert_eq!(site.sweep_shares(at(SHARE_RECORD_KEEP_SECS)).unwrap(), 1);
        let e = site.open_share(&share.id, &sig).unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
    }

    #[test]
    fn live_links_are_capped_per_person() {
        let (_tmp, site) = site();
        for _ in 0..SHARES_MAX_LIVE_PER_PERSON - 1 {
            site.create_share("ann", None, "public/a.txt", "", 60)
                .unwrap();
        }
        let last = site
            .create_share("ann", None, "public/a.txt", "", 60)
            .unwrap();
        let e = site
            .create_share("ann", None, "public/a.txt", "", 60)
            .unwrap_err();
        assert_eq!(e.code(), Code::TooManyShares);
        assert!(
            site.create_share("bob", None, "public/a.txt", "", 60)
                .is_ok()
        );
        site.revoke_share("ann", &last.id).unwrap();
        assert!(
            site.create_share("ann", None, "public/a.txt", "", 60)
                .is_ok()
        );
        assert_eq!(
            site.shares("ann").unwrap().len(),
            SHARES_MAX_LIVE_PER_PERSON
        );
    }
}
