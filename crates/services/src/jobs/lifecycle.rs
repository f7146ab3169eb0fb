//! The lifecycle job: marks expired links, recycles or retires codes of links that ended long
//! enough ago, and prunes old visits and leads. Run daily by the scheduler and on demand by
//! `POST /api/v1/maintenance/run` (see docs/architecture.md, "The life of a link").
//!
//! It works in bounded chunks: each link is its own small transaction (expiries: a group of
//! links per transaction), and each chunk ends with one shared flush, so the job never holds a giant transaction, never stalls redirects
//! for long, and can run beside creates or twice in a row (every step re-checks the link's
//! state inside its transaction).

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde::Serialize;

use crate::clock::Clock;
use crate::config::Config;
use crate::leads::Leads;
use crate::links::Links;
use crate::model::StoreResult;
use crate::pools::Pools;
use crate::store::Store;

/// Links handled between two flushes.
const CHUNK: usize = 500;
/// Links expired in one transaction ([`Store::expire_links`]): small enough that the
/// transaction stays short, large enough that redirects wait behind sled's write lock once
/// per group, not once per link.
const EXPIRE_GROUP: usize = 64;
/// After each chunk the job rests five times as long as the chunk took, so that on a small
/// machine it takes at most about a sixth of one core from the redirects. Its cost to them is
/// more than its CPU: each group of expiries is a sled transaction, applied under a lock that
/// every read of the process waits behind, redirects that miss the cache included. A nightly
/// job can afford to take longer: 1 M links with 100,000 expiring took 31 and 35 s against 19
/// and 22 s resting twice as long, and redirects during it kept 0.80 and 0.88 of their idle
/// rate against 0.75 and 0.70 (`benches/run.py --rows job`, alternating).
const REST_PER_WORK: u32 = 5;

/// What one run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MaintenanceReport {
    /// Active links past their expiry, now expired.
    pub expired: u64,
    /// Ended links archived with their code back in its pool (cooling).
    pub recycled: u64,
    /// Ended links of tiers that do not recycle: their codes are retired for good.
    pub retired: u64,
    /// Visits older than `visits.retention` removed.
    pub visits_pruned: u64,
    /// Leads older than their form's retention, or of archived links, removed.
    pub leads_pruned: u64,
    pub took_ms: u64,
}

/// Whether a run is under way, and what the last finished one did
/// (`GET /api/v1/maintenance`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct MaintenanceStatus {
    pub running: bool,
    pub last: Option<MaintenanceReport>,
}

/// The job and what it works with.
pub struct Lifecycle {
    store: Arc<dyn Store>,
    pools: Arc<Pools>,
    links: Arc<Links>,
    leads: Arc<Leads>,
    clock: Arc<dyn Clock>,
    config: Arc<Config>,
    /// One run at a time; a second request waits and then finds little left to do.
    running: Mutex<()>,
    /// The report of the last run that finished: a run the API started in the background is
    /// read back from here.
    last: Mutex<Option<MaintenanceReport>>,
}

impl Lifecycle {
    pub fn new(
        store: Arc<dyn Store>,
        pools: Arc<Pools>,
        links: Arc<Links>,
        leads: Arc<Leads>,
        clock: Arc<dyn Clock>,
        config: Arc<Config>,
    ) -> Self {
        Self {
            store,
            pools,
            links,
            leads,
            clock,
            config,
            running: Mutex::new(()),
            last: Mutex::new(None),
        }
    }

    /// Runs expiry, then recycling, then pruning. Blocking: call it off the async threads.
    pub fn run(&self) -> StoreResult<MaintenanceReport> {
        let _one_at_a_time = self.running.lock();
        // And one instance at a time, when several share the store: the second waits, then
        // finds little left to do.
        let _one_instance = match self.store.cluster() {
            Some(cluster) => Some(cluster.job_lock("lifecycle")?),
            None => None,
        };
        let started = Instant::now();
        let now = self.clock.now();
        let mut report = MaintenanceReport::default();
        self.expire(now, &mut report)?;
        self.recycle(now, &mut report)?;
        self.prune(now, &mut report)?;
        let pruned = self.leads.prune()?;
        self.store.sync()?;
        report.leads_pruned += pruned.expired + pruned.orphaned;
        report.took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(
            expired = report.expired,
            recycled = report.recycled,
            retired = report.retired,
            visits_pruned = report.visits_pruned,
            leads_pruned = report.leads_pruned,
            took_ms = report.took_ms,
            "maintenance run"
        );
        *self.last.lock() = Some(report);
        Ok(report)
    }

