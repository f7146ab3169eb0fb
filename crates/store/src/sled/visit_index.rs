//! The per-link index of visit blocks (`visit_index`), and the part of it not yet folded into
//! the tree, held in memory.
//!
//! A listing of one link's visits reads only the blocks that hold them, found through entries
//! `(link id, first block) → first id, last id, last block [, every block]` (see [`Span`]).
//! The writer writes blocks every interval (about a second), but a link's entry is written once
//! per fold ([`FOLD_EVERY`], or sooner past its bytes' bound, `memory.budget`'s share): until
//! then the link's blocks are held in [`Recent`], and listings read both. A link visited every
//! second costs one index write per fold instead of one per second. With an entry per link per
//! write, the index inserts were a fifth of the process's CPU under Zipf redirects over 1 M
//! links (random inserts into a growing tree, with node splits), and two fifths of the data
//! directory's growth.
//!
//! Crash safety: blocks are durable at every write. The fold point (counter
//! `visit_indexed_block`: the last block whose entries are in the tree) moves only after a
//! fold's entries are written, in the same log, so it never survives without them. Opening
//! rebuilds the memory part from the blocks after the fold point. A fold redone after a crash
//! writes the same keys again (an entry is keyed by its first block), and readers take stored
//! entries only up to the fold point, so the entries of a fold that did not finish are never
//! read twice.

use std::time::{Duration, Instant};

use super::formats::{link_key, table_bytes, FastMap};
use super::keys::{counter, read_u64};
use super::{backend, SledStore};
use crate::StoreResult;

/// How long a link's blocks wait in memory before their index entry is written. It bounds
/// the blocks replayed when the store opens after a crash (about 300 a second at 80k
/// visits/s), and a fold's pause: at most one entry per link visited in the period, written
/// in key order.
pub(super) const FOLD_EVERY: Duration = Duration::from_secs(10);
/// Block references held in memory before a fold comes early, without a configured bound.
pub(super) const MAX_REFS: usize = 1 << 20;
/// Bytes of a held block reference: 8, in a list that doubles as it grows.
const REF_BYTES: usize = 16;
/// Bytes of a link's held entry besides its references and its map slot (counted from the
/// table, [`SLOT_BYTES`]): its list's allocation, rounded.
const SPAN_BYTES: usize = 32;
/// Bytes of one slot of the map of links: the key, the [`Span`], the table's control byte.
/// The table is counted whole, from its capacity (at most 7/8 full, doubling as it grows),
/// and shrinks after a fold: a heap profile of the server under uniform traffic over 1 M
/// links held 15 MB of references bounded at 6.3 MB while entries were counted one by one.
const SLOT_BYTES: usize = std::mem::size_of::<(u64, Span)>() + 1;
/// The bound of [`super::StoreOptions::new`]: [`MAX_REFS`] references, and about as much
/// again of their links' entries.
pub(super) const DEFAULT_HELD_BYTES: usize = MAX_REFS * 2 * REF_BYTES;
/// Longest run of blocks one stored entry is read as (256 M visits of one link in one write).
const MAX_RUN: u64 = 1 << 20;

/// The blocks of one link that one index entry names, and the link's first and last visit id
/// in them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub first_id: u64,
    pub last_id: u64,
    /// Ascending, never empty.
    pub blocks: Vec<u64>,
}

impl Span {
    /// The stored value: 24 bytes (first id, last id, last block) when the blocks are one run
    /// from the key's block to the last (the only form before folds), else those followed by
    /// every block.
    fn value(&self) -> Vec<u8> {
        let first = self.blocks.first().copied().unwrap_or(0);
        let last = self.blocks.last().copied().unwrap_or(first);
        let run = last - first + 1 == self.blocks.len() as u64;
        let mut value = Vec::with_capacity(24 + if run { 0 } else { 8 * self.blocks.len() });
        value.extend_from_slice(&self.first_id.to_be_bytes());
        value.extend_from_slice(&self.last_id.to_be_bytes());
        value.extend_from_slice(&last.to_be_bytes());
        if !run {
            for block in &self.blocks {
                value.extend_from_slice(&block.to_be_bytes());
            }
        }
        value
    }

