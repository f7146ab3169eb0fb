//! Statistics (see docs/api.md, "Statistics and visits"): shapes the counters the store keeps
//! into the answers of `/api/v1/links/{code}/stats` and `/api/v1/stats`. Reads counters only,
//! never visits.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::time::rfc3339;
use crate::model::{DayCount, Dimension, LinkCounts, LinkQuery, LinkStatus, Millis, StoreResult};
use crate::model::{Link, Route};
use crate::store::Store;

pub use crate::model::time::DAY_MS;
pub use crate::model::time::HOUR_MS;
/// Most points one series may have (e.g. 416 days by the hour).
pub const MAX_POINTS: u64 = 10_000;
/// Entries in each `top` list.
pub const TOP_N: usize = 10;
/// Days in `/api/v1/stats`.
pub const DAYS: u64 = 14;

/// Bucket size of a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    Hour,
    Day,
}

impl Granularity {
    pub fn millis(self) -> u64 {
        match self {
            Granularity::Hour => HOUR_MS,
            Granularity::Day => DAY_MS,
        }
    }

    /// Hourly points for short ranges, daily ones beyond three days.
    pub fn for_range(from: Millis, to: Millis) -> Granularity {
        if to.saturating_sub(from) <= 3 * DAY_MS {
            Granularity::Hour
        } else {
            Granularity::Day
        }
    }

