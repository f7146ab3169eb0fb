//! The storage interface: the [`Store`] trait, the records it keeps and its errors.
//!
//! Everything above this module (the domain services, jobs, handlers) talks to storage only
//! through [`Store`], which two backends implement: [`sled`], embedded, the default, and
//! [`postgres`], which several instances share. Only `store/sled/` knows about sled and only
//! `store/postgres/` about PostgreSQL; the rules both apply (dedup eligibility, which status
//! changes are allowed, what a patch does, how visits add up) live in the domain types here
//! and in `visits::tally`, and one contract suite (`tests/store_contract.rs`) runs on both.
//!
//! The trait is blocking. sled answers in microseconds on the caller's thread; the PostgreSQL
//! store waits for its own runtime inside `block_in_place` (see `store/postgres/runtime.rs`).
//!
//! The store holds no clock: every method that depends on time takes `now` (milliseconds since
//! the Unix epoch) from its caller, so lifecycle tests can move time forward.
//!
//! Every link write returns only after its change is durable: on sled in the configured
//! [`Durability`] mode (concurrent writers share one flush), on PostgreSQL once committed.
//! The lifecycle writes, imports and visit batches say where they differ.

#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sled;

// The layers below, under the names the backends use.
pub(crate) use vshortlink_codes as codes;
pub(crate) use vshortlink_model as model;

// The records and errors live in the model; the store persists them. Named here for the
// backends only: everything above the store names them through the model.
pub(crate) use crate::model::Domain;
pub(crate) use crate::model::{
    is_keepable_id, DayCount, Dimension, Link, LinkCounts, LinkPage, LinkPatch, LinkQuery,
    LinkStatus, Millis, NewVisit, PoolCounts, StorageFault, StoreError, StoreResult,
    SummaryBuilder, SummarySpan, Visit, VisitPage, VisitSummary, VisitTotals, MAX_LINK_ID,
};
pub(crate) use crate::model::{AccountWrite, AccountsSnapshot, AuditEntry, AuditPage, AuditQuery};
pub(crate) use crate::model::{
    CapSlot, ClaimOutcome, Lead, LeadPage, LinkOptions, QueuedReview, Review, Trigger, Verdict,
    VisitClaim,
};
pub(crate) use crate::model::{DeliveryAttempt, DeliveryRecord, NewOutboxItem, OutboxItem};

use serde::{Deserialize, Serialize};

/// How far a write must have travelled before it is acknowledged (see docs/operations.md,
/// "Durability").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Survives a killed process: sled's flush has handed the write to the operating system.
    #[default]
    Process,
    /// Survives power loss: the store's files are also fsync'ed after the flush.
    Power,
}

/// What the redirect path needs: one small record per active code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveEntry {
    pub id: u64,
    pub url: String,
    pub expires_at: Option<Millis>,
    /// The link's options, rules and targets; `None` for a plain link, whose redirect
    /// decides nothing more.
    #[serde(default)]
    pub options: Option<Box<LinkOptions>>,
    /// A review blocked the link: it redirects no one.
    #[serde(default)]
    pub blocked: bool,
}

impl ActiveEntry {
    /// What the redirect path needs of an active link.
    pub fn of(link: &Link) -> ActiveEntry {
        ActiveEntry {
            id: link.id,
            url: link.url.clone(),
            expires_at: link.expires_at,
            options: link.options.clone(),
            blocked: link.is_review_blocked(),
        }
    }
}

/// Where a new link's code comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodeChoice {
    /// ZPOPMIN of the pool of this length.
    Pool(u8),
    /// The caller's code (already checked for syntax and reserved words by the domain layer).
    Custom(String),
    /// Codes computed by the domain (the `hash` strategy), all of one length: the first that
    /// no link owns is taken (out of a pool if it sits in one). A generated code: the link is
    /// a dedup target. None free: [`StoreError::PoolEmpty`].
    Computed(Vec<String>),
}

/// A create request as the store sees it: validated, normalised, with its clock reading.
#[derive(Clone, Debug)]
pub struct NewLink {
    pub code: CodeChoice,
    pub url: String,
    pub space: String,
    pub expires_at: Option<Millis>,
    pub title: Option<String>,
    pub tags: Vec<String>,
    pub options: Option<Box<LinkOptions>>,
    /// The domain the link answers on (0: the default domain); its code is unique there
    /// ([`crate::model::code_key`]).
    pub domain: u16,
    /// Return an existing active generated link of the same space, domain, length and URL (and no
    /// options: [`Link::is_dedup_target`]) instead of taking a code. False for a create that
    /// asks for options. Only meaningful with [`CodeChoice::Pool`] and [`CodeChoice::Computed`].
    pub dedup: bool,
    pub now: Millis,
}

