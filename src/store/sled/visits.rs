//! Visit records and their counters in sled.
//!
//! | tree           | key                          | value                                      |
//! |----------------|------------------------------|--------------------------------------------|
//! | `visits`       | link id u64, first id u64    | the link's visits of one batch, `Vec<Visit>`|
//! | `visit_log`    | first id u64, link id u64    | newest `at` u64, count u64                 |
//! | `visit_days`   | link id u64, day u64         | [`DayRecord`]: hours, top values, sketch   |
//! | `visit_totals` | link id u64                  | visits u64, bots u64                       |
//!
//! A batch from the writer is grouped by link: each link's visits of the batch are one record
//! (a chunk), and each link's counters of a day are one record. A batch over N links is about
//! 4·N tree operations however many visits it holds, which is what makes the writer keep up
//! with a hot link. They are plain inserts, not a transaction (see `record_part` for why and
//! what a crash can do), made durable by one flush per batch.
//!
//! Visit ids increase in write order and the writer writes in arrival order, so `visit_log`
//! is (nearly) in time order: pruning reads it from the start and stops at the first chunk
//! whose newest visit is young enough.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::keys::{counter, read_u64};
use super::{backend, encode, SledStore, DAY_MS};
use crate::store::{
    DayCount, Dimension, HourCount, Millis, NewVisit, StoreError, StoreResult, Visit, VisitPage,
    VisitSummary, VisitTotals,
};
use crate::visits::hll::Hll;

const HOUR_MS: u64 = 3_600_000;
/// Links written per step (the ids of a step are reserved together).
const LINKS_PER_TX: usize = 64;
/// Most visits in one chunk record (a hot link's batch is split into several).
const MAX_CHUNK: usize = 512;

/// One link's counters of one UTC day.
#[derive(Debug, Default, Serialize, Deserialize)]
struct DayRecord {
    /// (hour of the day, visits, bots), by hour.
    hours: Vec<(u8, u64, u64)>,
    /// (dimension, value, visits): the material of the `top` lists.
    dims: Vec<(u8, String, u64)>,
    /// Distinct non-bot clients ([`Hll`] bytes).
    uniques: Vec<u8>,
}

/// Decodes a day record (for [`super::check_record`]).
pub(super) fn decode_day(bytes: &[u8]) -> StoreResult<()> {
    let day: DayRecord = rmp_serde::from_slice(bytes).map_err(|e| corrupt("days", e))?;
    if !day.uniques.is_empty() && Hll::from_bytes(&day.uniques).is_none() {
        return Err(corrupt("days", "malformed distinct-visitor sketch"));
    }
    Ok(())
}

impl DayRecord {
    fn add(&mut self, new: &NewVisit) {
        let v = &new.visit;
        let hour = ((v.at % DAY_MS) / HOUR_MS) as u8;
        let bot = u64::from(v.is_bot);
        match self.hours.binary_search_by_key(&hour, |h| h.0) {
            Ok(i) => {
                self.hours[i].1 += 1;
                self.hours[i].2 += bot;
            }
            Err(i) => self.hours.insert(i, (hour, 1, bot)),
        }
        let values = [
            (Dimension::Browser, v.browser.as_str()),
            (Dimension::Os, v.os.as_str()),
            (Dimension::Device, v.device.as_str()),
            (Dimension::Country, v.country.as_deref().unwrap_or("")),
            (Dimension::Referer, new.referer_host.as_str()),
        ];
        for (dim, value) in values {
            // Unknown values are left out of the top lists rather than shown as "".
            if value.is_empty() {
                continue;
            }
            let dim = dim as u8;
            match self.dims.iter_mut().find(|d| d.0 == dim && d.1 == value) {
                Some(d) => d.2 += 1,
                None => self.dims.push((dim, value.to_string(), 1)),
            }
        }
    }
}

fn link_key(link_id: u64, n: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&link_id.to_be_bytes());
    key[8..].copy_from_slice(&n.to_be_bytes());
    key
}

