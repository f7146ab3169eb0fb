//! API keys (see docs/api.md, "Keys and roles"): the key ring, who holds each key, and the
//! generated admin key.
//!
//! Keys come from `[[auth.keys]]`; with none configured, the first start generates an admin
//! key into `<data>/admin.key` (mode 0600). Keys are looked up by their SHA-256, so the lookup
//! does not compare secrets byte by byte. HTTP knows nothing here: `http::auth` reads keys from
//! requests, the pages' sign-in form from a form field.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::config::{ApiKey, AuthConfig, Role};
use crate::model::Grants;
use crate::store::Store;

/// Who acts, for the audit log, rate limits and the keys they make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// A key of the configuration file, by name.
    Config(String),
    /// A signed-in user, by id.
    User(String),
    /// A key made at run time, by id, and the user who made it (none: a config key did).
    Key { id: String, user: Option<String> },
}

impl Actor {
    /// `config:<name>`, `user:<id>`, `key:<id>`: the audit log's actor and the rate limits' key.
    pub fn label(&self) -> String {
        match self {
            Actor::Config(name) => format!("config:{name}"),
            Actor::User(id) => format!("user:{id}"),
            Actor::Key { id, .. } => format!("key:{id}"),
        }
    }

    /// The user behind it, if one is.
    pub fn user(&self) -> Option<&str> {
        match self {
            Actor::User(id) => Some(id),
            Actor::Key { user, .. } => user.as_deref(),
            Actor::Config(_) => None,
        }
    }
}

/// Where a create without `space` lands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    /// The default space (config keys, admins).
    Default,
    /// The one team's own space.
    Space(String),
    /// Several teams: the create must say which space.
    Ambiguous,
}

/// A known caller: a key's holder or a signed-in user, with what they may do where.
#[derive(Clone, Debug)]
pub struct Principal {
    /// What people read: a key's name, a user's email.
    pub name: String,
    /// The highest role anywhere.
    pub role: Role,
    /// The spaces with any role; `None`: every space.
    pub spaces: Option<Vec<String>>,
    /// The role in each space.
    pub grants: Grants,
    pub actor: Actor,
    pub home: Home,
}

impl Principal {
    /// A principal of `grants`. One that grants nothing (a member of no team) may still sign
    /// in and see its own account, and reaches no link.
    pub fn new(name: String, grants: Grants, actor: Actor, home: Home) -> Self {
        let role = grants.highest().unwrap_or(Role::Viewer);
        let spaces = grants
            .everywhere
            .is_none()
            .then(|| grants.spaces.keys().cloned().collect());
        Self {
            name,
            role,
            spaces,
            grants,
            actor,
            home,
        }
    }

    /// A config key's holder: its role, everywhere or in its spaces.
    pub fn of_config_key(name: String, role: Role, spaces: Option<Vec<String>>) -> Self {
        let grants = match spaces {
            None => Grants::everywhere(role),
            Some(list) => Grants {
                everywhere: None,
                spaces: list.into_iter().map(|s| (s, role)).collect(),
            },
        };
        Self {
            role,
            spaces: grants
                .everywhere
                .is_none()
                .then(|| grants.spaces.keys().cloned().collect()),
            grants,
            actor: Actor::Config(name.clone()),
            name,
            home: Home::Default,
        }
    }

    /// May it see links of `space` at all?
    pub fn allows_space(&self, space: &str) -> bool {
        self.grants.role_in(space).is_some()
    }

    /// Its role in `space`.
    pub fn role_in(&self, space: &str) -> Option<Role> {
        self.grants.role_in(space)
    }

    /// Where its creates without `space` land; `None` when it is in several teams and must
    /// say.
    pub fn home_space(&self) -> Option<String> {
        match &self.home {
            Home::Default => Some(crate::links::DEFAULT_SPACE.to_string()),
            Home::Space(space) => Some(space.clone()),
            Home::Ambiguous => None,
        }
    }

    /// May it act everywhere (an admin of the whole instance)?
    pub fn everywhere(&self) -> bool {
        self.grants.everywhere == Some(Role::Admin)
    }
}

