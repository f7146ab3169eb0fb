//! The embedded [`Store`]: sled 0.34 trees with MessagePack values. The only code in the crate
//! that says `sled::`.
//!
//! Every write is one multi-tree transaction followed by a group-committed flush
//! ([`flusher`]). Transaction closures may run more than once, so they do no I/O, read no
//! clock and send on no channel; everything they need is computed before.
//!
//! Pool takes are ZPOPMIN: the first key of `pool/<L>` (lowest score) is read outside the
//! transaction under a per-length mutex, then removed inside the transaction that writes the
//! link, after checking it is still there. Custom creates can remove pooled codes concurrently;
//! the check makes them lose nothing and hand nothing out twice.

mod check;
mod filter_file;
mod flusher;
mod group;
mod import;
mod keys;
mod visits;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock};
use rand::RngExt;
use sled::transaction::{
    abort, ConflictableTransactionError, TransactionError, TransactionalTree,
    UnabortableTransactionError,
};
use sled::Transactional;

pub use self::check::CheckReport;
pub use self::flusher::FlushStats;
use self::flusher::Flusher;
use self::keys::{counter, read_u64};
use crate::codes::filter::CodeFilter;
use crate::store::{
    ActiveEntry, CodeChoice, Created, DayCount, Durability, Imported, Link, LinkCounts, LinkPage,
    LinkPatch, LinkQuery, LinkStatus, Millis, NewLink, NewVisit, PoolAdded, PoolBatch, PoolCounts,
    StorageFault, Store, StoreError, StoreResult, VisitPage, VisitSummary, VisitTotals,
};

/// Longest code the store keeps a pool tree for (custom codes may sit in any of them).
const MAX_LEN: u8 = 16;
/// At most this many records are scanned for one page of a filtered listing, so that a rare
/// filter cannot turn one request into a full scan; the cursor lets the caller go on.
const LIST_SCAN_BUDGET: usize = 100_000;
/// Codes per pool-add transaction.
const POOL_ADD_CHUNK: usize = 256;
/// Milliseconds in a UTC day.
const DAY_MS: u64 = 86_400_000;

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
    codes: sled::Tree,
    active: sled::Tree,
    dedup: sled::Tree,
    expiry: sled::Tree,
    ended: sled::Tree,
    members: sled::Tree,
    counters: sled::Tree,
    meta: sled::Tree,
    visit_blocks: sled::Tree,
    visit_index: sled::Tree,
    visit_days: sled::Tree,
    visit_totals: sled::Tree,
    /// `pool/<L>` for L in 1..=16, index L-1.
    pools: Vec<sled::Tree>,
    /// One per length: serialises ZPOPMIN so concurrent takers do not race for the same head.
    takers: Vec<Mutex<()>>,
    /// One per length: pooled creates waiting to be applied together ([`group`]).
    create_queues: Vec<group::CreateQueue>,
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
    report: OpenReport,
}

/// Why a transaction gave up.
#[derive(Debug)]
enum Abort {
    CodeTaken,
    /// The pool head was taken between reading it and the transaction: try the next one.
    Raced,
    NotFound,
    WrongStatus(LinkStatus),
    Corrupt(&'static str, String),
    /// A pooled code is also owned by a link (the trees disagree).
    Owned,
}

type TxResult<T> = Result<T, ConflictableTransactionError<Abort>>;

fn backend(e: impl std::fmt::Display) -> StoreError {
    classify(e.to_string())
}

/// The storage fault of this process, set by the first I/O error (see [`classify`]). One store
/// per process in the server; a static because every sled call site reports through
/// [`backend`], which has no store at hand.
static FAULT: parking_lot::Mutex<Option<StorageFault>> = parking_lot::Mutex::new(None);

/// Sorts a sled or file-system failure: out of space → [`StoreError::Full`], another I/O
/// error → [`StoreError::Unavailable`] (both recorded as the process's storage fault, logged
/// once per episode), anything else → [`StoreError::Backend`].
pub(crate) fn classify(detail: String) -> StoreError {
    let full = detail.contains("os error 28")
        || detail.contains("No space left")
        || detail.contains("os error 122");
    let io = full || detail.contains("IO error") || detail.contains("os error");
    if !io {
        return StoreError::Backend(detail);
    }
    let reason = if full {
        "storage_full"
    } else {
        "storage_unavailable"
    };
    let mut fault = FAULT.lock();
    if fault.is_none() {
        tracing::error!(reason, error = %detail, "storage fault: writes fail until the store is reopened");
        *fault = Some(StorageFault {
            reason,
            detail: detail.clone(),
        });
    }
    if full {
        StoreError::Full(detail)
    } else {
        StoreError::Unavailable(detail)
    }
}

/// The process's storage fault, if one happened.
pub fn storage_fault() -> Option<StorageFault> {
    FAULT.lock().clone()
}

fn tx_error(e: TransactionError<Abort>, code: &str) -> StoreError {
    match e {
        TransactionError::Abort(Abort::CodeTaken) => StoreError::CodeTaken(code.to_string()),
        TransactionError::Abort(Abort::Raced) => StoreError::Backend("pool race".into()),
        TransactionError::Abort(Abort::Owned) => StoreError::Corrupt {
            tree: "pool",
            detail: format!("pooled code `{code}` is owned by a link"),
        },
        TransactionError::Abort(Abort::NotFound) => StoreError::NotFound,
        TransactionError::Abort(Abort::WrongStatus(s)) => StoreError::WrongStatus(s),
        TransactionError::Abort(Abort::Corrupt(tree, detail)) => {
            StoreError::Corrupt { tree, detail }
        }
        TransactionError::Storage(e) => backend(e),
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Encoding our own plain structs into a Vec cannot fail.
    rmp_serde::to_vec(value).unwrap_or_default()
}

fn decode_link(bytes: &[u8]) -> StoreResult<Link> {
    rmp_serde::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        tree: "links",
        detail: e.to_string(),
    })
}

