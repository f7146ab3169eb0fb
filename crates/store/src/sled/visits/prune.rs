//! Pruning visits: whole blocks, oldest first, and the index entries that name them, once the
//! index and the counters have folded them.

use crate::sled::formats::{decode_block, link_key};
use crate::sled::keys::read_u64;
use crate::sled::visit_index::Span;
use crate::sled::{backend, SledStore};
use crate::{Millis, StoreResult};

impl SledStore {
    /// Prunes the visits recorded before `before`, at least `limit` of them if there are as
    /// many ([`crate::VisitStore::prune_visits`]).
    pub(in crate::sled) fn prune_blocks(&self, before: Millis, limit: usize) -> StoreResult<u64> {
        // Whole blocks, oldest first, until `limit` visits (the last block may overshoot, so a
        // call that returns fewer than `limit` has pruned everything due).
        // Only blocks whose index entries are in the tree: a fold first (the job runs once a
        // day; this costs at most the fold the writer would have made within seconds). And
        // only blocks the counters count, so that a crash never leaves held counts whose
        // blocks are gone. Those are the last seconds' blocks, due only under a retention of
        // seconds (or a test's clock): only then are the held counts folded here, since a
        // fold of them all at once holds the visit writer up.
        self.fold_index()?;
        let mut folded = self.index_folded().min(self.counts_folded());
        let mut counts_folded_here = false;
        let mut total = 0u64;
        for item in self.visit_blocks.iter() {
            if total >= limit as u64 {
                break;
            }
            let (key, value) = item.map_err(backend)?;
            let block_id = read_u64(&key).unwrap_or(0);
            let block = match decode_block(&value) {
                Ok(block) => block,
                Err(e) => {
                    // Pruning must not stop at a damaged block forever; `check` names it.
                    tracing::error!(block_id, error = %e, "corrupt visit block: left in place");
                    continue;
                }
            };
            if block.newest >= before {
                break;
            }
            if block_id > folded && !counts_folded_here {
                self.fold_counts()?;
                counts_folded_here = true;
                folded = self.index_folded().min(self.counts_folded());
            }
            if block_id > folded {
                break;
            }
            // Plain removes, like the writes: a crash in between leaves index entries whose
            // block is gone, which the listings skip and the next run removes again.
            let mut links: Vec<u64> = block.rows.iter().map(|r| r.link_id).collect();
            links.sort_unstable();
            links.dedup();
            for link_id in links {
                // Blocks go in order, so the link's entry for this block starts at it; if it
                // names more blocks, it moves to the next of them.
                let key = link_key(link_id, block_id);
                if let Some(value) = self.visit_index.remove(key).map_err(backend)? {
                    if let Some((next, value)) = Span::decode(&key, &value).without_first() {
                        self.visit_index
                            .insert(link_key(link_id, next), value)
                            .map_err(backend)?;
                    }
                }
            }
            self.visit_blocks.remove(key).map_err(backend)?;
            total += block.rows.len() as u64;
        }
        Ok(total)
    }
}
