//! sled's page table against its reserve in `memory.budget`. sled 0.34 keeps an entry in
//! memory for every page of the store for as long as the store is open, whatever its cache's
//! capacity says; the budget reserves room for the table of a store of about a million
//! visited links. A store that grows past the reserve (more links, more visit blocks) takes
//! the excess from sled's cache: after a flush, at most every [`CHECK_EVERY`], the table is
//! estimated from its page count, and the cache's capacity is lowered by the excess over what
//! a byte of capacity costs in memory, down to a floor. Past the floor the store warns once:
//! the budget is too small for the store. Owns no tree and no data.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often at most the page count is read (on the flusher's thread, after a flush).
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// A capacity change smaller than this waits for a larger one (each change takes every
/// shard's lock of sled's cache once).
const STEP: u64 = 64 * 1024;

/// What the budget gave the page table and the cache ([`super::StoreOptions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageTableBudget {
    /// Bytes reserved for the page table (`u64::MAX`: the cache never gives way).
    pub reserve: u64,
    /// Estimated bytes of one page's entry in the table.
    pub entry_bytes: u64,
    /// The least capacity the table may push the cache down to (at most the capacity sled
    /// was opened with, [`super::StoreOptions::cache_capacity_bytes`]).
    pub cache_floor: u64,
    /// Bytes of memory a byte of cache capacity costs (the nodes in memory are larger than
    /// their count, and superseded ones wait for reclamation).
    pub cache_factor: u64,
}

impl PageTableBudget {
    /// A table that never takes from the cache (tests and tools).
    pub const UNBOUNDED: PageTableBudget = PageTableBudget {
        reserve: u64::MAX,
        entry_bytes: 0,
        cache_floor: u64::MAX,
        cache_factor: 1,
    };

    /// The least capacity a cache of `capacity` at open gives way to.
    fn floor(&self, capacity: u64) -> u64 {
        self.cache_floor.min(capacity)
    }

    /// The cache capacity, of `capacity` at open, for a table of `pages` pages.
    fn capacity_for(&self, capacity: u64, pages: u64) -> u64 {
        let table = pages.saturating_mul(self.entry_bytes);
        let excess = table.saturating_sub(self.reserve);
        let give = excess.div_ceil(self.cache_factor.max(1));
        capacity.saturating_sub(give).max(self.floor(capacity))
    }
}

/// Watches the table and moves the cache's capacity; read by `/metrics`.
pub(super) struct PageTableWatch {
    budget: PageTableBudget,
    /// The capacity sled was opened with.
    opened_with: u64,
    last_check: Mutex<Option<Instant>>,
    pages: AtomicU64,
    cache: AtomicU64,
    warned: AtomicBool,
}

impl PageTableWatch {
    pub(super) fn new(budget: PageTableBudget, cache_capacity: u64) -> Self {
        Self {
            budget,
            opened_with: cache_capacity,
            last_check: Mutex::new(None),
            pages: AtomicU64::new(0),
            cache: AtomicU64::new(cache_capacity),
            warned: AtomicBool::new(false),
        }
    }

    /// After a flush: checks the table unless it was checked less than [`CHECK_EVERY`] ago.
    pub(super) fn after_flush(&self, db: &sled::Db) {
        {
            let mut last = self.last_check.lock();
            if last.is_some_and(|at| at.elapsed() < CHECK_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        self.check(db);
    }

    /// Reads the page count and sets the cache's capacity to what the table leaves it.
    pub(super) fn check(&self, db: &sled::Db) {
        let pages = db.page_count();
        self.pages.store(pages, Ordering::Relaxed);
        let table = self.table_bytes();
        let floor = self.budget.floor(self.opened_with);
        let wanted = self.budget.capacity_for(self.opened_with, pages);
        let now = self.cache.load(Ordering::Relaxed);
        // Small steps wait for a larger one, except the last step down to the floor.
        if wanted != now && (wanted.abs_diff(now) >= STEP || wanted == floor) {
            db.set_cache_capacity(wanted);
            self.cache.store(wanted, Ordering::Relaxed);
            let table_mb = table / (1024 * 1024);
            let capacity_kb = wanted / 1024;
            // Once at info, the first time; each later step (64 KiB at least) at debug.
            if now == self.opened_with {
                tracing::info!(
                    pages,
                    page_table_mb = table_mb,
                    cache_capacity_kb = capacity_kb,
                    "sled's page table is past its reserve in memory.budget; its cache gives way"
                );
            } else {
                tracing::debug!(
                    pages,
                    page_table_mb = table_mb,
                    cache_capacity_kb = capacity_kb,
                    "sled's cache gives way to its page table"
                );
            }
        }
        let floor_covers = (self.opened_with - floor).saturating_mul(self.budget.cache_factor);
        if table > self.budget.reserve.saturating_add(floor_covers)
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                pages,
                page_table_mb = table / (1024 * 1024),
                reserve_mb = self.budget.reserve / (1024 * 1024),
                "sled's page table has outgrown what memory.budget can give it; the process \
                 will hold more than the budget: raise memory.budget"
            );
        }
    }

    /// The table's estimated bytes at the last check.
    pub(super) fn table_bytes(&self) -> u64 {
        self.pages
            .load(Ordering::Relaxed)
            .saturating_mul(self.budget.entry_bytes)
    }

    /// The cache's capacity now.
    pub(super) fn cache_capacity(&self) -> u64 {
        self.cache.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1024 * 1024;

    fn budget() -> PageTableBudget {
        PageTableBudget {
            reserve: 56 * MB,
            entry_bytes: 256,
            cache_floor: 3 * MB / 2,
            cache_factor: 5,
        }
    }

    #[test]
    fn the_cache_keeps_its_capacity_while_the_table_fits_its_reserve() {
        let b = budget();
        assert_eq!(b.capacity_for(6 * MB, 0), 6 * MB);
        assert_eq!(b.capacity_for(6 * MB, 56 * MB / 256), 6 * MB);
    }

    #[test]
    fn past_the_reserve_the_cache_gives_a_fifth_of_the_excess_down_to_its_floor() {
        let b = budget();
        // 10 MB over the reserve: 2 MB of capacity.
        assert_eq!(b.capacity_for(6 * MB, 66 * MB / 256), 4 * MB);
        assert_eq!(b.capacity_for(6 * MB, 1_000 * MB / 256), 3 * MB / 2);
        assert_eq!(
            PageTableBudget::UNBOUNDED.capacity_for(6 * MB, u64::MAX),
            6 * MB
        );
    }

    #[test]
    fn a_store_that_grows_past_its_reserve_lowers_the_cache_of_the_open_sled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .path(dir.path())
            .cache_capacity(6 * MB)
            .open()
            .expect("open");
        let tree = db.open_tree("t").expect("tree");
        for i in 0u32..20_000 {
            tree.insert(i.to_be_bytes(), vec![0u8; 64]).expect("insert");
        }
        // A reserve of one page at 1 MB a page: more than 100 pages are well past it.
        let watch = PageTableWatch::new(
            PageTableBudget {
                reserve: MB,
                entry_bytes: MB,
                ..budget()
            },
            6 * MB,
        );
        watch.check(&db);
        assert!(db.page_count() > 100, "{}", db.page_count());
        assert_eq!(watch.cache_capacity(), 3 * MB / 2);
        assert!(watch.table_bytes() > 100 * MB);
        // Reads go on working with the smaller cache.
        assert_eq!(
            tree.get(7u32.to_be_bytes()).expect("get").map(|v| v.len()),
            Some(64)
        );
    }
}
