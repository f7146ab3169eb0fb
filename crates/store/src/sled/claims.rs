//! Visit caps: the redirects counted against a link's cap and its targets' caps.
//!
//! The counts live in memory ([`ClaimBook`]) and in two places on disk: the `claims` tree
//! (key: link id and slot; value: the count; all big-endian), written at each checkpoint, and
//! the journal `claims.journal` beside the tree, to which each claim appends its new counts
//! (20 bytes a slot) with one `write` before it is granted. In `process` durability that is
//! durable as it returns (the operating system holds the bytes; a killed process loses
//! nothing), so a capped redirect costs a write call, not a flush of the whole store; in
//! `power` durability the grant waits for the group-committed flush, which fsyncs the journal
//! too. A checkpoint folds the journal into the tree, flushes, then empties the journal;
//! opening replays whatever the journal still holds. Records carry absolute counts, so a
//! replay of records already folded changes nothing.
//!
//! A claim reads and raises its slots under the book's lock, so that two concurrent claims
//! never both take a cap's last redirect. A refusal is answered at once (it wrote nothing).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use crate::model::{CapSlot, ClaimOutcome, VisitClaim};
use crate::{CapStore, ClaimDone, Durability, StoreError, StoreResult};

use super::errors::{backend, failed};
use super::SledStore;

/// The journal's file name, in the data directory.
pub(super) const JOURNAL: &str = "claims.journal";
/// One journal record: link id (8), slot (4), count (8).
const RECORD: usize = 20;

/// Every count, and the journal that makes new ones durable.
pub(super) struct ClaimBook {
    /// By link and slot, in order: a link's counts are one range.
    counts: BTreeMap<(u64, u32), u64>,
    /// Counts changed since the last fold into the tree.
    dirty: Vec<(u64, u32)>,
    journal: File,
}

impl ClaimBook {
    /// The book of a store: the tree's counts, raised by what the journal holds.
    pub(super) fn open(tree: &sled::Tree, dir: &Path) -> StoreResult<ClaimBook> {
        let mut counts = BTreeMap::new();
        for entry in tree.iter() {
            let (key, value) = entry.map_err(backend)?;
            if let Some(k) = parse_key(&key) {
                counts.insert(k, count_of(&value));
            }
        }
        let path = dir.join(JOURNAL);
        let mut journal = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::Backend(format!("cannot open {}: {e}", path.display())))?;
        let mut bytes = Vec::new();
        journal
            .read_to_end(&mut bytes)
            .map_err(|e| StoreError::Backend(format!("cannot read {}: {e}", path.display())))?;
        let mut dirty = Vec::new();
        // A record cut short by a crash was never granted: it is left out.
        for record in bytes.chunks_exact(RECORD) {
            let (key, count) = decode(record);
            let slot = counts.entry(key).or_insert(0);
            if count > *slot {
                *slot = count;
                dirty.push(key);
            }
        }
        Ok(ClaimBook {
            counts,
            dirty,
            journal,
        })
    }
}

fn parse_key(key: &[u8]) -> Option<(u64, u32)> {
    let id = u64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    let slot = u32::from_be_bytes(key.get(8..12)?.try_into().ok()?);
    Some((id, slot))
}

fn tree_key((id, slot): (u64, u32)) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..8].copy_from_slice(&id.to_be_bytes());
    key[8..].copy_from_slice(&slot.to_be_bytes());
    key
}

fn encode(out: &mut Vec<u8>, (id, slot): (u64, u32), count: u64) {
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&slot.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
}

fn decode(record: &[u8]) -> ((u64, u32), u64) {
    let n = |range: std::ops::Range<usize>| record.get(range).unwrap_or_default();
    let id = u64::from_be_bytes(n(0..8).try_into().unwrap_or_default());
    let slot = u32::from_be_bytes(n(8..12).try_into().unwrap_or_default());
    let count = u64::from_be_bytes(n(12..20).try_into().unwrap_or_default());
    ((id, slot), count)
}

fn count_of(bytes: &[u8]) -> u64 {
    <[u8; 8]>::try_from(bytes).map_or(0, u64::from_be_bytes)
}

impl CapStore for SledStore {
    fn claim_visit(&self, claim: VisitClaim, done: ClaimDone) {
        match self.claim_in_book(&claim) {
            Ok(ClaimOutcome::Granted) if self.durability == Durability::Power => {
                self.flusher.when_durable(Box::new(move |flushed| {
                    done(flushed.map(|()| ClaimOutcome::Granted));
                }));
            }
            other => done(other),
        }
    }

    fn counted(&self, link_id: u64) -> StoreResult<Vec<(CapSlot, u64)>> {
        let book = self.claim_book.lock();
        Ok(book
            .counts
            .range((link_id, 0)..=(link_id, u32::MAX))
            .filter_map(|(&(_, slot), &n)| Some((CapSlot::of_stored(slot)?, n)))
            .collect())
    }

    fn import_counted(&self, link_id: u64, counts: &[(CapSlot, u64)]) -> StoreResult<()> {
        self.space.admit(0)?;
        {
            let mut book = self.claim_book.lock();
            let mut record = Vec::new();
            for &(slot, count) in counts {
                let key = (link_id, slot.stored());
                let used = book.counts.get(&key).copied().unwrap_or(0);
                if count > used {
                    encode(&mut record, key, count);
                    book.counts.insert(key, count);
                    book.dirty.push(key);
                }
            }
            book.journal
                .write_all(&record)
                .map_err(|e| failed("cannot write the claims journal", e))?;
        }
        self.flusher.wait_durable()
    }
}

impl SledStore {
    /// Checks every slot and raises them all, or none; the new counts are in the journal
    /// when this returns `Granted`.
    fn claim_in_book(&self, claim: &VisitClaim) -> StoreResult<ClaimOutcome> {
        self.space.admit(0)?;
        let mut book = self.claim_book.lock();
        let mut record = Vec::with_capacity(RECORD * claim.slots.len());
        for &(slot, cap) in &claim.slots {
            let key = (claim.link_id, slot.stored());
            let used = book.counts.get(&key).copied().unwrap_or(0);
            if used >= cap {
                return Ok(ClaimOutcome::Full(slot));
            }
            encode(&mut record, key, used + 1);
        }
        book.journal
            .write_all(&record)
            .map_err(|e| failed("cannot write the claims journal", e))?;
        for &(slot, _) in &claim.slots {
            let key = (claim.link_id, slot.stored());
            *book.counts.entry(key).or_insert(0) += 1;
            book.dirty.push(key);
        }
        Ok(ClaimOutcome::Granted)
    }

    /// Writes the counts changed since the last fold into the tree, makes them durable, then
    /// empties the journal (the checkpoint and the close call this).
    pub(super) fn fold_claims(&self) -> StoreResult<()> {
        let mut book = self.claim_book.lock();
        if book.dirty.is_empty() {
            return Ok(());
        }
        let mut batch = sled::Batch::default();
        let dirty = std::mem::take(&mut book.dirty);
        for key in dirty {
            let count = book.counts.get(&key).copied().unwrap_or(0);
            batch.insert(&tree_key(key)[..], &count.to_be_bytes()[..]);
        }
        self.claims.apply_batch(batch).map_err(backend)?;
        self.flusher.wait_durable()?;
        book.journal
            .set_len(0)
            .map_err(|e| failed("cannot empty the claims journal", e))
    }
}
