//! The per-link day counters (`visit_days`) not yet written, held in memory, and their fold.
//!
//! Each write of visits (about a second) adds its counts per (link, day) to [`Unwritten`];
//! every [`FOLD_EVERY`] (or sooner past [`MAX_HELD`] held days, or past their bytes' bound,
//! `memory.budget`'s share) a fold starts, which adds them to the stored records in key order,
//! a share at each of the writes that follow ([`FOLD_SLICE`]) while new counts gather beside it.
//! A write whose counts could take what is held past the bytes' bound waits for the fold
//! under way and what is held to be written first, so the bound holds (the visit queue sheds
//! meanwhile).
//! A link visited every second costs one record write per fold instead of one per second, and
//! a fold that touches many records of one tree node does so while the node is in memory. With a read and a write of every dirty record every second,
//! the counters were the largest cost of recording visits: switching them off (an experiment)
//! took redirects from 0.69 to 0.75 of the ceiling under Zipf traffic over 1 M links, and from
//! 0.41 to 0.55 under uniform traffic.
//!
//! Readers (a link's totals and summary) read the stored records and what is held, under one
//! read lock; the fold moves each (link, day) from memory into its record under the write
//! lock, so a reader sees each visit counted once throughout.
//!
//! Crash safety: the visits are durable in their blocks at every write. The fold point
//! (counter `visit_counted_block`: the last block whose visits the records count) moves only
//! after a fold has written every record, and opening counts the blocks after it again (at
//! most about 20 seconds of them: a fold's and the one gathering). A fold
//! cut short would count some of those twice, so each record carries the last block it counts
//! (`through`), and the fold notes where it will stop (`visit_counting_block`) before it
//! starts: opening skips, for a (link, day), the blocks up to its record's `through`. Adding
//! to an earlier day than the link's last record (imports in any order) also adds to the later
//! records' running totals; a crash between those writes and the record's own can count that
//! day twice in the later totals.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::formats::{decode_day_record, link_key, table_bytes, DayDelta, FastMap};
use super::keys::counter;
use super::{backend, SledStore};
use crate::model::client_hash_of;
use crate::model::tally::referer_host;
use crate::{NewVisit, StoreResult, Visit};

/// How long counts wait in memory before a fold starts. It bounds the blocks counted again
/// when the store opens after a crash, and how much a fold writes.
pub(super) const FOLD_EVERY: Duration = Duration::from_secs(10);
/// (link, day) counts held before a fold starts early (a few hundred bytes each): under
/// traffic spread over a million links, a fold every few seconds.
pub(super) const MAX_HELD: usize = 1 << 17;
/// How long each write spends on the fold under way (at least: it also writes as many records
/// as the write added, so that the fold keeps pace). A fold is paced over the writes that
/// follow it rather than made at once: 131,072 records at once kept the writer from the
/// queue for seconds, and at 80,000 redirects a second the queue overflowed.
const FOLD_SLICE: Duration = Duration::from_millis(250);
/// Bytes of a held (link, day) besides its counts' lists and sketch and its map slot (counted
/// from the table, [`SLOT_BYTES`]): its key while a fold is under way, the allocator's
/// rounding of its three small lists.
const ENTRY_BYTES: usize = 64;
/// Bytes of one slot of the map of links (its key, its days inline, the table's control
/// byte). The table is counted whole, from its capacity: it is at most 7/8 full, doubles when
/// it grows, and a fold's table keeps its size until the fold ends. A heap profile (jemalloc's,
/// 1 M links, uniform redirects, `memory.budget = "256MB"`) showed the tables at 21 MB and
/// the counts at 40 MB against a bound of 15 MB while they were estimated per entry.
const SLOT_BYTES: usize = std::mem::size_of::<(u64, SmallVec<[(u64, DayDelta); 1]>)>() + 1;
/// The most bytes one new (link, day) can add before the write's counts are in: its slot
/// (twice over while the table doubles), its lists and sketch at their first sizes.
const NEW_DAY_BYTES: usize = 2 * SLOT_BYTES + ENTRY_BYTES + 256;
/// The bound of [`super::StoreOptions::new`]: [`MAX_HELD`] days of a few hundred bytes.
pub(super) const DEFAULT_HELD_BYTES: usize = MAX_HELD * 256;