    /// Whether a run is under way, and the last finished run's report.
    pub fn status(&self) -> MaintenanceStatus {
        MaintenanceStatus {
            running: self.running.is_locked(),
            last: *self.last.lock(),
        }
    }

    fn expire(&self, now: u64, report: &mut MaintenanceReport) -> StoreResult<()> {
        loop {
            let chunk_started = Instant::now();
            let due = self.store.due_for_expiry(now, CHUNK)?;
            let mut progressed = 0;
            let ids: Vec<u64> = due.iter().map(|link| link.id).collect();
            for group in ids.chunks(EXPIRE_GROUP) {
                for expired in self.store.expire_links(group, now)? {
                    // Redirects already refuse it (entries know their expiry); this frees
                    // the cache slot.
                    self.links.invalidate(&expired.key());
                    self.links
                        .tell_change(crate::links::LinkChange::Ended, &expired);
                    report.expired += 1;
                    progressed += 1;
                }
            }
            self.store.sync()?;
            if due.len() < CHUNK || progressed == 0 {
                return Ok(());
            }
            std::thread::sleep(chunk_started.elapsed() * REST_PER_WORK);
        }
    }

    fn recycle(&self, now: u64, report: &mut MaintenanceReport) -> StoreResult<()> {
        let after = self
            .config
            .lifecycle
            .recycle_after
            .millis()
            .unwrap_or(u64::MAX);
        let Some(cutoff) = now.checked_sub(after) else {
            return Ok(());
        };
        loop {
            let chunk_started = Instant::now();
            let mut due = self.store.due_for_recycling(cutoff, CHUNK)?;
            // Short codes are the scarce ones: they go back first.
            due.sort_by_key(|l| l.length());
            let mut progressed = 0;
            for link in &due {
                let length = link.length();
                let tier = self.config.tier(length);
                let recycles = self.pools.has_pool(length) && tier.is_some_and(|t| t.recycle);
                if recycles {
                    let cooldown = tier.and_then(|t| t.cooldown.millis()).unwrap_or(0);
                    if self
                        .store
                        .recycle_link(link.id, now.saturating_add(cooldown))?
                        .is_some()
                    {
                        // Leads go with their link: nobody can read them once it is archived.
                        report.leads_pruned += self.leads.forget(link.id)?;
                        report.recycled += 1;
                        progressed += 1;
                    }
                } else if self.store.retire_link(link.id)? {
                    report.retired += 1;
                    progressed += 1;
                }
            }
            self.store.sync()?;
            if due.len() < CHUNK || progressed == 0 {
                return Ok(());
            }
            std::thread::sleep(chunk_started.elapsed() * REST_PER_WORK);
        }
    }

    /// Removes visits older than `visits.retention`, a bounded chunk per transaction; the
    /// counters (and so every statistic) stay.
    fn prune(&self, now: u64, report: &mut MaintenanceReport) -> StoreResult<()> {
        let Some(retention) = self.config.visits.retention.millis() else {
            return Ok(()); // `permanent`: keep every visit
        };
        let Some(cutoff) = now.checked_sub(retention) else {
            return Ok(());
        };
        loop {
            let chunk_started = Instant::now();
            let pruned = self.store.prune_visits(cutoff, CHUNK)?;
            self.store.sync()?;
            report.visits_pruned += pruned;
            if pruned < CHUNK as u64 {
                return Ok(());
            }
            std::thread::sleep(chunk_started.elapsed() * REST_PER_WORK);
        }
    }
}
