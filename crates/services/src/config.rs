//! Typed configuration: layering (embedded `config.toml` < `--config` file < `VSL_*`
//! environment), parsing of durations and rates, and validation. Builds no runtime objects.
//!
//! Any error names the offending key, so that a bad file stops start-up with a message the
//! operator can act on.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::providers::{Env, Format, Toml};
use figment::Figment;
use serde::{Deserialize, Deserializer};

use crate::codes::{Space, Strategy, MAX_CODE_LEN, MAX_GENERATED_LEN};
use crate::store::Durability;

/// The default configuration, compiled in.
pub const DEFAULT_TOML: &str = include_str!("../../../config.toml");

/// A configuration that could not be loaded; the message names the key.
#[derive(Debug, thiserror::Error)]
#[error("configuration error: {0}")]
pub struct ConfigError(pub String);

/// The whole configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub storage: StorageConfig,
    pub cache: CacheConfig,
    pub codes: CodesConfig,
    #[serde(deserialize_with = "tiers_by_length")]
    pub tiers: BTreeMap<u8, TierConfig>,
    pub lifecycle: LifecycleConfig,
    pub visits: VisitsConfig,
    pub auth: AuthConfig,
    pub limits: LimitsConfig,
    pub ui: UiConfig,
    pub yourls: YourlsConfig,
    pub links: LinksConfig,
    pub review: ReviewConfig,
    pub memory: MemoryConfig,
    /// `[backup]`: scheduled backups (none unless `every` is set).
    #[serde(default)]
    pub backup: BackupConfig,
    /// `[[webhooks]]`: none by default.
    #[serde(default)]
    pub webhooks: Vec<WebhookConfig>,
    /// `[plans.NAME]`: what teams on each plan may use and how much (SPEC §25); none by
    /// default, and a team without a plan has no limits.
    #[serde(default)]
    pub plans: BTreeMap<String, PlanConfig>,
    /// `[tls]`: HTTPS built in (SPEC §26); off by default.
    #[serde(default)]
    pub tls: TlsConfig,
}

/// Let's Encrypt's production directory: `tls.directory`'s default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// `[tls]`: whether `server.listen` serves HTTPS, and where its certificate comes from.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    pub mode: TlsMode,
    /// Plain HTTP beside (`0.0.0.0:80`): ACME's http-01 challenges, and a 308 to HTTPS for
    /// everything else. Empty: none.
    pub http_listen: String,
    /// `Strict-Transport-Security: max-age=31536000` on every HTTPS answer.
    pub hsts: bool,
    /// `files`: the certificate chain and its private key, PEM.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// `acme`: the directory URL of the certificate authority.
    pub directory: String,
    /// `acme`: the account's contact (optional).
    pub email: String,
    /// `acme`: a PEM file of an extra root to trust for the directory (a test CA); empty: none.
    pub ca: PathBuf,
    /// `acme`: how the authority checks that this server answers for a name.
    pub challenge: AcmeChallenge,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            mode: TlsMode::Off,
            http_listen: String::new(),
            hsts: false,
            cert: PathBuf::new(),
            key: PathBuf::new(),
            directory: LETS_ENCRYPT.to_string(),
            email: String::new(),
            ca: PathBuf::new(),
            challenge: AcmeChallenge::TlsAlpn01,
        }
    }
}

impl TlsConfig {
    /// Whether `server.listen` serves HTTPS.
    pub fn on(&self) -> bool {
        self.mode != TlsMode::Off
    }

    /// `http_listen` as an address (validated when loaded); `None` when empty.
    pub fn http_listen(&self) -> Option<SocketAddr> {
        self.http_listen.trim().parse().ok()
    }
}

/// `tls.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plain HTTP on `server.listen` (behind a proxy that terminates TLS, or none).
    #[default]
    Off,
    /// `tls.cert` and `tls.key`, re-read when they change.
    Files,
    /// Certificates ordered from `tls.directory` and renewed here.
    Acme,
}

/// `tls.challenge`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum AcmeChallenge {
    /// Answered on `server.listen` itself (port 443 must reach it).
    #[default]
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// Answered on `tls.http_listen` (port 80 must reach it).
    #[serde(rename = "http-01")]
    Http01,
}

/// Every feature a plan may leave out (`[plans.NAME].features`), as the config names them.
pub const PLAN_FEATURES: &[&str] = &[
    "password",
    "max_visits",
    "valid_from",
    "fallback_url",
    "rules",
    "targets",
    "form",
    "in_app",
    "preview",
    "custom_code",
    "batch",
    "export",
    "domains",
    "webhooks",
];

/// `[plans.NAME]`: one tier (design 003's 免费版, 个人版, …). Limits are signed here only so
/// that a negative one is refused naming its key rather than as a type error; each absent
/// limit is no limit.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanConfig {
    /// The features the plan allows, of [`PLAN_FEATURES`]; absent: every one.
    #[serde(default)]
    pub features: Option<Vec<String>>,
    /// Links made per calendar month (UTC) in the team's spaces.
    #[serde(default)]
    pub links_per_month: Option<i64>,
    /// Active links in the team's spaces at any time.
    #[serde(default)]
    pub active_links: Option<i64>,
    /// Visits recorded per calendar month (UTC); past it redirects go on unrecorded.
    #[serde(default)]
    pub visits_per_month: Option<i64>,
    /// The longest validity a link may have (creates without `ttl` are capped to it).
    #[serde(default)]
    pub max_ttl: Option<Span>,
    /// The code lengths (tiers) the plan may create generated codes of; absent: every one.
    #[serde(default)]
    pub lengths: Option<Vec<i64>>,
    /// Days after a link's creation past which visitors in an in-app browser get the in-app
    /// page (0: from creation on).
    #[serde(default)]
    pub in_app_days: Option<i64>,
}

/// `[backup]`: the scheduled backups ([`crate::backup::schedule`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackupConfig {
    /// Where the backups go (relative to the working directory); required with `every`.
    pub dir: PathBuf,
    /// How often, from the Unix epoch: `6h`, `1d`; empty: no scheduled backups.
    pub every: Every,
    /// How many backups `dir` keeps; the oldest beyond are deleted after each write.
    pub keep: usize,
    /// Every visit in each backup.
    pub visits: bool,
    /// Every lead (personal data) in each backup.
    pub leads: bool,
}

impl Default for BackupConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::new(),
            every: Every(None),
            keep: 7,
            visits: true,
            leads: true,
        }
    }
}

/// How often something scheduled runs: a duration of at least a second, or empty for never.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Every(pub Option<Duration>);

impl<'de> Deserialize<'de> for Every {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.trim().is_empty() {
            return Ok(Every(None));
        }
        let span: Span = text.parse().map_err(serde::de::Error::custom)?;
        match span.0 {
            Some(every) if every >= Duration::from_secs(1) => Ok(Every(Some(every))),
            _ => Err(serde::de::Error::custom(format!(
                "`{}` is not a duration of at least 1s (like 30m, 6h, 1d), nor empty for none",
                text.trim()
            ))),
        }
    }
}

