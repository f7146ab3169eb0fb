//! The code pools in sled: `pool/<L>` (a sorted set by score), where each pooled code sits
//! ([`Members`], in memory), their size counters, the in-memory count of cooling codes, and
//! the strategies' saved states in `meta`. Adding codes and reading the head live here; taking
//! a head is part of a create (`links.rs`, `group.rs`). `PoolStore` is implemented here, and
//! `MetaStore` (the `meta` tree the states are kept in).

use std::collections::HashMap;

use parking_lot::MutexGuard;
use rand::RngExt;
use sled::transaction::{abort, TransactionError, TransactionalTree};
use sled::Transactional;

use super::codec::bump;
use super::errors::{backend, tx_error, Abort, TxResult};
use super::keys::{self, counter};
use super::{SledStore, MAX_LEN, POOL_ADD_CHUNK};
use crate::{
    MetaStore, Millis, PoolAdded, PoolBatch, PoolCounts, PoolStore, StoreError, StoreResult,
};

/// How long after they became due cooling entries are kept (a week): levels asked with a
/// clock up to that far behind the latest reading are still right.
const COOLING_KEPT_MS: u64 = 7 * 86_400_000;

/// Where each pooled code of one length sits: code → its key in `pool/<L>`, tiebreak
/// included. Held in memory and rebuilt from the pool at every open: a pool is small (the
/// refill keeps it near its low water), and the `pool_members` tree that held this before
/// cost every create a write and every refilled code two reads and a write.
///
/// Its mutex ([`SledStore::members`]) is held across every transaction that can make a code
/// of its length exist or give a pooled code an owner other than by taking the pool's head:
/// a pool add, a custom or one-at-a-time create, an import, a recycle. While it is held, a code
/// exists exactly when it is in the map or in `codes`, so a pool add checks fresh codes
/// outside its transaction. The committer takes heads without it (their keys come from the
/// pool itself) and removes the taken codes after its commit: until then a taken code is both
/// here and owned, which every reader checks in that order.
#[derive(Default)]
pub(super) struct Members(HashMap<Box<str>, Box<[u8]>>);

impl Members {
    /// The map of one pool, read from the pool tree.
    pub(super) fn load(pool: &sled::Tree, length: u8) -> StoreResult<Self> {
        let mut map = HashMap::with_capacity(pool.len());
        for key in pool.iter().keys() {
            let key = key.map_err(backend)?;
            // A malformed key names no code; `check` lists it, and the head reader stops at
            // it with an error of its own.
            if let Some((_, code)) = keys::split_pool_key(&key, length) {
                map.insert(code.into(), key.as_ref().into());
            }
        }
        Ok(Self(map))
    }

    pub(super) fn contains(&self, code: &str) -> bool {
        self.0.contains_key(code)
    }

    pub(super) fn key_of(&self, code: &str) -> Option<&[u8]> {
        self.0.get(code).map(|key| &key[..])
    }

    /// After a commit that pooled `code` under `key`.
    pub(super) fn pooled(&mut self, code: &str, key: &[u8]) {
        self.0.insert(code.into(), key.into());
    }

    /// After a commit that took `code` out of the pool.
    pub(super) fn taken(&mut self, code: &str) {
        self.0.remove(code);
    }

    /// Every pooled code (for the code filter's rebuild).
    pub(super) fn codes(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(|code| &**code)
    }
}

/// Takes a chosen code (custom or imported) out of its pool, inside a transaction, under the
/// members' lock. Returns the score it had, or `None` when the code was not pooled. The caller
/// adjusts the pool's size counter, and removes the code from `members` after the commit.
pub(super) fn take_out_of_pool(
    members: &Members,
    pool: &TransactionalTree,
    code: &str,
) -> TxResult<Option<Millis>> {
    let Some(key) = members.key_of(code) else {
        return Ok(None);
    };
    // Gone already: the committer took it as a head a moment ago, and it is owned now (the
    // callers check the code index first).
    if pool.remove(key)?.is_none() {
        return Ok(None);
    }
    match length_of(code).and_then(|length| keys::split_pool_key(key, length)) {
        Some((score, _)) => Ok(Some(score)),
        None => abort(Abort::Corrupt("pool", format!("malformed key of `{code}`"))),
    }
}

