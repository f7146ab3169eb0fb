//! The review queue and finished reviews on sled.
//!
//! - `review_queue`: key queued-at then link id (big-endian, so the oldest comes first),
//!   value the trigger; `review_pending`: link id → its queue key, so that a link is queued
//!   once. Leases live in memory: one process uses a sled store, and after a crash every
//!   entry is free again, which is what a lease is for.
//! - `reviews`: key link id then review id → the review; `review_shots`: review id → PNG;
//!   `review_verdicts`: verdict byte then link id → nothing, with `review_latest` (link id →
//!   verdict byte) to move a link between verdicts. Review ids come from a counter raised in
//!   the same transaction.

use std::collections::HashMap;

use sled::transaction::TransactionalTree;
use sled::Transactional;

use super::codec::encode;
use super::errors::{backend, tx_error, TxResult};
use super::keys::{read_u64, u64_key};
use super::SledStore;
use crate::model::{Millis, QueuedReview, Review, Trigger, Verdict};
use crate::{ReviewStore, StoreError, StoreResult};

/// The counter of the last review id given.
const REVIEW_SEQ: &[u8] = b"review_seq";

/// What this process knows of the queue beyond the trees: the links it has leased, until
/// when, and whether they were queued again meanwhile.
#[derive(Default)]
pub(super) struct Leases(HashMap<u64, (Millis, bool)>);

fn pair(a: u64, b: u64) -> [u8; 16] {
    let mut key = [0; 16];
    key[..8].copy_from_slice(&u64_key(a));
    key[8..].copy_from_slice(&u64_key(b));
    key
}

fn verdict_key(verdict: Verdict, link_id: u64) -> [u8; 9] {
    let mut key = [0; 9];
    key[0] = verdict.stored();
    key[1..].copy_from_slice(&u64_key(link_id));
    key
}

fn corrupt(tree: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        tree,
        detail: detail.to_string(),
    }
}

fn decode_review(value: &[u8]) -> StoreResult<Review> {
    rmp_serde::from_slice(value).map_err(|e| corrupt("reviews", e))
}

impl ReviewStore for SledStore {
    fn queue_reviews(&self, items: &[(u64, Trigger)], at: Millis) -> StoreResult<u64> {
        self.space.admit(0)?;
        let fresh: Vec<(u64, Trigger)> = (&self.review_queue, &self.review_pending)
            .transaction(|(queue, pending)| {
                let mut fresh = Vec::new();
                for &(link_id, trigger) in items {
                    let id = u64_key(link_id);
                    if pending.get(id)?.is_some() || fresh.iter().any(|(l, _)| *l == link_id) {
                        continue;
                    }
                    let key = pair(at, link_id);
                    queue.insert(&key[..], &[trigger.stored()][..])?;
                    pending.insert(&id[..], &key[..])?;
                    fresh.push((link_id, trigger));
                }
                TxResult::Ok(fresh)
            })
            .map_err(|e| tx_error(e, ""))?;
        if !fresh.is_empty() {
            self.flusher.wait_durable()?;
        }
        // Those already waiting: under review now, they are reviewed again once it finishes.
        let mut queued = fresh.len() as u64;
        let mut leases = self.review_leases.lock();
        for &(link_id, _) in items {
            if fresh.iter().any(|(l, _)| *l == link_id) {
                continue;
            }
            if let Some(lease) = leases.0.get_mut(&link_id) {
                if !lease.1 {
                    lease.1 = true;
                    queued += 1;
                }
            }
        }
        Ok(queued)
    }

    fn take_review(&self, now: Millis, lease: Millis) -> StoreResult<Option<QueuedReview>> {
        let mut leases = self.review_leases.lock();
        for item in self.review_queue.iter() {
            let (key, value) = item.map_err(backend)?;
            let (Some(at), Some(link_id)) = (read_u64(&key), key.get(8..).and_then(read_u64))
            else {
                return Err(corrupt("review_queue", "malformed key"));
            };
            if leases
                .0
                .get(&link_id)
                .is_some_and(|(until, _)| *until > now)
            {
                continue;
            }
            let trigger = value
                .first()
                .and_then(|n| Trigger::of_stored(*n))
                .ok_or_else(|| corrupt("review_queue", "unknown trigger"))?;
            leases.0.insert(link_id, (now.saturating_add(lease), false));
            return Ok(Some(QueuedReview {
                link_id,
                trigger,
                at,
            }));
        }
        Ok(None)
    }

