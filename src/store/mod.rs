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
//! store waits for its own runtime inside `block_in_place` (see `store/postgres/mod.rs`).
//!
//! The store holds no clock: every method that depends on time takes `now` (milliseconds since
//! the Unix epoch) from its caller, so lifecycle tests can move time forward.
//!
//! Every link write returns only after its change is durable: on sled in the configured
//! [`Durability`] mode (concurrent writers share one flush), on PostgreSQL once committed.
//! The lifecycle writes, imports and visit batches say where they differ.

pub mod postgres;
pub mod sled;

// The records and errors live in the model; the store persists them (re-exported so that the
// backends name them as before).
pub use crate::model::{
    is_keepable_id, DayCount, Dimension, HourCount, Link, LinkCounts, LinkPage, LinkPatch,
    LinkQuery, LinkStatus, Millis, NewVisit, PoolCounts, StorageFault, StoreError, StoreResult,
    SummarySpan, Visit, VisitPage, VisitSummary, VisitTotals, MAX_LINK_ID,
};
pub use crate::model::{
    CapSlot, ClaimOutcome, Lead, LeadPage, LinkOptions, QueuedReview, Review, Trigger, Verdict,
    VisitClaim,
};

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
    /// Return an existing active generated link of the same space, length and URL instead of
    /// taking a code. Only meaningful with [`CodeChoice::Pool`].
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
        }
    }
}

/// The outcome of [`Store::create_link`].
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

/// What [`Store::import_link`] did with a record.
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

/// What [`Store::pool_add`] did.
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
    /// Changes may have been missed (the notification channel was lost and is back): forget
    /// everything cached.
    All,
}

/// Called with every [`StoreChange`]; see [`Store::watch`].
pub type ChangeHandler = Box<dyn Fn(StoreChange) + Send + Sync>;

