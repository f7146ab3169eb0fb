//! The accounts service (see docs/accounts.md): people who sign in as themselves, the teams
//! that own spaces, keys made at run time, sign-in, and the audit log. The rules live here
//! once; the API and the pages call it.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the service: the directory in memory, writes checked against it, who a caller is |
//! | `people.rs` | users and teams and their members: making, changing, removing, the last admin |
//! | `keys.rs` | keys made at run time: `vsl_<id>_<secret>`, their keyed hash, rights, last use |
//! | `sign_in.rs` | email and password sign-in: throttling per address and account, equal time |
//! | `audit.rs` | the audit log: entries, creates counted per minute, retention |
//! | `oidc.rs` | OpenID Connect: discovery, the code flow with PKCE, the ID token's checks, groups to grants |
//!
//! The whole directory of account records sits in memory (they are few); a change is checked
//! against it and written with the version it was checked at, and written again from a
//! reloaded directory when another writer came first ([`Accounts::change`]). Other instances
//! reload when the store tells them (PostgreSQL's notifications), so a revoked key or a
//! disabled user is refused everywhere within a second.

pub mod audit;
pub mod keys;
pub mod oidc;
pub mod people;
pub mod sign_in;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::clock::Clock;
use crate::config::AuthConfig;
use crate::keys::{Actor, Home, KeyRing, Principal};
use crate::model::{AccountWrite, Directory, Grants, Millis, StoreError, User, UserRole};
use crate::passwords::PasswordChecks;
use crate::store::Store;

pub use audit::Audit;
pub use keys::{KeyRefused, NewKey};
pub use people::{NewTeam, NewUser, TeamPatch, UserPatch};
pub use sign_in::{ProviderRefused, SignInRefused};