/// The code length of `pools[index]`.
pub(super) fn pool_length(index: usize) -> u8 {
    u8::try_from(index + 1).unwrap_or(MAX_LEN)
}

pub(super) fn length_of(code: &str) -> Option<u8> {
    u8::try_from(code.len())
        .ok()
        .filter(|l| (1..=MAX_LEN).contains(l))
}

impl MetaStore for SledStore {
    fn meta_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self
            .meta
            .get(key.as_bytes())
            .map_err(backend)?
            .map(|v| v.to_vec()))
    }

    fn meta_init(&self, key: &str, value: &[u8]) -> StoreResult<Vec<u8>> {
        self.space.admit(0)?;
        let previous = self
            .meta
            .compare_and_swap(key.as_bytes(), None as Option<&[u8]>, Some(value))
            .map_err(backend)?;
        match previous {
            Ok(()) => {
                self.flusher.wait_durable()?;
                Ok(value.to_vec())
            }
            Err(cas) => Ok(cas.current.map(|v| v.to_vec()).unwrap_or_default()),
        }
    }

    fn meta_replace(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.space.admit(0)?;
        self.meta.insert(key.as_bytes(), value).map_err(backend)?;
        self.flusher.wait_durable()
    }
}

impl PoolStore for SledStore {
    fn pool_add(&self, batch: &PoolBatch) -> StoreResult<PoolAdded> {
        self.space.admit(0)?;
        let length = batch.length;
        let pool = self
            .pool(length)
            .ok_or_else(|| backend(format!("no pool of length {length}")))?;
        let state_key = keys::strategy_state_key(length);
        // Bounded transactions: sled's cost per write grows with the transaction. A crash
        // between chunks leaves the strategy state (written with the last chunk) behind the
        // pooled codes; the strategy then offers those codes again and they are skipped, so
        // nothing is lost or pooled twice.
        let chunks: Vec<&[String]> = batch.codes.chunks(POOL_ADD_CHUNK).collect();
        let last = chunks.len().saturating_sub(1);
        let trees = (pool, &self.counters, &self.meta);
        let mut added = 0u64;
        let mut offered = std::collections::HashSet::with_capacity(batch.codes.len());
        let mut rng = rand::rng();
        for (i, chunk) in chunks.iter().enumerate() {
            // Held for one chunk, so that the committer, which takes it after each commit,
            // waits for one transaction at most.
            let mut members = self
                .members(length)
                .ok_or_else(|| backend(format!("no pool of length {length}")))?;
            // Under the members' lock no other write can make a code of this length exist,
            // so fresh codes are told apart here, not inside the transaction. A code the
            // filter has never seen does not exist (it is checked before the chunk goes in),
            // which spares most codes a random read of the code index.
            let mut pooled = Vec::with_capacity(chunk.len());
            {
                let filter = self.filter.read();
                for code in *chunk {
                    if length_of(code) == Some(length)
                        && offered.insert(code.as_str())
                        && !members.contains(code)
                        && (!filter.check(code) || !self.owned_anywhere(code)?)
                    {
                        // Drawn here, not in the transaction closure, which may run more
                        // than once.
                        let tiebreak = if batch.shuffle {
                            rng.random::<u32>()
                        } else {
                            0
                        };
                        pooled.push((code.as_str(), keys::pool_key(batch.score, tiebreak, code)));
                    }
                }
            }
            // Into the filter before the commit (see `checkpoint`); codes skipped above exist
            // already, so they belong in the filter anyway.
            self.filter_insert(chunk.iter().map(String::as_str));
            let state = if i == last {
                batch.state.as_ref()
            } else {
                None
            };
            trees
                .transaction(|(pool, counters, meta)| {
                    for (_, key) in &pooled {
                        pool.insert(key.as_slice(), &[][..])?;
                    }
                    let delta = i64::try_from(pooled.len()).unwrap_or(i64::MAX);
                    if delta != 0 {
                        bump(counters, &counter::pool_size(length), delta)?;
                        bump(counters, &counter::pool_generated(length), delta)?;
                        bump(counters, counter::CODES_ISSUED, delta)?;
                    }
                    if let Some(state) = state {
                        meta.insert(state_key.as_bytes(), state.as_slice())?;
                    }
                    Ok(())
                })
                .map_err(|e: TransactionError<Abort>| tx_error(e, ""))?;
            for (code, key) in &pooled {
                members.pooled(code, key);
            }
            added += pooled.len() as u64;
        }
        if chunks.is_empty() {
            // No codes offered: still move the strategy on.
            if let Some(state) = &batch.state {
                self.meta
                    .insert(state_key.as_bytes(), state.as_slice())
                    .map_err(backend)?;
            }
        }
        if batch.score > batch.now {
            self.note_cooling(length, batch.score, i64::try_from(added).unwrap_or(0));
        }
        self.flusher.wait_durable()?;
        Ok(PoolAdded {
            added,
            skipped: batch.codes.len() as u64 - added,
        })
    }

