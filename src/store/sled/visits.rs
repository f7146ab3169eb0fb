//! Visit records and their counters in sled: how a call of `record_visits` becomes a few large
//! writes, and how the per-link listings and pruning read them back.
//!
//! | tree           | key                          | value                                      |
//! |----------------|------------------------------|--------------------------------------------|
//! | `visit_blocks` | block id u64                 | [`Block`]: up to [`BLOCK_ROWS`] visits of any links |
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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::formats::{link_key, FastMap};
use super::keys::{counter, read_u64};
use super::visit_index::Span;
use super::{backend, encode, SledStore, DAY_MS};
use crate::model::hll::Hll;
use crate::model::tally::top_values;
use crate::store::{
    DayCount, Dimension, HourCount, Millis, NewVisit, StoreError, StoreResult, SummarySpan, Visit,
    VisitPage, VisitSummary, VisitTotals,
};

use crate::model::time::HOUR_MS;

/// Most visits in one block. Larger blocks store strings once for more visits, but a per-link
/// listing decodes every block the link appears in, whole, and sled writes a tree node over
/// 128 KB (a quarter segment) as a file of its own (a "blob"): with 1,024 visits (about 30 KB)
/// a node of a few blocks went there. 256 visits are about 8 KB.
pub(super) const BLOCK_ROWS: usize = 256;

/// One link's counters of one UTC day.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct DayRecord {
    /// (hour of the day, visits, bots), by hour.
    hours: Vec<(u8, u64, u64)>,
    /// (dimension, value, visits): the material of the `top` lists.
    dims: Vec<(u8, String, u64)>,
    /// Distinct non-bot clients ([`Hll`] bytes).
    uniques: Vec<u8>,
    /// The link's visits and bots of all time up to and including this day: the link's totals
    /// are its last record's, one read. `None` in records written before totals moved here
    /// (they were kept in `visit_totals`, which is still read for such links).
    #[serde(default)]
    totals: Option<(u64, u64)>,
    /// The last visit block whose visits of this link and day are counted here (0 in records
    /// written before counts were held in memory): after a fold cut short by a crash, the
    /// blocks this covers are not counted again ([`super::visit_counts`]).
    #[serde(default)]
    pub(super) through: u64,
}

/// Decodes a day record (for [`super::check_record`]).
pub(super) fn decode_day(bytes: &[u8]) -> StoreResult<()> {
    let day: DayRecord = rmp_serde::from_slice(bytes).map_err(|e| corrupt("days", e))?;
    if !day.uniques.is_empty() && Hll::from_bytes(&day.uniques).is_none() {
        return Err(corrupt("days", "malformed distinct-visitor sketch"));
    }
    Ok(())
}

/// A stored day record for the fold or the rebuild. A damaged record restarts rather than
/// failing every later write, but loudly: its counts are lost.
pub(super) fn decode_day_record(link_id: u64, day: u64, bytes: &[u8]) -> DayRecord {
    rmp_serde::from_slice(bytes).unwrap_or_else(|e| {
        tracing::error!(
            link_id,
            day,
            error = %e,
            "corrupt visit day record: its counts restart from zero"
        );
        DayRecord::default()
    })
}

impl DayRecord {
    fn add_dim(&mut self, dim: u8, value: &str, n: u64) {
        match self.dims.iter_mut().find(|d| d.0 == dim && d.1 == value) {
            Some(d) => d.2 += n,
            None => self.dims.push((dim, value.to_string(), n)),
        }
    }

    /// Adds a call's counts to this stored record.
    fn merge(&mut self, delta: &DayDelta) {
        for &(hour, visits, bots) in &delta.hours {
            add_hour(&mut self.hours, hour, visits, bots);
        }
        for (dim, value, n) in &delta.dims {
            self.add_dim(*dim, value, *n);
        }
    }
}

