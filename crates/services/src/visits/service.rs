//! [`Statistics`]: the read side of visits as a service, for the API and the pages alike
//! (handlers never reach the store). Statistics read counters; visit listings read visits.
//! [`Statistics::numbered_visits`] cuts a link's visits into numbered pages, newest first
//! (the Shlink-compatible API).

use std::sync::Arc;

use crate::clock::Clock;
use crate::model::{Link, Millis, StoreResult, Visit, VisitPage, VisitTotals};
use crate::store::Store;
use crate::visits::stats::{self, Granularity, LinkStats, SystemStats};

/// Which of a link's visits a numbered listing keeps.
#[derive(Clone, Copy, Debug, Default)]
pub struct VisitFilter {
    /// At or after.
    pub from: Option<Millis>,
    /// At or before.
    pub to: Option<Millis>,
    pub exclude_bots: bool,
}

/// Visits read from the store per step of a numbered listing.
const WALK: usize = 1000;

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

    /// `take` of a link's visits that `filter` keeps, newest first, after skipping `skip` of
    /// them, and how many it keeps in all. Without a time range the total is the link's
    /// counters (O(1)) and the walk stops once the page is full: O(skip + take). With one, the
    /// walk goes from the newest visit down to the range's start and counts: O(visits in and
    /// after the range). Visit ids follow write order, which follows time within the visit
    /// writer's batching (a second), so the walk stops at the first visit before the range.
    /// Visits pruned by retention are in the counters but not listed.
    pub fn numbered_visits(
        &self,
        link_id: u64,
        filter: VisitFilter,
        skip: usize,
        take: usize,
    ) -> StoreResult<(Vec<Visit>, u64)> {
        let ranged = filter.from.is_some() || filter.to.is_some();
        let keeps = |v: &Visit| {
            !(filter.exclude_bots && v.is_bot)
                && filter.from.is_none_or(|from| v.at >= from)
                && filter.to.is_none_or(|to| v.at <= to)
        };
        let mut items = Vec::new();
        let mut seen = 0usize;
        let mut total = 0u64;
        let mut before = None;
        'walk: loop {
            let page = self.store.recent_visits(link_id, before, WALK)?;
            for visit in page.items {
                if filter.from.is_some_and(|from| visit.at < from) {
                    break 'walk;
                }
                if !keeps(&visit) {
                    continue;
                }
                total += 1;
                if seen < skip {
                    seen += 1;
                } else if items.len() < take {
                    items.push(visit);
                }
                if !ranged && items.len() >= take {
                    break 'walk;
                }
            }
            match page.next {
                Some(next) => before = Some(next),
                None => break,
            }
        }
        if !ranged {
            let totals = self.store.visit_totals(link_id)?;
            total = if filter.exclude_bots {
                totals.visits.saturating_sub(totals.bots)
            } else {
                totals.visits
            };
        }
        Ok((items, total))
    }
}
