//! `/metrics` (see docs/api.md, "Metrics"): Prometheus text from a `prometheus-client` registry.
//!
//! Counters that hot paths bump (requests, redirect latency, cache hits, visit queue) are
//! atomics owned by the components that count and registered here by handle. Levels that
//! already live elsewhere (pool sizes, links by status, queue depth, flushes) are read into
//! gauges when the endpoint is scraped, so the hot paths never pay for them.

use std::borrow::Cow;
use std::collections::HashSet;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::links::cache::CacheCounters;
use crate::model::{LinkStatus, StoreResult};
use crate::pools::Pools;
use crate::store::Store;
use crate::visits::Recorder;

/// The redirect's route label. Labels write parameters as `:name`: braces inside label values
/// trip up simple exposition parsers.
pub const REDIRECT_LABEL: &str = "/:code";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route pattern (`/{code}`, `/api/v1/links`), never the raw path.
    pub route: Cow<'static, str>,
    pub method: Cow<'static, str>,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LengthLabel {
    length: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartLabel {
    part: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    /// `requests` of `GET /:code` answered with the configured redirect status, resolved
    /// once: the family's lookup (a read lock and a hash of the labels) was a measurable part
    /// of a redirect.
    redirected: Counter,
    redirect_status: u16,
    pub redirect_seconds: Histogram,
    pool_available: Family<LengthLabel, Gauge>,
    pool_cooling: Family<LengthLabel, Gauge>,
    links: Family<StatusLabel, Gauge>,
    queue_depth: Gauge,
    queue_capacity: Gauge,
    journal_bytes: Gauge,
    journal_over_max: Gauge,
    review_queue: Gauge,
    webhook_outbox: Gauge,
    flushes: Gauge,
    flush_seconds: FloatGauge,
    last_flush_seconds: FloatGauge,
    allocator: Family<KindLabel, Gauge>,
    store_memory: Family<PartLabel, Gauge>,
}

impl Metrics {
    /// Counts one answered request.
    pub fn count_request(&self, labels: &RequestLabels) {
        if labels.status == self.redirect_status
            && labels.route == REDIRECT_LABEL
            && labels.method == "GET"
        {
            self.redirected.inc();
        } else {
            self.requests.get_or_create(labels).inc();
        }
    }

    pub fn new(cache: &CacheCounters, recorder: &Recorder, redirect_status: u16) -> Metrics {
        let mut registry = Registry::with_prefix("vsl");
        let requests = Family::<RequestLabels, Counter>::default();
        let redirected = requests
            .get_or_create(&RequestLabels {
                route: Cow::Borrowed(REDIRECT_LABEL),
                method: Cow::Borrowed("GET"),
                status: redirect_status,
            })
            .clone();
        registry.register(
            "http_requests",
            "HTTP requests by route pattern, method and status",
            requests.clone(),
        );
        // 50 µs .. ~0.8 s
        let redirect_seconds = Histogram::new(exponential_buckets(0.00005, 2.0, 15));
        registry.register(
            "redirect_duration_seconds",
            "Time to answer GET/HEAD /{code}, in the server",
            redirect_seconds.clone(),
        );
        registry.register(
            "cache_hits",
            "Redirects answered from the cache",
            cache.hits.clone(),
        );
        registry.register(
            "cache_misses",
            "Redirects that read the store",
            cache.misses.clone(),
        );
        let v = recorder.metrics();
        registry.register(
            "visits_queued",
            "Visits appended to the visit journal",
            v.accepted.clone(),
        );
        registry.register(
            "visits_dropped",
            "Visits dropped because the visit journal could not be written (a full disk)",
            v.dropped.clone(),
        );
        registry.register(
            "visits_written",
            "Visits written to the store",
            v.written.clone(),
        );
        registry.register(
            "visits_failed",
            "Visits of folds the store refused (kept in the journal and retried)",
            v.failed.clone(),
        );
        registry.register(
            "visit_journal_skipped",
            "Torn or corrupt stretches of the visit journal skipped (each logged)",
            v.skipped.clone(),
        );
        registry.register(
            "visit_batch_duration_seconds",
            "Time to enrich and durably write one batch of visits",
            v.batch_seconds.clone(),
        );
        let metrics = Metrics {
            requests,
            redirected,
            redirect_status,
            redirect_seconds,
            pool_available: Family::default(),
            pool_cooling: Family::default(),
            links: Family::default(),
            queue_depth: Gauge::default(),
            queue_capacity: Gauge::default(),
            journal_bytes: Gauge::default(),
            journal_over_max: Gauge::default(),
            review_queue: Gauge::default(),
            webhook_outbox: Gauge::default(),
            flushes: Gauge::default(),
            flush_seconds: FloatGauge::default(),
            last_flush_seconds: FloatGauge::default(),
            allocator: Family::default(),
            store_memory: Family::default(),
            registry,
        };
        metrics.register_levels()
    }