/// One link's counts of one day not yet added to its stored [`DayRecord`] (held in memory
/// until the next fold, [`super::visit_counts`]). It holds the visits' shared strings, so
/// gathering allocates nothing per visit beyond the first of a (link, day).
#[derive(Debug, Default)]
pub(super) struct DayDelta {
    /// (hour of the day, visits, bots), by hour.
    pub hours: Vec<(u8, u64, u64)>,
    /// (dimension, value, visits).
    pub dims: Vec<(u8, Arc<str>, u64)>,
    /// The distinct non-bot clients.
    pub uniques: Hll,
}

impl DayDelta {
    pub(super) fn add(&mut self, new: &NewVisit) {
        let v = &new.visit;
        let hour = ((v.at % DAY_MS) / HOUR_MS) as u8;
        add_hour(&mut self.hours, hour, 1, u64::from(v.is_bot));
        if !v.is_bot {
            self.uniques.insert_hash(new.client_hash);
        }
        for (dim, value) in top_values(new) {
            self.add_dim(dim.stored(), value, 1);
        }
    }

    fn add_dim(&mut self, dim: u8, value: &Arc<str>, n: u64) {
        match self.dims.iter_mut().find(|d| d.0 == dim && d.1 == *value) {
            Some(d) => d.2 += n,
            None => self.dims.push((dim, Arc::clone(value), n)),
        }
    }

    /// Adds the counts of a later call.
    pub(super) fn merge(&mut self, other: &DayDelta) {
        for &(hour, visits, bots) in &other.hours {
            add_hour(&mut self.hours, hour, visits, bots);
        }
        for (dim, value, n) in &other.dims {
            self.add_dim(*dim, value, *n);
        }
        self.uniques.merge(&other.uniques);
    }

    /// Visits and bots counted.
    pub(super) fn counts(&self) -> (u64, u64) {
        self.hours
            .iter()
            .fold((0, 0), |(v, b), h| (v + h.1, b + h.2))
    }
}

/// Adds to an hour of a day's `(hour, visits, bots)` list, kept in hour order.
fn add_hour(hours: &mut Vec<(u8, u64, u64)>, hour: u8, visits: u64, bots: u64) {
    match hours.binary_search_by_key(&hour, |h| h.0) {
        Ok(i) => {
            hours[i].1 += visits;
            hours[i].2 += bots;
        }
        Err(i) => hours.insert(i, (hour, visits, bots)),
    }
}

/// Visits of any links, in arrival order, with every string stored once.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Block {
    /// The newest `at` of the block's visits: pruning reads it.
    newest: Millis,
    /// The smallest id and `at` of the rows, which store their own as offsets from these.
    base_id: u64,
    base_at: Millis,
    /// The distinct strings of the block; rows refer to them by index. Shared, so that the
    /// visits read from a block hold one allocation per distinct string.
    strings: Vec<Arc<str>>,
    rows: Vec<Row>,
}

/// One visit in a [`Block`]. String fields are indexes into `strings`; for optional ones,
/// 0 is `None` and n is `strings[n - 1]`.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    id: u64,
    link_id: u64,
    at: u64,
    code: u32,
    client_id: u32,
    ip: u32,
    user_agent: u32,
    referer: u32,
    browser: u32,
    browser_version: u32,
    os: u32,
    os_version: u32,
    device: u32,
    is_bot: bool,
    country: u32,
    region: u32,
    city: u32,
    isp: u32,
    /// Optional like the others; rows written before routes existed have none.
    #[serde(default)]
    route: u32,
}

/// Builds a block's string table.
#[derive(Default)]
struct Strings<'a> {
    index: FastMap<&'a str, u32>,
    /// Shared strings by address: most of a block's visits hold the same few allocations (see
    /// [`Visit`]), and an address is cheaper to hash than a user agent.
    shared: FastMap<usize, u32>,
    list: Vec<Arc<str>>,
}

impl<'a> Strings<'a> {
    fn of(&mut self, s: &'a str) -> u32 {
        self.find_or(s, || Arc::from(s))
    }

    fn find_or(&mut self, s: &'a str, make: impl FnOnce() -> Arc<str>) -> u32 {
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(make());
        self.index.insert(s, i);
        i
    }

