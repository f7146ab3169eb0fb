//! The embedded `Store`: sled 0.34 trees with MessagePack values. The only code in the crate
//! that says `sled::`. This file holds the store's struct and its options; each capability
//! trait is implemented in the file that owns its behaviour (named in brackets), calling into
//! the other files' helpers where a trait spans several:
//!
//! | file | owns |
//! |---|---|
//! | `open.rs` | opening, recovery checks, the code filter and its checkpoints, closing, flushes and faults (`StoreOps`) |
//! | `links.rs` | creating one link, resolving, reading, updating, deleting, expiring, recycling, listing (`LinkStore`) |
//! | `group.rs` | the create committer: pooled creates applied many to one transaction |
//! | `pools.rs` | the code pools, their counters and cooling counts, strategy states (`PoolStore`); the `meta` tree (`MetaStore`) |
//! | `quotas.rs` | plans' usage counters, in memory and counted again after each open (`QuotaStore`) |
//! | `visits/` | visit blocks and their counters: writing, listings, totals, pruning, older layouts (`VisitStore`, in `read.rs`) |
//! | `visit_index.rs` | the per-link index of visit blocks, folded from memory every few seconds |
//! | `visit_counts.rs` | the per-link day counters held in memory, and their fold |
//! | `leads.rs` | leads left through links' forms, by link (`LeadStore`) |
//! | `reviews.rs` | the review queue (leases in memory), finished reviews, each link's latest verdict (`ReviewStore`) |
//! | `outbox.rs` | the webhook outbox (leases in memory), its order per key, the delivery log (`OutboxStore`) |
//! | `accounts.rs` | users, teams, memberships, identities, run-time keys under one version; the audit log (`AccountStore`) |
//! | `domains.rs` | domains and their host index (`DomainStore`) |
//! | `tls.rs` | HTTPS's certificate state: the ACME account, certificates, challenge answers (`TlsStore`) |
//! | `claims.rs` | visit caps: redirects counted durably against a link's and its targets' caps (`CapStore`) |
//! | `import.rs` | bulk import of links, one code length at a time |
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

mod accounts;
mod check;
mod chunked;
mod claims;
mod codec;
mod domains;
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
mod quotas;
mod reviews;
mod space;
mod tls;
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
use crate::codes::filter::CodeFilter;
use crate::{Durability, Millis};

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
    /// Account records by kind and id, and the audit log by entry id ([`accounts`]).
    accounts: sled::Tree,
    audit: sled::Tree,
    /// Domains by id and their host index ([`domains`]).
    domains: sled::Tree,
    /// HTTPS's certificate state by key ([`tls`]).
    tls: sled::Tree,
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
    /// Plans' usage counters ([`quotas`]): in memory only, since only this process writes
    /// this store; each is counted again from the records when first used after an open.
    quotas: Mutex<std::collections::HashMap<String, u64>>,
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
