//! Visit records and their counters in sled.
//!
//! | tree            | key                                      | value                   |
//! |-----------------|------------------------------------------|-------------------------|
//! | `visits`        | link id u64, visit id u64                | `Visit` (MessagePack)   |
//! | `visit_log`     | visit id u64                             | link id u64, at u64     |
//! | `visit_hours`   | link id u64, hour u64                    | visits u64, bots u64    |
//! | `visit_dims`    | link id u64, day u64, dimension u8, value| visits u64              |
//! | `visit_uniques` | link id u64, day u64                     | [`Hll`] bytes (non-bots)|
//! | `visit_totals`  | link id u64                              | visits u64, bots u64    |
//!
//! Visit ids increase in write order, and the writer writes in arrival order, so `visit_log`
//! is (nearly) in time order: pruning reads it from the start and stops at the first visit
//! that is young enough.

use std::collections::{BTreeMap, HashMap};

use sled::Transactional;

use super::keys::{counter, read_u64};
use super::{backend, encode, tx_error, SledStore, DAY_MS};
use crate::store::{
    DayCount, Dimension, HourCount, Millis, NewVisit, StoreError, StoreResult, Visit, VisitPage,
    VisitSummary, VisitTotals,
};
use crate::visits::hll::Hll;

const HOUR_MS: u64 = 3_600_000;

fn link_key(link_id: u64, n: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&link_id.to_be_bytes());
    key[8..].copy_from_slice(&n.to_be_bytes());
    key
}