/// Decodes one stored record of `tree` (`links`, `active`, `visit_blocks`, `days`, `pool/<L>`,
/// `pool_members`, `expiry`, `ended`, `counters`) the way the store reads it. A corrupt record
/// is an error, never a panic: the fuzz targets (`fuzz/`) feed this arbitrary bytes.
pub fn check_record(tree: &str, key: &[u8], value: &[u8]) -> StoreResult<()> {
    let malformed = |tree: &'static str| StoreError::Corrupt {
        tree,
        detail: "malformed record".into(),
    };
    match tree {
        "links" => decode_link(value).map(drop),
        "active" => rmp_serde::from_slice::<ActiveEntry>(value)
            .map(drop)
            .map_err(|e| StoreError::Corrupt {
                tree: "active",
                detail: e.to_string(),
            }),
        // `visits` is the fuzz target's older name for the same records.
        "visit_blocks" | "visits" => visits::check_block(value),
        "days" => visits::decode_day(value),
        "pool_members" => {
            let code = std::str::from_utf8(key).map_err(|_| malformed("pool_members"))?;
            keys::pool_key_of_member(code, value)
                .map(drop)
                .ok_or_else(|| malformed("pool_members"))
        }
        "expiry" | "ended" => keys::split_time_id(key)
            .map(drop)
            .ok_or_else(|| malformed("expiry")),
        "counters" => read_u64(value)
            .map(drop)
            .ok_or_else(|| malformed("counters")),
        pool => {
            let length = pool
                .strip_prefix("pool/")
                .and_then(|l| l.parse::<u8>().ok())
                .ok_or_else(|| backend(format!("no tree named `{tree}`")))?;
            keys::split_pool_key(key, length)
                .map(drop)
                .ok_or_else(|| malformed("pool"))
        }
    }
}

/// A link id stored as an index value: a damaged one is corruption, not "no such link".
fn stored_id(tree: &'static str, bytes: &[u8]) -> StoreResult<u64> {
    match bytes.len() {
        8 => read_u64(bytes).ok_or_else(|| StoreError::Corrupt {
            tree,
            detail: "malformed link id".into(),
        }),
        n => Err(StoreError::Corrupt {
            tree,
            detail: format!("a link id of {n} bytes, not 8"),
        }),
    }
}

/// Takes a chosen code (custom or imported) out of its pool, inside a transaction: the member
/// entry names the pool key, tiebreak included. Returns the score it had, or `None` when the code
/// was not pooled. The caller adjusts the pool's size counter.
fn take_out_of_pool(
    members: &TransactionalTree,
    pool: &TransactionalTree,
    code: &str,
) -> TxResult<Option<Millis>> {
    let Some(member) = members.remove(code.as_bytes())? else {
        return Ok(None);
    };
    let Some((score, key)) = keys::pool_key_of_member(code, &member) else {
        return abort(Abort::Corrupt(
            "pool_members",
            format!("malformed entry of `{code}`"),
        ));
    };
    pool.remove(key)?;
    Ok(Some(score))
}

fn tx_decode_link(bytes: &[u8]) -> TxResult<Link> {
    rmp_serde::from_slice(bytes).or_else(|e| abort(Abort::Corrupt("links", e.to_string())))
}

fn bump(tx: &TransactionalTree, key: &[u8], delta: i64) -> Result<(), UnabortableTransactionError> {
    let current = tx.get(key)?.and_then(|v| read_u64(&v)).unwrap_or(0);
    let next = current.saturating_add_signed(delta);
    tx.insert(key, &next.to_be_bytes()[..])?;
    Ok(())
}

fn bump_status(
    tx: &TransactionalTree,
    from: Option<LinkStatus>,
    to: LinkStatus,
) -> Result<(), UnabortableTransactionError> {
    if let Some(from) = from {
        bump(tx, &counter::links(from), -1)?;
    }
    bump(tx, &counter::links(to), 1)
}

/// The code length of `pools[index]`.
fn pool_length(index: usize) -> u8 {
    u8::try_from(index + 1).unwrap_or(MAX_LEN)
}

fn length_of(code: &str) -> Option<u8> {
    u8::try_from(code.len())
        .ok()
        .filter(|l| (1..=MAX_LEN).contains(l))
}

/// Removes a link's dedup entry if it still points at the link.
fn unlink_dedup(dedup: &TransactionalTree, link: &Link) -> Result<(), UnabortableTransactionError> {
    if link.custom {
        return Ok(());
    }
    let key = keys::dedup_key(&link.space, link.length(), &link.url);
    if dedup.get(&key)?.and_then(|v| read_u64(&v)) == Some(link.id) {
        dedup.remove(key)?;
    }
    Ok(())
}