    /// An entry read back; `key` is (link id, first block).
    pub(super) fn decode(key: &[u8], value: &[u8]) -> Span {
        let first_block = key.get(8..).and_then(read_u64).unwrap_or(0);
        let first_id = read_u64(value).unwrap_or(0);
        let last_id = value.get(8..).and_then(read_u64).unwrap_or(0);
        let blocks = match value.get(24..) {
            Some(list) if !list.is_empty() => {
                let mut blocks: Vec<u64> = list.chunks_exact(8).filter_map(read_u64).collect();
                blocks.retain(|&b| b >= first_block);
                if blocks.is_empty() {
                    blocks.push(first_block);
                }
                blocks
            }
            _ => {
                // A run is one write's blocks for one link; a damaged last block must not
                // make it billions long.
                let last = value
                    .get(16..)
                    .and_then(read_u64)
                    .unwrap_or(first_block)
                    .clamp(first_block, first_block.saturating_add(MAX_RUN));
                (first_block..=last).collect()
            }
        };
        Span {
            first_id,
            last_id,
            blocks,
        }
    }

    /// The entry without its first block (pruned): its new key's block and value, or `None`
    /// when it named no other block.
    pub(super) fn without_first(mut self) -> Option<(u64, Vec<u8>)> {
        if self.blocks.len() < 2 {
            return None;
        }
        self.blocks.remove(0);
        Some((self.blocks[0], self.value()))
    }
}

/// The index entries not yet folded into the tree.
#[derive(Default)]
pub(super) struct Recent {
    /// The last block whose entries are in `visit_index`.
    folded: u64,
    links: FastMap<u64, Span>,
    /// Block references held.
    refs: usize,
    /// When the oldest entry held was added.
    since: Option<Instant>,
}

impl Recent {
    /// Notes that `block` holds visits `first_id..=last_id` of `link_id`. Blocks come in
    /// ascending order.
    pub(super) fn add(&mut self, link_id: u64, block: u64, first_id: u64, last_id: u64) {
        self.since.get_or_insert_with(Instant::now);
        let span = self.links.entry(link_id).or_insert_with(|| Span {
            first_id,
            last_id,
            blocks: Vec::new(),
        });
        span.first_id = span.first_id.min(first_id);
        span.last_id = span.last_id.max(last_id);
        if span.blocks.last() != Some(&block) {
            span.blocks.push(block);
            self.refs += 1;
        }
    }

    /// What the entries hold, estimated, with the map's table at its capacity.
    fn bytes(&self) -> usize {
        self.refs * REF_BYTES + self.links.len() * SPAN_BYTES + table_bytes(&self.links, SLOT_BYTES)
    }

    fn due(&self, max_bytes: usize) -> bool {
        self.bytes() >= max_bytes || self.since.is_some_and(|t| t.elapsed() >= FOLD_EVERY)
    }

    /// The fold point, and the link's entry held here.
    pub(super) fn of(&self, link_id: u64) -> (u64, Option<Span>) {
        (self.folded, self.links.get(&link_id).cloned())
    }

    /// Forgets blocks up to `through` (now in the tree).
    fn folded_through(&mut self, through: u64) {
        self.folded = through;
        self.links.retain(|_, span| {
            span.blocks.retain(|&b| b > through);
            !span.blocks.is_empty()
        });
        // The table sized for the fold's links would otherwise stay as large.
        self.links.shrink_to_fit();
        self.refs = self.links.values().map(|s| s.blocks.len()).sum();
        self.since = (!self.links.is_empty()).then(Instant::now);
    }
}

impl SledStore {
    /// Builds the memory part at open: the blocks after the fold point. A store that has no
    /// fold point yet (written before folds) had every entry written with its blocks.
    pub(super) fn load_recent_index(&self) -> StoreResult<u64> {
        let folded = match self.stored_counter(counter::VISIT_INDEXED_BLOCK)? {
            Some(folded) => folded,
            None => {
                let last = self.counter(counter::VISIT_BLOCK_ID)?;
                self.counters
                    .insert(counter::VISIT_INDEXED_BLOCK, &last.to_be_bytes()[..])
                    .map_err(backend)?;
                last
            }
        };
        let mut recent = Recent {
            folded,
            ..Recent::default()
        };
        let mut replayed = 0;
        for item in self.blocks_after(folded) {
            let (block_id, value) = item?;
            match super::formats::block_rows(&value) {
                Ok(rows) => {
                    for (link_id, id) in rows {
                        recent.add(link_id, block_id, id, id);
                    }
                }
                // `check` names it; its visits stay unlisted, as a damaged block's would.
                Err(e) => tracing::error!(block_id, error = %e, "corrupt visit block: not indexed"),
            }
            replayed += 1;
        }
        *self.recent_index.write() = recent;
        Ok(replayed)
    }

