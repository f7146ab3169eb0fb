//! Page sessions: signing in with an API key gives a random session token, sent back in an
//! `HttpOnly; SameSite=Strict` cookie (`Secure` when `server.base_url` is https). A session
//! ends after `ui.session_ttl` without a request or on sign-out.
//!
//! Sessions are kept in the [`RecordCache`]: in memory on one instance (a restart signs
//! everyone out, which is the safe side for a credential), in the shared store when instances
//! share one (PostgreSQL), so that a browser behind a load balancer may reach any of them. The
//! record holds the key's SHA-256 (the key ring finds its holder, so a key removed from the
//! configuration ends its sessions) and the form token, and is found by the SHA-256 of the
//! session's token, so neither a heap dump nor the database holds usable tokens.
//!
//! Forms are protected twice against cross-site requests: the strict cookie is never sent by
//! another site, and every form that changes something carries a token that must match the
//! session's (or, before signing in, the `vsl_csrf` cookie's: double submit).

pub use crate::web::cookies::{cookie, set_cookie};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::clock::Clock;
use crate::keys::{KeyRing, Principal};
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
}

/// Every live session, by the SHA-256 of its token, in the [`RecordCache`].
pub struct Sessions {
    ttl: Millis,
    clock: Arc<dyn Clock>,
    records: Arc<RecordCache>,
}

/// A session as it is kept.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    /// Hex SHA-256 of the API key that signed in.
    key: String,
    csrf: String,
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
    pub fn new(ttl: Millis, clock: Arc<dyn Clock>, records: Arc<RecordCache>) -> Self {
        Self {
            ttl,
            clock,
            records,
        }
    }

    /// Opens a session for the holder of `key`; returns its token (for the cookie).
    pub fn open(&self, _principal: Arc<Principal>, key: &str) -> Result<String, StoreError> {
        let token = random_token();
        let record = Stored {
            key: hex::encode(crate::keys::hash(key)),
            csrf: random_token(),
        };
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        self.records
            .put(KIND, &digest(&token), &bytes, self.clock.now(), self.ttl)?;
        Ok(token)
    }

    /// The live session of a token, its inactivity clock restarted. The key ring finds the
    /// key's holder, so a key removed from the configuration ends its sessions. A shared store
    /// that cannot be reached signs nobody in (and says so in the log).
    pub fn touch(&self, token: &str, keys: &KeyRing) -> Option<Session> {
        let now = self.clock.now();
        let bytes = self
            .records
            .get(KIND, &digest(token), now, self.ttl, true)
            .map_err(|e| tracing::warn!(error = %e, "page session lookup failed"))
            .ok()??;
        let stored: Stored = serde_json::from_slice(&bytes).ok()?;
        let digest: [u8; 32] = hex::decode(&stored.key).ok()?.try_into().ok()?;
        Some(Session {
            principal: keys.lookup_digest(&digest)?,
            csrf: stored.csrf,
        })
    }

    pub fn close(&self, token: &str) {
        if let Err(e) = self.records.delete(KIND, &digest(token)) {
            tracing::warn!(error = %e, "page session could not be removed");
        }
    }

    /// How long a session lives without requests, in seconds (the cookie's `Max-Age`).
    pub fn ttl_secs(&self) -> u64 {
        self.ttl / 1000
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
    use crate::clock::ManualClock;
    use crate::config::Role;

    #[test]
    fn sessions_expire_after_inactivity() {
        let auth = crate::config::AuthConfig {
            anonymous_create: false,
            keys: vec![crate::config::ApiKey {
                key: "k".into(),
                name: "n".into(),
                role: Role::Viewer,
                spaces: None,
            }],
        };
        let keys = KeyRing::of(&auth, auth.keys.clone());
        let clock = Arc::new(ManualClock::new(1_000));
        let sessions = Sessions::new(10_000, clock.clone(), Arc::new(RecordCache::memory()));
        let principal = keys.lookup("k").expect("principal");
        let token = sessions.open(principal, "k").expect("open");
        clock.advance(9_000);
        assert!(sessions.touch(&token, &keys).is_some());
        clock.advance(9_000);
        assert!(
            sessions.touch(&token, &keys).is_some(),
            "activity restarts the clock"
        );
        clock.advance(10_000);
        assert!(sessions.touch(&token, &keys).is_none());
        assert!(sessions.touch("forged", &keys).is_none());
    }

    #[test]
    fn tokens_compare() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("", ""));
    }
}
