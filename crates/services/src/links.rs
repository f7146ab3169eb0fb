//! The domain service for links: create, resolve, read, list, update and delete. The one home
//! of the business rules (URL checks, code rules, tiers and default validity, dedup, expiry at
//! redirect time, cache invalidation). Knows nothing of HTTP; errors carry the field they are
//! about and a code that the HTTP layer turns into problem+json.
//!
//! Methods are synchronous: writes block until durable (group commit), so async callers run
//! them on the blocking pool. `resolve` is cheap and is called directly on the redirect path.

pub mod cache;
mod catalogue;
pub mod domains;
mod gates;
mod options;
mod ranking;
mod targeting;

/// How every view writes a time (kept here, where most views import from).
pub use crate::model::time::rfc3339;
pub use catalogue::{CatalogueQuery, NumberedPage, SortField, TagStat};
pub use gates::{form_json, parse_retention, retention_text};
pub use options::{hash_password, rules_json, targets_json, verify_password, OptionsInput};
pub use ranking::{Ranking, Totals};
pub use targeting::{Choice, LinkState, Pending, RequestFacts, Routed, Unlock};

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use url::Url;

use self::cache::{CachedTarget, RedirectCache};
use self::domains::Domains;
use crate::blocklist::BlockedHosts;
use crate::clock::Clock;
use crate::codes::{check, encode, hash, is_code_syntax, is_reserved, Space, MAX_CODE_LEN};
use crate::config::{Config, TierStrategy};
use crate::model::{CapSlot, LinkOptions, Trigger};
use crate::model::{
    Link, LinkPage, LinkPatch, LinkQuery, LinkStatus, Millis, StoreError, StoreResult,
};
use crate::plans::{Bound, Held, Plan, Plans, Refusal};
use crate::pools::Pools;
use crate::store::{CodeChoice, Created, NewLink, Store, StoreChange};
use crate::visits::geo::GeoDb;
use crate::visits::ua::UaParser;

/// Longest `space` name.
const MAX_SPACE_LEN: usize = 64;
const MAX_TITLE_LEN: usize = 512;
const MAX_TAGS: usize = 32;
const MAX_TAG_LEN: usize = 64;
/// The furthest expiry accepted: 100 years (timestamps stay formattable and meaningful).
const MAX_VALIDITY_MS: u64 = 100 * 366 * 86_400_000;
/// Most links in one batch request.
pub const MAX_BATCH: usize = 1000;
/// The space of links created without one.
pub const DEFAULT_SPACE: &str = "default";

/// What went wrong, in the caller's terms.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// A bad value in the request. `code` is the error code (`invalid_url`, …).
    #[error("{detail}")]
    Invalid {
        code: &'static str,
        /// The field's path: `url`, or for a part of a list `rules[2].if.os`.
        field: Cow<'static, str>,
        detail: String,
    },
    #[error("the code `{0}` is already taken")]
    CodeTaken(String),
    #[error("no link has the code `{0}`")]
    NotFound(String),
    #[error("the link `{code}` is {status} and can no longer be changed")]
    NotActive { code: String, status: &'static str },
    #[error("no code of length {0} is available")]
    PoolExhausted(u8),
    /// The team's plan refuses it (403 `feature_not_in_plan` or `quota_exceeded`), naming the
    /// field or the quota.
    #[error(transparent)]
    Plan(Refusal),
    /// A conflict with what exists (409): `domain_exists`, `domain_in_use`, ….
    #[error("{detail}")]
    Conflict {
        code: &'static str,
        field: &'static str,
        detail: String,
    },
    /// No domain has this host (404).
    #[error("no domain has the host `{0}`")]
    DomainNotFound(String),
    /// The caller may not do this (403 `forbidden`), naming the field.
    #[error("{detail}")]
    Forbidden { field: &'static str, detail: String },
    #[error("storage failure")]
    Store(#[from] StoreError),
}

impl From<Refusal> for LinkError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Store(e) => LinkError::Store(e),
            refusal => LinkError::Plan(refusal),
        }
    }
}

impl LinkError {
    pub(crate) fn invalid(
        code: &'static str,
        field: impl Into<Cow<'static, str>>,
        detail: impl Into<String>,
    ) -> Self {
        LinkError::Invalid {
            code,
            field: field.into(),
            detail: detail.into(),
        }
    }

    /// The same error about another field (a URL checked for `rules[0].url`, say).
    pub(crate) fn at(self, path: impl Into<Cow<'static, str>>) -> Self {
        match self {
            LinkError::Invalid { code, detail, .. } => LinkError::Invalid {
                code,
                field: path.into(),
                detail,
            },
            LinkError::Plan(Refusal::NotInPlan { detail, .. }) => {
                LinkError::Plan(Refusal::NotInPlan {
                    field: path.into(),
                    detail,
                })
            }
            other => other,
        }
    }
}

pub type Result<T, E = LinkError> = std::result::Result<T, E>;

/// `POST /api/v1/links` body (also one item of a batch). An unknown field is refused: a typo
/// such as `lenght` must not silently make a different link.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateLink {
    /// May be left out when `targets` are given: the first target's URL.
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub length: Option<u8>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub space: Option<String>,
    /// The host of the domain the link answers on (SPEC §26); absent: the default domain.
    #[serde(default)]
    pub domain: Option<String>,
    /// Seconds.
    #[serde(default)]
    pub ttl: Option<i64>,
    /// Absent: the default validity; `null`: permanent; a string: RFC 3339.
    #[serde(default, deserialize_with = "present")]
    pub expires_at: Option<Option<String>>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// 4–128 characters; stored as an Argon2id hash, never returned.
    #[serde(default)]
    pub password: Option<String>,
    /// Redirects after which the link ends (≥ 1).
    #[serde(default)]
    #[schema(value_type = Option<u64>)]
    pub max_visits: Option<serde_json::Value>,
    /// RFC 3339: before it the code answers 404.
    #[serde(default)]
    pub valid_from: Option<String>,
    /// Where visitors go once the link has ended, instead of the 410 page.
    #[serde(default)]
    pub fallback_url: Option<String>,
    /// `[{"if": {conditions}, "url": …}]`, at most 32; the first that holds decides.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub rules: Option<serde_json::Value>,
    /// `[{"url", "weight"?, "max_visits"?}]`, at most 100: rotation among them.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub targets: Option<serde_json::Value>,
    /// `weighted` (default), `round_robin` or `failover`.
    #[serde(default)]
    pub rotation: Option<String>,
    /// `direct` or `interstitial` (visitors in WeChat, QQ, … get a page that says to open
    /// the link in the system browser); absent: `links.in_app`.
    #[serde(default)]
    pub in_app: Option<String>,
    /// `{"fields": [{"name", "label", "type": "tel"|"email"|"text", "required"?}],
    /// "consent"?, "retention"?}`: a form visitors fill before the destination.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub form: Option<serde_json::Value>,
    /// What link-preview crawlers show: `og:title`.
    #[serde(default)]
    pub og_title: Option<String>,
    /// `og:description`.
    #[serde(default)]
    pub og_description: Option<String>,
    /// `og:image`: an http(s) URL.
    #[serde(default)]
    pub og_image: Option<String>,
}

