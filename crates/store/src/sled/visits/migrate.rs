//! Moving the visit records of the layout before blocks (a `visits` tree, one record per link
//! per batch, and a `visit_log`) into blocks when the store opens.

use super::read_pair;
use crate::sled::formats::{corrupt, link_key};
use crate::sled::keys::{counter, read_u64};
use crate::sled::{backend, SledStore};
use crate::{StoreResult, Visit};

impl SledStore {
    /// Turns the visit records of the layout before blocks (`visits`: link id, first id →
    /// the link's visits of one batch; `visit_log`: first id, link id → newest, count) into
    /// blocks, oldest first, one block (or a few) per old record. Counters are unchanged: they were
    /// always stored apart. Idempotent: a crash midway leaves the old records not yet moved,
    /// and the next open moves them.
    pub(in crate::sled) fn migrate_visit_chunks(
        &self,
        old_visits: &sled::Tree,
        old_log: &sled::Tree,
    ) -> StoreResult<u64> {
        if old_visits.is_empty() && old_log.is_empty() {
            return Ok(0);
        }
        // The moved visits were counted when they were recorded: the fold point moves past
        // each block with it (after whatever is held is written).
        self.fold_counts()?;
        let mut moved = 0u64;
        let mut block_id = self.counter(counter::VISIT_BLOCK_ID)?;
        for item in old_log.iter() {
            let (log_key, value) = item.map_err(backend)?;
            let first_id = read_u64(&log_key).unwrap_or(0);
            let (link_id, _) = read_pair(&value);
            let chunk_key = link_key(link_id, first_id);
            if let Some(bytes) = old_visits.get(chunk_key).map_err(backend)? {
                let chunk: Vec<Visit> =
                    rmp_serde::from_slice(&bytes).map_err(|e| corrupt("visits", e))?;
                let (last, spans) = self.write_blocks(block_id + 1, chunk.iter().collect())?;
                self.index_blocks(&spans)?;
                block_id = last;
                self.note_migrated(block_id)?;
                old_visits.remove(chunk_key).map_err(backend)?;
                moved += chunk.len() as u64;
            }
            old_log.remove(log_key).map_err(backend)?;
        }
        // Records the log did not name (none when the trees agree) are moved too.
        for item in old_visits.iter() {
            let (key, bytes) = item.map_err(backend)?;
            let chunk: Vec<Visit> =
                rmp_serde::from_slice(&bytes).map_err(|e| corrupt("visits", e))?;
            let (last, spans) = self.write_blocks(block_id + 1, chunk.iter().collect())?;
            self.index_blocks(&spans)?;
            block_id = last;
            self.note_migrated(block_id)?;
            old_visits.remove(key).map_err(backend)?;
            moved += chunk.len() as u64;
        }
        self.fold_index()?;
        self.db.flush().map_err(backend)?;
        Ok(moved)
    }

    /// A migrated block is written: the last block id and the count fold point move past it
    /// together.
    fn note_migrated(&self, block_id: u64) -> StoreResult<()> {
        let mut batch = sled::Batch::default();
        batch.insert(counter::VISIT_BLOCK_ID, &block_id.to_be_bytes()[..]);
        self.mark_counted(block_id, batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sled::encode;
    use crate::sled::formats::tests::visit;

    /// A store written before blocks (a `visits` record per link and batch, and `visit_log`)
    /// is moved into blocks when it opens, and lists the same visits.
    #[test]
    fn visit_records_of_the_older_layout_move_into_blocks() {
        use crate::prelude::*;
        let dir = tempfile::tempdir().expect("temp dir");
        let options = crate::sled::StoreOptions::new(dir.path());
        {
            let store = SledStore::open(&options).expect("open");
            let old_visits = store.db.open_tree("visits").expect("tree");
            let old_log = store.db.open_tree("visit_log").expect("tree");
            // Link 3 got visits 1, 2 and 4 in two batches; link 5 got visit 3.
            for (link, ids) in [(3u64, vec![1u64, 2]), (5, vec![3]), (3, vec![4])] {
                let chunk: Vec<Visit> =
                    ids.iter().map(|&i| visit(i, link, 100 + i, "ua")).collect();
                old_visits
                    .insert(link_key(link, ids[0]), encode(&chunk))
                    .expect("insert");
                let mut entry = [0u8; 24];
                entry[..8].copy_from_slice(&link.to_be_bytes());
                old_log
                    .insert(link_key(ids[0], link), &entry[..])
                    .expect("insert");
            }
            store.close().expect("close");
        }
        let store = SledStore::open(&options).expect("reopen");
        let ids = |link| -> Vec<u64> {
            store
                .visits_page(link, None, 10)
                .expect("page")
                .items
                .iter()
                .map(|v| v.id)
                .collect()
        };
        assert_eq!(ids(3), vec![1, 2, 4]);
        assert_eq!(ids(5), vec![3]);
        let recent: Vec<u64> = store
            .recent_visits(3, None, 2)
            .expect("recent")
            .items
            .iter()
            .map(|v| v.id)
            .collect();
        assert_eq!(recent, vec![4, 2]);
        assert!(store.db.open_tree("visits").expect("tree").is_empty());
    }
}