impl CodeChoice {
    /// The length of the code asked for.
    pub fn length(&self) -> u8 {
        match self {
            CodeChoice::Pool(length) => *length,
            CodeChoice::Custom(code) => u8::try_from(code.len()).unwrap_or(0),
            CodeChoice::Computed(codes) => codes
                .first()
                .and_then(|c| u8::try_from(c.len()).ok())
                .unwrap_or(0),
        }
    }
}

impl NewLink {
    /// The length of the code this create asks for.
    pub fn length(&self) -> u8 {
        self.code.length()
    }

    /// The record a create writes: active, stamped with the request's clock reading. `custom`
    /// says whether the caller chose the code (custom links are never dedup targets).
    pub fn record(&self, id: u64, code: &str, custom: bool) -> Link {
        Link {
            id,
            code: code.to_string(),
            url: self.url.clone(),
            space: self.space.clone(),
            custom,
            created_at: self.now,
            expires_at: self.expires_at,
            status: LinkStatus::Active,
            title: self.title.clone(),
            tags: self.tags.clone(),
            updated_at: self.now,
            deleted_at: None,
            options: self.options.clone(),
            ended_by: None,
            review: None,
            domain: self.domain,
        }
    }
}

/// The outcome of [`LinkStore::submit_create`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// A new link was written.
    New(Link),
    /// A dedup hit: the existing link, untouched; no code was taken.
    Existing(Link),
}

impl Created {
    /// The link, whichever way it came.
    pub fn link(&self) -> &Link {
        match self {
            Created::New(link) | Created::Existing(link) => link,
        }
    }
}

/// What [`LinkStore::import_links`] did with a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Imported {
    /// Written; the link as stored (its id may differ from the record's when that was taken).
    Created(Link),
    /// The code already leads to the same URL (or the archived record is already there).
    Unchanged(Link),
    /// The code (or, for an archived record, the id) belongs to a different link: not written.
    Conflict(Link),
}

/// Codes offered to a pool by a generation strategy, with the strategy state that results
/// from producing them; both are written in one transaction so a crash never loses or repeats
/// a code.
#[derive(Clone, Debug)]
pub struct PoolBatch {
    pub length: u8,
    pub codes: Vec<String>,
    /// The pool score: `now` for fresh codes.
    pub score: Millis,
    /// The caller's clock reading; a score after it means the codes are cooling.
    pub now: Millis,
    /// The strategy's state after producing `codes` (opaque to the store).
    pub state: Option<Vec<u8>>,
    /// Hand the batch's codes out in a random order (`random`, `permute`) rather than in code
    /// order (`step`, whose order is its design).
    pub shuffle: bool,
}

/// What [`PoolStore::pool_add`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolAdded {
    /// Codes now in the pool.
    pub added: u64,
    /// Codes refused because they exist somewhere already (a link, the pool).
    pub skipped: u64,
}

// ---- visits ----

/// Group-commit figures since start: flushes made and the time spent in them.
#[derive(Clone, Copy, Debug, Default)]
pub struct CommitStats {
    pub flushes: u64,
    pub total: std::time::Duration,
    pub last: std::time::Duration,
}

/// A change another process made to the shared store, for the caches of this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreChange {
    /// The link that owns this code changed (patched, deleted, expired, recycled, imported):
    /// forget what is cached for it.
    Code(String),
    /// Account records changed: reload them.
    Accounts,
    /// Domains changed (added, patched, deleted): reload them.
    Domains,
    /// Changes may have been missed (the notification channel was lost and is back): forget
    /// everything cached.
    All,
}

/// Called with every [`StoreChange`]; see [`Cluster::watch`].
pub type ChangeHandler = Box<dyn Fn(StoreChange) + Send + Sync>;

/// What `vshortlink check` verified in a store and what it found wrong: each backend's
/// `check` fills one (sled's reads every tree, PostgreSQL's what its schema does not enforce).
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// One line per check, saying what it covered.
    pub checked: Vec<String>,
    /// One line per fault, naming the record.
    pub faults: Vec<String>,
}

impl CheckReport {
    pub(crate) fn ok(&mut self, line: String) {
        self.checked.push(line);
    }
}