impl SledStore {
    /// Opens (or creates) the store in `options.path`, rebuilding the code filter if it is
    /// missing or stale.
    pub fn open(options: &StoreOptions) -> StoreResult<Self> {
        std::fs::create_dir_all(&options.path).map_err(|e| {
            backend(format!(
                "cannot create data directory {}: {e}",
                options.path.display()
            ))
        })?;
        let db_path = options.path.join("db");
        let config = sled::Config::new()
            .path(&db_path)
            .cache_capacity(options.cache_capacity_bytes)
            // Durability comes from our own group-committed flushes; the background flush only
            // bounds how much unacknowledged work a crash can lose.
            .flush_every_ms(Some(1000));
        // sled releases its file lock when its last background thread lets go of the previous
        // handle, a moment after that handle is dropped; a quick reopen in the same process
        // (tests) waits for it rather than failing.
        let started = std::time::Instant::now();
        let db = loop {
            match config.open().map_err(|e| open_error(e, &options.path)) {
                Err(StoreError::Locked(_)) if started.elapsed() < options.lock_wait => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => break other?,
            }
        };
        let tree = |name: &str| db.open_tree(name).map_err(backend);
        let pools = (1..=MAX_LEN)
            .map(|l| tree(&keys::pool_tree_name(l)))
            .collect::<StoreResult<Vec<_>>>()?;
        // The visit trees of the layout before blocks, emptied into blocks below.
        let (old_visits, old_log) = (tree("visits")?, tree("visit_log")?);
        let flusher = Flusher::start(db.clone(), &db_path, options.durability)?;
        let mut store = Self {
            links: tree("links")?,
            codes: tree("codes")?,
            active: tree("active")?,
            dedup: tree("dedup")?,
            expiry: tree("expiry")?,
            ended: tree("ended")?,
            members: tree("pool_members")?,
            counters: tree("counters")?,
            meta: tree("meta")?,
            visit_blocks: tree("visit_blocks")?,
            visit_index: tree("visit_index")?,
            visit_days: tree("visit_days")?,
            visit_totals: tree("visit_totals")?,
            pools,
            takers: (0..MAX_LEN).map(|_| Mutex::new(())).collect(),
            create_queues: (0..MAX_LEN).map(|_| group::CreateQueue::default()).collect(),
            cooling: (0..MAX_LEN).map(|_| Mutex::new(BTreeMap::new())).collect(),
            filter: RwLock::new(CodeFilter::new(1000, options.filter_fp_rate)),
            saved_watermark: Mutex::new(None),
            filter_path: options.path.join("codes.bloom"),
            filter_fp_rate: options.filter_fp_rate,
            report: OpenReport {
                recovered: db.was_recovered(),
                filter_rebuilt: None,
                counters_corrected: Vec::new(),
                visits_migrated: 0,
            },
            flusher,
            db,
        };
        store.check_pool_sizes()?;
        let moved = store.migrate_visit_chunks(&old_visits, &old_log)?;
        if moved > 0 {
            tracing::info!(visits = moved, "visit records moved into blocks");
            store.report.visits_migrated = moved;
        }
        store.load_cooling()?;
        store.load_filter(options.filter_capacity)?;
        Ok(store)
    }

    /// What happened while opening.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// Bytes the store's files take on disk.
    pub fn size_on_disk(&self) -> StoreResult<u64> {
        self.db.size_on_disk().map_err(backend)
    }

    fn pool(&self, length: u8) -> Option<&sled::Tree> {
        self.pools.get(usize::from(length).checked_sub(1)?)
    }

    fn counter(&self, key: &[u8]) -> StoreResult<u64> {
        Ok(self
            .counters
            .get(key)
            .map_err(backend)?
            .and_then(|v| read_u64(&v))
            .unwrap_or(0))
    }

    /// Counters change in the same transactions as the trees, so they cannot drift; this
    /// re-counts the pools (small) at every start anyway and corrects any that disagree, as a
    /// guard against bugs and hand-edited data.
    fn check_pool_sizes(&mut self) -> StoreResult<()> {
        for (i, pool) in self.pools.iter().enumerate() {
            let length = u8::try_from(i + 1).unwrap_or(u8::MAX);
            let key = counter::pool_size(length);
            let counted = pool.len() as u64;
            let stored = self.counter(&key)?;
            if counted != stored {
                self.counters
                    .insert(key, &counted.to_be_bytes()[..])
                    .map_err(backend)?;
                self.report
                    .counters_corrected
                    .push(format!("pool.{length}.size: {stored} → {counted}"));
            }
        }
        Ok(())
    }

    fn load_cooling(&self) -> StoreResult<()> {
        // Entries due in the future at open time. The clock read is the open time only; later
        // counts use the caller's `now`.
        let now = crate::clock::system_now();
        for (i, pool) in self.pools.iter().enumerate() {
            let mut map = self.cooling[i].lock();
            for item in pool.range(keys::u64_key(now.saturating_add(1))..) {
                let (key, _) = item.map_err(backend)?;
                if let Some((score, _)) = keys::split_pool_key(&key, pool_length(i)) {
                    *map.entry(score).or_default() += 1;
                }
            }
        }
        Ok(())
    }

    fn note_cooling(&self, length: u8, score: Millis, delta: i64) {
        let Some(slot) = usize::from(length).checked_sub(1) else {
            return;
        };
        let mut map = self.cooling[slot].lock();
        let entry = map.entry(score).or_default();
        *entry = entry.saturating_add_signed(delta);
        if *entry == 0 {
            map.remove(&score);
        }
    }

    fn load_filter(&mut self, capacity: u64) -> StoreResult<()> {
        let issued = self.counter(counter::CODES_ISSUED)?;
        let reason = match filter_file::load(&self.filter_path) {
            Ok(Some((watermark, filter))) if watermark == issued && !filter.is_over_capacity() => {
                *self.filter.get_mut() = filter;
                *self.saved_watermark.get_mut() = Some(watermark);
                return Ok(());
            }
            Ok(Some((watermark, _))) if watermark != issued => {
                format!("stale: saved at {watermark} issued codes, the store has issued {issued}")
            }
            Ok(Some(_)) => "over capacity".to_string(),
            Ok(None) if issued == 0 => {
                *self.filter.get_mut() = CodeFilter::new(capacity, self.filter_fp_rate);
                return Ok(());
            }
            Ok(None) => "missing".to_string(),
            Err(e) => format!("unreadable: {e}"),
        };
        let rebuilt = self.rebuild_filter(capacity.max(issued.saturating_mul(2)))?;
        // Codes only move between links and pools, so the trees hold exactly the codes issued.
        if rebuilt.inserted() != issued {
            tracing::warn!(
                counted = rebuilt.inserted(),
                counter = issued,
                "the issued-codes counter disagreed with the trees; corrected"
            );
            self.counters
                .insert(counter::CODES_ISSUED, &rebuilt.inserted().to_be_bytes()[..])
                .map_err(backend)?;
        }
        *self.filter.get_mut() = rebuilt;
        *self.saved_watermark.get_mut() = None;
        self.report.filter_rebuilt = Some(reason);
        self.checkpoint()
    }

