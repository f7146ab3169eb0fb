//! Group commit of pooled creates at the transaction level: concurrent creates of one code
//! length are applied by one thread in one sled transaction.
//!
//! sled 0.34 applies every transaction under one global lock, and a create is about fifteen
//! tree operations; one transaction per create made 64 concurrent clients queue on that lock
//! and on the pool's taker mutex one at a time. Here a create joins its length's queue; the
//! first thread to find no leader becomes the leader, takes up to [`MAX_GROUP`] waiting
//! creates, reads as many pool heads, and writes them all in one transaction, with the shared
//! counters (next id, pool size, link and day counts) read and written once. The others sleep
//! until their result is posted. Durability is unchanged: each caller still waits for a flush
//! that covers its commit ([`super::flusher`]).
//!
//! If the group's transaction aborts (a custom create took a pooled code between the read of
//! the heads and the commit, or the trees disagree), each create of the group is retried alone
//! by the one-at-a-time path, which handles those cases one by one.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use sled::transaction::{abort, TransactionError};
use sled::Transactional;

use super::keys::{self, counter, read_u64};
use super::links::insert_active;
use super::{bump, tx_decode_link, Abort, SledStore, DAY_MS};
use crate::store::{Created, LinkStatus, NewLink, StoreError, StoreResult};

/// Most creates applied in one transaction: sled's cost per write grows with the
/// transaction, and a group this size already shares the lock 64 ways.
const MAX_GROUP: usize = 64;

/// The waiting creates of one code length.
#[derive(Default)]
pub(super) struct CreateQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    next_ticket: u64,
    /// Each waiting create with the condition variable that wakes it alone, so that a post
    /// wakes the group it finished and the next leader, not every waiter. (The scheduler
    /// showed up as a third of a 64-client profile; this change alone did not move the
    /// throughput measurably: the rest of those switches are the hand-offs between the
    /// runtime, its blocking threads and the flusher.)
    waiting: Vec<((u64, NewLink), Arc<Condvar>)>,
    results: HashMap<u64, StoreResult<Created>>,
    leading: bool,
}