/// `[memory]`: the budget every memory bound is derived from ([`crate::memory`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// What the process may hold: `256MB`, `1GB`, `512MiB`, or a number of bytes.
    pub budget: ByteSize,
    /// Derived from `budget` (and the keys that override parts) when the configuration is
    /// loaded, so that a budget too small for it is a configuration error.
    #[serde(skip)]
    pub bounds: crate::memory::Bounds,
}

/// One `[[webhooks]]` endpoint.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// What the delivery log and the dashboard call it; the URL when not given. Items in the
    /// outbox belong to a webhook by this name.
    #[serde(default)]
    pub name: String,
    pub url: String,
    /// `link.created`, `link.updated`, `link.deleted`, `link.ended`, `visit`, `lead`, `review`.
    pub events: Vec<String>,
    /// The key of `X-Vsl-Signature`'s HMAC.
    pub secret: String,
}

impl WebhookConfig {
    /// Whether this webhook subscribed to `kind`.
    pub fn wants(&self, kind: crate::model::EventKind) -> bool {
        self.events.iter().any(|e| e == kind.as_str())
    }
}

/// The review of destinations: off unless asked (an appliance sends nothing out by itself).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewConfig {
    pub enabled: bool,
    /// Files of hosts or URLs, one a line (`#` comments, hosts-file lines `0.0.0.0 host`).
    pub blocklists: Vec<PathBuf>,
    /// Fetch each destination (GET, 5 s, 1 MiB, 5 redirects).
    pub fetch: bool,
    /// Let the fetch reach private, loopback and link-local addresses.
    pub allow_private: bool,
    /// A Chromium for screenshots; empty: none.
    pub browser: String,
    pub scorer: ScorerConfig,
    pub flag_threshold: f64,
    pub block_threshold: f64,
    /// Reviews run at once.
    pub concurrency: usize,
}

/// An OpenAI-compatible chat-completions endpoint that scores a page for spam.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScorerConfig {
    /// `…/v1/chat/completions`; empty: no scorer.
    pub url: String,
    pub model: String,
    pub api_key: String,
}

/// What links do where they do not say.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinksConfig {
    /// Visitors inside an app's own browser (WeChat, QQ, …): `direct` or `interstitial`.
    pub in_app: crate::model::InApp,
}

/// The web pages.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiConfig {
    /// A page session ends after this long without a request.
    pub session_ttl: Span,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// The public prefix of short URLs. Empty in the file means "derived from `listen`", and
    /// [`Config::derive_base_url`] fills it in (again with the bound address at start-up).
    pub base_url: String,
    /// True when `base_url` was derived from the listen address rather than configured.
    #[serde(skip)]
    pub base_url_derived: bool,
    pub redirect_status: u16,
    pub trust_proxy_headers: bool,
    /// The proxies whose forwarding headers are believed (addresses and CIDR blocks): the
    /// client is the rightmost address of the chain that is not one of them.
    pub trusted_proxies: TrustedProxies,
    /// The one header the trusted proxy sets with the client's address; the others are
    /// ignored (a client can write any of them, and a proxy overwrites only its own).
    pub client_ip_header: ClientIpHeader,
    /// A client must send its request head within this time.
    pub header_timeout: Span,
    /// Largest request head; larger is answered 431.
    pub max_header_bytes: usize,
    /// Connections served at once.
    pub max_connections: usize,
    /// Where browsers asking for an unknown code are sent (302); empty: the 404 page.
    pub not_found_url: String,
}

impl ServerConfig {
    /// The proxies to believe, when `trust_proxy_headers` is on.
    pub fn proxies(&self) -> Option<&TrustedProxies> {
        self.trust_proxy_headers.then_some(&self.trusted_proxies)
    }
}

/// A configuration error naming its key.
fn fail<T>(key: &str, why: String) -> Result<T, ConfigError> {
    Err(ConfigError(format!("`{key}`: {why}")))
}

/// `server.client_ip_header`: which forwarding header the trusted proxy writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum ClientIpHeader {
    /// `X-Forwarded-For`: the rightmost address that is not a trusted proxy.
    #[default]
    #[serde(rename = "x-forwarded-for")]
    XForwardedFor,
    /// `X-Real-IP`: one address, set (not appended) by the proxy (nginx's `real_ip`).
    #[serde(rename = "x-real-ip")]
    XRealIp,
    /// `Forwarded` (RFC 7239): its `for=` values, read like `X-Forwarded-For`.
    #[serde(rename = "forwarded")]
    Forwarded,
}

/// `server.trusted_proxies`: addresses (`10.0.0.7`) and CIDR blocks (`10.0.0.0/8`, `::1/128`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// Whether `ip` (IPv4-mapped IPv6 read as IPv4) is one of the proxies.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }
}