/// What a held (link, day) takes, estimated: its lists as allocated, its sketch, the entry.
/// The dimensions' strings are shared with the visits' (nothing is counted for them).
fn delta_bytes(delta: &DayDelta) -> usize {
    delta.hours.capacity() * std::mem::size_of::<(u8, u64, u64)>()
        + delta.dims.capacity() * std::mem::size_of::<(u8, std::sync::Arc<str>, u64)>()
        + delta.uniques.heap_bytes()
        + ENTRY_BYTES
}

/// Counts per link and day.
#[derive(Default)]
struct Days {
    /// Link → its days, each with its counts.
    links: FastMap<u64, SmallVec<[(u64, DayDelta); 1]>>,
    /// (link, day) pairs.
    len: usize,
    /// Their bytes ([`delta_bytes`]), the map's table aside ([`Days::bytes`]).
    bytes: usize,
}

impl Days {
    /// What the days hold: their counts, and the map's table at its capacity.
    fn bytes(&self) -> usize {
        self.bytes + table_bytes(&self.links, SLOT_BYTES)
    }

    /// How many (link, day) pairs of `visits` are not held here.
    fn new_days(&self, visits: &[NewVisit]) -> usize {
        let mut new: FastMap<(u64, u64), ()> = FastMap::default();
        for v in visits {
            let (link_id, day) = (v.visit.link_id, v.visit.at / super::DAY_MS);
            if !self.of(link_id).iter().any(|(d, _)| *d == day) {
                new.insert((link_id, day), ());
            }
        }
        new.len()
    }

    /// Adds counts; whether the (link, day) is new here.
    fn add(&mut self, link_id: u64, day: u64, delta: DayDelta) -> bool {
        let days = self.links.entry(link_id).or_default();
        match days.iter_mut().find(|(d, _)| *d == day) {
            Some((_, held)) => {
                let before = delta_bytes(held);
                held.merge(&delta);
                self.bytes = (self.bytes + delta_bytes(held)).saturating_sub(before);
                false
            }
            None => {
                self.bytes += delta_bytes(&delta);
                days.push((day, delta));
                self.len += 1;
                true
            }
        }
    }

    fn of(&self, link_id: u64) -> &[(u64, DayDelta)] {
        self.links.get(&link_id).map_or(&[], |days| &days[..])
    }

    fn take(&mut self, link_id: u64, day: u64) -> Option<DayDelta> {
        let days = self.links.get_mut(&link_id)?;
        let at = days.iter().position(|(d, _)| *d == day)?;
        let (_, delta) = days.remove(at);
        if days.is_empty() {
            self.links.remove(&link_id);
        }
        self.len -= 1;
        self.bytes = self.bytes.saturating_sub(delta_bytes(&delta));
        Some(delta)
    }

    /// Adds a visit; whether its (link, day) is new here.
    fn add_visit(&mut self, new: &NewVisit) -> bool {
        let (link_id, day) = (new.visit.link_id, new.visit.at / super::DAY_MS);
        let days = self.links.entry(link_id).or_default();
        if let Some((_, held)) = days.iter_mut().find(|(d, _)| *d == day) {
            let before = delta_bytes(held);
            held.add(new);
            self.bytes = (self.bytes + delta_bytes(held)).saturating_sub(before);
            return false;
        }
        let mut delta = DayDelta::default();
        delta.add(new);
        self.bytes += delta_bytes(&delta);
        days.push((day, delta));
        self.len += 1;
        true
    }

    /// Every (link, day), in descending key order (the fold pops from the end).
    fn keys_descending(&self) -> Vec<(u64, u64)> {
        let mut keys: Vec<(u64, u64)> = self
            .links
            .iter()
            .flat_map(|(&link_id, days)| days.iter().map(move |(day, _)| (link_id, *day)))
            .collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        keys
    }
}

