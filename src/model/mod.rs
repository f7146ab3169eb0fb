//! The records and rules every layer shares, with no I/O: a link and its status, the patch
//! that changes it, the query that lists links, a visit and its counters, a pool's levels,
//! time, and the storage errors every layer reports. The store persists these; the services
//! apply their rules; the handlers show them. Nothing here reads a clock or touches a disk.

mod error;
mod link;
mod pool;
pub mod time;
mod visit;

pub use error::{StorageFault, StoreError, StoreResult};
pub use link::{
    is_keepable_id, Link, LinkCounts, LinkPage, LinkPatch, LinkQuery, LinkStatus, MAX_LINK_ID,
};
pub use pool::PoolCounts;
pub use time::Millis;
pub use visit::{
    DayCount, Dimension, HourCount, SummarySpan, Visit, VisitPage, VisitSummary, VisitTotals,
};