fn pair(a: u64, b: u64) -> [u8; 16] {
    link_key(a, b)
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

pub(super) fn decode_chunk(bytes: &[u8]) -> StoreResult<Vec<Visit>> {
    rmp_serde::from_slice(bytes).map_err(|e| corrupt("visits", e))
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

    /// `preset`: keep the visits' ids instead of assigning new ones.
    fn write_visits(&self, visits: &mut [NewVisit], preset: bool) -> StoreResult<()> {
        // Each link's visits, in arrival order; links in order of first appearance.
        let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
        let mut slot: HashMap<u64, usize> = HashMap::new();
        for (i, new) in visits.iter().enumerate() {
            let link = new.visit.link_id;
            let open = slot
                .get(&link)
                .copied()
                .filter(|g| groups[*g].1.len() < MAX_CHUNK);
            let g = open.unwrap_or_else(|| {
                groups.push((link, Vec::new()));
                slot.insert(link, groups.len() - 1);
                groups.len() - 1
            });
            groups[g].1.push(i);
        }
        for part in groups.chunks(LINKS_PER_TX) {
            let first = self.record_part(visits, part, preset)?;
            if preset {
                continue;
            }
            let ids = part.iter().flat_map(|(_, members)| members.iter());
            for (k, i) in ids.enumerate() {
                visits[*i].visit.id = first + k as u64;
            }
        }
        self.flusher.wait_durable()
    }

    /// Writes the visits of a few links; returns the first id given.
    ///
    /// Plain inserts, not a transaction: sled applies a transaction's writes under a global
    /// lock that every read of every tree waits for, and a stream of visit transactions starved
    /// the redirects that miss the cache (22 % of the throughput with recording off, in
    /// `benches/redirect.sh`). Only the writer task writes these trees and these counters, so
    /// nothing races; the ids are reserved first, so a crash never gives an id twice. What a
    /// crash can do is leave one unflushed batch half counted: no visit is acknowledged to
    /// anyone, and the flush that ends every batch bounds it to the batch in flight.
    /// With `preset`, each visit keeps its id (see `import_visits_impl`).
    fn record_part(
        &self,
        visits: &[NewVisit],
        part: &[(u64, Vec<usize>)],
        preset: bool,
    ) -> StoreResult<u64> {
        let count: u64 = part.iter().map(|(_, m)| m.len() as u64).sum();
        let last = self.counter(counter::VISIT_ID)?;
        let reserved = if preset {
            part.iter()
                .flat_map(|(_, m)| m.iter())
                .map(|i| visits[*i].visit.id)
                .fold(last, u64::max)
        } else {
            last + count
        };
        self.counters
            .insert(counter::VISIT_ID, &reserved.to_be_bytes()[..])
            .map_err(backend)?;
        let mut next = last + 1;
        let mut per_day: HashMap<u64, u64> = HashMap::new();
        for (link_id, members) in part {
            let first_id = match members.first() {
                Some(i) if preset => visits[*i].visit.id,
                _ => next,
            };
            let mut chunk = Vec::with_capacity(members.len());
            let mut records: Vec<(u64, DayRecord, Vec<u64>)> = Vec::new();
            let (mut newest, mut bots) = (0, 0);
            for i in members {
                let new = &visits[*i];
                let mut visit = new.visit.clone();
                if !preset {
                    visit.id = next;
                    next += 1;
                }
                newest = newest.max(visit.at);
                bots += u64::from(visit.is_bot);
                let day = visit.at / DAY_MS;
                *per_day.entry(day).or_default() += 1;
                let at = match records.iter().position(|r| r.0 == day) {
                    Some(at) => at,
                    None => {
                        let key = link_key(*link_id, day);
                        let record = match self.visit_days.get(key).map_err(backend)? {
                            // A damaged record restarts rather than failing every later batch,
                            // but loudly: its counts are lost.
                            Some(bytes) => rmp_serde::from_slice(&bytes).unwrap_or_else(|e| {
                                tracing::error!(
                                    link_id = *link_id,
                                    day,
                                    error = %e,
                                    "corrupt visit day record: its counts restart from zero"
                                );
                                DayRecord::default()
                            }),
                            None => DayRecord::default(),
                        };
                        records.push((day, record, Vec::new()));
                        records.len() - 1
                    }
                };
                records[at].1.add(new);
                if !visit.is_bot {
                    records[at].2.push(new.client_hash);
                }
                chunk.push(visit);
            }
            self.visits
                .insert(link_key(*link_id, first_id), encode(&chunk))
                .map_err(backend)?;
            let mut entry = [0u8; 24];
            entry[..8].copy_from_slice(&link_id.to_be_bytes());
            entry[8..16].copy_from_slice(&newest.to_be_bytes());
            entry[16..].copy_from_slice(&(chunk.len() as u64).to_be_bytes());
            self.visit_log
                .insert(link_key(first_id, *link_id), &entry[..])
                .map_err(backend)?;
            for (day, mut record, hashes) in records {
                if !hashes.is_empty() {
                    let mut hll = if record.uniques.is_empty() {
                        Hll::default()
                    } else {
                        Hll::from_bytes(&record.uniques).unwrap_or_else(|| {
                            tracing::error!(
                                link_id = *link_id,
                                day,
                                "corrupt distinct-visitor sketch: unique visitors restart from zero"
                            );
                            Hll::default()
                        })
                    };
                    for h in hashes {
                        hll.insert_hash(h);
                    }
                    record.uniques = hll.to_bytes();
                }
                self.visit_days
                    .insert(link_key(*link_id, day), encode(&record))
                    .map_err(backend)?;
            }
            let key = link_id.to_be_bytes();
            let (a, b) = self
                .visit_totals
                .get(key)
                .map_err(backend)?
                .map(|v| read_pair(&v))
                .unwrap_or_default();
            let n = chunk.len() as u64;
            self.visit_totals
                .insert(key, &pair(a + n, b + bots)[..])
                .map_err(backend)?;
        }
        for (day, n) in per_day {
            let key = counter::day_visits(day);
            let current = self.counter(&key)?;
            self.counters
                .insert(key, &(current + n).to_be_bytes()[..])
                .map_err(backend)?;
        }
        Ok(last + 1)
    }

    pub(super) fn visits_page_impl(
        &self,
        link_id: u64,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        let start = after.map_or(0, |a| a.saturating_add(1));
        // The chunk holding `start` begins at or before it.
        let from = self
            .visits
            .range(link_key(link_id, 0)..=link_key(link_id, start))
            .next_back()
            .transpose()
            .map_err(backend)?
            .map_or(link_key(link_id, start), |(key, _)| {
                let mut k = [0u8; 16];
                k.copy_from_slice(&key[..16.min(key.len())]);
                k
            });
        let mut page = VisitPage::default();
        'chunks: for item in self.visits.range(from..=link_key(link_id, u64::MAX)) {
            let (_, value) = item.map_err(backend)?;
            for visit in decode_chunk(&value)? {
                if visit.id < start {
                    continue;
                }
                if page.items.len() == limit {
                    page.next = page.items.last().map(|v| v.id);
                    break 'chunks;
                }
                page.items.push(visit);
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
        // Chunks are keyed by their first visit's id: every chunk that may hold an id below
        // `end` starts below it.
        'chunks: for item in self
            .visits
            .range(link_key(link_id, 0)..link_key(link_id, end))
            .rev()
        {
            let (_, value) = item.map_err(backend)?;
            for visit in decode_chunk(&value)?.into_iter().rev() {
                if visit.id >= end {
                    continue;
                }
                if page.items.len() == limit {
                    page.next = page.items.last().map(|v| v.id);
                    break 'chunks;
                }
                page.items.push(visit);
            }
        }
        Ok(page)
    }

    pub(super) fn visit_totals_impl(&self, link_id: u64) -> StoreResult<VisitTotals> {
        let (visits, bots) = self
            .visit_totals
            .get(link_id.to_be_bytes())
            .map_err(backend)?
            .map(|v| read_pair(&v))
            .unwrap_or_default();
        Ok(VisitTotals { visits, bots })
    }

    pub(super) fn visit_summary_impl(
        &self,
        link_id: u64,
        from: Millis,
        to: Millis,
    ) -> StoreResult<VisitSummary> {
        let mut summary = VisitSummary::default();
        if to <= from {
            return Ok(summary);
        }
        let (first_hour, last_hour) = (from / HOUR_MS, (to - 1) / HOUR_MS);
        let (first_day, last_day) = (from / DAY_MS, (to - 1) / DAY_MS);
        let mut top: HashMap<(u8, String), u64> = HashMap::new();
        let mut uniques = Hll::new();
        for item in self
            .visit_days
            .range(link_key(link_id, first_day)..=link_key(link_id, last_day))
        {
            let (key, value) = item.map_err(backend)?;
            let day = key.get(8..).and_then(read_u64).unwrap_or(0);
            let record: DayRecord =
                rmp_serde::from_slice(&value).map_err(|e| corrupt("visit_days", e))?;
            for (h, visits, bots) in record.hours {
                let hour = day * 24 + u64::from(h);
                if (first_hour..=last_hour).contains(&hour) {
                    summary.hours.push(HourCount { hour, visits, bots });
                }
            }
            for (dim, value, n) in record.dims {
                *top.entry((dim, value)).or_default() += n;
            }
            if let Some(hll) = Hll::from_bytes(&record.uniques) {
                uniques.merge(&hll);
            }
        }
        summary.top = top
            .into_iter()
            .filter_map(|((d, v), n)| Some((Dimension::from_u8(d)?, v, n)))
            .collect();
        summary.unique_visitors = uniques.estimate();
        Ok(summary)
    }

    pub(super) fn prune_visits_impl(&self, before: Millis, limit: usize) -> StoreResult<u64> {
        // Whole chunks, oldest first, until `limit` visits (the last chunk may overshoot, so a
        // call that returns fewer than `limit` has pruned everything due).
        let mut doomed = Vec::new();
        let mut total = 0u64;
        for item in self.visit_log.iter() {
            let (key, value) = item.map_err(backend)?;
            let (link_id, newest) = read_pair(&value);
            let count = value.get(16..).and_then(read_u64).unwrap_or(0);
            if newest >= before || total >= limit as u64 {
                break;
            }
            let first_id = read_u64(&key).unwrap_or(0);
            doomed.push((key, link_key(link_id, first_id)));
            total += count;
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        // Plain removes, like the writes (see `record_part`): a crash between the two only
        // leaves a log entry whose chunk is gone, which the next run removes again.
        for (log_key, chunk_key) in &doomed {
            self.visits.remove(chunk_key).map_err(backend)?;
            self.visit_log.remove(log_key).map_err(backend)?;
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
}
