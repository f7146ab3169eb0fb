//! The per-link day counters (`visit_days`) not yet written, held in memory, and their fold.
//!
//! Each write of visits (about a second) adds its counts per (link, day) to [`Unwritten`];
//! every [`FOLD_EVERY`] (or sooner past [`MAX_HELD`] held visits, or past their bytes' bound,
//! `memory.budget`'s share) a fold starts, which adds them to the stored records in key order,
//! a share at each of the writes that follow ([`FOLD_SLICE`]) while new counts gather beside it.
//! A write whose counts could take what is held past the bytes' bound waits for the fold
//! under way and what is held to be written first, so the bound holds (the visit journal
//! grows meanwhile).
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

use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::chunked::Chunked;
use super::formats::{decode_day_record, link_key, table_bytes, DayDelta, FastMap};
use super::keys::counter;
use super::{backend, SledStore};
use crate::model::client_hash_of;
use crate::model::tally::{referer_host, top_values};
use crate::model::time::HOUR_MS;
use crate::{Dimension, NewVisit, StoreResult, Visit};

/// How long counts wait in memory before a fold starts. It bounds the blocks counted again
/// when the store opens after a crash, and how much a fold writes.
pub(super) const FOLD_EVERY: Duration = Duration::from_secs(10);
/// Visits held before a fold starts early, without a configured bound (about 20 MB of them):
/// under traffic spread over a million links, a fold every few seconds.
pub(super) const MAX_HELD: usize = 1 << 20;
/// How long each write spends on the fold under way (at least: it also writes as many records
/// as the write added, so that the fold keeps pace). A fold is paced over the writes that
/// follow it rather than made at once: 131,072 records at once kept the writer from the
/// queue for seconds, and at 80,000 redirects a second the queue overflowed.
const FOLD_SLICE: Duration = Duration::from_millis(250);
/// Most records a fold reads and then writes at once, in key order (one `set_sorted`), under
/// the held counts' write lock. Their leaves are read before any is written, so they must
/// stay in sled's cache meanwhile (about 5 MB at the default budget): 64 records are at most
/// 64 leaves of a few kilobytes.
const FOLD_CHUNK: usize = 64;
/// The bound of [`super::StoreOptions::new`]: [`MAX_HELD`] visits.
pub(super) const DEFAULT_HELD_BYTES: usize = MAX_HELD * TICK_BYTES;

/// A link's held visits at which they are added up into one [`DayDelta`] a day: below it a
/// visit costs a [`Tick`] (20 bytes), above it nothing more. 16 ticks are about what a delta
/// takes (a few hundred bytes), and they bound what a reader or the fold adds up each time.
const PROMOTE_AT: u32 = 16;
/// Bytes of a held tick.
const TICK_BYTES: usize = std::mem::size_of::<Tick>();
const _: () = assert!(TICK_BYTES == 20);
/// Bytes of one slot of the map of links' newest ticks (the key, the position and count, the
/// table's control byte). The table is counted whole, from its capacity: it is at most 7/8
/// full, doubles when it grows, and a fold's table keeps its size until the fold ends.
const HEAD_SLOT: usize = std::mem::size_of::<(u64, Head)>() + 1;
/// Bytes of one slot of the map of links added up ([`Days::promoted`]).
const PROMOTED_SLOT: usize = std::mem::size_of::<(u64, SmallVec<[(u64, DayDelta); 1]>)>() + 1;
/// Bytes of a distinct combination of top values besides its strings: its two copies (the
/// list and the map's key) and the map's slot.
const COMBO_BYTES: usize = 3 * std::mem::size_of::<Combo>() + 8;
/// Bytes of a held (link, day) added up, besides its counts' lists and sketch: the allocator's
/// rounding of its three small lists.
const ENTRY_BYTES: usize = 64;

/// What an added-up (link, day) takes, estimated: its lists as allocated, its sketch, the
/// entry. The dimensions' strings are shared with the combinations' (counted there).
fn delta_bytes(delta: &DayDelta) -> usize {
    delta.hours.capacity() * std::mem::size_of::<(u8, u64, u64)>()
        + delta.dims.capacity() * std::mem::size_of::<(u8, std::sync::Arc<str>, u64)>()
        + delta.uniques.heap_bytes()
        + ENTRY_BYTES
}