    fn renew_review(&self, link_id: u64, until: Millis) -> StoreResult<()> {
        if let Some(lease) = self.review_leases.lock().0.get_mut(&link_id) {
            lease.0 = lease.0.max(until);
        }
        Ok(())
    }

    fn review_queue_depth(&self) -> StoreResult<u64> {
        Ok(self.review_pending.len() as u64)
    }

    fn add_review(&self, mut review: Review, screenshot: Option<&[u8]>) -> StoreResult<Review> {
        self.space.admit(screenshot.map_or(0, |s| s.len() as u64))?;
        let link_id = review.link_id;
        let requeued = self
            .review_leases
            .lock()
            .0
            .get(&link_id)
            .is_some_and(|(_, again)| *again);
        let trees = (
            &self.reviews,
            &self.review_shots,
            &self.review_verdicts,
            &self.review_latest,
            &self.review_queue,
            &self.review_pending,
            &self.counters,
        );
        let id = trees
            .transaction(
                |(reviews, shots, verdicts, latest, queue, pending, counters)| {
                    let last = counters
                        .get(REVIEW_SEQ)?
                        .and_then(|v| read_u64(&v))
                        .unwrap_or(0);
                    let id = last + 1;
                    counters.insert(REVIEW_SEQ, &u64_key(id)[..])?;
                    let mut stored = review.clone();
                    stored.id = id;
                    stored.screenshot = screenshot.is_some();
                    reviews.insert(&pair(link_id, id)[..], encode(&stored))?;
                    if let Some(png) = screenshot {
                        shots.insert(&u64_key(id)[..], png)?;
                    }
                    move_verdict(verdicts, latest, link_id, review.verdict)?;
                    if !requeued {
                        if let Some(key) = pending.remove(&u64_key(link_id)[..])? {
                            queue.remove(key)?;
                        }
                    }
                    TxResult::Ok(id)
                },
            )
            .map_err(|e| tx_error(e, ""))?;
        self.review_leases.lock().0.remove(&link_id);
        self.flusher.wait_durable()?;
        review.id = id;
        review.screenshot = screenshot.is_some();
        Ok(review)
    }

    fn reviews(&self, link_id: u64, limit: usize) -> StoreResult<Vec<Review>> {
        self.reviews
            .range(pair(link_id, 0)..=pair(link_id, u64::MAX))
            .rev()
            .take(limit)
            .map(|item| {
                let (_, value) = item.map_err(backend)?;
                decode_review(&value)
            })
            .collect()
    }

    fn review_screenshot(&self, link_id: u64, review_id: u64) -> StoreResult<Option<Vec<u8>>> {
        // Screenshots are keyed by review alone: the review's own key names its link.
        if !self
            .reviews
            .contains_key(pair(link_id, review_id))
            .map_err(backend)?
        {
            return Ok(None);
        }
        Ok(self
            .review_shots
            .get(u64_key(review_id))
            .map_err(backend)?
            .map(|v| v.to_vec()))
    }

    fn links_by_verdict(
        &self,
        verdict: Verdict,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<(Vec<u64>, Option<u64>)> {
        let start = verdict_key(verdict, after.map_or(0, |a| a.saturating_add(1)));
        let end = verdict_key(verdict, u64::MAX);
        let mut ids = Vec::new();
        let mut range = self.review_verdicts.range(start..=end);
        for item in range.by_ref().take(limit) {
            let (key, _) = item.map_err(backend)?;
            ids.push(key.get(1..).and_then(read_u64).unwrap_or(0));
        }
        let next = if range.next().is_some() {
            ids.last().copied()
        } else {
            None
        };
        Ok((ids, next))
    }
}

/// Files a link under its latest verdict (and out of the one before).
fn move_verdict(
    verdicts: &TransactionalTree,
    latest: &TransactionalTree,
    link_id: u64,
    verdict: Verdict,
) -> TxResult<()> {
    let id = u64_key(link_id);
    if let Some(before) = latest
        .get(id)?
        .and_then(|v| v.first().copied())
        .and_then(Verdict::of_stored)
    {
        verdicts.remove(&verdict_key(before, link_id)[..])?;
    }
    verdicts.insert(&verdict_key(verdict, link_id)[..], &[][..])?;
    latest.insert(&id[..], &[verdict.stored()][..])?;
    Ok(())
}
