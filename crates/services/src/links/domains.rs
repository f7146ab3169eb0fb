//! The domains service (SPEC §26), beside the link service that reads it on every redirect:
//! the configured domains held in memory, the rules of adding, patching and deleting them,
//! and what the redirect path asks of them — which domain a request's `Host` names, as one
//! hash lookup.
//!
//! The default domain is the base URL's host, id 0; its settings (`root_url`, …) are a record
//! like any other's, written on its first patch. Other domains are records of the store, read
//! whole at start and again when told of a change ([`Domains::reload`]: by this process after
//! its own writes, by the shared store's watch for another instance's).
//!
//! Knows no HTTP: its errors are [`LinkError`]s, which the one error mapper turns into
//! statuses.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::Deserialize;

use super::LinkError;
use crate::model::domain::{code_key, parse_host, route_host, DEFAULT_DOMAIN};
use crate::model::{Domain, Millis};
use crate::store::{DomainAdded, Store};

/// What is held in memory: every domain by host and by id.
#[derive(Default)]
struct Table {
    by_host: HashMap<String, Arc<Domain>>,
    by_id: HashMap<u16, Arc<Domain>>,
}

/// The domains of this instance.
pub struct Domains {
    store: Arc<dyn Store>,
    /// The base URL's host and its scheme (the short URLs of other domains use the scheme).
    default_host: String,
    scheme: String,
    table: RwLock<Table>,
    /// Whether any domain beside the default is configured: while none is, routing a request
    /// reads nothing at all.
    others: AtomicBool,
    /// Told every host after each reload (HTTPS's certificate hosts, [`Domains::on_change`]).
    watchers: RwLock<Vec<HostsHook>>,
    /// One reload at a time, from its read to its swap: a reload told of an earlier change
    /// (another thread's) could otherwise read before a delete and install its table after
    /// the delete's own reload, bringing the deleted domain back until the next change.
    reloading: Mutex<()>,
}

/// Called with every configured host (the default domain's first) after each reload.
pub type HostsHook = Box<dyn Fn(Vec<String>) + Send + Sync>;

/// `POST /api/v1/domains` body.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDomain {
    pub host: String,
    /// A team's slug: only its members and keys (and admins) create on the domain.
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub root_url: Option<String>,
    #[serde(default)]
    pub not_found_url: Option<String>,
    #[serde(default)]
    pub other_url: Option<String>,
    /// Any JSON value, served at `/.well-known/apple-app-site-association`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub apple_app_site_association: Option<serde_json::Value>,
    /// Any JSON value, served at `/.well-known/assetlinks.json`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub assetlinks: Option<serde_json::Value>,
}

/// `PATCH /api/v1/domains/{host}` body: an absent field stays, `null` clears it.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DomainPatch {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub team: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub root_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub not_found_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub other_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    pub apple_app_site_association: Option<Option<serde_json::Value>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    pub assetlinks: Option<Option<serde_json::Value>>,
}

/// A field that is present (even as `null`) is `Some`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

fn invalid(code: &'static str, field: &'static str, detail: impl Into<String>) -> LinkError {
    LinkError::Invalid {
        code,
        field: field.into(),
        detail: detail.into(),
    }
}

/// A redirect URL of a domain: absolute http(s).
fn check_redirect(field: &'static str, value: Option<String>) -> Result<Option<String>, LinkError> {
    let Some(value) = value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    match url::Url::parse(&value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
            Ok(Some(url.to_string()))
        }
        _ => Err(invalid(
            "invalid_url",
            field,
            format!("`{field}` must be an absolute http(s) URL"),
        )),
    }
}

/// A well-known file's JSON, kept as text (at most 64 KiB).
fn check_json(
    field: &'static str,
    value: Option<serde_json::Value>,
) -> Result<Option<String>, LinkError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let text = value.to_string();
    if text.len() > 64 * 1024 {
        return Err(invalid(
            "invalid_field",
            field,
            format!("`{field}` is longer than 64 KiB"),
        ));
    }
    Ok(Some(text))
}

impl Domains {
    /// The domains of `store`, read now (a failed read leaves the default domain alone and is
    /// logged; the next change reads again).
    pub fn new(store: Arc<dyn Store>, base_url: &url::Url) -> Self {
        let domains = Self {
            store,
            default_host: base_url
                .host_str()
                .unwrap_or("localhost")
                .to_ascii_lowercase(),
            scheme: base_url.scheme().to_string(),
            table: RwLock::new(Table::default()),
            others: AtomicBool::new(false),
            watchers: RwLock::new(Vec::new()),
            reloading: Mutex::new(()),
        };
        domains.reload();
        domains
    }