    fn pool_counts(&self, length: u8, now: Millis) -> StoreResult<PoolCounts> {
        if self.pool(length).is_none() {
            return Ok(PoolCounts::default());
        }
        let size = self.counter(&counter::pool_size(length))?;
        let cooling: u64 = {
            let mut map = self.cooling[usize::from(length) - 1].lock();
            // Entries due long ago no longer need tracking; the recent ones stay, so that a
            // caller whose clock reading is a little behind another's still sees them cooling.
            let horizon = now.saturating_sub(COOLING_KEPT_MS);
            if map.first_key_value().is_some_and(|(due, _)| *due < horizon) {
                let keep = map.split_off(&horizon);
                *map = keep;
            }
            map.range(now.saturating_add(1)..).map(|(_, n)| n).sum()
        };
        Ok(PoolCounts {
            available: size.saturating_sub(cooling),
            cooling,
            generated_total: self.counter(&counter::pool_generated(length))?,
            recycled_total: self.counter(&counter::pool_recycled(length))?,
        })
    }

    fn in_pool(&self, code: &str) -> StoreResult<bool> {
        Ok(length_of(code)
            .and_then(|length| self.members(length))
            .is_some_and(|members| members.contains(code)))
    }

    fn pool_below(&self, length: u8, now: Millis, level: u64) -> StoreResult<bool> {
        // The counts are counters in memory: as cheap as any shortcut.
        Ok(self.pool_counts(length, now)?.available < level)
    }

    fn strategy_state(&self, length: u8) -> StoreResult<Option<Vec<u8>>> {
        self.meta_get(&keys::strategy_state_key(length))
    }

    fn pool_peek(&self, length: u8, limit: usize) -> StoreResult<Vec<(Millis, String)>> {
        let Some(pool) = self.pool(length) else {
            return Ok(Vec::new());
        };
        pool.iter()
            .keys()
            .take(limit)
            .map(|key| {
                let key = key.map_err(backend)?;
                keys::split_pool_key(&key, length)
                    .map(|(score, code)| (score, code.to_string()))
                    .ok_or_else(|| StoreError::Corrupt {
                        tree: "pool",
                        detail: "malformed key".into(),
                    })
            })
            .collect()
    }
}

impl SledStore {
    /// Whether a link owns `code` on any domain: its own key (the default domain's) or a
    /// `code@id` key of another. A range read, reached only when the filter says maybe.
    fn owned_anywhere(&self, code: &str) -> StoreResult<bool> {
        if self.codes.contains_key(code.as_bytes()).map_err(backend)? {
            return Ok(true);
        }
        let mut prefix = code.as_bytes().to_vec();
        prefix.push(b'@');
        Ok(self.codes.scan_prefix(prefix).next().is_some())
    }