impl<'de> Deserialize<'de> for TrustedProxies {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries = Vec::<String>::deserialize(d)?;
        entries
            .iter()
            .map(|entry| {
                let entry = entry.trim();
                entry
                    .parse::<ipnet::IpNet>()
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        serde::de::Error::custom(format!(
                            "`{entry}` is not an IP address or CIDR block"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Which store keeps the data: the embedded sled directory, or a PostgreSQL database
    /// shared by several instances.
    pub backend: Backend,
    pub path: PathBuf,
    /// sled's page cache; derived from `memory.budget` unless set.
    #[serde(default)]
    pub cache_capacity_mb: Option<u64>,
    pub durability: Durability,
    /// sled: writes are refused while the data directory's file system has less than this
    /// free (at most a twentieth of it), so that reads go on when the disk fills.
    pub min_free_mb: u64,
    pub postgres: PostgresConfig,
}

/// `storage.backend`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    #[default]
    Sled,
    Postgres,
}

/// `[storage.postgres]`, read when `storage.backend = "postgres"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:port/database` (key=value strings work too).
    pub url: String,
    /// Connections each instance keeps open at most.
    pub pool_size: usize,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Entries, each weighing 1; unset, the cache weighs entries in bytes against its share of
    /// `memory.budget`.
    #[serde(default)]
    pub capacity: Option<usize>,
    pub ttl: Span,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodesConfig {
    pub default_length: u8,
    pub blocked_words: Vec<String>,
    pub filter_capacity: u64,
    pub filter_fp_rate: f64,
}

/// How a tier makes its codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TierStrategy {
    /// No pool: codes of this length are only chosen by callers.
    Custom,
    Random,
    Step,
    Permute,
    /// Computed from the URL and a secret (four candidates, then random); no pool.
    Hash,
}

impl TierStrategy {
    /// The generation strategy, if the tier has a pool.
    pub fn generated(self) -> Option<Strategy> {
        match self {
            TierStrategy::Custom => None,
            TierStrategy::Random => Some(Strategy::Random),
            TierStrategy::Step => Some(Strategy::Step),
            TierStrategy::Permute => Some(Strategy::Permute),
            TierStrategy::Hash => None,
        }
    }

    /// Whether the service makes codes of the tier (a pool or the hash), so that a create
    /// may ask for the length without a code.
    pub fn makes_codes(self) -> bool {
        self != TierStrategy::Custom
    }
}

/// One code length's rules (a row of the tiers table in docs/configuration.md).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    pub strategy: TierStrategy,
    /// Codes generated per refill (for `step`, the batch that sets the step width).
    #[serde(default = "default_batch")]
    pub batch: u64,
    /// Refill in the background when fewer codes than this are available.
    #[serde(default = "default_low_water")]
    pub low_water: u64,
    /// Default validity of links of this length.
    pub ttl: Span,
    /// Whether codes of expired or deleted links return to the pool.
    #[serde(default)]
    pub recycle: bool,
    /// How long a recycled code waits in the pool before it is handed out again.
    #[serde(default = "default_cooldown")]
    pub cooldown: Span,
    /// Codes end with a check character (Luhn mod 62) that the length counts:
    /// a mistyped code is refused before any lookup, and custom codes of the length are not
    /// allowed.
    #[serde(default)]
    pub check: bool,
}

impl TierConfig {
    /// Characters of a generated code before its check character.
    pub fn payload_len(&self, length: u8) -> u8 {
        length - u8::from(self.check)
    }
}

fn default_batch() -> u64 {
    1000
}
fn default_low_water() -> u64 {
    100
}
fn default_cooldown() -> Span {
    Span(Some(Duration::from_secs(30 * 86_400)))
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleConfig {
    pub schedule: String,
    pub recycle_after: Span,
}

/// How much of a visitor's address is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpMode {
    Full,
    Truncated,
    None,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisitsConfig {
    pub enabled: bool,
    /// Queue slots; derived from `memory.budget` unless set (then the queue's bytes are that
    /// many slots).
    #[serde(default)]
    pub queue: Option<usize>,
    pub ip: IpMode,
    pub retention: Span,
    pub geo_db: String,
    /// The visit journal's size past which `/metrics` and the log report that the store is
    /// not keeping up (visits are still journaled and kept).
    pub journal_max: ByteSize,
    /// The queue's bounds, derived at load ([`crate::memory::Bounds`]): the recorder is
    /// started with this section alone.
    #[serde(skip)]
    pub bounds: QueueBounds,
}

/// The visit queue's bounds: slots, and bytes (slots and the headers that spill from them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueBounds {
    pub entries: usize,
    pub bytes: usize,
    /// Parsed user agents the writer remembers.
    pub user_agents: usize,
    /// Most enriched visits the writer gathers for one write.
    pub writer_visits: usize,
}

/// What an API key may do (a record of the model: run-time keys and teams use it too).
pub use crate::model::Role;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKey {
    pub key: String,
    pub name: String,
    pub role: Role,
    /// `None`: every space.
    #[serde(default)]
    pub spaces: Option<Vec<String>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    pub anonymous_create: bool,
    pub keys: Vec<ApiKey>,
    /// A signed-in session ends this long after it began, whatever its activity
    /// (`ui.session_ttl` ends an idle one sooner).
    pub session_ttl: Span,
    /// Audit log entries older than this are deleted by the daily job.
    pub audit_retention: Span,
    /// `[[auth.oidc]]`: the OpenID Connect providers people may sign in with; none by default.
    #[serde(default)]
    pub oidc: Vec<OidcConfig>,
}

/// One `[[auth.oidc]]` provider, checked when the configuration loads; the protocol is
/// [`crate::accounts::oidc`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The path segment of `/ui/oidc/{name}` and the login page's button: lowercase letters,
    /// digits, `-` and `_`, unique.
    pub name: String,
    /// The issuer exactly as its discovery document (`{issuer}/.well-known/openid-configuration`)
    /// names it: the ID token's `iss` must equal it.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    /// Space-separated; must include `openid`.
    #[serde(default = "default_oidc_scopes")]
    pub scopes: String,
    /// A group (in `groups_claim`) whose members are admins; none when absent.
    #[serde(default)]
    pub admin_group: Option<String>,
    /// The claim, in the ID token or the userinfo answer, that lists the person's groups.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// `group = "team:role"` (role `owner`, `editor` or `viewer`): memberships set at each
    /// sign-in.
    #[serde(default)]
    pub team_groups: BTreeMap<String, String>,
    /// Whether a first sign-in with an email nobody has creates a user (else it is refused).
    #[serde(default = "default_true")]
    pub auto_create: bool,
    /// A PEM file of root certificates to trust for this issuer beside the built-in ones
    /// (webpki roots, not the system's): for a provider behind a company's own CA. Empty: none.
    #[serde(default)]
    pub ca_file: String,
}

fn default_oidc_scopes() -> String {
    "openid email profile".into()
}

fn default_groups_claim() -> String {
    "groups".into()
}

fn default_true() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub max_url_len: usize,
    /// Per-address limits and counts key an IPv6 client by this prefix (an IPv4 one by its
    /// address): one home line holds a whole /64, and a limit per full address would be
    /// none.
    pub ipv6_prefix: u8,
    pub max_body_bytes: usize,
    pub rates: RatesConfig,
    /// Destination hosts refused (with their subdomains).
    pub blocked_hosts: Vec<String>,
    /// A file of more blocked hosts, one a line, re-read when it changes; empty = none.
    pub blocked_hosts_file: String,
}

impl LimitsConfig {
    /// The blocked-hosts file, if one is configured.
    pub fn blocked_hosts_path(&self) -> Option<&Path> {
        let path = self.blocked_hosts_file.trim();
        (!path.is_empty()).then(|| Path::new(path))
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatesConfig {
    pub redirect_per_ip: Rate,
    pub not_found_per_ip: Rate,
    pub create_per_key: Rate,
    /// Anonymous creates, per client address.
    pub create_per_ip: Rate,
    /// Sign-in attempts on `/ui/login`, per client address.
    pub login_per_ip: Rate,
    /// Failed credentials (API keys, YOURLS signatures and passwords, sign-in keys), per
    /// client address; past it even a right one is refused until the quota refills.
    pub auth_per_ip: Rate,
    /// Failed sign-ins per account and address (ten times as many per account from all
    /// addresses); past either, that sign-in answers 429 whether or not the password is right.
    pub auth_per_account: Rate,
    /// Link password attempts (form or `X-Link-Password`), right or wrong, per client
    /// address.
    pub password_per_ip: Rate,
    /// Submissions of links' forms before the destination, valid or not, per client address.
    pub form_per_ip: Rate,
}

impl RatesConfig {
    /// How many limits are on (each remembers its own keys).
    pub fn enabled(&self) -> usize {
        [
            self.redirect_per_ip,
            self.not_found_per_ip,
            self.create_per_key,
            self.create_per_ip,
            self.login_per_ip,
            self.auth_per_ip,
            self.auth_per_account,
            self.auth_per_account,
            self.password_per_ip,
            self.form_per_ip,
        ]
        .iter()
        .filter(|rate| **rate != Rate::Off)
        .count()
    }
}

/// The YOURLS-compatible API (`/yourls-api.php`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct YourlsConfig {
    /// A URL that already has a link answers `error:url` with that link (YOURLS's default);
    /// false creates another link.
    pub unique_urls: bool,
    /// How far a `timestamp` may be from now for a time-limited signature.
    pub signature_window: Span,
    /// YOURLS-style logins: each pair acts with the role and spaces of its API key.
    pub users: Vec<YourlsUser>,
}

/// A `username`/`password` pair accepted by `/yourls-api.php`, standing for an API key.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct YourlsUser {
    pub username: String,
    pub password: String,
    /// One of the configured API keys (or the generated admin key).
    pub key: String,
}