/// The counts not yet in `visit_days`: those a fold under way is writing, and those gathered
/// since it started.
#[derive(Default)]
pub(super) struct Unwritten {
    /// The last block whose visits the stored records count.
    counted: u64,
    /// The last block whose visits are counted here.
    through: u64,
    /// Counts gathered since the fold under way started (or the last one ended).
    held: Days,
    /// When the oldest of `held` was added.
    since: Option<Instant>,
    /// The fold under way: the counts it has still to write, of blocks up to `folding_through`,
    /// and their keys, popped in key order.
    folding: Days,
    folding_keys: Vec<(u64, u64)>,
    folding_through: u64,
}

impl Unwritten {
    fn add_visit(&mut self, new: &NewVisit) -> bool {
        self.since.get_or_insert_with(Instant::now);
        self.held.add_visit(new)
    }

    /// Held and folding together, with their tables and the fold's keys.
    fn bytes(&self) -> usize {
        self.held.bytes()
            + self.folding.bytes()
            + self.folding_keys.capacity() * std::mem::size_of::<(u64, u64)>()
    }

    /// Whether a fold should start: past either bound, or when the oldest counts have waited
    /// [`FOLD_EVERY`].
    fn due(&self, max_bytes: usize) -> bool {
        self.held.len >= MAX_HELD
            || self.bytes() >= max_bytes
            || self.since.is_some_and(|t| t.elapsed() >= FOLD_EVERY)
    }

    /// The link's days not yet in the tree, with their counts (a (link, day) may be in both
    /// the fold under way and what was gathered since).
    pub(super) fn of(&self, link_id: u64) -> impl Iterator<Item = &(u64, DayDelta)> {
        self.folding.of(link_id).iter().chain(self.held.of(link_id))
    }

    /// Whether no counts are held.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.held.len == 0 && self.folding.len == 0
    }

    /// Starts a fold of everything held; returns the block it counts through.
    fn start_fold(&mut self) -> u64 {
        self.folding = std::mem::take(&mut self.held);
        self.folding_keys = self.folding.keys_descending();
        self.folding_through = self.through;
        self.since = None;
        self.through
    }
}

/// How much of a fold one call writes.
#[derive(Clone, Copy)]
enum Pace {
    /// A write's share: [`FOLD_SLICE`], and at least this many records.
    Slice(usize),
    /// Everything (close, migration).
    All,
    /// This many records, then stop as a crash would (tests).
    #[cfg(test)]
    Records(usize),
}

impl SledStore {
    /// Holds a write's counts; `through` is the write's last block. Then writes a share of the
    /// fold under way, starting one when due.
    ///
    /// When the write's counts could take what is held past its bound, the fold under way and
    /// then everything held are written first, however long that takes: the held counts stay
    /// within the bound and one write's worth, and meanwhile the visit queue fills and sheds
    /// (dropped visits are counted). Folding in the middle of a write's counts would leave a
    /// record counting part of the write's blocks, which a crash could count again or lose.
    pub(super) fn hold_counts(&self, visits: &[NewVisit], through: u64) -> StoreResult<()> {
        let _one_at_a_time = self.count_fold.lock();
        let past_bound = {
            let unwritten = self.unwritten_counts.read();
            let (held, bound) = (unwritten.bytes(), self.held_counts_bytes);
            // Counting the write's new days takes a map of them: only when a write of new
            // days only might not fit (new days are at most the visits).
            held + visits.len() * NEW_DAY_BYTES > bound
                && held + unwritten.held.new_days(visits) * NEW_DAY_BYTES > bound
        };
        if past_bound {
            self.fold_counts_locked()?;
        }
        let added = {
            let mut unwritten = self.unwritten_counts.write();
            let mut added = 0;
            for new in visits {
                added += usize::from(unwritten.add_visit(new));
            }
            unwritten.through = unwritten.through.max(through);
            added
        };
        self.fold_step(Pace::Slice(added))
    }

