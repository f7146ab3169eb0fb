//! A visit record and the counters kept from visits: per link per hour, per day by dimension,
//! all-time totals, system days. Statistics read these, never the visits themselves.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sha1::{Digest, Sha1};

use serde::{Deserialize, Serialize};

use super::hll::Hll;
use super::time::{Millis, DAY_MS, HOUR_MS};

/// One recorded visit, as the visit writer enriched it.
///
/// The strings that repeat across visits (the user agent and what it says, the referer, the
/// client id, the place) are shared: the writer parses each distinct agent and referer once
/// per batch and every visit of the batch holds the same allocation, and a store's block of
/// visits reads each distinct string once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Visit {
    /// Assigned by the store, increasing in write order for each link; the cursor of visit
    /// listings.
    pub id: u64,
    pub link_id: u64,
    pub code: String,
    pub at: Millis,
    /// Hex SHA-1 of `ip & user_agent`, computed from the full address.
    pub client_id: Arc<str>,
    /// Full, truncated or absent, per `visits.ip`.
    pub ip: Option<Arc<str>>,
    pub user_agent: Arc<str>,
    pub referer: Arc<str>,
    pub browser: Arc<str>,
    pub browser_version: Arc<str>,
    pub os: Arc<str>,
    pub os_version: Arc<str>,
    /// desktop, mobile, tablet, bot or other.
    pub device: Arc<str>,
    pub is_bot: bool,
    pub country: Option<Arc<str>>,
    pub region: Option<Arc<str>>,
    pub city: Option<Arc<str>>,
    pub isp: Option<Arc<str>>,
    /// Which destination served the visit (`default`, `rule:N`, `target:N`) on a link with
    /// rules or targets; `None` for a plain link's visit.
    #[serde(default)]
    pub route: Option<Arc<str>>,
}

/// What a link's visits are broken down by in the `top` lists of its statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    Browser,
    Os,
    Device,
    Country,
    Referer,
    /// The destination that served the visit (only for links with rules or targets).
    Route,
}

impl Dimension {
    pub const ALL: [Dimension; 6] = [
        Dimension::Browser,
        Dimension::Os,
        Dimension::Device,
        Dimension::Country,
        Dimension::Referer,
        Dimension::Route,
    ];

    /// The number a dimension is stored as, by every backend (these are on disk: never
    /// renumber).
    pub fn stored(self) -> u8 {
        match self {
            Dimension::Browser => 1,
            Dimension::Os => 2,
            Dimension::Device => 3,
            Dimension::Country => 4,
            Dimension::Referer => 5,
            Dimension::Route => 6,
        }
    }

    /// The dimension of a stored number.
    pub fn of_stored(number: u8) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.stored() == number)
    }
}

/// One page of a link's visits, oldest first.
#[derive(Clone, Debug, Default)]
pub struct VisitPage {
    pub items: Vec<Visit>,
    /// The id to pass as `after` for the next page; `None` at the end.
    pub next: Option<u64>,
}

/// Visits of one link in one UTC hour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HourCount {
    /// Hours since the Unix epoch.
    pub hour: u64,
    /// Every visit, bots included.
    pub visits: u64,
    pub bots: u64,
}

/// A link's visit counters over a time range, read from counters only.
#[derive(Clone, Debug, Default)]
pub struct VisitSummary {
    /// Hours that had visits, in order.
    pub hours: Vec<HourCount>,
    /// Visit counts by dimension and value, over the whole UTC days the range touches.
    pub top: Vec<(Dimension, String, u64)>,
    /// Distinct non-bot clients over the whole UTC days the range touches.
    pub unique_visitors: u64,
}

/// What a summary of visits at `from..to` covers: the hours inside it, and the whole UTC days
/// it touches (dimension counts and distinct visitors are kept per day).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummarySpan {
    pub first_hour: u64,
    pub last_hour: u64,
    pub first_day: u64,
    pub last_day: u64,
}

impl SummarySpan {
    /// `None` for an empty range.
    pub fn of(from: Millis, to: Millis) -> Option<SummarySpan> {
        (to > from).then(|| SummarySpan {
            first_hour: from / HOUR_MS,
            last_hour: (to - 1) / HOUR_MS,
            first_day: from / DAY_MS,
            last_day: (to - 1) / DAY_MS,
        })
    }
}