    fn of_shared(&mut self, s: &'a Arc<str>) -> u32 {
        // The visits outlive the block's building, so no address is reused meanwhile.
        let address = Arc::as_ptr(s).cast::<u8>() as usize;
        if let Some(i) = self.shared.get(&address) {
            return *i;
        }
        let i = self.find_or(s, || Arc::clone(s));
        self.shared.insert(address, i);
        i
    }

    fn of_opt_shared(&mut self, s: Option<&'a Arc<str>>) -> u32 {
        s.map_or(0, |s| self.of_shared(s).saturating_add(1))
    }
}

impl Block {
    fn build<'a>(visits: impl Iterator<Item = &'a Visit> + Clone) -> Block {
        let base_id = visits.clone().map(|v| v.id).min().unwrap_or(0);
        let base_at = visits.clone().map(|v| v.at).min().unwrap_or(0);
        let newest = visits.clone().map(|v| v.at).max().unwrap_or(0);
        let mut strings = Strings::default();
        let rows = visits
            .map(|v| Row {
                id: v.id - base_id,
                link_id: v.link_id,
                at: v.at - base_at,
                code: strings.of(&v.code),
                client_id: strings.of_shared(&v.client_id),
                ip: strings.of_opt_shared(v.ip.as_ref()),
                user_agent: strings.of_shared(&v.user_agent),
                referer: strings.of_shared(&v.referer),
                browser: strings.of_shared(&v.browser),
                browser_version: strings.of_shared(&v.browser_version),
                os: strings.of_shared(&v.os),
                os_version: strings.of_shared(&v.os_version),
                device: strings.of_shared(&v.device),
                is_bot: v.is_bot,
                country: strings.of_opt_shared(v.country.as_ref()),
                region: strings.of_opt_shared(v.region.as_ref()),
                city: strings.of_opt_shared(v.city.as_ref()),
                isp: strings.of_opt_shared(v.isp.as_ref()),
                route: strings.of_opt_shared(v.route.as_ref()),
            })
            .collect();
        Block {
            newest,
            base_id,
            base_at,
            strings: strings.list,
            rows,
        }
    }

    /// The visit of a row; a string index out of range is corruption, not a panic.
    fn visit(&self, row: &Row) -> StoreResult<Visit> {
        let s = |i: u32| -> StoreResult<Arc<str>> {
            self.strings
                .get(i as usize)
                .cloned()
                .ok_or_else(|| corrupt("visit_blocks", "string index out of range"))
        };
        let opt = |i: u32| -> StoreResult<Option<Arc<str>>> {
            match i.checked_sub(1) {
                None => Ok(None),
                Some(i) => s(i).map(Some),
            }
        };
        Ok(Visit {
            id: self
                .base_id
                .checked_add(row.id)
                .ok_or_else(|| corrupt("visit_blocks", "visit id out of range"))?,
            link_id: row.link_id,
            code: s(row.code)?.to_string(),
            at: self.base_at.saturating_add(row.at),
            client_id: s(row.client_id)?,
            ip: opt(row.ip)?,
            user_agent: s(row.user_agent)?,
            referer: s(row.referer)?,
            browser: s(row.browser)?,
            browser_version: s(row.browser_version)?,
            os: s(row.os)?,
            os_version: s(row.os_version)?,
            device: s(row.device)?,
            is_bot: row.is_bot,
            country: opt(row.country)?,
            region: opt(row.region)?,
            city: opt(row.city)?,
            isp: opt(row.isp)?,
            route: opt(row.route)?,
        })
    }

    /// The visits of one link, in id order.
    fn visits_of(&self, link_id: u64) -> StoreResult<Vec<Visit>> {
        let mut out = self
            .rows
            .iter()
            .filter(|r| r.link_id == link_id)
            .map(|r| self.visit(r))
            .collect::<StoreResult<Vec<_>>>()?;
        out.sort_by_key(|v| v.id);
        Ok(out)
    }
}

fn decode_block(bytes: &[u8]) -> StoreResult<Block> {
    rmp_serde::from_slice(bytes).map_err(|e| corrupt("visit_blocks", e))
}

/// Decodes a visit block and every visit in it (for [`super::check_record`]).
pub(super) fn check_block(bytes: &[u8]) -> StoreResult<()> {
    let block = decode_block(bytes)?;
    for row in &block.rows {
        block.visit(row)?;
    }
    Ok(())
}

