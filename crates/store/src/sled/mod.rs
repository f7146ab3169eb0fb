//! The embedded `Store`: sled 0.34 trees with MessagePack values. The only code in the crate
//! that says `sled::`. This file holds the store's struct and the implementations of
//! `LinkStore`, `PoolStore`, `VisitStore` and `StoreOps`, which hand each call to the file that
//! owns the behaviour; the other capability traits are implemented in the file that owns them
//! (named in brackets):
//!
//! | file | owns |
//! |---|---|
//! | `open.rs` | opening, recovery checks, the code filter and its checkpoints, closing |
//! | `links.rs` | creating one link, resolving, reading, updating, deleting, expiring, recycling, listing |
//! | `group.rs` | the create committer: pooled creates applied many to one transaction |
//! | `pools.rs` | the code pools, their counters and cooling counts, strategy states; the `meta` tree (`MetaStore`) |
//! | `visits/` | visit blocks and their counters: writing, listings, totals, pruning, older layouts |
//! | `visit_index.rs` | the per-link index of visit blocks, folded from memory every few seconds |
//! | `visit_counts.rs` | the per-link day counters held in memory, and their fold |
//! | `leads.rs` | leads left through links' forms, by link (`LeadStore`) |
//! | `reviews.rs` | the review queue (leases in memory), finished reviews, each link's latest verdict (`ReviewStore`) |
//! | `outbox.rs` | the webhook outbox (leases in memory), its order per key, the delivery log (`OutboxStore`) |
//! | `claims.rs` | visit caps: redirects counted durably against a link's and its targets' caps (`CapStore`) |
//! | `import.rs` | bulk import of links |
//! | `check.rs` | `vshortlink check`: the store's invariants, read only |
//! | `codec.rs` | record bytes: MessagePack, counters, [`check_record`] |
//! | `formats.rs` | the byte formats readers and writers share: per-link keys, visit blocks, day records |
//! | `errors.rs` | transaction aborts and storage faults as [`crate::StoreError`] |
//! | `keys.rs` | key layouts of every tree |
//! | `flusher.rs` | group-committed flushes (durability) |
//! | `filter_file.rs` | the code filter's file |
//! | `space.rs` | the free-space guard |
//! | `page_table.rs` | sled's page table against its reserve: the cache gives way as it grows |
//!
//! Every write is one multi-tree transaction followed by a group-committed flush
//! (`flusher`). Transaction closures may run more than once, so they do no I/O, read no
//! clock and send on no channel; everything they need is computed before.
//!
//! Pool takes are ZPOPMIN: the first key of `pool/<L>` (lowest score) is read outside the
//! transaction under a per-length mutex, then removed inside the transaction that writes the
//! link, after checking it is still there. Custom creates can remove pooled codes concurrently;
//! the check makes them lose nothing and hand nothing out twice.

mod check;
mod claims;
mod codec;
mod errors;
mod filter_file;
mod flusher;
mod formats;
mod group;
mod import;
mod keys;
mod leads;
mod links;
mod open;
mod outbox;
mod page_table;
mod pools;
mod reviews;
mod space;
mod visit_counts;
mod visit_index;
mod visits;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

pub use self::codec::check_record;
pub use self::page_table::PageTableBudget;
// Siblings reach these through `super::`, as before the split.
use self::codec::{bump, encode, tx_decode_link};
use self::errors::{backend, Abort};
use self::flusher::Flusher;
use self::keys::counter;
use crate::codes::filter::CodeFilter;
use crate::prelude::*;
use crate::{
    ActiveEntry, CommitStats, CreateDone, DayCount, Durability, Imported, Link, LinkCounts,
    LinkPage, LinkPatch, LinkQuery, LinkStatus, Millis, NewLink, NewVisit, PoolAdded, PoolBatch,
    PoolCounts, StorageFault, StoreResult, VisitPage, VisitSummary, VisitTotals,
};

/// Longest code the store keeps a pool tree for (custom codes may sit in any of them).
const MAX_LEN: u8 = 16;
/// At most this many records are scanned for one page of a filtered listing, so that a rare
/// filter cannot turn one request into a full scan; the cursor lets the caller go on.
const LIST_SCAN_BUDGET: usize = 100_000;
/// Codes per pool-add transaction.
const POOL_ADD_CHUNK: usize = 256;
use crate::model::time::DAY_MS;