impl CreateLink {
    /// The options part, for [`Links::check_options`].
    fn options_input(&mut self) -> OptionsInput {
        OptionsInput {
            password: self.password.take().map(Some),
            max_visits: self.max_visits.take().map(Some),
            valid_from: self.valid_from.take().map(Some),
            fallback_url: self.fallback_url.take().map(Some),
            rules: self.rules.take().map(Some),
            targets: self.targets.take().map(Some),
            rotation: self.rotation.take().map(Some),
            in_app: self.in_app.take().map(Some),
            form: self.form.take().map(Some),
            og_title: self.og_title.take().map(Some),
            og_description: self.og_description.take().map(Some),
            og_image: self.og_image.take().map(Some),
        }
    }
}

/// `PATCH /api/v1/links/{code}` body (unknown fields refused, as for a create).
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateLink {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub expires_at: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub title: Option<Option<String>>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// A new password; `null` removes the protection.
    #[serde(default, deserialize_with = "present")]
    pub password: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>)]
    pub max_visits: Option<Option<serde_json::Value>>,
    #[serde(default, deserialize_with = "present")]
    pub valid_from: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub fallback_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub rules: Option<Option<serde_json::Value>>,
    /// A new list replaces the old; `null` removes them. Without `url` beside it, the link's
    /// `url` stays as it is: where visitors go again once the targets are removed.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub targets: Option<Option<serde_json::Value>>,
    #[serde(default, deserialize_with = "present")]
    pub rotation: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub in_app: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    pub form: Option<Option<serde_json::Value>>,
    #[serde(default, deserialize_with = "present")]
    pub og_title: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub og_description: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub og_image: Option<Option<String>>,
}

impl UpdateLink {
    /// The options part, for [`Links::check_options`].
    pub fn options_input(&mut self) -> OptionsInput {
        OptionsInput {
            password: self.password.take(),
            max_visits: self.max_visits.take(),
            valid_from: self.valid_from.take(),
            fallback_url: self.fallback_url.take(),
            rules: self.rules.take(),
            targets: self.targets.take(),
            rotation: self.rotation.take(),
            in_app: self.in_app.take(),
            form: self.form.take(),
            og_title: self.og_title.take(),
            og_description: self.og_description.take(),
            og_image: self.og_image.take(),
        }
    }
}

/// Tells an absent field (`None`, through `default`) from an explicit `null` (`Some(None)`).
fn present<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A link's content as [`Links::check_content`] leaves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub url: String,
    pub space: String,
    pub title: Option<String>,
    pub tags: Vec<String>,
}

/// Told of a link that wants a review: its id and why.
pub type ReviewHook = Arc<dyn Fn(u64, Trigger) + Send + Sync>;

/// What happened to a link, for whoever listens (webhooks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkChange {
    Created,
    Updated,
    Deleted,
    /// Expired, or its visit cap reached.
    Ended,
}

/// Told of every change of a link, after it is durable; must not block.
pub type ChangeHook = Arc<dyn Fn(LinkChange, &Link) + Send + Sync>;

/// Where a code leads.
#[derive(Clone, Debug)]
pub enum Resolution {
    Found {
        id: u64,
        url: Arc<str>,
        /// The link's options and what this instance knows of them; `None` for a plain link,
        /// which redirects to `url` and nothing more.
        state: Option<Arc<LinkState>>,
        /// From when visitors in an in-app browser get the in-app page whatever the link
        /// says (its team's plan's `in_app_days`); `None`: the plan does not decide.
        in_app_from: Option<Millis>,
    },
    /// The code belongs to an expired or deleted link; an expired one may send its visitors
    /// to its `fallback_url`.
    Gone {
        fallback: Option<Arc<str>>,
    },
    NotFound,
    /// The link is active but its destination host is blocked (`limits.blocked_hosts`).
    Blocked,
}

/// The link service.
pub struct Links {
    store: Arc<dyn Store>,
    pools: Arc<Pools>,
    clock: Arc<dyn Clock>,
    cache: RedirectCache,
    /// Bumped by every invalidation: a resolve that read the store before an invalidation
    /// must not put what it read into the cache afterwards.
    epoch: AtomicU64,
    base: Url,
    config: Arc<Config>,
    blocked: Arc<BlockedHosts>,
    /// By code length: whether codes of it end with a check character (the redirect path
    /// refuses a failing one before any lookup).
    check_lengths: [bool; MAX_CODE_LEN + 1],
    /// Told of creates and of changed destinations, for the review queue.
    review_hook: OnceLock<ReviewHook>,
    change_hook: OnceLock<ChangeHook>,
    /// The `hash` strategy's secret, read from the store once ([`Links::hash_secret`]).
    hash_secret: OnceLock<Vec<u8>>,
    /// The states of links with options, by id: kept across cache refills, so that a
    /// round-robin turn or a full target is not forgotten every cache ttl.
    states: quick_cache::sync::Cache<u64, Arc<LinkState>>,
    /// Parses user agents for `device` rules (a cache of recent agents).
    agents: UaParser,
    /// The geolocation database, for `country` rules ([`Links::use_geo`]).
    geo: OnceLock<Arc<GeoDb>>,
    /// Visitor-password checks running at once (`memory.budget`'s `password_checks`): each
    /// Argon2 run holds 19 MiB ([`Links::unlock`]).
    password_checks: crate::passwords::PasswordChecks,
    /// The teams' plans ([`Links::use_plans`]): checked by every create and change; none set
    /// (tools that make no links in teams), nothing is checked.
    plans: OnceLock<Arc<Plans>>,
    /// The configured domains (SPEC §26): which a create lands on, which a request names.
    domains: Arc<Domains>,
    /// Links' domains by link id, for events that name a link by id (visits, leads): a link
    /// never moves to another domain and ids are never reused, so an entry never goes stale.
    /// Without it a webhook's batch of visits read every distinct link once (a round trip each
    /// on PostgreSQL). [`DOMAIN_IDS`] entries, within the fixed reserve.
    domain_ids: quick_cache::sync::Cache<u64, u16>,
}

/// Link ids whose domain [`Links::domain_of_id`] remembers: about 40 bytes each, 0.7 MB.
const DOMAIN_IDS: usize = 16_384;