/// A duration written `30s`, `5m`, `12h`, `7d`, `365d`, or `permanent` (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(pub Option<Duration>);

impl Span {
    /// The duration in milliseconds, `None` when permanent.
    pub fn millis(self) -> Option<u64> {
        self.0
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl std::str::FromStr for Span {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("permanent") {
            return Ok(Span(None));
        }
        humantime::parse_duration(s)
            .map(|d| Span(Some(d)))
            .map_err(|e| {
                format!("`{s}` is not a duration like 30s, 5m, 12h, 7d or permanent ({e})")
            })
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A size in bytes, written `256MB`, `1GB`, `300000KB`, `512MiB` (KB, MB, GB and KiB, MiB, GiB
/// are all powers of 1024) or a bare number of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let bad = || format!("`{text}` is not a size like 256MB, 1GB, 512MiB or 300000KB");
        let digits = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(digits);
        let number: u64 = number.parse().map_err(|_| bad())?;
        let shift = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "kb" | "kib" | "k" => 10,
            "mb" | "mib" | "m" => 20,
            "gb" | "gib" | "g" => 30,
            _ => return Err(bad()),
        };
        number
            .checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| format!("`{text}` is too large"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size like 256MB, 1GB, 512MiB or a number of bytes")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<ByteSize, E> {
                u64::try_from(n)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("`{n}` is not a size")))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ByteSize, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A rate limit written `N/s`, `N/m` or `N/h` (a burst of N), or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    Off,
    PerSecond(u32),
    PerMinute(u32),
    PerHour(u32),
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let bad = || {
            serde::de::Error::custom(format!(
                "`{text}` is not a rate like 100/s, 600/m, 1000/h or off (N from 1 to 10^9)"
            ))
        };
        if text.trim().eq_ignore_ascii_case("off") {
            return Ok(Rate::Off);
        }
        let (n, unit) = text.trim().split_once('/').ok_or_else(bad)?;
        // At most 10^9 per period, so that the refill interval is at least a nanosecond.
        let n: u32 = n
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=1_000_000_000).contains(n))
            .ok_or_else(bad)?;
        match unit.trim() {
            "s" => Ok(Rate::PerSecond(n)),
            "m" => Ok(Rate::PerMinute(n)),
            "h" => Ok(Rate::PerHour(n)),
            _ => Err(bad()),
        }
    }
}

fn tiers_by_length<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u8, TierConfig>, D::Error> {
    let raw = BTreeMap::<String, TierConfig>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| {
            let length: u8 = k
                .parse()
                .ok()
                .filter(|l| (1..=MAX_CODE_LEN as u8).contains(l))
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "tier `{k}` is not a code length between 1 and {MAX_CODE_LEN}"
                    ))
                })?;
            Ok((length, v))
        })
        .collect()
}