    /// Notes a write's runs of blocks per link: (link, first block, last block, first id,
    /// last id). Folds them into the tree when due.
    pub(super) fn index_blocks(&self, spans: &[(u64, u64, u64, u64, u64)]) -> StoreResult<()> {
        let due = {
            let mut recent = self.recent_index.write();
            for &(link_id, first, last, first_id, last_id) in spans {
                for block in first..=last {
                    recent.add(link_id, block, first_id, last_id);
                }
            }
            recent.due(self.held_index_bytes)
        };
        if due {
            self.fold_index()?;
        }
        Ok(())
    }

    /// Writes the memory part's entries into the tree, in key order, then moves the fold
    /// point. Listings meanwhile still read the memory part (and no stored entry past the old
    /// fold point), so they see every visit once throughout.
    pub(super) fn fold_index(&self) -> StoreResult<()> {
        let _one_at_a_time = self.index_fold.lock();
        let through = {
            let recent = self.recent_index.read();
            let Some(through) = recent
                .links
                .values()
                .filter_map(|s| s.blocks.last().copied())
                .max()
            else {
                return Ok(());
            };
            let mut links: Vec<(&u64, &Span)> = recent.links.iter().collect();
            links.sort_unstable_by_key(|(link_id, _)| **link_id);
            for (&link_id, span) in links {
                self.visit_index
                    .insert(link_key(link_id, span.blocks[0]), span.value())
                    .map_err(backend)?;
            }
            through
        };
        self.counters
            .insert(counter::VISIT_INDEXED_BLOCK, &through.to_be_bytes()[..])
            .map_err(backend)?;
        self.recent_index.write().folded_through(through);
        Ok(())
    }

    /// The fold point and the link's unfolded entry: a listing reads stored entries keyed up
    /// to the fold point, then this one.
    pub(super) fn recent_span(&self, link_id: u64) -> (u64, Option<Span>) {
        self.recent_index.read().of(link_id)
    }

    /// The link's stored entries keyed up to the fold point (past it: a fold cut short, whose
    /// entries the memory part holds), in block order.
    pub(super) fn stored_spans(
        &self,
        link_id: u64,
        folded: u64,
    ) -> impl DoubleEndedIterator<Item = StoreResult<Span>> {
        self.visit_index
            .range(link_key(link_id, 0)..=link_key(link_id, folded))
            .map(|item| {
                let (key, value) = item.map_err(backend)?;
                Ok(Span::decode(&key, &value))
            })
    }