/// What the link service may hold in memory: its share of `memory.budget`, derived by the
/// `memory` module when the application is built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkBounds {
    /// Links with options visited lately ([`LinkState`]s kept across cache refills).
    pub link_states: usize,
    /// User agents the targeting rules parsed.
    pub user_agents: usize,
    /// Visitor-password checks (Argon2 runs) at once.
    pub password_checks: usize,
    /// The redirect cache's bytes (unless `cache.capacity` counts entries).
    pub redirect_cache: u64,
}

/// The metadata key of the `hash` strategy's secret.
pub const HASH_SECRET_KEY: &str = "hash_secret";

/// Random codes a `hash` create tries after its four computed ones.
const HASH_FALLBACKS: usize = 8;

impl Links {
    pub fn new(
        store: Arc<dyn Store>,
        pools: Arc<Pools>,
        clock: Arc<dyn Clock>,
        config: Arc<Config>,
        bounds: LinkBounds,
    ) -> Result<Self, url::ParseError> {
        let base = Url::parse(&config.server.base_url)?;
        let ttl = config.cache.ttl.millis().unwrap_or(300_000);
        // The configured list alone; `with_blocklist` adds the file's hosts.
        let blocked = BlockedHosts::new(&config.limits.blocked_hosts, None)
            .map(Arc::new)
            .unwrap_or_else(|_| Arc::new(BlockedHosts::empty()));
        let mut check_lengths = [false; MAX_CODE_LEN + 1];
        for (length, tier) in &config.tiers {
            if let Some(slot) = check_lengths.get_mut(usize::from(*length)) {
                *slot = tier.check;
            }
        }
        Ok(Self {
            domains: Arc::new(Domains::new(store.clone(), &base)),
            check_lengths,
            review_hook: OnceLock::new(),
            change_hook: OnceLock::new(),
            plans: OnceLock::new(),
            hash_secret: OnceLock::new(),
            // Links with options visited lately, and user agents the rules parsed.
            states: quick_cache::sync::Cache::new(bounds.link_states.max(1)),
            domain_ids: quick_cache::sync::Cache::new(DOMAIN_IDS),
            agents: UaParser::new(bounds.user_agents),
            geo: OnceLock::new(),
            password_checks: crate::passwords::PasswordChecks::new(bounds.password_checks),
            blocked,
            cache: match config.cache.capacity {
                Some(entries) => RedirectCache::new(entries, ttl),
                None => RedirectCache::with_bytes(bounds.redirect_cache, ttl),
            },
            epoch: AtomicU64::new(0),
            store,
            pools,
            clock,
            base,
            config,
        })
    }

    /// Uses this blocklist (the configured hosts and the file's, kept current by its watcher).
    pub fn with_blocklist(mut self, blocked: Arc<BlockedHosts>) -> Self {
        self.blocked = blocked;
        self
    }

    /// Checks every create and change against these plans from now on (once).
    pub fn use_plans(&self, plans: Arc<Plans>) {
        let _ = self.plans.set(plans);
    }

    /// The plans, when in use.
    pub fn plans(&self) -> Option<&Arc<Plans>> {
        self.plans.get()
    }

    /// The team and plan a space is bound by; `None` for a space no team owns (or without
    /// plans in use).
    fn bound(&self, space: &str) -> Option<Bound> {
        let plans = self.plans.get()?;
        if !plans.any_team() {
            return None;
        }
        plans.bound(space)
    }

    /// Takes a new link from its team's quotas before it is written ([`Links::settle`] gives
    /// it back unless the link is made).
    fn reserve(&self, new: &NewLink) -> Result<Option<Held>> {
        let Some(bound) = self.bound(&new.space) else {
            return Ok(None);
        };
        let plans = self
            .plans
            .get()
            .ok_or_else(|| LinkError::Store(StoreError::Backend("plans vanished".into())))?;
        Ok(Some(plans.take_link(&bound, new.now)?))
    }

    /// Keeps what [`Links::reserve`] took if a new link was made, else gives it back.
    fn settle(&self, held: Option<Held>, made: bool) {
        if let (Some(held), Some(plans)) = (held, self.plans.get()) {
            if !made {
                plans.give_back(held);
            }
        }
    }

    /// Reads countries for `country` rules from this database (the visit writer's).
    pub fn use_geo(&self, geo: Option<Arc<GeoDb>>) {
        if let Some(geo) = geo {
            let _ = self.geo.set(geo);
        }
    }

    /// The domains service.
    pub fn domains(&self) -> &Arc<Domains> {
        &self.domains
    }

    /// The short URL of a link, on its domain.
    pub fn short_url_of(&self, link: &Link) -> String {
        self.domains
            .short_url(&self.config.server.base_url, link.domain, &link.code)
    }

    /// The host of a link's domain, as views show it.
    pub fn domain_of(&self, link: &Link) -> String {
        self.host_of(link.domain)
    }

    /// The host of a domain id; the default domain's for one since deleted.
    fn host_of(&self, domain: u16) -> String {
        self.domains
            .host_of(domain)
            .unwrap_or_else(|| self.domains.default_host().to_string())
    }

    /// The short URL of a code on the default domain.
    pub fn short_url(&self, code: &str) -> String {
        format!(
            "{}/{code}",
            self.config.server.base_url.trim_end_matches('/')
        )
    }

    /// Redirect cache hits and misses, for metrics.
    pub fn cache_counters(&self) -> &cache::CacheCounters {
        self.cache.counters()
    }

    /// The clock this service reads.
    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Tells `hook` of every new link and every change of a link's destinations (once).
    pub fn on_review(&self, hook: ReviewHook) {
        let _ = self.review_hook.set(hook);
    }

    fn tell_review(&self, result: &Result<(Link, bool)>, trigger: Trigger) {
        if let (Some(hook), Ok((link, true))) = (self.review_hook.get(), result) {
            hook(link.id, trigger);
        }
        if let Ok((link, true)) = result {
            self.tell_change(LinkChange::Created, link);
        }
    }

    /// Tells `hook` of every change of a link from now on (once).
    pub fn on_change(&self, hook: ChangeHook) {
        let _ = self.change_hook.set(hook);
    }

    /// Tells the change hook; the lifecycle job tells it of the links it ends.
    pub fn tell_change(&self, change: LinkChange, link: &Link) {
        if matches!(change, LinkChange::Deleted | LinkChange::Ended) {
            if let Some(plans) = self.plans.get() {
                plans.link_ended(link);
            }
        }
        if let Some(hook) = self.change_hook.get() {
            hook(change, link);
        }
    }

    /// Creates a link, or returns the existing one for a dedup hit (`false`).
    pub fn create(&self, req: CreateLink) -> Result<(Link, bool)> {
        let new = self.validate_create(req, self.clock.now())?;
        let length = new.length();
        let held = self.reserve(&new)?;
        let result = created(self.pools.create(&new), length);
        self.settle(held, matches!(result, Ok((_, true))));
        self.tell_review(&result, Trigger::Created);
        result
    }

