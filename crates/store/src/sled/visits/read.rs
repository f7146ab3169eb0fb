//! Reading visits back: a link's listings in both directions (through its index entries, the
//! stored ones and the one held in memory), its totals and summary (the stored day records
//! and the counts held in memory), the system's day counts, and the stored blocks a rebuild
//! at open reads. `VisitStore` is implemented here, its writes and pruning calling into
//! `write.rs` and `prune.rs` after the space guard has admitted them.

use super::write::{JournalMark, JOURNAL_PREFIX};
use crate::model::hll::Hll;
use crate::sled::formats::{corrupt, decode_block, link_key, DayRecord};
use crate::sled::keys::{counter, read_u64};
use crate::sled::visit_index::Span;
use crate::sled::{backend, space, SledStore};
use crate::{
    DayCount, Dimension, Millis, NewVisit, StoreResult, SummaryBuilder, SummarySpan, Visit,
    VisitPage, VisitStore, VisitSummary, VisitTotals,
};

/// The room a batch of visits asks the space guard for.
fn visit_bytes(visits: usize) -> u64 {
    u64::try_from(visits)
        .unwrap_or(u64::MAX)
        .saturating_mul(space::BYTES_PER_VISIT)
}

impl VisitStore for SledStore {
    fn record_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.space.admit(visit_bytes(visits.len()))?;
        self.write_visits(visits, false)
    }

    /// Writes visits whose ids are already set (an import into a store without visits): each
    /// link's visits must come in increasing id order, and the id counter moves past them.
    fn import_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.space.admit(visit_bytes(visits.len()))?;
        self.write_visits(visits, true)
    }

    fn record_journaled_visits(
        &self,
        visits: &mut [NewVisit],
        journal: &str,
        position: &[u8],
    ) -> StoreResult<()> {
        self.space.admit(visit_bytes(visits.len()))?;
        let key = [JOURNAL_PREFIX, journal.as_bytes()].concat();
        self.write_visits_noting(visits, false, Some((&key, position)))
    }

    fn journal_position(&self, journal: &str) -> StoreResult<Option<Vec<u8>>> {
        let key = [JOURNAL_PREFIX, journal.as_bytes()].concat();
        Ok(match self.meta.get(key).map_err(backend)? {
            Some(value) => match JournalMark::decode(&value) {
                Some(JournalMark::Folded(position)) => Some(position),
                // Opening undoes an unfinished fold; one seen here is under way.
                Some(JournalMark::Folding { previous, .. }) => {
                    match JournalMark::decode(&previous) {
                        Some(JournalMark::Folded(position)) => Some(position),
                        _ => None,
                    }
                }
                None => return Err(corrupt("meta", "a visit journal's position")),
            },
            None => None,
        })
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
        let end = before.unwrap_or(u64::MAX);
        let mut page = VisitPage::default();
        // The unfolded entry first, then stored entries up to the fold point, newest first.
        let (folded, recent) = self.recent_span(link_id);
        let stored = self.stored_spans(link_id, folded).rev();
        'blocks: for span in recent.map(Ok).into_iter().chain(stored) {
            let span: Span = span?;
            if span.first_id >= end {
                continue;
            }
            for &block_id in span.blocks.iter().rev() {
                for visit in self.block_visits(link_id, block_id)?.into_iter().rev() {
                    if visit.id >= end {
                        continue;
                    }
                    if page.items.len() == limit {
                        page.next = page.items.last().map(|v| v.id);
                        break 'blocks;
                    }
                    page.items.push(visit);
                }
            }
        }
        Ok(page)
    }

    fn visits_page(
        &self,
        link_id: u64,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        let start = after.map_or(0, |a| a.saturating_add(1));
        let mut page = VisitPage::default();
        // Stored entries up to the fold point, then the link's unfolded one. The entries are
        // small: skipping those that end before `start` is cheap, the blocks are read only
        // where the page is.
        let (folded, recent) = self.recent_span(link_id);
        let stored = self.stored_spans(link_id, folded);
        'blocks: for span in stored.chain(recent.map(Ok)) {
            let span: Span = span?;
            if span.last_id < start {
                continue;
            }
            for &block_id in &span.blocks {
                for visit in self.block_visits(link_id, block_id)? {
                    if visit.id < start {
                        continue;
                    }
                    if page.items.len() == limit {
                        page.next = page.items.last().map(|v| v.id);
                        break 'blocks;
                    }
                    page.items.push(visit);
                }
            }
        }
        Ok(page)
    }

    fn visit_totals(&self, link_id: u64) -> StoreResult<VisitTotals> {
        // The stored records and the counts held in memory, under one read lock: a fold
        // moves counts from one to the other under the write lock.
        let unwritten = self.unwritten_counts.read();
        let last = self.last_day_record(link_id)?;
        let totals = match last {
            Some((_, bytes)) => {
                let record: DayRecord =
                    rmp_serde::from_slice(&bytes).map_err(|e| corrupt("visit_days", e))?;
                match record.totals {
                    Some(t) => t,
                    None => self.legacy_totals(link_id)?,
                }
            }
            None => self.legacy_totals(link_id)?,
        };
        let held = unwritten
            .of(link_id)
            .map(|(_, delta)| delta.counts())
            .fold((0, 0), |(v, b), (dv, db)| (v + dv, b + db));
        Ok(VisitTotals {
            visits: totals.0 + held.0,
            bots: totals.1 + held.1,
        })
    }

    fn visit_summary(&self, link_id: u64, from: Millis, to: Millis) -> StoreResult<VisitSummary> {
        let Some(span) = SummarySpan::of(from, to) else {
            return Ok(VisitSummary::default());
        };
        let mut summary = SummaryBuilder::new(span);
        let add_hours = |summary: &mut SummaryBuilder, day: u64, counts: &[(u8, u64, u64)]| {
            for &(h, visits, bots) in counts {
                summary.add_hour(day * 24 + u64::from(h), visits, bots);
            }
        };
        // The stored records and the counts held in memory, under one read lock (as totals).
        let unwritten = self.unwritten_counts.read();
        for item in self
            .visit_days
            .range(link_key(link_id, span.first_day)..=link_key(link_id, span.last_day))
        {
            let (key, value) = item.map_err(backend)?;
            let day = key.get(8..).and_then(read_u64).unwrap_or(0);
            let record: DayRecord =
                rmp_serde::from_slice(&value).map_err(|e| corrupt("visit_days", e))?;
            add_hours(&mut summary, day, &record.hours);
            for (dim, value, n) in record.dims {
                if let Some(dim) = Dimension::of_stored(dim) {
                    summary.add_dim(dim, value, n);
                }
            }
            if let Some(hll) = Hll::from_bytes(&record.uniques) {
                summary.add_uniques(&hll);
            }
        }
        for (day, delta) in unwritten.of(link_id) {
            if !(span.first_day..=span.last_day).contains(&day) {
                continue;
            }
            add_hours(&mut summary, day, &delta.hours);
            for (dim, value, n) in &delta.dims {
                if let Some(dim) = Dimension::of_stored(*dim) {
                    summary.add_dim(dim, value.to_string(), *n);
                }
            }
            summary.add_uniques(&delta.uniques);
        }
        drop(unwritten);
        Ok(summary.finish())
    }

    fn prune_visits(&self, before: Millis, limit: usize) -> StoreResult<u64> {
        self.space.admit(0)?;
        self.prune_blocks(before, limit)
    }

    fn day_counts(&self, from_day: u64, to_day: u64) -> StoreResult<Vec<DayCount>> {
        (from_day..=to_day)
            .map(|day| {
                Ok(DayCount {
                    day,
                    creates: self.counter(&counter::day_creates(day))?,
                    visits: self.counter(&counter::day_visits(day))?,
                })
            })
            .collect()
    }
}

impl SledStore {
    /// The stored blocks after `block`, in order, with their ids: what a rebuild of the
    /// memory parts at open reads ([`crate::sled::visit_index`],
    /// [`crate::sled::visit_counts`]).
    pub(in crate::sled) fn blocks_after(
        &self,
        block: u64,
    ) -> impl Iterator<Item = StoreResult<(u64, sled::IVec)>> {
        self.visit_blocks
            .range(block.saturating_add(1).to_be_bytes()..)
            .map(|item| {
                let (key, value) = item.map_err(backend)?;
                Ok((read_u64(&key).unwrap_or(0), value))
            })
    }

    /// The visits of `link_id` in the block `block_id`; none if the block is gone (pruned
    /// between reading the index and the block).
    fn block_visits(&self, link_id: u64, block_id: u64) -> StoreResult<Vec<Visit>> {
        match self
            .visit_blocks
            .get(block_id.to_be_bytes())
            .map_err(backend)?
        {
            Some(bytes) => decode_block(&bytes)?.visits_of(link_id),
            None => Ok(Vec::new()),
        }
    }
}
