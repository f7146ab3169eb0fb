//! Page sessions: signing in (with an API key, or as a user by email and password or an
//! OpenID provider) gives a random session token, sent back in an `HttpOnly; SameSite=Lax`
//! cookie (`Secure` when `server.base_url` is https; Lax so that a sign-in coming back from an
//! identity provider carries it). A session ends after `ui.session_ttl` without a request,
//! `auth.session_ttl` after it began, or on sign-out; a user's also when their password changes
//! or an admin disables them (the user's session epoch moves on).
//!
//! Sessions are kept in the [`RecordCache`]: in memory on one instance (a restart signs
//! everyone out, which is the safe side for a credential), in the shared store when instances
//! share one (PostgreSQL), so that a browser behind a load balancer may reach any of them. The
//! record names who signed in — the SHA-256 of a configured key (so a key removed from the
//! configuration ends its sessions), the id of a key made at run time, or a user and their
//! session epoch — and holds the form token; it is found by the SHA-256 of the session's
//! token, so neither a heap dump nor the database holds usable tokens. Who it is, and what
//! they may do, is asked again at every request.
//!
//! Forms are protected against cross-site requests by a token every form that changes
//! something carries, which must match the session's (or, before signing in, the `vsl_csrf`
//! cookie's: double submit).

pub use crate::web::cookies::{cookie, set_cookie};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::accounts::Accounts;
use crate::clock::Clock;
use crate::keys::Principal;
use crate::model::{Millis, StoreError};
use crate::records::{RecordCache, RecordKind};

pub const SESSION_COOKIE: &str = "vsl_session";
pub const CSRF_COOKIE: &str = "vsl_csrf";

/// A signed-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    pub principal: Arc<Principal>,
    /// The token every changing form of this session carries.
    pub csrf: String,
    /// The signed-in user, when a person signed in (not a key).
    pub user: Option<String>,
}

/// Who opens a session.
pub enum SignedIn<'a> {
    /// A key (configured or made at run time), as presented.
    Key(&'a str),
    /// A user, at their current session epoch.
    User { id: &'a str, epoch: u32 },
}

/// Every live session, by the SHA-256 of its token, in the [`RecordCache`].
pub struct Sessions {
    /// Without a request.
    idle: Millis,
    /// Since the sign-in.
    lifetime: Millis,
    clock: Arc<dyn Clock>,
    records: Arc<RecordCache>,
}

/// A session as it is kept.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    /// Hex SHA-256 of the configured API key that signed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// The id of the run-time key that signed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_key: Option<String>,
    /// The user who signed in, and their session epoch then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(default)]
    epoch: u32,
    csrf: String,
    #[serde(default)]
    started: Millis,
}

/// The kind of record a session is, and how many one instance keeps in memory (past it the
/// least recently used one is dropped).
const KIND: RecordKind = RecordKind {
    name: "session",
    capacity: MAX_SESSIONS,
};

/// Most sessions one instance keeps at once.
const MAX_SESSIONS: usize = 10_000;

impl Sessions {
    pub fn new(
        idle: Millis,
        lifetime: Millis,
        clock: Arc<dyn Clock>,
        records: Arc<RecordCache>,
    ) -> Self {
        Self {
            idle,
            lifetime,
            clock,
            records,
        }
    }

    /// Opens a session (a new token, whatever the browser had); returns its token.
    pub fn open(&self, who: SignedIn<'_>) -> Result<String, StoreError> {
        let token = random_token();
        let mut record = Stored {
            key: None,
            run_key: None,
            user: None,
            epoch: 0,
            csrf: random_token(),
            started: self.clock.now(),
        };
        match who {
            SignedIn::Key(key) => match crate::accounts::keys::parse(key) {
                Some((id, _)) => record.run_key = Some(id.to_string()),
                None => record.key = Some(hex::encode(crate::keys::hash(key))),
            },
            SignedIn::User { id, epoch } => {
                record.user = Some(id.to_string());
                record.epoch = epoch;
            }
        }
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        self.records
            .put(KIND, &digest(&token), &bytes, self.clock.now(), self.idle)?;
        Ok(token)
    }

    /// The live session of a token, its inactivity clock restarted, with who signed in as
    /// they are now. A shared store that cannot be reached signs nobody in (and says so in
    /// the log).
    pub fn touch(&self, token: &str, accounts: &Accounts) -> Option<Session> {
        let now = self.clock.now();
        let bytes = self
            .records
            .get(KIND, &digest(token), now, self.idle, true)
            .map_err(|e| tracing::warn!(error = %e, "page session lookup failed"))
            .ok()??;
        let stored: Stored = serde_json::from_slice(&bytes).ok()?;
        if now.saturating_sub(stored.started) >= self.lifetime {
            self.close(token);
            return None;
        }
        let principal = if let Some(user) = &stored.user {
            accounts.user_principal(user, Some(stored.epoch))?
        } else if let Some(id) = &stored.run_key {
            accounts.run_key_principal(id).ok()?
        } else {
            let digest: [u8; 32] = hex::decode(stored.key.as_deref()?).ok()?.try_into().ok()?;
            accounts.ring().lookup_digest(&digest)?
        };
        Some(Session {
            principal,
            csrf: stored.csrf,
            user: stored.user,
        })
    }

    pub fn close(&self, token: &str) {
        if let Err(e) = self.records.delete(KIND, &digest(token)) {
            tracing::warn!(error = %e, "page session could not be removed");
        }
    }

    /// How long a session lives at most, in seconds (the cookie's `Max-Age`; an idle one
    /// ends sooner on the server).
    pub fn ttl_secs(&self) -> u64 {
        self.lifetime / 1000
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// 32 random bytes, hex.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

/// Compares two tokens in time that does not depend on where they differ.
/// Tokens of different lengths differ at once (lengths are not secret); empty ones never match.
pub fn same_token(a: &str, b: &str) -> bool {
    !a.is_empty() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("", ""));
    }
}
