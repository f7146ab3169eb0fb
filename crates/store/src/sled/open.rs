//! Opening and closing the sled store: the trees, recovery after an unclean stop (sled
//! replays its log; the pool counters and the code filter are checked against the trees), the
//! code filter's file and checkpoints. No record is written here except corrected counters and
//! the moves out of older layouts (visit chunks into blocks, `active` into `codes`, the
//! `pool_members` tree dropped: its contents are rebuilt from the pools in memory).
//!
//! `StoreOps` is implemented here: checkpoints, closing, and what the store reports of its
//! flushes, faults and memory.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::errors::backend;
use super::flusher::Flusher;
use super::keys::{self, counter, read_u64};
use super::{filter_file, group, pools, OpenReport, SledStore, StoreOptions, MAX_LEN};
use crate::codes::filter::CodeFilter;
use crate::{Cluster, CommitStats, StorageFault, StoreError, StoreOps, StoreResult};

pub(super) fn open_error(e: sled::Error, path: &Path) -> StoreError {
    let text = e.to_string();
    if text.contains("lock") || text.contains("WouldBlock") {
        StoreError::Locked(path.display().to_string())
    } else {
        backend(format!("cannot open store at {}: {text}", path.display()))
    }
}

impl SledStore {
    /// Opens (or creates) the store in `options.path`, rebuilding the code filter if it is
    /// missing or stale, and starts its create committer (`group`).
    pub fn open(options: &StoreOptions) -> StoreResult<Arc<Self>> {
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
            // Durability comes from our own group-committed flushes, each after a write the
            // space guard let through. No periodic flush of sled's own: what a read
            // restructures (a leaf split on the way to a key) must not reach a full disk by
            // itself, or sled fails it and then every read that meets that leaf ([`space`]);
            // it is written with the next write's flush instead.
            .flush_every_ms(None);
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
        // The page table as the store opened, then after flushes as it grows.
        let page_table = Arc::new(super::page_table::PageTableWatch::new(
            options.page_table,
            options.cache_capacity_bytes,
        ));
        page_table.check(&db);
        let watch = Arc::clone(&page_table);
        let flusher = Flusher::start(
            db.clone(),
            &db_path,
            options.durability,
            vec![options.path.join(super::claims::JOURNAL)],
            Box::new(move |db| watch.after_flush(db)),
        )?;
        let claims = tree("claims")?;
        let claim_book = super::claims::ClaimBook::open(&claims, &options.path)?;
        let outbox = tree("outbox")?;
        let outbox_state = Mutex::new(super::outbox::Outbox::load(&outbox));
        let mut store = Self {
            links: tree("links")?,
            codes: tree("codes")?,
            dedup: tree("dedup")?,
            expiry: tree("expiry")?,
            ended: tree("ended")?,
            members: pools
                .iter()
                .zip(1..=MAX_LEN)
                .map(|(pool, length)| pools::Members::load(pool, length).map(Mutex::new))
                .collect::<StoreResult<Vec<_>>>()?,
            counters: tree("counters")?,
            meta: tree("meta")?,
            claims,
            claim_book: Mutex::new(claim_book),
            durability: options.durability,
            visit_blocks: tree("visit_blocks")?,
            visit_index: tree("visit_index")?,
            visit_days: tree("visit_days")?,
            visit_totals: tree("visit_totals")?,
            leads: tree("leads")?,
            lead_counts: tree("lead_counts")?,
            review_queue: tree("review_queue")?,
            review_pending: tree("review_pending")?,
            review_leases: Mutex::new(super::reviews::Leases::default()),
            reviews: tree("reviews")?,
            review_shots: tree("review_shots")?,
            review_verdicts: tree("review_verdicts")?,
            review_latest: tree("review_latest")?,
            outbox,
            outbox_keys: tree("outbox_keys")?,
            outbox_due: tree("outbox_due")?,
            outbox_log: tree("outbox_log")?,
            outbox_log_hooks: tree("outbox_log_hooks")?,
            outbox_state,
            accounts: tree("accounts")?,
            audit: tree("audit")?,
            domains: tree("domains")?,
            tls: tree("tls")?,
            legacy_totals: !tree("visit_totals")?.is_empty(),
            counted: Mutex::new(super::visits::Counted::default()),
            recent_index: RwLock::new(super::visit_index::Recent::default()),
            index_fold: Mutex::new(()),
            unwritten_counts: RwLock::new(super::visit_counts::Unwritten::default()),
            count_fold: Mutex::new(()),
            held_counts_bytes: options.held_counts_bytes,
            held_index_bytes: options.held_index_bytes,
            pools,
            takers: (0..MAX_LEN).map(|_| Mutex::new(())).collect(),
            quotas: Mutex::new(std::collections::HashMap::new()),
            committer: group::Committer::default(),
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
            space: super::space::SpaceGuard::new(options.path.clone(), options.min_free_bytes),
            page_table,
            db,
        };
        store.check_pool_sizes()?;
        let undone = store.undo_unfinished_journal_folds()?;
        if undone > 0 {
            tracing::info!(
                blocks = undone,
                "visit blocks of a journal fold cut short removed (the journal replays them)"
            );
        }
        let replayed = store.load_recent_index()?;
        if replayed > 0 {
            tracing::info!(
                blocks = replayed,
                "visit blocks not yet indexed on disk read back"
            );
        }
        let recounted = store.load_unwritten_counts()?;
        if recounted > 0 {
            tracing::info!(
                blocks = recounted,
                "visit blocks not yet counted on disk read back"
            );
        }
        let moved = store.migrate_visit_chunks(&old_visits, &old_log)?;
        if moved > 0 {
            tracing::info!(visits = moved, "visit records moved into blocks");
            store.report.visits_migrated = moved;
        }
        // Pool membership was a tree before it was held in memory (built above).
        if store
            .db
            .tree_names()
            .iter()
            .any(|n| n.as_ref() == b"pool_members")
        {
            store.db.drop_tree("pool_members").map_err(backend)?;
        }
        let folded = store.fold_active_tree()?;
        if folded > 0 {
            tracing::info!(codes = folded, "active entries moved into the code index");
        }
        store.load_cooling()?;
        store.load_filter(options.filter_capacity)?;
        let store = Arc::new(store);
        group::Committer::start(&store)?;
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

    pub(super) fn counter(&self, key: &[u8]) -> StoreResult<u64> {
        Ok(self.stored_counter(key)?.unwrap_or(0))
    }

    /// A counter, `None` if it was never written (a store older than the counter).
    pub(super) fn stored_counter(&self, key: &[u8]) -> StoreResult<Option<u64>> {
        Ok(self
            .counters
            .get(key)
            .map_err(backend)?
            .and_then(|v| read_u64(&v)))
    }

    pub(super) fn load_filter(&mut self, capacity: u64) -> StoreResult<()> {
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
    pub(super) fn rebuild_filter(&self, capacity: u64) -> StoreResult<CodeFilter> {
        let mut filter = CodeFilter::new(capacity, self.filter_fp_rate);
        for item in self.codes.iter().keys() {
            let key = item.map_err(backend)?;
            if let Ok(key) = std::str::from_utf8(&key) {
                filter.insert(key);
                // A code of another domain: its bare code too, so that a pool refill's check
                // (`pool_add`) looks it up.
                let (code, domain) = crate::model::split_key(key);
                if domain != crate::model::DEFAULT_DOMAIN {
                    filter.insert(code);
                }
            }
        }
        for members in &self.members {
            for code in members.lock().codes() {
                filter.insert(code);
            }
        }
        Ok(filter)
    }

    pub(super) fn filter_insert<'a>(&self, codes: impl IntoIterator<Item = &'a str>) {
        let mut filter = self.filter.write();
        for code in codes {
            filter.insert(code);
            // A key of another domain (`code@id`): its bare code too, so that a pool
            // refill's check (`pool_add`) looks it up.
            let (bare, domain) = crate::model::split_key(code);
            if domain != crate::model::DEFAULT_DOMAIN {
                filter.insert(bare);
            }
        }
    }
}

impl StoreOps for SledStore {
    fn checkpoint(&self) -> StoreResult<()> {
        self.fold_claims()?;
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
        self.committer.stop();
        self.checkpoint()?;
        self.fold_claims()?;
        self.fold_index()?;
        self.fold_counts()?;
        self.db.flush().map_err(backend)?;
        self.flusher.shutdown();
        Ok(())
    }
}