/// Held while a job that must run on one instance at a time runs; dropping it lets the next
/// one in.
pub struct JobLock(#[allow(dead_code)] Option<Box<dyn Send>>);

impl JobLock {
    /// A lock that is released when `held` is dropped.
    pub fn holding(held: Box<dyn Send>) -> Self {
        JobLock(Some(held))
    }
}

/// Short-lived records that every process sharing a store must see (page sessions, batch
/// results), kept by kind and id with the time they were last touched.
pub trait SharedRecords: Send + Sync {
    /// Writes a record, touched `now`; records of the kind untouched for `ttl` go.
    fn put(&self, kind: &str, id: &[u8], value: &[u8], now: Millis, ttl: Millis)
        -> StoreResult<()>;

    /// A record touched within `ttl` before `now`; with `touch`, its clock restarts.
    fn get(
        &self,
        kind: &str,
        id: &[u8],
        now: Millis,
        ttl: Millis,
        touch: bool,
    ) -> StoreResult<Option<Vec<u8>>>;

    fn delete(&self, kind: &str, id: &[u8]) -> StoreResult<()>;
}

/// Called with the outcome of a create handed to [`LinkStore::submit_create`], once it is
/// durable.
pub type CreateDone = Box<dyn FnOnce(StoreResult<Created>) + Send>;

/// Called with the outcome of [`CapStore::claim_visit`]: granted only once the count is durable.
pub type ClaimDone = Box<dyn FnOnce(StoreResult<ClaimOutcome>) + Send>;

/// Every capability a backend provides, together: what the services hold. A backend
/// implements the capability traits below and gets this one for free; the traits come into
/// scope with `use crate::prelude::*`.
///
/// Implementations must make every write atomic across the records it touches and durable
/// before returning (the lifecycle writes and imports say where they differ), and must never
/// hand one pooled code to two callers.
pub trait Store:
    LinkStore
    + CapStore
    + PoolStore
    + VisitStore
    + LeadStore
    + ReviewStore
    + OutboxStore
    + MetaStore
    + AccountStore
    + QuotaStore
    + DomainStore
    + TlsStore
    + StoreOps
{
}

impl<T> Store for T where
    T: LinkStore
        + CapStore
        + PoolStore
        + VisitStore
        + LeadStore
        + ReviewStore
        + OutboxStore
        + MetaStore
        + AccountStore
        + QuotaStore
        + DomainStore
        + TlsStore
        + StoreOps
        + ?Sized
{
}

/// The capability traits, for `use crate::prelude::*` wherever a [`Store`] is called.
pub mod prelude {
    pub use super::{
        AccountStore, CapStore, Cluster, DomainStore, LeadStore, LinkStore, MetaStore, OutboxStore,
        PoolStore, QuotaStore, ReviewStore, SharedRecords, StoreOps, TlsStore, VisitStore,
    };
}

/// Links: their records, the code index, the active mapping the redirect path reads, the
/// dedup index and the lifecycle indexes (expiry, ended).
pub trait LinkStore: Send + Sync + 'static {
    /// Creates a link: takes its code (from a pool or as a custom code), writes the record,
    /// the code index, the active mapping and the dedup entry, in one transaction, and hands
    /// the outcome to `done` once durable. The only way to create.
    ///
    /// A pooled create returns at once (it is queued to the store's committer, or to its
    /// driver), so an async caller may call it on the runtime and await `done`. Any other
    /// create may run on the caller's thread.
    fn submit_create(&self, new: NewLink, done: CreateDone);

    /// [`LinkStore::submit_create`], waiting on this thread for the outcome (for callers off
    /// the async runtime: the CLI, imports, a refill's retry).
    fn create_link(&self, new: &NewLink) -> StoreResult<Created> {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.submit_create(
            new.clone(),
            Box::new(move |outcome| {
                let _ = answer.send(outcome);
            }),
        );
        answered
            .recv()
            .unwrap_or_else(|_| Err(StoreError::Backend("the create was dropped".into())))
    }

    /// The active mapping's entry for a code: the only read of the redirect path.
    fn resolve(&self, code: &str) -> StoreResult<Option<ActiveEntry>>;

    /// Maybe (`true`) or no (`false`): `false` only when the code has definitely never
    /// existed, and the redirect path then answers 404 without reading anything. A store that
    /// cannot tell (several writers) always answers maybe.
    fn may_exist(&self, code: &str) -> bool;

    /// The link that currently owns a code, whatever its status (archived links own no code).
    fn link_by_code(&self, code: &str) -> StoreResult<Option<Link>>;

    /// A link by id, archived ones included.
    fn link_by_id(&self, id: u64) -> StoreResult<Option<Link>>;

    /// Applies a patch to an active link and returns it.
    fn update_link(&self, code: &str, patch: &LinkPatch, now: Millis) -> StoreResult<Link>;

    /// Marks a link deleted: out of the active mapping and the dedup index; the record stays.
    fn delete_link(&self, code: &str, now: Millis) -> StoreResult<Link>;

    /// Marks active links expired (the lifecycle job, an ended cap): the ones it expired, in
    /// the order given; a link not active or not yet due is left alone. Atomic, in as few
    /// transactions as the store can, but not durable on return, like the other lifecycle
    /// writes: the job makes a whole chunk durable with one [`StoreOps::sync`].
    fn expire_links(&self, ids: &[u64], now: Millis) -> StoreResult<Vec<Link>>;

    /// [`LinkStore::expire_links`] for one link.
    fn expire_link(&self, id: u64, now: Millis) -> StoreResult<Option<Link>> {
        Ok(self.expire_links(&[id], now)?.pop())
    }

    /// Archives an expired or deleted link and returns its code to its pool with `score`
    /// (now + cooldown), atomically. Returns `None` if the link was not expired or deleted.
    fn recycle_link(&self, id: u64, score: Millis) -> StoreResult<Option<Link>>;

    /// Links in id order, filtered.
    fn list_links(&self, query: &LinkQuery) -> StoreResult<LinkPage>;

    /// Active links whose `expires_at` is at or before `now`, soonest first, at most `limit`.
    fn due_for_expiry(&self, now: Millis, limit: usize) -> StoreResult<Vec<Link>>;

    /// Expired or deleted links whose end (expiry or deletion time) is before `ended_before`,
    /// oldest first, at most `limit`.
    fn due_for_recycling(&self, ended_before: Millis, limit: usize) -> StoreResult<Vec<Link>>;

    /// Retires an expired or deleted link's code forever (tiers that do not recycle): it leaves
    /// the recycling queue and keeps its code. Returns false if it was not queued.
    fn retire_link(&self, id: u64) -> StoreResult<bool>;

    /// Writes whole link records as they are (import): each keeps its code, dates, status and
    /// expiry, and its id when free; its code leaves any pool and enters the code filter;
    /// every index its status needs is written. Idempotent: a code already leading to the same
    /// URL is `Unchanged`, one leading elsewhere a `Conflict`, and nothing is written for
    /// either. One result per record, in order; records of any length and status may come
    /// together. Each record is written whole or not at all, but not durably on return, like
    /// the lifecycle writes: the caller ends a run with [`StoreOps::sync`].
    fn import_links(&self, links: &[Link]) -> StoreResult<Vec<Imported>>;

    /// The active generated link the dedup index holds for this space, domain, length and
    /// URL.
    fn dedup_target(
        &self,
        space: &str,
        domain: u16,
        length: u8,
        url: &str,
    ) -> StoreResult<Option<Link>>;

    /// Link counts by status.
    fn link_counts(&self) -> StoreResult<LinkCounts>;
}