/// Every visit of a stored block, for counting them again ([`super::visit_counts`]).
pub(super) fn block_all_visits(bytes: &[u8]) -> StoreResult<Vec<Visit>> {
    let block = decode_block(bytes)?;
    block.rows.iter().map(|r| block.visit(r)).collect()
}

/// (link id, visit id) of every row of a stored block, for rebuilding the unfolded index.
pub(super) fn block_rows(bytes: &[u8]) -> StoreResult<Vec<(u64, u64)>> {
    let block = decode_block(bytes)?;
    Ok(block
        .rows
        .iter()
        .map(|r| (r.link_id, block.base_id.saturating_add(r.id)))
        .collect())
}

fn read_pair(bytes: &[u8]) -> (u64, u64) {
    (
        read_u64(bytes).unwrap_or(0),
        bytes.get(8..).and_then(read_u64).unwrap_or(0),
    )
}

fn corrupt(tree: &'static str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        tree,
        detail: e.to_string(),
    }
}

/// The links whose day record of `day` (the newest day written) the writer has written since
/// the store opened, as a bitset over link ids. Memory, not a record: after a restart every
/// link starts unknown and costs one more read the first time.
#[derive(Default)]
pub(super) struct Counted {
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

impl SledStore {
    pub(super) fn record_visits_impl(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.write_visits(visits, false)
    }

    /// Writes visits whose ids are already set (an import into a store without visits): each
    /// link's visits must come in increasing id order, and the id counter moves past them.
    pub(super) fn import_visits_impl(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.write_visits(visits, true)
    }

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
    fn write_visits(&self, visits: &mut [NewVisit], preset: bool) -> StoreResult<()> {
        if visits.is_empty() {
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
        let last_block =
            self.write_blocks(first_block, visits.iter().map(|n| &n.visit).collect())?;
        self.counters
            .insert(counter::VISIT_BLOCK_ID, &last_block.to_be_bytes()[..])
            .map_err(backend)?;
        let mut system: FastMap<u64, u64> = FastMap::default();
        for new in visits.iter() {
            *system.entry(new.visit.at / DAY_MS).or_default() += 1;
        }
        self.add_day_visits(&system)?;
        self.hold_counts(visits, last_block)?;
        self.flusher.wait_durable()
    }

    /// Writes `visits` as blocks numbered from `first_block`, and notes each link's run of
    /// them in the index; returns the last block's id.
    ///
    /// The visits are ordered by link first (stably: each link's ids stay ascending), so that
    /// a link's visits of one write sit in one block or a run of consecutive ones: one index
    /// entry covers them. A link visited a thousand times in a second costs one index entry,
    /// not one per block, and its listing reads only blocks that hold its visits.
    fn write_blocks(&self, first_block: u64, mut visits: Vec<&Visit>) -> StoreResult<u64> {
        visits.sort_by_key(|v| v.link_id);
        // Per link, in link order: (link, first block, last block, first id, last id).
        let mut spans: Vec<(u64, u64, u64, u64, u64)> = Vec::new();
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
                .insert(block_id.to_be_bytes(), encode(&block))
                .map_err(backend)?;
        }
        self.index_blocks(&spans)?;
        Ok(block_id)
    }