    /// A new filter holding every code that exists: owned by a link or sitting in a pool.
    /// Codes only ever move between these two places, so their union is every code issued.
    fn rebuild_filter(&self, capacity: u64) -> StoreResult<CodeFilter> {
        let mut filter = CodeFilter::new(capacity, self.filter_fp_rate);
        for tree in [&self.codes, &self.members] {
            for item in tree.iter().keys() {
                let key = item.map_err(backend)?;
                if let Ok(code) = std::str::from_utf8(&key) {
                    filter.insert(code);
                }
            }
        }
        Ok(filter)
    }

    fn filter_insert<'a>(&self, codes: impl IntoIterator<Item = &'a str>) {
        let mut filter = self.filter.write();
        for code in codes {
            filter.insert(code);
        }
    }

    /// The lowest-score pool entry of `length` that is due at `now`.
    fn pool_head(
        &self,
        pool: &sled::Tree,
        length: u8,
        now: Millis,
    ) -> StoreResult<Option<(Vec<u8>, String)>> {
        let Some(item) = pool.iter().next() else {
            return Ok(None);
        };
        let (key, _) = item.map_err(backend)?;
        match keys::split_pool_key(&key, length) {
            Some((score, code)) if score <= now => Ok(Some((key.to_vec(), code.to_string()))),
            Some(_) => Ok(None),
            None => Err(StoreError::Corrupt {
                tree: "pool",
                detail: "malformed key".into(),
            }),
        }
    }

    fn find_dedup(&self, new: &NewLink, length: u8) -> StoreResult<Option<Link>> {
        let key = keys::dedup_key(&new.space, length, &new.url);
        let Some(id) = self.dedup.get(key).map_err(backend)? else {
            return Ok(None);
        };
        let link = self.link_by_id(stored_id("dedup", &id)?)?;
        Ok(link.filter(|l| l.status == LinkStatus::Active && !l.is_expired_at(new.now)))
    }

    /// The create transaction. `taken` is the pool key to remove (pool creates) or `None`
    /// (custom creates, which remove their code from a pool themselves if it is there).
    fn create_tx(
        &self,
        new: &NewLink,
        code: &str,
        taken: Option<&[u8]>,
    ) -> Result<(Created, Option<Millis>), TransactionError<Abort>> {
        let length = length_of(code).ok_or(TransactionError::Abort(Abort::CodeTaken))?;
        let pool = self
            .pool(length)
            .ok_or(TransactionError::Abort(Abort::CodeTaken))?;
        let dedup_key = (!matches!(new.code, CodeChoice::Custom(_)))
            .then(|| keys::dedup_key(&new.space, length, &new.url));
        let trees = (
            &self.links,
            &self.codes,
            &self.active,
            &self.dedup,
            &self.expiry,
            pool,
            &self.members,
            &self.counters,
        );
        trees.transaction(
            |(links, codes, active, dedup, expiry, pool, members, counters)| {
                if let (Some(key), true) = (&dedup_key, new.dedup) {
                    if let Some(id) = dedup.get(key)? {
                        if let Some(bytes) = links.get(id)? {
                            let link = tx_decode_link(&bytes)?;
                            if link.status == LinkStatus::Active && !link.is_expired_at(new.now) {
                                return Ok((Created::Existing(link), None));
                            }
                        }
                    }
                }
                let mut unpooled = None;
                match taken {
                    Some(pool_key) => {
                        if pool.remove(pool_key)?.is_none() {
                            return abort(Abort::Raced);
                        }
                        if codes.get(code.as_bytes())?.is_some() {
                            // Never reachable when the trees agree; if they ever disagree,
                            // refuse to give one code to two links.
                            return abort(Abort::Owned);
                        }
                        members.remove(code.as_bytes())?;
                        bump(counters, &counter::pool_size(length), -1)?;
                    }
                    None => {
                        if codes.get(code.as_bytes())?.is_some() {
                            return abort(Abort::CodeTaken);
                        }
                        match take_out_of_pool(members, pool, code)? {
                            Some(score) => {
                                unpooled = Some(score);
                                bump(counters, &counter::pool_size(length), -1)?;
                            }
                            // A code never issued before: it counts as issued now.
                            None => bump(counters, counter::CODES_ISSUED, 1)?,
                        }
                    }
                }
                let id = counters
                    .get(counter::LINK_ID)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0)
                    + 1;
                counters.insert(counter::LINK_ID, &id.to_be_bytes()[..])?;
                let link = Link {
                    id,
                    code: code.to_string(),
                    url: new.url.clone(),
                    space: new.space.clone(),
                    custom: taken.is_none(),
                    created_at: new.now,
                    expires_at: new.expires_at,
                    status: LinkStatus::Active,
                    title: new.title.clone(),
                    tags: new.tags.clone(),
                    updated_at: new.now,
                    deleted_at: None,
                };
                let id_key = keys::u64_key(id);
                links.insert(&id_key[..], encode(&link))?;
                codes.insert(code.as_bytes(), &id_key[..])?;
                let entry = ActiveEntry {
                    id,
                    url: link.url.clone(),
                    expires_at: link.expires_at,
                };
                active.insert(code.as_bytes(), encode(&entry))?;
                if let Some(key) = &dedup_key {
                    dedup.insert(key.as_slice(), &id_key[..])?;
                }
                if let Some(at) = link.expires_at {
                    expiry.insert(&keys::time_id_key(at, id)[..], &[][..])?;
                }
                bump_status(counters, None, LinkStatus::Active)?;
                bump(counters, &counter::day_creates(new.now / DAY_MS), 1)?;
                Ok((Created::New(link), unpooled))
            },
        )
    }

    fn create_from_pool(&self, new: &NewLink, length: u8) -> StoreResult<Created> {
        let pool = self.pool(length).ok_or(StoreError::PoolEmpty(length))?;
        let _taker = self.takers[usize::from(length) - 1].lock();
        loop {
            let Some((key, code)) = self.pool_head(pool, length, new.now)? else {
                // Nothing to take, but a dedup hit needs no code.
                if new.dedup {
                    if let Some(link) = self.find_dedup(new, length)? {
                        return Ok(Created::Existing(link));
                    }
                }
                return Err(StoreError::PoolEmpty(length));
            };
            match self.create_tx(new, &code, Some(&key)) {
                Ok((created, _)) => return Ok(created),
                // A custom create took this code from the pool first.
                Err(TransactionError::Abort(Abort::Raced)) => continue,
                Err(TransactionError::Abort(Abort::Owned)) => {
                    tracing::error!(code = %code, "a pooled code is owned by a link; dropping it from the pool");
                    self.drop_pool_entry(pool, &key, &code)?;
                }
                Err(e) => return Err(tx_error(e, &code)),
            }
        }
    }

    fn create_custom(&self, new: &NewLink, code: &str) -> StoreResult<Created> {
        // Into the filter before the commit, so that the filter always covers what is
        // committed (see `checkpoint`). If the create fails, the code is a harmless false
        // positive.
        self.filter_insert([code]);
        let (created, unpooled) = self
            .create_tx(new, code, None)
            .map_err(|e| tx_error(e, code))?;
        // The code left its pool (with the score the transaction saw): it is no longer
        // cooling there.
        if let (Some(score), Some(length)) = (unpooled, length_of(code)) {
            self.note_cooling(length, score, -1);
        }
        Ok(created)
    }

    /// Removes one entry from a pool (and its membership), keeping the size counter right.
    fn drop_pool_entry(&self, pool: &sled::Tree, key: &[u8], code: &str) -> StoreResult<()> {
        let length = length_of(code).unwrap_or(0);
        (pool, &self.members, &self.counters)
            .transaction(|(pool, members, counters)| {
                if pool.remove(key)?.is_some() {
                    members.remove(code.as_bytes())?;
                    bump(counters, &counter::pool_size(length), -1)?;
                }
                Ok(())
            })
            .map_err(|e: TransactionError<Abort>| tx_error(e, code))
    }

    /// Reads a link by code inside a transaction.
    fn tx_link_by_code(
        codes: &TransactionalTree,
        links: &TransactionalTree,
        code: &str,
    ) -> TxResult<Link> {
        let Some(id) = codes.get(code.as_bytes())? else {
            return abort(Abort::NotFound);
        };
        let Some(bytes) = links.get(id)? else {
            return abort(Abort::NotFound);
        };
        tx_decode_link(&bytes)
    }

    fn scan_index(&self, tree: &sled::Tree, upto: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        let mut out = Vec::new();
        for item in tree.range(..keys::u64_key(upto.saturating_add(1))) {
            if out.len() >= limit {
                break;
            }
            let (key, _) = item.map_err(backend)?;
            let Some((_, id)) = keys::split_time_id(&key) else {
                continue;
            };
            if let Some(link) = self.link_by_id(id)? {
                out.push(link);
            }
        }
        Ok(out)
    }
}

