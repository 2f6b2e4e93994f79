//! Bearer tokens (spec members M-AUTH): random, stored hashed, compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::db::{Exec, now_secs, params};
use crate::facts::{Recall, TokenRow, tokens};
use crate::{Site, SiteError};

/// Every token starts with this, so a leaked one is easy to recognize in a scan.
const TOKEN_TAG: &str = "fy_";
/// Random bytes per token: 160 bits.
const TOKEN_RANDOM_BYTES: usize = 20;
/// Characters of a token kept in clear as its public handle (for lookup and revocation).
const TOKEN_PREFIX_CHARS: usize = 12;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// A member: their own workspace and projects.
    Person,
    /// The agent runtime of one person's workspace: deliveries and the chat stream.
    Harness,
    /// Site administration, and everything a person token of the same person may do.
    Admin,
}

impl TokenKind {
    /// The name used on the command line and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Person => "person",
            TokenKind::Harness => "harness",
            TokenKind::Admin => "admin",
        }
    }

    /// Parses `person`, `harness` or `admin`.
    pub fn parse(s: &str) -> Option<TokenKind> {
        match s {
            "person" => Some(TokenKind::Person),
            "harness" => Some(TokenKind::Harness),
            "admin" => Some(TokenKind::Admin),
            _ => None,
        }
    }
}