    /// [`Links::create`] for async callers: a pooled create is awaited without holding a
    /// thread ([`Pools::create_async`]).
    pub async fn create_async(&self, req: CreateLink) -> Result<(Link, bool)> {
        let new = self.validate_create(req, self.clock.now())?;
        let length = new.length();
        // A quota take is a lock and a map update on sled, one short transaction on
        // PostgreSQL: not worth a thread hop for the one, bounded for the other.
        let held = self.reserve(&new)?;
        let result = created(self.pools.create_async(new).await, length);
        self.settle(held, matches!(result, Ok((_, true))));
        self.tell_review(&result, Trigger::Created);
        result
    }

    /// Refuses a batch item of a team whose plan has no `batch` (each item answers for itself).
    fn check_batch(&self, req: &CreateLink) -> Result<()> {
        let space = req.space.as_deref().unwrap_or(DEFAULT_SPACE);
        match self.bound(space).and_then(|b| b.plan) {
            Some(plan) => Ok(plan.require("batch", "batch")?),
            None => Ok(()),
        }
    }

    /// Creates many links at once, answers in request order. Creates run side by side so that
    /// they share transactions and flushes: a pooled create holds no thread while the store
    /// commits it, and the pools bound the others ([`Pools::create_async`]).
    pub async fn create_many(self: &Arc<Self>, reqs: Vec<CreateLink>) -> Vec<Result<(Link, bool)>> {
        let mut tasks = tokio::task::JoinSet::new();
        let count = reqs.len();
        for (index, req) in reqs.into_iter().enumerate() {
            let links = self.clone();
            tasks.spawn(async move {
                let outcome = match links.check_batch(&req) {
                    Ok(()) => links.create_async(req).await,
                    Err(e) => Err(e),
                };
                (index, outcome)
            });
        }
        let mut results: Vec<Option<Result<(Link, bool)>>> = (0..count).map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            if let Ok((index, outcome)) = joined {
                results[index] = Some(outcome);
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(LinkError::Store(StoreError::Backend(
                        "create task was lost".into(),
                    )))
                })
            })
            .collect()
    }

    /// Checks and normalises what a link says, by the rules every way in applies (a create,
    /// a batch item, an imported record): the URL, the space, the title and the tags.
    pub fn check_content(
        &self,
        url: &str,
        space: Option<&str>,
        title: Option<String>,
        tags: Option<Vec<String>>,
    ) -> Result<Content> {
        Ok(Content {
            url: self.check_url(url)?,
            space: check_space(space)?,
            title: check_title(title)?,
            tags: check_tags(tags)?,
        })
    }

    /// Checks a whole record from a file (`vshortlink import`) by the same rules as a create:
    /// its code (syntax and reserved words, whether it was generated or chosen) and its
    /// content; returns it normalised. The record's id is the store's to keep or replace.
    pub fn check_record(&self, mut link: Link) -> Result<Link> {
        check_custom_code(&link.code)?;
        if link.custom {
            self.refuse_check_length(&link.code)?;
        } else if self.check_lengths.get(link.code.len()) == Some(&true)
            && !check::passes(&link.code)
        {
            return Err(LinkError::invalid(
                "invalid_code",
                "code",
                format!(
                    "`{}` fails its check character, which codes of length {} carry",
                    link.code,
                    link.code.len()
                ),
            ));
        }
        let content = self.check_content(
            &link.url,
            Some(&link.space),
            link.title.take(),
            Some(std::mem::take(&mut link.tags)),
        )?;
        if let Some(options) = &link.options {
            self.check_stored_options(options)?;
        }
        link.url = content.url;
        link.space = content.space;
        link.title = content.title;
        link.tags = content.tags;
        if link.updated_at < link.created_at {
            return Err(LinkError::invalid(
                "invalid_field",
                "updated_at",
                "`updated_at` is before `created_at`",
            ));
        }
        Ok(link)
    }

    /// A whole record from a file (`vshortlink import`) in a team on a plan, checked like a
    /// create: the features its options use (`options.<field>`), a generated code's length,
    /// and — unless `dry_run` — the team's quotas, taken at once ([`Links::imported`] gives
    /// them back unless the record is written).
    pub fn check_imported(&self, link: &Link, dry_run: bool) -> Result<Option<Held>> {
        let Some(bound) = self.bound(&link.space) else {
            return Ok(None);
        };
        if let Some(plan) = bound.plan.as_deref() {
            if let Some(options) = &link.options {
                gate_options(plan, options)?;
            }
            if link.custom {
                plan.require("custom_code", "code")?;
            } else if let Some(length) = u8::try_from(link.code.len())
                .ok()
                .filter(|l| !plan.allows_length(*l))
            {
                return Err(LinkError::Plan(Refusal::NotInPlan {
                    field: "code".into(),
                    detail: format!(
                        "`code`: the team's plan `{}` does not create codes of length {length}",
                        plan.name
                    ),
                }));
            }
        }
        if dry_run {
            return Ok(None);
        }
        let plans = self
            .plans
            .get()
            .ok_or_else(|| LinkError::Store(StoreError::Backend("plans vanished".into())))?;
        Ok(Some(plans.take_imported(&bound, link, self.clock.now())?))
    }

    /// Settles what [`Links::check_imported`] took: kept when the record was written.
    pub fn imported(&self, held: Option<Held>, written: bool) {
        self.settle(held, written);
    }

    /// Refuses a caller's code of a check tier's length: such codes are made by
    /// the service, their last character a check character.
    fn refuse_check_length(&self, code: &str) -> Result<()> {
        if self.check_lengths.get(code.len()) == Some(&true) {
            return Err(LinkError::invalid(
                "invalid_code",
                "code",
                format!(
                    "codes of length {} end with a check character and are made by the service; \
                     choose a code of another length",
                    code.len()
                ),
            ));
        }
        Ok(())
    }

    /// The codes a create of a `hash` tier tries, in order: the four computed
    /// from the URL and the space's secret ([`hash::space_secret`]) that are no reserved word and hold no blocked word, then
    /// random codes of the same length for when all four are owned. With `check`, each gets
    /// its check character.
    fn computed_codes(
        &self,
        url: &str,
        space: &str,
        payload_len: u8,
        check: bool,
    ) -> Result<Vec<String>> {
        let secret = hash::space_secret(&self.hash_secret()?, space);
        let finish = |payload: String| {
            if check {
                check::with_check(&payload)
            } else {
                Some(payload)
            }
        };
        let allowed = |code: &String| !is_reserved(code) && self.pools.allows_generated(code);
        let mut codes: Vec<String> = hash::candidates(url, &secret)
            .into_iter()
            .filter_map(finish)
            .filter(allowed)
            .collect();
        if let Some(space) = Space::for_length(payload_len) {
            codes.extend(
                (0..HASH_FALLBACKS)
                    .map(|_| encode(rand::random_range(space.min..=space.max)))
                    .filter_map(finish)
                    .filter(allowed),
            );
        }
        Ok(codes)
    }

    /// The `hash` strategy's secret: generated on first use and kept in the store's metadata
    /// (with the permute keys, carried by export and import), so that a moved store computes
    /// the same codes.
    pub fn hash_secret(&self) -> Result<Vec<u8>> {
        if let Some(secret) = self.hash_secret.get() {
            return Ok(secret.clone());
        }
        let fresh: [u8; 32] = rand::random();
        let stored = self.store.meta_init(HASH_SECRET_KEY, &fresh)?;
        Ok(self.hash_secret.get_or_init(|| stored).clone())
    }

    /// Checks and normalises a create request (no writes).
    pub fn validate_create(&self, mut req: CreateLink, now: Millis) -> Result<NewLink> {
        // The plan of the team the link would belong to: checked before anything is taken
        // out of the request.
        let plan = self
            .bound(req.space.as_deref().unwrap_or(DEFAULT_SPACE))
            .and_then(|b| b.plan);
        if let Some(plan) = plan.as_deref() {
            gate_create(plan, &req)?;
        }
        let explicit_expiry = req.ttl.is_some() || req.expires_at.is_some();
        let options = self.check_options(req.options_input())?.apply(None);
        // With targets, `url` may be left out: the first target's URL stands for the link.
        if req.url.trim().is_empty() {
            if let Some(first) = options.as_ref().and_then(|o| o.targets.first()) {
                req.url = first.url.clone();
            }
        }
        let Content {
            url,
            space,
            title,
            tags,
        } = self.check_content(&req.url, req.space.as_deref(), req.title, req.tags)?;
        let domain = self.create_domain(req.domain.as_deref(), &space, plan.as_deref())?;
        let code = match req.code {
            Some(code) => {
                check_custom_code(&code)?;
                self.refuse_check_length(&code)?;
                if let Some(length) = req.length {
                    if usize::from(length) != code.len() {
                        return Err(LinkError::invalid(
                            "invalid_length",
                            "length",
                            format!("length {length} does not match the code `{code}`"),
                        ));
                    }
                }
                CodeChoice::Custom(code)
            }
            None => {
                let length = req.length.unwrap_or(self.config.codes.default_length);
                if let Some(plan) = plan.as_deref().filter(|p| !p.allows_length(length)) {
                    return Err(LinkError::Plan(Refusal::NotInPlan {
                        field: "length".into(),
                        detail: format!(
                            "`length`: the team's plan `{}` does not create codes of length \
                             {length}{}",
                            plan.name,
                            if req.length.is_none() {
                                " (the default); ask for one of its lengths"
                            } else {
                                ""
                            }
                        ),
                    }));
                }
                let tier = self.config.tier(length);
                if let Some(tier) = tier.filter(|t| t.strategy == TierStrategy::Hash) {
                    CodeChoice::Computed(self.computed_codes(
                        &url,
                        &space,
                        tier.payload_len(length),
                        tier.check,
                    )?)
                } else if !self.pools.has_pool(length) {
                    let lengths: Vec<String> = self
                        .config
                        .tiers
                        .iter()
                        .filter(|(_, t)| t.strategy.makes_codes())
                        .map(|(l, _)| l.to_string())
                        .collect();
                    return Err(LinkError::invalid(
                        "invalid_length",
                        "length",
                        format!(
                            "length {length} has no generated codes; use one of {} or give a custom `code`",
                            lengths.join(", ")
                        ),
                    ));
                } else {
                    CodeChoice::Pool(length)
                }
            }
        };
        let expires_at = match (req.ttl, req.expires_at) {
            (Some(_), Some(_)) => {
                return Err(LinkError::invalid(
                    "invalid_ttl",
                    "ttl",
                    "give either `ttl` or `expires_at`, not both",
                ))
            }
            (Some(ttl), None) => {
                let ms = u64::try_from(ttl).unwrap_or(0).saturating_mul(1000);
                if ttl <= 0 || ms > MAX_VALIDITY_MS {
                    return Err(LinkError::invalid(
                        "invalid_ttl",
                        "ttl",
                        format!(
                            "ttl must be a positive number of seconds up to 100 years, not {ttl}"
                        ),
                    ));
                }
                Some(now.saturating_add(ms))
            }
            (None, Some(at)) => parse_expiry(at.as_deref(), now)?,
            (None, None) => match &code {
                // Custom codes are permanent unless told otherwise.
                CodeChoice::Custom(_) => None,
                CodeChoice::Pool(_) | CodeChoice::Computed(_) => self
                    .config
                    .tier(code.length())
                    .and_then(|t| t.ttl.millis())
                    .map(|ms| now.saturating_add(ms)),
            },
        };
        let expires_at = match plan.as_deref().and_then(|p| p.max_ttl) {
            Some(max) if explicit_expiry => {
                check_max_ttl(max, expires_at, now)?;
                expires_at
            }
            // The tier's default, capped at the plan's longest validity.
            Some(max) => Some(expires_at.unwrap_or(u64::MAX).min(now.saturating_add(max))),
            None => expires_at,
        };
        Ok(NewLink {
            // A create that asks for any option gets a link of its own: an existing link of
            // the URL cannot be told to have the same password, and handing back one without
            // it would leave the caller believing it made a protected link.
            dedup: !matches!(code, CodeChoice::Custom(_))
                && options.as_ref().is_none_or(|o| o.is_empty()),
            code,
            url,
            space,
            expires_at,
            title,
            tags,
            options,
            domain,
            now,
        })
    }

    /// The domain a create lands on: the default unless `domain` names a configured one (an
    /// unconfigured host: 400 naming `domain`); another domain needs the team plan's `domains`
    /// feature, and a domain given to a team takes links of that team's spaces only.
    fn create_domain(
        &self,
        host: Option<&str>,
        space: &str,
        plan: Option<&crate::plans::Plan>,
    ) -> Result<u16> {
        let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) else {
            return Ok(crate::model::DEFAULT_DOMAIN);
        };
        let Some(domain) = self.domains.by_host(host) else {
            return Err(LinkError::invalid(
                "invalid_domain",
                "domain",
                format!("`{host}` is no configured domain"),
            ));
        };
        if domain.is_default() {
            return Ok(domain.id);
        }
        if let Some(plan) = plan {
            plan.require("domains", "domain")?;
        }
        if let Some(team) = &domain.team {
            let owner = self.bound(space).map(|b| b.team);
            if owner.as_deref() != Some(team.as_str()) {
                return Err(LinkError::Forbidden {
                    field: "domain",
                    detail: format!(
                        "the domain `{}` belongs to the team `{team}`: links on it go in its spaces",
                        domain.host
                    ),
                });
            }
        }
        Ok(domain.id)
    }

    /// Where a code leads, for the redirect path: cache, then the code filter, then the
    /// active mapping; an expired link never redirects, cached or not, and neither does a
    /// link to a blocked host.
    pub fn resolve(&self, code: &str) -> Result<Resolution> {
        match self.resolve_target(code)? {
            Resolution::Found { url, .. } if self.blocked.blocks_url(&url) => {
                Ok(Resolution::Blocked)
            }
            other => Ok(other),
        }
    }

    /// The state of a link with options: the one kept for it while its options stay the
    /// same, else a new one (reading the counts of a capped link once).
    fn state_of(
        &self,
        code: &str,
        id: u64,
        url: &Arc<str>,
        options: &LinkOptions,
    ) -> Result<Arc<LinkState>> {
        if let Some(state) = self.states.get(&id) {
            if state.describes(url, options) {
                return Ok(state);
            }
        }
        let counted = if options.is_capped() {
            self.store.counted(id)?
        } else {
            Vec::new()
        };
        let state = Arc::new(LinkState::new(
            id,
            code,
            url.clone(),
            options.clone(),
            &counted,
        ));
        self.states.insert(id, state.clone());
        Ok(state)
    }

    /// The redirects counted so far against a link's caps, by slot.
    pub fn counted(&self, link: &Link) -> Result<Vec<(CapSlot, u64)>> {
        match &link.options {
            Some(options) if options.is_capped() => Ok(self.store.counted(link.id)?),
            _ => Ok(Vec::new()),
        }
    }

    fn resolve_target(&self, key: &str) -> Result<Resolution> {
        // `key` is the code on the default domain, `code@id` on another.
        let code = crate::model::split_key(key).0;
        if !is_code_syntax(code) {
            return Ok(Resolution::NotFound);
        }
        // A code of a check tier's length whose check character fails is a typo: refused
        // before the cache, the filter and the store.
        if self.check_lengths.get(code.len()) == Some(&true) && !check::passes(code) {
            return Ok(Resolution::NotFound);
        }
        let now = self.clock.now();
        let code = key;
        if let Some(hit) = self.cache.get(code, now) {
            if hit.blocked {
                return Ok(Resolution::Blocked);
            }
            return Ok(Resolution::Found {
                id: hit.id,
                url: hit.url,
                state: hit.state,
                in_app_from: hit.in_app_from,
            });
        }
        if !self.store.may_exist(code) {
            return Ok(Resolution::NotFound);
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        match self.store.resolve(code)? {
            Some(entry) if entry.expires_at.is_none_or(|at| now < at) => {
                let url: Arc<str> = entry.url.into();
                let state = match &entry.options {
                    Some(options) => Some(self.state_of(code, entry.id, &url, options)?),
                    None => None,
                };
                let in_app_from = self.in_app_from(entry.id)?;
                self.cache.insert(
                    code,
                    CachedTarget {
                        id: entry.id,
                        url: url.clone(),
                        expires_at: entry.expires_at,
                        cached_at: now,
                        state: state.clone(),
                        blocked: entry.blocked,
                        in_app_from,
                    },
                );
                // An update or delete may have invalidated between our read and our insert:
                // `invalidate` bumps the epoch before it removes, so a changed epoch here means
                // what we inserted may be stale. Drop it; the next resolve reads again.
                if self.epoch.load(Ordering::Acquire) != epoch {
                    self.cache.invalidate(code);
                }
                if entry.blocked {
                    return Ok(Resolution::Blocked);
                }
                Ok(Resolution::Found {
                    id: entry.id,
                    url,
                    state,
                    in_app_from,
                })
            }
            // Past its expiry, not yet marked by the daily job.
            Some(entry) => Ok(Resolution::Gone {
                fallback: fallback_of(entry.options.as_deref()),
            }),
            None => Ok(match self.store.link_by_code(code)? {
                // A deleted link answers 410 whatever its options say.
                Some(link) if link.status == LinkStatus::Expired => Resolution::Gone {
                    fallback: fallback_of(link.options.as_deref()),
                },
                Some(_) => Resolution::Gone { fallback: None },
                None => Resolution::NotFound,
            }),
        }
    }

    /// From when a link's in-app visitors get the in-app page by its team's plan: read on a
    /// cache miss only when some plan sets `in_app_days` (the active entry holds neither
    /// the link's space nor its age, so that a plain link's entry stays small).
    fn in_app_from(&self, id: u64) -> Result<Option<Millis>> {
        let Some(plans) = self.plans.get().filter(|p| p.decides_in_app()) else {
            return Ok(None);
        };
        Ok(self
            .store
            .link_by_id(id)?
            .and_then(|link| plans.in_app_from(&link.space, link.created_at)))
    }

    /// The link that owns a code on the default domain, or the key of a code on another
    /// ([`crate::model::code_key`]).
    pub fn get(&self, key: &str) -> Result<Link> {
        let code = crate::model::split_key(key).0;
        if !is_code_syntax(code) {
            return Err(LinkError::NotFound(code.to_string()));
        }
        self.store
            .link_by_code(key)?
            .ok_or_else(|| LinkError::NotFound(code.to_string()))
    }

    /// The host of the domain of the link with this id; `None` when it cannot be read. Reads
    /// nothing while only the default domain exists (events name a link's domain this way:
    /// visits and leads carry its id, not its domain).
    pub fn domain_of_id(&self, id: u64) -> Option<String> {
        if !self.domains.any_other() {
            return Some(self.domains.default_host().to_string());
        }
        if let Some(domain) = self.domain_ids.get(&id) {
            return Some(self.host_of(domain));
        }
        match self.store.link_by_id(id) {
            Ok(link) => link.map(|link| {
                self.domain_ids.insert(id, link.domain);
                self.host_of(link.domain)
            }),
            Err(e) => {
                tracing::warn!(error = %e, id, "reading a link's domain failed");
                None
            }
        }
    }

    /// A page of links.
    pub fn list(&self, query: &LinkQuery) -> Result<LinkPage> {
        Ok(self.store.list_links(query)?)
    }

    /// Applies a patch; the cache forgets the old target at once.
    pub fn update(&self, code: &str, mut req: UpdateLink) -> Result<Link> {
        let now = self.clock.now();
        // A link's space never changes: its team's plan as of now decides this change.
        if self.plans.get().is_some_and(|p| p.any_team()) {
            let link = self.get(code)?;
            if let Some(plan) = self.bound(&link.space).and_then(|b| b.plan) {
                gate_update(&plan, &req)?;
                if let (Some(max), Some(at)) = (plan.max_ttl, req.expires_at.as_ref()) {
                    let at = parse_expiry(at.as_deref(), now)?;
                    check_max_ttl(max, at, now)?;
                }
            }
        }
        // New targets without a new URL leave `url` as it is (SPEC §19): it is where
        // visitors go again once the targets are removed.
        let options = self.check_options(req.options_input())?;
        let patch = LinkPatch {
            review: None,
            options,
            end: None,
            url: req.url.as_deref().map(|u| self.check_url(u)).transpose()?,
            expires_at: req
                .expires_at
                .map(|at| parse_expiry(at.as_deref(), now))
                .transpose()?,
            title: req.title.map(check_title).transpose()?,
            tags: req.tags.map(|t| check_tags(Some(t))).transpose()?,
        };
        let destinations_changed =
            patch.url.is_some() || patch.options.rules.is_some() || patch.options.targets.is_some();
        let result = self.store.update_link(code, &patch, now);
        self.invalidate(code);
        let link = result.map_err(|e| self.map_write_error(code, e))?;
        if destinations_changed {
            if let Some(hook) = self.review_hook.get() {
                hook(link.id, Trigger::Changed);
            }
        }
        self.tell_change(LinkChange::Updated, &link);
        Ok(link)
    }

    /// Deletes a link; redirects stop at once, the record stays.
    pub fn delete(&self, code: &str) -> Result<Link> {
        let now = self.clock.now();
        let result = self.store.delete_link(code, now);
        self.invalidate(code);
        let link = result.map_err(|e| self.map_write_error(code, e))?;
        self.tell_change(LinkChange::Deleted, &link);
        Ok(link)
    }

    /// Forgets a code in the cache (updates, deletes, expiry).
    pub fn invalidate(&self, code: &str) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.cache.invalidate(code);
    }

    /// The slots Argon2 runs in, shared with people's sign-ins.
    pub fn password_checks(&self) -> crate::passwords::PasswordChecks {
        self.password_checks.clone()
    }

    /// Applies a change another instance made to the shared store.
    pub fn forget(&self, change: &StoreChange) {
        match change {
            StoreChange::Code(code) => self.invalidate(code),
            // The accounts service reloads its own records.
            StoreChange::Accounts => {}
            StoreChange::Domains => self.domains.reload(),
            StoreChange::All => {
                self.epoch.fetch_add(1, Ordering::AcqRel);
                self.cache.clear();
                self.domains.reload();
            }
        }
    }

    fn map_write_error(&self, key: &str, e: StoreError) -> LinkError {
        let code = crate::model::split_key(key).0;
        match e {
            StoreError::NotFound => LinkError::NotFound(code.to_string()),
            StoreError::WrongStatus(LinkStatus::Archived) => LinkError::NotFound(code.to_string()),
            StoreError::WrongStatus(status) => LinkError::NotActive {
                code: code.to_string(),
                status: status.as_str(),
            },
            other => LinkError::Store(other),
        }
    }

    /// Parses and normalises a target URL.
    pub fn check_url(&self, raw: &str) -> Result<String> {
        let max = self.config.limits.max_url_len;
        let bad = |detail: String| LinkError::invalid("invalid_url", "url", detail);
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(bad("url is empty".into()));
        }
        if raw.len() > max {
            return Err(bad(format!("url is longer than {max} characters")));
        }
        let url = Url::parse(raw).map_err(|e| bad(format!("url is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!(
                "the scheme `{}` is not allowed; use http or https",
                url.scheme()
            )));
        }
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err(bad("url has no host".into()));
        };
        if self.points_here(&url) {
            return Err(bad(
                "url points back at this shortener; a short link cannot lead to another".into(),
            ));
        }
        if self.blocked.is_blocked(host) {
            return Err(LinkError::invalid(
                "blocked_url",
                "url",
                format!("links to `{host}` are blocked on this server"),
            ));
        }
        let normalised = url.to_string();
        if normalised.len() > max {
            return Err(bad(format!("url is longer than {max} characters")));
        }
        Ok(normalised)
    }
}

