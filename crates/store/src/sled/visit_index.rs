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

use super::chunked::Chunked;
use super::formats::link_key;
use super::keys::{counter, read_u64};
use super::{backend, SledStore};
use crate::StoreResult;

/// How long a link's blocks wait in memory before their index entry is written. It bounds
/// the blocks replayed when the store opens after a crash (about 300 a second at 80k
/// visits/s), and a fold's pause: at most one entry per link visited in the period, written
/// in key order.
pub(super) const FOLD_EVERY: Duration = Duration::from_secs(10);
/// Runs held in memory before a fold comes early, without a configured bound.
pub(super) const MAX_RUNS: usize = 1 << 20;
/// The bound of [`super::StoreOptions::new`]: [`MAX_RUNS`] runs of 16 bytes.
pub(super) const DEFAULT_HELD_BYTES: usize = MAX_RUNS * std::mem::size_of::<Run>();
/// Entries a fold hands sled at once (in key order; a few hundred kilobytes).
const FOLD_CHUNK: usize = 4096;
/// Longest run of blocks one stored entry is read as (256 M visits of one link in one write).
const MAX_RUN: u64 = 1 << 20;

/// The blocks of one link that one index entry names, and bounds of the link's visit ids in
/// them: no visit of the link there is outside `first_id..=last_id` (entries written by
/// earlier versions hold the link's own first and last; newer ones their blocks').
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

/// One write's run of blocks for one link: what the memory part holds, 16 bytes. Held per
/// write rather than gathered per link: a map of links took about 130 bytes a link (its slot
/// at the table's load, the entry, the list of blocks), so that with 100,000 links visited the
/// part's share of `memory.budget` (about 5 MB at the default) filled in under a second and
/// the fold wrote an entry for nearly every visit. The link's own first and last visit ids
/// are not held (they were half of a run's 32 bytes): an entry's ids are its blocks' (see
/// [`Recent::ids`]), wider by the other links' visits in those blocks, which a listing skips
/// as it reads.
#[derive(Clone, Copy, Debug)]
struct Run {
    link_id: u64,
    /// The run's first block, after the fold point (an offset from it).
    block: u32,
    /// Blocks in the run, at least one.
    blocks: u32,
}

const _: () = assert!(std::mem::size_of::<Run>() == 16);

/// The index entries not yet folded into the tree.
#[derive(Default)]
pub(super) struct Recent {
    /// The last block whose entries are in `visit_index`.
    folded: u64,
    /// In the order they were written, so blocks ascend.
    runs: Chunked<Run>,
    /// Each block's first and last visit id, ascending by block (a block a second: a few
    /// hundred between folds).
    block_ids: Vec<(u64, u64, u64)>,
    /// When the oldest entry held was added.
    since: Option<Instant>,
}

impl Recent {
    /// Notes that `block` holds visits `first_id..=last_id` of `link_id`. Blocks come in
    /// ascending order.
    pub(super) fn add(&mut self, link_id: u64, block: u64, first_id: u64, last_id: u64) {
        self.since.get_or_insert_with(Instant::now);
        // A write's links each walk its blocks from the first: the block is one of the last.
        match self.block_ids.iter().rposition(|(b, _, _)| *b <= block) {
            Some(at) if self.block_ids[at].0 == block => {
                let (_, first, last) = &mut self.block_ids[at];
                *first = (*first).min(first_id);
                *last = (*last).max(last_id);
            }
            at => {
                let at = at.map_or(0, |at| at + 1);
                self.block_ids.insert(at, (block, first_id, last_id));
            }
        }
        // Past the fold point by the callers' order; `due` folds long before the offset
        // could leave 32 bits.
        let offset = u32::try_from(block.saturating_sub(self.folded)).unwrap_or(u32::MAX);
        if let Some(run) = self.runs.last_mut() {
            if run.link_id == link_id {
                let last = run.block + run.blocks - 1;
                if offset == last || Some(offset) == last.checked_add(1) {
                    run.blocks = offset - run.block + 1;
                    return;
                }
            }
        }
        self.runs.push(Run {
            link_id,
            block: offset,
            blocks: 1,
        });
    }