    /// Adds a link's counts of a day to its stored record (a fold's step,
    /// [`super::visit_counts`]), stamped with the fold's last block: one read of the record
    /// (or, the first time in a day, of the link's last record) and one write.
    pub(super) fn count_day(
        &self,
        link_id: u64,
        day: u64,
        delta: &DayDelta,
        through: u64,
    ) -> StoreResult<()> {
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
                if last_day == day {
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
        self.visit_days
            .insert(today, encode(&record))
            .map_err(backend)?;
        self.counted.lock().insert(day, link_id);
        Ok(())
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

    /// The stored blocks after `block`, in order, with their ids: what a rebuild of the
    /// memory parts at open reads ([`super::visit_index`], [`super::visit_counts`]).
    pub(super) fn blocks_after(
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

    pub(super) fn visits_page_impl(
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

    pub(super) fn recent_visits_impl(
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

    pub(super) fn visit_totals_impl(&self, link_id: u64) -> StoreResult<VisitTotals> {
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

    /// The link's first day record, if any (one forward look).
    fn first_day_record(&self, link_id: u64) -> StoreResult<Option<(sled::IVec, sled::IVec)>> {
        self.visit_days
            .range(link_key(link_id, 0)..=link_key(link_id, u64::MAX))
            .next()
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

    pub(super) fn visit_summary_impl(
        &self,
        link_id: u64,
        from: Millis,
        to: Millis,
    ) -> StoreResult<VisitSummary> {
        let mut summary = VisitSummary::default();
        let Some(SummarySpan {
            first_hour,
            last_hour,
            first_day,
            last_day,
        }) = SummarySpan::of(from, to)
        else {
            return Ok(summary);
        };
        let mut top: HashMap<(u8, String), u64> = HashMap::new();
        let mut hours: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut uniques = Hll::new();
        let mut add_hours = |day: u64, counts: &[(u8, u64, u64)]| {
            for &(h, visits, bots) in counts {
                let hour = day * 24 + u64::from(h);
                if (first_hour..=last_hour).contains(&hour) {
                    let at = hours.entry(hour).or_default();
                    at.0 += visits;
                    at.1 += bots;
                }
            }
        };
        // The stored records and the counts held in memory, under one read lock (as totals).
        let unwritten = self.unwritten_counts.read();
        for item in self
            .visit_days
            .range(link_key(link_id, first_day)..=link_key(link_id, last_day))
        {
            let (key, value) = item.map_err(backend)?;
            let day = key.get(8..).and_then(read_u64).unwrap_or(0);
            let record: DayRecord =
                rmp_serde::from_slice(&value).map_err(|e| corrupt("visit_days", e))?;
            add_hours(day, &record.hours);
            for (dim, value, n) in record.dims {
                *top.entry((dim, value)).or_default() += n;
            }
            if let Some(hll) = Hll::from_bytes(&record.uniques) {
                uniques.merge(&hll);
            }
        }
        for (day, delta) in unwritten.of(link_id) {
            if !(first_day..=last_day).contains(day) {
                continue;
            }
            add_hours(*day, &delta.hours);
            for (dim, value, n) in &delta.dims {
                *top.entry((*dim, value.to_string())).or_default() += n;
            }
            uniques.merge(&delta.uniques);
        }
        drop(unwritten);
        summary.hours = hours
            .into_iter()
            .map(|(hour, (visits, bots))| HourCount { hour, visits, bots })
            .collect();
        summary.top = top
            .into_iter()
            .filter_map(|((d, v), n)| Some((Dimension::of_stored(d)?, v, n)))
            .collect();
        summary.unique_visitors = uniques.estimate();
        Ok(summary)
    }

    pub(super) fn prune_visits_impl(&self, before: Millis, limit: usize) -> StoreResult<u64> {
        // Whole blocks, oldest first, until `limit` visits (the last block may overshoot, so a
        // call that returns fewer than `limit` has pruned everything due).
        // Only blocks whose index entries are in the tree: a fold first (the job runs once a
        // day; this costs at most the fold the writer would have made within seconds). And
        // only blocks the counters count, so that a crash never leaves held counts whose
        // blocks are gone. Those are the last seconds' blocks, due only under a retention of
        // seconds (or a test's clock): only then are the held counts folded here, since a
        // fold of them all at once holds the visit writer up.
        self.fold_index()?;
        let mut folded = self.index_folded().min(self.counts_folded());
        let mut counts_folded_here = false;
        let mut total = 0u64;
        for item in self.visit_blocks.iter() {
            if total >= limit as u64 {
                break;
            }
            let (key, value) = item.map_err(backend)?;
            let block_id = read_u64(&key).unwrap_or(0);
            let block = match decode_block(&value) {
                Ok(block) => block,
                Err(e) => {
                    // Pruning must not stop at a damaged block forever; `check` names it.
                    tracing::error!(block_id, error = %e, "corrupt visit block: left in place");
                    continue;
                }
            };
            if block.newest >= before {
                break;
            }
            if block_id > folded && !counts_folded_here {
                self.fold_counts()?;
                counts_folded_here = true;
                folded = self.index_folded().min(self.counts_folded());
            }
            if block_id > folded {
                break;
            }
            // Plain removes, like the writes: a crash in between leaves index entries whose
            // block is gone, which the listings skip and the next run removes again.
            let mut links: Vec<u64> = block.rows.iter().map(|r| r.link_id).collect();
            links.sort_unstable();
            links.dedup();
            for link_id in links {
                // Blocks go in order, so the link's entry for this block starts at it; if it
                // names more blocks, it moves to the next of them.
                let key = link_key(link_id, block_id);
                if let Some(value) = self.visit_index.remove(key).map_err(backend)? {
                    if let Some((next, value)) = Span::decode(&key, &value).without_first() {
                        self.visit_index
                            .insert(link_key(link_id, next), value)
                            .map_err(backend)?;
                    }
                }
            }
            self.visit_blocks.remove(key).map_err(backend)?;
            total += block.rows.len() as u64;
        }
        Ok(total)
    }

    pub(super) fn day_counts_impl(&self, from_day: u64, to_day: u64) -> StoreResult<Vec<DayCount>> {
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

    /// Turns the visit records of the layout before blocks (`visits`: link id, first id →
    /// the link's visits of one batch; `visit_log`: first id, link id → newest, count) into
    /// blocks, oldest first, one block (or a few) per old record. Counters are unchanged: they were
    /// always stored apart. Idempotent: a crash midway leaves the old records not yet moved,
    /// and the next open moves them.
    pub(super) fn migrate_visit_chunks(
        &self,
        old_visits: &sled::Tree,
        old_log: &sled::Tree,
    ) -> StoreResult<u64> {
        if old_visits.is_empty() && old_log.is_empty() {
            return Ok(0);
        }
        // The moved visits were counted when they were recorded: the fold point moves past
        // each block with it (after whatever is held is written).
        self.fold_counts()?;
        let mut moved = 0u64;
        let mut block_id = self.counter(counter::VISIT_BLOCK_ID)?;
        for item in old_log.iter() {
            let (log_key, value) = item.map_err(backend)?;
            let first_id = read_u64(&log_key).unwrap_or(0);
            let (link_id, _) = read_pair(&value);
            let chunk_key = link_key(link_id, first_id);
            if let Some(bytes) = old_visits.get(chunk_key).map_err(backend)? {
                let chunk: Vec<Visit> =
                    rmp_serde::from_slice(&bytes).map_err(|e| corrupt("visits", e))?;
                block_id = self.write_blocks(block_id + 1, chunk.iter().collect())?;
                self.note_migrated(block_id)?;
                old_visits.remove(chunk_key).map_err(backend)?;
                moved += chunk.len() as u64;
            }
            old_log.remove(log_key).map_err(backend)?;
        }
        // Records the log did not name (none when the trees agree) are moved too.
        for item in old_visits.iter() {
            let (key, bytes) = item.map_err(backend)?;
            let chunk: Vec<Visit> =
                rmp_serde::from_slice(&bytes).map_err(|e| corrupt("visits", e))?;
            block_id = self.write_blocks(block_id + 1, chunk.iter().collect())?;
            self.note_migrated(block_id)?;
            old_visits.remove(key).map_err(backend)?;
            moved += chunk.len() as u64;
        }
        self.fold_index()?;
        self.db.flush().map_err(backend)?;
        Ok(moved)
    }

    /// A migrated block is written: the last block id and the count fold point move past it
    /// together.
    fn note_migrated(&self, block_id: u64) -> StoreResult<()> {
        let mut batch = sled::Batch::default();
        batch.insert(counter::VISIT_BLOCK_ID, &block_id.to_be_bytes()[..]);
        self.mark_counted(block_id, batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visit(id: u64, link_id: u64, at: Millis, agent: &str) -> Visit {
        Visit {
            id,
            link_id,
            code: format!("c{link_id}"),
            at,
            client_id: "abc".into(),
            ip: (id % 2 == 0).then(|| "10.0.0.0".into()),
            user_agent: agent.into(),
            referer: "".into(),
            browser: "Chrome".into(),
            browser_version: "124".into(),
            os: "Windows".into(),
            os_version: "10".into(),
            device: "desktop".into(),
            is_bot: id % 3 == 0,
            country: None,
            region: Some("r".into()),
            city: None,
            isp: None,
            route: None,
        }
    }

    #[test]
    fn a_block_gives_back_every_visit_and_stores_strings_once() {
        let visits: Vec<Visit> = (10..20)
            .map(|i| visit(i, i % 3, 1_000 + i, "Mozilla/5.0 same agent"))
            .collect();
        let block = Block::build(visits.iter());
        assert_eq!(
            block
                .strings
                .iter()
                .filter(|s| s.as_ref() == "Mozilla/5.0 same agent")
                .count(),
            1
        );
        let back = decode_block(&encode(&block)).expect("decodes");
        assert_eq!(back.newest, 1_019);
        for link in 0..3 {
            let mine: Vec<Visit> = visits
                .iter()
                .filter(|v| v.link_id == link)
                .cloned()
                .collect();
            assert_eq!(back.visits_of(link).expect("visits"), mine);
        }
    }

    #[test]
    fn a_damaged_block_is_an_error() {
        let block = Block::build([visit(1, 1, 5, "a")].iter());
        let mut bytes = encode(&block);
        assert!(check_block(&bytes).is_ok());
        bytes.truncate(bytes.len() / 2);
        assert!(check_block(&bytes).is_err());
        let mut bad = Block::build([visit(1, 1, 5, "a")].iter());
        bad.rows[0].user_agent = 99;
        assert!(check_block(&encode(&bad)).is_err());
    }

    /// Running totals stay right when a day before the link's last counted day is written
    /// (imports come in any order), and the listing still runs in id order.
    #[test]
    fn totals_survive_days_written_out_of_order() {
        use crate::store::prelude::*;
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SledStore::open(&super::super::StoreOptions::new(dir.path())).expect("open");
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

    /// A store written before blocks (a `visits` record per link and batch, and `visit_log`)
    /// is moved into blocks when it opens, and lists the same visits.
    #[test]
    fn visit_records_of_the_older_layout_move_into_blocks() {
        use crate::store::prelude::*;
        let dir = tempfile::tempdir().expect("temp dir");
        let options = super::super::StoreOptions::new(dir.path());
        {
            let store = SledStore::open(&options).expect("open");
            let old_visits = store.db.open_tree("visits").expect("tree");
            let old_log = store.db.open_tree("visit_log").expect("tree");
            // Link 3 got visits 1, 2 and 4 in two batches; link 5 got visit 3.
            for (link, ids) in [(3u64, vec![1u64, 2]), (5, vec![3]), (3, vec![4])] {
                let chunk: Vec<Visit> =
                    ids.iter().map(|&i| visit(i, link, 100 + i, "ua")).collect();
                old_visits
                    .insert(link_key(link, ids[0]), encode(&chunk))
                    .expect("insert");
                let mut entry = [0u8; 24];
                entry[..8].copy_from_slice(&link.to_be_bytes());
                old_log
                    .insert(link_key(ids[0], link), &entry[..])
                    .expect("insert");
            }
            store.close().expect("close");
        }
        let store = SledStore::open(&options).expect("reopen");
        let ids = |link| -> Vec<u64> {
            store
                .visits_page(link, None, 10)
                .expect("page")
                .items
                .iter()
                .map(|v| v.id)
                .collect()
        };
        assert_eq!(ids(3), vec![1, 2, 4]);
        assert_eq!(ids(5), vec![3]);
        let recent: Vec<u64> = store
            .recent_visits(3, None, 2)
            .expect("recent")
            .items
            .iter()
            .map(|v| v.id)
            .collect();
        assert_eq!(recent, vec![4, 2]);
        assert!(store.db.open_tree("visits").expect("tree").is_empty());
    }
}