    /// Reads every domain again.
    pub fn reload(&self) {
        let _one_at_a_time = self.reloading.lock();
        let records = match self.store.domains() {
            Ok(records) => records,
            Err(e) => {
                tracing::error!(error = %e, "reading the domains failed; keeping the ones held");
                return;
            }
        };
        let mut table = Table::default();
        let mut default = Domain::default_of(&self.default_host);
        for record in records {
            if record.id == DEFAULT_DOMAIN {
                // The default domain's settings; its host is always the base URL's.
                default = Domain {
                    host: self.default_host.clone(),
                    ..record
                };
                continue;
            }
            let record = Arc::new(record);
            table.by_host.insert(record.host.clone(), record.clone());
            table.by_id.insert(record.id, record);
        }
        let others = !table.by_id.is_empty();
        let default = Arc::new(default);
        table.by_host.insert(default.host.clone(), default.clone());
        table.by_id.insert(DEFAULT_DOMAIN, default);
        *self.table.write() = table;
        self.others.store(others, Ordering::Release);
        let watchers = self.watchers.read();
        if !watchers.is_empty() {
            let hosts = self.hosts();
            for hook in watchers.iter() {
                hook(hosts.clone());
            }
        }
    }

    /// Every configured host, the default domain's first.
    pub fn hosts(&self) -> Vec<String> {
        let table = self.table.read();
        let mut hosts = vec![self.default_host.clone()];
        hosts.extend(
            table
                .by_id
                .values()
                .filter(|d| d.id != DEFAULT_DOMAIN)
                .map(|d| d.host.clone()),
        );
        hosts
    }

    /// Tells `hook` every host now and after each change (a domain added or deleted here or,
    /// on PostgreSQL, on another instance): HTTPS orders certificates for exactly these.
    pub fn on_change(&self, hook: HostsHook) {
        hook(self.hosts());
        self.watchers.write().push(hook);
    }

    /// Whether any domain beside the default is configured.
    pub fn any_other(&self) -> bool {
        self.others.load(Ordering::Acquire)
    }

    /// The id of the domain a request's `Host` names; a host no domain has (or none) is the
    /// default domain. While no other domain is configured, nothing is read; otherwise one
    /// hash lookup (the header lowercased only if it has capitals).
    pub fn route(&self, host: Option<&str>) -> u16 {
        if !self.any_other() {
            return DEFAULT_DOMAIN;
        }
        let Some(host) = host else {
            return DEFAULT_DOMAIN;
        };
        let host = route_host(host);
        self.table
            .read()
            .by_host
            .get(host.as_ref())
            .map_or(DEFAULT_DOMAIN, |d| d.id)
    }

    /// The domain record a request's `Host` names (the default domain's when none does).
    pub fn routed(&self, host: Option<&str>) -> Arc<Domain> {
        let id = self.route(host);
        self.by_id(id).unwrap_or_else(|| self.default())
    }

    /// The default domain's record.
    pub fn default(&self) -> Arc<Domain> {
        self.table
            .read()
            .by_id
            .get(&DEFAULT_DOMAIN)
            .cloned()
            .unwrap_or_else(|| Arc::new(Domain::default_of(&self.default_host)))
    }

    pub fn default_host(&self) -> &str {
        &self.default_host
    }

    pub fn by_id(&self, id: u16) -> Option<Arc<Domain>> {
        self.table.read().by_id.get(&id).cloned()
    }

    /// A domain by host as a caller names it (any case, a trailing dot or port ignored).
    pub fn by_host(&self, host: &str) -> Option<Arc<Domain>> {
        let host = route_host(host.trim());
        if host.is_ascii() {
            return self.table.read().by_host.get(host.as_ref()).cloned();
        }
        // An IDN as people write it: its punycode.
        let ascii = parse_host(&host).ok()?;
        self.table.read().by_host.get(&ascii).cloned()
    }

    /// The host of a domain id (a deleted domain's archived links: `None`).
    pub fn host_of(&self, id: u16) -> Option<String> {
        self.by_id(id).map(|d| d.host.clone())
    }

    /// Every domain, the default first, then by host.
    pub fn list(&self) -> Vec<Arc<Domain>> {
        let table = self.table.read();
        let mut all: Vec<Arc<Domain>> = table.by_id.values().cloned().collect();
        drop(table);
        all.sort_by(|a, b| (!a.is_default(), &a.host).cmp(&(!b.is_default(), &b.host)));
        all
    }

    /// The id of a domain a request addresses with `domain=HOST` (absent: the default): an
    /// unconfigured host is `None`.
    pub fn addressed(&self, host: Option<&str>) -> Option<u16> {
        match host.map(str::trim).filter(|h| !h.is_empty()) {
            None => Some(DEFAULT_DOMAIN),
            Some(host) => self.by_host(host).map(|d| d.id),
        }
    }

    /// The key a code is kept under on the domain `domain=HOST` names; `NotFound` for a host
    /// no domain has.
    pub fn key_of(&self, host: Option<&str>, code: &str) -> Result<String, LinkError> {
        // A key's separator is no code character: a path cannot name another domain's key.
        if code.contains(crate::model::domain::KEY_SEPARATOR) {
            return Err(LinkError::NotFound(code.to_string()));
        }
        let id = self
            .addressed(host)
            .ok_or_else(|| LinkError::DomainNotFound(host.unwrap_or_default().to_string()))?;
        Ok(code_key(id, code).into_owned())
    }