    /// The first visit id of `first` and the last of `last` (blocks held here): an entry's
    /// ids. A block not noted (none is) widens them to every id.
    fn ids(&self, first: u64, last: u64) -> (u64, u64) {
        let of = |block: u64| {
            self.block_ids
                .binary_search_by_key(&block, |(b, _, _)| *b)
                .ok()
                .map(|at| self.block_ids[at])
        };
        (
            of(first).map_or(0, |(_, id, _)| id),
            of(last).map_or(u64::MAX, |(_, _, id)| id),
        )
    }

    /// What the runs hold, in whole chunks, and the blocks' ids.
    fn bytes(&self) -> usize {
        self.runs.bytes() + self.block_ids.capacity() * std::mem::size_of::<(u64, u64, u64)>()
    }

    fn due(&self, max_bytes: usize) -> bool {
        self.bytes() >= max_bytes
            || self.since.is_some_and(|t| t.elapsed() >= FOLD_EVERY)
            || self
                .runs
                .last()
                .is_some_and(|run| run.block >= u32::MAX / 2)
    }

    /// The entry of `runs` (all of one link, in block order).
    fn span(&self, runs: impl Iterator<Item = Run>) -> Option<Span> {
        let mut blocks: Vec<u64> = Vec::new();
        for run in runs {
            let first = self.folded + u64::from(run.block);
            for block in first..first + u64::from(run.blocks) {
                if blocks.last().is_none_or(|&b| b < block) {
                    blocks.push(block);
                }
            }
        }
        let (first, last) = (*blocks.first()?, *blocks.last()?);
        let (first_id, last_id) = self.ids(first, last);
        Some(Span {
            first_id,
            last_id,
            blocks,
        })
    }

    /// The fold point, and the link's entry held here (a scan of the runs: listings are rare
    /// beside writes).
    pub(super) fn of(&self, link_id: u64) -> (u64, Option<Span>) {
        let runs = self.runs.iter().filter(|r| r.link_id == link_id).copied();
        (self.folded, self.span(runs))
    }

    /// Hands every link's entry to `each`, in link order; returns the last block they name
    /// (the fold point when nothing is held). Sorts positions (4 bytes a run), not the runs.
    fn each_entry(&self, mut each: impl FnMut(u64, Span) -> StoreResult<()>) -> StoreResult<u64> {
        let run = |at: &u32| self.runs.get(*at as usize).copied();
        // Runs are far fewer than 2^32: the bound folds long before.
        let mut order: Vec<u32> = (0..self.runs.len() as u32).collect();
        order.sort_unstable_by_key(|at| run(at).map(|r| (r.link_id, r.block)));
        let mut through = self.folded;
        for group in order.chunk_by(|a, b| run(a).map(|r| r.link_id) == run(b).map(|r| r.link_id)) {
            let Some(first) = group.first().and_then(run) else {
                continue;
            };
            if let Some(span) = self.span(group.iter().filter_map(run)) {
                through = through.max(span.blocks.last().copied().unwrap_or(through));
                each(first.link_id, span)?;
            }
        }
        Ok(through)
    }