impl Links {
    /// Whether a URL leads back to this server (a loop): its host is the base URL's
    /// host, or any name of this machine — `localhost` and `*.localhost`, a loopback or
    /// unspecified address in any spelling (the `url` crate reads `0x7f.1` and `2130706433` as
    /// 127.0.0.1; an IPv4-mapped IPv6 address counts as IPv4), the address it listens on —
    /// and its port is one this server answers on: the base URL's or the listening one (for
    /// the machine's own names, the listening one). Names are not resolved: nothing is looked
    /// up or fetched when a link is made.
    pub fn points_here(&self, url: &Url) -> bool {
        let Some(port) = url.port_or_known_default() else {
            return false;
        };
        let listen = self.config.server.listen;
        let on_listen_port = port == listen.port();
        let base_host = self
            .base
            .host_str()
            .is_some_and(|b| url.host_str().is_some_and(|h| h.eq_ignore_ascii_case(b)));
        // Every configured domain is this server too (SPEC §26).
        let our_domain = !base_host
            && url
                .host_str()
                .is_some_and(|h| self.domains.by_host(h).is_some());
        if (base_host || our_domain)
            && (on_listen_port || Some(port) == self.base.port_or_known_default())
        {
            return true;
        }
        let machine = match url.host() {
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                name == "localhost" || name.ends_with(".localhost")
            }
            Some(url::Host::Ipv4(ip)) => is_own_ip(IpAddr::V4(ip), listen.ip()),
            Some(url::Host::Ipv6(ip)) => is_own_ip(IpAddr::V6(ip), listen.ip()),
            None => false,
        };
        machine && on_listen_port
    }
}