impl SledStore {
    /// Creates a link from the pool of `length` as part of a group (see the module doc).
    pub(super) fn create_from_pool_grouped(
        &self,
        new: &NewLink,
        length: u8,
    ) -> StoreResult<Created> {
        let queue = &self.create_queues[usize::from(length) - 1];
        let mut state = queue.state.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        let wake = Arc::new(Condvar::new());
        state.waiting.push(((ticket, new.clone()), wake.clone()));
        loop {
            if let Some(result) = state.results.remove(&ticket) {
                return result;
            }
            if state.leading {
                wake.wait(&mut state);
                continue;
            }
            state.leading = true;
            let take = state.waiting.len().min(MAX_GROUP);
            let (group, wakes): (Vec<(u64, NewLink)>, Vec<Arc<Condvar>>) =
                state.waiting.drain(..take).unzip();
            drop(state);
            // A panic here must not leave `leading` set, or every later create of this length
            // would wait forever: it becomes an error for each create of the group.
            let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.create_group(&group, length)
            }))
            .unwrap_or_else(|_| {
                group
                    .iter()
                    .map(|_| Err(StoreError::Backend("a group of creates panicked".into())))
                    .collect()
            });
            state = queue.state.lock();
            for (((ticket, _), result), wake) in group.iter().zip(results).zip(&wakes) {
                state.results.insert(*ticket, result);
                wake.notify_one();
            }
            state.leading = false;
            // The next waiting create leads the next group.
            if let Some((_, next)) = state.waiting.first() {
                next.notify_one();
            }
        }
    }

    /// Applies a group in one transaction if it can, else each create alone.
    fn create_group(&self, group: &[(u64, NewLink)], length: u8) -> Vec<StoreResult<Created>> {
        let alone = |new: &NewLink| self.create_from_pool(new, length);
        if group.len() == 1 {
            return vec![alone(&group[0].1)];
        }
        let Some(pool) = self.pool(length) else {
            return group.iter().map(|(_, new)| alone(new)).collect();
        };
        let _taker = self.takers[usize::from(length) - 1].lock();
        // Due at the earliest clock reading of the group, so that no create gets a code still
        // cooling at its own time.
        let now = group.iter().map(|(_, n)| n.now).min().unwrap_or(0);
        let heads = match self.pool_heads(pool, length, now, group.len()) {
            Ok(heads) if heads.len() == group.len() => heads,
            // Too few codes (the pool needs a refill) or an unreadable head: the one-at-a-time
            // path reports each case precisely.
            _ => {
                drop(_taker);
                return group.iter().map(|(_, new)| alone(new)).collect();
            }
        };
        match self.group_tx(group, &heads, length, pool) {
            Ok(created) => created.into_iter().map(Ok).collect(),
            Err(_) => {
                drop(_taker);
                group.iter().map(|(_, new)| alone(new)).collect()
            }
        }
    }

    /// The first `n` pool entries of `length` due at `now`: (key, code).
    fn pool_heads(
        &self,
        pool: &sled::Tree,
        length: u8,
        now: u64,
        n: usize,
    ) -> StoreResult<Vec<(Vec<u8>, String)>> {
        let mut heads = Vec::with_capacity(n);
        for item in pool.iter().keys().take(n) {
            let key = item.map_err(super::backend)?;
            match keys::split_pool_key(&key, length) {
                Some((score, code)) if score <= now => heads.push((key.to_vec(), code.to_string())),
                _ => break,
            }
        }
        Ok(heads)
    }

    /// One transaction for the whole group. A dedup hit takes no code: its head stays pooled.
    fn group_tx(
        &self,
        group: &[(u64, NewLink)],
        heads: &[(Vec<u8>, String)],
        length: u8,
        pool: &sled::Tree,
    ) -> Result<Vec<Created>, TransactionError<Abort>> {
        let dedup_keys: Vec<Vec<u8>> = group
            .iter()
            .map(|(_, new)| keys::dedup_key(&new.space, length, &new.url))
            .collect();
        let trees = (
            &self.links,
            &self.codes,
            &self.active,
            &self.dedup,
            &self.expiry,
            pool,
            &self.members,
            &self.counters,
        );
        trees.transaction(
            |(links, codes, active, dedup, expiry, pool, members, counters)| {
                let mut out = Vec::with_capacity(group.len());
                let mut id = counters
                    .get(counter::LINK_ID)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0);
                let mut per_day: HashMap<u64, i64> = HashMap::new();
                let mut taken = 0i64;
                let mut heads = heads.iter();
                for ((_, new), dedup_key) in group.iter().zip(&dedup_keys) {
                    if new.dedup {
                        if let Some(existing) = dedup.get(dedup_key)? {
                            if let Some(bytes) = links.get(existing)? {
                                let link = tx_decode_link(&bytes)?;
                                if link.is_dedup_target(new.now) {
                                    out.push(Created::Existing(link));
                                    continue;
                                }
                            }
                        }
                    }
                    let Some((pool_key, code)) = heads.next() else {
                        return abort(Abort::Raced);
                    };
                    if pool.remove(pool_key.as_slice())?.is_none() {
                        return abort(Abort::Raced);
                    }
                    if codes.get(code.as_bytes())?.is_some() {
                        return abort(Abort::Owned);
                    }
                    members.remove(code.as_bytes())?;
                    taken += 1;
                    id += 1;
                    let link = new.record(id, code, false);
                    insert_active(
                        [links, codes, active, dedup, expiry],
                        &link,
                        Some(dedup_key.as_slice()),
                    )?;
                    *per_day.entry(new.now / DAY_MS).or_default() += 1;
                    out.push(Created::New(link));
                }
                counters.insert(counter::LINK_ID, &id.to_be_bytes()[..])?;
                bump(counters, &counter::pool_size(length), -taken)?;
                bump(counters, &counter::links(LinkStatus::Active), taken)?;
                for (day, n) in per_day {
                    bump(counters, &counter::day_creates(day), n)?;
                }
                Ok(out)
            },
        )
    }
}
