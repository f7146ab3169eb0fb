//! Visits: the redirect hands a raw visit to a bounded queue and returns; the writer task
//! enriches visits (user agent, geolocation, client id) and writes them in batches, with their
//! counters, through the store (see docs/architecture.md, "Visits and statistics, inside").

pub mod client;
pub mod geo;
pub use crate::model::hll;
pub mod recorder;
pub mod service;
pub mod stats;
pub use crate::model::tally;
pub mod ua;

pub use recorder::{RawVisit, Recorder, VisitMetrics};
pub use service::{Statistics, VisitFilter};