fn dim_key(link_id: u64, day: u64, dim: Dimension, value: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(17 + value.len());
    key.extend_from_slice(&link_key(link_id, day));
    key.push(dim as u8);
    key.extend_from_slice(value.as_bytes());
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

/// The counter changes of one batch, summed before the transaction.
#[derive(Default)]
struct Deltas {
    hours: BTreeMap<[u8; 16], (u64, u64)>,
    totals: BTreeMap<[u8; 8], (u64, u64)>,
    dims: BTreeMap<Vec<u8>, u64>,
    uniques: BTreeMap<[u8; 16], Vec<u64>>,
    days: BTreeMap<u64, u64>,
}

impl Deltas {
    fn of(visits: &[NewVisit]) -> Deltas {
        let mut d = Deltas::default();
        for new in visits {
            let v = &new.visit;
            let bot = u64::from(v.is_bot);
            let hour = d
                .hours
                .entry(link_key(v.link_id, v.at / HOUR_MS))
                .or_default();
            *hour = (hour.0 + 1, hour.1 + bot);
            let total = d.totals.entry(v.link_id.to_be_bytes()).or_default();
            *total = (total.0 + 1, total.1 + bot);
            let day = v.at / DAY_MS;
            *d.days.entry(day).or_default() += 1;
            let values = [
                (Dimension::Browser, v.browser.as_str()),
                (Dimension::Os, v.os.as_str()),
                (Dimension::Device, v.device.as_str()),
                (Dimension::Country, v.country.as_deref().unwrap_or("")),
                (Dimension::Referer, new.referer_host.as_str()),
            ];
            for (dim, value) in values {
                // Unknown values are left out of the top lists rather than shown as "".
                if !value.is_empty() {
                    *d.dims
                        .entry(dim_key(v.link_id, day, dim, value))
                        .or_default() += 1;
                }
            }
            if !v.is_bot {
                d.uniques
                    .entry(link_key(v.link_id, day))
                    .or_default()
                    .push(new.client_hash);
            }
        }
        d
    }
}

impl SledStore {
    pub(super) fn record_visits_impl(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        if visits.is_empty() {
            return Ok(());
        }
        let deltas = Deltas::of(visits);
        let trees = (
            &self.visits,
            &self.visit_log,
            &self.visit_hours,
            &self.visit_dims,
            &self.visit_uniques,
            &self.visit_totals,
            &self.counters,
        );
        let guard = self.flusher.committing();
        let first_id = trees
            .transaction(|(log, index, hours, dims, uniques, totals, counters)| {
                let last = counters
                    .get(counter::VISIT_ID)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0);
                for (i, new) in visits.iter().enumerate() {
                    let id = last + 1 + i as u64;
                    let mut visit = new.visit.clone();
                    visit.id = id;
                    log.insert(&link_key(visit.link_id, id)[..], encode(&visit))?;
                    index.insert(&id.to_be_bytes()[..], &pair(visit.link_id, visit.at)[..])?;
                }
                let next = last + visits.len() as u64;
                counters.insert(counter::VISIT_ID, &next.to_be_bytes()[..])?;
                for (key, (n, bots)) in &deltas.hours {
                    let (a, b) = hours.get(key)?.map(|v| read_pair(&v)).unwrap_or_default();
                    hours.insert(&key[..], &pair(a + n, b + bots)[..])?;
                }
                for (key, (n, bots)) in &deltas.totals {
                    let (a, b) = totals.get(key)?.map(|v| read_pair(&v)).unwrap_or_default();
                    totals.insert(&key[..], &pair(a + n, b + bots)[..])?;
                }
                for (key, n) in &deltas.dims {
                    let a = dims.get(key)?.and_then(|v| read_u64(&v)).unwrap_or(0);
                    dims.insert(&key[..], &(a + n).to_be_bytes()[..])?;
                }
                for (key, hashes) in &deltas.uniques {
                    // A damaged sketch is restarted rather than failing every later batch.
                    let mut hll = uniques
                        .get(key)?
                        .and_then(|v| Hll::from_bytes(&v))
                        .unwrap_or_default();
                    for h in hashes {
                        hll.insert_hash(*h);
                    }
                    uniques.insert(&key[..], hll.to_bytes())?;
                }
                for (day, n) in &deltas.days {
                    let key = counter::day_visits(*day);
                    let a = counters.get(&key)?.and_then(|v| read_u64(&v)).unwrap_or(0);
                    counters.insert(key, &(a + n).to_be_bytes()[..])?;
                }
                Ok(last + 1)
            })
            .map_err(|e| tx_error(e, ""))?;
        drop(guard);
        for (i, new) in visits.iter_mut().enumerate() {
            new.visit.id = first_id + i as u64;
        }
        self.flusher.wait_durable()
    }

    pub(super) fn visits_page_impl(
        &self,
        link_id: u64,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        let start = link_key(link_id, after.map_or(0, |a| a.saturating_add(1)));
        let end = link_key(link_id, u64::MAX);
        let mut page = VisitPage::default();
        for item in self.visits.range(start..=end) {
            let (_, value) = item.map_err(backend)?;
            let visit: Visit = rmp_serde::from_slice(&value).map_err(|e| corrupt("visits", e))?;
            if page.items.len() == limit {
                page.next = page.items.last().map(|v| v.id);
                break;
            }
            page.items.push(visit);
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
        for item in self
            .visit_hours
            .range(link_key(link_id, first_hour)..=link_key(link_id, last_hour))
        {
            let (key, value) = item.map_err(backend)?;
            let (visits, bots) = read_pair(&value);
            let hour = key.get(8..).and_then(read_u64).unwrap_or(0);
            summary.hours.push(HourCount { hour, visits, bots });
        }
        let (first_day, last_day) = (from / DAY_MS, (to - 1) / DAY_MS);
        let mut top: HashMap<(Dimension, String), u64> = HashMap::new();
        let dim_end = link_key(link_id, last_day.saturating_add(1));
        for item in self.visit_dims.range(link_key(link_id, first_day)..dim_end) {
            let (key, value) = item.map_err(backend)?;
            let Some(dim) = key.get(16).copied().and_then(Dimension::from_u8) else {
                return Err(corrupt("visit_dims", "bad dimension"));
            };
            let name = String::from_utf8_lossy(key.get(17..).unwrap_or_default()).into_owned();
            *top.entry((dim, name)).or_default() += read_u64(&value).unwrap_or(0);
        }
        summary.top = top.into_iter().map(|((d, v), n)| (d, v, n)).collect();
        let mut uniques = Hll::new();
        for item in self
            .visit_uniques
            .range(link_key(link_id, first_day)..=link_key(link_id, last_day))
        {
            let (_, value) = item.map_err(backend)?;
            if let Some(day) = Hll::from_bytes(&value) {
                uniques.merge(&day);
            }
        }
        summary.unique_visitors = uniques.estimate();
        Ok(summary)
    }

    pub(super) fn prune_visits_impl(&self, before: Millis, limit: usize) -> StoreResult<u64> {
        let mut doomed = Vec::new();
        for item in self.visit_log.iter() {
            let (key, value) = item.map_err(backend)?;
            let (link_id, at) = read_pair(&value);
            if at >= before || doomed.len() == limit {
                break;
            }
            doomed.push((key, link_id));
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        let trees = (&self.visits, &self.visit_log);
        let _guard = self.flusher.committing();
        trees
            .transaction(|(visits, log)| {
                for (key, link_id) in &doomed {
                    let id = read_u64(key).unwrap_or(0);
                    visits.remove(&link_key(*link_id, id)[..])?;
                    log.remove(key)?;
                }
                Ok(())
            })
            .map_err(|e| tx_error(e, ""))?;
        Ok(doomed.len() as u64)
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