impl Config {
    /// Defaults < `file` < `VSL_*` environment, validated.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        check_environment()?;
        Self::from_figment(Self::with_file(file)?.merge(Env::prefixed("VSL_").split("__")))
    }

    /// Defaults < `file` < the `VSL_*` variables given, read as [`Config::load`] reads the
    /// environment but without reading this process's (an embedding program, in-process
    /// tests running several servers at once).
    pub fn load_with_env(file: Option<&Path>, vars: &[(&str, &str)]) -> Result<Self, ConfigError> {
        let mut figment = Self::with_file(file)?;
        for (key, value) in vars {
            check_env_value(key, value)?;
            let path = key
                .strip_prefix("VSL_")
                .ok_or_else(|| ConfigError(format!("`{key}`: not a VSL_ variable")))?
                .to_ascii_lowercase()
                .replace("__", ".");
            let value: figment::value::Value = match value.parse() {
                Ok(value) => value,
                Err(never) => match never {},
            };
            figment = figment.merge(figment::providers::Serialized::default(&path, value));
        }
        Self::from_figment(figment)
    }

    /// The defaults overlaid with a configuration file.
    fn with_file(file: Option<&Path>) -> Result<Figment, ConfigError> {
        let figment = Figment::from(Toml::string(DEFAULT_TOML));
        match file {
            None => Ok(figment),
            Some(path) if path.is_file() => Ok(figment.merge(Toml::file(path))),
            Some(path) => Err(ConfigError(format!(
                "--config {}: no such file",
                path.display()
            ))),
        }
    }

    /// The defaults overlaid with a TOML string (tests and tools).
    pub fn from_toml(overlay: &str) -> Result<Self, ConfigError> {
        Self::from_figment(Figment::from(Toml::string(DEFAULT_TOML)).merge(Toml::string(overlay)))
    }

    /// Extracts and validates.
    pub fn from_figment(figment: Figment) -> Result<Self, ConfigError> {
        let mut config: Config = figment.extract().map_err(|e| ConfigError(describe(e)))?;
        for hook in &mut config.webhooks {
            if hook.name.trim().is_empty() {
                hook.name = hook.url.clone();
            }
        }
        if config.server.base_url.trim().is_empty() {
            config.derive_base_url(config.server.listen);
        }
        config.validate()?;
        let bounds = crate::memory::Bounds::derive(&config).map_err(|e| ConfigError(e.0))?;
        config.visits.bounds = QueueBounds {
            entries: bounds.visit_queue_entries,
            bytes: usize::try_from(bounds.visit_queue).unwrap_or(usize::MAX),
            // The writer parses every visit; the rules only those of links with device rules.
            user_agents: bounds.user_agents / 5 * 4,
            writer_visits: bounds.writer_visits,
        };
        config.memory.bounds = bounds;
        Ok(config)
    }

    /// Sets a `base_url` that was not configured from the address the server listens on
    /// (`http://<addr>`; the loopback address of the same family for `0.0.0.0` or `::`, which no
    /// client can reach); a configured one is kept. Called at load time with `listen` and again
    /// at start-up with the bound address (they differ when the port is 0).
    pub fn derive_base_url(&mut self, addr: SocketAddr) {
        if self.server.base_url_derived || self.server.base_url.trim().is_empty() {
            let mut addr = addr;
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr.ip() {
                    std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            let scheme = if self.tls.on() { "https" } else { "http" };
            self.server.base_url = format!("{scheme}://{addr}");
            self.server.base_url_derived = true;
        }
    }

    /// The tier of a length, if configured.
    pub fn tier(&self, length: u8) -> Option<&TierConfig> {
        self.tiers.get(&length)
    }

    /// Lengths with a pool, in order.
    pub fn pooled_lengths(&self) -> impl Iterator<Item = (u8, Strategy, &TierConfig)> {
        self.tiers
            .iter()
            .filter_map(|(l, t)| t.strategy.generated().map(|s| (*l, s, t)))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_webhooks()?;
        self.validate_server()?;
        self.validate_review()?;
        self.validate_geo()?;
        self.validate_connections()?;
        self.validate_storage()?;
        self.validate_codes()?;
        self.validate_limits()?;
        self.validate_oidc()?;
        self.validate_backup()?;
        self.validate_plans()?;
        self.validate_tls()?;
        Ok(())
    }

    /// Checks `[tls]`: the keys each mode needs, addresses and URLs that parse, and an ACME
    /// default domain that is a name an authority can certify.
    fn validate_tls(&self) -> Result<(), ConfigError> {
        let tls = &self.tls;
        let http_listen = tls.http_listen.trim();
        if !http_listen.is_empty() {
            if http_listen.parse::<SocketAddr>().is_err() {
                return fail(
                    "tls.http_listen",
                    format!("`{http_listen}` is not an address and port like 0.0.0.0:80"),
                );
            }
            if !tls.on() {
                return fail(
                    "tls.http_listen",
                    "only with tls.mode = \"files\" or \"acme\" (it redirects to HTTPS)".into(),
                );
            }
        }
        if tls.hsts && !tls.on() {
            return fail(
                "tls.hsts",
                "only with tls.mode = \"files\" or \"acme\" (it is sent over HTTPS)".into(),
            );
        }
        match tls.mode {
            TlsMode::Off => {}
            TlsMode::Files => {
                for (key, path) in [("tls.cert", &tls.cert), ("tls.key", &tls.key)] {
                    if path.as_os_str().is_empty() {
                        return fail(
                            key,
                            "required with tls.mode = \"files\" (a PEM file)".into(),
                        );
                    }
                }
            }
            TlsMode::Acme => {
                match url::Url::parse(tls.directory.trim()) {
                    Ok(u) if matches!(u.scheme(), "https" | "http") && u.host().is_some() => {}
                    _ => {
                        return fail(
                            "tls.directory",
                            format!("`{}` is not an ACME directory URL", tls.directory),
                        )
                    }
                }
                let email = tls.email.trim();
                if !email.is_empty()
                    && (email.contains(char::is_whitespace)
                        || email.split('@').count() != 2
                        || email.starts_with('@')
                        || email.ends_with('@'))
                {
                    return fail("tls.email", format!("`{email}` is not an email address"));
                }
                if tls.challenge == AcmeChallenge::Http01 && http_listen.is_empty() {
                    return fail(
                        "tls.http_listen",
                        "required with tls.challenge = \"http-01\" (the authority asks on port 80)"
                            .into(),
                    );
                }
                match url::Url::parse(&self.server.base_url)
                    .ok()
                    .and_then(|u| u.host().map(|h| h.to_owned()))
                {
                    Some(url::Host::Domain(_)) => {}
                    _ => {
                        return fail(
                            "server.base_url",
                            format!(
                                "`{}`: with tls.mode = \"acme\" its host must be a DNS name \
                                 (the default domain a certificate is ordered for)",
                                self.server.base_url
                            ),
                        )
                    }
                }
            }
        }
        Ok(())
    }

    /// The default domain: `server.base_url`'s host, lowercased (what HTTPS holds a
    /// certificate for first).
    pub fn default_host(&self) -> String {
        url::Url::parse(&self.server.base_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
            .unwrap_or_default()
    }

    /// Checks each `[plans.NAME]`: its name (a team names it), known features, limits that
    /// are not negative, lengths that are configured tiers, a `max_ttl` that is a duration.
    fn validate_plans(&self) -> Result<(), ConfigError> {
        for (name, plan) in &self.plans {
            let key = |field: &str| format!("plans.{name}.{field}");
            let name_ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
            if !name_ok {
                return fail(
                    &format!("plans.{name}"),
                    "a plan's name is 1 to 64 letters, digits, `_`, `-` and `.`".into(),
                );
            }
            for (i, feature) in plan.features.iter().flatten().enumerate() {
                if !PLAN_FEATURES.contains(&feature.as_str()) {
                    return fail(
                        &key(&format!("features[{i}]")),
                        format!(
                            "unknown feature \"{feature}\"; features are {}",
                            PLAN_FEATURES.join(", ")
                        ),
                    );
                }
            }
            let limits = [
                ("links_per_month", plan.links_per_month),
                ("active_links", plan.active_links),
                ("visits_per_month", plan.visits_per_month),
                ("in_app_days", plan.in_app_days),
            ];
            for (field, value) in limits {
                if let Some(v) = value.filter(|v| *v < 0) {
                    return fail(&key(field), format!("must be 0 or more, not {v}"));
                }
            }
            if plan
                .max_ttl
                .is_some_and(|t| t.0.is_none_or(|d| d.is_zero()))
            {
                return fail(
                    &key("max_ttl"),
                    "must be a positive duration (leave it out for no limit)".into(),
                );
            }
            for (i, length) in plan.lengths.iter().flatten().enumerate() {
                let known = u8::try_from(*length)
                    .ok()
                    .and_then(|l| self.tier(l))
                    .is_some_and(|t| t.strategy.makes_codes());
                if !known {
                    return fail(
                        &key(&format!("lengths[{i}]")),
                        format!("{length} is not a configured tier that makes codes"),
                    );
                }
            }
        }
        Ok(())
    }

    /// Checks the scheduled backups: a directory when they are on, something to keep.
    fn validate_backup(&self) -> Result<(), ConfigError> {
        if self.backup.every.0.is_some() && self.backup.dir.as_os_str().is_empty() {
            return fail(
                "backup.dir",
                "must be set when backup.every is (the directory the backups go to)".into(),
            );
        }
        if self.backup.keep == 0 {
            return fail("backup.keep", "must be at least 1".into());
        }
        Ok(())
    }

    /// Checks the webhooks: URLs, events, secrets, names.
    fn validate_webhooks(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::HashSet::new();
        for (i, hook) in self.webhooks.iter().enumerate() {
            let key = |field: &str| format!("webhooks[{i}].{field}");
            match url::Url::parse(&hook.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
                _ => return fail(&key("url"), format!("`{}` is not an http(s) URL", hook.url)),
            }
            if hook.events.is_empty() {
                return fail(&key("events"), "name at least one event".into());
            }
            if let Some(bad) = hook
                .events
                .iter()
                .find(|e| crate::model::EventKind::parse(e).is_none())
            {
                return fail(
                    &key("events"),
                    format!(
                        "`{bad}` is not one of link.created, link.updated, link.deleted, \
                         link.ended, visit, lead, review"
                    ),
                );
            }
            if hook.secret.len() < 16 {
                return fail(&key("secret"), "at least 16 characters".into());
            }
            if !names.insert(hook.name.as_str()) {
                return fail(&key("name"), format!("`{}` names two webhooks", hook.name));
            }
        }
        Ok(())
    }

    /// Checks the server and its pages: redirect status, session lifetime, base URL, where unknown codes go.
    fn validate_server(&self) -> Result<(), ConfigError> {
        if ![301, 302, 307, 308].contains(&self.server.redirect_status) {
            return fail(
                "server.redirect_status",
                format!(
                    "{} is not one of 301, 302, 307, 308",
                    self.server.redirect_status
                ),
            );
        }
        if self.ui.session_ttl.millis().is_none_or(|ms| ms < 60_000) {
            return fail(
                "ui.session_ttl",
                "must be a duration of at least 1m (sessions cannot be permanent)".into(),
            );
        }
        if self.auth.session_ttl.millis().is_none_or(|ms| ms < 60_000) {
            return fail(
                "auth.session_ttl",
                "must be a duration of at least 1m (sessions cannot be permanent)".into(),
            );
        }
        if self
            .auth
            .audit_retention
            .millis()
            .is_some_and(|ms| ms < 86_400_000)
        {
            return fail(
                "auth.audit_retention",
                "must be at least 1d, or `permanent` to keep every entry".into(),
            );
        }
        match url::Url::parse(&self.server.base_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => {
                return fail(
                    "server.base_url",
                    format!("`{}` is not an http(s) URL", self.server.base_url),
                )
            }
        }
        let not_found = self.server.not_found_url.trim();
        if !not_found.is_empty() {
            match url::Url::parse(not_found) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => {
                    return fail(
                        "server.not_found_url",
                        format!("`{not_found}` is not an http(s) URL"),
                    )
                }
            }
        }
        Ok(())
    }

    /// Checks that a geolocation database is asked for only where the binary can read one.
    fn validate_geo(&self) -> Result<(), ConfigError> {
        #[cfg(not(feature = "geo"))]
        if !self.visits.geo_db.trim().is_empty() {
            return fail("visits.geo_db", crate::visits::geo::WITHOUT_GEO.into());
        }
        Ok(())
    }

    /// Checks the review of destinations: thresholds, workers, the scorer.
    fn validate_review(&self) -> Result<(), ConfigError> {
        let r = &self.review;
        #[cfg(not(feature = "review"))]
        if r.enabled {
            return fail(
                "review.enabled",
                "this binary was built without the `review` feature (the default): it has no \
                 fetch, screenshot or scorer"
                    .into(),
            );
        }
        if !(0.0..=1.0).contains(&r.flag_threshold)
            || !(0.0..=1.0).contains(&r.block_threshold)
            || r.flag_threshold > r.block_threshold
        {
            return fail(
                "review.flag_threshold",
                "the thresholds are between 0 and 1, flag_threshold ≤ block_threshold".into(),
            );
        }
        if r.concurrency == 0 || r.concurrency > 64 {
            return fail("review.concurrency", "must be between 1 and 64".into());
        }
        let scorer = r.scorer.url.trim();
        if !scorer.is_empty() {
            match url::Url::parse(scorer) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => {
                    return fail(
                        "review.scorer.url",
                        format!("`{scorer}` is not an http(s) URL"),
                    )
                }
            }
        }
        Ok(())
    }

    /// Checks the accept loop: header timeout and size, the connection cap.
    fn validate_connections(&self) -> Result<(), ConfigError> {
        if self.server.header_timeout.0.is_none_or(|d| d.is_zero()) {
            return fail(
                "server.header_timeout",
                "must be a duration, like 10s".into(),
            );
        }
        if self.server.max_header_bytes < 8192 {
            return fail("server.max_header_bytes", "must be at least 8192".into());
        }
        if self.server.max_connections == 0 {
            return fail("server.max_connections", "must be at least 1".into());
        }
        Ok(())
    }

    /// Checks the storage backend.
    fn validate_storage(&self) -> Result<(), ConfigError> {
        if self.storage.backend == Backend::Postgres {
            #[cfg(not(feature = "postgres"))]
            return fail(
                "storage.backend",
                "\"postgres\" needs a binary built with the `postgres` feature (the default); \
                 this one has the embedded store only"
                    .into(),
            );
            #[cfg(feature = "postgres")]
            {
                if self.storage.postgres.url.trim().is_empty() {
                    return fail(
                        "storage.postgres.url",
                        "must be set when storage.backend is \"postgres\" (postgres://user:password@host:port/database)".into(),
                    );
                }
                if let Err(e) = self.storage.postgres.url.parse::<tokio_postgres::Config>() {
                    return fail(
                        "storage.postgres.url",
                        format!("is not a PostgreSQL connection URL: {e}"),
                    );
                }
                if self.storage.postgres.pool_size == 0 || self.storage.postgres.pool_size > 1000 {
                    return fail(
                        "storage.postgres.pool_size",
                        "must be between 1 and 1000".into(),
                    );
                }
            }
        }
        Ok(())
    }

    /// Checks the redirect cache, the code filter, the tiers and the default length.
    fn validate_codes(&self) -> Result<(), ConfigError> {
        if self.cache.ttl.0.is_none() {
            return fail("cache.ttl", "must be a duration, not permanent".into());
        }
        if !(self.codes.filter_fp_rate > 0.0 && self.codes.filter_fp_rate < 0.5) {
            return fail("codes.filter_fp_rate", "must be between 0 and 0.5".into());
        }
        for (length, tier) in &self.tiers {
            let key = |field: &str| format!("tiers.{length}.{field}");
            if tier.check && tier.strategy == TierStrategy::Custom {
                return fail(
                    &key("check"),
                    "a tier of custom codes has no generated codes to check (custom codes of a \
                     check tier's length are refused)"
                        .into(),
                );
            }
            if tier.check && *length < 2 {
                return fail(
                    &key("check"),
                    "a code with a check character has at least 2 characters".into(),
                );
            }
            let payload = tier.payload_len(*length);
            if tier.strategy == TierStrategy::Hash
                && usize::from(payload) != crate::codes::hash::CANDIDATE_LEN
            {
                return fail(
                    &key("strategy"),
                    format!("hash codes have 6 characters, 7 with `check = true`; not {length}"),
                );
            }
            if tier.strategy.generated().is_some() {
                if payload > MAX_GENERATED_LEN || Space::for_length(payload).is_none() {
                    return fail(
                        &key("strategy"),
                        format!("generated codes go up to length {MAX_GENERATED_LEN}"),
                    );
                }
                if tier.batch == 0 || tier.batch > 1_000_000 {
                    return fail(&key("batch"), "must be between 1 and 1000000".into());
                }
            }
            if tier.recycle && tier.cooldown.0.is_none() {
                return fail(
                    &key("cooldown"),
                    "must be a duration when recycle is on".into(),
                );
            }
        }
        match self.tier(self.codes.default_length) {
            Some(t) if t.strategy.makes_codes() => {}
            _ => {
                return fail(
                    "codes.default_length",
                    format!("{} is not a length with a pool", self.codes.default_length),
                )
            }
        }
        Ok(())
    }

    /// Checks the lifecycle schedule, queues, the memory budget, keys, limits and the YOURLS users.
    fn validate_limits(&self) -> Result<(), ConfigError> {
        if self.lifecycle.recycle_after.0.is_none() {
            return fail("lifecycle.recycle_after", "must be a duration".into());
        }
        if self.lifecycle.schedule.split_whitespace().count() != 6 {
            return fail(
                "lifecycle.schedule",
                format!(
                    "`{}` is not a 6-field cron string with seconds, like `0 0 3 * * *`",
                    self.lifecycle.schedule
                ),
            );
        }
        if self.visits.queue == Some(0) {
            return fail("visits.queue", "must be at least 1".into());
        }
        if self.cache.capacity == Some(0) {
            return fail("cache.capacity", "must be at least 1".into());
        }
        if self.memory.budget.0 < crate::memory::MIN_BUDGET {
            return fail(
                "memory.budget",
                format!("must be at least 128MB, not {} bytes", self.memory.budget.0),
            );
        }
        for (i, key) in self.auth.keys.iter().enumerate() {
            if key.key.len() < 8 {
                return fail(
                    &format!("auth.keys[{i}].key"),
                    "must be at least 8 characters".into(),
                );
            }
        }
        if self.limits.max_url_len < 16 {
            return fail("limits.max_url_len", "must be at least 16".into());
        }
        if !(16..=128).contains(&self.limits.ipv6_prefix) {
            return fail(
                "limits.ipv6_prefix",
                format!(
                    "must be a prefix length from 16 to 128, not {}",
                    self.limits.ipv6_prefix
                ),
            );
        }
        if self.yourls.signature_window.0.is_none() {
            return fail(
                "yourls.signature_window",
                "must be a duration; a signed timestamp cannot be valid forever".into(),
            );
        }
        for (i, user) in self.yourls.users.iter().enumerate() {
            if user.username.is_empty() || user.password.is_empty() {
                return fail(
                    &format!("yourls.users[{i}]"),
                    "username and password must not be empty".into(),
                );
            }
        }
        for (i, host) in self.limits.blocked_hosts.iter().enumerate() {
            if crate::blocklist::normalise(host).is_none() {
                return fail(
                    &format!("limits.blocked_hosts[{i}]"),
                    format!("`{host}` is not a host name or address"),
                );
            }
        }
        Ok(())
    }

    /// Checks the OpenID Connect providers: names, issuers, client credentials, scopes, the
    /// team groups, the extra CA file.
    fn validate_oidc(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::HashSet::new();
        for (i, p) in self.auth.oidc.iter().enumerate() {
            let key = |field: &str| format!("auth.oidc[{i}].{field}");
            let url_safe = |s: &str| {
                s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            };
            if p.name.is_empty() || p.name.len() > 32 || !url_safe(&p.name) {
                return fail(
                    &key("name"),
                    format!(
                        "`{}` must be 1 to 32 lowercase letters, digits, `-` or `_` (it is a path \
                         segment of /ui/oidc/{{name}})",
                        p.name
                    ),
                );
            }
            if !names.insert(p.name.as_str()) {
                return fail(&key("name"), format!("`{}` names two providers", p.name));
            }
            if let Err(why) = check_issuer(&p.issuer) {
                return fail(&key("issuer"), why);
            }
            if p.client_id.trim().is_empty() {
                return fail(&key("client_id"), "must not be empty".into());
            }
            if p.client_secret.is_empty() {
                return fail(
                    &key("client_secret"),
                    "must not be empty (vshortlink is a confidential client)".into(),
                );
            }
            if !p.scopes.split_whitespace().any(|s| s == "openid") {
                return fail(
                    &key("scopes"),
                    format!("`{}` must include `openid`", p.scopes),
                );
            }
            if p.groups_claim.trim().is_empty() {
                return fail(&key("groups_claim"), "must not be empty".into());
            }
            if p.admin_group
                .as_deref()
                .is_some_and(|g| g.trim().is_empty())
            {
                return fail(
                    &key("admin_group"),
                    "must not be empty (leave it out for none)".into(),
                );
            }
            for (group, grant) in &p.team_groups {
                if let Err(why) = crate::accounts::oidc::parse_team_grant(grant) {
                    return fail(&key(&format!("team_groups.{group}")), why);
                }
            }
            if !p.ca_file.trim().is_empty() {
                if let Err(why) = crate::accounts::oidc::read_ca_file(Path::new(p.ca_file.trim())) {
                    return fail(&key("ca_file"), why);
                }
            }
        }
        Ok(())
    }
}