    /// Points a range `from..to` needs.
    pub fn points(self, from: Millis, to: Millis) -> u64 {
        let size = self.millis();
        if to <= from {
            return 0;
        }
        (to - 1) / size - from / size + 1
    }
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Point {
    /// Start of the bucket, RFC 3339 UTC.
    pub t: String,
    pub visits: u64,
    pub bots: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TopEntry {
    pub value: String,
    pub visits: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Top {
    pub browser: Vec<TopEntry>,
    pub os: Vec<TopEntry>,
    pub device: Vec<TopEntry>,
    pub country: Vec<TopEntry>,
    pub referer: Vec<TopEntry>,
}

/// `GET /api/v1/links/{code}/stats`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LinkStats {
    pub from: String,
    pub to: String,
    pub granularity: &'static str,
    /// Every visit in the range, bots included.
    pub total: u64,
    /// Distinct non-bot clients (HyperLogLog; exact for small counts).
    pub unique_visitors: u64,
    pub bots: u64,
    pub series: Vec<Point>,
    pub top: Top,
    /// Visits by the destination that served them, most first: only links with rules or
    /// targets record it.
    pub destinations: Vec<Destination>,
    /// Leads left through the link's form (all time).
    pub leads: u64,
}

/// A destination of a link with rules or targets, and its visits in the range.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Destination {
    /// `default`, `rule:N` or `target:N`.
    pub route: String,
    /// Where the route leads now (`null` for a rule or target the link no longer has).
    pub url: Option<String>,
    pub visits: u64,
}

/// A link's statistics over `from..to` (milliseconds, `from < to`).
pub fn link_stats(
    store: &dyn Store,
    link: &Link,
    from: Millis,
    to: Millis,
    granularity: Granularity,
) -> StoreResult<LinkStats> {
    let summary = store.visit_summary(link.id, from, to)?;
    let size = granularity.millis();
    let first = from / size;
    let mut buckets: BTreeMap<u64, (u64, u64)> = (first..first + granularity.points(from, to))
        .map(|b| (b, (0, 0)))
        .collect();
    let (mut total, mut bots) = (0, 0);
    for hour in &summary.hours {
        total += hour.visits;
        bots += hour.bots;
        let bucket = buckets.entry(hour.hour * HOUR_MS / size).or_default();
        bucket.0 += hour.visits;
        bucket.1 += hour.bots;
    }
    let series = buckets
        .into_iter()
        .map(|(b, (visits, bots))| Point {
            t: rfc3339(b * size),
            visits,
            bots,
        })
        .collect();
    let mut top = Top::default();
    let mut destinations = Vec::new();
    let mut by_dim: BTreeMap<Dimension, Vec<TopEntry>> = BTreeMap::new();
    for (dim, value, visits) in summary.top {
        by_dim
            .entry(dim)
            .or_default()
            .push(TopEntry { value, visits });
    }
    for (dim, mut entries) in by_dim {
        entries.sort_by(|a, b| b.visits.cmp(&a.visits).then_with(|| a.value.cmp(&b.value)));
        if dim == Dimension::Route {
            destinations = entries
                .into_iter()
                .map(|e| Destination {
                    url: Route::parse(&e.value)
                        .and_then(|r| r.url(&link.url, link.options.as_deref()))
                        .map(str::to_string),
                    route: e.value,
                    visits: e.visits,
                })
                .collect();
            continue;
        }
        entries.truncate(TOP_N);
        let slot = match dim {
            Dimension::Browser => &mut top.browser,
            Dimension::Os => &mut top.os,
            Dimension::Device => &mut top.device,
            Dimension::Country => &mut top.country,
            Dimension::Referer => &mut top.referer,
            Dimension::Route => continue,
        };
        *slot = entries;
    }
    let routes = link
        .options
        .as_deref()
        .is_some_and(|o| !o.rules.is_empty() || !o.targets.is_empty());
    let routed: u64 = destinations.iter().map(|d| d.visits).sum();
    if !routes && total > routed {
        // A plain link's redirects store no route (only its pages do: `in_app`, `preview`):
        // the rest went to its URL.
        destinations.push(Destination {
            route: "default".into(),
            url: Some(link.url.clone()),
            visits: total - routed,
        });
        destinations.sort_by_key(|d| std::cmp::Reverse(d.visits));
    }
    Ok(LinkStats {
        from: rfc3339(from),
        to: rfc3339(to),
        granularity: match granularity {
            Granularity::Hour => "hour",
            Granularity::Day => "day",
        },
        total,
        // The sketch covers whole days; a shorter range cannot have more visitors than
        // human visits.
        unique_visitors: summary.unique_visitors.min(total - bots),
        bots,
        series,
        top,
        leads: store.lead_count(link.id)?,
        destinations,
    })
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Today {
    pub creates: u64,
    pub visits: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Day {
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    pub creates: u64,
    pub visits: u64,
}

/// `GET /api/v1/stats`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SystemStats {
    pub links: LinkCounts,
    pub today: Today,
    /// The last [`DAYS`] days, oldest first, today last.
    pub days: Vec<Day>,
}

/// The statistics of the whole store, from its counters.
pub fn system_stats(store: &dyn Store, now: Millis) -> StoreResult<SystemStats> {
    let today = now / DAY_MS;
    let days = store.day_counts(today.saturating_sub(DAYS - 1), today)?;
    shape(store.link_counts()?, days)
}

/// Links read per store page by [`space_stats`].
const SPACE_PAGE: usize = 1000;

/// The same statistics over the links of some spaces only (a key limited to spaces
/// sees its spaces' counts). The store keeps its counters for the whole store, so this walks
/// the spaces' links (archived ones too: their visits still count) and reads each link's
/// hourly counters for the last [`DAYS`] days: O(links of those spaces), bounded memory.
pub fn space_stats(store: &dyn Store, now: Millis, spaces: &[String]) -> StoreResult<SystemStats> {
    let today = now / DAY_MS;
    let first = today.saturating_sub(DAYS - 1);
    let mut days: Vec<DayCount> = (first..=today)
        .map(|day| DayCount {
            day,
            ..DayCount::default()
        })
        .collect();
    let mut links = LinkCounts::default();
    for space in spaces {
        let mut after = None;
        loop {
            let page = store.list_links(&LinkQuery {
                space: Some(space.clone()),
                after,
                limit: SPACE_PAGE,
                ..LinkQuery::default()
            })?;
            for link in &page.items {
                match link.status {
                    LinkStatus::Active => links.active += 1,
                    LinkStatus::Expired => links.expired += 1,
                    LinkStatus::Deleted => links.deleted += 1,
                    LinkStatus::Archived => links.archived += 1,
                }
                if let Some(slot) = (link.created_at / DAY_MS)
                    .checked_sub(first)
                    .and_then(|i| days.get_mut(usize::try_from(i).ok()?))
                {
                    slot.creates += 1;
                }
                let summary = store.visit_summary(link.id, first * DAY_MS, (today + 1) * DAY_MS)?;
                for hour in summary.hours {
                    if let Some(slot) = (hour.hour * HOUR_MS / DAY_MS)
                        .checked_sub(first)
                        .and_then(|i| days.get_mut(usize::try_from(i).ok()?))
                    {
                        slot.visits += hour.visits;
                    }
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    shape(links, days)
}

fn shape(links: LinkCounts, days: Vec<DayCount>) -> StoreResult<SystemStats> {
    let last = days.last().copied().unwrap_or_default();
    Ok(SystemStats {
        links,
        today: Today {
            creates: last.creates,
            visits: last.visits,
        },
        days: days
            .into_iter()
            .map(|d| Day {
                date: rfc3339(d.day * DAY_MS)
                    .get(..10)
                    .unwrap_or_default()
                    .to_string(),
                creates: d.creates,
                visits: d.visits,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_cover_partial_buckets() {
        assert_eq!(Granularity::Hour.points(0, HOUR_MS), 1);
        assert_eq!(Granularity::Hour.points(HOUR_MS / 2, HOUR_MS + 1), 2);
        assert_eq!(Granularity::Day.points(0, 14 * DAY_MS), 14);
        assert_eq!(Granularity::Day.points(5, 5), 0);
    }
}
