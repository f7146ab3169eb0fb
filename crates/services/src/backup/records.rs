//! The records of the export format (one JSON line each: a key of the store, a link, a visit,
//! a lead, and a backup's closing `end` line), the keys an export carries, and the conversions
//! between records and what the store keeps. Written by `sections.rs` (for `export`, the
//! backup API and the scheduled backups alike), read by the root crate's `import` and by
//! `verify.rs`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::links::rfc3339;
use crate::model::{EndedBy, LinkOptions, ReviewMark};
use crate::model::{Link, LinkStatus, Millis, NewVisit, Visit};

/// One line of an export: a key of the store, a link, a visit, a lead, or a backup's `end`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
// One record at a time is read or written: the sizes of the variants never add up.
#[allow(clippy::large_enum_variant)]
pub enum Record {
    Key(KeyRecord),
    /// A configured domain (SPEC §26), before the links that name it.
    Domain(DomainRecord),
    Link(LinkRecord),
    Visit(VisitRecord),
    Lead(LeadRecord),
    /// A user, team, membership, identity or run-time key (`export --accounts`, a backup
    /// with `accounts=true`): password and key hashes included, so the file is a secret.
    Account(crate::model::AccountRecord),
    /// The last line of a backup: how many lines came before it and their SHA-256.
    End(EndRecord),
}

/// `{"type":"end","records":N,"sha256":"…"}`: `records` lines came before this one, and the
/// hex SHA-256 is over their exact bytes, newlines included (before any compression). A file
/// without it was cut short; one whose checksum fails was changed.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndRecord {
    pub records: u64,
    pub sha256: String,
}

/// A lead left through a link's form; `link_id` is the id of the link line it belongs to.
/// Personal data: written only by `export --leads`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeadRecord {
    pub id: u64,
    pub link_id: u64,
    pub at: String,
    /// `[name, value]` pairs in the form's order.
    pub values: Vec<(String, String)>,
    pub consent: Option<String>,
}

/// A key the store generated that decides codes: the `hash` strategy's secret, so that a
/// moved store computes the same codes for the same URLs. Written first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecord {
    pub name: String,
    /// Hex.
    pub value: String,
}

/// A domain: its host and settings (the well-known files as JSON values). The default
/// domain's record (`default: true`) carries its settings; an import gives them to the
/// importing store's own default domain, whatever its host.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainRecord {
    pub host: String,
    #[serde(default)]
    pub default: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_found_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apple_app_site_association: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assetlinks: Option<serde_json::Value>,
    pub created_at: String,
    pub updated_at: String,
}

impl DomainRecord {
    pub fn from_domain(domain: &crate::model::Domain) -> Self {
        let json =
            |text: &Option<String>| text.as_deref().and_then(|t| serde_json::from_str(t).ok());
        Self {
            host: domain.host.clone(),
            default: domain.is_default(),
            team: domain.team.clone(),
            root_url: domain.root_url.clone(),
            not_found_url: domain.not_found_url.clone(),
            other_url: domain.other_url.clone(),
            apple_app_site_association: json(&domain.apple_app_site_association),
            assetlinks: json(&domain.assetlinks),
            created_at: rfc3339(domain.created_at),
            updated_at: rfc3339(domain.updated_at),
        }
    }

    /// The record as a domain (id 0 for the default one; others get theirs from the store
    /// that takes it).
    pub fn to_domain(&self) -> Result<crate::model::Domain, String> {
        let time =
            |field: &str, text: &str| parse_rfc3339(text).map_err(|e| format!("`{field}`: {e}"));
        Ok(crate::model::Domain {
            id: 0,
            host: self.host.clone(),
            team: self.team.clone(),
            root_url: self.root_url.clone(),
            not_found_url: self.not_found_url.clone(),
            other_url: self.other_url.clone(),
            apple_app_site_association: self
                .apple_app_site_association
                .as_ref()
                .map(|v| v.to_string()),
            assetlinks: self.assetlinks.as_ref().map(|v| v.to_string()),
            created_at: time("created_at", &self.created_at)?,
            updated_at: time("updated_at", &self.updated_at)?,
        })
    }
}

/// The keys an export carries (and an import accepts).
pub const CARRIED_KEYS: &[&str] = &[crate::links::HASH_SECRET_KEY];

/// The key that run-time keys' hashes are keyed with: carried with the accounts (without it
/// no key made at run time would be recognised after a restore), and only with them.
pub const ACCOUNT_KEYS: &[&str] = &[crate::accounts::PEPPER_META];

