//! `memory.budget`: the one place where every memory bound of the process is derived from the
//! budget. Pure (no I/O, no runtime objects): [`Bounds::derive`] turns a configuration into
//! numbers when the application is built (the binary refuses a budget too small for its
//! configuration right after loading it); the start-up log prints them, `/metrics` exports
//! them (`vsl_memory_bound_bytes{part}`), and the components that hold memory (the sled cache,
//! the redirect cache, the visit queue, the held visit counters and index references, the
//! small caches) are given their share as plain numbers ([`Bounds::links`],
//! [`Bounds::visit_writer`]). This module sits above what it sizes: it reads their entry
//! sizes, and none of them reads it.
//!
//! Fixed parts come first (a reserve for the binary and runtime, the code filter, the
//! connections' buffers, sled's page table); what is left (R) is shared out by [`shares`];
//! what no share takes is headroom for what no bound covers (allocator fragmentation, the
//! short bursts of the daily job's transactions).

pub use crate::config::MIN_BUDGET;
use crate::config::{Backend, Config};
use crate::links::LinkBounds;
use crate::visits::recorder::WriterBounds;

const MIB: u64 = 1024 * 1024;
/// The binary, the tokio runtime and its threads, the blocking pool's stacks, the allocator's
/// own slack: what the process costs before it holds anything (an idle server measured a
/// little over 20 MB of RSS; the rest is margin for threads woken under load).
pub const BASE: u64 = 40 * MIB;
/// sled 0.34's page table: every page of the store has an entry that lives as long as the
/// store is open, whatever `cache_capacity` says: the page and its list of fragments on disk,
/// about 240 bytes a page ([`SLED_PAGE_BYTES`]). Our sled splits leaves at 32 entries (`vendor/sled/VENDORED.md`), and
/// a store of 1 M links opens with about 137,000 pages (about 30 MB); the visit trees add pages
/// as links are visited, and after uniform redirects across them the same store counted
/// 228,000 pages (about 50 MB, walked in a sled built to count them: benches/RESULTS.md). A
/// reserve for stores of up to about a million visited links, at most
/// [`SLED_PAGE_TABLE_PERCENT`] of the budget. A store whose table outgrows it takes the excess
/// from sled's cache, down to [`SLED_CACHE_FLOOR_PERCENT`] of its capacity
/// (`store/sled/page_table.rs`); beyond that it needs a larger budget. The store the
/// benchmark's redirect rows and daily job leave (1.1 M links and their visits) has about
/// 325,000 pages, about 78 MB of them.
pub const SLED_PAGE_TABLE: u64 = 56 * MIB;
/// Estimated bytes of one page's entry in sled's page table after the store opened: the
/// page, the list of its fragments on disk (48 bytes each, lists at their length), the
/// table's own slot. A fresh open of the benchmark's end store (324,867 pages) allocated
/// 85 MB more than an empty store's, of which about 79 MB were the table in a heap profile
/// (benches/RESULTS.md).
pub const SLED_PAGE_BYTES: u64 = 240;
/// The least share of its capacity sled's cache keeps when its page table outgrows the
/// reserve. Creates read leaves of the code and dedup trees that the cache no longer holds:
/// on the benchmark's grown store at `256MB`, creates ran at 6,600–6,800/s with a quarter of
/// the capacity and 6,800–7,400/s with half, against 7,500–8,200/s with all of it, and
/// 7,250–7,350/s with a fixed 4 MB (about three quarters).
pub const SLED_CACHE_FLOOR_PERCENT: u64 = 75;
/// The page table's reserve is at most this share of the budget (a small budget is for a
/// small store).
pub const SLED_PAGE_TABLE_PERCENT: u64 = 30;
/// Bytes of a visit once enriched and waiting for the writer (`NewVisit`: the visit's fields,
/// its shared strings' handles, the derived hash and host).
pub const ENRICHED_VISIT: u64 = 400;
/// Per connection beyond its header buffer: hyper's write buffer, the socket's task, TLS-free
/// framing state.
pub const CONNECTION_EXTRA: u64 = 16 * 1024;
/// Per connection more with `[tls]` on: rustls's connection state and its record buffers.
/// Measured at 9.6 KiB an idle kept-alive connection after one request (RSS over 2,000 of
/// them, TLS against plain, release build); a whole 16 KiB record being read in is the
/// most a connection holds between requests, so the bound counts that.
pub const TLS_CONNECTION_EXTRA: u64 = 16 * 1024;
/// What sled 0.34 really holds per byte of its `cache_capacity`: the capacity counts nodes'
/// serialized sizes (rounded up to a power of two), while in memory they are larger and
/// superseded versions wait for epoch-based reclamation under writes. Measured at 1 M links
/// under the benchmark's redirect rows: a capacity of 8 MB against 64 MB lowered the peak RSS
/// by 295 MB, about 5.3 bytes per byte. Walking the page table of a sled built to count (at
/// `256MB`, a capacity of 6.7 MB, uniform redirects and the daily job) found 10 to 24 MB of
/// nodes in memory and about 1,500 superseded ones waiting (benches/RESULTS.md). So a share
/// of the budget buys a fifth of it in capacity.
pub const SLED_CACHE_FACTOR: u64 = 5;
/// One visitor-password check: Argon2id at the product's parameters (the `argon2` crate's
/// defaults, m = 19,456 KiB) allocates 19 MiB for the run, plus the blocking thread's stack and
/// the hash's buffers. Checks run at most [`Bounds::password_checks`] at once, so a flood of
/// wrong passwords is answered 429 instead of growing the process by 19 MiB a request.
pub const PASSWORD_CHECK: u64 = 20 * MIB;
/// Budget per concurrent password check beyond the first: one check below 512 MB, two at
/// 512 MB, …, at most [`MAX_PASSWORD_CHECKS`].
const PASSWORD_CHECK_BUDGET: u64 = 256 * MIB;
/// Concurrent password checks at most, whatever the budget: each is CPU-bound for tens of
/// milliseconds, so more than a few only queue on the cores.
const MAX_PASSWORD_CHECKS: u64 = 4;
/// The least R (budget less the fixed parts) that leaves every cache and queue room to work.
pub const MIN_REST: u64 = 16 * MIB;

