//! Writing visits: `record_visits` and `import_visits` reserve ids, cut the visits into blocks
//! (noted in the index), add them to the system's day counters and hand the link counters to
//! the fold ([`crate::sled::visit_counts`]), whose step on one link's day record,
//! [`SledStore::count_day`], is here too, with the links it has written today ([`Counted`]).

use crate::model::hll::Hll;
use crate::sled::formats::{
    decode_day_record, encode_block, link_key, Block, DayDelta, DayRecord, FastMap,
};
use crate::sled::keys::{counter, read_u64};
use crate::sled::{backend, encode, SledStore, DAY_MS};
use crate::{NewVisit, StoreResult, Visit};

/// Most visits in one block. Larger blocks store strings once for more visits, but a per-link
/// listing decodes every block the link appears in, whole, and sled writes a tree node over
/// 128 KB (a quarter segment) as a file of its own (a "blob"): with 1,024 visits (about 30 KB)
/// a node of a few blocks went there. 256 visits are about 8 KB.
pub(super) const BLOCK_ROWS: usize = 256;

/// The links whose day record of `day` (the newest day written) the writer has written since
/// the store opened, as a bitset over link ids. Memory, not a record: after a restart every
/// link starts unknown and costs one more read the first time.
#[derive(Default)]
pub(in crate::sled) struct Counted {
    day: u64,
    bits: Vec<u64>,
}

impl Counted {
    /// Link ids above this are never remembered (their bitset would be too large).
    const MAX_ID: u64 = 1 << 26;

    fn contains(&self, day: u64, link_id: u64) -> bool {
        day == self.day
            && link_id < Self::MAX_ID
            && self
                .bits
                .get((link_id / 64) as usize)
                .is_some_and(|w| w & (1 << (link_id % 64)) != 0)
    }

    fn insert(&mut self, day: u64, link_id: u64) {
        if day < self.day || link_id >= Self::MAX_ID {
            return;
        }
        if day > self.day {
            self.day = day;
            self.bits.clear();
        }
        let word = (link_id / 64) as usize;
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << (link_id % 64);
    }
}

/// A link's run of blocks in one write: (link, first block, last block, first id, last id).
pub(in crate::sled) type BlockRun = (u64, u64, u64, u64, u64);

/// The meta keys of visit journals' positions: `visit_journal:<journal id>`.
pub(in crate::sled) const JOURNAL_PREFIX: &[u8] = b"visit_journal:";

/// What a journal's meta key holds.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::sled) enum JournalMark {
    /// Folded up to this position.
    Folded(Vec<u8>),
    /// A fold writing these blocks is under way; before it, the key held `previous`
    /// (empty: nothing).
    Folding {
        first_block: u64,
        last_block: u64,
        previous: Vec<u8>,
    },
}

impl JournalMark {
    fn encode(&self) -> Vec<u8> {
        match self {
            JournalMark::Folded(position) => [&[0u8][..], position].concat(),
            JournalMark::Folding {
                first_block,
                last_block,
                previous,
            } => [
                &[1u8][..],
                &first_block.to_be_bytes(),
                &last_block.to_be_bytes(),
                previous,
            ]
            .concat(),
        }
    }

    pub(in crate::sled) fn decode(value: &[u8]) -> Option<JournalMark> {
        match value.split_first()? {
            (0, position) => Some(JournalMark::Folded(position.to_vec())),
            (1, rest) if rest.len() >= 16 => Some(JournalMark::Folding {
                first_block: read_u64(&rest[..8])?,
                last_block: read_u64(&rest[8..16])?,
                previous: rest[16..].to_vec(),
            }),
            _ => None,
        }
    }
}

impl SledStore {
    /// Writes the visits (`preset`: keeping their ids instead of assigning new ones), adds
    /// them to the system's day counters and the held link counters (folding those when due),
    /// then flushes once.
    ///
    /// Plain inserts, not a transaction: sled applies a transaction's writes under a global
    /// lock that every read of every tree waits for, and a stream of visit transactions starved
    /// the redirects that miss the cache. Only the writer task writes these trees and these
    /// counters, so nothing races; the ids are reserved first, so a crash never gives an id
    /// twice. What a crash can do is lose the call in flight (the writer's last interval) or
    /// leave it written but not in the system's day counter: visits are acknowledged to no
    /// one. The link counters are rebuilt from the blocks after a crash.
    pub(in crate::sled) fn write_visits(
        &self,
        visits: &mut [NewVisit],
        preset: bool,
    ) -> StoreResult<()> {
        self.write_visits_noting(visits, preset, None)
    }

