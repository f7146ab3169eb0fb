//! [`Statistics`]: the read side of visits as a service, for the API and the pages alike
//! (handlers never reach the store). Statistics read counters; visit listings read visits.

use std::sync::Arc;

use crate::clock::Clock;
use crate::store::{Link, Millis, Store, StoreResult, VisitPage, VisitTotals};
use crate::visits::stats::{self, Granularity, LinkStats, SystemStats};

pub struct Statistics {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

impl Statistics {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// A link's statistics over `from..to`.
    pub fn link(
        &self,
        link: &Link,
        from: Millis,
        to: Millis,
        granularity: Granularity,
    ) -> StoreResult<LinkStats> {
        stats::link_stats(&*self.store, link, from, to, granularity)
    }

    /// Link counts, today, and the last 14 days: of the whole store (`spaces` is `None`), or
    /// of the links of some spaces only (a key limited to them).
    pub fn system(&self, spaces: Option<&[String]>) -> StoreResult<SystemStats> {
        match spaces {
            None => stats::system_stats(&*self.store, self.clock.now()),
            Some(spaces) => stats::space_stats(&*self.store, self.clock.now(), spaces),
        }
    }

    /// All-time visits and bots of a link.
    pub fn totals(&self, link_id: u64) -> StoreResult<VisitTotals> {
        self.store.visit_totals(link_id)
    }

    /// Visits oldest first, after a cursor (the API and exports).
    pub fn visits(&self, link_id: u64, after: Option<u64>, limit: usize) -> StoreResult<VisitPage> {
        self.store.visits_page(link_id, after, limit)
    }

    /// Visits newest first, before a cursor (the pages).
    pub fn recent(
        &self,
        link_id: u64,
        before: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        self.store.recent_visits(link_id, before, limit)
    }
}