/// Every field of a link record; times in RFC 3339 (UTC, millisecond precision).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRecord {
    pub id: u64,
    pub code: String,
    pub url: String,
    pub space: String,
    pub status: LinkStatus,
    pub custom: bool,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: Option<String>,
    #[serde(default)]
    pub deleted_at: Option<String>,
    pub title: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Password hash, cap, start time, end destination, rules and targets, as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<LinkOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    /// Redirects counted against the caps so far, by slot (0 the link, n + 1 target n).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted: Vec<(u32, u64)>,
    /// The latest review verdict: a blocked link stays blocked where it moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewMark>,
    /// The host of the link's domain (SPEC §26); absent: the default domain. The writer
    /// fills it (a record knows no hosts), and the reader maps it back to a domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// Every field of a visit; `link_id` is the id of the link line it belongs to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisitRecord {
    pub id: u64,
    pub link_id: u64,
    pub code: String,
    pub at: String,
    pub client_id: Arc<str>,
    pub ip: Option<Arc<str>>,
    pub user_agent: Arc<str>,
    pub referer: Arc<str>,
    pub browser: Arc<str>,
    pub browser_version: Arc<str>,
    pub os: Arc<str>,
    pub os_version: Arc<str>,
    pub device: Arc<str>,
    pub is_bot: bool,
    pub country: Option<Arc<str>>,
    pub region: Option<Arc<str>>,
    pub city: Option<Arc<str>>,
    pub isp: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Arc<str>>,
}

impl LinkRecord {
    pub fn from_link(link: &Link) -> Self {
        Self {
            id: link.id,
            code: link.code.clone(),
            url: link.url.clone(),
            space: link.space.clone(),
            status: link.status,
            custom: link.custom,
            created_at: rfc3339(link.created_at),
            updated_at: rfc3339(link.updated_at),
            expires_at: link.expires_at.map(rfc3339),
            deleted_at: link.deleted_at.map(rfc3339),
            title: link.title.clone(),
            tags: link.tags.clone(),
            options: link.options.as_deref().cloned(),
            ended_by: link.ended_by,
            counted: Vec::new(),
            review: link.review.clone(),
            domain: None,
        }
    }

    /// The record as a link, its times parsed (no rule checked: see `Links::check_record`).
    pub fn to_link(&self) -> Result<Link, String> {
        let time =
            |field: &str, text: &str| parse_rfc3339(text).map_err(|e| format!("`{field}`: {e}"));
        let optional = |field: &str, text: &Option<String>| {
            text.as_deref().map(|t| time(field, t)).transpose()
        };
        Ok(Link {
            id: self.id,
            code: self.code.clone(),
            url: self.url.clone(),
            space: self.space.clone(),
            custom: self.custom,
            created_at: time("created_at", &self.created_at)?,
            expires_at: optional("expires_at", &self.expires_at)?,
            status: self.status,
            title: self.title.clone(),
            tags: self.tags.clone(),
            updated_at: time("updated_at", &self.updated_at)?,
            deleted_at: optional("deleted_at", &self.deleted_at)?,
            options: self.options.clone().map(Box::new),
            ended_by: self.ended_by,
            review: self.review.clone(),
            // The reader maps `domain` to the id it has here.
            domain: crate::model::DEFAULT_DOMAIN,
        })
    }
}

impl VisitRecord {
    pub fn from_visit(v: &Visit) -> Self {
        Self {
            id: v.id,
            link_id: v.link_id,
            code: v.code.clone(),
            at: rfc3339(v.at),
            client_id: v.client_id.clone(),
            ip: v.ip.clone(),
            user_agent: v.user_agent.clone(),
            referer: v.referer.clone(),
            browser: v.browser.clone(),
            browser_version: v.browser_version.clone(),
            os: v.os.clone(),
            os_version: v.os_version.clone(),
            device: v.device.clone(),
            is_bot: v.is_bot,
            country: v.country.clone(),
            region: v.region.clone(),
            city: v.city.clone(),
            isp: v.isp.clone(),
            route: v.route.clone(),
        }
    }

    /// The visit for the store, belonging to `link_id` there.
    pub fn to_new_visit(&self, link_id: u64) -> Result<NewVisit, String> {
        let at = parse_rfc3339(&self.at).map_err(|e| format!("`at`: {e}"))?;
        // The distinct-visitor key is the first 8 bytes of the same SHA-1 (see visits::client).
        let client_hash = crate::visits::client::client_hash_from_id(&self.client_id)
            .ok_or("`client_id` is not a hex SHA-1")?;
        let referer_host = crate::visits::tally::referer_host(&self.referer).into();
        Ok(NewVisit {
            visit: Visit {
                // Kept only by `import_visits` (a store without visits); else numbered anew.
                id: self.id,
                link_id,
                code: self.code.clone(),
                at,
                client_id: self.client_id.clone(),
                ip: self.ip.clone(),
                user_agent: self.user_agent.clone(),
                referer: self.referer.clone(),
                browser: self.browser.clone(),
                browser_version: self.browser_version.clone(),
                os: self.os.clone(),
                os_version: self.os_version.clone(),
                device: self.device.clone(),
                is_bot: self.is_bot,
                country: self.country.clone(),
                region: self.region.clone(),
                city: self.city.clone(),
                isp: self.isp.clone(),
                route: self.route.clone(),
            },
            client_hash,
            referer_host,
        })
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (the records' times).
pub fn parse_rfc3339(text: &str) -> Result<Millis, String> {
    let t = OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map_err(|e| format!("`{text}` is not an RFC 3339 time: {e}"))?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| format!("`{text}` is before 1970"))
}