    /// `write_visits`, noting a journal's fold position (`journal`: its meta key and the
    /// position) in the same log. Before the blocks, the key says which blocks the fold is
    /// about to write ([`JournalMark::Folding`]); right after them (and the block counter),
    /// the new position. sled recovers a prefix of its log, so after a crash either the
    /// position is there with every block before it, or the key still says "folding" and
    /// opening removes those blocks ([`SledStore::undo_unfinished_journal_folds`]) before the
    /// index and the counters are rebuilt from the blocks, and the journal replays them from
    /// the old position. The index and the counters are written after the position, so they
    /// never cover a block that opening removes.
    pub(in crate::sled) fn write_visits_noting(
        &self,
        visits: &mut [NewVisit],
        preset: bool,
        journal: Option<(&[u8], &[u8])>,
    ) -> StoreResult<()> {
        if visits.is_empty() {
            if let Some((key, position)) = journal {
                self.meta
                    .insert(key, JournalMark::Folded(position.to_vec()).encode())
                    .map_err(backend)?;
                return self.flusher.wait_durable();
            }
            return Ok(());
        }
        let last = self.counter(counter::VISIT_ID)?;
        let reserved = if preset {
            visits.iter().map(|v| v.visit.id).fold(last, u64::max)
        } else {
            for (k, new) in visits.iter_mut().enumerate() {
                new.visit.id = last + 1 + k as u64;
            }
            last + visits.len() as u64
        };
        self.counters
            .insert(counter::VISIT_ID, &reserved.to_be_bytes()[..])
            .map_err(backend)?;
        let first_block = self.counter(counter::VISIT_BLOCK_ID)? + 1;
        if let Some((key, _)) = journal {
            let blocks = visits.len().div_ceil(BLOCK_ROWS) as u64;
            let previous = self.meta.get(key).map_err(backend)?;
            let mark = JournalMark::Folding {
                first_block,
                last_block: first_block + blocks - 1,
                previous: previous.map(|v| v.to_vec()).unwrap_or_default(),
            };
            self.meta.insert(key, mark.encode()).map_err(backend)?;
        }
        let (last_block, spans) =
            self.write_blocks(first_block, visits.iter().map(|n| &n.visit).collect())?;
        self.counters
            .insert(counter::VISIT_BLOCK_ID, &last_block.to_be_bytes()[..])
            .map_err(backend)?;
        if let Some((key, position)) = journal {
            self.meta
                .insert(key, JournalMark::Folded(position.to_vec()).encode())
                .map_err(backend)?;
        }
        self.index_blocks(&spans)?;
        let mut system: FastMap<u64, u64> = FastMap::default();
        for new in visits.iter() {
            *system.entry(new.visit.at / DAY_MS).or_default() += 1;
        }
        self.add_day_visits(&system)?;
        self.hold_counts(visits, last_block)?;
        self.flusher.wait_durable()
    }

    /// Removes the blocks of journal folds a crash cut short (their key still says
    /// "folding") and puts back the position before them; called at open, before the index
    /// and the counters are rebuilt from the blocks. Returns the blocks removed.
    pub(in crate::sled) fn undo_unfinished_journal_folds(&self) -> StoreResult<u64> {
        let mut removed = 0;
        for entry in self.meta.scan_prefix(JOURNAL_PREFIX) {
            let (key, value) = entry.map_err(backend)?;
            if let Some(JournalMark::Folding {
                first_block,
                last_block,
                previous,
            }) = JournalMark::decode(&value)
            {
                for block in first_block..=last_block {
                    if self
                        .visit_blocks
                        .remove(block.to_be_bytes())
                        .map_err(backend)?
                        .is_some()
                    {
                        removed += 1;
                    }
                }
                if previous.is_empty() {
                    self.meta.remove(&key).map_err(backend)?;
                } else {
                    self.meta.insert(&key, previous).map_err(backend)?;
                }
            }
        }
        if removed > 0 {
            self.flusher.wait_durable()?;
        }
        Ok(removed)
    }

