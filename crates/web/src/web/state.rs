//! [`AppState`]: what every handler can reach. Built once in `lib.rs`, cheap to clone, no logic.

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::HeaderMap;

use crate::accounts::Accounts;
use crate::config::Config;
use crate::health::Health;
use crate::jobs::lifecycle::Lifecycle;
use crate::leads::Leads;
use crate::limits::RateLimits;
use crate::links::Links;
use crate::metrics::Metrics;
use crate::pools::Pools;
use crate::visits::{Recorder, Statistics};
use crate::web::pages::VisitorPages;

/// axum clones the state for every request (the route layer, the handler, the `State`
/// extractor), so it is one `Arc`: a clone is one atomic increment, not one per service on
/// cache lines that both cores write (that was 7 % of a redirect's CPU in a profile).
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
    pub fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }

    /// The client address of a request from `peer`: the forwarding headers only from a trusted
    /// proxy, when `trust_proxy_headers` is on (see docs/operations.md, "Abuse controls").
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        crate::visits::client::client_ip(
            peer,
            headers,
            self.config.server.proxies(),
            self.config.server.client_ip_header,
        )
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The services behind [`AppState`].
pub struct Services {
    pub config: Arc<Config>,
    /// The domain service; handlers call it, never the store, for link work.
    pub links: Arc<Links>,
    pub pools: Arc<Pools>,
    /// Leads left through links' forms.
    pub leads: Arc<Leads>,
    /// The review of destinations: its queue, workers, verdicts.
    pub reviews: Arc<crate::review::Reviews>,
    /// Webhooks: the outbox's sender and its delivery log.
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    /// The maintenance job, also run on demand by the API.
    pub lifecycle: Arc<Lifecycle>,
    /// `/healthz` and `/metrics` (links go through `links`, visits through `stats`; no
    /// handler reaches the store).
    pub health: Arc<Health>,
    /// Statistics and visit listings.
    pub stats: Arc<Statistics>,
    /// Backups of the running store (`GET /api/v1/backup`) and the scheduled ones.
    pub backups: Arc<crate::backup::Backups>,
    /// The visit queue the redirect feeds.
    pub recorder: Arc<Recorder>,
    pub metrics: Arc<Metrics>,
    /// `limits.rates`, checked by the redirect path and the create handlers.
    pub limits: Arc<RateLimits>,
    /// Users, teams, keys (the configured ones and those made at run time), the audit log.
    pub accounts: Arc<Accounts>,
    /// The teams' plans and their usage (SPEC §25); the link service checks them.
    pub plans: Arc<crate::plans::Plans>,
    /// The pages the redirect path shows a visitor (rendered by `ui/`).
    pub pages: Arc<dyn VisitorPages>,
}