/// Held while a job that must run on one instance at a time runs; dropping it lets the next
/// one in.
pub struct JobLock(#[allow(dead_code)] Option<Box<dyn Send>>);

impl JobLock {
    /// A lock that holds nothing: a store used by one process serialises its jobs in memory.
    pub fn local() -> Self {
        JobLock(None)
    }

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

/// Called with the outcome of a create queued by [`Store::submit_create`], once it is durable.
pub type CreateDone = Box<dyn FnOnce(StoreResult<Created>) + Send>;

/// Called with the outcome of [`Store::claim_visit`]: granted only once the count is durable.
pub type ClaimDone = Box<dyn FnOnce(StoreResult<ClaimOutcome>) + Send>;

/// Storage for links, code pools and their metadata.
///
/// Implementations must make every write atomic across the records it touches and durable
/// before returning, and must never hand one pooled code to two callers.
pub trait Store: Send + Sync + 'static {
    // ---- links ----

    /// Creates a link: takes its code (from a pool or as a custom code), writes the record,
    /// the code index, the active mapping and the dedup entry, in one transaction.
    fn create_link(&self, new: &NewLink) -> StoreResult<Created>;

    /// Whether [`Store::submit_create`] queues a pooled create on the store's own committer
    /// and returns at once (so an async caller may call it on the runtime), rather than
    /// running [`Store::create_link`] on the caller's thread.
    fn queues_creates(&self) -> bool {
        false
    }

    /// Creates a link like [`Store::create_link`] and hands the outcome to `done`. The
    /// default runs `create_link` on the caller's thread; see [`Store::queues_creates`].
    fn submit_create(&self, new: NewLink, done: CreateDone) {
        done(self.create_link(&new));
    }

    /// The active mapping's entry for a code: the only read of the redirect path.
    fn resolve(&self, code: &str) -> StoreResult<Option<ActiveEntry>>;

    /// False only when the code has definitely never existed (a Bloom filter answer): the
    /// redirect path then answers 404 without reading any tree.
    fn may_exist(&self, code: &str) -> bool;

    /// Whether [`Store::may_exist`] ever rules a code out. A refill skips the candidates it
    /// rules out; with a store that cannot, every candidate is offered and `pool_add` skips
    /// the taken ones.
    fn filters_codes(&self) -> bool {
        true
    }

    /// The link that currently owns a code, whatever its status (archived links own no code).
    fn link_by_code(&self, code: &str) -> StoreResult<Option<Link>>;

    /// A link by id, archived ones included.
    fn link_by_id(&self, id: u64) -> StoreResult<Option<Link>>;

    /// Applies a patch to an active link and returns it.
    fn update_link(&self, code: &str, patch: &LinkPatch, now: Millis) -> StoreResult<Link>;

    /// Marks a link deleted: out of the active mapping and the dedup index; the record stays.
    fn delete_link(&self, code: &str, now: Millis) -> StoreResult<Link>;

    /// Marks an active link expired (the lifecycle job). Returns `None` if it was not active
    /// or not yet due. Like the other lifecycle writes below, it is atomic but not durable on
    /// return: the job makes a whole chunk durable with one [`Store::sync`].
    fn expire_link(&self, id: u64, now: Millis) -> StoreResult<Option<Link>>;

    /// [`Store::expire_link`] for several links: the ones it expired, in the order given. A
    /// store that can apply them in one transaction does (sled takes its global write lock,
    /// which every read waits behind, once for the group instead of once per link).
    fn expire_links(&self, ids: &[u64], now: Millis) -> StoreResult<Vec<Link>> {
        let mut expired = Vec::with_capacity(ids.len());
        for &id in ids {
            expired.extend(self.expire_link(id, now)?);
        }
        Ok(expired)
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

    /// Writes whole link records as they are (import), in one transaction: each keeps its
    /// code, dates, status and expiry, and its id when free; its code leaves any pool and enters
    /// the code filter; every index its status needs is written. Idempotent: a code already
    /// leading to the same URL is `Unchanged`, one leading elsewhere a `Conflict`, and nothing
    /// is written for either. One result per record, in order. Every non-archived record of a
    /// call has a code of the same length; an archived record comes alone. Atomic but not
    /// durable on return, like the lifecycle writes: the caller ends a run with
    /// [`Store::sync`].
    fn import_links(&self, links: &[Link]) -> StoreResult<Vec<Imported>>;

    /// The active generated link the dedup index holds for this space, length and URL.
    fn dedup_target(&self, space: &str, length: u8, url: &str) -> StoreResult<Option<Link>>;

    /// Link counts by status.
    fn link_counts(&self) -> StoreResult<LinkCounts>;

    // ---- visit caps ----

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

    // ---- leads ----

    /// Writes a lead left through a link's form (its id assigned here, `lead.id` ignored)
    /// and returns it once durable.
    fn add_lead(&self, lead: Lead) -> StoreResult<Lead>;

    /// A link's leads newest first, those with an id below `before`, at most `limit`.
    fn leads(&self, link_id: u64, before: Option<u64>, limit: usize) -> StoreResult<LeadPage>;

    /// How many leads a link has.
    fn lead_count(&self, link_id: u64) -> StoreResult<u64>;

    /// The links that have leads (for the retention job).
    fn lead_links(&self) -> StoreResult<Vec<u64>>;

    /// Deletes a link's leads recorded before `before`, or all of them with `None`; returns
    /// how many. Not durable until [`Store::sync`], like the lifecycle writes.
    fn delete_leads(&self, link_id: u64, before: Option<Millis>) -> StoreResult<u64>;

    /// Writes leads as they are (an import), keeping their ids; a lead already there (same
    /// link, same id) is skipped, so an import runs twice harmlessly. Later leads get ids
    /// above every imported one. Returns how many were written. Not durable until
    /// [`Store::sync`].
    fn import_leads(&self, leads: &[Lead]) -> StoreResult<u64>;

    // ---- reviews ----

    /// Queues a link for review, durably. A link is queued at most once: `false` when it
    /// already waits. One queued again while its review runs is kept for another review
    /// once that one finishes.
    fn queue_review(&self, link_id: u64, trigger: Trigger, at: Millis) -> StoreResult<bool> {
        Ok(self.queue_reviews(&[(link_id, trigger)], at)? == 1)
    }

    /// [`Store::queue_review`] for many links in one durable write (the review's queue writer
    /// gathers what creates and visits told it); returns how many were queued.
    fn queue_reviews(&self, items: &[(u64, Trigger)], at: Millis) -> StoreResult<u64>;

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

    /// The screenshot a review kept.
    fn review_screenshot(&self, review_id: u64) -> StoreResult<Option<Vec<u8>>>;

    /// Ids of the links whose latest verdict is `verdict`, in id order after `after`, at most
    /// `limit` (the next cursor when there are more).
    fn links_by_verdict(
        &self,
        verdict: Verdict,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<(Vec<u64>, Option<u64>)>;

    // ---- pools ----

    /// Adds generated codes to a pool together with the new strategy state, skipping any code
    /// that exists anywhere already.
    fn pool_add(&self, batch: &PoolBatch) -> StoreResult<PoolAdded>;

    /// A pool's levels at `now`.
    fn pool_counts(&self, length: u8, now: Millis) -> StoreResult<PoolCounts>;

    /// Whether fewer than `level` codes of a pool are available at `now` (the low-water check
    /// after every create: a store whose exact counts cost a scan answers this one cheaply).
    fn pool_below(&self, length: u8, now: Millis, level: u64) -> StoreResult<bool> {
        Ok(self.pool_counts(length, now)?.available < level)
    }

    /// Is this code sitting in a pool (available or cooling)?
    fn in_pool(&self, code: &str) -> StoreResult<bool>;

    /// The first `limit` entries of a pool in ZSet order (score, code), without taking them.
    fn pool_peek(&self, length: u8, limit: usize) -> StoreResult<Vec<(Millis, String)>>;

    /// The persisted state of a length's strategy, as last written by `pool_add`.
    fn strategy_state(&self, length: u8) -> StoreResult<Option<Vec<u8>>>;

    // ---- visits ----

    /// Writes a batch of visits and their counters (per link per hour, per link per day by
    /// dimension, distinct visitors, per link totals, system per day) in one transaction,
    /// assigning each visit its id, and returns when it is durable.
    fn record_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()>;

    /// Writes imported visits keeping their ids, like `record_visits` otherwise. Only for a
    /// store that has no visit yet (see [`Store::last_visit_id`]): the ids come from one other
    /// store, so they are unique, and each link's visits must come in increasing id order.
    fn import_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()>;

    /// The highest visit id ever given (0: the store never had a visit).
    fn last_visit_id(&self) -> StoreResult<u64>;

    /// A link's visits with id greater than `after`, oldest first, at most `limit`.
    /// A link's visits newest first, those with an id below `before`.
    fn recent_visits(
        &self,
        link_id: u64,
        before: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage>;

    fn visits_page(&self, link_id: u64, after: Option<u64>, limit: usize)
        -> StoreResult<VisitPage>;

    /// A link's all-time visit counts.
    fn visit_totals(&self, link_id: u64) -> StoreResult<VisitTotals>;

    /// A link's counters for visits at `from..to` (hours; dimensions and distinct visitors
    /// by whole UTC days).
    fn visit_summary(&self, link_id: u64, from: Millis, to: Millis) -> StoreResult<VisitSummary>;

    /// Removes up to `limit` visits recorded before `before`, oldest first; counters stay.
    /// Returns how many were removed. Not durable until [`Store::sync`], like the lifecycle
    /// writes.
    fn prune_visits(&self, before: Millis, limit: usize) -> StoreResult<u64>;

    /// System-wide creates and visits for each UTC day in `from_day..=to_day`.
    fn day_counts(&self, from_day: u64, to_day: u64) -> StoreResult<Vec<DayCount>>;

    /// How the store's own group commit has gone, for metrics. A backend whose server groups
    /// commits itself (PostgreSQL) has none to report.
    fn commit_stats(&self) -> CommitStats {
        CommitStats::default()
    }

    // ---- metadata ----

    /// A value from the metadata tree (generated keys and the like).
    fn meta_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Writes a metadata value durably, unless one is there already; returns the value that is
    /// stored afterwards (so two first starts agree on one generated key).
    fn meta_init(&self, key: &str, value: &[u8]) -> StoreResult<Vec<u8>>;

    // ---- maintenance ----

    /// Persists state that is kept in memory between flushes (the code filter). Called
    /// periodically and at shutdown; a crash before it only costs a rebuild at next start.
    fn checkpoint(&self) -> StoreResult<()>;

    /// Waits until every write made so far is durable (one shared flush).
    fn sync(&self) -> StoreResult<()>;

    /// A cheap read that proves the store answers (for `/healthz`).
    fn ping(&self) -> StoreResult<()>;

    /// The storage fault that stops writes, if any (sled keeps its first I/O error and fails
    /// every later write with it, so a fault lasts until the store is reopened).
    fn write_fault(&self) -> Option<StorageFault> {
        None
    }

    /// Waits until no other process sharing this store runs the job `name`, and holds it off
    /// until the returned lock is dropped (the lifecycle job runs on one instance at a time).
    fn job_lock(&self, _name: &str) -> StoreResult<JobLock> {
        Ok(JobLock::local())
    }

    /// Where short-lived records shared by every instance live, for a store that several
    /// instances share; `None` for one that only this process uses, which then keeps them in
    /// its own memory.
    fn shared_records(&self) -> Option<&dyn SharedRecords> {
        None
    }

    /// Subscribes the caches of this process to changes made by other processes sharing the
    /// store. A store that only this process writes has none to report.
    fn watch(&self, _on_change: ChangeHandler) {}

    /// Checkpoints, flushes and stops accepting writes (shutdown).
    fn close(&self) -> StoreResult<()>;
}
