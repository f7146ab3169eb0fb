//! The records and rules every layer shares, with no I/O: a link and its status, the patch
//! that changes it, the query that lists links, a visit and its counters, a pool's levels, the
//! webhook outbox, time, people and their rights (accounts), and the storage errors every layer reports. The store persists these;
//! the services apply their rules; the handlers show them. Nothing here reads a clock or
//! touches a disk.

pub mod account;
pub mod domain;
mod error;
pub mod gates;
pub mod hll;
mod link;
pub mod options;
pub mod outbox;
mod pool;
pub mod review;
pub mod tally;
pub mod time;
mod visit;

pub use account::{
    AccountRecord, AccountWrite, AccountsSnapshot, AuditEntry, AuditPage, AuditQuery, Directory,
    Grants, Identity, Maker, Member, RecordAddress, Role, RunKey, Team, TeamRole, User, UserRole,
};
pub use domain::{code_key, split_key, Domain, DEFAULT_DOMAIN};
pub use error::{StorageFault, StoreError, StoreResult};
pub use gates::{InApp, Lead, LeadForm, LeadPage, SocialPreview};
pub use link::{
    is_keepable_id, Link, LinkCounts, LinkPage, LinkPatch, LinkQuery, LinkStatus, OptionsPatch,
    MAX_LINK_ID,
};
pub use options::{
    gate, CapSlot, ClaimOutcome, EndedBy, Gate, LinkOptions, Passed, Route, VisitClaim,
};
pub use outbox::{
    DeliveryAttempt, DeliveryOutcome, DeliveryRecord, EventKind, NewOutboxItem, OutboxItem,
    DELIVERY_LOG_KEEP,
};
pub use pool::PoolCounts;
pub use review::{CheckRecord, QueuedReview, Review, ReviewMark, Trigger, Verdict};
pub use time::Millis;
pub use visit::{
    client_hash_from_id, client_hash_of, DayCount, Dimension, HourCount, NewVisit, SummaryBuilder,
    SummarySpan, Visit, VisitPage, VisitSummary, VisitTotals,
};