/// Why an account change was refused. Each maps to one status in the web's error mapper.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// A bad value (400), naming its field.
    #[error("{detail}")]
    Invalid {
        code: &'static str,
        field: &'static str,
        detail: String,
    },
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 409: `email_taken`, `team_exists`, `space_taken`, `last_admin`.
    #[error("{detail}")]
    Conflict { code: &'static str, detail: String },
    /// 403: `forbidden`, `role_not_allowed`.
    #[error("{detail}")]
    Forbidden { code: &'static str, detail: String },
    /// 401: a wrong current password.
    #[error("the current password is wrong")]
    WrongPassword,
    /// No password check could run within its wait (429 `busy`).
    #[error("too many password checks at once; try again in a second")]
    Busy,
    #[error("storage failure")]
    Store(#[from] StoreError),
}

impl AccountError {
    pub fn invalid(code: &'static str, field: &'static str, detail: impl Into<String>) -> Self {
        AccountError::Invalid {
            code,
            field,
            detail: detail.into(),
        }
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        AccountError::Forbidden {
            code: "forbidden",
            detail: detail.into(),
        }
    }

    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Self {
        AccountError::Conflict {
            code,
            detail: detail.into(),
        }
    }
}

pub type Result<T, E = AccountError> = std::result::Result<T, E>;

/// The directory as last loaded, and the principals worked out from it (dropped with it, so a
/// change is seen by the next request).
struct Loaded {
    dir: Arc<Directory>,
    principals: Mutex<HashMap<String, Option<Arc<Principal>>>>,
}

impl Loaded {
    fn new(dir: Directory) -> Arc<Self> {
        Arc::new(Self {
            dir: Arc::new(dir),
            principals: Mutex::new(HashMap::new()),
        })
    }
}

/// How many times a change is tried again against a reloaded directory before giving up.
const WRITE_ATTEMPTS: usize = 8;

/// The accounts service.
pub struct Accounts {
    store: Arc<dyn Store>,
    loaded: RwLock<Arc<Loaded>>,
    /// The keys of the configuration file (and the generated admin key).
    ring: Arc<KeyRing>,
    /// The secret every run-time key's hash is keyed with, agreed through the store.
    pepper: [u8; 32],
    passwords: PasswordChecks,
    clock: Arc<dyn Clock>,
    auth: AuthConfig,
    /// Run-time keys used since the last flush, and when ([`Accounts::flush_last_used`]).
    used: Mutex<HashMap<String, Millis>>,
    pub audit: Arc<Audit>,
    /// The plans a team may name, told of every new directory (which team owns which space,
    /// on which plan): set once at start ([`Accounts::use_plans`]).
    plans: std::sync::OnceLock<Arc<crate::plans::Plans>>,
}

/// The metadata key under which the key pepper is agreed.
pub const PEPPER_META: &str = "key_pepper";

impl Accounts {
    /// Loads the directory and agrees the key pepper (several first starts agree on one).
    pub fn open(
        store: Arc<dyn Store>,
        ring: Arc<KeyRing>,
        auth: &AuthConfig,
        passwords: PasswordChecks,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let proposed: [u8; 32] = rand::random();
        let agreed = store.meta_init(PEPPER_META, &proposed)?;
        let pepper: [u8; 32] = agreed.as_slice().try_into().map_err(|_| {
            StoreError::Backend("the stored key pepper is not 32 bytes".to_string())
        })?;
        let accounts = Self {
            loaded: RwLock::new(Loaded::new(Directory::default())),
            audit: Arc::new(Audit::new(store.clone(), clock.clone())),
            store,
            ring,
            pepper,
            passwords,
            clock,
            auth: auth.clone(),
            used: Mutex::new(HashMap::new()),
            plans: std::sync::OnceLock::new(),
        };
        accounts.reload()?;
        Ok(accounts)
    }

    /// Reads every account record again (another instance changed them).
    pub fn reload(&self) -> Result<(), StoreError> {
        let snapshot = self.store.accounts()?;
        let (dir, faults) = Directory::load(&snapshot);
        for fault in faults {
            tracing::error!(fault = %fault, "an account record does not decode; it is ignored");
        }
        // A reload that read the store before this instance's own newer write landed must
        // not roll the directory back over it (PostgreSQL's notifications start reloads
        // while writes go on): a session just opened would vanish for a moment.
        {
            let mut loaded = self.loaded.write();
            if dir.version >= loaded.dir.version {
                *loaded = Loaded::new(dir);
            }
        }
        self.tell_plans();
        Ok(())
    }

    /// Checks team plans against these plans and tells them of every directory from now on.
    pub fn use_plans(&self, plans: Arc<crate::plans::Plans>) {
        let _ = self.plans.set(plans);
        self.tell_plans();
    }

    /// Tells the plans of the directory as it is now (its spaces and their teams' plans).
    fn tell_plans(&self) {
        if let Some(plans) = self.plans.get() {
            plans.set_directory(&self.directory());
        }
    }

    /// Refuses a plan name that is not configured (400 naming `plan`).
    pub(crate) fn check_plan(&self, name: &str) -> Result<()> {
        match self.plans.get() {
            Some(plans) if plans.plan(name).is_none() => {
                let names = plans.names();
                Err(AccountError::invalid(
                    "unknown_plan",
                    "plan",
                    if names.is_empty() {
                        format!("no plan `{name}` is configured (the config has no [plans])")
                    } else {
                        format!(
                            "no plan `{name}` is configured; plans are {}",
                            names.join(", ")
                        )
                    },
                ))
            }
            _ => Ok(()),
        }
    }

    /// The directory as of now.
    pub fn directory(&self) -> Arc<Directory> {
        self.loaded.read().dir.clone()
    }

    /// The configured keys.
    pub fn ring(&self) -> &KeyRing {
        &self.ring
    }

    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Applies a change worked out by `plan` from the directory, written only if nobody wrote
    /// since; otherwise reloads and plans again. `plan` checks every rule against the
    /// directory it is given and returns the write and what to answer.
    pub fn change<T>(
        &self,
        mut plan: impl FnMut(&Directory) -> Result<(AccountWrite, T)>,
    ) -> Result<T> {
        for _ in 0..WRITE_ATTEMPTS {
            let dir = self.directory();
            let (write, out) = plan(&dir)?;
            if write.is_empty() {
                return Ok(out);
            }
            let after = dir.with(&write);
            if !dir.keeps_an_admin(&after) {
                return Err(AccountError::conflict(
                    "last_admin",
                    "this would leave no enabled admin: make another admin first",
                ));
            }
            match self.store.write_accounts(dir.version, &write)? {
                Some(version) => {
                    let mut next = after;
                    next.version = version;
                    {
                        let mut loaded = self.loaded.write();
                        // A reload from another change may have overtaken this one meanwhile.
                        if loaded.dir.version < version {
                            *loaded = Loaded::new(next);
                        }
                    }
                    self.tell_plans();
                    return Ok(out);
                }
                None => self.reload()?,
            }
        }
        Err(StoreError::Backend("account records kept changing under this write".into()).into())
    }

    /// The principal of a signed-in user, as their rights are now; `None` for a user who is
    /// gone, disabled, or whose sessions of `epoch` were ended.
    pub fn user_principal(&self, user_id: &str, epoch: Option<u32>) -> Option<Arc<Principal>> {
        let loaded = self.loaded.read().clone();
        let user = loaded.dir.user(user_id)?;
        if user.disabled || epoch.is_some_and(|e| e != user.session_epoch) {
            return None;
        }
        let key = format!("u\u{1f}{user_id}");
        if let Some(known) = loaded.principals.lock().get(&key) {
            return known.clone();
        }
        let principal = user_principal(&loaded.dir, user).map(Arc::new);
        loaded.principals.lock().insert(key, principal.clone());
        principal
    }

    /// Reloads off the caller's thread (the store's notification listener must not wait on
    /// the store).
    pub fn reload_soon(self: &Arc<Self>) {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = this.reload() {
                tracing::warn!(error = %e, "account records could not be reloaded");
            }
        });
    }

    /// Writes the audit log's waiting entries about every second, the keys' last uses once a
    /// minute, and removes entries past `auth.audit_retention` once a day.
    pub fn start_background(self: &Arc<Self>) {
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            let mut seconds = 0u64;
            loop {
                tick.tick().await;
                let Some(this) = this.upgrade() else { return };
                seconds += 1;
                let minute = seconds % 60 == 0;
                // Once a day (the first a minute after start): entries past the retention go.
                let prune = seconds % 86_400 == 60;
                let _ = tokio::task::spawn_blocking(move || {
                    if let Err(e) = this.audit.flush(false) {
                        tracing::warn!(error = %e, "audit entries could not be written; kept for the next try");
                    }
                    if minute {
                        if let Err(e) = this.flush_last_used() {
                            tracing::warn!(error = %e, "keys' last uses could not be written");
                        }
                    }
                    if let (true, Some(keep)) = (prune, this.auth.audit_retention.millis()) {
                        match this.audit.prune(keep) {
                            Ok(0) => {}
                            Ok(gone) => tracing::info!(gone, "old audit entries removed"),
                            Err(e) => tracing::warn!(error = %e, "old audit entries could not be removed"),
                        }
                    }
                })
                .await;
            }
        });
    }

    /// Writes what waits in memory (shutdown).
    pub fn shutdown(&self) {
        if let Err(e) = self.audit.flush(true) {
            tracing::warn!(error = %e, "audit entries could not be written at shutdown");
        }
        if let Err(e) = self.flush_last_used() {
            tracing::warn!(error = %e, "keys' last uses could not be written at shutdown");
        }
    }

    pub fn passwords(&self) -> &PasswordChecks {
        &self.passwords
    }

    pub fn config(&self) -> &AuthConfig {
        &self.auth
    }
}