/// Every configured key, by hash.
#[derive(Debug, Default)]
pub struct KeyRing {
    by_hash: HashMap<[u8; 32], Arc<Principal>>,
    /// The keys themselves, for YOURLS's time-limited signatures (a hash of timestamp and
    /// key cannot be checked against the key's hash).
    secrets: Vec<(String, Arc<Principal>)>,
    pub anonymous_create: bool,
}

/// The metadata key under which the generated admin key is agreed.
const ADMIN_KEY_META: &str = "generated_admin_key";

/// Where the generated admin key went, for the start-up log.
#[derive(Debug)]
pub struct GeneratedKey {
    pub path: PathBuf,
    pub created: bool,
}

impl KeyRing {
    /// Builds the ring from config; with no keys, reads or creates `<data>/admin.key`. A new
    /// key is agreed through the store first (`meta_init`), so that several instances sharing
    /// one database generate one admin key between them.
    pub fn load(
        auth: &AuthConfig,
        data: &Path,
        store: &dyn Store,
    ) -> Result<(Self, Option<GeneratedKey>), crate::BoxError> {
        if !auth.keys.is_empty() {
            return Ok((Self::of(auth, auth.keys.clone()), None));
        }
        let path = data.join("admin.key");
        let (key, created) = read_or_create_admin_key(&path, store)?;
        let admin = ApiKey {
            key,
            name: "admin".into(),
            role: Role::Admin,
            spaces: None,
        };
        Ok((
            Self::of(auth, vec![admin]),
            Some(GeneratedKey { path, created }),
        ))
    }

    /// The ring of the configured keys alone (none generated).
    pub fn of(auth: &AuthConfig, keys: Vec<ApiKey>) -> Self {
        let mut ring = KeyRing {
            by_hash: HashMap::new(),
            secrets: Vec::new(),
            anonymous_create: auth.anonymous_create,
        };
        for k in keys {
            let principal = Arc::new(Principal::of_config_key(k.name, k.role, k.spaces));
            ring.by_hash.insert(hash(&k.key), principal.clone());
            ring.secrets.push((k.key, principal));
        }
        ring
    }

    pub fn lookup(&self, key: &str) -> Option<Arc<Principal>> {
        self.by_hash.get(&hash(key)).cloned()
    }

    /// The holder of the key whose SHA-256 this is (a session shared through the store
    /// remembers the key only as its digest).
    pub fn lookup_digest(&self, digest: &[u8; 32]) -> Option<Arc<Principal>> {
        self.by_hash.get(digest).cloned()
    }

    /// The holder of the configured key named `name` (what a key it made acts for).
    pub fn by_name(&self, name: &str) -> Option<Arc<Principal>> {
        self.secrets
            .iter()
            .find(|(_, p)| p.name == name)
            .map(|(_, p)| p.clone())
    }

    /// The first key for which `matches` holds (YOURLS signatures derived from a key).
    pub fn find(&self, matches: impl Fn(&str) -> bool) -> Option<Arc<Principal>> {
        self.secrets
            .iter()
            .find(|(key, _)| matches(key))
            .map(|(_, p)| p.clone())
    }
}

/// The SHA-256 of a key, by which the ring finds it.
pub fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn read_or_create_admin_key(
    path: &Path,
    store: &dyn Store,
) -> Result<(String, bool), crate::BoxError> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let key = existing.trim().to_string();
        if !key.is_empty() {
            return Ok((key, false));
        }
    }
    let bytes: [u8; 24] = rand::random();
    let proposed = format!("vsl_{}", hex::encode(bytes));
    let agreed = store.meta_init(ADMIN_KEY_META, proposed.as_bytes())?;
    let key = String::from_utf8(agreed).map_err(|_| "the stored admin key is not text")?;
    let created = key == proposed;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Written beside it and renamed into place: whoever reads `admin.key` (a person, a
    // script waiting for it to appear) finds the whole key or no file, never an empty one.
    let partial = path.with_extension("key.partial");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&partial)?;
    writeln!(file, "{key}")?;
    file.sync_all()?;
    std::fs::rename(&partial, path)?;
    Ok((key, created))
}