/// Visit caps: redirects counted durably against a link's and its targets' caps.
pub trait CapStore: Send + Sync {
    /// Counts one redirect of a capped link: every slot of the claim goes up by one together,
    /// or none does when any is at its cap ([`ClaimOutcome::Full`] names it). Returns at once;
    /// `done` is called once the count is durable (group-committed with concurrent claims),
    /// so that no redirect is answered that a crash could forget, and no cap is ever passed,
    /// whatever the concurrency and (for a shared store) the number of instances.
    fn claim_visit(&self, claim: VisitClaim, done: ClaimDone);

    /// The redirects counted so far against a link's caps, by slot (slots never counted are
    /// left out).
    fn counted(&self, link_id: u64) -> StoreResult<Vec<(CapSlot, u64)>>;

    /// Sets a link's counts (an import carrying them): each slot at least as high as given.
    fn import_counted(&self, link_id: u64, counts: &[(CapSlot, u64)]) -> StoreResult<()>;
}

/// Leads left through links' forms.
pub trait LeadStore: Send + Sync {
    /// Writes a lead (its id assigned here, `lead.id` ignored) and returns it once durable.
    fn add_lead(&self, lead: Lead) -> StoreResult<Lead>;

    /// A link's leads newest first, those with an id below `before`, at most `limit`.
    fn leads(&self, link_id: u64, before: Option<u64>, limit: usize) -> StoreResult<LeadPage>;

    /// How many leads a link has.
    fn lead_count(&self, link_id: u64) -> StoreResult<u64>;

