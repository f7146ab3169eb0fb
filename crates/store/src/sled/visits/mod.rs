//! Visit records and their counters in sled: how a call of `record_visits` becomes a few large
//! writes, and how the per-link listings and pruning read them back.
//!
//! | tree           | key                          | value                                      |
//! |----------------|------------------------------|--------------------------------------------|
//! | `visit_blocks` | block id u64                 | [`Block`]: up to [`BLOCK_ROWS`] visits of any links, one zstd frame |
//! | `visit_index`  | link id u64, first block u64 | the link's first and last visit id in the blocks named, the last block, and (when not one run) every block: [`super::visit_index`] |
//! | `visit_days`   | link id u64, day u64         | [`DayRecord`]: hours, top values, sketch, running totals |
//! | `visit_totals` | link id u64                  | visits u64, bots u64: read only, for links last counted before totals moved into `visit_days` |
//!
//! Visits are append-only: the visits of one call, ordered by link, are cut into blocks of at
//! most [`BLOCK_ROWS`] visits, each one sled value whose strings (user agents, referers, codes,
//! client ids, …) are stored once per block, and each link's blocks are noted in the index,
//! which is written every few seconds ([`super::visit_index`]). Counters are aggregated in
//! memory: the system's visits of a day are written once per call, and each link's day record
//! (which also carries the link's running totals) once per fold, every few seconds
//! ([`super::visit_counts`]). The writer calls `record_visits` once per interval (about a
//! second) with everything that arrived, so a link visited a thousand times in ten seconds
//! costs one record write. Before blocks, each link's visits of a batch were a record of
//! their own and its counters were written per batch: spread traffic cost six tree writes per
//! visit and the writer fell behind the redirects.
//!
//! They are plain inserts, not a transaction (see [`SledStore::write_visits`] for why and what
//! a crash can do), made durable by one flush per call.
//!
//! Visit ids increase in arrival order, and block ids in write order; a link's index entries
//! are in block order, so its visits are in id order. Pruning reads blocks from the oldest and stops at the
//! first whose newest visit is young enough.
//!
//! Stores written before blocks kept a `visits` tree (one record per link per batch) and a
//! `visit_log`: [`SledStore::migrate_visit_chunks`] turns them into blocks when the store opens.
//!
//! The block and the day record are byte formats the index and the counters read too: they
//! are in `formats.rs`, below all of them. This folder owns the trees above:
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | this map; the day-record lookups the writer and the readers share |
//! | `write.rs` | `record_visits`, `import_visits`; a fold's step on a day record ([`Counted`]) |
//! | `read.rs` | listings, totals, summaries, day counts; the blocks a rebuild at open reads |
//! | `prune.rs` | `prune_visits`: whole blocks, oldest first |
//! | `migrate.rs` | records of the layout before blocks moved into blocks, at open |
//!
//! [`Block`]: super::formats::Block
//! [`DayRecord`]: super::formats::DayRecord
//! [`BLOCK_ROWS`]: write::BLOCK_ROWS

mod migrate;
mod prune;
mod read;
mod write;

pub(super) use self::write::Counted;

use super::formats::link_key;
use super::keys::read_u64;
use super::{backend, SledStore};
use crate::StoreResult;

/// Two big-endian u64s: a `visit_totals` value, or a `visit_log` value's first two.
fn read_pair(bytes: &[u8]) -> (u64, u64) {
    (
        read_u64(bytes).unwrap_or(0),
        bytes.get(8..).and_then(read_u64).unwrap_or(0),
    )
}

impl SledStore {
    /// The link's last day record, if any. sled 0.34's reverse iteration is costly (the
    /// profile of the writer showed it at a fifth of its time), and most links the writer sees
    /// without a record of the day have none at all: a forward look at the link's first record
    /// answers those, and only a link counted on an earlier day walks back.
    fn last_day_record(&self, link_id: u64) -> StoreResult<Option<(sled::IVec, sled::IVec)>> {
        let all = link_key(link_id, 0)..=link_key(link_id, u64::MAX);
        if self
            .visit_days
            .range(all.clone())
            .next()
            .transpose()
            .map_err(backend)?
            .is_none()
        {
            return Ok(None);
        }
        self.visit_days
            .range(all)
            .next_back()
            .transpose()
            .map_err(backend)
    }

    /// A link's totals as the versions before running totals kept them.
    fn legacy_totals(&self, link_id: u64) -> StoreResult<(u64, u64)> {
        if !self.legacy_totals {
            return Ok((0, 0));
        }
        Ok(self
            .visit_totals
            .get(link_id.to_be_bytes())
            .map_err(backend)?
            .map(|v| read_pair(&v))
            .unwrap_or_default())
    }
}
