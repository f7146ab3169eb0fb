//! The review of destinations (design 003's 审核): a persisted queue of links to review, the
//! workers that drain it, and what a verdict does to a link.
//!
//! - **When.** A link is queued when it is created, when its URL or a rule's or target's URL
//!   changes (both told by the link service through [`Reviews::hook`]), when its visits reach
//!   a power of two from 16 on (told by the visit writer after each batch, with each link's
//!   total kept in a bounded cache), and on request. Telling never waits: the queue write
//!   happens on this service's own task, so redirects and creates pay a channel send.
//! - **The queue** is a store tree ordered by time (a table drained with `FOR UPDATE SKIP
//!   LOCKED` on PostgreSQL), one entry per link, leased while reviewed: it survives restarts,
//!   and a review that dies with its process is taken again when its lease ends.
//! - **Workers** (`review.concurrency`) take a link, run the [`checks`] and keep the review;
//!   its verdict becomes the link's (`Link::review`), which the redirect reads with the link:
//!   a `blocked` link stops at once on every instance (the cache is invalidated here; other
//!   instances hear of the change as of any other).
//! - **Overrides** by an admin are reviews too (trigger `override`, the key's name kept).

#[cfg(feature = "review")]
pub mod checks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::{mpsc, Notify};

#[cfg(feature = "review")]
use self::checks::Checker;

/// Without the `review` feature there are no checks: `review.enabled` is refused when the
/// configuration is read, so no checker is ever made.
#[cfg(not(feature = "review"))]
pub enum Checker {}
use crate::clock::Clock;
use crate::config::ReviewConfig;
use crate::links::{LinkError, Links};
use crate::model::review::visits_cross_trigger;
use crate::model::NewVisit;
use crate::model::StoreError;
use crate::model::{Link, LinkPatch, LinkStatus, Millis, Review, ReviewMark, Trigger, Verdict};
use crate::store::Store;

/// A taken review's lease: renewed every [`RENEW_EVERY`] while it runs, so that the link is
/// free again this soon after its worker (or its whole instance) dies.
const LEASE_MS: Millis = 15_000;
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// A whole review, every check included, at most (the checks have their own, shorter limits).
#[cfg(feature = "review")]
const REVIEW_TIMEOUT: Duration = Duration::from_secs(90);
/// Triggers waiting for the queue writer; past it a trigger is dropped (and logged).
const TRIGGERS: usize = 4096;
/// Reviews listed for one link at most.
pub const MAX_LISTED: usize = 100;
/// A link's newest reviews searched for its latest checked one when the latest is an
/// override (overrides rarely follow each other: this bounds a listing's reads).
const FINDINGS_LOOKBACK: usize = 16;
/// Ids of the verdict index read at a time for a caller limited to some spaces.
const SCAN_CHUNK: usize = 256;
/// Ids of the verdict index one listing looks at, at most, for a caller limited to some spaces
/// (its page may then end short, with a cursor).
pub const SCAN_BUDGET: usize = 10_000;

/// A label of the reviews counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct VerdictLabel {
    pub verdict: &'static str,
}

/// The review service.
pub struct Reviews {
    store: Arc<dyn Store>,
    links: Arc<Links>,
    clock: Arc<dyn Clock>,
    config: ReviewConfig,
    checker: Option<Checker>,
    triggers: mpsc::Sender<(u64, Trigger)>,
    wake: Notify,
    /// Each link's visit total as last seen, for the power-of-two trigger; as many links as
    /// the small caches' share of `memory.budget` allows ([`crate::memory`]).
    totals: quick_cache::sync::Cache<u64, u64>,
    stopping: AtomicBool,
    /// Reviews finished, by verdict.
    pub finished: Family<VerdictLabel, Counter>,
    told: std::sync::OnceLock<VerdictHook>,
}

/// Told of every review kept, with its link's code and domain id; must not block.
pub type VerdictHook = Arc<dyn Fn(&Review, Option<(&str, u16)>) + Send + Sync>;