/// The shares of R, in percent. Tuned from the measurements in benches/RESULTS.md (RSS at 1 M
/// links under Zipf and uniform traffic); change them here and nowhere else. What they leave
/// (100 less their sum) is headroom.
pub mod shares {
    /// sled's page cache and what sled holds beside it; sled only. sled is handed a fifth of
    /// this as its `cache_capacity` ([`super::SLED_CACHE_FACTOR`]).
    pub const SLED_CACHE: u64 = 25;
    /// The redirect cache (code → target), weighed in bytes. It took the visit queue's 10 %
    /// when visits went to the journal (nothing waits in memory between a redirect and the
    /// writer any more), so that a small team's links stay cached whole.
    pub const REDIRECT_CACHE: u64 = 25;
    /// The writer's enriched visits: one write's worth gathering and one being written, each
    /// at most this share's half ([`super::ENRICHED_VISIT`] a visit). A batch only has to
    /// outlast a write (about 6,000 visits at the default budget, read again from the journal
    /// while the last is written); what is held between folds is what saves the store's work,
    /// so the held shares below took 10 of its 15.
    pub const WRITER_BATCHES: u64 = 5;
    /// sled's per-(link, day) counters held until a fold (`visit_counts.rs`): about 20 bytes a
    /// visit and 25 a link.
    pub const HELD_COUNTS: u64 = 15;
    /// sled's visit-index runs held until a fold (`visit_index.rs`): 16 bytes a link in a
    /// write. Each held share is what lets a fold come every several seconds rather than every
    /// second under traffic over 100,000 links (each fold writes a record per link it holds,
    /// so the more visits a fold takes in, the fewer records a visit costs): at 15 and 5 the
    /// index, with the same visits held in more bytes, folded three times as often.
    pub const HELD_INDEX: u64 = 15;
    /// The small caches: rate-limiter keys, parsed user agents, link states, review totals.
    pub const SMALL_CACHES: u64 = 5;
    /// With a webhook configured: the events waiting for the outbox writer and the visits
    /// waiting to be gathered into one event, half each. Taken from the headroom (none
    /// without webhooks). The review's triggers (at most 4,096 link ids) are too small to
    /// need a share.
    pub const WEBHOOKS: u64 = 5;
}