    /// Writes every held count into its record (closing, migrating).
    pub(super) fn fold_counts(&self) -> StoreResult<()> {
        let _one_at_a_time = self.count_fold.lock();
        self.fold_counts_locked()
    }

    /// [`Self::fold_counts`], `count_fold` held.
    fn fold_counts_locked(&self) -> StoreResult<()> {
        self.fold_step(Pace::All)?;
        // What was gathered while that fold was under way.
        self.fold_step(Pace::All)
    }

    /// Writes part of the fold under way (starting one when due, or for `Pace::All` when
    /// anything is held), in key order; when it is done, moves the fold point. Held by
    /// `count_fold`.
    fn fold_step(&self, pace: Pace) -> StoreResult<()> {
        let started = Instant::now();
        let through = {
            let mut unwritten = self.unwritten_counts.write();
            if unwritten.folding_keys.is_empty() {
                let start = match pace {
                    Pace::Slice(_) => unwritten.due(self.held_counts_bytes),
                    _ => unwritten.held.len > 0,
                };
                if !start {
                    return Ok(());
                }
                let through = unwritten.start_fold();
                // Records the fold writes say `through`; after a crash, opening must know
                // which blocks they may already count.
                self.counters
                    .insert(counter::VISIT_COUNTING_BLOCK, &through.to_be_bytes()[..])
                    .map_err(backend)?;
            }
            unwritten.folding_through
        };
        let mut written = 0usize;
        loop {
            let enough = match pace {
                Pace::Slice(added) => written >= added && started.elapsed() >= FOLD_SLICE,
                Pace::All => false,
                #[cfg(test)]
                Pace::Records(n) => written >= n,
            };
            // Out of memory and into the record under one write lock: a reader sees the
            // counts in one place or the other.
            let mut unwritten = self.unwritten_counts.write();
            // Past a bound, the write goes on folding until back under it (or the fold ends).
            if enough && unwritten.held.len < MAX_HELD && unwritten.bytes() < self.held_counts_bytes
            {
                return Ok(());
            }
            let Some((link_id, day)) = unwritten.folding_keys.pop() else {
                break;
            };
            if let Some(delta) = unwritten.folding.take(link_id, day) {
                if let Err(e) = self.count_day(link_id, day, &delta, through) {
                    // A storage fault: the counts stay held (and in the blocks, which the
                    // store reopened counts again from the fold point).
                    unwritten.folding.add(link_id, day, delta);
                    unwritten.folding_keys.push((link_id, day));
                    return Err(e);
                }
            }
            written += 1;
        }
        self.counters
            .insert(counter::VISIT_COUNTED_BLOCK, &through.to_be_bytes()[..])
            .map_err(backend)?;
        let mut unwritten = self.unwritten_counts.write();
        unwritten.counted = through;
        // The fold's table and keys, empty now, go rather than wait for the next fold.
        unwritten.folding = Days::default();
        unwritten.folding_keys = Vec::new();
        Ok(())
    }

    /// The last block whose visits the stored records count.
    pub(super) fn counts_folded(&self) -> u64 {
        self.unwritten_counts.read().counted
    }

