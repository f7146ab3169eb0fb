//! A visit record and the counters kept from visits: per link per hour, per day by dimension,
//! all-time totals, system days. Statistics read these, never the visits themselves.

use std::sync::Arc;

use sha1::{Digest, Sha1};

use serde::{Deserialize, Serialize};

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