/// A loopback or unspecified address, or the one the server listens on.
fn is_own_ip(ip: IpAddr, listen: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified() || ip == listen.to_canonical()
}

/// Checks a caller-chosen code.
pub fn check_custom_code(code: &str) -> Result<()> {
    if !is_code_syntax(code) {
        return Err(LinkError::invalid(
            "invalid_code",
            "code",
            format!("`{code}` is not 1 to 16 characters of 0-9, a-z, A-Z, `_` and `-`"),
        ));
    }
    if is_reserved(code) {
        return Err(LinkError::invalid(
            "invalid_code",
            "code",
            format!("`{code}` is a reserved word"),
        ));
    }
    Ok(())
}

fn check_space(space: Option<&str>) -> Result<String> {
    let space = space.unwrap_or(DEFAULT_SPACE);
    let ok = !space.is_empty()
        && space.len() <= MAX_SPACE_LEN
        && space
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(space.to_string())
    } else {
        Err(LinkError::invalid(
            "invalid_space",
            "space",
            format!("space must be 1 to {MAX_SPACE_LEN} characters of letters, digits, `_`, `-` and `.`"),
        ))
    }
}

fn check_title(title: Option<String>) -> Result<Option<String>> {
    match title {
        Some(t) if t.chars().count() > MAX_TITLE_LEN => Err(LinkError::invalid(
            "invalid_title",
            "title",
            format!("title is longer than {MAX_TITLE_LEN} characters"),
        )),
        other => Ok(other),
    }
}