    /// The short URL of a code on a domain: the base URL's for the default domain, else its
    /// scheme with the domain's host.
    pub fn short_url(&self, base_url: &str, domain: u16, code: &str) -> String {
        match (domain, self.host_of(domain)) {
            (DEFAULT_DOMAIN, _) | (_, None) => {
                format!("{}/{code}", base_url.trim_end_matches('/'))
            }
            (_, Some(host)) => format!("{}://{host}/{code}", self.scheme),
        }
    }

    /// Adds a domain (admins): 409 `domain_exists` for a host that has one.
    pub fn add(&self, input: NewDomain, now: Millis) -> Result<Domain, LinkError> {
        let host = parse_host(&input.host).map_err(|e| invalid("invalid_host", "host", e.0))?;
        if host == self.default_host {
            return Err(LinkError::Conflict {
                code: "domain_exists",
                field: "host",
                detail: format!("`{host}` is the default domain"),
            });
        }
        let record = Domain {
            id: 0,
            host: host.clone(),
            team: check_team(input.team)?,
            root_url: check_redirect("root_url", input.root_url)?,
            not_found_url: check_redirect("not_found_url", input.not_found_url)?,
            other_url: check_redirect("other_url", input.other_url)?,
            apple_app_site_association: check_json(
                "apple_app_site_association",
                input.apple_app_site_association,
            )?,
            assetlinks: check_json("assetlinks", input.assetlinks)?,
            created_at: now,
            updated_at: now,
        };
        match self.store.add_domain(&record)? {
            DomainAdded::Exists => Err(LinkError::Conflict {
                code: "domain_exists",
                field: "host",
                detail: format!("the domain `{host}` exists"),
            }),
            DomainAdded::Added(record) => {
                self.reload();
                Ok(record)
            }
        }
    }

    /// Patches a domain (the default one too): `null` clears a field.
    pub fn patch(&self, host: &str, patch: DomainPatch, now: Millis) -> Result<Domain, LinkError> {
        let current = self
            .by_host(host)
            .ok_or_else(|| LinkError::DomainNotFound(host.to_string()))?;
        let mut record = (*current).clone();
        if let Some(team) = patch.team {
            if record.is_default() && team.is_some() {
                return Err(invalid(
                    "invalid_team",
                    "team",
                    "the default domain belongs to no team",
                ));
            }
            record.team = check_team(team)?;
        }
        if let Some(v) = patch.root_url {
            record.root_url = check_redirect("root_url", v)?;
        }
        if let Some(v) = patch.not_found_url {
            record.not_found_url = check_redirect("not_found_url", v)?;
        }
        if let Some(v) = patch.other_url {
            record.other_url = check_redirect("other_url", v)?;
        }
        if let Some(v) = patch.apple_app_site_association {
            record.apple_app_site_association = check_json("apple_app_site_association", v)?;
        }
        if let Some(v) = patch.assetlinks {
            record.assetlinks = check_json("assetlinks", v)?;
        }
        record.updated_at = now;
        if record.created_at == 0 {
            record.created_at = now;
        }
        if !self.store.put_domain(&record)? {
            return Err(LinkError::Conflict {
                code: "domain_exists",
                field: "host",
                detail: format!("the domain `{}` exists", record.host),
            });
        }
        self.reload();
        Ok(record)
    }

    /// Writes a domain record as it is (an import; the default domain's record keeps this
    /// instance's host).
    pub fn import(&self, record: &Domain) -> Result<bool, LinkError> {
        let mut record = record.clone();
        if record.is_default() {
            record.host = self.default_host.clone();
        }
        let written = self.store.put_domain(&record)?;
        self.reload();
        Ok(written)
    }

    /// Deletes a domain: never the default one (409 `domain_is_default`), nor one with links
    /// that are not archived (409 `domain_in_use`).
    pub fn delete(&self, host: &str) -> Result<(), LinkError> {
        let current = self
            .by_host(host)
            .ok_or_else(|| LinkError::DomainNotFound(host.to_string()))?;
        if current.is_default() {
            return Err(LinkError::Conflict {
                code: "domain_is_default",
                field: "host",
                detail: "the default domain cannot be deleted".into(),
            });
        }
        if self.store.domain_in_use(current.id)? {
            return Err(LinkError::Conflict {
                code: "domain_in_use",
                field: "host",
                detail: format!(
                    "`{}` has links that are not archived; delete them first",
                    current.host
                ),
            });
        }
        self.store.delete_domain(current.id)?;
        self.reload();
        Ok(())
    }
}

/// A team slug as the accounts name them (checked against the directory by the caller).
fn check_team(team: Option<String>) -> Result<Option<String>, LinkError> {
    match team.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t)
            if t.len() <= 64
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) =>
        {
            Ok(Some(t))
        }
        Some(_) => Err(invalid(
            "invalid_team",
            "team",
            "`team` is not a team's slug",
        )),
    }
}