    /// The last block whose index entries are in the tree.
    pub(super) fn index_folded(&self) -> u64 {
        self.recent_index.read().folded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(link: u64, block: u64) -> Vec<u8> {
        super::super::formats::link_key(link, block).to_vec()
    }

    #[test]
    fn entries_keep_their_blocks_in_both_forms() {
        let run = Span {
            first_id: 3,
            last_id: 9,
            blocks: vec![5, 6, 7],
        };
        assert_eq!(run.value().len(), 24, "a run is stored as before folds");
        assert_eq!(Span::decode(&key(1, 5), &run.value()), run);
        let spread = Span {
            first_id: 3,
            last_id: 90,
            blocks: vec![5, 40, 41, 300],
        };
        assert_eq!(spread.value().len(), 24 + 32);
        assert_eq!(Span::decode(&key(1, 5), &spread.value()), spread);
        let (next, value) = spread.clone().without_first().expect("more blocks");
        assert_eq!(next, 40);
        assert_eq!(Span::decode(&key(1, 40), &value).blocks, vec![40, 41, 300]);
        let single = Span {
            first_id: 1,
            last_id: 1,
            blocks: vec![8],
        };
        assert!(single.without_first().is_none());
    }

    /// Listings are whole and free of repeats before a fold, after the memory part is lost
    /// (a crash), after a fold that wrote its entries but not its fold point, and after the
    /// fold at close; pruning then takes entries of every form.
    #[test]
    fn unfolded_entries_are_listed_once_through_crashes_and_folds() {
        use crate::prelude::*;
        use crate::{NewVisit, Visit};
        let dir = tempfile::tempdir().expect("temp dir");
        let options = super::super::StoreOptions::new(dir.path());
        let new = |link_id: u64, at: u64| NewVisit {
            visit: Visit {
                link_id,
                at,
                code: format!("c{link_id}"),
                client_id: "client".into(),
                ip: None,
                user_agent: "ua".into(),
                referer: "".into(),
                browser: "Chrome".into(),
                browser_version: "1".into(),
                os: "Linux".into(),
                os_version: "".into(),
                device: "desktop".into(),
                is_bot: false,
                country: None,
                region: None,
                city: None,
                isp: None,
                route: None,
                id: 0,
            },
            client_hash: 1,
            referer_host: "".into(),
        };
        // Link 7 in every write, link 8 in the first and the last: blocks 1..=3 and {1, 3}.
        let ids_of =
            |page: crate::VisitPage| -> Vec<u64> { page.items.iter().map(|v| v.id).collect() };
        let ids = |store: &SledStore, link: u64| -> Vec<u64> {
            let forward = ids_of(store.visits_page(link, None, 100).expect("page"));
            let mut backward = ids_of(store.recent_visits(link, None, 100).expect("recent"));
            backward.reverse();
            assert_eq!(forward, backward, "link {link}: both directions agree");
            forward
        };
        let check = |store: &SledStore| {
            assert_eq!(ids(store, 7), vec![1, 2, 4, 5]);
            assert_eq!(ids(store, 8), vec![3, 6]);
        };
        {
            let store = SledStore::open(&options).expect("open");
            for batch in [
                vec![new(7, 1_000), new(7, 1_001), new(8, 1_002)],
                vec![new(7, 2_000)],
                vec![new(7, 3_000), new(8, 3_001)],
            ] {
                let mut batch = batch;
                store.record_visits(&mut batch).expect("record");
            }
            assert_eq!(store.index_folded(), 0);
            assert!(store.visit_index.is_empty(), "nothing folded yet");
            check(&store);
            // The memory part lost, as in a crash, and read back from the blocks.
            *store.recent_index.write() = Recent::default();
            assert_eq!(store.load_recent_index().expect("reload"), 3);
            check(&store);
            // A fold that wrote link 8's entry and stopped before its fold point.
            let (_, span) = store.recent_span(8);
            let span = span.expect("unfolded");
            assert_eq!(span.blocks, vec![1, 3]);
            store
                .visit_index
                .insert(key(8, 1), span.value())
                .expect("insert");
            check(&store);
            store.close().expect("close");
        }
        let store = SledStore::open(&options).expect("reopen");
        assert_eq!(store.index_folded(), 3, "closing folds");
        assert_eq!(store.recent_span(7), (3, None));
        assert_eq!(store.visit_index.len(), 2, "one entry per link");
        check(&store);
        // Pruning the first block moves both entries to their next block.
        assert_eq!(store.prune_visits(1_500, 1).expect("prune"), 3);
        assert_eq!(ids(&store, 7), vec![4, 5]);
        assert_eq!(ids(&store, 8), vec![6]);
        assert_eq!(store.prune_visits(10_000, 100).expect("prune"), 3);
        assert!(store.visit_index.is_empty());
    }

    /// After a fold the table shrinks to the links still held, and its bytes with it.
    #[test]
    fn a_fold_lets_the_table_shrink() {
        let mut recent = Recent::default();
        for link in 0..1000 {
            recent.add(link, 10, link, link);
        }
        recent.add(7, 11, 2000, 2000);
        let before = recent.bytes();
        assert!(before >= 1000 * SLOT_BYTES);
        recent.folded_through(10);
        assert!(recent.links.capacity() <= 3, "{}", recent.links.capacity());
        assert!(recent.bytes() < before / 100);
    }

    #[test]
    fn a_link_seen_in_many_writes_is_one_entry_until_the_fold() {
        let mut recent = Recent::default();
        recent.add(7, 10, 100, 105);
        recent.add(8, 10, 106, 106);
        recent.add(7, 11, 107, 107);
        recent.add(7, 11, 108, 109);
        recent.add(7, 20, 200, 201);
        let (_, span) = recent.of(7);
        assert_eq!(
            span,
            Some(Span {
                first_id: 100,
                last_id: 201,
                blocks: vec![10, 11, 20]
            })
        );
        assert_eq!(recent.refs, 4);
        let table = table_bytes(&recent.links, SLOT_BYTES);
        assert_eq!(recent.bytes(), 4 * REF_BYTES + 2 * SPAN_BYTES + table);
        assert!(recent.due(recent.bytes()) && !recent.due(recent.bytes() + 1));
        recent.folded_through(11);
        assert_eq!(recent.of(7).1.map(|s| s.blocks), Some(vec![20]));
        assert_eq!(recent.of(8), (11, None));
        assert_eq!(recent.refs, 1);
    }
}