/// Who a request is: the person a valid token belongs to, and the token's kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The person the token belongs to.
    pub person: String,
    /// What the token may do.
    pub kind: TokenKind,
    /// The token's public handle (its clear prefix, the row's key): two tokens of one
    /// person are two principals.
    pub handle: String,
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Site {
    /// Makes a new token for `person` and returns it; only its hash is kept.
    pub fn create_token(&self, person: &str, kind: TokenKind) -> Result<String, SiteError> {
        self.insert_token(person, kind, "")
    }

    /// Makes the harness token gateway `gateway` itself presents to the upstream agent of
    /// `person` (so that the agent can deliver). It lasts while that gateway runs: once
    /// the gateway is gone, [`Site::sweep_gateways`] revokes it.
    pub fn create_relay_token(&self, person: &str, gateway: &str) -> Result<String, SiteError> {
        self.insert_token(
            person,
            TokenKind::Harness,
            &crate::gateways::relay_purpose(gateway),
        )
    }

    fn insert_token(
        &self,
        person: &str,
        kind: TokenKind,
        purpose: &str,
    ) -> Result<String, SiteError> {
        self.require_person(person)?;
        let token = format!(
            "{TOKEN_TAG}{}",
            ferry_fs::random_base32::<TOKEN_RANDOM_BYTES>()
        );
        self.db.execute(
            "INSERT INTO tokens (prefix, hash, person, kind, created, purpose)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                &token[..TOKEN_PREFIX_CHARS],
                hash(&token).as_slice(),
                person,
                kind.as_str(),
                now_secs(),
                purpose
            ],
        )?;
        Ok(token)
    }

    /// Revokes every token whose clear prefix (its first 12 characters, its handle)
    /// starts with `given`, at least 6 characters so that one keystroke cannot revoke them
    /// all; or exactly the token `given` is, when the whole token is given. Returns how
    /// many, once no gateway takes them any longer.
    pub fn revoke_tokens(&self, given: &str) -> Result<usize, SiteError> {
        const HOW: &str = "give at least 6 of a token's first 12 characters, or the whole token";
        let chars = given.chars().count();
        if chars < 6 || !given.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            // At most a handle's worth is shown: the rest may be a secret.
            let shown: String = given.chars().take(TOKEN_PREFIX_CHARS).collect();
            let cut = if chars > TOKEN_PREFIX_CHARS {
                "…"
            } else {
                ""
            };
            return Err(SiteError::BadTokenPrefix(format!(
                "{shown:?}{cut} cannot name a token: {HOW}"
            )));
        }
        let prefix = if chars <= TOKEN_PREFIX_CHARS {
            given
        } else {
            // Longer than a handle: only the whole token, checked against its hash, names
            // one; anything else is refused without echoing what may be a secret.
            let handle = &given[..TOKEN_PREFIX_CHARS];
            if self.authenticate(given)?.is_none() {
                return Err(SiteError::BadTokenPrefix(format!(
                    "{handle}… is longer than a token's handle and is not a token of this \
                     site: {HOW}"
                )));
            }
            handle
        };
        // Compared as a prefix, not with LIKE: `_` is a token character and a wildcard.
        let revoked = self.change_facts(|tx| {
            let n = tx.execute(
                "DELETE FROM tokens WHERE substr(prefix, 1, ?2) = ?1",
                params![prefix, prefix.chars().count()],
            )?;
            if n == 0 {
                return Err(SiteError::UnknownToken(prefix.to_owned()));
            }
            Ok(n)
        });
        if let Err(SiteError::UnknownToken(_)) = revoked {
            // Perhaps revoked a moment ago by another command still waiting: this one
            // too answers only once no gateway takes what was revoked.
            self.await_current_forgotten();
        }
        revoked
    }

    /// Whether the token behind `principal` still stands as it did (not revoked, the
    /// same person and kind): a stream opened with it ends once it does not.
    pub fn still_valid(&self, principal: &Principal) -> Result<bool, SiteError> {
        if let Recall::Known((_, person, kind)) = self.facts.recall(tokens, &principal.handle) {
            return Ok(person == principal.person && kind == principal.kind.as_str());
        }
        Ok(self.db.exists(
            "SELECT 1 FROM tokens WHERE prefix = ?1 AND person = ?2 AND kind = ?3",
            params![
                &principal.handle,
                &principal.person,
                principal.kind.as_str()
            ],
        )?)
    }

    /// The principal behind a presented token, or `None` for an unknown or malformed one.
    pub fn authenticate(&self, token: &str) -> Result<Option<Principal>, SiteError> {
        let Some(prefix) = presented_prefix(token) else {
            return Ok(None);
        };
        let row = match self.facts.recall(tokens, prefix) {
            Recall::Known(row) => Some(row),
            Recall::Ask(stamp) => {
                let row = self.db.row(TOKEN_LOOKUP, params![prefix], token_row)?;
                self.remember_token(stamp, prefix, &row);
                row
            }
        };
        Ok(principal_of(token, prefix, row))
    }

    /// [`Site::authenticate`] for an async task (every request's check): on PostgreSQL it
    /// waits on the network without holding one of the runtime's threads.
    pub async fn authenticate_async(&self, token: &str) -> Result<Option<Principal>, SiteError> {
        let Some(prefix) = presented_prefix(token) else {
            return Ok(None);
        };
        let row = match self.facts.recall(tokens, prefix) {
            Recall::Known(row) => Some(row),
            Recall::Ask(stamp) => {
                let row = self
                    .db
                    .row_async(TOKEN_LOOKUP, params![prefix], token_row)
                    .await?;
                self.remember_token(stamp, prefix, &row);
                row
            }
        };
        Ok(principal_of(token, prefix, row))
    }

    /// Remembers the row found under `prefix` (an unknown prefix is not remembered: a
    /// token made since is found at once).
    fn remember_token(&self, stamp: Option<i64>, prefix: &str, row: &Option<TokenRow>) {
        if let Some(row) = row {
            self.facts.remember(stamp, tokens, prefix, row.clone());
        }
    }
}

/// A token's row: its hash, person and kind.
const TOKEN_LOOKUP: &str = "SELECT hash, person, kind FROM tokens WHERE prefix = ?1";

fn token_row(r: &ferry_sql::Row) -> Result<TokenRow, SiteError> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

/// The prefix a token is looked up by, unless the token cannot be one of ferry's.
fn presented_prefix(token: &str) -> Option<&str> {
    let prefix = token.get(..TOKEN_PREFIX_CHARS)?;
    (token.starts_with(TOKEN_TAG) && token.len() <= 128).then_some(prefix)
}

/// The principal `token` is, given the row stored under its prefix: only when the whole
/// token hashes to what was stored (compared in constant time).
fn principal_of(token: &str, prefix: &str, row: Option<TokenRow>) -> Option<Principal> {
    let (stored, person, kind) = row?;
    if !bool::from(stored.as_slice().ct_eq(hash(token).as_slice())) {
        return None;
    }
    TokenKind::parse(&kind).map(|kind| Principal {
        person,
        kind,
        handle: prefix.to_owned(),
    })
}