    fn register_levels(mut self) -> Metrics {
        let r = &mut self.registry;
        r.register(
            "pool_available",
            "Codes ready to hand out, per length",
            self.pool_available.clone(),
        );
        r.register(
            "pool_cooling",
            "Recycled codes waiting out their cooldown, per length",
            self.pool_cooling.clone(),
        );
        r.register("links", "Links by status", self.links.clone());
        r.register(
            "visit_queue_depth",
            "Visits journaled by this process and not yet folded into the store",
            self.queue_depth.clone(),
        );
        r.register(
            "visit_queue_capacity",
            "Most visits the writer reads from the journal for one fold",
            self.queue_capacity.clone(),
        );
        r.register(
            "visit_journal_bytes",
            "Bytes of the visit journal's segment files (measured at each fold)",
            self.journal_bytes.clone(),
        );
        r.register(
            "visit_journal_over_max",
            "1 while the visit journal is larger than visits.journal_max (the store is behind)",
            self.journal_over_max.clone(),
        );
        r.register(
            "allocator_bytes",
            "jemalloc's counts: allocated (live objects), active (their pages), resident \
             (what the allocator holds in RAM), mapped, retained (returned, still mapped)",
            self.allocator.clone(),
        );
        r.register(
            "store_memory_bytes",
            "What the store holds beyond its bounds, as it changes: sled's page table \
             (estimated from its pages) and the cache capacity the table leaves sled",
            self.store_memory.clone(),
        );
        r.register(
            "store_flushes",
            "Group-commit flushes since start",
            self.flushes.clone(),
        );
        r.register(
            "store_flush_seconds_sum",
            "Time spent in group-commit flushes since start",
            self.flush_seconds.clone(),
        );
        r.register(
            "store_last_flush_seconds",
            "Duration of the latest flush",
            self.last_flush_seconds.clone(),
        );
        self
    }

    /// `vsl_memory_bound_bytes{part}`: each bound derived from `memory.budget` (fixed for the
    /// process's life, so set once here).
    pub fn register_memory(&mut self, bounds: &crate::memory::Bounds) {
        let family = Family::<PartLabel, Gauge>::default();
        for (part, bytes) in bounds.labelled() {
            set(&family.get_or_create(&PartLabel { part }), bytes);
        }
        self.registry.register(
            "memory_bound_bytes",
            "Memory bounds derived from memory.budget, by part, in bytes",
            family,
        );
    }

    /// `vsl_rate_limited_total{limit}`: requests answered 429, per `limits.rates` key.
    /// The review's counters: reviews by verdict, and the queue's depth (read when scraped).
    pub fn register_reviews(&mut self, reviews: &crate::review::Reviews) {
        self.registry.register(
            "reviews",
            "Reviews of destinations finished, by verdict",
            reviews.finished.clone(),
        );
        self.registry.register(
            "review_queue_depth",
            "Links waiting in the review queue",
            self.review_queue.clone(),
        );
    }