/// How to open a [`SledStore`].
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The data directory. sled's files go in `<path>/db/`, the code filter next to them.
    pub path: PathBuf,
    pub durability: Durability,
    /// sled's page cache, in bytes.
    pub cache_capacity_bytes: u64,
    /// Codes the filter is sized for before it is rebuilt larger.
    pub filter_capacity: u64,
    /// The filter's false-positive rate at capacity.
    pub filter_fp_rate: f64,
    /// How long to wait for another handle in this process to release the directory (a
    /// quick reopen in tests). Another process holding it fails at once when this is zero.
    pub lock_wait: std::time::Duration,
    /// Writes are refused while the file system has less than this free (at most a
    /// twentieth of it), so that sled never fails a write (`space`).
    pub min_free_bytes: u64,
    /// Estimated bytes of visit counters held in memory before a fold starts early, and past
    /// which each write folds more (`visit_counts`).
    pub held_counts_bytes: usize,
    /// Estimated bytes of visit-index references held before a fold comes early
    /// (`visit_index`).
    pub held_index_bytes: usize,
    /// sled's page table: its reserve, and how far the cache gives way when the table
    /// outgrows it (`page_table`).
    pub page_table: PageTableBudget,
}

impl StoreOptions {
    /// Defaults for a data directory (used by tests and tools).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            durability: Durability::Process,
            cache_capacity_bytes: 64 * 1024 * 1024,
            filter_capacity: 10_000_000,
            filter_fp_rate: 0.01,
            lock_wait: std::time::Duration::from_secs(3),
            min_free_bytes: 64 * 1024 * 1024,
            held_counts_bytes: visit_counts::DEFAULT_HELD_BYTES,
            held_index_bytes: visit_index::DEFAULT_HELD_BYTES,
            page_table: PageTableBudget::UNBOUNDED,
        }
    }
}

/// What happened while opening, for the start-up log.
#[derive(Clone, Debug, Default)]
pub struct OpenReport {
    /// sled replayed its log after an unclean stop.
    pub recovered: bool,
    /// Why the code filter was rebuilt from the trees, if it was.
    pub filter_rebuilt: Option<String>,
    /// Counters found to disagree with the trees, and corrected (`name: was → now`).
    pub counters_corrected: Vec<String>,
    /// Visits moved from the per-link records of older versions into blocks.
    pub visits_migrated: u64,
}

/// The sled-backed store.
pub struct SledStore {
    db: sled::Db,
    links: sled::Tree,
    /// Code → its owner: an active link's [`ActiveEntry`] (what a redirect needs, one read),
    /// or the id alone of an expired or deleted link ([`codec::CodeValue`]).
    codes: sled::Tree,
    dedup: sled::Tree,
    expiry: sled::Tree,
    ended: sled::Tree,
    /// One per length: where each pooled code sits, and the lock that keeps it true
    /// ([`pools::Members`]).
    members: Vec<Mutex<pools::Members>>,
    counters: sled::Tree,
    meta: sled::Tree,
    /// Redirects counted against caps, as of the last checkpoint ([`claims`]).
    claims: sled::Tree,
    /// Every count, and the journal that makes new ones durable at once.
    claim_book: Mutex<claims::ClaimBook>,
    durability: Durability,
    visit_blocks: sled::Tree,
    visit_index: sled::Tree,
    visit_days: sled::Tree,
    visit_totals: sled::Tree,
    /// Leads by link then id ([`leads`]), and each link's count of them.
    leads: sled::Tree,
    lead_counts: sled::Tree,
    /// The review queue and reviews ([`reviews`]).
    review_queue: sled::Tree,
    review_pending: sled::Tree,
    review_leases: Mutex<reviews::Leases>,
    reviews: sled::Tree,
    review_shots: sled::Tree,
    review_verdicts: sled::Tree,
    review_latest: sled::Tree,
    /// The webhook outbox and its delivery log ([`outbox`]), and what is kept of them in
    /// memory (leases, the count of items), under the lock every outbox write holds.
    outbox: sled::Tree,
    outbox_keys: sled::Tree,
    outbox_due: sled::Tree,
    outbox_log: sled::Tree,
    outbox_log_hooks: sled::Tree,
    outbox_state: Mutex<outbox::Outbox>,
    /// Whether `visit_totals` (totals of the layout before running totals) holds anything:
    /// a store that never had it skips the read for every link counted the first time.
    legacy_totals: bool,
    /// The links whose record of one day the visit writer has written since the store opened
    /// ([`visits::Counted`]): for those, a write reads that record straight away.
    counted: Mutex<visits::Counted>,
    /// The `visit_index` entries not yet folded into the tree ([`visit_index::Recent`]).
    recent_index: RwLock<visit_index::Recent>,
    /// Held by a fold, so that two never interleave.
    index_fold: Mutex<()>,
    /// The `visit_days` counts not yet folded into the tree ([`visit_counts::Unwritten`]).
    unwritten_counts: RwLock<visit_counts::Unwritten>,
    /// Held by a count fold, and by a write adding counts (never during a fold).
    count_fold: Mutex<()>,
    /// The held bounds of [`StoreOptions`]: counts' bytes, index bytes.
    held_counts_bytes: usize,
    held_index_bytes: usize,
    /// `pool/<L>` for L in 1..=16, index L-1.
    pools: Vec<sled::Tree>,
    /// One per length: serialises ZPOPMIN so concurrent takers do not race for the same head.
    takers: Vec<Mutex<()>>,
    /// Applies pooled creates many to a transaction ([`group`]).
    committer: group::Committer,
    /// One per length: cooling entries (score in the future) by score, so that `cooling`
    /// and `available` are answered without scanning the pool.
    cooling: Vec<Mutex<BTreeMap<Millis, u64>>>,
    /// Every code ever issued. Held in memory, persisted by `checkpoint`.
    filter: RwLock<CodeFilter>,
    /// The watermark of the filter file on disk (`None`: none that matches memory). Held
    /// across a whole checkpoint, so that two checkpoints never interleave.
    saved_watermark: Mutex<Option<u64>>,
    filter_path: PathBuf,
    filter_fp_rate: f64,
    flusher: Flusher,
    /// Refuses writes before the disk is full ([`space`]).
    space: space::SpaceGuard,
    /// Gives sled's cache capacity to its page table as the store grows ([`page_table`]).
    page_table: Arc<page_table::PageTableWatch>,
    report: OpenReport,
}