    /// The links that have leads (for the retention job).
    fn lead_links(&self) -> StoreResult<Vec<u64>>;

    /// Deletes a link's leads recorded before `before`, or all of them with `None`; returns
    /// how many. Not durable until [`StoreOps::sync`], like the lifecycle writes.
    fn delete_leads(&self, link_id: u64, before: Option<Millis>) -> StoreResult<u64>;

    /// Writes leads as they are (an import), keeping their ids; a lead already there (same
    /// link, same id) is skipped, so an import runs twice harmlessly. Later leads get ids
    /// above every imported one. Returns how many were written. Not durable until
    /// [`StoreOps::sync`].
    fn import_leads(&self, leads: &[Lead]) -> StoreResult<u64>;
}

/// The review of destinations: the queue with its leases, finished reviews, verdicts.
pub trait ReviewStore: Send + Sync {
    /// Queues links for review in one durable write (the review's queue writer gathers what
    /// creates and visits told it); returns how many were queued. A link is queued at most
    /// once; one queued again while its review runs is kept for another review once that one
    /// finishes.
    fn queue_reviews(&self, items: &[(u64, Trigger)], at: Millis) -> StoreResult<u64>;

    /// [`ReviewStore::queue_reviews`] for one link: `false` when it already waits.
    fn queue_review(&self, link_id: u64, trigger: Trigger, at: Millis) -> StoreResult<bool> {
        Ok(self.queue_reviews(&[(link_id, trigger)], at)? == 1)
    }

    /// Takes the oldest queued link whose lease is free (never taken, or its lease ended before
    /// `now`) and leases it until `now + lease`: an instance that dies mid-review leaves it to
    /// be taken again. Instances sharing a store never take the same link at once.
    fn take_review(&self, now: Millis, lease: Millis) -> StoreResult<Option<QueuedReview>>;

    /// Extends the lease of a link under review to `until` (a worker renews it while its
    /// review runs, so that a short lease frees the link soon after its worker dies).
    fn renew_review(&self, link_id: u64, until: Millis) -> StoreResult<()>;

    /// Links waiting in the queue, leased ones included.
    fn review_queue_depth(&self) -> StoreResult<u64>;

    /// Keeps a finished review (its id assigned here) and its screenshot, makes its verdict
    /// the link's latest, and takes the link out of the queue (unless it was queued again
    /// meanwhile: then it waits, free to be taken). Durable on return.
    fn add_review(&self, review: Review, screenshot: Option<&[u8]>) -> StoreResult<Review>;

    /// A link's reviews, newest first, at most `limit`.
    fn reviews(&self, link_id: u64, limit: usize) -> StoreResult<Vec<Review>>;

    /// The screenshot review `review_id` kept, when it is a review of link `link_id` (`None`
    /// otherwise: the caller's right to the link decides its right to the screenshot).
    fn review_screenshot(&self, link_id: u64, review_id: u64) -> StoreResult<Option<Vec<u8>>>;

    /// Ids of the links whose latest verdict is `verdict`, in id order after `after`, at most
    /// `limit` (the next cursor when there are more).
    fn links_by_verdict(
        &self,
        verdict: Verdict,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<(Vec<u64>, Option<u64>)>;
}

/// The webhook outbox: events waiting to be delivered, leased to the sender that takes them,
/// and the log of attempts (the last [`crate::model::DELIVERY_LOG_KEEP`] of each webhook).
///
/// Delivery is at least once: an item leaves the outbox only when its sender settles it
/// ([`OutboxStore::delivered`], [`OutboxStore::give_up`]), so a sender that dies mid-attempt
/// leaves it to be sent again once its lease ends. A lease must outlast an attempt (the
/// request's timeout), or a slow attempt and its successor may both send it.
pub trait OutboxStore: Send + Sync {
    /// Queues events in one durable write and returns their ids, increasing, in the order
    /// given. Each is due at its `created_at`.
    fn enqueue(&self, items: &[NewOutboxItem]) -> StoreResult<Vec<u64>>;

    /// Takes at most `limit` items and leases them until `now + lease`: items that are due
    /// (`next_at` at or before `now`), whose lease is free (never taken, or ended at or before
    /// `now`), and that are the oldest item of their webhook and key still in the outbox. So a
    /// key's items go out one at a time, in id order, and one waiting for its retry holds back
    /// those after it; other keys go on. Soonest due first (then by id). Instances sharing a
    /// store never take the same item at once. No write to wait for: a lease lost in a crash
    /// only frees the item early.
    fn take_due(&self, now: Millis, lease: Millis, limit: usize) -> StoreResult<Vec<OutboxItem>>;