/// An issuer must be an `https` URL, or `http` on a loopback host only: over plain HTTP the
/// client secret and the code cross the network in the clear, and whoever is on the path can
/// swap the discovery document's keys and sign in as anyone. A provider on the same machine
/// (and the tests' provider) is out of reach of the path.
fn check_issuer(issuer: &str) -> Result<(), String> {
    let url = url::Url::parse(issuer).map_err(|_| format!("`{issuer}` is not an http(s) URL"))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => return Err(format!("`{issuer}` is not an http(s) URL")),
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(format!(
                "`{issuer}`: plain http is allowed for a loopback host only; use https"
            ))
        }
        _ => return Err(format!("`{issuer}` is not an http(s) URL")),
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{issuer}` must have no query or fragment"));
    }
    Ok(())
}

/// Checks every `VSL_*` variable's value the way figment's environment provider will parse it.
/// figment 0.10.19 panics on some values (a backslash escape after a non-ASCII character in a
/// quoted string: it slices its input at a character index, found by `fuzz/`'s `config`
/// target); this turns that into an error naming the variable.
pub fn check_environment() -> Result<(), ConfigError> {
    for (key, value) in std::env::vars_os() {
        let (Some(key), Some(value)) = (key.to_str(), value.to_str()) else {
            continue;
        };
        if key.starts_with("VSL_") {
            check_env_value(key, value)?;
        }
    }
    Ok(())
}

/// One `VSL_*` value (see [`check_environment`]).
pub fn check_env_value(key: &str, value: &str) -> Result<(), ConfigError> {
    // Silence the default hook's message for this one expected panic.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let parsed = std::panic::catch_unwind(|| value.parse::<figment::value::Value>().is_ok());
    std::panic::set_hook(hook);
    match parsed {
        Ok(_) => Ok(()),
        Err(_) => Err(ConfigError(format!(
            "`{key}`: the value cannot be parsed (a backslash escape after a non-ASCII character in a quoted string?)"
        ))),
    }
}

/// Figment's errors already name the key; keep them on one line.
fn describe(error: figment::Error) -> String {
    error
        .into_iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("permanent"),
            Some(d) => write!(f, "{}", humantime::format_duration(d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_defaults_load() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server.redirect_status, 302);
        assert_eq!(c.tier(4).unwrap().strategy, TierStrategy::Step);
        assert_eq!(c.tier(6).unwrap().ttl.millis(), Some(7 * 86_400_000));
        assert_eq!(c.tier(4).unwrap().ttl, Span(None));
        assert!(c.tier(5).unwrap().recycle);
        assert!(!c.tier(6).unwrap().recycle);
        assert_eq!(c.storage.durability, Durability::Process);
        assert_eq!(
            c.pooled_lengths().map(|(l, ..)| l).collect::<Vec<_>>(),
            [4, 5, 6]
        );
    }

    #[test]
    fn overlay_changes_only_given_keys() {
        let c = Config::from_toml("[tiers.6]\nstrategy = \"permute\"\nttl = \"30d\"\n").unwrap();
        assert_eq!(c.tier(6).unwrap().strategy, TierStrategy::Permute);
        assert_eq!(c.tier(6).unwrap().batch, 1000);
        assert_eq!(c.server.redirect_status, 302);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[server]\nredirect_status = 200", "server.redirect_status"),
            ("[storage]\ndurability = \"disk\"", "durability"),
            ("[cache]\nttl = \"soon\"", "ttl"),
            ("[tiers.6]\nbatch = 0", "tiers.6.batch"),
            ("[tiers.x]\nstrategy = \"random\"\nttl = \"1d\"", "tier `x`"),
            ("[server]\nlisen = \"1.2.3.4:5\"", "lisen"),
            (
                "[lifecycle]\nschedule = \"0 3 * * *\"",
                "lifecycle.schedule",
            ),
            (
                "[limits.rates]\nredirect_per_ip = \"fast\"",
                "redirect_per_ip",
            ),
            ("[limits.rates]\ncreate_per_ip = \"5/d\"", "create_per_ip"),
            (
                "[limits]\nblocked_hosts = [\"ok.example\", \"not a host\"]",
                "limits.blocked_hosts[1]",
            ),
            ("[server]\nheader_timeout = \"0s\"", "server.header_timeout"),
            (
                "[server]\nmax_header_bytes = 100",
                "server.max_header_bytes",
            ),
            ("[server]\nmax_connections = 0", "server.max_connections"),
            ("[memory]\nbudget = \"63MB\"", "memory.budget"),
            ("[memory]\nbudget = \"lots\"", "budget"),
            ("[memory]\nbudget = \"12TB\"", "budget"),
            ("[memory]\nbudget = -5", "budget"),
            ("[visits]\nqueue = 0", "visits.queue"),
            (
                "[plans.free]\nfeatures = [\"password\", \"rules\", \"foo\"]",
                "plans.free.features[2]`: unknown feature \"foo\"",
            ),
            (
                "[plans.free]\nlinks_per_month = -1",
                "plans.free.links_per_month",
            ),
            ("[plans.free]\nlengths = [6, 9]", "plans.free.lengths[1]"),
            (
                "[plans.free]\nmax_ttl = \"permanent\"",
                "plans.free.max_ttl",
            ),
            ("[plans.free]\nlinks_per_mnth = 3", "links_per_mnth"),
            ("[tls]\nmode = \"on\"", "mode"),
            ("[tls]\nmode = \"files\"", "tls.cert"),
            ("[tls]\nmode = \"files\"\ncert = \"c.pem\"", "tls.key"),
            ("[tls]\nhttp_listen = \"0.0.0.0:80\"", "tls.http_listen"),
            (
                "[tls]\nmode = \"files\"\ncert = \"c\"\nkey = \"k\"\nhttp_listen = \"port 80\"",
                "tls.http_listen",
            ),
            ("[tls]\nhsts = true", "tls.hsts"),
            ("[tls]\nhsts = \"yes\"", "hsts"),
            ("[tls]\nmode = \"acme\"\nchallenge = \"dns-01\"", "challenge"),
            (
                "[server]\nbase_url = \"https://go.example\"\n[tls]\nmode = \"acme\"\ndirectory = \"not a url\"",
                "tls.directory",
            ),
            (
                "[server]\nbase_url = \"https://go.example\"\n[tls]\nmode = \"acme\"\nemail = \"nobody\"",
                "tls.email",
            ),
            (
                "[server]\nbase_url = \"https://go.example\"\n[tls]\nmode = \"acme\"\nchallenge = \"http-01\"",
                "tls.http_listen",
            ),
            (
                "[server]\nbase_url = \"https://10.0.0.1\"\n[tls]\nmode = \"acme\"",
                "server.base_url",
            ),
            ("[tls]\nmod = \"acme\"", "mod"),
        ];
        for (toml, key) in cases {
            let err = Config::from_toml(toml).unwrap_err().to_string();
            assert!(err.contains(key), "{toml:?}: {err}");
        }
    }

    #[test]
    fn spans_and_rates_parse() {
        assert_eq!("30s".parse::<Span>().unwrap().millis(), Some(30_000));
        assert_eq!(
            "365d".parse::<Span>().unwrap().millis(),
            Some(365 * 86_400_000)
        );
        assert_eq!("permanent".parse::<Span>().unwrap(), Span(None));
        assert!("-1s".parse::<Span>().is_err());
        let c = Config::from_toml(
            "[limits.rates]\nredirect_per_ip = \"100/s\"\ncreate_per_key = \"60/m\"",
        )
        .unwrap();
        assert_eq!(c.limits.rates.redirect_per_ip, Rate::PerSecond(100));
        assert_eq!(c.limits.rates.create_per_key, Rate::PerMinute(60));
        assert_eq!(c.limits.rates.not_found_per_ip, Rate::PerSecond(10));
        assert_eq!(c.limits.rates.create_per_ip, Rate::PerMinute(20));
        let c = Config::from_toml("[limits.rates]\ncreate_per_ip = \"5/h\"").unwrap();
        assert_eq!(c.limits.rates.create_per_ip, Rate::PerHour(5));
        assert!(Config::from_toml("[limits.rates]\ncreate_per_ip = \"0/s\"").is_err());
    }

    #[test]
    fn sizes_parse_in_powers_of_1024() {
        for (text, bytes) in [
            ("256MB", 256 << 20),
            ("1GB", 1 << 30),
            ("512MiB", 512 << 20),
            ("300000KB", 300_000 << 10),
            ("2 GiB", 2 << 30),
            ("67108864", 64 << 20),
        ] {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in ["", "MB", "1.5GB", "-1MB", "12PB", "99999999999999999999"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad:?}");
        }
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.memory.budget, ByteSize(256 << 20));
        assert_eq!(c.cache.capacity, None, "derived unless set");
        assert_eq!(c.visits.queue, None);
        assert_eq!(c.storage.cache_capacity_mb, None);
        let c = Config::from_toml("[memory]\nbudget = 536870912").unwrap();
        assert_eq!(c.memory.budget, ByteSize(512 << 20));
        let c = Config::load_with_env(None, &[("VSL_MEMORY__BUDGET", "1GB")]).unwrap();
        assert_eq!(c.memory.bounds.budget, 1 << 30);
    }

    /// Found by `fuzz/` (`config` target): figment panicked on this environment value.
    #[test]
    fn an_environment_value_figment_cannot_parse_is_an_error_naming_it() {
        let err = check_env_value("VSL_SERVER__BASE_URL", "\"a\u{48f}\\t\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("VSL_SERVER__BASE_URL"), "{err}");
        assert!(check_env_value("VSL_SERVER__BASE_URL", "\"http://x\\t\"").is_ok());
        assert!(check_env_value("VSL_X", "\"ҏ\"").is_ok());
    }

    #[test]
    fn base_url_is_derived_from_listen_unless_set() {
        let c = Config::from_toml("[server]\nlisten = \"127.0.0.1:18282\"").unwrap();
        assert_eq!(c.server.base_url, "http://127.0.0.1:18282");
        assert!(c.server.base_url_derived);
        let mut c = Config::from_toml(
            "[server]\nlisten = \"127.0.0.1:18282\"\nbase_url = \"https://s.example\"",
        )
        .unwrap();
        assert!(!c.server.base_url_derived);
        c.derive_base_url("127.0.0.1:9".parse().unwrap());
        assert_eq!(c.server.base_url, "https://s.example");
        let mut c = Config::from_toml("[server]\nlisten = \"[::1]:0\"").unwrap();
        c.derive_base_url("[::1]:4321".parse().unwrap());
        assert_eq!(c.server.base_url, "http://[::1]:4321");
        let c = Config::from_toml("[server]\nlisten = \"0.0.0.0:8080\"").unwrap();
        assert_eq!(c.server.base_url, "http://127.0.0.1:8080");
    }
}