    pub(super) fn pool(&self, length: u8) -> Option<&sled::Tree> {
        self.pools.get(usize::from(length).checked_sub(1)?)
    }

    /// The pool members of `length`, locked ([`Members`] says for what).
    pub(super) fn members(&self, length: u8) -> Option<MutexGuard<'_, Members>> {
        Some(
            self.members
                .get(usize::from(length).checked_sub(1)?)?
                .lock(),
        )
    }

    /// Counters change in the same transactions as the trees, so they cannot drift; this
    /// re-counts the pools (small) at every start anyway and corrects any that disagree, as a
    /// guard against bugs and hand-edited data.
    pub(super) fn check_pool_sizes(&mut self) -> StoreResult<()> {
        for (i, pool) in self.pools.iter().enumerate() {
            let length = u8::try_from(i + 1).unwrap_or(u8::MAX);
            let key = counter::pool_size(length);
            let counted = pool.len() as u64;
            let stored = self.counter(&key)?;
            if counted != stored {
                self.counters
                    .insert(key, &counted.to_be_bytes()[..])
                    .map_err(backend)?;
                self.report
                    .counters_corrected
                    .push(format!("pool.{length}.size: {stored} → {counted}"));
            }
        }
        Ok(())
    }

    pub(super) fn load_cooling(&self) -> StoreResult<()> {
        // Entries due in the future at open time. The clock read is the open time only; later
        // counts use the caller's `now`.
        let now = wall_now();
        for (i, pool) in self.pools.iter().enumerate() {
            let mut map = self.cooling[i].lock();
            for item in pool.range(keys::u64_key(now.saturating_add(1))..) {
                let (key, _) = item.map_err(backend)?;
                if let Some((score, _)) = keys::split_pool_key(&key, pool_length(i)) {
                    *map.entry(score).or_default() += 1;
                }
            }
        }
        Ok(())
    }

    pub(super) fn note_cooling(&self, length: u8, score: Millis, delta: i64) {
        let Some(slot) = usize::from(length).checked_sub(1) else {
            return;
        };
        let mut map = self.cooling[slot].lock();
        let entry = map.entry(score).or_default();
        *entry = entry.saturating_add_signed(delta);
        if *entry == 0 {
            map.remove(&score);
        }
    }

    /// The lowest-score pool entry of `length` that is due at `now`.
    pub(super) fn pool_head(
        &self,
        pool: &sled::Tree,
        length: u8,
        now: Millis,
    ) -> StoreResult<Option<(Vec<u8>, String)>> {
        let Some(item) = pool.iter().next() else {
            return Ok(None);
        };
        let (key, _) = item.map_err(backend)?;
        match keys::split_pool_key(&key, length) {
            Some((score, code)) if score <= now => Ok(Some((key.to_vec(), code.to_string()))),
            Some(_) => Ok(None),
            None => Err(StoreError::Corrupt {
                tree: "pool",
                detail: "malformed key".into(),
            }),
        }
    }

    /// Removes one entry from a pool (and its membership), keeping the size counter right.
    pub(super) fn drop_pool_entry(
        &self,
        pool: &sled::Tree,
        key: &[u8],
        code: &str,
    ) -> StoreResult<()> {
        let length = length_of(code).unwrap_or(0);
        let mut members = self.members(length);
        (pool, &self.counters)
            .transaction(|(pool, counters)| {
                if pool.remove(key)?.is_some() {
                    bump(counters, &counter::pool_size(length), -1)?;
                }
                Ok(())
            })
            .map_err(|e: TransactionError<Abort>| tx_error(e, code))?;
        if let Some(members) = members.as_mut() {
            members.taken(code);
        }
        Ok(())
    }
}

/// The wall clock's milliseconds since the Unix epoch, read once when the store opens (the
/// store holds no clock: every later count takes its caller's `now`).
fn wall_now() -> crate::Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