    /// Builds the held counts at open: the visits of the blocks after the fold point, less
    /// those a fold cut short already counted. A store without a fold point (written before
    /// counts were held) counted every block as it was written. Returns the blocks read.
    pub(super) fn load_unwritten_counts(&self) -> StoreResult<u64> {
        let last_block = self.counter(counter::VISIT_BLOCK_ID)?;
        let counted = match self.stored_counter(counter::VISIT_COUNTED_BLOCK)? {
            Some(counted) => counted,
            None => {
                self.mark_counted(last_block, sled::Batch::default())?;
                last_block
            }
        };
        let counting = self
            .stored_counter(counter::VISIT_COUNTING_BLOCK)?
            .unwrap_or(counted);
        let mut unwritten = Unwritten {
            counted,
            through: counted,
            ..Unwritten::default()
        };
        // Per (link, day) met in a block a cut-short fold covered: its record's `through`.
        let mut stamps: FastMap<(u64, u64), u64> = FastMap::default();
        let mut read = 0;
        for item in self.blocks_after(counted) {
            let (block_id, value) = item?;
            read += 1;
            unwritten.through = unwritten.through.max(block_id);
            let visits = match super::formats::block_all_visits(&value) {
                Ok(visits) => visits,
                // `check` names it; its visits stay uncounted, as a damaged block's would.
                Err(e) => {
                    tracing::error!(block_id, error = %e, "corrupt visit block: not counted");
                    continue;
                }
            };
            for visit in visits {
                let (link_id, day) = (visit.link_id, visit.at / super::DAY_MS);
                if block_id <= counting {
                    let through = match stamps.get(&(link_id, day)) {
                        Some(&t) => t,
                        None => {
                            let t = self.record_through(link_id, day)?;
                            stamps.insert((link_id, day), t);
                            t
                        }
                    };
                    if block_id <= through {
                        continue;
                    }
                }
                unwritten.add_visit(&recounted(visit));
            }
        }
        *self.unwritten_counts.write() = unwritten;
        Ok(read)
    }

    /// The last block the stored record of (link, day) counts; 0 if none.
    fn record_through(&self, link_id: u64, day: u64) -> StoreResult<u64> {
        Ok(self
            .visit_days
            .get(link_key(link_id, day))
            .map_err(backend)?
            .map_or(0, |bytes| decode_day_record(link_id, day, &bytes).through))
    }

    /// Notes that the records count every block up to `block` (nothing is held), in one
    /// atomic write of the counters with what `batch` holds already.
    pub(super) fn mark_counted(&self, block: u64, mut batch: sled::Batch) -> StoreResult<()> {
        batch.insert(counter::VISIT_COUNTED_BLOCK, &block.to_be_bytes()[..]);
        batch.insert(counter::VISIT_COUNTING_BLOCK, &block.to_be_bytes()[..]);
        self.counters.apply_batch(batch).map_err(backend)?;
        let mut unwritten = self.unwritten_counts.write();
        unwritten.counted = block;
        unwritten.through = unwritten.through.max(block);
        Ok(())
    }
}