/// The room a batch of visits asks the space guard for.
fn visit_bytes(visits: usize) -> u64 {
    u64::try_from(visits)
        .unwrap_or(u64::MAX)
        .saturating_mul(space::BYTES_PER_VISIT)
}

impl LinkStore for SledStore {
    fn submit_create(&self, new: NewLink, done: CreateDone) {
        self.submit_create_impl(new, done)
    }

    fn resolve(&self, code: &str) -> StoreResult<Option<ActiveEntry>> {
        self.resolve_impl(code)
    }

    fn may_exist(&self, code: &str) -> bool {
        self.filter.read().check(code)
    }

    fn link_by_code(&self, code: &str) -> StoreResult<Option<Link>> {
        self.link_by_code_impl(code)
    }

    fn link_by_id(&self, id: u64) -> StoreResult<Option<Link>> {
        self.link_by_id_impl(id)
    }

    fn update_link(&self, code: &str, patch: &LinkPatch, now: Millis) -> StoreResult<Link> {
        self.space.admit(0)?;
        self.update_link_impl(code, patch, now)
    }

    fn delete_link(&self, code: &str, now: Millis) -> StoreResult<Link> {
        self.space.admit(0)?;
        self.delete_link_impl(code, now)
    }

    fn expire_links(&self, ids: &[u64], now: Millis) -> StoreResult<Vec<Link>> {
        self.space.admit(0)?;
        self.expire_links_impl(ids, now)
    }

    fn recycle_link(&self, id: u64, score: Millis) -> StoreResult<Option<Link>> {
        self.space.admit(0)?;
        self.recycle_link_impl(id, score)
    }

    fn list_links(&self, query: &LinkQuery) -> StoreResult<LinkPage> {
        self.list_links_impl(query)
    }

    fn due_for_expiry(&self, now: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.scan_index(&self.expiry, now, limit)
    }

    fn due_for_recycling(&self, ended_before: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.scan_index(&self.ended, ended_before.saturating_sub(1), limit)
    }

    fn retire_link(&self, id: u64) -> StoreResult<bool> {
        self.space.admit(0)?;
        self.retire_link_impl(id)
    }