/// How the small caches' share is split, in percent of it.
mod small {
    pub const LIMITER_KEYS: u64 = 40;
    pub const USER_AGENTS: u64 = 25;
    pub const LINK_STATES: u64 = 20;
    pub const REVIEW_TOTALS: u64 = 15;
}

/// Estimated bytes of one entry of each small cache (key, value, the cache's own slot).
pub mod entry {
    /// A rate limiter's key: `src/limits.rs` measured about 100 bytes.
    pub const LIMITER_KEY: u64 = 100;
    /// A parsed user agent: the string (a browser's is 100 to 250 bytes, at most 1,024 are
    /// cached), its `Agent` of shared strings, the slot.
    pub const USER_AGENT: u64 = 640;
    /// A link's state with its options (rules, targets, caps).
    pub const LINK_STATE: u64 = 512;
    /// A link's visit total for the review trigger (two u64s in a slot).
    pub const REVIEW_TOTAL: u64 = 48;
    /// A webhook event waiting for the outbox writer: a link's eleven fields as a JSON tree
    /// (`serde_json::Value`: one B-tree node of about 700 bytes, a string for each key and
    /// value, the URL's the longest), its key, the channel's slot; rounded up.
    pub const WEBHOOK_EVENT: u64 = 2048;
    /// A visit waiting to be gathered into a webhook event: ten fields as a JSON tree, the
    /// same way.
    pub const WEBHOOK_VISIT: u64 = 1280;
    /// A redirect cache entry when `cache.capacity` counts entries: the room the cache gives
    /// each in its log (an entry with a URL of about a hundred bytes takes a quarter of it).
    pub const REDIRECT: u64 = crate::links::cache::BYTES_PER_COUNTED as u64;
}

/// Least visits the writer gathers for one write: fewer would make writes (and their
/// flushes) so frequent that the writer falls behind.
const MIN_WRITER_VISITS: usize = 4096;

/// Least entries of each small cache, whatever the budget.
const MIN_ENTRIES: usize = 64;

/// Least webhook events and gathered visits held, whatever the budget.
const MIN_WEBHOOK_ENTRIES: usize = 256;

/// Every bound, in bytes unless named otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    pub budget: u64,
    pub base: u64,
    /// The code filter's Bloom bits (sled; PostgreSQL keeps none).
    pub code_filter: u64,
    /// `server.max_connections` × (`server.max_header_bytes` + [`CONNECTION_EXTRA`], and
    /// [`TLS_CONNECTION_EXTRA`] with `[tls]` on).
    pub connections: u64,
    /// sled's page table ([`SLED_PAGE_TABLE`]; 0 on PostgreSQL).
    pub sled_pages: u64,
    /// Argon2 runs of visitor-password checks: [`Bounds::password_checks`] ×
    /// [`PASSWORD_CHECK`].
    pub password_check_bytes: u64,
    /// Visitor-password checks that may run at once.
    pub password_checks: usize,
    /// sled's page cache and its overhead, as real memory: [`SLED_CACHE_FACTOR`] × the
    /// capacity; 0 on PostgreSQL.
    pub sled_cache: u64,
    /// The `cache_capacity` sled is handed: `storage.cache_capacity_mb` when set, else a
    /// [`SLED_CACHE_FACTOR`]th of the share.
    pub sled_cache_capacity: u64,
    /// The least capacity the page table's growth may push sled's cache down to
    /// ([`SLED_CACHE_FLOOR_PERCENT`] of it; all of it when `storage.cache_capacity_mb` is
    /// set). Not a part of the budget: the cache's part is its capacity at open.
    pub sled_cache_floor: u64,
    /// The redirect cache's weight capacity (its entries weigh their bytes), or, with
    /// `cache.capacity` set, that many entries at an estimated [`entry::REDIRECT`] each.
    pub redirect_cache: u64,
    /// `cache.capacity` when set: the cache then counts entries, not bytes.
    pub redirect_cache_entries: Option<usize>,
    /// The writer's enriched batches, two of at most [`Bounds::writer_visits`] visits.
    pub writer_batches: u64,
    /// Most enriched visits the writer gathers for one write before writing sooner.
    pub writer_visits: usize,
    /// sled's held visit counters (0 on PostgreSQL).
    pub held_counts: u64,
    /// sled's held visit-index references (0 on PostgreSQL).
    pub held_index: u64,
    /// The small caches together; their entry counts follow.
    pub small_caches: u64,
    /// Keys each rate limit remembers.
    pub limiter_keys: usize,
    /// Parsed user agents remembered (the visit writer's and the rules' caches together).
    pub user_agents: usize,
    /// Link states kept.
    pub link_states: usize,
    /// Links whose visit totals the review remembers.
    pub review_totals: usize,
    /// The webhooks' events and gathered visits (0 with no webhook configured).
    pub webhooks: u64,
    /// Webhook events waiting for the outbox writer, at most.
    pub webhook_events: usize,
    /// Visits waiting to be gathered into a webhook event, at most.
    pub webhook_visits: usize,
    /// What the parts leave of the budget.
    pub headroom: u64,
}