fn check_tags(tags: Option<Vec<String>>) -> Result<Vec<String>> {
    let tags = tags.unwrap_or_default();
    if tags.len() > MAX_TAGS {
        return Err(LinkError::invalid(
            "invalid_tags",
            "tags",
            format!("at most {MAX_TAGS} tags"),
        ));
    }
    if tags
        .iter()
        .any(|t| t.trim().is_empty() || t.chars().count() > MAX_TAG_LEN)
    {
        return Err(LinkError::invalid(
            "invalid_tags",
            "tags",
            format!("each tag is 1 to {MAX_TAG_LEN} characters"),
        ));
    }
    Ok(tags)
}

/// `null` → permanent; an RFC 3339 time that must be in the future.
fn parse_expiry(at: Option<&str>, now: Millis) -> Result<Option<Millis>> {
    let Some(text) = at else {
        return Ok(None);
    };
    let bad = |detail: String| LinkError::invalid("invalid_expires_at", "expires_at", detail);
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| bad(format!("`{text}` is not an RFC 3339 time: {e}")))?;
    let ms = parsed.unix_timestamp_nanos() / 1_000_000;
    let ms = u64::try_from(ms).map_err(|_| bad(format!("`{text}` is before 1970")))?;
    if ms <= now {
        return Err(bad(format!("`{text}` is in the past")));
    }
    if ms - now > MAX_VALIDITY_MS {
        return Err(bad(format!(
            "`{text}` is more than 100 years away; use null for a permanent link"
        )));
    }
    Ok(Some(ms))
}