/// What a user may do, as a principal.
pub fn user_principal(dir: &Directory, user: &User) -> Option<Principal> {
    let grants = dir.grants(user);
    Some(Principal::new(
        user.email.clone(),
        grants,
        Actor::User(user.id.clone()),
        home_of(dir, user),
    ))
}

/// Where a user's creates without `space` land.
fn home_of(dir: &Directory, user: &User) -> Home {
    if user.role == UserRole::Admin {
        return Home::Default;
    }
    let teams = dir.teams_of(&user.id);
    match teams.as_slice() {
        [] => Home::Default,
        [(team, _)] => Home::Space(team.slug.clone()),
        _ => Home::Ambiguous,
    }
}

/// The rights of whoever made a run-time key, as of now: a user's through the directory, a
/// config key's through the ring.
fn maker_grants(
    dir: &Directory,
    ring: &KeyRing,
    maker: &crate::model::Maker,
) -> Option<(Grants, Home)> {
    match maker {
        crate::model::Maker::User(id) => {
            let user = dir.user(id)?;
            if user.disabled {
                return None;
            }
            Some((dir.grants(user), home_of(dir, user)))
        }
        crate::model::Maker::Config(name) => {
            let p = ring.by_name(name)?;
            Some((p.grants.clone(), Home::Default))
        }
    }
}

/// A random string of `len` characters of `alphabet` (uniform: bytes past the largest
/// multiple of its length are drawn again).
pub(crate) fn random_text(len: usize, alphabet: &[u8]) -> String {
    let n = alphabet.len();
    let limit = 256 - (256 % n);
    let mut out = String::with_capacity(len);
    while out.len() < len {
        let bytes: [u8; 32] = rand::random();
        for b in bytes {
            if (b as usize) < limit && out.len() < len {
                out.push(char::from(alphabet[b as usize % n]));
            }
        }
    }
    out
}

/// A password for a first sign-in (`user add`): 20 letters and digits without the ones read
/// alike (l, 1, o, 0), about 115 bits.
pub fn one_time_password() -> String {
    random_text(
        20,
        b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789",
    )
}

/// Ids of users and keys: lower-case letters and digits.
pub(crate) const ID_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