    /// Writes `visits` as blocks numbered from `first_block`; returns the last block's id and
    /// each link's run of them, for the index ([`SledStore::index_blocks`]).
    ///
    /// The visits are ordered by link first (stably: each link's ids stay ascending), so that
    /// a link's visits of one write sit in one block or a run of consecutive ones: one index
    /// entry covers them. A link visited a thousand times in a second costs one index entry,
    /// not one per block, and its listing reads only blocks that hold its visits.
    pub(super) fn write_blocks(
        &self,
        first_block: u64,
        mut visits: Vec<&Visit>,
    ) -> StoreResult<(u64, Vec<BlockRun>)> {
        visits.sort_by_key(|v| v.link_id);
        // Per link, in link order: (link, first block, last block, first id, last id).
        let mut spans: Vec<BlockRun> = Vec::new();
        let mut block_id = first_block;
        for (n, part) in visits.chunks(BLOCK_ROWS).enumerate() {
            block_id = first_block + n as u64;
            for v in part {
                match spans.last_mut() {
                    Some(span) if span.0 == v.link_id => {
                        span.2 = block_id;
                        span.3 = span.3.min(v.id);
                        span.4 = span.4.max(v.id);
                    }
                    _ => spans.push((v.link_id, block_id, block_id, v.id, v.id)),
                }
            }
            let block = Block::build(part.iter().copied());
            self.visit_blocks
                .insert(block_id.to_be_bytes(), encode_block(&block))
                .map_err(backend)?;
        }
        Ok((block_id, spans))
    }

    /// A link's stored record of a day with `delta` added (a fold's step,
    /// [`crate::sled::visit_counts`]), stamped with the fold's last block: one read of the
    /// record (or, the first time in a day, of the link's last record). The caller writes
    /// it, with the records beside it, then notes it ([`Self::noted_counted`]); until then a
    /// later day of the same link must not be read. `None` when the record says this fold
    /// (`through`) wrote it already: a fold retried after a write that failed part-way adds
    /// nothing twice.
    pub(in crate::sled) fn counted_day(
        &self,
        link_id: u64,
        day: u64,
        delta: &DayDelta,
        through: u64,
    ) -> StoreResult<Option<(sled::IVec, sled::IVec)>> {
        // A link already counted today: its record of the day is a point read. Otherwise
        // one forward look finds the link's first record, which for most such links is
        // none at all (or today's); only a link counted on an earlier day looks further.
        let today = link_key(link_id, day);
        let last = if self.counted.lock().contains(day, link_id) {
            self.visit_days
                .get(today)
                .map_err(backend)?
                .map(|bytes| (sled::IVec::from(&today[..]), bytes))
        } else {
            match self.first_day_record(link_id)? {
                None => None,
                Some((key, bytes)) if key.as_ref() == today => Some((key, bytes)),
                Some(_) => match self.visit_days.get(today).map_err(backend)? {
                    Some(bytes) => Some((sled::IVec::from(&today[..]), bytes)),
                    None => self.last_day_record(link_id)?,
                },
            }
        };
        let (mut record, before) = match last {
            Some((key, bytes)) => {
                let last_day = key.get(8..).and_then(read_u64).unwrap_or(0);
                let stored = decode_day_record(link_id, last_day, &bytes);
                if last_day == day && stored.through == through && through > 0 {
                    // Written by this fold already (a chunk whose write failed part-way is
                    // taken again): its counts are in the record.
                    return Ok(None);
                } else if last_day == day {
                    let before = stored.totals;
                    (stored, before)
                } else if last_day < day {
                    (DayRecord::default(), stored.totals)
                } else {
                    // Visits of a day before the link's last counted day (imports come in
                    // any order): later days' running totals grow too.
                    self.add_to_later_totals(link_id, day, delta.counts())?;
                    let record = match self
                        .visit_days
                        .get(link_key(link_id, day))
                        .map_err(backend)?
                    {
                        Some(bytes) => decode_day_record(link_id, day, &bytes),
                        None => DayRecord::default(),
                    };
                    let before = match record.totals {
                        Some(t) => Some(t),
                        None => self.totals_before(link_id, day)?,
                    };
                    (record, before)
                }
            }
            None => (DayRecord::default(), None),
        };
        let before = match before {
            Some(t) => t,
            // Counted before totals moved into the day records (or never counted).
            None => self.legacy_totals(link_id)?,
        };
        record.merge(delta);
        let (visits, bots) = delta.counts();
        record.totals = Some((before.0 + visits, before.1 + bots));
        record.through = through;
        if delta.uniques.estimate() > 0 {
            let mut hll = if record.uniques.is_empty() {
                Hll::default()
            } else {
                Hll::from_bytes(&record.uniques).unwrap_or_else(|| {
                    tracing::error!(
                        link_id,
                        day,
                        "corrupt distinct-visitor sketch: unique visitors restart from zero"
                    );
                    Hll::default()
                })
            };
            hll.merge(&delta.uniques);
            record.uniques = hll.to_bytes();
        }
        Ok(Some((
            sled::IVec::from(&today[..]),
            sled::IVec::from(encode(&record)),
        )))
    }

    /// Notes that the link's record of the day is written (the next fold of the day reads
    /// it with one point read).
    pub(in crate::sled) fn noted_counted(&self, link_id: u64, day: u64) {
        self.counted.lock().insert(day, link_id);
    }

