//! Keys made at run time: `vsl_<id>_<secret>`, 12 characters of id (public: listings show it
//! as the key's prefix) and 32 of secret (190 bits). Only the HMAC-SHA256 of the secret under
//! the store's pepper is kept: a random secret needs no slow hash (Argon2 is for what people
//! choose), so checking a key is one map lookup and one HMAC, never a slow path. A key never
//! has more rights than its maker: asking for more is refused, and the maker's rights as they
//! are now cap it at every use. Its last use is kept in memory and written once a minute.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::people::Acting;
use super::{maker_grants, random_text, AccountError, Accounts, Result, ID_ALPHABET};
use crate::keys::{Actor, Home, Principal};
use crate::model::account::RecordAddress;
use crate::model::{AccountRecord, AccountWrite, Directory, Maker, Role, RunKey};

/// Characters of a key's id and of its secret.
pub const KEY_ID_LEN: usize = 12;
const SECRET_LEN: usize = 32;
const SECRET_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const MAX_KEY_NAME_CHARS: usize = 100;

/// `POST /api/v1/keys`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    pub name: String,
    pub role: Option<String>,
    pub team: Option<String>,
    /// RFC 3339.
    pub expires_at: Option<String>,
}

/// Why a presented key signs nobody in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRefused {
    /// No such key, a wrong secret, a revoked key, or one whose maker lost every right.
    Unknown,
    /// Past its `expires_at` (401 `key_expired`).
    Expired,
}

/// The parts of `vsl_<id>_<secret>`; `None` for anything else (config keys are looked up
/// whole first).
pub fn parse(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix("vsl_")?;
    let (id, secret) = rest.split_once('_')?;
    let ok = id.len() == KEY_ID_LEN
        && id.bytes().all(|b| ID_ALPHABET.contains(&b))
        && secret.len() == SECRET_LEN
        && secret.bytes().all(|b| b.is_ascii_alphanumeric());
    ok.then_some((id, secret))
}