/// A stored visit as the counters take it: the distinct-visitor hash and the referer's host
/// are derived again from what the visit keeps.
fn recounted(visit: Visit) -> NewVisit {
    NewVisit {
        client_hash: client_hash_of(&visit.client_id),
        referer_host: referer_host(&visit.referer).into(),
        visit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;
    use crate::Dimension;

    const DAY: u64 = super::super::DAY_MS;
    const HOUR: u64 = 3_600_000;

    fn new(link_id: u64, at: u64, client: &str, is_bot: bool) -> NewVisit {
        recounted(Visit {
            id: 0,
            link_id,
            code: format!("c{link_id}"),
            at,
            client_id: client.into(),
            ip: None,
            user_agent: "ua".into(),
            referer: "https://news.example.org/a".into(),
            browser: "Chrome".into(),
            browser_version: "1".into(),
            os: "Linux".into(),
            os_version: "".into(),
            device: "desktop".into(),
            is_bot,
            country: None,
            region: None,
            city: None,
            isp: None,
            route: None,
        })
    }

    /// What a reader sees of a link: totals, hours, top values and distinct visitors.
    type Seen = (
        (u64, u64),
        Vec<(u64, u64, u64)>,
        Vec<(Dimension, String, u64)>,
        u64,
    );

    fn seen(store: &SledStore, link_id: u64) -> Seen {
        let totals = store.visit_totals(link_id).expect("totals");
        let summary = store.visit_summary(link_id, 0, 3 * DAY).expect("summary");
        let mut top = summary.top;
        top.sort();
        (
            (totals.visits, totals.bots),
            summary
                .hours
                .iter()
                .map(|h| (h.hour, h.visits, h.bots))
                .collect(),
            top,
            summary.unique_visitors,
        )
    }

    fn forget_and_reload(store: &SledStore) -> u64 {
        *store.unwritten_counts.write() = Unwritten::default();
        store.load_unwritten_counts().expect("reload")
    }

    /// Counts read the same while held, after the memory part is lost (a crash), after a fold
    /// cut short by a crash, after a whole fold and after close and reopen: every visit once.
    #[test]
    fn held_counts_are_read_once_through_crashes_and_folds() {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = super::super::StoreOptions::new(dir.path());
        let store = SledStore::open(&options).expect("open");
        for batch in [
            vec![new(7, 1_000, "a", false), new(7, 2_000, "b", false)],
            vec![new(8, 3_000, "a", true), new(7, HOUR + 1, "c", false)],
            vec![new(7, DAY + 5, "a", false), new(8, DAY + 10, "b", false)],
        ] {
            let mut batch = batch;
            store.record_visits(&mut batch).expect("record");
        }
        assert!(store.visit_days.is_empty(), "nothing folded yet");
        let (seven, eight) = (seen(&store, 7), seen(&store, 8));
        assert_eq!(seven.0, (4, 0));
        assert_eq!(seven.1, vec![(0, 2, 0), (1, 1, 0), (24, 1, 0)]);
        assert_eq!(seven.3, 3, "a, b and c");
        assert!(seven
            .2
            .contains(&(Dimension::Referer, "news.example.org".into(), 4)));
        assert_eq!(eight.0, (2, 1));
        assert_eq!(eight.3, 1, "the bot is not a visitor");
        let same = |store: &SledStore, when: &str| {
            assert_eq!(seen(store, 7), seven, "link 7 {when}");
            assert_eq!(seen(store, 8), eight, "link 8 {when}");
        };

        assert_eq!(forget_and_reload(&store), 3);
        same(&store, "rebuilt from the blocks");

        // A fold that wrote (7, day 0) and (7, day 1), then the process died.
        {
            let _fold = store.count_fold.lock();
            store.fold_step(Pace::Records(2)).expect("part of a fold");
        }
        assert_eq!(store.visit_days.len(), 2);
        same(&store, "halfway through a fold");
        forget_and_reload(&store);
        same(&store, "rebuilt after a fold cut short");

        store.fold_counts().expect("fold");
        assert_eq!(store.visit_days.len(), 4);
        assert!(store.unwritten_counts.read().is_empty());
        same(&store, "folded");
        assert_eq!(forget_and_reload(&store), 0, "nothing after the fold point");
        same(&store, "folded and reopened");

        let mut later = vec![new(7, DAY + 7, "d", false)];
        store.record_visits(&mut later).expect("record");
        assert_eq!(seen(&store, 7).0, (5, 0));
        store.close().expect("close");
        drop(store);
        let store = SledStore::open(&options).expect("reopen");
        assert!(store.unwritten_counts.read().is_empty(), "close folds");
        assert_eq!(seen(&store, 7).0, (5, 0));
        assert_eq!(seen(&store, 7).3, 4);
        assert_eq!(seen(&store, 8), eight);
    }

    /// Past the bytes' bound a fold starts at the next write, however young the counts, and
    /// the write folds until back under it; under the default bound the same write holds them.
    #[test]
    fn a_small_byte_bound_makes_a_fold_start_early() {
        let visits = || -> Vec<NewVisit> {
            (0..50)
                .map(|link| new(link, 1_000 + link, "a", false))
                .collect()
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SledStore::open(&super::super::StoreOptions::new(dir.path())).expect("open");
        store.record_visits(&mut visits()).expect("record");
        assert!(store.visit_days.is_empty(), "held under the default bound");
        let held = store.unwritten_counts.read().bytes();
        assert!(held >= 50 * ENTRY_BYTES, "{held} bytes held for 50 days");

        let dir = tempfile::tempdir().expect("temp dir");
        let options = super::super::StoreOptions {
            held_counts_bytes: 10 * ENTRY_BYTES,
            ..super::super::StoreOptions::new(dir.path())
        };
        let store = SledStore::open(&options).expect("open");
        store.record_visits(&mut visits()).expect("record");
        assert!(
            store.unwritten_counts.read().bytes() < 10 * ENTRY_BYTES,
            "folded back under the bound"
        );
        assert!(!store.visit_days.is_empty(), "a fold started early");
        assert_eq!(seen(&store, 3).0, (1, 0), "every visit counted once");
    }

    fn hundred_links_from(first: u64) -> Vec<NewVisit> {
        (first..first + 100)
            .map(|link| new(link, 1_000 + link, "a", false))
            .collect()
    }

    /// A write whose counts could take the held ones past their bound writes the fold under
    /// way, and what is held, before its own counts go in; every visit is still counted once.
    #[test]
    fn a_write_past_the_bound_writes_what_is_held_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let bound = 150 * NEW_DAY_BYTES;
        let options = super::super::StoreOptions {
            held_counts_bytes: bound,
            ..super::super::StoreOptions::new(dir.path())
        };
        let store = SledStore::open(&options).expect("open");
        store
            .record_visits(&mut hundred_links_from(0))
            .expect("record");
        {
            // A fold under way, a tenth written.
            let _one_at_a_time = store.count_fold.lock();
            store.fold_step(Pace::Records(10)).expect("part of a fold");
        }
        assert_eq!(store.unwritten_counts.read().folding.len, 90);
        store
            .record_visits(&mut hundred_links_from(100))
            .expect("record");
        let unwritten = store.unwritten_counts.read();
        assert_eq!(unwritten.folding.len, 0, "the fold under way was written");
        assert_eq!(unwritten.held.len, 100, "the write's own counts are held");
        assert!(
            unwritten.bytes() <= bound,
            "{} > {bound}",
            unwritten.bytes()
        );
        drop(unwritten);
        for link in [0, 99, 100, 199] {
            assert_eq!(seen(&store, link).0, (1, 0), "link {link}");
        }
    }

    /// What is held counts the maps' tables, and a finished fold lets its table and keys go.
    #[test]
    fn held_bytes_count_the_tables_and_a_finished_fold_frees_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SledStore::open(&super::super::StoreOptions::new(dir.path())).expect("open");
        store
            .record_visits(&mut hundred_links_from(0))
            .expect("record");
        {
            let unwritten = store.unwritten_counts.read();
            let table = unwritten.held.links.capacity() * SLOT_BYTES;
            assert!(unwritten.bytes() >= table + 100 * ENTRY_BYTES);
        }
        store.fold_counts().expect("fold");
        let unwritten = store.unwritten_counts.read();
        assert_eq!(unwritten.folding.links.capacity(), 0);
        assert_eq!(unwritten.folding_keys.capacity(), 0);
        assert_eq!(unwritten.bytes(), 0);
    }

    #[test]
    fn a_link_day_held_over_many_writes_is_one_entry() {
        let mut days = Days::default();
        for (link, day, new_here) in [(7, 1, true), (7, 1, false), (8, 1, true), (7, 2, true)] {
            let mut delta = DayDelta::default();
            delta.add(&new(link, day * DAY, "a", false));
            assert_eq!(days.add(link, day, delta), new_here);
        }
        assert_eq!(days.len, 3);
        let bytes: usize = [(7, 1), (8, 1), (7, 2)]
            .iter()
            .map(|&(link, day)| {
                delta_bytes(&days.of(link).iter().find(|d| d.0 == day).expect("held").1)
            })
            .sum();
        assert_eq!(days.bytes, bytes);
        assert_eq!(days.of(7)[0].1.counts(), (2, 0));
        assert_eq!(days.of(7)[0].1.uniques.estimate(), 1);
        assert_eq!(days.keys_descending(), vec![(8, 1), (7, 2), (7, 1)]);
        assert!(days.take(7, 1).is_some());
        assert!(days.take(7, 1).is_none());
        assert_eq!(days.len, 2);
        assert_eq!(days.of(7).len(), 1);
    }
}