    /// The item was delivered: it leaves the outbox (the next item of its key may go) and the
    /// attempt is logged, in one durable write. `false` when the item is not there (already
    /// settled by another sender after this one's lease ended): nothing is written.
    fn delivered(&self, id: u64, attempt: &DeliveryAttempt) -> StoreResult<bool>;

    /// The attempt failed: the item waits until `next_at` (its lease freed, one more attempt
    /// counted, the attempt's error kept with it) and the attempt is logged, in one durable
    /// write. `false` when the item is not there: nothing is written.
    fn retry(&self, id: u64, attempt: &DeliveryAttempt, next_at: Millis) -> StoreResult<bool>;

    /// The item's last attempt failed and no other will be made (24 hours of retries, or its
    /// webhook is gone): it leaves the outbox and the attempt is logged as given up, in one
    /// durable write. `false` when the item is not there: nothing is written.
    fn give_up(&self, id: u64, attempt: &DeliveryAttempt) -> StoreResult<bool>;

    /// Items in the outbox, leased ones included.
    fn outbox_depth(&self) -> StoreResult<u64>;

    /// The delivery log, newest first, at most `limit` records: one webhook's or every one's,
    /// all outcomes or only the failed and given-up attempts.
    fn deliveries(
        &self,
        webhook: Option<&str>,
        failed_only: bool,
        limit: usize,
    ) -> StoreResult<Vec<DeliveryRecord>>;
}

/// The code pools: one per length, a ZSet of (score, code), and each strategy's state.
pub trait PoolStore: Send + Sync {
    /// Adds generated codes to a pool together with the new strategy state, skipping any code
    /// that exists anywhere already (the store's own check: callers offer every candidate).
    fn pool_add(&self, batch: &PoolBatch) -> StoreResult<PoolAdded>;

    /// A pool's levels at `now`.
    fn pool_counts(&self, length: u8, now: Millis) -> StoreResult<PoolCounts>;

    /// Whether fewer than `level` codes of a pool are available at `now`: the low-water check
    /// after every create, answered as cheaply as the store can.
    fn pool_below(&self, length: u8, now: Millis, level: u64) -> StoreResult<bool>;

    /// Is this code sitting in a pool (available or cooling)?
    fn in_pool(&self, code: &str) -> StoreResult<bool>;

    /// The first `limit` entries of a pool in ZSet order (score, code), without taking them.
    fn pool_peek(&self, length: u8, limit: usize) -> StoreResult<Vec<(Millis, String)>>;

    /// The persisted state of a length's strategy, as last written by `pool_add`.
    fn strategy_state(&self, length: u8) -> StoreResult<Option<Vec<u8>>>;
}

/// Visits and their counters.
pub trait VisitStore: Send + Sync {
    /// Writes a batch of visits and their counters (per link per hour, per link per day by
    /// dimension, distinct visitors, per link totals, system per day) in one transaction,
    /// assigning each visit its id, and returns when it is durable.
    fn record_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()>;

    /// Writes imported visits keeping their ids, like `record_visits` otherwise. Only for a
    /// store that has no visit yet (see [`VisitStore::last_visit_id`]): the ids come from one
    /// other store, so they are unique, and each link's visits must come in increasing id
    /// order.
    fn import_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()>;

    /// Writes visits folded in from a visit journal, like `record_visits`, and notes in the
    /// same write that the journal named `journal` is folded up to `position` (opaque to the
    /// store): after a crash the store holds both the visits and the position, or neither, so
    /// the journal's tail after the position is replayed exactly once.
    fn record_journaled_visits(
        &self,
        visits: &mut [NewVisit],
        journal: &str,
        position: &[u8],
    ) -> StoreResult<()>;

    /// The position the last `record_journaled_visits` of `journal` noted (`None`: never).
    fn journal_position(&self, journal: &str) -> StoreResult<Option<Vec<u8>>>;

    /// The highest visit id ever given (0: the store never had a visit).
    fn last_visit_id(&self) -> StoreResult<u64>;

