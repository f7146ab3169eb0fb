//! Opening the configured backend: the one place that turns `[storage]` into a store, so that
//! nothing above `store/` names sled or PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Backend, Config};
use crate::memory::Bounds;
use crate::model::{StoreError, StoreResult};
#[cfg(feature = "postgres")]
use vshortlink_store::postgres::{PgOptions, PgStore};
use vshortlink_store::sled::{OpenReport, PageTableBudget, SledStore, StoreOptions};
use vshortlink_store::Store;

/// Opens the store `[storage]` names (blocking: call it off the async threads). For sled,
/// what the open found (a replayed log, a rebuilt filter, corrected counters) is logged.
pub fn open(config: &Config) -> StoreResult<Arc<dyn Store>> {
    match config.storage.backend {
        Backend::Sled => {
            let sled = open_embedded(config)?;
            log_open_report(sled.open_report());
            Ok(sled)
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let pg = open_postgres(config)?;
            tracing::info!(database = %pg.describe(), "using the PostgreSQL store");
            Ok(Arc::new(pg))
        }
        // Refused when the configuration is checked; here for a configuration built by hand.
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => Err(crate::model::StoreError::Backend(
            "this binary was built without the `postgres` feature".into(),
        )),
    }
}

#[cfg(feature = "postgres")]
/// The PostgreSQL store of a configuration, whatever `backend` says (`vshortlink check`
/// calls its own `check`).
pub fn open_postgres(config: &Config) -> StoreResult<PgStore> {
    PgStore::open(&PgOptions {
        url: config.storage.postgres.url.clone(),
        pool_size: config.storage.postgres.pool_size,
    })
}

/// The embedded store of a configuration, whatever `backend` says (`vshortlink check`
/// inspects its files).
pub fn open_embedded(config: &Config) -> StoreResult<Arc<SledStore>> {
    // The binary refused a budget too small for its configuration when it loaded it.
    let bounds = Bounds::derive(config).map_err(|e| StoreError::Backend(e.0))?;
    SledStore::open(&sled_options(config, &bounds))
}

/// The sled options a configuration asks for, with its share of `memory.budget`.
pub fn sled_options(config: &Config, bounds: &Bounds) -> StoreOptions {
    StoreOptions {
        path: config.storage.path.clone(),
        durability: config.storage.durability,
        // `memory.budget`'s share, or `storage.cache_capacity_mb` ([`crate::memory`]).
        cache_capacity_bytes: bounds.sled_cache_capacity,
        filter_capacity: config.codes.filter_capacity,
        filter_fp_rate: config.codes.filter_fp_rate,
        // A second process on the same directory fails at once with a clear message.
        lock_wait: Duration::ZERO,
        min_free_bytes: config.storage.min_free_mb.saturating_mul(1024 * 1024),
        held_counts_bytes: bytes(bounds.held_counts),
        held_index_bytes: bytes(bounds.held_index),
        // Past its reserve, the page table takes from the cache ([`crate::memory`]).
        page_table: PageTableBudget {
            reserve: bounds.sled_pages,
            entry_bytes: crate::memory::SLED_PAGE_BYTES,
            cache_floor: bounds.sled_cache_floor,
            cache_factor: crate::memory::SLED_CACHE_FACTOR,
        },
    }
}

fn bytes(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn log_open_report(report: &OpenReport) {
    if report.recovered {
        tracing::info!("the store was not closed cleanly; sled recovered its log");
    }
    if let Some(reason) = &report.filter_rebuilt {
        tracing::warn!(reason = %reason, "the code filter was rebuilt from the trees");
    }
    for correction in &report.counters_corrected {
        tracing::warn!(counter = %correction, "a counter disagreed with the trees; corrected");
    }
    if report.recovered && report.filter_rebuilt.is_none() && report.counters_corrected.is_empty() {
        tracing::info!("recovery check: the code filter and pool counters match the trees");
    }
}