    /// Forgets blocks up to `through` (now in the tree).
    fn folded_through(&mut self, through: u64) {
        let shift = through.saturating_sub(self.folded);
        self.runs.retain(|run| {
            // Offsets `block..end`; those up to `shift` are folded.
            let end = u64::from(run.block) + u64::from(run.blocks);
            if end <= shift + 1 {
                return false;
            }
            let start = u64::from(run.block).max(shift + 1);
            // Both within the old offsets, so within 32 bits.
            run.blocks = (end - start) as u32;
            run.block = (start - shift) as u32;
            true
        });
        self.block_ids.retain(|(block, _, _)| *block > through);
        self.folded = through;
        self.since = (!self.runs.is_empty()).then(Instant::now);
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
            if recent.runs.is_empty() {
                return Ok(());
            }
            // In key order, a chunk at a time: the entries that fall in one leaf are written
            // to it as one fragment ([`sled::Tree::set_sorted`]).
            let mut chunk = Vec::with_capacity(FOLD_CHUNK);
            let through = recent.each_entry(|link_id, span| {
                chunk.push((
                    sled::IVec::from(&link_key(link_id, span.blocks[0])[..]),
                    sled::IVec::from(span.value()),
                ));
                if chunk.len() == FOLD_CHUNK {
                    self.visit_index.set_sorted(&chunk).map_err(backend)?;
                    chunk.clear();
                }
                Ok(())
            })?;
            if !chunk.is_empty() {
                self.visit_index.set_sorted(&chunk).map_err(backend)?;
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

    /// What a fold hands sled ([`sled::Tree::set_sorted`]): the keys that fall in one leaf
    /// go to it as one fragment, new keys split leaves as inserts do, and every value reads
    /// back, from memory and from disk after a reopen (the fragments decoded again).
    #[test]
    fn a_sorted_write_links_one_fragment_a_leaf_and_everything_reads_back() {
        use std::collections::BTreeMap;
        let pair = |k: u32, round: u8| {
            let mut value = vec![round; 24];
            value[..4].copy_from_slice(&k.to_be_bytes());
            (
                sled::IVec::from(&k.to_be_bytes()[..]),
                sled::IVec::from(value),
            )
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let mut model = BTreeMap::new();
        {
            let db = crate::sled::links::tests::open(dir.path());
            let tree = db.open_tree("index").expect("tree");
            for k in (0..20_000).step_by(10) {
                let (key, value) = pair(k, 1);
                tree.insert(&key, &value).expect("insert");
                model.insert(key, value);
            }
            // The first leaf read as one fragment, then three of its keys written again
            // (an overwrite: the leaf keeps its size and is not split).
            tree.get_consolidating(0u32.to_be_bytes(), 2).expect("get");
            assert_eq!(tree.fragments_of(0u32.to_be_bytes()).expect("fragments"), 1);
            let again: Vec<_> = [0, 10, 20].into_iter().map(|k| pair(k, 2)).collect();
            tree.set_sorted(&again).expect("set_sorted");
            model.extend(again);
            assert_eq!(
                tree.fragments_of(0u32.to_be_bytes()).expect("fragments"),
                2,
                "three keys of one leaf, one fragment"
            );
            // Every key between, new, in one call: leaves fill past their size and split.
            let between: Vec<_> = (0..20_000)
                .filter(|k| k % 10 == 5)
                .map(|k| pair(k, 3))
                .collect();
            tree.set_sorted(&between).expect("set_sorted");
            model.extend(between);
            assert_eq!(tree.set_sorted(&[]), Ok(()));
            // Keys out of order are refused, and nothing of them is written.
            let unordered = [pair(7, 4), pair(3, 4)];
            assert!(tree.set_sorted(&unordered).is_err());
            assert_eq!(tree.get(7u32.to_be_bytes()).expect("get"), None);
            let read: BTreeMap<_, _> = tree.iter().map(|kv| kv.expect("read")).collect();
            assert_eq!(read, model);
            db.flush().expect("flush");
        }
        let db = crate::sled::links::tests::open(dir.path());
        let tree = db.open_tree("index").expect("tree");
        for (key, value) in &model {
            assert_eq!(tree.get(key).expect("get").as_ref(), Some(value));
        }
        assert_eq!(tree.len(), model.len());
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
            // A page at a time: entries' ids are their blocks' (wider than the link's), and
            // no visit is skipped or listed twice across pages.
            let (mut paged, mut after) = (Vec::new(), None);
            loop {
                let page = store.visits_page(link, after, 1).expect("page");
                after = page.next;
                paged.extend(ids_of(page));
                if after.is_none() {
                    break;
                }
            }
            assert_eq!(paged, forward, "link {link}: forward a page at a time");
            let (mut paged, mut before) = (Vec::new(), None);
            loop {
                let page = store.recent_visits(link, before, 1).expect("recent");
                before = page.next;
                paged.extend(ids_of(page));
                if before.is_none() {
                    break;
                }
            }
            paged.reverse();
            assert_eq!(paged, forward, "link {link}: backward a page at a time");
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

    /// After a fold the runs' chunks go, and their bytes with them.
    #[test]
    fn a_fold_frees_what_it_wrote() {
        let mut recent = Recent::default();
        for link in 0..10_000 {
            recent.add(link, 10, link, link);
        }
        recent.add(7, 11, 20_000, 20_000);
        let before = recent.bytes();
        assert!(before >= 10_001 * std::mem::size_of::<Run>());
        assert!(before < 10_001 * std::mem::size_of::<Run>() + 4096 * 32 + 1024);
        recent.folded_through(10);
        assert_eq!(recent.runs.len(), 1);
        assert!(recent.bytes() < before / 2);
        assert_eq!(recent.of(7).1.map(|s| s.blocks), Some(vec![11]));
    }

    /// A write's links walk its blocks each from the first; every block's ids stay one
    /// ascending entry, and a link's entry takes its blocks' ids, which hold its own.
    #[test]
    fn an_entrys_ids_are_its_blocks_and_hold_the_links_own() {
        let mut recent = Recent::default();
        // Link 7 over blocks 5..=6 (ids 10..=30), link 8 in block 5 (id 12), 9 in 6 (id 31).
        recent.add(7, 5, 10, 30);
        recent.add(7, 6, 10, 30);
        recent.add(8, 5, 12, 12);
        recent.add(9, 6, 31, 31);
        assert_eq!(recent.block_ids, vec![(5, 10, 30), (6, 10, 31)]);
        let span = |link| recent.of(link).1.expect("held");
        assert_eq!((span(8).first_id, span(8).last_id), (10, 30));
        assert_eq!((span(9).first_id, span(9).last_id), (10, 31));
        assert_eq!(span(7).blocks, vec![5, 6]);
        recent.folded_through(5);
        assert_eq!(recent.block_ids, vec![(6, 10, 31)]);
        assert_eq!(
            recent.ids(5, 6),
            (0, 31),
            "a block not held widens to every id"
        );
    }

    #[test]
    fn a_link_seen_in_many_writes_is_one_entry_until_the_fold() {
        let mut recent = Recent::default();
        recent.add(7, 10, 100, 105);
        recent.add(8, 10, 106, 106);
        recent.add(7, 11, 107, 107);
        recent.add(7, 11, 108, 109);
        recent.add(7, 12, 110, 110);
        recent.add(7, 20, 200, 201);
        let (_, span) = recent.of(7);
        assert_eq!(
            span,
            Some(Span {
                first_id: 100,
                last_id: 201,
                blocks: vec![10, 11, 12, 20]
            })
        );
        assert_eq!(
            recent.runs.len(),
            4,
            "7 in 10, 8 in 10, 7 in 11..=12, 7 in 20"
        );
        let mut entries = Vec::new();
        let through = recent
            .each_entry(|link, span| {
                entries.push((link, span.blocks));
                Ok(())
            })
            .expect("entries");
        assert_eq!(through, 20);
        assert_eq!(entries, vec![(7, vec![10, 11, 12, 20]), (8, vec![10])]);
        assert!(recent.due(recent.bytes()) && !recent.due(recent.bytes() + 1));
        recent.folded_through(11);
        assert_eq!(recent.of(7).1.map(|s| s.blocks), Some(vec![12, 20]));
        assert_eq!(recent.of(8), (11, None));
        assert_eq!(recent.runs.len(), 2);
        recent.add(9, 21, 300, 300);
        assert_eq!(recent.of(9).1.map(|s| s.blocks), Some(vec![21]));
    }
}