/// A visit's top values, one per dimension in [`Dimension::ALL`]'s order.
type Combo = [Option<Arc<str>>; 6];

/// One held visit, as the counters take it: 20 bytes, packed. Its link is the chain it is
/// on ([`Days::heads`]), not a field: a link id a visit was 8 of every 28 bytes held.
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
struct Tick {
    client_hash: u64,
    /// Hours since the epoch, with [`BOT`] set for a bot; [`TAKEN`] once added up elsewhere.
    hour: u32,
    /// Its top values, by number ([`Days::combos`]).
    combo: u32,
    /// The position of the link's tick before this one, plus one (0: none).
    prev: u32,
}

const BOT: u32 = 1 << 31;
const TAKEN: u32 = u32::MAX;

impl Tick {
    /// The day, and the hour of the day; `None` once taken.
    fn when(&self) -> Option<(u64, u8)> {
        let hour = self.hour;
        (hour != TAKEN).then(|| {
            let hours = u64::from(hour & !BOT);
            (hours / 24, (hours % 24) as u8)
        })
    }
}

/// A link's newest tick (its position plus one, 0 when none) and how many it has.
#[derive(Clone, Copy, Default)]
struct Head {
    tick: u32,
    ticks: u32,
}

/// Counts per link and day: a tick per visit for links seen a few times, one [`DayDelta`] a
/// day for links seen more often ([`PROMOTE_AT`]). Traffic spread over many links holds a
/// tick a visit, about 40 bytes with the link's slot; the map of one delta per (link, day)
/// it replaced held about 450, and filled its share of the budget in under a second with
/// 100,000 links visited, so the fold wrote a record for nearly every visit.
#[derive(Default)]
struct Days {
    ticks: Chunked<Tick>,
    /// Link → its newest tick.
    heads: FastMap<u64, Head>,
    /// Links seen often: their counts, added up per day.
    promoted: FastMap<u64, SmallVec<[(u64, DayDelta); 1]>>,
    /// The distinct combinations of top values, and their numbers.
    combos: Vec<Combo>,
    combo_ids: FastMap<Combo, u32>,
    /// Bytes of the combinations' strings, and of the added-up deltas.
    combo_bytes: usize,
    promoted_bytes: usize,
    /// (link, day) pairs held, at least (a link's tick of a day other than its newest one's
    /// is looked for among a few of its ticks only).
    len: usize,
}

impl Days {
    /// What the days hold: ticks, combinations and added-up deltas, the maps' tables at their
    /// capacity.
    fn bytes(&self) -> usize {
        self.ticks.bytes()
            + table_bytes(&self.heads, HEAD_SLOT)
            + table_bytes(&self.promoted, PROMOTED_SLOT)
            + table_bytes(&self.combo_ids, 1)
            + self.combos.capacity() * std::mem::size_of::<Combo>()
            + self.combo_bytes
            + self.promoted_bytes
    }

    /// The most bytes the visits can add: a tick and two slots each (a table may double),
    /// a chunk, and their new combinations.
    fn bytes_added_at_most(&self, visits: &[NewVisit]) -> usize {
        let mut new: FastMap<Combo, usize> = FastMap::default();
        for v in visits {
            let combo = combo_of(v);
            if !self.combo_ids.contains_key(&combo) {
                let bytes = combo_strings(&combo);
                new.insert(combo, bytes);
            }
        }
        visits.len() * (TICK_BYTES + 2 * HEAD_SLOT)
            + self.ticks.growth_bytes()
            + new.values().map(|b| b + COMBO_BYTES).sum::<usize>()
    }

    /// The most bytes the visits can add, counting each as a new combination of long values.
    fn bytes_added_at_most_roughly(visits: &[NewVisit]) -> usize {
        visits.len() * (TICK_BYTES + 2 * HEAD_SLOT + COMBO_BYTES + 256) + 4096 * TICK_BYTES
    }