    /// A link's visits newest first, those with an id below `before`.
    fn recent_visits(
        &self,
        link_id: u64,
        before: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage>;

    /// A link's visits with id greater than `after`, oldest first, at most `limit`.
    fn visits_page(&self, link_id: u64, after: Option<u64>, limit: usize)
        -> StoreResult<VisitPage>;

    /// A link's all-time visit counts.
    fn visit_totals(&self, link_id: u64) -> StoreResult<VisitTotals>;

    /// A link's counters for visits at `from..to` (hours; dimensions and distinct visitors
    /// by whole UTC days).
    fn visit_summary(&self, link_id: u64, from: Millis, to: Millis) -> StoreResult<VisitSummary>;

    /// Removes visits recorded before `before`, oldest first, about `limit` at a time;
    /// counters stay. A store that keeps visits in blocks removes whole blocks, all of whose
    /// visits are due: a call may remove a block's worth more than `limit`, and a visit shares
    /// the fate of its block's newest. Returns how many were removed (0: nothing removable is
    /// left). Not durable until [`StoreOps::sync`], like the lifecycle writes.
    fn prune_visits(&self, before: Millis, limit: usize) -> StoreResult<u64>;

    /// System-wide creates and visits for each UTC day in `from_day..=to_day`.
    fn day_counts(&self, from_day: u64, to_day: u64) -> StoreResult<Vec<DayCount>>;
}

/// Small values by key: generated secrets, keys and the like.
pub trait MetaStore: Send + Sync {
    /// A value from the metadata tree (generated keys and the like).
    fn meta_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Writes a metadata value durably, unless one is there already; returns the value that is
    /// stored afterwards (so two first starts agree on one generated key).
    fn meta_init(&self, key: &str, value: &[u8]) -> StoreResult<Vec<u8>>;

    /// Writes a metadata value durably, replacing any there. Only for a restore into a store
    /// with no link yet, whose own generated keys decided nothing (see `vshortlink restore`).
    fn meta_replace(&self, key: &str, value: &[u8]) -> StoreResult<()>;
}

/// People and their rights ([`crate::model::account`]): every account record under one
/// version number, and the audit log.
///
/// Account records are few and change seldom, so the accounts service holds all of them and
/// checks its rules (one user per email, the last admin) against them; a write names the
/// version it was checked against and is refused when another writer came first, so that a
/// rule spanning records holds between instances with no lock held across the check.
pub trait AccountStore: Send + Sync {
    /// Every account record and the version they are at.
    fn accounts(&self) -> StoreResult<AccountsSnapshot>;

    /// Applies `write` whole if the records are still at `version`, durably; returns the new
    /// version, or `None` (nothing written) when another write came first.
    fn write_accounts(&self, version: u64, write: &AccountWrite) -> StoreResult<Option<u64>>;

    /// Appends entries to the audit log (their ids are assigned here).
    fn audit_append(&self, entries: &[AuditEntry]) -> StoreResult<()>;

    /// A page of the audit log, newest first.
    fn audit(&self, query: &AuditQuery) -> StoreResult<AuditPage>;

    /// Removes entries older than `before`; returns how many went.
    fn audit_prune(&self, before: Millis) -> StoreResult<u64>;
}

/// What [`QuotaStore::quota_take`] did: how much it added and where the counter stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaTaken {
    /// Added to the counter: all that was asked, part of it (`partial`), or nothing.
    pub granted: u64,
    /// The counter after the take (before it, when nothing was granted).
    pub used: u64,
}

/// The usage counters of plans' quotas (SPEC §25): small named counters (a team's links this
/// month, its active links, its visits this month), taken against a limit atomically, so that
/// concurrent creates — on PostgreSQL, on several instances — never pass the limit together.
/// The store decides nothing about what a key means; the services name and count them.
pub trait QuotaStore: Send + Sync {
    /// A counter's value; `None` when it was never set (or was cleared): the caller counts it
    /// from the records and sets it with [`QuotaStore::quota_init`].
    fn quota_get(&self, key: &str) -> StoreResult<Option<u64>>;

    /// Sets a counter that is not set; returns what it holds afterwards, so that two callers
    /// counting at once agree on one value.
    fn quota_init(&self, key: &str, value: u64) -> StoreResult<u64>;

    /// Adds `want` to a counter unless that takes it past `limit` (a counter not set counts
    /// from 0). Without `partial` it is all or nothing; with it, as much as fits. Atomic
    /// against every other take, on every instance sharing the store. A shared store keeps
    /// counters durably (PostgreSQL: committed on return; a crash before the create that
    /// follows leaves the counter above the records, never below, so a limit is never
    /// passed); a store only one process opens may keep them in memory, every counter unset
    /// again after each open (sled).
    fn quota_take(
        &self,
        key: &str,
        want: u64,
        limit: u64,
        partial: bool,
    ) -> StoreResult<QuotaTaken>;

