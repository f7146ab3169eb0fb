//! Pooled creates, many to one transaction, applied by one committer thread.
//!
//! sled 0.34 applies every transaction under one global lock, and a create is about ten tree
//! operations, so creates are applied in groups: up to [`MAX_GROUP`] creates of one code
//! length read as many pool heads and are written in one transaction, with the shared counters
//! (next id, pool size, link and day counts) read and written once.
//!
//! Every pooled create is queued to the store's committer thread ([`Committer`]), which takes
//! whatever has queued up, applies it group by group and hands the answers to the flusher
//! ([`super::flusher::Flusher::when_durable`]); it is already committing the next creates
//! while that flush runs. A caller on the async runtime awaits its answer
//! ([`crate::Store::submit_create`]) and ties up no thread; a blocking caller waits on a
//! channel. (The design before this one had each create wait on its own blocking thread, elect
//! a leader among them and wait again for the flush: four thread switches per create, and the
//! scheduler was a third of a 64-client profile.)
//!
//! If a group's transaction aborts (a custom create took a pooled code between the read of
//! the heads and the commit, or the trees disagree), each create of the group is retried alone
//! by the one-at-a-time path, which handles those cases one by one.

use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use parking_lot::Mutex;
use sled::transaction::{abort, TransactionError};
use sled::Transactional;

use super::codec::tx_next_link_id;
use super::keys::{self, counter, read_u64};
use super::links::insert_active;
use super::{bump, tx_decode_link, Abort, SledStore, DAY_MS};
use crate::{CreateDone, Created, LinkStatus, NewLink, StoreError, StoreResult};

/// Most creates applied in one transaction: sled's cost per write grows with the
/// transaction, and a group this size already shares the lock 64 ways.
const MAX_GROUP: usize = 64;

/// Most creates the committer takes off its queue at once (several groups, one flush).
const MAX_BATCH: usize = 4 * MAX_GROUP;

/// A queued pooled create.
struct Job {
    new: NewLink,
    length: u8,
    done: CreateDone,
}