impl Reviews {
    /// The service, and the receiver of its triggers for [`Reviews::start`]. Without
    /// `review.enabled` it queues and checks nothing (overrides and listings still work).
    pub fn new(
        store: Arc<dyn Store>,
        links: Arc<Links>,
        clock: Arc<dyn Clock>,
        config: &ReviewConfig,
        checker: Option<Checker>,
        totals: usize,
    ) -> (Arc<Self>, mpsc::Receiver<(u64, Trigger)>) {
        let (triggers, received) = mpsc::channel(TRIGGERS);
        let finished = Family::<VerdictLabel, Counter>::default();
        for verdict in Verdict::ALL {
            drop(finished.get_or_create(&VerdictLabel {
                verdict: verdict.as_str(),
            }));
        }
        let reviews = Arc::new(Self {
            store,
            links,
            clock,
            config: config.clone(),
            checker,
            triggers,
            wake: Notify::new(),
            totals: quick_cache::sync::Cache::new(totals.max(1)),
            stopping: AtomicBool::new(false),
            finished,
            told: std::sync::OnceLock::new(),
        });
        (reviews, received)
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Tells the service that a link wants a review; never waits (dropped, and logged, when
    /// the queue writer is this far behind).
    pub fn tell(&self, link_id: u64, trigger: Trigger) {
        if !self.enabled() {
            return;
        }
        if self.triggers.try_send((link_id, trigger)).is_err() {
            tracing::warn!(
                link_id,
                trigger = trigger.as_str(),
                "review trigger dropped: the queue writer is behind"
            );
        }
    }

    /// What the link service calls after a create or a change of destinations.
    pub fn hook(self: &Arc<Self>) -> Arc<dyn Fn(u64, Trigger) + Send + Sync> {
        let reviews = self.clone();
        Arc::new(move |id, trigger| reviews.tell(id, trigger))
    }

    /// What the visit writer calls after each batch: queues the links whose totals passed a
    /// power of two from 16 on.
    pub fn visits_written(&self, visits: &[NewVisit]) {
        if !self.enabled() {
            return;
        }
        let mut per_link: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
        for v in visits {
            *per_link.entry(v.visit.link_id).or_default() += 1;
        }
        for (link_id, n) in per_link {
            let before = match self.totals.get(&link_id) {
                Some(total) => total,
                // Once per link while it stays in the cache: its total as stored, which
                // already holds this batch.
                None => match self.store.visit_totals(link_id) {
                    Ok(totals) => totals.visits.saturating_sub(n),
                    Err(_) => continue,
                },
            };
            let after = before.saturating_add(n);
            self.totals.insert(link_id, after);
            if visits_cross_trigger(before, after) {
                self.tell(link_id, Trigger::Visits);
            }
        }
    }

    /// Starts the queue writer and, with `review.enabled`, the workers.
    pub fn start(self: &Arc<Self>, mut received: mpsc::Receiver<(u64, Trigger)>) {
        if !self.enabled() {
            return;
        }
        let writer = self.clone();
        tokio::spawn(async move {
            // Everything told while the last write ran goes in the next one: one transaction
            // and one flush for a whole storm of creates, not one flush each.
            let mut batch = Vec::with_capacity(TRIGGERS);
            while received.recv_many(&mut batch, TRIGGERS).await > 0 {
                let service = writer.clone();
                let items = std::mem::take(&mut batch);
                let queued = tokio::task::spawn_blocking(move || {
                    service.store.queue_reviews(&items, service.clock.now())
                })
                .await;
                match queued {
                    Ok(Ok(_)) => writer.wake.notify_waiters(),
                    Ok(Err(e)) => tracing::warn!(error = %e, "could not queue reviews"),
                    Err(e) => tracing::warn!(error = %e, "the review queue writer failed"),
                }
            }
        });
        for _ in 0..self.config.concurrency {
            let worker = self.clone();
            tokio::spawn(async move { worker.work().await });
        }
    }

    /// Asks the workers to stop after their current review.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.wake.notify_waiters();
    }

    /// One worker: takes the oldest free link, reviews it, again; sleeps when none waits.
    async fn work(self: Arc<Self>) {
        while !self.stopping.load(Ordering::Acquire) {
            let service = self.clone();
            let taken = tokio::task::spawn_blocking(move || {
                service.store.take_review(service.clock.now(), LEASE_MS)
            })
            .await;
            match taken {
                Ok(Ok(Some(queued))) => {
                    let (link_id, trigger) = (queued.link_id, queued.trigger);
                    let review = self.review(link_id, trigger);
                    tokio::pin!(review);
                    let mut renew = tokio::time::interval(RENEW_EVERY);
                    renew.tick().await;
                    let done = loop {
                        tokio::select! {
                            done = &mut review => break done,
                            _ = renew.tick() => {
                                let service = self.clone();
                                let _ = tokio::task::spawn_blocking(move || {
                                    let until = service.clock.now().saturating_add(LEASE_MS);
                                    service.store.renew_review(link_id, until)
                                })
                                .await;
                            }
                        }
                    };
                    if let Err(e) = done {
                        tracing::warn!(link_id, error = %e, "review failed");
                    }
                }
                Ok(Ok(None)) => {
                    // Woken by a new entry, or look again (another instance's entries, ended
                    // leases) after a while.
                    let _ =
                        tokio::time::timeout(Duration::from_secs(2), self.wake.notified()).await;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not take a review");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                Err(_) => tokio::time::sleep(Duration::from_secs(5)).await,
            }
        }
    }

    /// Reviews one link now and keeps the outcome; its verdict becomes the link's.
    pub async fn review(&self, link_id: u64, trigger: Trigger) -> Result<Review, StoreError> {
        let link = {
            let store = self.store.clone();
            tokio::task::spawn_blocking(move || store.link_by_id(link_id))
                .await
                .map_err(|e| StoreError::Backend(e.to_string()))??
        };
        let now = self.clock.now();
        let mut review = Review {
            id: 0,
            link_id,
            at: now,
            trigger,
            checks: Vec::new(),
            score: None,
            reason: None,
            verdict: Verdict::Unscored,
            final_url: None,
            title: None,
            description: None,
            screenshot: false,
            by: None,
        };
        #[cfg_attr(not(feature = "review"), allow(unused_mut))]
        let mut screenshot = None;
        match (&link, &self.checker) {
            #[cfg(feature = "review")]
            (Some(link), Some(checker)) if link.status != LinkStatus::Archived => {
                let urls = destinations(link);
                match tokio::time::timeout(REVIEW_TIMEOUT, checker.check(&urls)).await {
                    Ok(outcome) => {
                        review.checks = outcome.checks;
                        review.score = outcome.score;
                        review.reason = outcome.reason;
                        review.verdict = outcome.verdict.unwrap_or(Verdict::Unscored);
                        review.final_url = outcome.final_url;
                        review.title = outcome.title;
                        review.description = outcome.description;
                        screenshot = outcome.screenshot;
                    }
                    Err(_) => review.checks.push(crate::model::CheckRecord {
                        check: "review".into(),
                        outcome: "failed".into(),
                        detail: format!("the checks took over {} s", REVIEW_TIMEOUT.as_secs()),
                    }),
                }
            }
            _ => review.checks.push(crate::model::CheckRecord {
                check: "review".into(),
                outcome: "skipped".into(),
                detail: "the link is gone".into(),
            }),
        }
        self.keep(review, screenshot, link).await
    }

    /// An admin's verdict, kept as a review with the key's name.
    pub async fn decide(
        &self,
        link: Link,
        verdict: Verdict,
        by: &str,
    ) -> Result<Review, StoreError> {
        let review = Review {
            id: 0,
            link_id: link.id,
            at: self.clock.now(),
            trigger: Trigger::Override,
            checks: Vec::new(),
            score: None,
            // Who decided is `by`; the pages and the API say it in the reader's words.
            reason: None,
            verdict,
            final_url: None,
            title: None,
            description: None,
            screenshot: false,
            by: Some(by.to_string()),
        };
        self.keep(review, None, Some(link)).await
    }

    /// Queues a link now (`POST …/review` with no body), durably. `false`: it already waits.
    pub fn request(&self, link_id: u64) -> Result<bool, StoreError> {
        let queued = self
            .store
            .queue_review(link_id, Trigger::Requested, self.clock.now())?;
        self.wake.notify_waiters();
        Ok(queued)
    }

    /// Stores the review, then makes its verdict the link's (an active link only: an ended
    /// one redirects no one anyway) and forgets the link's cached entry.
    async fn keep(
        &self,
        review: Review,
        screenshot: Option<Vec<u8>>,
        link: Option<Link>,
    ) -> Result<Review, StoreError> {
        let store = self.store.clone();
        let links = self.links.clone();
        let named = link.as_ref().map(|l| (l.code.clone(), l.domain));
        let kept = tokio::task::spawn_blocking(move || {
            let kept = store.add_review(review, screenshot.as_deref())?;
            if let Some(link) = link.filter(|l| l.status == LinkStatus::Active) {
                let patch = LinkPatch {
                    review: Some(Some(ReviewMark {
                        verdict: kept.verdict,
                        score: kept.score,
                        reason: kept.reason.clone(),
                        at: kept.at,
                    })),
                    ..LinkPatch::default()
                };
                // By its key: the same code on another domain is another link.
                let key = link.key();
                match store.update_link(&key, &patch, kept.at) {
                    Ok(_) | Err(StoreError::WrongStatus(_)) | Err(StoreError::NotFound) => {}
                    Err(e) => return Err(e),
                }
                links.invalidate(&key);
            }
            Ok(kept)
        })
        .await
        .map_err(|e| StoreError::Backend(e.to_string()))??;
        self.finished
            .get_or_create(&VerdictLabel {
                verdict: kept.verdict.as_str(),
            })
            .inc();
        if let Some(tell) = self.told.get() {
            tell(
                &kept,
                named
                    .as_ref()
                    .map(|(code, domain)| (code.as_str(), *domain)),
            );
        }
        Ok(kept)
    }

    /// Tells `hook` of every review kept from now on (once).
    pub fn on_verdict(&self, hook: VerdictHook) {
        let _ = self.told.set(hook);
    }

    /// A link's reviews, newest first.
    pub fn list(&self, link_id: u64) -> Result<Vec<Review>, StoreError> {
        self.store.reviews(link_id, MAX_LISTED)
    }

    /// Links by their latest verdict, in id order after `after`, only those of `spaces`
    /// (`None`: every space), with the cursor after the last link looked at when more may
    /// follow.
    ///
    /// The store's index knows verdicts, not spaces, so the space is checked here on each
    /// link read: ids are read in chunks until `limit` links of the caller's spaces are found
    /// or the index ends, so that a page is full whenever enough links are left. A caller whose
    /// spaces hold few of the listed links could make one request read the whole index: past
    /// [`SCAN_BUDGET`] ids looked at, the page ends short, with its cursor.
    pub fn by_verdict(
        &self,
        verdict: Verdict,
        after: Option<u64>,
        limit: usize,
        spaces: Option<&[String]>,
    ) -> Result<(Vec<Link>, Option<u64>), LinkError> {
        let limit = limit.max(1);
        let mut out = Vec::with_capacity(limit.min(MAX_LISTED));
        let mut cursor = after;
        let mut looked = 0usize;
        loop {
            // Every id of an unrestricted page is taken; a restricted one reads ahead.
            let chunk = match spaces {
                None => limit - out.len(),
                Some(_) => (limit - out.len()).max(SCAN_CHUNK),
            };
            let (ids, more) = self.store.links_by_verdict(verdict, cursor, chunk)?;
            let count = ids.len();
            for (i, id) in ids.into_iter().enumerate() {
                cursor = Some(id);
                looked += 1;
                let Some(link) = self.store.link_by_id(id)? else {
                    continue;
                };
                if spaces.is_some_and(|s| !s.contains(&link.space)) {
                    continue;
                }
                out.push(link);
                if out.len() == limit {
                    // Ids after this one, in this chunk or the store's next, are still to see.
                    let rest = i + 1 < count || more.is_some();
                    return Ok((out, if rest { cursor } else { None }));
                }
            }
            match more {
                None => return Ok((out, None)),
                Some(_) if looked >= SCAN_BUDGET => return Ok((out, cursor)),
                Some(_) => {}
            }
        }
    }

    /// A link's latest review, and its latest checked one: the same unless the latest is an
    /// admin's override, which checks nothing (no title, description, final URL, checks or
    /// screenshot); then the newest review behind it that ran the checks, among the last
    /// `FINDINGS_LOOKBACK`. The listings show the verdict of the first and what the second
    /// found, so that a link an admin blocked still shows what it was blocked for.
    pub fn latest_and_checked(
        &self,
        link_id: u64,
    ) -> Result<(Option<Review>, Option<Review>), StoreError> {
        let latest = self.store.reviews(link_id, 1)?.into_iter().next();
        let checked = match &latest {
            Some(review) if review.trigger == Trigger::Override => self
                .store
                .reviews(link_id, FINDINGS_LOOKBACK)?
                .into_iter()
                .find(|r| r.trigger != Trigger::Override),
            other => other.clone(),
        };
        Ok((latest, checked))
    }

    /// The screenshot review `review_id` of link `link_id` kept; `None` for another link's
    /// review, so that a caller's right to the link is its right to the screenshot.
    pub fn screenshot(&self, link_id: u64, review_id: u64) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.review_screenshot(link_id, review_id)
    }

    /// Links waiting, for `/metrics`.
    pub fn queue_depth(&self) -> u64 {
        self.store.review_queue_depth().unwrap_or(0)
    }
}

/// A link's destinations: its URL, then its rules' and targets' URLs.
pub fn destinations(link: &Link) -> Vec<String> {
    let mut urls = vec![link.url.clone()];
    if let Some(options) = &link.options {
        for url in options
            .rules
            .iter()
            .map(|r| &r.url)
            .chain(options.targets.iter().map(|t| &t.url))
        {
            if !urls.contains(url) {
                urls.push(url.clone());
            }
        }
    }
    urls
}