/// A budget too small for the configuration: the message names `memory.budget` and the
/// fixed parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BudgetError(pub String);

impl Bounds {
    /// The bounds of a configuration (its `memory.budget` and the keys that override parts).
    pub fn derive(config: &Config) -> Result<Bounds, BudgetError> {
        let budget = config.memory.budget.0;
        let sled = config.storage.backend == Backend::Sled;
        let code_filter = if sled {
            bloom_bytes(config.codes.filter_capacity, config.codes.filter_fp_rate)
        } else {
            0
        };
        let tls_extra = if config.tls.on() {
            TLS_CONNECTION_EXTRA
        } else {
            0
        };
        let connections = (config.server.max_connections as u64).saturating_mul(
            (config.server.max_header_bytes as u64)
                .saturating_add(CONNECTION_EXTRA)
                .saturating_add(tls_extra),
        );
        let sled_pages = if sled {
            SLED_PAGE_TABLE.min(budget / 100 * SLED_PAGE_TABLE_PERCENT)
        } else {
            0
        };
        let password_checks = (budget / PASSWORD_CHECK_BUDGET).clamp(1, MAX_PASSWORD_CHECKS);
        let password_check_bytes = password_checks * PASSWORD_CHECK;
        let fixed = BASE
            .saturating_add(code_filter)
            .saturating_add(connections)
            .saturating_add(sled_pages)
            .saturating_add(password_check_bytes);
        let rest = budget.saturating_sub(fixed);
        if rest < MIN_REST {
            let needed = fixed.saturating_add(MIN_REST).div_ceil(MIB);
            return Err(BudgetError(format!(
                "`memory.budget`: at least {needed} MB for this configuration (fixed reserve {} \
                 MB + code filter {} MB (codes.filter_capacity, codes.filter_fp_rate) + \
                 connection buffers {} MB (server.max_connections × (server.max_header_bytes \
                 + 16 KiB{})) + sled's page table {} MB + password checks {} MB + {} MB for \
                 caches and queues)",
                mb(BASE),
                mb(code_filter),
                mb(connections),
                if tls_extra > 0 {
                    " + 16 KiB for TLS"
                } else {
                    ""
                },
                mb(sled_pages),
                mb(password_check_bytes),
                mb(MIN_REST)
            )));
        }
        let share = |percent: u64| rest / 100 * percent;

        let sled_cache_capacity = match config.storage.cache_capacity_mb {
            Some(mb) => mb.saturating_mul(MIB),
            None if sled => share(shares::SLED_CACHE) / SLED_CACHE_FACTOR,
            None => 0,
        };
        let sled_cache = sled_cache_capacity.saturating_mul(SLED_CACHE_FACTOR);
        let sled_cache_floor = match config.storage.cache_capacity_mb {
            Some(_) => sled_cache_capacity,
            None => sled_cache_capacity / 100 * SLED_CACHE_FLOOR_PERCENT,
        };
        let (redirect_cache, redirect_cache_entries) = match config.cache.capacity {
            Some(n) => ((n as u64).saturating_mul(entry::REDIRECT), Some(n)),
            None => (share(shares::REDIRECT_CACHE), None),
        };
        // `visits.queue`, when set, is how many visits the writer reads from the journal for
        // one fold (the queue it once named is the journal now); the batches' bytes follow.
        let (writer_batches, writer_visits) = match config.visits.queue {
            Some(n) => ((n as u64).saturating_mul(2 * ENRICHED_VISIT), n),
            None => {
                let bytes = share(shares::WRITER_BATCHES);
                (bytes, entries(bytes / 2, ENRICHED_VISIT, MIN_WRITER_VISITS))
            }
        };
        let (held_counts, held_index) = if sled {
            (share(shares::HELD_COUNTS), share(shares::HELD_INDEX))
        } else {
            (0, 0)
        };
        let small_caches = share(shares::SMALL_CACHES);
        let count = |percent: u64, per_entry: u64, caches: u64| {
            entries(
                small_caches / 100 * percent / caches.max(1),
                per_entry,
                MIN_ENTRIES,
            )
        };
        let limits = config.limits.rates.enabled() as u64 + 1; // + the auth block list
        let webhooks = if config.webhooks.is_empty() {
            0
        } else {
            share(shares::WEBHOOKS)
        };
        let held = |per_entry: u64| entries(webhooks / 2, per_entry, MIN_WEBHOOK_ENTRIES);
        let mut bounds = Bounds {
            budget,
            base: BASE,
            code_filter,
            connections,
            sled_pages,
            password_check_bytes,
            password_checks: usize::try_from(password_checks).unwrap_or(1),
            sled_cache,
            sled_cache_capacity,
            sled_cache_floor,
            redirect_cache,
            redirect_cache_entries,
            writer_batches,
            writer_visits,
            held_counts,
            held_index,
            small_caches,
            limiter_keys: count(small::LIMITER_KEYS, entry::LIMITER_KEY, limits),
            user_agents: count(small::USER_AGENTS, entry::USER_AGENT, 1),
            link_states: count(small::LINK_STATES, entry::LINK_STATE, 1),
            review_totals: count(small::REVIEW_TOTALS, entry::REVIEW_TOTAL, 1),
            webhooks,
            webhook_events: held(entry::WEBHOOK_EVENT),
            webhook_visits: held(entry::WEBHOOK_VISIT),
            headroom: 0,
        };
        let bound: u64 = bounds.parts().iter().map(|(_, bytes)| bytes).sum();
        bounds.headroom = budget.saturating_sub(bound);
        Ok(bounds)
    }

