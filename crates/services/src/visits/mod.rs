//! Visits: the redirect appends a raw visit to the visit journal and returns; the writer task
//! reads the journal, enriches visits (user agent, geolocation, client id) and folds them in
//! batches, with their counters and the journal position reached, into the store (see docs/architecture.md, "Visits and statistics, inside").

pub mod client;
pub mod geo;
pub mod journal;
mod segment;
pub use crate::model::hll;
pub mod recorder;
pub mod service;
pub mod stats;
pub use crate::model::tally;
pub mod ua;

pub use recorder::{RawVisit, Recorder, VisitMetrics};
pub use service::{Statistics, VisitFilter};
