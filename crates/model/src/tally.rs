//! How a batch of visits adds up to the counters statistics read: visits and bots per link
//! per UTC hour, visits per link per UTC day by dimension value (the `top` lists), distinct
//! non-bot clients per link per UTC day, per-link totals and system visits per day.
//!
//! The rule lives here, in the domain, once: a backend adds a [`Tally`] to what it has
//! stored and never decides itself what counts. Keys are ordered maps, so that a backend that
//! locks rows while adding (PostgreSQL) always locks them in the same order.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::hll::Hll;
use super::{Dimension, NewVisit};

use crate::time::DAY_MS;
use crate::time::HOUR_MS;

/// The counters of one batch.
#[derive(Debug, Default)]
pub struct Tally {
    /// (link id, hour since the epoch) → (visits, bots).
    pub hours: BTreeMap<(u64, u64), (u64, u64)>,
    /// (link id, day since the epoch, dimension, value) → visits. Empty values (unknown
    /// browser, no referer) are left out of the top lists rather than shown as "".
    pub dims: BTreeMap<(u64, u64, Dimension, String), u64>,
    /// (link id, day) → the distinct non-bot clients of the batch.
    pub uniques: BTreeMap<(u64, u64), Hll>,
    /// Link id → (visits, bots).
    pub totals: BTreeMap<u64, (u64, u64)>,
    /// Day → visits, every link.
    pub days: BTreeMap<u64, u64>,
}

impl Tally {
    /// Adds up a batch.
    pub fn of(visits: &[NewVisit]) -> Tally {
        let mut tally = Tally::default();
        for new in visits {
            tally.add(new);
        }
        tally
    }

    fn add(&mut self, new: &NewVisit) {
        let v = &new.visit;
        let (day, hour) = (v.at / DAY_MS, v.at / HOUR_MS);
        let bot = u64::from(v.is_bot);
        let slot = self.hours.entry((v.link_id, hour)).or_default();
        slot.0 += 1;
        slot.1 += bot;
        let total = self.totals.entry(v.link_id).or_default();
        total.0 += 1;
        total.1 += bot;
        *self.days.entry(day).or_default() += 1;
        for (dim, value) in top_values(new) {
            *self
                .dims
                .entry((v.link_id, day, dim, value.to_string()))
                .or_default() += 1;
        }
        if !v.is_bot {
            self.uniques
                .entry((v.link_id, day))
                .or_default()
                .insert_hash(new.client_hash);
        }
    }
}

/// The values a visit counts for in the top lists, one per dimension it has: unknown values
/// (an empty browser, no referer, no country) are left out rather than shown as "".
pub fn top_values(new: &NewVisit) -> impl Iterator<Item = (Dimension, &Arc<str>)> {
    let v = &new.visit;
    [
        (Dimension::Browser, Some(&v.browser)),
        (Dimension::Os, Some(&v.os)),
        (Dimension::Device, Some(&v.device)),
        (Dimension::Country, v.country.as_ref()),
        (Dimension::Referer, Some(&new.referer_host)),
        (Dimension::Route, v.route.as_ref()),
    ]
    .into_iter()
    .filter_map(|(dim, value)| Some((dim, value.filter(|s| !s.is_empty())?)))
}

/// The referer's host, lower-cased: the value the `referer` top list counts; empty when the
/// referer is not a URL with a host.
pub fn referer_host(referer: &str) -> String {
    url::Url::parse(referer)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Visit;

    fn visit(link_id: u64, at: u64, bot: bool, browser: &str, client: u64) -> NewVisit {
        NewVisit {
            visit: Visit {
                link_id,
                at,
                is_bot: bot,
                browser: browser.into(),
                ..Visit::default()
            },
            client_hash: client,
            referer_host: "".into(),
        }
    }

    #[test]
    fn a_batch_adds_up_by_hour_day_dimension_and_client() {
        let batch = [
            visit(1, 0, false, "Chrome", 7),
            visit(1, 10, false, "Chrome", 7),
            visit(1, HOUR_MS, true, "Googlebot", 9),
            visit(2, DAY_MS, false, "", 7),
        ];
        let t = Tally::of(&batch);
        assert_eq!(t.hours[&(1, 0)], (2, 0));
        assert_eq!(t.hours[&(1, 1)], (1, 1));
        assert_eq!(t.totals[&1], (3, 1));
        assert_eq!(t.days[&0], 3);
        assert_eq!(t.days[&1], 1);
        assert_eq!(t.dims[&(1, 0, Dimension::Browser, "Chrome".into())], 2);
        // An unknown browser is not a top-list entry; a bot is no distinct visitor.
        assert!(!t.dims.keys().any(|k| k.0 == 2 && k.2 == Dimension::Browser));
        assert_eq!(t.uniques[&(1, 0)].estimate(), 1);
    }
}
