//! vshortlink: a URL shortener in one binary with its storage embedded.
//!
//! A workspace of crates, one a layer, each depending only on those below it (Cargo refuses
//! anything else; docs/architecture.md has the rule each keeps):
//!
//! - `vshortlink-codes` ([`codes`]) and `vshortlink-model` ([`model`]) are pure: the base-62
//!   alphabet, number spaces, words, strategies, the check character and the code filter; the
//!   records and their rules (links, options, visits, pools, reviews, the outbox, time).
//! - `vshortlink-store` ([`store`]) is the storage interface ([`store::Store`], by capability)
//!   and its two backends: the embedded default on sled ([`store::sled::SledStore`]; nothing
//!   else touches sled) and PostgreSQL for several instances ([`store::postgres::PgStore`]).
//! - `vshortlink-services` holds the rules, once: [`config`] and [`memory`] (the layered,
//!   validated configuration and every bound derived from `memory.budget`), [`links`] (the
//!   link service: URL checks, tiers, codes, dedup, the read-through [`links::cache`], the redirect's
//!   decision), [`pools`], [`visits`], [`leads`], [`review`], [`webhooks`], [`backup`], [`jobs`],
//!   [`keys`], [`limits`], [`blocklist`], [`health`], [`metrics`], [`records`], [`qr`],
//!   [`csv_safe`] and [`clock`]. This crate re-exports each under its module name.
//!
//! - `vshortlink-web` holds everything that speaks HTTP, re-exported here under its module
//!   names, in the order a request meets it:
//!
//! - [`http`]: the first stop (`GET /{code}` before the router), the accept loop, `/{code}`
//!   and the pages before the destination, `/api/v1`, `/rest/v3` (Shlink's API) and
//!   `/yourls-api.php` (YOURLS's), over the same services; handlers are thin.
//! - [`ui`]: the web pages, in English and Simplified Chinese, rendered on the server from
//!   embedded templates, working without script.
//! - [`web`]: what [`http`] and [`ui`] share, below both: the state handlers reach, the one
//!   place that maps errors to statuses, the caller and its rights, CSV and QR responses.
//!
//! This crate, the top: [`store::open`] (`[storage]` into a store, the one place above the
//! store that names a backend) and:
//!
//! - [`commands`] (`check`, `create`, `stats`), [`transfer`] (`export` / `import` on a stopped
//!   store; `backup` of a running server, `backup --verify`, `restore`), [`ops`] (the Docker health probe) and [`shutdown`] (signals into a graceful stop).
//!
//! [`build`] wires the services and the router over a store (the server and in-process tests
//! alike); [`run`] opens the store, builds, serves, then drains and flushes.

#![forbid(unsafe_code)]

pub mod commands;
pub mod ops;
pub mod shutdown;
pub mod store;
pub mod transfer;

// The crates below, under the names every layer above uses (`vshortlink::links`, …).
pub use vshortlink_codes as codes;
pub use vshortlink_model as model;
pub use vshortlink_services::{
    accounts, backup, blocklist, clock, config, csv_safe, health, jobs, keys, leads, limits, links,
    memory, metrics, passwords, plans, pools, qr, records, review, tls, visits, webhooks, BoxError,
};
pub use vshortlink_web::{http, ui, web};

use std::sync::Arc;
use std::time::Duration;

use crate::accounts::Accounts;
use crate::blocklist::BlockedHosts;
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::jobs::lifecycle::Lifecycle;
use crate::jobs::Jobs;
use crate::keys::KeyRing;
use crate::limits::RateLimits;
use crate::links::Links;
use crate::metrics::Metrics;
use crate::model::StoreError;
use crate::plans::Plans;
use crate::pools::Pools;
use crate::store::{Durability, Store, StoreChange};
use crate::ui::Ui;
use crate::visits::recorder::{Admission, JournalOptions};
use crate::visits::{Recorder, Statistics};
use crate::web::state::{AppState, Services};