    fn combo_id(&mut self, new: &NewVisit) -> u32 {
        let combo = combo_of(new);
        if let Some(&id) = self.combo_ids.get(&combo) {
            return id;
        }
        let id = self.combos.len() as u32;
        self.combo_bytes += combo_strings(&combo) + COMBO_BYTES;
        self.combos.push(combo.clone());
        self.combo_ids.insert(combo, id);
        id
    }

    /// The link's ticks, newest first, with their positions.
    fn chain(&self, link_id: u64) -> impl Iterator<Item = (usize, Tick)> + '_ {
        let mut next = self.heads.get(&link_id).map_or(0, |h| h.tick);
        std::iter::from_fn(move || {
            let at = (next as usize).checked_sub(1)?;
            let tick = *self.ticks.get(at)?;
            next = tick.prev;
            Some((at, tick))
        })
    }

    /// Adds a tick's visit to a delta.
    fn add_tick(&self, delta: &mut DayDelta, tick: &Tick, hour: u8) {
        let values = self
            .combos
            .get(tick.combo as usize)
            .into_iter()
            .flat_map(|combo| {
                Dimension::ALL
                    .iter()
                    .zip(combo)
                    .filter_map(|(dim, value)| Some((dim.stored(), value.as_ref()?)))
            });
        delta.add_one(hour, tick.hour & BOT != 0, tick.client_hash, values);
    }

    /// Adds a visit; whether its (link, day) is new here.
    fn add_visit(&mut self, new: &NewVisit) -> bool {
        let (link_id, at) = (new.visit.link_id, new.visit.at);
        let day = at / super::DAY_MS;
        if let Some(days) = self.promoted.get_mut(&link_id) {
            let (added, bytes) = add_to_days(days, day, |delta| delta.add(new));
            self.promoted_bytes = (self.promoted_bytes + bytes.1).saturating_sub(bytes.0);
            self.len += usize::from(added);
            return added;
        }
        let combo = self.combo_id(new);
        let head = self.heads.get(&link_id).copied().unwrap_or_default();
        let new_day = !self
            .chain(link_id)
            .take(8)
            .any(|(_, t)| t.when().is_some_and(|(d, _)| d == day));
        // Hours since the epoch stay below 2^31 until the year 246,953.
        let hours = ((at / HOUR_MS) as u32) & !BOT;
        let at = self.ticks.push(Tick {
            client_hash: new.client_hash,
            hour: hours | if new.visit.is_bot { BOT } else { 0 },
            combo,
            prev: head.tick,
        });
        let head = Head {
            tick: u32::try_from(at + 1).unwrap_or(u32::MAX),
            ticks: head.ticks + 1,
        };
        self.heads.insert(link_id, head);
        self.len += usize::from(new_day);
        if head.ticks >= PROMOTE_AT {
            self.promote(link_id);
        }
        new_day
    }

    /// Adds a link's ticks up into deltas, one a day, and holds its later visits that way.
    fn promote(&mut self, link_id: u64) {
        let mut days: SmallVec<[(u64, DayDelta); 1]> = SmallVec::new();
        let taken: Vec<(usize, Tick)> = self.chain(link_id).collect();
        for (_, tick) in &taken {
            if let Some((day, hour)) = tick.when() {
                add_to_days(&mut days, day, |delta| self.add_tick(delta, tick, hour));
            }
        }
        for (at, _) in taken {
            if let Some(tick) = self.ticks.get_mut(at) {
                tick.hour = TAKEN;
            }
        }
        self.heads.remove(&link_id);
        self.promoted_bytes += days.iter().map(|(_, d)| delta_bytes(d)).sum::<usize>();
        self.promoted.insert(link_id, days);
    }

    /// The link's days held here, with their counts.
    fn of(&self, link_id: u64) -> SmallVec<[(u64, DayDelta); 1]> {
        let mut days: SmallVec<[(u64, DayDelta); 1]> = SmallVec::new();
        if let Some(promoted) = self.promoted.get(&link_id) {
            for (day, delta) in promoted {
                add_to_days(&mut days, *day, |d| d.merge(delta));
            }
        }
        for (_, tick) in self.chain(link_id) {
            if let Some((day, hour)) = tick.when() {
                add_to_days(&mut days, day, |delta| self.add_tick(delta, &tick, hour));
            }
        }
        days
    }

    /// Takes the counts of (link, day) out: they are no longer read here.
    fn take(&mut self, link_id: u64, day: u64) -> Option<DayDelta> {
        let mut delta = None;
        if let Some(days) = self.promoted.get_mut(&link_id) {
            if let Some(at) = days.iter().position(|(d, _)| *d == day) {
                let (_, taken) = days.remove(at);
                self.promoted_bytes = self.promoted_bytes.saturating_sub(delta_bytes(&taken));
                delta = Some(taken);
            }
        }
        let mine: Vec<(usize, Tick, u8)> = self
            .chain(link_id)
            .filter_map(|(at, t)| match t.when() {
                Some((d, hour)) if d == day => Some((at, t, hour)),
                _ => None,
            })
            .collect();
        for (at, tick, hour) in mine {
            self.add_tick(delta.get_or_insert_with(DayDelta::default), &tick, hour);
            if let Some(tick) = self.ticks.get_mut(at) {
                tick.hour = TAKEN;
            }
        }
        if delta.is_some() {
            self.len = self.len.saturating_sub(1);
        }
        delta
    }

    /// Every (link, day), in descending key order (the fold pops from the end).
    fn keys_descending(&self) -> Vec<(u64, u64)> {
        let mut keys: Vec<(u64, u64)> = Vec::with_capacity(self.heads.len() + self.promoted.len());
        for (&link_id, days) in &self.promoted {
            keys.extend(days.iter().map(|(day, _)| (link_id, *day)));
        }
        for &link_id in self.heads.keys() {
            for (_, tick) in self.chain(link_id) {
                if let Some((day, _)) = tick.when() {
                    keys.push((link_id, day));
                }
            }
        }
        keys.sort_unstable_by(|a, b| b.cmp(a));
        keys.dedup();
        keys
    }

    /// Puts counts taken out back (a fold that could not write them), added up.
    fn put_back(&mut self, link_id: u64, day: u64, delta: DayDelta) {
        let days = self.promoted.entry(link_id).or_default();
        let (added, bytes) = add_to_days(days, day, |d| d.merge(&delta));
        self.promoted_bytes = (self.promoted_bytes + bytes.1).saturating_sub(bytes.0);
        self.len += usize::from(added);
    }

    /// Whether nothing is held.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.ticks.is_empty() && self.promoted.is_empty()
    }
}