/// The committer thread of one store and its queue.
#[derive(Default)]
pub(super) struct Committer {
    queue: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Committer {
    /// Starts the thread. It holds the store weakly: dropping the store's last handle closes
    /// the queue, and the thread ends.
    pub(super) fn start(store: &Arc<SledStore>) -> StoreResult<()> {
        let (queue, jobs) = channel();
        let weak = Arc::downgrade(store);
        let thread = std::thread::Builder::new()
            .name("vsl-creates".into())
            .spawn(move || run(weak, jobs))
            .map_err(|e| StoreError::Backend(format!("cannot start the create thread: {e}")))?;
        *store.committer.queue.lock() = Some(queue);
        *store.committer.thread.lock() = Some(thread);
        Ok(())
    }

    /// Queues a create; `done` gets its outcome once it is durable.
    pub(super) fn submit(&self, new: NewLink, length: u8, done: CreateDone) {
        let job = Job { new, length, done };
        let refused = match self.queue.lock().as_ref() {
            Some(queue) => queue.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = refused {
            (job.done)(Err(StoreError::Backend("store is closed".into())));
        }
    }

    /// Applies what is queued, then ends the thread. Later creates fail.
    pub(super) fn stop(&self) {
        self.queue.lock().take();
        if let Some(thread) = self.thread.lock().take() {
            // The thread never calls this (it never closes the store), so this cannot wait
            // for itself.
            let _ = thread.join();
        }
    }
}

fn run(store: Weak<SledStore>, jobs: Receiver<Job>) {
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        batch.extend(jobs.try_iter().take(MAX_BATCH - 1));
        match store.upgrade() {
            Some(store) => store.commit_batch(batch),
            None => {
                for job in batch {
                    (job.done)(Err(StoreError::Backend("store is closed".into())));
                }
            }
        }
    }
}

impl SledStore {
    /// Applies a batch group by group (per length, in arrival order) and answers every create
    /// after the flush that covers the batch.
    fn commit_batch(&self, batch: Vec<Job>) {
        let mut by_length: Vec<(u8, Vec<Job>)> = Vec::new();
        for job in batch {
            match by_length
                .iter_mut()
                .find(|(length, _)| *length == job.length)
            {
                Some((_, jobs)) => jobs.push(job),
                None => by_length.push((job.length, vec![job])),
            }
        }
        let mut answers = Vec::new();
        for (length, jobs) in by_length {
            let mut jobs = jobs.into_iter().peekable();
            while jobs.peek().is_some() {
                let (group, dones): (Vec<NewLink>, Vec<CreateDone>) = jobs
                    .by_ref()
                    .take(MAX_GROUP)
                    .map(|job| (job.new, job.done))
                    .unzip();
                // A panic must not end the thread, or every later create would wait forever.
                let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.create_group(&group, length)
                }))
                .unwrap_or_else(|_| {
                    group
                        .iter()
                        .map(|_| Err(StoreError::Backend("a group of creates panicked".into())))
                        .collect()
                });
                answers.extend(dones.into_iter().zip(results));
            }
        }
        // Nothing written (every create refused, by the space guard say): nothing to flush.
        // A flush here would write what reads restructured in memory, which on a full disk
        // is the failed write that poisons sled ([`super::space`]).
        if answers.iter().all(|(_, result)| result.is_err()) {
            for (done, result) in answers {
                done(result);
            }
            return;
        }
        // A dedup hit may answer with a link whose own create is still waiting for its flush:
        // it is answered after this flush too.
        self.flusher.when_durable(Box::new(move |flushed| {
            for (done, result) in answers {
                done(match &flushed {
                    Ok(()) => result,
                    Err(e) => Err(e.clone()),
                });
            }
        }));
    }

    /// Applies a group in one transaction if it can, else each create alone.
    fn create_group(&self, group: &[NewLink], length: u8) -> Vec<StoreResult<Created>> {
        // Refused before sled sees a full disk ([`super::space`]).
        if let Err(e) = self.space.admit(0) {
            return group.iter().map(|_| Err(e.clone())).collect();
        }
        let alone = |new: &NewLink| self.create_from_pool(new, length);
        // Links of other domains than the default go alone: rare, and their keys enter the
        // code filter on the way ([`SledStore::create_tx`]).
        if group.len() == 1
            || group
                .iter()
                .any(|n| n.domain != crate::model::DEFAULT_DOMAIN)
        {
            return group.iter().map(alone).collect();
        }
        let Some(pool) = self.pool(length) else {
            return group.iter().map(alone).collect();
        };
        let _taker = self.takers[usize::from(length) - 1].lock();
        // Due at the earliest clock reading of the group, so that no create gets a code still
        // cooling at its own time.
        let now = group.iter().map(|n| n.now).min().unwrap_or(0);
        let heads = match self.pool_heads(pool, length, now, group.len()) {
            Ok(heads) if heads.len() == group.len() => heads,
            // Too few codes (the pool needs a refill) or an unreadable head: the one-at-a-time
            // path reports each case precisely.
            _ => {
                drop(_taker);
                return group.iter().map(alone).collect();
            }
        };
        match self.group_tx(group, &heads, length, pool) {
            Ok(created) => {
                if let Some(mut members) = self.members(length) {
                    for link in created.iter().filter_map(|c| match c {
                        Created::New(link) => Some(link),
                        Created::Existing(_) => None,
                    }) {
                        members.taken(&link.code);
                    }
                }
                created.into_iter().map(Ok).collect()
            }
            Err(_) => {
                drop(_taker);
                group.iter().map(alone).collect()
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
        group: &[NewLink],
        heads: &[(Vec<u8>, String)],
        length: u8,
        pool: &sled::Tree,
    ) -> Result<Vec<Created>, TransactionError<Abort>> {
        let dedup_keys: Vec<Vec<u8>> = group
            .iter()
            .map(|new| keys::dedup_key(&new.space, new.domain, length, &new.url))
            .collect();
        let trees = (
            &self.links,
            &self.codes,
            &self.dedup,
            &self.expiry,
            pool,
            &self.counters,
        );
        trees.transaction(|(links, codes, dedup, expiry, pool, counters)| {
            let mut out = Vec::with_capacity(group.len());
            let mut id = counters
                .get(counter::LINK_ID)?
                .and_then(|v| read_u64(&v))
                .unwrap_or(0);
            let mut per_day: HashMap<u64, i64> = HashMap::new();
            let mut taken = 0i64;
            let mut heads = heads.iter();
            for (new, dedup_key) in group.iter().zip(&dedup_keys) {
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
                taken += 1;
                id = tx_next_link_id(links, id)?;
                let link = new.record(id, code, false);
                insert_active(
                    [links, codes, dedup, expiry],
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
        })
    }
}