/// Opens the configured store (see [`store::open`]), saying plainly when another process
/// holds a data directory.
pub fn open_store(config: &Config) -> Result<Arc<dyn Store>, BoxError> {
    match store::open(config) {
        Err(StoreError::Locked(path)) => Err(format!(
            "the data directory {path} is in use by a running vshortlink server; stop it first \
             (export, import and check work on a stopped store)"
        )
        .into()),
        other => Ok(other?),
    }
}

/// The whole application, built once from a configuration, a store and a clock: the routes
/// with the redirect fast path in front, the services, and the background work (pool
/// refills, the visit writer, the review workers, the scheduled jobs, the storage watchdog).
/// The server's [`run`] and in-process tests alike build it and end it with
/// [`App::shutdown`] (axum's `app()` pattern), so nothing is wired twice.
pub struct App {
    /// Every route, with its state (tests may call it directly).
    pub router: axum::Router,
    /// What the server serves: the redirect fast path in front of the router.
    pub front: http::front::Front,
    /// What handlers reach; also the parts background work runs on.
    pub state: AppState,
    store: Arc<dyn Store>,
    blocked: Arc<BlockedHosts>,
    jobs: Jobs,
    watchdog: tokio::task::JoinHandle<()>,
    recovered: Arc<tokio::sync::Notify>,
    /// HTTPS, when `tls.mode` is not `off`: what the accept loop serves handshakes with, and
    /// its watcher or orderer.
    pub tls: Option<Arc<tls::Tls>>,
}

/// How [`App::shutdown`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Everything written and the store closed.
    Cleanly,
    /// The store had a storage fault and the disk has room again: the store must be reopened
    /// (the server exits non-zero so that its supervisor starts it afresh).
    ToReopen,
}

impl App {
    /// Resolves once a storage fault has cleared (the disk has room again) and the store must
    /// be reopened; never for a store without faults.
    pub fn recovered(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let recovered = self.recovered.clone();
        async move { recovered.notified().await }
    }