    pub fn register_webhooks(&mut self, webhooks: &crate::webhooks::Webhooks) {
        self.registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts, by outcome (delivered, failed, gave_up)",
            webhooks.counts.deliveries.clone(),
        );
        self.registry.register(
            "webhook_events_dropped",
            "Webhook events dropped because their queue was full",
            webhooks.counts.dropped.clone(),
        );
        self.registry.register(
            "webhook_outbox",
            "Webhook deliveries waiting in the outbox",
            self.webhook_outbox.clone(),
        );
    }

    /// The scheduled backups: when the last one was written, and how many failed.
    pub fn register_backups(&mut self, counters: &crate::backup::BackupCounters) {
        self.registry.register(
            "backup_last_success_timestamp_seconds",
            "When the last scheduled backup was written (Unix seconds; 0 before the first)",
            counters.last_success.clone(),
        );
        self.registry.register(
            "backup_failures",
            "Scheduled backups that failed (each is retried at the next turn)",
            counters.failures.clone(),
        );
    }

    /// HTTPS: when each certificate ends, and the ACME orders by outcome.
    pub fn register_tls(&mut self, tls: &crate::tls::Tls) {
        tls.register_metrics(&mut self.registry);
    }

    /// Visits a team's plan kept from being recorded (past `visits_per_month`), by team.
    pub fn register_plans(&mut self, plans: &crate::plans::Plans) {
        self.registry.register(
            "visits_over_plan",
            "Visits redirected but not recorded because their team was past its plan's visits_per_month, by team",
            plans.dropped.clone(),
        );
    }

    pub fn register_rate_limits(&mut self, limits: &crate::limits::RateLimits) {
        self.registry.register(
            "rate_limited",
            "Requests answered 429, per limits.rates key",
            limits.refused.clone(),
        );
    }

    /// Reads the levels and renders the whole registry as Prometheus text.
    pub fn render(
        &self,
        store: &dyn Store,
        pools: &Pools,
        recorder: &Recorder,
    ) -> StoreResult<String> {
        for status in pools.statuses()? {
            let label = LengthLabel {
                length: status.length,
            };
            set(
                &self.pool_available.get_or_create(&label),
                status.counts.available,
            );
            set(
                &self.pool_cooling.get_or_create(&label),
                status.counts.cooling,
            );
        }
        let counts = store.link_counts()?;
        for status in LinkStatus::ALL {
            let n = match status {
                LinkStatus::Active => counts.active,
                LinkStatus::Expired => counts.expired,
                LinkStatus::Deleted => counts.deleted,
                LinkStatus::Archived => counts.archived,
            };
            let label = StatusLabel {
                status: status.as_str(),
            };
            set(&self.links.get_or_create(&label), n);
        }
        set(&self.queue_depth, recorder.depth() as u64);
        set(&self.queue_capacity, recorder.capacity() as u64);
        let journal = recorder.journal_levels();
        set(
            &self.journal_bytes,
            journal.bytes.load(std::sync::atomic::Ordering::Relaxed),
        );
        set(
            &self.journal_over_max,
            u64::from(journal.over_max.load(std::sync::atomic::Ordering::Relaxed)),
        );
        set(&self.review_queue, store.review_queue_depth()?);
        set(&self.webhook_outbox, store.outbox_depth()?);
        let flush = store.commit_stats();
        set(&self.flushes, flush.flushes);
        self.flush_seconds.set(flush.total.as_secs_f64());
        self.last_flush_seconds
            .set(Duration::as_secs_f64(&flush.last));
        for (part, bytes) in store.memory_held() {
            set(&self.store_memory.get_or_create(&PartLabel { part }), bytes);
        }
        for (kind, bytes) in allocator_counts() {
            set(&self.allocator.get_or_create(&KindLabel { kind }), bytes);
        }
        let mut text = String::with_capacity(8 * 1024);
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        Ok(prometheus_text(&text))
    }
}

/// jemalloc's counts, refreshed (its statistics are a snapshot taken at each epoch). Where
/// the binary runs on another allocator (a library user), these are jemalloc's own near-zero
/// counts. Resident less allocated is what fragmentation and pages not yet returned cost:
/// the part of the RSS no bound of `memory.budget` can see.
fn allocator_counts() -> Vec<(&'static str, u64)> {
    use tikv_jemalloc_ctl::{epoch, stats};
    if epoch::advance().is_err() {
        return Vec::new();
    }
    let read = |r: tikv_jemalloc_ctl::Result<usize>| r.map(|n| n as u64).unwrap_or(0);
    vec![
        ("allocated", read(stats::allocated::read())),
        ("active", read(stats::active::read())),
        ("resident", read(stats::resident::read())),
        ("mapped", read(stats::mapped::read())),
        ("retained", read(stats::retained::read())),
        ("metadata", read(stats::metadata::read())),
    ]
}

fn set(gauge: &Gauge, value: u64) {
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
}

/// Turns the encoder's OpenMetrics text into the Prometheus text format (0.0.4) that every
/// scraper and `curl` reader expects: a counter family is named like its `_total` samples,
/// and there is no `# EOF` line.
fn prometheus_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_take_their_sample_names() {
        let om = "# HELP a_requests Requests.\n# TYPE a_requests counter\na_requests_total 3\n\
                  # HELP b Level.\n# TYPE b gauge\nb 1\n# EOF\n";
        assert_eq!(
            prometheus_text(om),
            "# HELP a_requests_total Requests.\n# TYPE a_requests_total counter\n\
             a_requests_total 3\n# HELP b Level.\n# TYPE b gauge\nb 1\n"
        );
    }
}