    /// Every part but the headroom, by its `/metrics` label.
    /// The link service's share: its caches and its password checks.
    pub fn links(&self) -> LinkBounds {
        LinkBounds {
            link_states: self.link_states,
            // The writer's parser takes four fifths of the agents, the rules' one.
            user_agents: self.user_agents / 5,
            password_checks: self.password_checks,
            redirect_cache: self.redirect_cache,
        }
    }

    /// The visit writer's share.
    pub fn visit_writer(&self) -> WriterBounds {
        WriterBounds {
            // The writer parses every visit; the rules only those of links with device rules.
            user_agents: self.user_agents / 5 * 4,
            writer_visits: self.writer_visits,
        }
    }

    pub fn parts(&self) -> [(&'static str, u64); 12] {
        [
            ("base", self.base),
            ("code_filter", self.code_filter),
            ("connections", self.connections),
            ("sled_pages", self.sled_pages),
            ("password_checks", self.password_check_bytes),
            ("sled_cache", self.sled_cache),
            ("redirect_cache", self.redirect_cache),
            ("writer_batches", self.writer_batches),
            ("held_counts", self.held_counts),
            ("held_index", self.held_index),
            ("small_caches", self.small_caches),
            ("webhooks", self.webhooks),
        ]
    }

    /// The parts and the headroom, for `/metrics`.
    pub fn labelled(&self) -> Vec<(&'static str, u64)> {
        let mut parts = self.parts().to_vec();
        parts.push(("headroom", self.headroom));
        parts
    }

    /// The start-up log line: each part in MB.
    pub fn log(&self) {
        tracing::info!(
            budget_mb = mb(self.budget),
            base_mb = mb(self.base),
            code_filter_mb = mb(self.code_filter),
            connections_mb = mb(self.connections),
            sled_pages_mb = mb(self.sled_pages),
            password_checks = self.password_checks,
            sled_cache_mb = mb(self.sled_cache),
            sled_cache_capacity_mb = mb(self.sled_cache_capacity),
            redirect_cache_mb = mb(self.redirect_cache),
            writer_batches_mb = mb(self.writer_batches),
            writer_visits = self.writer_visits,
            held_counts_mb = mb(self.held_counts),
            held_index_mb = mb(self.held_index),
            small_caches_mb = mb(self.small_caches),
            webhooks_mb = mb(self.webhooks),
            webhook_events = self.webhook_events,
            headroom_mb = mb(self.headroom),
            "memory bounds (memory.budget)"
        );
    }
}

/// How many entries of `per_entry` bytes fit `bytes`, at least `least`.
fn entries(bytes: u64, per_entry: u64, least: usize) -> usize {
    usize::try_from(bytes / per_entry.max(1))
        .unwrap_or(usize::MAX)
        .max(least)
}

/// Bytes in MB, one decimal, for the log.
fn mb(bytes: u64) -> f64 {
    (bytes as f64 / MIB as f64 * 10.0).round() / 10.0
}

/// The Bloom filter's bitmap for `capacity` codes at `fp_rate`, as `bloomfilter` sizes it
/// (`Bloom::compute_bitmap_size`: m = −n·ln p / (ln 2)² bits), with the same clamps as
/// [`crate::codes::filter::CodeFilter::new`]. A filter found over capacity is rebuilt for twice
/// the codes issued; that growth is not foreseen here.
pub fn bloom_bytes(capacity: u64, fp_rate: f64) -> u64 {
    use crate::codes::filter::{MAX_CAPACITY, MAX_FP_RATE, MIN_CAPACITY, MIN_FP_RATE};
    let n = capacity.clamp(MIN_CAPACITY, MAX_CAPACITY) as f64;
    let p = if fp_rate.is_nan() {
        crate::codes::filter::DEFAULT_FP_RATE
    } else {
        fp_rate.clamp(MIN_FP_RATE, MAX_FP_RATE)
    };
    let ln2 = std::f64::consts::LN_2;
    (n * p.ln() / (-8.0 * ln2 * ln2)).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration whose fixed parts fit the smallest budget.
    const SMALL: &str = "[server]\nmax_connections = 50\nmax_header_bytes = 16384\n\
                         [codes]\nfilter_capacity = 1000000\n[memory]\n";

    fn bounds(overlay: &str) -> Result<Bounds, String> {
        let config = Config::from_toml(overlay).map_err(|e| e.to_string())?;
        Bounds::derive(&config).map_err(|e| e.0)
    }

    #[test]
    fn parts_fit_every_budget_from_64_mb_to_4_gb() {
        let mut budget = MIN_BUDGET;
        while budget <= 4096 * MIB {
            let b = bounds(&format!("{SMALL}budget = {budget}")).expect("budget");
            let sum: u64 = b.labelled().iter().map(|(_, bytes)| bytes).sum();
            assert_eq!(sum, budget, "{budget}: the headroom takes what is left");
            let parts: u64 = b.parts().iter().map(|(_, bytes)| bytes).sum();
            assert!(parts <= budget, "{budget}: {b:?}");
            let rest = budget
                - b.base
                - b.code_filter
                - b.connections
                - b.sled_pages
                - b.password_check_bytes;
            assert!(b.headroom >= rest / 20, "{budget}: {b:?}");
            assert!(b.writer_visits >= MIN_WRITER_VISITS && b.limiter_keys >= MIN_ENTRIES);
            budget += 61 * MIB;
        }
    }

    #[test]
    fn the_default_budget_fits_the_default_configuration() {
        let b = bounds("").expect("defaults");
        assert_eq!(b.budget, 256 * MIB);
        assert_eq!(b.code_filter, 11_981_323, "10 M codes at 1 %");
        assert_eq!(b.connections, 1000 * (16_384 + 16_384));
        // With TLS on, each connection also counts rustls's buffers.
        let tls =
            bounds("[tls]\nmode = \"files\"\ncert = \"c.pem\"\nkey = \"k.pem\"").expect("tls");
        assert_eq!(tls.connections, 1000 * (16_384 + 16_384 + 16_384));
        assert!(tls.redirect_cache < b.redirect_cache);
        assert_eq!(b.sled_pages, SLED_PAGE_TABLE);
        assert!(b.sled_cache > 24 * MIB && b.headroom > 5 * MIB, "{b:?}");
        // A batch outlasts a write; the held shares, not the batches, save the store work.
        assert!(b.writer_visits >= 6_000, "{b:?}");
        assert_eq!(
            b.sled_cache_floor,
            b.sled_cache_capacity / 100 * SLED_CACHE_FLOOR_PERCENT
        );
        assert_eq!(b.sled_cache_capacity, b.sled_cache / SLED_CACHE_FACTOR);
        assert_eq!(b.redirect_cache_entries, None);
        assert_eq!(b.password_checks, 1);
        assert_eq!(b.password_check_bytes, PASSWORD_CHECK);
    }

    #[test]
    fn password_checks_grow_with_the_budget_up_to_a_few() {
        let checks = |budget: &str| {
            bounds(&format!("[memory]\nbudget = \"{budget}\"")).map(|b| b.password_checks)
        };
        assert_eq!(checks("256MB"), Ok(1));
        assert_eq!(checks("512MB"), Ok(2));
        assert_eq!(checks("1GB"), Ok(4));
        assert_eq!(checks("8GB"), Ok(4));
    }

    #[test]
    fn a_budget_too_small_for_the_configuration_is_an_error_naming_it() {
        let err =
            bounds("[server]\nmax_header_bytes = 65536\n[memory]\nbudget = \"128MB\"").unwrap_err();
        assert!(err.contains("memory.budget"), "{err}");
        assert!(err.contains("at least 204 MB"), "{err}");
        assert!(err.contains("connection buffers 78.1 MB"), "{err}");
        let err = bounds("[memory]\nbudget = \"32MB\"").unwrap_err();
        assert!(err.contains("memory.budget"), "{err}");
        // The same budget fits fewer connections.
        assert!(bounds("[server]\nmax_connections = 100\n[memory]\nbudget = \"160MB\"").is_ok());
    }

    #[test]
    fn explicit_keys_override_their_parts() {
        let b = bounds(
            "[storage]\ncache_capacity_mb = 100\n[cache]\ncapacity = 10\n[visits]\nqueue = 4\n",
        )
        .expect("overrides");
        assert_eq!(b.sled_cache_capacity, 100 * MIB);
        assert_eq!(b.sled_cache, 100 * MIB * SLED_CACHE_FACTOR);
        assert_eq!(b.redirect_cache_entries, Some(10));
        assert_eq!(b.redirect_cache, 10 * entry::REDIRECT);
        assert_eq!(b.writer_visits, 4);
        assert_eq!(b.writer_batches, 8 * ENRICHED_VISIT);
    }

    #[test]
    fn webhooks_take_their_share_from_the_headroom_only_when_configured() {
        let off = bounds("").expect("defaults");
        assert_eq!(off.webhooks, 0);
        let on = bounds(
            "[[webhooks]]\nurl = \"https://hooks.example/in\"\nevents = [\"visit\"]\n\
             secret = \"a-long-random-string\"\n",
        )
        .expect("webhooks");
        let rest = on.budget
            - on.base
            - on.code_filter
            - on.connections
            - on.sled_pages
            - on.password_check_bytes;
        assert_eq!(on.webhooks, rest / 100 * shares::WEBHOOKS);
        assert_eq!(on.headroom, off.headroom - on.webhooks);
        assert_eq!(
            on.redirect_cache, off.redirect_cache,
            "no other share moves"
        );
        assert_eq!(
            on.webhook_events as u64,
            on.webhooks / 2 / entry::WEBHOOK_EVENT
        );
        assert!(on.webhook_visits >= on.webhook_events && on.webhook_events >= 256);
    }

    #[test]
    fn postgres_holds_no_sled_parts() {
        let b = bounds(
            "[storage]\nbackend = \"postgres\"\n[storage.postgres]\nurl = \"postgres://u@h/db\"\n",
        )
        .expect("postgres");
        assert_eq!((b.sled_cache, b.code_filter), (0, 0));
        assert_eq!((b.held_counts, b.held_index), (0, 0));
    }

    #[test]
    fn the_filter_is_sized_as_bloomfilter_sizes_it() {
        assert_eq!(
            bloom_bytes(10_000_000, 0.01) as usize,
            bloomfilter::Bloom::<str>::compute_bitmap_size(10_000_000, 0.01)
        );
    }
}