    /// Ends the background work in order once no request is in flight any more: every queued
    /// visit written, the jobs and refills stopped, the store closed.
    pub async fn shutdown(self) -> Result<Stopped, BoxError> {
        let App {
            state,
            store,
            blocked,
            jobs,
            watchdog,
            tls,
            ..
        } = self;
        if let Some(tls) = &tls {
            tls.stop();
        }
        let to_reopen = watchdog.is_finished();
        watchdog.abort();
        state.recorder.shutdown().await;
        // After the visit writer: its last batch's visits are webhook events too.
        state.webhooks.shutdown().await;
        state.backups.stop();
        blocked.stop();
        jobs.stop().await;
        let pools = state.pools.clone();
        let accounts = state.accounts.clone();
        drop(state);
        let closed = tokio::task::spawn_blocking(move || {
            // The audit entries and the keys' last uses waiting in memory.
            accounts.shutdown();
            pools.stop_background();
            store.close()
        })
        .await?;
        match closed {
            Ok(()) if to_reopen => Ok(Stopped::ToReopen),
            Ok(()) => Ok(Stopped::Cleanly),
            Err(e) if to_reopen => {
                // The store's last flush fails with its old error; what was acknowledged was
                // flushed before it was acknowledged.
                tracing::warn!(error = %e, "closing the faulted store failed, as expected");
                Ok(Stopped::ToReopen)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Builds the services over `store` (primes and starts the pools' background refills, loads
/// the key ring and the blocked hosts, starts the visit writer) and the router.
pub async fn build(
    config: Arc<Config>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
) -> Result<App, BoxError> {
    // Every bound, from `memory.budget`: derived here, where the parts are made, and given to
    // each as plain numbers.
    let bounds = memory::Bounds::derive(&config)?;
    bounds.log();
    let core = Core::start(&config, &bounds, &store, &clock).await?;
    // HTTPS (SPEC §26): the certificate files, or those the store holds, read before the
    // first handshake; `server.listen` is the bound address by now.
    let tls = {
        let (config, store, clock) = (config.clone(), store.clone(), clock.clone());
        tokio::task::spawn_blocking(move || {
            tls::Tls::new(&config, store, clock, config.server.listen.port())
        })
        .await??
    };
    let told = Told::start(&config, &bounds, &store, &clock, &core, tls.as_deref()).await?;
    let Core {
        pools,
        accounts,
        blocked,
        links,
        plans,
    } = core;
    let Told {
        recorder,
        limits,
        metrics,
        reviews,
        webhooks,
        leads,
        backups,
    } = told;
    backups.start_schedule(&config.backup, clock.clone());
    if let Some(tls) = &tls {
        // Certificates for every configured domain, kept in step as domains come and go.
        let hosts = tls.hosts().clone();
        links
            .domains()
            .on_change(Box::new(move |list| hosts.replace(list)));
        tls.start();
    }
    let lifecycle = Arc::new(Lifecycle::new(
        store.clone(),
        pools.clone(),
        links.clone(),
        leads.clone(),
        clock.clone(),
        config.clone(),
    ));
    // Page sessions and batch results: in the store when instances share one, else in memory.
    let records = Arc::new(records::RecordCache::for_store(store.clone()));
    // The OpenID providers, once: their discovery waits for the first sign-in, so that an
    // issuer that is down does not stop the start.
    let providers = Arc::new(
        accounts::oidc::Providers::new(&config.auth.oidc, &config.server.base_url)?
            .with_clock(clock.clone()),
    );
    let ui = Arc::new(Ui::new(
        &config,
        &config.server.base_url,
        clock.clone(),
        records,
        providers,
    )?);
    let health = Arc::new(health::Health::new(
        store.clone(),
        pools.clone(),
        recorder.clone(),
        metrics.clone(),
    ));
    let state = AppState::new(Services {
        lifecycle,
        config: config.clone(),
        links,
        leads,
        reviews,
        webhooks,
        pools,
        health,
        stats: Arc::new(Statistics::new(store.clone(), clock)),
        accounts,
        plans,
        backups,
        pages: ui.clone(),
        recorder,
        metrics,
        limits,
    });
    let jobs = Jobs::start(
        &config.lifecycle.schedule,
        state.lifecycle.clone(),
        store.clone(),
    )
    .await?;
    // sled keeps its first I/O error and fails every later write with it: once the disk has
    // room again, the only way back is to reopen the store (see `App::recovered`).
    let recovered = Arc::new(tokio::sync::Notify::new());
    let watchdog = tokio::spawn(storage_watchdog(
        store.clone(),
        config.storage.path.clone(),
        recovered.clone(),
    ));
    let router = http::router(
        state.clone(),
        ui::router(ui::PageState::new(state.clone(), ui)),
    );
    Ok(App {
        front: http::front::Front::new(router.clone(), state.clone()),
        router,
        state,
        store,
        blocked,
        jobs,
        watchdog,
        recovered,
        tls,
    })
}

/// The first part of [`build`]: the pools primed and refilling, the key ring, the blocked
/// hosts and their watcher, and the link service over them.
struct Core {
    pools: Arc<Pools>,
    accounts: Arc<Accounts>,
    blocked: Arc<BlockedHosts>,
    links: Arc<Links>,
    plans: Arc<Plans>,
}

impl Core {
    async fn start(
        config: &Arc<Config>,
        bounds: &memory::Bounds,
        store: &Arc<dyn Store>,
        clock: &Arc<dyn Clock>,
    ) -> Result<Self, BoxError> {
        let pools = Arc::new(Pools::new(store.clone(), clock.clone(), config)?);
        {
            let pools = pools.clone();
            tokio::task::spawn_blocking(move || pools.prime()).await??;
        }
        pools.start_background()?;
        let (keys, generated) = KeyRing::load(&config.auth, &config.storage.path, &**store)?;
        if let Some(key) = generated {
            if key.created {
                tracing::warn!(path = %key.path.display(), "no API key configured: generated an admin key");
            } else {
                tracing::info!(path = %key.path.display(), "no API key configured: using the generated admin key");
            }
        }
        let blocked = Arc::new(BlockedHosts::new(
            &config.limits.blocked_hosts,
            config.limits.blocked_hosts_path(),
        )?);
        blocked.start_watching();
        let links = Arc::new(
            Links::new(
                store.clone(),
                pools.clone(),
                clock.clone(),
                config.clone(),
                bounds.links(),
            )?
            .with_blocklist(blocked.clone()),
        );
        if config
            .tiers
            .values()
            .any(|t| t.strategy == config::TierStrategy::Hash)
        {
            // The `hash` strategy's secret exists from the first start on, like the permute
            // keys.
            let links = links.clone();
            tokio::task::spawn_blocking(move || links.hash_secret()).await??;
        }
        let accounts = {
            let (store, clock, auth) = (store.clone(), clock.clone(), config.auth.clone());
            let checks = links.password_checks();
            let ring = Arc::new(keys);
            Arc::new(
                tokio::task::spawn_blocking(move || {
                    Accounts::open(store, ring, &auth, checks, clock)
                })
                .await??,
            )
        };
        // The teams' plans: told of every accounts directory; with none configured, creates
        // and visits are not counted (no team has limits) and usage is not shown.
        let plans = Arc::new(Plans::new(config, store.clone(), clock.clone()));
        if !config.plans.is_empty() {
            links.use_plans(plans.clone());
            let links = links.clone();
            // Cached in-app decisions were made by the old plans.
            plans.on_change(Box::new(move || links.forget(&StoreChange::All)));
        }
        accounts.use_plans(plans.clone());
        accounts.start_background();
        // Instances sharing one database evict what the others changed, and reload the
        // account records another one wrote.
        if let Some(cluster) = store.cluster() {
            let (links, accounts) = (links.clone(), accounts.clone());
            cluster.watch(Box::new(move |change| {
                links.forget(&change);
                if matches!(change, StoreChange::Accounts | StoreChange::All) {
                    accounts.reload_soon();
                }
            }));
        }
        Ok(Core {
            pools,
            accounts,
            blocked,
            links,
            plans,
        })
    }
}

/// The second part of [`build`]: the services that are told of what happens — the visit
/// recorder, the rate limits and metrics, the review of destinations, the webhooks, the
/// leads — each started and wired to the hooks it listens on.
struct Told {
    recorder: Arc<Recorder>,
    limits: Arc<RateLimits>,
    metrics: Arc<Metrics>,
    reviews: Arc<review::Reviews>,
    webhooks: Arc<webhooks::Webhooks>,
    leads: Arc<leads::Leads>,
    backups: Arc<backup::Backups>,
}

impl Told {
    async fn start(
        config: &Arc<Config>,
        bounds: &memory::Bounds,
        store: &Arc<dyn Store>,
        clock: &Arc<dyn Clock>,
        core: &Core,
        tls: Option<&tls::Tls>,
    ) -> Result<Self, BoxError> {
        let links = &core.links;
        // The journal is per instance: in this instance's data directory, also in front of
        // a PostgreSQL store that several instances share.
        let journal_dir = config.storage.path.join("journal");
        // The plans decide from the first batch on, the journal's replay included.
        let admitting =
            (!config.plans.is_empty()).then(|| core.plans.clone() as Arc<dyn Admission>);
        let recorder = Recorder::start_admitting(
            &config.visits,
            bounds.visit_writer(),
            JournalOptions {
                dir: &journal_dir,
                sync: config.storage.durability == Durability::Power,
            },
            store.clone(),
            clock.clone(),
            admitting,
        )
        .map_err(|e| e.to_string())?;
        links.use_geo(recorder.geo());
        let limits = Arc::new(
            RateLimits::with_capacity(&config.limits.rates, bounds.limiter_keys)
                .with_ipv6_prefix(config.limits.ipv6_prefix),
        );
        let mut metrics = Metrics::new(
            links.cache_counters(),
            &recorder,
            config.server.redirect_status,
        );
        metrics.register_rate_limits(&limits);
        metrics.register_memory(bounds);
        metrics.register_plans(&core.plans);
        let backups = Arc::new(backup::Backups::new(store.clone()));
        metrics.register_backups(&backups.counters);
        if let Some(tls) = tls {
            metrics.register_tls(tls);
        }
        // The review of destinations: checks only when enabled (an appliance sends nothing
        // out unless asked); overrides and listings work either way.
        #[cfg(feature = "review")]
        let checker = if config.review.enabled {
            Some(
                review::checks::Checker::new(&config.review, core.blocked.clone())
                    .map_err(|e| format!("review: {e}"))?,
            )
        } else {
            None
        };
        // Refused when the configuration is read: no checks in this build.
        #[cfg(not(feature = "review"))]
        let checker = None;
        let (reviews, review_triggers) = review::Reviews::new(
            store.clone(),
            links.clone(),
            clock.clone(),
            &config.review,
            checker,
            bounds.review_totals,
        );
        log_review(&config.review);
        if reviews.enabled() {
            links.on_review(reviews.hook());
            let told = reviews.clone();
            recorder.on_written(Arc::new(move |visits| told.visits_written(visits)));
            reviews.start(review_triggers);
        }
        metrics.register_reviews(&reviews);
        let (webhooks, webhook_events) = webhooks::Webhooks::new(
            store.clone(),
            clock.clone(),
            config.webhooks.clone(),
            webhooks::QueueBounds {
                events: bounds.webhook_events,
                visits: bounds.webhook_visits,
            },
        )
        .map_err(|e| format!("webhooks: {e}"))?;
        metrics.register_webhooks(&webhooks);
        if webhooks.enabled() {
            wire_webhooks(&webhooks, config, links, &recorder, &reviews);
            tracing::info!(
                webhooks = config.webhooks.len(),
                "webhooks: events go through the outbox to each endpoint, signed"
            );
        }
        let leads = {
            let (store, clock) = (store.clone(), clock.clone());
            Arc::new(tokio::task::spawn_blocking(move || leads::Leads::new(store, clock)).await??)
        };
        if webhooks.wants(webhooks::events::EventKind::Lead) {
            let told = webhooks.clone();
            let links = links.clone();
            leads.on_lead(Arc::new(move |lead| {
                let domain = links.domain_of_id(lead.link_id);
                told.tell(webhooks::events::Event::of_link(
                    webhooks::events::EventKind::Lead,
                    lead.link_id,
                    lead.at,
                    webhooks::events::lead_data(lead, domain.as_deref()),
                ))
            }));
        }
        webhooks.start(webhook_events);
        Ok(Told {
            recorder,
            limits,
            metrics: Arc::new(metrics),
            reviews,
            webhooks,
            leads,
            backups,
        })
    }
}

/// The start-up line that says whether destinations are reviewed, and with what.
fn log_review(r: &config::ReviewConfig) {
    if !r.enabled {
        tracing::info!(
            "review of destinations: off (nothing is fetched; set review.enabled to review links)"
        );
        return;
    }
    let or_none = |s: &str| {
        if s.trim().is_empty() {
            "none".to_string()
        } else {
            s.trim().to_string()
        }
    };
    tracing::info!(
        blocklists = r.blocklists.len(),
        fetch = r.fetch,
        allow_private = r.allow_private,
        browser = %or_none(&r.browser),
        scorer = %or_none(&r.scorer.url),
        workers = r.concurrency,
        "review of destinations: on (destinations are fetched and scored as listed here)"
    );
}

/// Runs the server until SIGTERM or SIGINT, then shuts down cleanly.
pub async fn run(config: Config) -> Result<(), BoxError> {
    // Before anything else: a SIGTERM during start-up is a graceful stop too.
    let signals = shutdown::Signals::install()
        .map_err(|e| format!("cannot listen for SIGTERM and SIGINT: {e}"))?;
    let server = Server::bind(config, Arc::new(SystemClock)).await?;
    match server.serve(async move { signals.recv().await }).await? {
        Stopped::ToReopen => Err(
            "stopped to reopen the store after a storage fault; a supervisor restarts it".into(),
        ),
        Stopped::Cleanly => {
            tracing::info!("stopped cleanly");
            Ok(())
        }
    }
}

/// The application on its bound socket: what [`run`] serves, and what in-process tests start
/// (with their own clock and stop signal).
pub struct Server {
    /// The bound address (the real port when `listen` asked for port 0).
    pub addr: std::net::SocketAddr,
    pub app: App,
    listener: tokio::net::TcpListener,
    /// `tls.http_listen`, bound: challenges and redirects to HTTPS.
    plain_listener: Option<tokio::net::TcpListener>,
    options: http::server::ServeOptions,
}

impl Server {
    /// Binds `server.listen`, opens the configured store and builds the application on it.
    pub async fn bind(mut config: Config, clock: Arc<dyn Clock>) -> Result<Server, BoxError> {
        // Bound first: a base_url derived from `listen` needs the real port when it is 0.
        let listener = tokio::net::TcpListener::bind(config.server.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.server.listen))?;
        let addr = listener.local_addr()?;
        let plain_listener = match config.tls.http_listen() {
            Some(plain) => Some(
                tokio::net::TcpListener::bind(plain)
                    .await
                    .map_err(|e| format!("`tls.http_listen`: cannot listen on {plain}: {e}"))?,
            ),
            None => None,
        };
        config.derive_base_url(addr);
        // The bound port (when `listen` asked for port 0): loop detection compares against it.
        config.server.listen = addr;
        if config.server.base_url_derived && addr.ip().is_unspecified() {
            tracing::warn!(
                base_url = %config.server.base_url,
                "listening on every interface with no server.base_url: short URLs name the \
                 loopback address; set server.base_url to the public address"
            );
        }
        let config = Arc::new(config);
        let store = {
            let config = config.clone();
            tokio::task::spawn_blocking(move || open_store(&config)).await??
        };
        let app = build(config.clone(), store.clone(), clock).await?;
        let counts = store.link_counts()?;
        let levels: Vec<String> = app
            .state
            .pools
            .statuses()?
            .iter()
            .map(|p| format!("{}:{}", p.length, p.counts.available))
            .collect();
        tracing::info!(
            listen = %addr,
            base_url = %config.server.base_url,
            base_url_from = if config.server.base_url_derived { "listen" } else { "config" },
            data = %config.storage.path.display(),
            links = counts.active,
            pools = %levels.join(","),
            durability = ?config.storage.durability,
            tls = ?config.tls.mode,
            "vshortlink listening"
        );
        if let Some(plain) = &plain_listener {
            tracing::info!(
                http_listen = %plain.local_addr()?,
                "plain HTTP: ACME http-01 challenges, and a 308 to HTTPS for everything else"
            );
        }
        let options = http::server::ServeOptions {
            header_timeout: config
                .server
                .header_timeout
                .0
                .unwrap_or(Duration::from_secs(10)),
            max_header_bytes: config.server.max_header_bytes,
            max_connections: config.server.max_connections,
            drain_timeout: http::REQUEST_TIMEOUT + Duration::from_secs(5),
        };
        Ok(Server {
            addr,
            app,
            listener,
            plain_listener,
            options,
        })
    }

    /// Serves until `stop` resolves (or a storage fault clears and the store must be
    /// reopened), drains the requests in flight, then shuts the application down.
    pub async fn serve(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<Stopped, BoxError> {
        let Server {
            app,
            listener,
            plain_listener,
            options,
            ..
        } = self;
        let stopping = {
            let recorder = app.state.recorder.clone();
            let recovered = app.recovered();
            async move {
                tokio::select! {
                    () = stop => {}
                    () = recovered => {}
                }
                tracing::info!(
                    queued_visits = recorder.depth(),
                    unwritten_visits = recorder.unwritten(),
                    "stopping: no new connections; draining requests, then the visit queue"
                );
            }
        };
        // One stop for both listeners.
        let (stop_all, stopped) = tokio::sync::watch::channel(false);
        let stop_of = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let plain = match (plain_listener, app.tls.clone()) {
            (Some(plain), Some(tls)) => Some(tokio::spawn(http::server::serve_plain_http(
                plain,
                tls,
                options,
                stop_of(stopped.clone()),
            ))),
            _ => None,
        };
        let main = http::server::serve(
            listener,
            app.front.clone(),
            options,
            app.tls.clone(),
            stop_of(stopped),
        );
        let stopping = async move {
            stopping.await;
            let _ = stop_all.send(true);
        };
        let (served, ()) = tokio::join!(main, stopping);
        served?;
        if let Some(plain) = plain {
            plain.await??;
        }
        // No request is in flight any more: write every queued visit before the store closes.
        app.shutdown().await
    }
}

/// Tells the webhooks of links' changes, written visits and verdicts (leads are told where
/// the leads service is built).
fn wire_webhooks(
    webhooks: &Arc<webhooks::Webhooks>,
    config: &Config,
    links: &Arc<Links>,
    recorder: &Arc<Recorder>,
    reviews: &Arc<review::Reviews>,
) {
    use crate::links::LinkChange;
    use crate::webhooks::events::{self, Event, EventKind};
    let base = config.server.base_url.trim_end_matches('/').to_string();
    let told = webhooks.clone();
    // The domains, not the link service: the hook lives in the link service.
    let domains = links.domains().clone();
    links.on_change(Arc::new(move |change, link| {
        let kind = match change {
            LinkChange::Created => EventKind::LinkCreated,
            LinkChange::Updated => EventKind::LinkUpdated,
            LinkChange::Deleted => EventKind::LinkDeleted,
            LinkChange::Ended => EventKind::LinkEnded,
        };
        if told.wants(kind) {
            let short_url = domains.short_url(&base, link.domain, &link.code);
            let host = domains
                .host_of(link.domain)
                .unwrap_or_else(|| domains.default_host().to_string());
            let at = match change {
                LinkChange::Created => link.created_at,
                _ => link.updated_at,
            };
            told.tell(Event::of_link(
                kind,
                link.id,
                at,
                events::link_data(link, &short_url, &host),
            ));
        }
    }));
    if webhooks.wants(EventKind::Visit) {
        let told = webhooks.clone();
        let links = links.clone();
        recorder.on_written(Arc::new(move |visits| {
            // A batch names few links many times: each link's domain is found once (nothing
            // is read while the default domain is the only one).
            let mut hosts: std::collections::HashMap<u64, Option<String>> =
                std::collections::HashMap::new();
            told.tell_visits(visits.iter().map(|v| {
                let host = hosts
                    .entry(v.visit.link_id)
                    .or_insert_with(|| links.domain_of_id(v.visit.link_id));
                events::visit_data(&v.visit, host.as_deref())
            }));
        }));
    }
    if webhooks.wants(EventKind::Review) {
        let told = webhooks.clone();
        let domains = links.domains().clone();
        reviews.on_verdict(Arc::new(move |review, named| {
            let host = named.map(|(_, id)| {
                domains
                    .host_of(id)
                    .unwrap_or_else(|| domains.default_host().to_string())
            });
            told.tell(Event::of_link(
                EventKind::Review,
                review.link_id,
                review.at,
                events::review_data(review, named.map(|(code, _)| code), host.as_deref()),
            ))
        }));
    }
}

/// How often a faulted store's disk is probed for free space.
const FAULT_PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// Bytes the probe writes: room for a few more sled segments' worth of small writes.
const FAULT_PROBE_BYTES: usize = 1024 * 1024;

/// Waits for a storage fault, then for the data directory to accept a write again, then
/// notifies `recovered`.
async fn storage_watchdog(
    store: Arc<dyn Store>,
    data: std::path::PathBuf,
    recovered: Arc<tokio::sync::Notify>,
) {
    loop {
        tokio::time::sleep(FAULT_PROBE_INTERVAL).await;
        // A fault that clears by itself (the space guard's) needs no restart.
        if !store.write_fault().is_some_and(|f| f.reopen) {
            continue;
        }
        let probe = data.join(".space-probe");
        let writable = tokio::task::spawn_blocking(move || {
            let ok = std::fs::write(&probe, vec![0u8; FAULT_PROBE_BYTES])
                .and_then(|()| std::fs::File::open(&probe)?.sync_all())
                .is_ok();
            let _ = std::fs::remove_file(&probe);
            ok
        })
        .await
        .unwrap_or(false);
        if writable {
            tracing::warn!(
                "the data directory accepts writes again: restarting to reopen the store"
            );
            recovered.notify_one();
            return;
        }
    }
}