    fn import_links(&self, links: &[Link]) -> StoreResult<Vec<Imported>> {
        self.space.admit(0)?;
        // One transaction per code length, under that length's pool lock; an archived record
        // owns no code and goes alone.
        let mut groups: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
        let mut alone = Vec::new();
        for (at, link) in links.iter().enumerate() {
            if link.status == LinkStatus::Archived {
                alone.push(vec![at]);
            } else {
                groups.entry(Some(link.code.len())).or_default().push(at);
            }
        }
        if alone.is_empty() && groups.len() == 1 {
            // One length, as the importer sends them: no copy.
            return self.import_links_impl(links);
        }
        let mut results: Vec<Option<Imported>> = vec![None; links.len()];
        for group in groups.into_values().chain(alone) {
            let batch: Vec<Link> = group.iter().map(|&at| links[at].clone()).collect();
            for (at, imported) in group.into_iter().zip(self.import_links_impl(&batch)?) {
                results[at] = Some(imported);
            }
        }
        results
            .into_iter()
            .map(|r| r.ok_or_else(|| backend("an imported record got no result")))
            .collect()
    }

    fn dedup_target(&self, space: &str, length: u8, url: &str) -> StoreResult<Option<Link>> {
        self.dedup_target_impl(space, length, url)
    }

    fn link_counts(&self) -> StoreResult<LinkCounts> {
        self.link_counts_impl()
    }
}

impl PoolStore for SledStore {
    fn pool_add(&self, batch: &PoolBatch) -> StoreResult<PoolAdded> {
        self.space.admit(0)?;
        self.pool_add_impl(batch)
    }

    fn pool_counts(&self, length: u8, now: Millis) -> StoreResult<PoolCounts> {
        self.pool_counts_impl(length, now)
    }

    fn pool_below(&self, length: u8, now: Millis, level: u64) -> StoreResult<bool> {
        // The counts are counters in memory: as cheap as any shortcut.
        Ok(self.pool_counts_impl(length, now)?.available < level)
    }

    fn in_pool(&self, code: &str) -> StoreResult<bool> {
        Ok(self.in_pool_impl(code))
    }

    fn pool_peek(&self, length: u8, limit: usize) -> StoreResult<Vec<(Millis, String)>> {
        self.pool_peek_impl(length, limit)
    }

    fn strategy_state(&self, length: u8) -> StoreResult<Option<Vec<u8>>> {
        self.meta_get(&keys::strategy_state_key(length))
    }
}

impl VisitStore for SledStore {
    fn record_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.space.admit(visit_bytes(visits.len()))?;
        self.record_visits_impl(visits)
    }

    fn import_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.space.admit(visit_bytes(visits.len()))?;
        self.import_visits_impl(visits)
    }

    fn last_visit_id(&self) -> StoreResult<u64> {
        self.counter(counter::VISIT_ID)
    }

    fn recent_visits(
        &self,
        link_id: u64,
        before: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        self.recent_visits_impl(link_id, before, limit)
    }

    fn visits_page(
        &self,
        link_id: u64,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        self.visits_page_impl(link_id, after, limit)
    }

    fn visit_totals(&self, link_id: u64) -> StoreResult<VisitTotals> {
        self.visit_totals_impl(link_id)
    }

    fn visit_summary(&self, link_id: u64, from: Millis, to: Millis) -> StoreResult<VisitSummary> {
        self.visit_summary_impl(link_id, from, to)
    }

    fn prune_visits(&self, before: Millis, limit: usize) -> StoreResult<u64> {
        self.space.admit(0)?;
        self.prune_visits_impl(before, limit)
    }

    fn day_counts(&self, from_day: u64, to_day: u64) -> StoreResult<Vec<DayCount>> {
        self.day_counts_impl(from_day, to_day)
    }
}

impl StoreOps for SledStore {
    fn checkpoint(&self) -> StoreResult<()> {
        self.checkpoint_impl()
    }

    fn sync(&self) -> StoreResult<()> {
        self.flusher.wait_durable()
    }

    fn ping(&self) -> StoreResult<()> {
        self.counters
            .get(counter::LINK_ID)
            .map(|_| ())
            .map_err(backend)
    }

    fn write_fault(&self) -> Option<StorageFault> {
        self.flusher.fault().or_else(|| self.space.fault())
    }

    fn commit_stats(&self) -> CommitStats {
        self.flusher.stats()
    }

    fn memory_held(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("sled_page_table", self.page_table.table_bytes()),
            ("sled_cache_capacity", self.page_table.cache_capacity()),
        ]
    }

    /// Only this process writes the directory (sled holds its lock).
    fn cluster(&self) -> Option<&dyn Cluster> {
        None
    }

    fn close(&self) -> StoreResult<()> {
        self.close_impl()
    }
}
