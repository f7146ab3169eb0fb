//! Visit caps: the redirects counted against a link's cap and its targets' caps, in the
//! `claims` tree (key: link id and slot, big-endian; value: the count, big-endian).
//!
//! A claim reads and raises its slots under one lock, so that two concurrent claims never
//! both take a cap's last redirect, writes them in one atomic batch, and is granted only after
//! the group-committed flush that covers the batch: a redirect is never answered that a crash
//! could un-count. A refusal is answered at once (it wrote nothing).

use crate::model::{CapSlot, ClaimOutcome, VisitClaim};
use crate::store::{ClaimDone, StoreResult};

use super::errors::backend;
use super::SledStore;

/// A claim's slot key: link id, then the slot number.
fn slot_key(link_id: u64, slot: CapSlot) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..8].copy_from_slice(&link_id.to_be_bytes());
    key[8..].copy_from_slice(&slot.stored().to_be_bytes());
    key
}

fn count_of(bytes: &[u8]) -> u64 {
    <[u8; 8]>::try_from(bytes).map_or(0, u64::from_be_bytes)
}

impl SledStore {
    pub(super) fn claim_visit_impl(&self, claim: VisitClaim, done: ClaimDone) {
        match self.claim_in_memory(&claim) {
            Ok(ClaimOutcome::Granted) => self.flusher.when_durable(Box::new(move |flushed| {
                done(flushed.map(|()| ClaimOutcome::Granted));
            })),
            other => done(other),
        }
    }

    /// Checks every slot and raises them all, or none; the batch is in sled's log (not yet
    /// durable) when this returns `Granted`.
    fn claim_in_memory(&self, claim: &VisitClaim) -> StoreResult<ClaimOutcome> {
        self.space.admit(0)?;
        let _committing = self.flusher.committing();
        let _one_at_a_time = self.claim_lock.lock();
        let mut batch = sled::Batch::default();
        for &(slot, cap) in &claim.slots {
            let key = slot_key(claim.link_id, slot);
            let used = self
                .claims
                .get(key)
                .map_err(backend)?
                .map_or(0, |v| count_of(&v));
            if used >= cap {
                return Ok(ClaimOutcome::Full(slot));
            }
            batch.insert(&key[..], &(used + 1).to_be_bytes()[..]);
        }
        self.claims.apply_batch(batch).map_err(backend)?;
        Ok(ClaimOutcome::Granted)
    }

    pub(super) fn counted_impl(&self, link_id: u64) -> StoreResult<Vec<(CapSlot, u64)>> {
        self.claims
            .scan_prefix(link_id.to_be_bytes())
            .map(|entry| {
                let (key, value) = entry.map_err(backend)?;
                let slot = <[u8; 4]>::try_from(&key[8..])
                    .ok()
                    .and_then(|n| CapSlot::of_stored(u32::from_be_bytes(n)));
                Ok(slot.map(|slot| (slot, count_of(&value))))
            })
            .filter_map(Result::transpose)
            .collect()
    }

    pub(super) fn import_counted_impl(
        &self,
        link_id: u64,
        counts: &[(CapSlot, u64)],
    ) -> StoreResult<()> {
        self.space.admit(0)?;
        {
            let _one_at_a_time = self.claim_lock.lock();
            let mut batch = sled::Batch::default();
            for &(slot, count) in counts {
                let key = slot_key(link_id, slot);
                let used = self
                    .claims
                    .get(key)
                    .map_err(backend)?
                    .map_or(0, |v| count_of(&v));
                batch.insert(&key[..], &used.max(count).to_be_bytes()[..]);
            }
            self.claims.apply_batch(batch).map_err(backend)?;
        }
        self.flusher.wait_durable()
    }
}