    /// Adds a call's visits to the system-wide visits of each day (a few counters, written at
    /// once).
    fn add_day_visits(&self, system: &FastMap<u64, u64>) -> StoreResult<()> {
        for (&day, &n) in system {
            let key = counter::day_visits(day);
            let current = self.counter(&key)?;
            self.counters
                .insert(key, &(current + n).to_be_bytes()[..])
                .map_err(backend)?;
        }
        Ok(())
    }

    /// The link's first day record, if any (one forward look).
    fn first_day_record(&self, link_id: u64) -> StoreResult<Option<(sled::IVec, sled::IVec)>> {
        self.visit_days
            .range(link_key(link_id, 0)..=link_key(link_id, u64::MAX))
            .next()
            .transpose()
            .map_err(backend)
    }

    /// The running totals of the link's last record before `day`, if it has one.
    fn totals_before(&self, link_id: u64, day: u64) -> StoreResult<Option<(u64, u64)>> {
        let previous = self
            .visit_days
            .range(link_key(link_id, 0)..link_key(link_id, day))
            .next_back()
            .transpose()
            .map_err(backend)?;
        Ok(previous.and_then(|(key, bytes)| {
            let d = key.get(8..).and_then(read_u64).unwrap_or(0);
            decode_day_record(link_id, d, &bytes).totals
        }))
    }

    /// Adds `(visits, bots)` to the running totals of the link's records after `day`.
    fn add_to_later_totals(&self, link_id: u64, day: u64, add: (u64, u64)) -> StoreResult<()> {
        let later = link_key(link_id, day.saturating_add(1))..=link_key(link_id, u64::MAX);
        for item in self.visit_days.range(later) {
            let (key, bytes) = item.map_err(backend)?;
            let d = key.get(8..).and_then(read_u64).unwrap_or(0);
            let mut record = decode_day_record(link_id, d, &bytes);
            if let Some((v, b)) = record.totals {
                record.totals = Some((v + add.0, b + add.1));
                self.visit_days
                    .insert(key, encode(&record))
                    .map_err(backend)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sled::formats::tests::visit;

    /// Running totals stay right when a day before the link's last counted day is written
    /// (imports come in any order), and the listing still runs in id order.
    #[test]
    fn totals_survive_days_written_out_of_order() {
        use crate::prelude::*;
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SledStore::open(&crate::sled::StoreOptions::new(dir.path())).expect("open");
        let at = |day: u64| day * DAY_MS + 1_000;
        let new = |day: u64, bot: bool| NewVisit {
            visit: Visit {
                link_id: 7,
                at: at(day),
                is_bot: bot,
                ..visit(0, 7, 0, "agent")
            },
            client_hash: day,
            referer_host: "".into(),
        };
        for batch in [
            vec![new(10, false)],
            vec![new(5, true), new(3, false)],
            vec![new(10, false)],
        ] {
            let mut batch = batch;
            store.record_visits(&mut batch).expect("record");
        }
        let totals = store.visit_totals(7).expect("totals");
        assert_eq!((totals.visits, totals.bots), (4, 1));
        let page = store.visits_page(7, None, 10).expect("page");
        let ids: Vec<u64> = page.items.iter().map(|v| v.id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        let summary = store.visit_summary(7, 0, at(11)).expect("summary");
        assert_eq!(summary.hours.iter().map(|h| h.visits).sum::<u64>(), 4);
    }

    /// A fold taken again after its write failed part-way finds the records it wrote by
    /// their `through` and adds nothing to them twice.
    #[test]
    fn a_record_this_fold_wrote_is_not_counted_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SledStore::open(&crate::sled::StoreOptions::new(dir.path())).expect("open");
        let mut delta = DayDelta::default();
        delta.add(&NewVisit {
            visit: visit(0, 7, 0, "agent"),
            client_hash: 1,
            referer_host: "".into(),
        });
        let (key, value) = store
            .counted_day(7, 0, &delta, 40)
            .expect("read")
            .expect("a record to write");
        store.visit_days.set_sorted(&[(key, value)]).expect("write");
        store.noted_counted(7, 0);
        assert_eq!(store.counted_day(7, 0, &delta, 40).expect("read"), None);
        let (_, later) = store
            .counted_day(7, 0, &delta, 41)
            .expect("read")
            .expect("the next fold adds");
        let totals = decode_day_record(7, 0, &later).totals;
        assert_eq!(
            totals.map(|(visits, _)| visits),
            Some(2),
            "one visit, then one more"
        );
    }
}