fn open_error(e: sled::Error, path: &Path) -> StoreError {
    let text = e.to_string();
    if text.contains("lock") || text.contains("WouldBlock") {
        StoreError::Locked(path.display().to_string())
    } else {
        backend(format!("cannot open store at {}: {text}", path.display()))
    }
}

impl Store for SledStore {
    fn create_link(&self, new: &NewLink) -> StoreResult<Created> {
        let created = {
            let _committing = self.flusher.committing();
            match &new.code {
                CodeChoice::Pool(length) if self.pool(*length).is_some() => {
                    self.create_from_pool_grouped(new, *length)?
                }
                CodeChoice::Pool(length) => return Err(StoreError::PoolEmpty(*length)),
                CodeChoice::Custom(code) => self.create_custom(new, code)?,
            }
        };
        // A dedup hit may return a link whose own create is still waiting for its flush:
        // answer only once that link is durable too.
        self.flusher.wait_durable()?;
        Ok(created)
    }

    fn resolve(&self, code: &str) -> StoreResult<Option<ActiveEntry>> {
        let Some(bytes) = self.active.get(code.as_bytes()).map_err(backend)? else {
            return Ok(None);
        };
        rmp_serde::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                tree: "active",
                detail: format!("code `{code}`: {e}"),
            })
    }

    fn may_exist(&self, code: &str) -> bool {
        self.filter.read().check(code)
    }

    fn link_by_code(&self, code: &str) -> StoreResult<Option<Link>> {
        let Some(id) = self.codes.get(code.as_bytes()).map_err(backend)? else {
            return Ok(None);
        };
        self.link_by_id(stored_id("codes", &id).map_err(|e| match e {
            StoreError::Corrupt { tree, detail } => StoreError::Corrupt {
                tree,
                detail: format!("{detail} (code `{code}`)"),
            },
            other => other,
        })?)
    }

    fn link_by_id(&self, id: u64) -> StoreResult<Option<Link>> {
        self.links
            .get(keys::u64_key(id))
            .map_err(backend)?
            .map(|bytes| {
                decode_link(&bytes).map_err(|e| match e {
                    StoreError::Corrupt { tree, detail } => StoreError::Corrupt {
                        tree,
                        detail: format!("link id {id}: {detail}"),
                    },
                    other => other,
                })
            })
            .transpose()
    }

    fn update_link(&self, code: &str, patch: &LinkPatch, now: Millis) -> StoreResult<Link> {
        let trees = (
            &self.links,
            &self.codes,
            &self.active,
            &self.dedup,
            &self.expiry,
        );
        let link = trees
            .transaction(|(links, codes, active, dedup, expiry)| {
                let old = Self::tx_link_by_code(codes, links, code)?;
                if old.status != LinkStatus::Active {
                    return abort(Abort::WrongStatus(old.status));
                }
                let mut link = old.clone();
                if let Some(url) = &patch.url {
                    link.url = url.clone();
                }
                if let Some(expires_at) = patch.expires_at {
                    link.expires_at = expires_at;
                }
                if let Some(title) = &patch.title {
                    link.title = title.clone();
                }
                if let Some(tags) = &patch.tags {
                    link.tags = tags.clone();
                }
                link.updated_at = now;
                if link.url != old.url && !link.custom {
                    unlink_dedup(dedup, &old)?;
                    let key = keys::dedup_key(&link.space, link.length(), &link.url);
                    // Another active link may already be the dedup target for the new URL.
                    if dedup.get(&key)?.is_none() {
                        dedup.insert(key, &keys::u64_key(link.id)[..])?;
                    }
                }
                if link.expires_at != old.expires_at {
                    if let Some(at) = old.expires_at {
                        expiry.remove(&keys::time_id_key(at, link.id)[..])?;
                    }
                    if let Some(at) = link.expires_at {
                        expiry.insert(&keys::time_id_key(at, link.id)[..], &[][..])?;
                    }
                }
                let entry = ActiveEntry {
                    id: link.id,
                    url: link.url.clone(),
                    expires_at: link.expires_at,
                };
                active.insert(code.as_bytes(), encode(&entry))?;
                links.insert(&keys::u64_key(link.id)[..], encode(&link))?;
                Ok(link)
            })
            .map_err(|e| tx_error(e, code))?;
        self.flusher.wait_durable()?;
        Ok(link)
    }

    fn delete_link(&self, code: &str, now: Millis) -> StoreResult<Link> {
        let trees = (
            &self.links,
            &self.codes,
            &self.active,
            &self.dedup,
            &self.expiry,
            &self.ended,
            &self.counters,
        );
        let link = trees
            .transaction(|(links, codes, active, dedup, expiry, ended, counters)| {
                let old = Self::tx_link_by_code(codes, links, code)?;
                match old.status {
                    LinkStatus::Active => {
                        active.remove(code.as_bytes())?;
                        unlink_dedup(dedup, &old)?;
                        if let Some(at) = old.expires_at {
                            expiry.remove(&keys::time_id_key(at, old.id)[..])?;
                        }
                    }
                    LinkStatus::Expired => {
                        // It waited for recycling from its expiry; now it waits from deletion.
                        if let Some(at) = old.expires_at {
                            ended.remove(&keys::time_id_key(at, old.id)[..])?;
                        }
                    }
                    other => return abort(Abort::WrongStatus(other)),
                }
                let mut link = old.clone();
                link.status = LinkStatus::Deleted;
                link.deleted_at = Some(now);
                link.updated_at = now;
                ended.insert(&keys::time_id_key(now, link.id)[..], &[][..])?;
                links.insert(&keys::u64_key(link.id)[..], encode(&link))?;
                bump_status(counters, Some(old.status), LinkStatus::Deleted)?;
                Ok(link)
            })
            .map_err(|e| tx_error(e, code))?;
        self.flusher.wait_durable()?;
        Ok(link)
    }

    fn expire_link(&self, id: u64, now: Millis) -> StoreResult<Option<Link>> {
        let trees = (
            &self.links,
            &self.active,
            &self.dedup,
            &self.expiry,
            &self.ended,
            &self.counters,
        );
        let id_key = keys::u64_key(id);
        let link = trees
            .transaction(|(links, active, dedup, expiry, ended, counters)| {
                let Some(bytes) = links.get(&id_key[..])? else {
                    return Ok(None);
                };
                let old = tx_decode_link(&bytes)?;
                let Some(at) = old.expires_at else {
                    return Ok(None);
                };
                if now < at {
                    return Ok(None);
                }
                if old.status != LinkStatus::Active {
                    // Not in the active set: whatever index entry led here is stale.
                    expiry.remove(&keys::time_id_key(at, id)[..])?;
                    return Ok(None);
                }
                active.remove(old.code.as_bytes())?;
                unlink_dedup(dedup, &old)?;
                expiry.remove(&keys::time_id_key(at, id)[..])?;
                ended.insert(&keys::time_id_key(at, id)[..], &[][..])?;
                let mut link = old;
                link.status = LinkStatus::Expired;
                link.updated_at = now;
                links.insert(&id_key[..], encode(&link))?;
                bump_status(counters, Some(LinkStatus::Active), LinkStatus::Expired)?;
                Ok(Some(link))
            })
            .map_err(|e| tx_error(e, ""))?;
        Ok(link)
    }

    fn recycle_link(&self, id: u64, score: Millis) -> StoreResult<Option<Link>> {
        let Some(current) = self.link_by_id(id)? else {
            return Ok(None);
        };
        let Some(length) = length_of(&current.code) else {
            return Ok(None);
        };
        let pool = self.pool(length).ok_or(StoreError::NotFound)?;
        let trees = (
            &self.links,
            &self.codes,
            &self.ended,
            pool,
            &self.members,
            &self.counters,
        );
        let id_key = keys::u64_key(id);
        let link = trees
            .transaction(|(links, codes, ended, pool, members, counters)| {
                let Some(bytes) = links.get(&id_key[..])? else {
                    return Ok(None);
                };
                let old = tx_decode_link(&bytes)?;
                if !matches!(old.status, LinkStatus::Expired | LinkStatus::Deleted) {
                    return Ok(None);
                }
                if let Some(at) = old.ended_at() {
                    ended.remove(&keys::time_id_key(at, id)[..])?;
                }
                let owned = codes.get(old.code.as_bytes())?.and_then(|v| read_u64(&v)) == Some(id);
                if !owned {
                    // The code belongs to someone else: archive without pooling it.
                    let mut link = old.clone();
                    link.status = LinkStatus::Archived;
                    links.insert(&id_key[..], encode(&link))?;
                    bump_status(counters, Some(old.status), LinkStatus::Archived)?;
                    return Ok(Some((link, false)));
                }
                codes.remove(old.code.as_bytes())?;
                // Recycled codes have scores of their own: no tiebreak needed.
                pool.insert(keys::pool_key(score, 0, &old.code), &[][..])?;
                members.insert(old.code.as_bytes(), &keys::member_value(score, 0)[..])?;
                let mut link = old.clone();
                link.status = LinkStatus::Archived;
                links.insert(&id_key[..], encode(&link))?;
                bump_status(counters, Some(old.status), LinkStatus::Archived)?;
                bump(counters, &counter::pool_size(length), 1)?;
                bump(counters, &counter::pool_recycled(length), 1)?;
                Ok(Some((link, true)))
            })
            .map_err(|e| tx_error(e, &current.code))?;
        let Some((link, pooled)) = link else {
            return Ok(None);
        };
        if pooled {
            self.note_cooling(length, score, 1);
        }
        Ok(Some(link))
    }

    fn dedup_target(&self, space: &str, length: u8, url: &str) -> StoreResult<Option<Link>> {
        let Some(id) = self
            .dedup
            .get(keys::dedup_key(space, length, url))
            .map_err(backend)?
        else {
            return Ok(None);
        };
        let link = self.link_by_id(read_u64(&id).unwrap_or(0))?;
        Ok(link.filter(|l| l.status == LinkStatus::Active))
    }

    fn import_links(&self, links: &[Link]) -> StoreResult<Vec<Imported>> {
        self.import_links_impl(links)
    }

    fn list_links(&self, query: &LinkQuery) -> StoreResult<LinkPage> {
        let limit = query.limit.max(1);
        let range = if query.newest_first {
            let end = query.after.unwrap_or(u64::MAX);
            Box::new(self.links.range(..keys::u64_key(end)).rev())
                as Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>>
        } else {
            let start = query.after.map_or(0, |a| a.saturating_add(1));
            Box::new(self.links.range(keys::u64_key(start)..))
        };
        let mut page = LinkPage::default();
        for (scanned, item) in range.enumerate() {
            let (_, bytes) = item.map_err(backend)?;
            let link = decode_link(&bytes)?;
            let last_id = Some(link.id);
            if query.matches(&link) {
                page.items.push(link);
                if page.items.len() == limit {
                    page.next = last_id;
                    return Ok(page);
                }
            }
            // A search that matches little must not walk every link in one request: stop
            // and hand out a cursor to go on from.
            if scanned + 1 >= LIST_SCAN_BUDGET {
                page.next = last_id;
                return Ok(page);
            }
        }
        Ok(page)
    }

    fn due_for_expiry(&self, now: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.scan_index(&self.expiry, now, limit)
    }

    fn due_for_recycling(&self, ended_before: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.scan_index(&self.ended, ended_before.saturating_sub(1), limit)
    }

    fn retire_link(&self, id: u64) -> StoreResult<bool> {
        let Some(link) = self.link_by_id(id)? else {
            return Ok(false);
        };
        let Some(at) = link.ended_at() else {
            return Ok(false);
        };
        Ok(self
            .ended
            .remove(keys::time_id_key(at, id))
            .map_err(backend)?
            .is_some())
    }

    fn link_counts(&self) -> StoreResult<LinkCounts> {
        Ok(LinkCounts {
            active: self.counter(&counter::links(LinkStatus::Active))?,
            expired: self.counter(&counter::links(LinkStatus::Expired))?,
            deleted: self.counter(&counter::links(LinkStatus::Deleted))?,
            archived: self.counter(&counter::links(LinkStatus::Archived))?,
        })
    }

    fn pool_add(&self, batch: &PoolBatch) -> StoreResult<PoolAdded> {
        let length = batch.length;
        let pool = self
            .pool(length)
            .ok_or_else(|| backend(format!("no pool of length {length}")))?;
        let state_key = keys::strategy_state_key(length);
        // Into the filter before the commit (see `checkpoint`); codes the transaction skips
        // exist already, so they belong in the filter anyway.
        self.filter_insert(batch.codes.iter().map(String::as_str));
        // Most codes are new: weed out the others with plain reads, which are much cheaper
        // than reads inside a transaction. Only a custom create can make a code exist
        // between this check and the commit, so the transaction re-checks the code index.
        let mut fresh = Vec::with_capacity(batch.codes.len());
        let mut rng = rand::rng();
        for code in &batch.codes {
            if length_of(code) == Some(length)
                && !self.codes.contains_key(code.as_bytes()).map_err(backend)?
                && !self
                    .members
                    .contains_key(code.as_bytes())
                    .map_err(backend)?
            {
                // Drawn here, not in the transaction closure, which may run more than once.
                let tiebreak = if batch.shuffle {
                    rng.random::<u32>()
                } else {
                    0
                };
                fresh.push((code.as_str(), tiebreak));
            }
        }
        // Bounded transactions: sled's cost per write grows with the transaction. A crash
        // between chunks leaves the strategy state (written with the last chunk) behind the
        // pooled codes; the strategy then offers those codes again and they are skipped, so
        // nothing is lost or pooled twice.
        let chunks: Vec<&[(&str, u32)]> = fresh.chunks(POOL_ADD_CHUNK).collect();
        let last = chunks.len().saturating_sub(1);
        let trees = (&self.codes, pool, &self.members, &self.counters, &self.meta);
        let mut added = 0u64;
        for (i, chunk) in chunks.iter().enumerate() {
            let state = if i == last {
                batch.state.as_ref()
            } else {
                None
            };
            added += trees
                .transaction(|(codes, pool, members, counters, meta)| {
                    let mut added = 0u64;
                    for &(code, tiebreak) in *chunk {
                        if codes.get(code.as_bytes())?.is_some() {
                            continue;
                        }
                        pool.insert(keys::pool_key(batch.score, tiebreak, code), &[][..])?;
                        let member = keys::member_value(batch.score, tiebreak);
                        members.insert(code.as_bytes(), &member[..])?;
                        added += 1;
                    }
                    let delta = i64::try_from(added).unwrap_or(i64::MAX);
                    bump(counters, &counter::pool_size(length), delta)?;
                    bump(counters, &counter::pool_generated(length), delta)?;
                    bump(counters, counter::CODES_ISSUED, delta)?;
                    if let Some(state) = state {
                        meta.insert(state_key.as_bytes(), state.as_slice())?;
                    }
                    Ok(added)
                })
                .map_err(|e| tx_error(e, ""))?;
        }
        if chunks.is_empty() {
            // Nothing new (every code exists already): still move the strategy on.
            if let Some(state) = &batch.state {
                self.meta
                    .insert(state_key.as_bytes(), state.as_slice())
                    .map_err(backend)?;
            }
        }
        if batch.score > batch.now {
            self.note_cooling(length, batch.score, i64::try_from(added).unwrap_or(0));
        }
        self.flusher.wait_durable()?;
        Ok(PoolAdded {
            added,
            skipped: batch.codes.len() as u64 - added,
        })
    }

    fn pool_counts(&self, length: u8, now: Millis) -> StoreResult<PoolCounts> {
        if self.pool(length).is_none() {
            return Ok(PoolCounts::default());
        }
        let size = self.counter(&counter::pool_size(length))?;
        let cooling: u64 = {
            let mut map = self.cooling[usize::from(length) - 1].lock();
            // Entries that became due no longer need tracking.
            let keep = map.split_off(&now.saturating_add(1));
            *map = keep;
            map.values().sum()
        };
        Ok(PoolCounts {
            available: size.saturating_sub(cooling),
            cooling,
            generated_total: self.counter(&counter::pool_generated(length))?,
            recycled_total: self.counter(&counter::pool_recycled(length))?,
        })
    }

    fn in_pool(&self, code: &str) -> StoreResult<bool> {
        self.members.contains_key(code.as_bytes()).map_err(backend)
    }

    fn pool_peek(&self, length: u8, limit: usize) -> StoreResult<Vec<(Millis, String)>> {
        let Some(pool) = self.pool(length) else {
            return Ok(Vec::new());
        };
        pool.iter()
            .keys()
            .take(limit)
            .map(|key| {
                let key = key.map_err(backend)?;
                keys::split_pool_key(&key, length)
                    .map(|(score, code)| (score, code.to_string()))
                    .ok_or_else(|| StoreError::Corrupt {
                        tree: "pool",
                        detail: "malformed key".into(),
                    })
            })
            .collect()
    }

    fn strategy_state(&self, length: u8) -> StoreResult<Option<Vec<u8>>> {
        self.meta_get(&keys::strategy_state_key(length))
    }

    fn meta_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self
            .meta
            .get(key.as_bytes())
            .map_err(backend)?
            .map(|v| v.to_vec()))
    }

    fn meta_init(&self, key: &str, value: &[u8]) -> StoreResult<Vec<u8>> {
        let previous = self
            .meta
            .compare_and_swap(key.as_bytes(), None as Option<&[u8]>, Some(value))
            .map_err(backend)?;
        match previous {
            Ok(()) => {
                self.flusher.wait_durable()?;
                Ok(value.to_vec())
            }
            Err(cas) => Ok(cas.current.map(|v| v.to_vec()).unwrap_or_default()),
        }
    }

    fn record_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.record_visits_impl(visits)
    }

    fn import_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
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
        self.prune_visits_impl(before, limit)
    }

    fn day_counts(&self, from_day: u64, to_day: u64) -> StoreResult<Vec<DayCount>> {
        self.day_counts_impl(from_day, to_day)
    }

    fn flush_stats(&self) -> FlushStats {
        self.flusher.stats()
    }

    fn checkpoint(&self) -> StoreResult<()> {
        let mut saved = self.saved_watermark.lock();
        // The watermark is read before the filter is copied: every code counted in it was put
        // in the filter before its transaction committed, so the copy holds all of them.
        let watermark = self.counter(counter::CODES_ISSUED)?;
        if *saved == Some(watermark) {
            return Ok(());
        }
        let bytes = self.filter.read().to_bytes();
        filter_file::save(&self.filter_path, watermark, &bytes).map_err(|e| {
            backend(format!(
                "cannot save code filter {}: {e}",
                self.filter_path.display()
            ))
        })?;
        *saved = Some(watermark);
        Ok(())
    }

    fn close(&self) -> StoreResult<()> {
        self.checkpoint()?;
        self.db.flush().map_err(backend)?;
        self.flusher.shutdown();
        Ok(())
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
        storage_fault()
    }
}