/// The end destination of an ended link's options.
fn fallback_of(options: Option<&LinkOptions>) -> Option<Arc<str>> {
    options?.fallback_url.as_deref().map(Arc::from)
}

/// A store's answer to a create as the domain's: the link and whether it is new.
fn created(outcome: StoreResult<Created>, length: u8) -> Result<(Link, bool)> {
    match outcome {
        Ok(Created::New(link)) => Ok((link, true)),
        Ok(Created::Existing(link)) => Ok((link, false)),
        Err(StoreError::CodeTaken(code)) => Err(LinkError::CodeTaken(code)),
        Err(StoreError::PoolEmpty(_)) => Err(LinkError::PoolExhausted(length)),
        Err(e) => Err(e.into()),
    }
}

/// `quota_exceeded` naming `max_ttl` for an expiry past the plan's longest validity (or a
/// permanent link).
fn check_max_ttl(max: u64, expires_at: Option<Millis>, now: Millis) -> Result<()> {
    let asked = expires_at.map(|at| at.saturating_sub(now));
    if asked.is_some_and(|ms| ms <= max) {
        return Ok(());
    }
    Err(LinkError::Plan(Refusal::QuotaExceeded {
        quota: "max_ttl",
        limit: max / 1000,
        used: asked.map(|ms| ms / 1000),
        detail: match asked {
            Some(ms) => format!(
                "the team's plan lets a link live at most {} seconds, not {}",
                max / 1000,
                ms / 1000
            ),
            None => format!(
                "the team's plan lets a link live at most {} seconds; a permanent link is past it",
                max / 1000
            ),
        },
    }))
}

/// The features a create uses, each with the field that uses it, checked against the plan.
fn gate_create(plan: &Plan, req: &CreateLink) -> Result<()> {
    let uses = [
        ("password", "password", req.password.is_some()),
        ("max_visits", "max_visits", req.max_visits.is_some()),
        ("valid_from", "valid_from", req.valid_from.is_some()),
        ("fallback_url", "fallback_url", req.fallback_url.is_some()),
        ("rules", "rules", req.rules.is_some()),
        ("targets", "targets", req.targets.is_some()),
        ("targets", "rotation", req.rotation.is_some()),
        ("form", "form", req.form.is_some()),
        ("in_app", "in_app", req.in_app.is_some()),
        ("preview", "og_title", req.og_title.is_some()),
        ("preview", "og_description", req.og_description.is_some()),
        ("preview", "og_image", req.og_image.is_some()),
        ("custom_code", "code", req.code.is_some()),
    ];
    for (feature, field, used) in uses {
        if used {
            plan.require(feature, field)?;
        }
    }
    if let Some(field) = target_caps(req.targets.as_ref()) {
        plan.require("max_visits", &field)?;
    }
    Ok(())
}

/// The features a stored link's options use (an imported record), each named
/// `options.<field>`, checked against the plan.
fn gate_options(plan: &Plan, o: &LinkOptions) -> Result<()> {
    let uses = [
        ("password", "options.password", o.password.is_some()),
        ("max_visits", "options.max_visits", o.max_visits.is_some()),
        ("valid_from", "options.valid_from", o.valid_from.is_some()),
        (
            "fallback_url",
            "options.fallback_url",
            o.fallback_url.is_some(),
        ),
        ("rules", "options.rules", !o.rules.is_empty()),
        ("targets", "options.targets", !o.targets.is_empty()),
        ("form", "options.form", o.form.is_some()),
        ("in_app", "options.in_app", o.in_app.is_some()),
        ("preview", "options.preview", o.preview.is_some()),
    ];
    for (feature, field, used) in uses {
        if used {
            plan.require(feature, field)?;
        }
    }
    Ok(())
}

/// The features a change sets (removing one is always allowed), checked against the plan.
fn gate_update(plan: &Plan, req: &UpdateLink) -> Result<()> {
    fn set<T>(v: &Option<Option<T>>) -> bool {
        matches!(v, Some(Some(_)))
    }
    let uses = [
        ("password", "password", set(&req.password)),
        ("max_visits", "max_visits", set(&req.max_visits)),
        ("valid_from", "valid_from", set(&req.valid_from)),
        ("fallback_url", "fallback_url", set(&req.fallback_url)),
        ("rules", "rules", set(&req.rules)),
        ("targets", "targets", set(&req.targets)),
        ("targets", "rotation", set(&req.rotation)),
        ("form", "form", set(&req.form)),
        ("in_app", "in_app", set(&req.in_app)),
        ("preview", "og_title", set(&req.og_title)),
        ("preview", "og_description", set(&req.og_description)),
        ("preview", "og_image", set(&req.og_image)),
    ];
    for (feature, field, used) in uses {
        if used {
            plan.require(feature, field)?;
        }
    }
    if let Some(Some(targets)) = &req.targets {
        if let Some(field) = target_caps(Some(targets)) {
            plan.require("max_visits", &field)?;
        }
    }
    Ok(())
}

/// `targets[i].max_visits` of the first target with a cap: a cap is the `max_visits` feature
/// wherever it is set.
fn target_caps(targets: Option<&serde_json::Value>) -> Option<String> {
    targets?
        .as_array()?
        .iter()
        .position(|t| t.get("max_visits").is_some_and(|v| !v.is_null()))
        .map(|i| format!("targets[{i}].max_visits"))
}
