//! Pick links: the signed upload link of a pick, and the per-site key that signs it.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::time::SystemTime;

use ferry_fs::{Follow, FsError};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{InteractionError, millis, new_id};
use crate::layout::SERVICE_DIR;
use crate::{Site, SiteError};

/// The per-site key that signs pick links, in the service dir.
pub(super) const PICK_LINK_KEY_FILE: &str = "pick-link.key";
pub(super) const PICK_LINK_KEY_BYTES: usize = 32;

/// The message a pick link signs: the pick and the link's expiry, nothing a client chose.
fn link_message(id: &str, expires_secs: u64) -> String {
    format!("ferry pick upload\n{id}\n{expires_secs}")
}

pub(crate) type HmacSha256 = Hmac<Sha256>;

impl Site {
    // ------------------------------------------------------------------ pick links

    /// The upload link of pick `id`, valid until `expires` (cut to whole seconds, rounded
    /// up): `/v1/picks/<id>/upload?expires=<unix seconds>&sig=<hex HMAC-SHA256>`.
    pub fn pick_link(&self, id: &str, expires: SystemTime) -> Result<String, SiteError> {
        let expires_secs = u64::try_from(millis(expires).max(0))
            .unwrap_or(0)
            .div_ceil(1000);
        let mut mac = self.link_mac()?;
        mac.update(link_message(id, expires_secs).as_bytes());
        let sig = data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes());
        Ok(format!(
            "/v1/picks/{id}/upload?expires={expires_secs}&sig={sig}"
        ))
    }

    /// Checks a link's `expires` and `sig` as a client presented them: a signature that
    /// does not match is [`InteractionError::BadSignature`], a link past its expiry
    /// [`InteractionError::LinkExpired`]. Says nothing of the pick's state.
    pub fn check_pick_link(&self, id: &str, expires: &str, sig: &str) -> Result<(), SiteError> {
        self.check_pick_link_at(id, expires, sig, SystemTime::now())
    }

    /// [`Site::check_pick_link`] with an explicit clock.
    pub fn check_pick_link_at(
        &self,
        id: &str,
        expires: &str,
        sig: &str,
        now: SystemTime,
    ) -> Result<(), SiteError> {
        let bad = || SiteError::from(InteractionError::BadSignature);
        // Plain digits only: no sign, no spaces, no second spelling of the same number.
        let well_formed = !expires.is_empty()
            && expires.bytes().all(|b| b.is_ascii_digit())
            && (expires == "0" || !expires.starts_with('0'));
        let expires_secs: u64 = match expires.parse() {
            Ok(secs) if well_formed => secs,
            _ => return Err(bad()),
        };
        let sig = data_encoding::HEXLOWER
            .decode(sig.as_bytes())
            .map_err(|_| bad())?;
        let mut mac = self.link_mac()?;
        mac.update(link_message(id, expires_secs).as_bytes());
        mac.verify_slice(&sig).map_err(|_| bad())?;
        let expires_ms = i64::try_from(expires_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        if millis(now) >= expires_ms {
            return Err(InteractionError::LinkExpired.into());
        }
        Ok(())
    }

    /// An HMAC keyed with the site's link key (pick links, share links: each signs a
    /// message that begins with its own purpose, so one never verifies as the other).
    pub(crate) fn link_mac(&self) -> Result<HmacSha256, SiteError> {
        let key = self.link_key()?;
        // HMAC takes a key of any length; this cannot fail.
        HmacSha256::new_from_slice(&key).map_err(|e| std::io::Error::other(e.to_string()).into())
    }

    /// The site's link key, made on first use: random, 0600, in the service dir. A new key
    /// is published with a hard link, which never replaces an existing file, so two
    /// processes making one at once end up with the same key.
    fn link_key(&self) -> Result<[u8; PICK_LINK_KEY_BYTES], SiteError> {
        if let Some(key) = self.read_link_key()? {
            return Ok(key);
        }
        let service = self.path().join(SERVICE_DIR);
        let mut key = [0u8; PICK_LINK_KEY_BYTES];
        getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
        let temp = service.join(format!("{}{}", ferry_fs::TEMP_PREFIX, new_id("")?));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(&key)?;
            file.sync_all()?;
            match std::fs::hard_link(&temp, service.join(PICK_LINK_KEY_FILE)) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
                _ => Ok(()),
            }
        })();
        let _ = std::fs::remove_file(&temp);
        written?;
        self.read_link_key()?
            .ok_or_else(|| std::io::Error::other("the pick link key vanished").into())
    }

    fn read_link_key(&self) -> Result<Option<[u8; PICK_LINK_KEY_BYTES]>, SiteError> {
        let service = self.root().open_dir(SERVICE_DIR, Follow::Never)?;
        let mut file = match service.open_file(PICK_LINK_KEY_FILE, Follow::Never) {
            Ok(file) => file,
            Err(FsError::NotFound) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut key = [0u8; PICK_LINK_KEY_BYTES];
        let mut extra = [0u8; 1];
        file.read_exact(&mut key)?;
        if file.read(&mut extra)? != 0 {
            return Err(std::io::Error::other(format!(
                "{SERVICE_DIR}/{PICK_LINK_KEY_FILE} is not a {PICK_LINK_KEY_BYTES}-byte key; \
                 remove it and a new one is made (open upload links stop working)"
            ))
            .into());
        }
        Ok(Some(key))
    }
}