    /// Takes `n` back (a create that failed after its take, a link deleted or ended); never
    /// below 0, and a counter not set stays unset.
    fn quota_release(&self, key: &str, n: u64) -> StoreResult<()>;

    /// Forgets every counter, so that each is counted again from the records when next used:
    /// at the start of a store only this process uses, and after an import or a restore.
    fn quota_clear(&self) -> StoreResult<()>;
}

/// What [`DomainStore::add_domain`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainAdded {
    /// Written, with the id the store gave it.
    Added(Domain),
    /// A domain of that host exists: nothing written.
    Exists,
}

/// Domains (SPEC §26): few records, read whole by the services, which keep them in memory.
/// Ids are the store's to give: never 0 (the default domain's, whose record is written with
/// [`DomainStore::put_domain`]), never given twice, even after a delete.
pub trait DomainStore: Send + Sync {
    /// Every domain record, by id.
    fn domains(&self) -> StoreResult<Vec<Domain>>;

    /// Writes a new domain with the next id (`domain.id` ignored), durably, unless its host is
    /// taken.
    fn add_domain(&self, domain: &Domain) -> StoreResult<DomainAdded>;

    /// Writes a domain record whole over the one of its id (a patch; the default domain's
    /// record; an import, which keeps ids), durably; ids [`DomainStore::add_domain`] gives
    /// later are above it. `false` (nothing written) when another id has its host.
    fn put_domain(&self, domain: &Domain) -> StoreResult<bool>;

    /// Removes a domain record, durably; `false` when there was none.
    fn delete_domain(&self, id: u16) -> StoreResult<bool>;

    /// Whether a link that is not archived is on this domain.
    fn domain_in_use(&self, id: u16) -> StoreResult<bool>;
}

/// HTTPS's certificate state (SPEC §26): the ACME account, each host's certificate and key,
/// and the answers to challenges being validated, as opaque values by key. The services name
/// the keys and decide what the values mean; one instance orders and writes, every instance
/// sharing the store reads (so any of them can answer a challenge or serve a certificate).
pub trait TlsStore: Send + Sync {
    /// The value under `key`, if any.
    fn tls_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Writes `value` under `key` durably, replacing what was there.
    fn tls_put(&self, key: &str, value: &[u8]) -> StoreResult<()>;

    /// Removes `key` (nothing when it is absent).
    fn tls_delete(&self, key: &str) -> StoreResult<()>;
}

/// Running the store: durability, health, shutdown, and the handle of a shared store.
pub trait StoreOps: Send + Sync {
    /// Persists state that is kept in memory between flushes (the code filter). Called
    /// periodically and at shutdown; a crash before it only costs a rebuild at next start.
    fn checkpoint(&self) -> StoreResult<()>;

    /// Waits until every write made so far is durable (one shared flush).
    fn sync(&self) -> StoreResult<()>;

    /// A cheap read that proves the store answers (for `/healthz`).
    fn ping(&self) -> StoreResult<()>;

    /// The storage fault that stops this store's writes, if any (sled keeps its first I/O
    /// error and fails every later write with it, so a fault lasts until the store is
    /// reopened; a database server recovers by itself and reports none).
    fn write_fault(&self) -> Option<StorageFault>;

    /// How the store's own group commit has gone, for metrics (zeros for a store whose
    /// server groups commits itself).
    fn commit_stats(&self) -> CommitStats;

    /// What the store holds in memory beyond its bounds' shares, by part, in bytes, as it
    /// changes (sled: its page table's estimate and the cache capacity the table leaves;
    /// nothing for a database server).
    fn memory_held(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// What several instances sharing this store coordinate through; `None` for a store only
    /// this process uses (its jobs then serialise in memory and its short-lived records stay
    /// in its own memory).
    fn cluster(&self) -> Option<&dyn Cluster>;

    /// Checkpoints, flushes and stops accepting writes (shutdown).
    fn close(&self) -> StoreResult<()>;
}

/// The coordination of instances sharing one store.
pub trait Cluster: Send + Sync {
    /// Waits until no other instance runs the job `name`, and holds it off until the returned
    /// lock is dropped (the lifecycle job runs on one instance at a time).
    fn job_lock(&self, name: &str) -> StoreResult<JobLock>;

    /// Short-lived records every instance must see (page sessions, batch results).
    fn records(&self) -> &dyn SharedRecords;

    /// Subscribes the caches of this process to changes other instances make.
    fn watch(&self, on_change: ChangeHandler);
}