/// Adds to the delta of `day` in a link's days (a new one if none); whether it was new, and
/// the delta's bytes before and after.
fn add_to_days(
    days: &mut SmallVec<[(u64, DayDelta); 1]>,
    day: u64,
    add: impl FnOnce(&mut DayDelta),
) -> (bool, (usize, usize)) {
    match days.iter_mut().find(|(d, _)| *d == day) {
        Some((_, delta)) => {
            let before = delta_bytes(delta);
            add(delta);
            (false, (before, delta_bytes(delta)))
        }
        None => {
            let mut delta = DayDelta::default();
            add(&mut delta);
            let after = delta_bytes(&delta);
            days.push((day, delta));
            (true, (0, after))
        }
    }
}

/// The visit's top values.
fn combo_of(new: &NewVisit) -> Combo {
    let mut combo = Combo::default();
    for (dim, value) in top_values(new) {
        if let Some(at) = Dimension::ALL.iter().position(|d| *d == dim) {
            combo[at] = Some(Arc::clone(value));
        }
    }
    combo
}

/// Bytes of a combination's strings (each with its `Arc`'s counts).
fn combo_strings(combo: &Combo) -> usize {
    combo.iter().flatten().map(|s| s.len() + 16).sum()
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
        self.held.ticks.len() >= MAX_HELD
            || self.bytes() >= max_bytes
            || self.since.is_some_and(|t| t.elapsed() >= FOLD_EVERY)
    }

    /// The link's days not yet in the tree, with their counts (a (link, day) may be in both
    /// the fold under way and what was gathered since).
    pub(super) fn of(&self, link_id: u64) -> impl Iterator<Item = (u64, DayDelta)> {
        self.folding
            .of(link_id)
            .into_iter()
            .chain(self.held.of(link_id))
    }

    /// Whether no counts are held.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.held.is_empty() && self.folding.is_empty()
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
    /// within the bound and one write's worth, and meanwhile the visit journal grows (nothing
    /// is dropped). Folding in the middle of a write's counts would leave a
    /// record counting part of the write's blocks, which a crash could count again or lose.
    pub(super) fn hold_counts(&self, visits: &[NewVisit], through: u64) -> StoreResult<()> {
        let _one_at_a_time = self.count_fold.lock();
        let past_bound = {
            let unwritten = self.unwritten_counts.read();
            let (held, bound) = (unwritten.bytes(), self.held_counts_bytes);
            // Counting the write's new combinations of top values takes a map of them: only
            // when a write of new combinations only might not fit.
            held + Days::bytes_added_at_most_roughly(visits) > bound
                && held + unwritten.held.bytes_added_at_most(visits) > bound
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
            let (enough, most) = match pace {
                Pace::Slice(added) => (
                    written >= added && started.elapsed() >= FOLD_SLICE,
                    FOLD_CHUNK,
                ),
                Pace::All => (false, FOLD_CHUNK),
                #[cfg(test)]
                Pace::Records(n) => (written >= n, n.saturating_sub(written).clamp(1, FOLD_CHUNK)),
            };
            // Out of memory and into the records under one write lock: a reader sees the
            // counts in one place or the other.
            let mut unwritten = self.unwritten_counts.write();
            // Past a bound, the write goes on folding until back under it (or the fold ends).
            if enough
                && unwritten.held.ticks.len() < MAX_HELD
                && unwritten.bytes() < self.held_counts_bytes
            {
                return Ok(());
            }
            if unwritten.folding_keys.is_empty() {
                break;
            }
            written += self.fold_chunk(&mut unwritten, most, through)?;
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

    /// Folds up to `most` of the fold's records, in key order, with one write: those that
    /// fall in one leaf of the tree go to it as one fragment ([`sled::Tree::set_sorted`]).
    /// Returns the records done (written now, or found written by this fold already). On a
    /// storage fault every record of the chunk goes back to the held counts (and they are
    /// in the blocks, which the store reopened counts again from the fold point), to be
    /// written again.
    fn fold_chunk(
        &self,
        unwritten: &mut Unwritten,
        most: usize,
        through: u64,
    ) -> StoreResult<usize> {
        let mut done = 0;
        let mut taken: Vec<(u64, u64, DayDelta)> = Vec::new();
        let mut writes = Vec::new();
        let mut failed = None;
        while taken.len() < most {
            let Some(&(link_id, day)) = unwritten.folding_keys.last() else {
                break;
            };
            // A link's next day reads the record of its day before: written first.
            if taken
                .last()
                .is_some_and(|(taken_id, ..)| *taken_id == link_id)
            {
                break;
            }
            unwritten.folding_keys.pop();
            let Some(delta) = unwritten.folding.take(link_id, day) else {
                done += 1;
                continue;
            };
            match self.counted_day(link_id, day, &delta, through) {
                Ok(Some(write)) => {
                    writes.push(write);
                    taken.push((link_id, day, delta));
                }
                Ok(None) => done += 1,
                Err(e) => {
                    unwritten.folding.put_back(link_id, day, delta);
                    unwritten.folding_keys.push((link_id, day));
                    failed = Some(e);
                    break;
                }
            }
        }
        if failed.is_none() {
            if let Err(e) = self.visit_days.set_sorted(&writes) {
                failed = Some(backend(e));
            }
        }
        if let Some(e) = failed {
            for (link_id, day, delta) in taken.into_iter().rev() {
                unwritten.folding.put_back(link_id, day, delta);
                unwritten.folding_keys.push((link_id, day));
            }
            return Err(e);
        }
        for (link_id, day, _) in &taken {
            self.noted_counted(*link_id, *day);
        }
        Ok(done + taken.len())
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
        assert!(held >= 50 * TICK_BYTES, "{held} bytes held for 50 visits");

        let dir = tempfile::tempdir().expect("temp dir");
        let options = super::super::StoreOptions {
            held_counts_bytes: 10 * TICK_BYTES,
            ..super::super::StoreOptions::new(dir.path())
        };
        let store = SledStore::open(&options).expect("open");
        store.record_visits(&mut visits()).expect("record");
        assert!(
            store.unwritten_counts.read().bytes() < 10 * TICK_BYTES,
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
        // What a write of 100 links holds, measured under the default bound.
        let held_by_one_write = {
            let dir = tempfile::tempdir().expect("temp dir");
            let store =
                SledStore::open(&super::super::StoreOptions::new(dir.path())).expect("open");
            store
                .record_visits(&mut hundred_links_from(0))
                .expect("record");
            let bytes = store.unwritten_counts.read().bytes();
            bytes
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let bound = held_by_one_write + 100 * TICK_BYTES;
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
        assert!(
            unwritten.folding.is_empty(),
            "the fold under way was written"
        );
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

    /// What is held counts the ticks and the maps' tables, and a finished fold frees them.
    #[test]
    fn held_bytes_count_the_tables_and_a_finished_fold_frees_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SledStore::open(&super::super::StoreOptions::new(dir.path())).expect("open");
        store
            .record_visits(&mut hundred_links_from(0))
            .expect("record");
        {
            let unwritten = store.unwritten_counts.read();
            let table = unwritten.held.heads.capacity() * HEAD_SLOT;
            assert!(unwritten.bytes() >= table + 100 * TICK_BYTES);
        }
        store.fold_counts().expect("fold");
        let unwritten = store.unwritten_counts.read();
        assert_eq!(unwritten.folding.heads.capacity(), 0);
        assert_eq!(unwritten.folding_keys.capacity(), 0);
        assert_eq!(unwritten.bytes(), 0);
    }

    /// A link's visits are a tick each until it has [`PROMOTE_AT`], then one delta a day;
    /// either way it reads, folds and is taken the same.
    #[test]
    fn a_link_day_reads_the_same_as_ticks_and_added_up() {
        let mut days = Days::default();
        for (link, day, new_here) in [(7, 1, true), (7, 1, false), (8, 1, true), (7, 2, true)] {
            assert_eq!(days.add_visit(&new(link, day * DAY, "a", false)), new_here);
        }
        assert_eq!(days.len, 3);
        assert_eq!(days.ticks.len(), 4);
        let seven = days.of(7);
        assert_eq!(seven.len(), 2);
        let day1 = &seven.iter().find(|d| d.0 == 1).expect("held").1;
        assert_eq!(day1.counts(), (2, 0));
        assert_eq!(day1.uniques.estimate(), 1);
        assert!(day1
            .dims
            .iter()
            .any(|(dim, value, n)| *dim == Dimension::Referer.stored()
                && &**value == "news.example.org"
                && *n == 2));
        assert_eq!(days.keys_descending(), vec![(8, 1), (7, 2), (7, 1)]);

        // Link 9 seen often enough to be added up, over two days, bots among them.
        for n in 0..40u64 {
            let client = format!("c{}", n % 5);
            days.add_visit(&new(9, (1 + n / 30) * DAY + n, &client, n % 10 == 0));
        }
        assert!(days.promoted.contains_key(&9) && !days.heads.contains_key(&9));
        let nine = days.of(9);
        let total = nine.iter().fold((0, 0), |t, (_, d)| {
            let (v, b) = d.counts();
            (t.0 + v, t.1 + b)
        });
        assert_eq!(total, (40, 4));
        assert_eq!(
            nine.iter()
                .find(|d| d.0 == 1)
                .map(|d| d.1.uniques.estimate()),
            Some(5),
            "c0 to c4 (c0 also as a bot, not counted twice)"
        );
        assert_eq!(days.len, 5);

        let taken = days.take(7, 1).expect("held");
        assert_eq!(taken.counts(), (2, 0));
        assert!(days.take(7, 1).is_none());
        assert_eq!(days.of(7).len(), 1);
        let taken = days.take(9, 2).expect("held");
        assert_eq!(taken.counts(), (10, 1));
        days.put_back(9, 2, taken);
        assert_eq!(days.of(9).iter().map(|d| d.1.counts().0).sum::<u64>(), 40);
        assert_eq!(days.len, 4);
    }
}