impl Accounts {
    fn key_hash(&self, secret: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.pepper)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(secret.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Who a presented key is: a configured key first, then a key made at run time.
    pub fn authenticate(&self, presented: &str) -> std::result::Result<Arc<Principal>, KeyRefused> {
        if let Some(principal) = self.ring.lookup(presented) {
            return Ok(principal);
        }
        let (id, secret) = parse(presented).ok_or(KeyRefused::Unknown)?;
        let loaded = self.loaded.read().clone();
        let key = loaded.dir.key(id).ok_or(KeyRefused::Unknown)?;
        let stored = hex::decode(&key.hash).map_err(|_| KeyRefused::Unknown)?;
        if !bool::from(self.key_hash(secret).as_slice().ct_eq(&stored)) {
            return Err(KeyRefused::Unknown);
        }
        let principal = self.run_key_principal(id)?;
        self.used.lock().insert(id.to_string(), self.now());
        Ok(principal)
    }

    /// What the run-time key `id` may do now (a page session signed in with it asks again at
    /// every request): refused once revoked, expired, or when its maker lost every right.
    pub fn run_key_principal(&self, id: &str) -> std::result::Result<Arc<Principal>, KeyRefused> {
        let loaded = self.loaded.read().clone();
        let key = loaded.dir.key(id).ok_or(KeyRefused::Unknown)?;
        if key.expires_at.is_some_and(|at| at <= self.now()) {
            return Err(KeyRefused::Expired);
        }
        let cache_key = format!("k\u{1f}{id}");
        let cached = loaded.principals.lock().get(&cache_key).cloned();
        let principal = match cached {
            Some(p) => p,
            None => {
                let p = key_principal(&loaded.dir, &self.ring, key).map(Arc::new);
                loaded.principals.lock().insert(cache_key, p.clone());
                p
            }
        };
        principal.ok_or(KeyRefused::Unknown)
    }

    /// Makes a key for the caller, at most as strong as the caller. Returns the record and
    /// the key itself, shown this once.
    pub fn make_key(&self, acting: &Acting<'_>, new: NewKey) -> Result<(RunKey, String)> {
        let by = acting.by;
        let name = new.name.trim().to_string();
        if name.is_empty()
            || name.chars().count() > MAX_KEY_NAME_CHARS
            || name.chars().any(char::is_control)
        {
            return Err(AccountError::invalid(
                "invalid_name",
                "name",
                format!("a key's name is 1 to {MAX_KEY_NAME_CHARS} characters"),
            ));
        }
        let expires_at = match new.expires_at.as_deref() {
            None => None,
            Some(text) => {
                let at = crate::model::time::parse_rfc3339(text).ok_or_else(|| {
                    AccountError::invalid(
                        "invalid_expires_at",
                        "expires_at",
                        "an RFC 3339 time like `2027-01-01T00:00:00Z` is expected",
                    )
                })?;
                if at <= self.now() {
                    return Err(AccountError::invalid(
                        "invalid_expires_at",
                        "expires_at",
                        "expires_at is in the past",
                    ));
                }
                Some(at)
            }
        };
        let role = match new.role.as_deref() {
            None => None,
            Some(r) => Some(Role::parse(r).ok_or_else(|| {
                AccountError::invalid(
                    "invalid_role",
                    "role",
                    "the role is `admin`, `editor` or `viewer`",
                )
            })?),
        };
        // A key made by a key is made for that key's maker, and limited as that key is.
        let (maker, limit) = match &by.actor {
            Actor::User(id) => (Maker::User(id.clone()), None),
            Actor::Config(name) => (Maker::Config(name.clone()), None),
            Actor::Key { id, .. } => {
                let dir = self.directory();
                let key = dir
                    .key(id)
                    .ok_or(AccountError::forbidden("the key is gone"))?;
                (key.maker.clone(), key.team.clone())
            }
        };
        let team = match (new.team, limit) {
            (Some(t), Some(l)) if t != l => {
                return Err(AccountError::Forbidden {
                    code: "role_not_allowed",
                    detail: format!("this key is limited to the team `{l}`"),
                })
            }
            (t, l) => t.or(l),
        };
        let dir = self.directory();
        if let Some(team) = &team {
            if dir.team(team).is_none() {
                return Err(AccountError::invalid(
                    "invalid_team",
                    "team",
                    format!("no team has the slug `{team}`"),
                ));
            }
        }
        // What the caller may do where the key will act.
        let ceiling = match &team {
            Some(t) => by.role_in(t),
            None => Some(by.role),
        };
        let Some(ceiling) = ceiling else {
            return Err(AccountError::Forbidden {
                code: "role_not_allowed",
                detail: format!(
                    "`{}` has no role in the team `{}`",
                    by.name,
                    team.unwrap_or_default()
                ),
            });
        };
        let role = role.unwrap_or(ceiling);
        if role > ceiling {
            return Err(AccountError::Forbidden {
                code: "role_not_allowed",
                detail: format!(
                    "`{}` may make keys up to the role {}, not {}",
                    by.name,
                    ceiling.as_str(),
                    role.as_str()
                ),
            });
        }
        let epoch = match &maker {
            Maker::User(id) => dir.user(id).map_or(0, |u| u.key_epoch),
            Maker::Config(_) => 0,
        };
        let id = random_text(KEY_ID_LEN, ID_ALPHABET);
        let secret = random_text(SECRET_LEN, SECRET_ALPHABET);
        let record = RunKey {
            id: id.clone(),
            name,
            maker,
            role,
            team: team.clone(),
            hash: hex::encode(self.key_hash(&secret)),
            created_at: self.now(),
            expires_at,
            last_used_at: None,
            epoch,
        };
        let made = self.change(|_| {
            Ok((
                AccountWrite::put(AccountRecord::Key(record.clone())),
                record.clone(),
            ))
        })?;
        self.audit.record(
            &by.actor.label(),
            "key.created",
            &format!("key:{id}"),
            acting.ip,
            team.as_deref(),
        );
        Ok((made, format!("vsl_{id}_{secret}")))
    }

    /// The keys a caller sees: all for admins, else those of its maker, and its teams' keys
    /// for a team's owners.
    pub fn keys_for(&self, by: &Principal) -> Vec<RunKey> {
        let dir = self.directory();
        let used = self.used.lock().clone();
        dir.keys()
            .filter(|k| may_manage(&dir, by, k))
            .map(|k| {
                let mut k = k.clone();
                if let Some(at) = used.get(&k.id) {
                    k.last_used_at = Some(k.last_used_at.map_or(*at, |was| was.max(*at)));
                }
                k
            })
            .collect()
    }

    /// Revokes a key: refused from the next request on, on every instance.
    pub fn revoke_key(&self, acting: &Acting<'_>, id: &str) -> Result<()> {
        let team = self.change(|dir| {
            let key = dir
                .key(id)
                .filter(|k| may_manage(dir, acting.by, k))
                .ok_or_else(|| AccountError::NotFound(format!("no key has the id `{id}`")))?;
            Ok((
                AccountWrite {
                    put: Vec::new(),
                    delete: vec![RecordAddress {
                        kind: "key".into(),
                        id: id.into(),
                    }],
                },
                key.team.clone(),
            ))
        })?;
        self.audit.record(
            &acting.by.actor.label(),
            "key.revoked",
            &format!("key:{id}"),
            acting.ip,
            team.as_deref(),
        );
        Ok(())
    }

    /// Writes the last-use times gathered since the last call (once a minute, and at
    /// shutdown): one write for all keys, none per request.
    pub fn flush_last_used(&self) -> Result<()> {
        let used = std::mem::take(&mut *self.used.lock());
        if used.is_empty() {
            return Ok(());
        }
        self.change(|dir| {
            let put = used
                .iter()
                .filter_map(|(id, at)| {
                    let mut key = dir.key(id)?.clone();
                    if key.last_used_at.is_some_and(|was| was >= *at) {
                        return None;
                    }
                    key.last_used_at = Some(*at);
                    Some(AccountRecord::Key(key))
                })
                .collect();
            Ok((
                AccountWrite {
                    put,
                    delete: Vec::new(),
                },
                (),
            ))
        })
    }
}

/// May `by` see and revoke `key`? Admins all; the maker (a user, or a config key by name);
/// owners of the key's team.
fn may_manage(dir: &Directory, by: &Principal, key: &RunKey) -> bool {
    if by.everywhere() {
        return true;
    }
    let maker_matches = match (&key.maker, &by.actor) {
        (Maker::User(id), actor) => actor.user() == Some(id.as_str()),
        (Maker::Config(name), Actor::Config(own)) => name == own,
        _ => false,
    };
    let owns_team = key
        .team
        .as_deref()
        .is_some_and(|t| dir.team(t).is_some() && by.role_in(t) == Some(Role::Admin));
    maker_matches || owns_team
}

/// What a key may do now: its maker's rights as they are, capped by its role and limited to
/// its team's spaces; `None` when that is nothing (a maker gone, disabled, or whose keys a
/// reset ended).
fn key_principal(dir: &Directory, ring: &crate::keys::KeyRing, key: &RunKey) -> Option<Principal> {
    if let Maker::User(id) = &key.maker {
        if dir.user(id)?.key_epoch != key.epoch {
            return None;
        }
    }
    let (grants, home) = maker_grants(dir, ring, &key.maker)?;
    let (grants, home) = match &key.team {
        Some(team) => {
            let spaces = dir.team_spaces(team)?;
            (
                grants.capped(key.role, Some(&spaces)),
                Home::Space(team.clone()),
            )
        }
        None => (grants.capped(key.role, None), home),
    };
    // A key whose maker may do nothing any more does nothing: refused as unknown.
    grants.highest()?;
    Some(Principal::new(
        key.name.clone(),
        grants,
        Actor::Key {
            id: key.id.clone(),
            user: match &key.maker {
                Maker::User(id) => Some(id.clone()),
                Maker::Config(_) => None,
            },
        },
        home,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse() {
        let key = format!("vsl_{}_{}", "a".repeat(12), "B".repeat(32));
        assert_eq!(
            parse(&key),
            Some(("aaaaaaaaaaaa", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"))
        );
        assert_eq!(parse("vsl_abc_def"), None);
        assert_eq!(
            parse(&format!("vsl_{}_{}", "A".repeat(12), "B".repeat(32))),
            None
        );
        assert_eq!(
            parse(&format!("vsl_{}_{}!", "a".repeat(12), "B".repeat(31))),
            None
        );
        assert_eq!(parse("Bearer x"), None);
    }
}