/// A [`VisitSummary`] being put together from counters: hour counts, dimension counts and
/// distinct-visitor sketches, added in any order and from any number of places (stored
/// records, counts still held in memory). Both stores shape their summaries here.
#[derive(Clone, Debug)]
pub struct SummaryBuilder {
    span: SummarySpan,
    /// Hour → visits, bots.
    hours: BTreeMap<u64, (u64, u64)>,
    top: HashMap<(Dimension, String), u64>,
    uniques: Hll,
}

impl SummaryBuilder {
    /// An empty summary of `span`.
    pub fn new(span: SummarySpan) -> Self {
        Self {
            span,
            hours: BTreeMap::new(),
            top: HashMap::new(),
            uniques: Hll::new(),
        }
    }

    /// Adds an hour's counts; hours outside the span are left out.
    pub fn add_hour(&mut self, hour: u64, visits: u64, bots: u64) {
        if (self.span.first_hour..=self.span.last_hour).contains(&hour) {
            let at = self.hours.entry(hour).or_default();
            at.0 += visits;
            at.1 += bots;
        }
    }

    /// Adds visits of one value of a dimension (the caller reads only the span's days).
    pub fn add_dim(&mut self, dim: Dimension, value: impl Into<String>, n: u64) {
        *self.top.entry((dim, value.into())).or_default() += n;
    }

    /// Adds a day's sketch of distinct visitors.
    pub fn add_uniques(&mut self, sketch: &Hll) {
        self.uniques.merge(sketch);
    }

    /// The summary: hours in order, the dimension counts, the distinct visitors estimated.
    pub fn finish(self) -> VisitSummary {
        VisitSummary {
            hours: self
                .hours
                .into_iter()
                .map(|(hour, (visits, bots))| HourCount { hour, visits, bots })
                .collect(),
            top: self
                .top
                .into_iter()
                .map(|((dim, value), n)| (dim, value, n))
                .collect(),
            unique_visitors: self.uniques.estimate(),
        }
    }
}

/// All-time visit counts of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VisitTotals {
    pub visits: u64,
    pub bots: u64,
}

/// System-wide counts of one UTC day.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DayCount {
    /// Days since the Unix epoch.
    pub day: u64,
    pub creates: u64,
    pub visits: u64,
}

/// A visit handed to the store's `record_visits`, with what its counters need beside the record.
#[derive(Clone, Debug, Default)]
pub struct NewVisit {
    pub visit: Visit,
    /// 64 uniformly distributed bits of the client id, for distinct-visitor counting.
    pub client_hash: u64,
    /// The referer's host (the value the `referer` top list counts); empty for none.
    pub referer_host: Arc<str>,
}

/// The distinct-counting key of a stored client id: the first 8 bytes of its SHA-1, as
/// `client_key` gives it; `None` if the id is not hex.
pub fn client_hash_from_id(client_id: &str) -> Option<u64> {
    hex::decode(client_id.get(..16)?)
        .ok()
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(u64::from_be_bytes)
}

/// [`client_hash_from_id`], or for an id that is not hex (a test's, a hand-written
/// import's) the first 8 bytes of the id's own SHA-1, so that one client still counts once.
pub fn client_hash_of(client_id: &str) -> u64 {
    client_hash_from_id(client_id).unwrap_or_else(|| {
        let digest = Sha1::digest(client_id.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(first)
    })
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    #[test]
    fn builder_adds_counts_from_several_places_and_keeps_the_span() {
        // 01:00 to 03:00 on day 1: hours 25 and 26, day 1.
        let span = SummarySpan::of(DAY_MS + HOUR_MS, DAY_MS + 3 * HOUR_MS).unwrap();
        let mut summary = SummaryBuilder::new(span);
        summary.add_hour(26, 2, 1);
        summary.add_hour(24, 5, 0); // before the span
        summary.add_hour(25, 1, 0);
        summary.add_hour(26, 3, 0);
        summary.add_dim(Dimension::Country, "NL", 2);
        summary.add_dim(Dimension::Country, "NL".to_string(), 3);
        let mut sketch = Hll::new();
        sketch.insert_hash(0x9e37_79b9_7f4a_7c15);
        summary.add_uniques(&sketch);
        summary.add_uniques(&sketch);
        let summary = summary.finish();
        assert_eq!(
            summary.hours,
            vec![
                HourCount {
                    hour: 25,
                    visits: 1,
                    bots: 0
                },
                HourCount {
                    hour: 26,
                    visits: 5,
                    bots: 1
                },
            ]
        );
        assert_eq!(summary.top, vec![(Dimension::Country, "NL".to_string(), 5)]);
        assert_eq!(summary.unique_visitors, 1);
    }
}
