//! Code pools: which strategy fills which length, refills (background when a pool
//! runs low, synchronous when it is empty), and creates that take from them.
//!
//! Generation is pure (`codes::*`); this module decides how many codes to make, filters them
//! (reserved and blocked words, the issued-code filter for `random`) and hands them to
//! `Store::pool_add` together with the strategy's new state, so that a crash never loses or
//! repeats a code. It holds no sled types and no HTTP types.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use serde::Serialize;

use crate::clock::Clock;
use crate::codes::permute::{self, PermuteState, Permuter};
use crate::codes::step::{self, StepState};
use crate::codes::{check, encode, random, CodeRules, Space, Strategy};
use crate::config::Config;
use crate::model::{Millis, PoolCounts, StoreError, StoreResult};
use crate::store::{CodeChoice, Created, NewLink, PoolBatch, Store};

/// A random refill gives up after this many candidates per wanted code: the space is then
/// nearly full, and the length is reported exhausted.
const RANDOM_ATTEMPTS_PER_CODE: usize = 20;

/// A create that keeps finding its pool empty (others drain every refill) gives up after this
/// many refills, answering `PoolEmpty` rather than spinning.
const MAX_EMPTY_RETRIES: usize = 8;

/// The state a strategy keeps between refills, as shown by `GET /api/v1/pools`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum StrategyState {
    /// `random` keeps nothing but the filter.
    Random {},
    Step(StepState),
    Permute(PermuteState),
}

/// One pool's levels and strategy state.
#[derive(Clone, Debug, Serialize)]
pub struct PoolStatus {
    pub length: u8,
    pub strategy: Strategy,
    /// Codes end with a check character.
    pub check: bool,
    #[serde(flatten)]
    pub counts: PoolCounts,
    pub exhausted: bool,
    pub state: StrategyState,
}

/// A tier whose codes are computed from the URL (`hash`): it has no pool, so `available`
/// is `null` and nothing cools or is generated ahead.
#[derive(Clone, Debug, Serialize)]
pub struct ComputedStatus {
    pub length: u8,
    pub strategy: &'static str,
    pub check: bool,
    pub available: Option<u64>,
    pub cooling: u64,
    pub generated_total: u64,
    pub recycled_total: u64,
    pub exhausted: bool,
    pub state: serde_json::Value,
}

/// A generated length as `GET /api/v1/pools` and the dashboard show it.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum TierStatus {
    Pool(PoolStatus),
    Computed(ComputedStatus),
}

/// One pooled length.
struct Tier {
    length: u8,
    /// The number space of the code before its check character (the whole code without one).
    space: Space,
    /// Codes end with a check character ([`crate::codes::check`]).
    check: bool,
    strategy: Strategy,
    batch: u64,
    low_water: u64,
    permuter: Option<Permuter>,
    /// One refill at a time per length: strategies advance a persisted state.
    refilling: Mutex<()>,
    /// A background refill is queued; further low-water signals are redundant.
    queued: AtomicBool,
    /// `random` could not find new codes: the space is (nearly) full.
    random_exhausted: AtomicBool,
}

impl Tier {
    /// The code of a number of the tier's space, with its check character if the tier has one.
    fn code(&self, n: u64) -> String {
        let payload = encode(n);
        if self.check {
            // A number's base-62 form is alphabet characters only.
            check::with_check(&payload).unwrap_or(payload)
        } else {
            payload
        }
    }
}

/// The pools of every generated length.
pub struct Pools {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    tiers: BTreeMap<u8, Tier>,
    /// Lengths whose codes are computed (`hash`), with their check flag.
    computed: BTreeMap<u8, bool>,
    rules: CodeRules,
    signal: Mutex<Option<mpsc::Sender<u8>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// Creates that need a thread of their own (custom codes, a synchronous refill) run at
    /// most this many at once, leaving the blocking threads to others.
    blocking_creates: tokio::sync::Semaphore,
}

/// How many creates may hold a blocking thread at once.
const BLOCKING_CREATES: usize = 32;

impl Pools {
    /// Sets up the pools of every configured generated length (permute keys are generated on
    /// first start and kept in the store). Does not start background refills; see
    /// [`Pools::start_background`].
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: &Config) -> StoreResult<Self> {
        let mut tiers = BTreeMap::new();
        for (length, strategy, tier) in config.pooled_lengths() {
            let space = Space::for_length(tier.payload_len(length)).ok_or_else(|| {
                StoreError::Backend(format!("no number space for length {length}"))
            })?;
            let permuter = match strategy {
                Strategy::Permute => {
                    let stored = store
                        .meta_init(&format!("permute_key/{length}"), &Permuter::generate_key())?;
                    let key: [u8; 16] =
                        stored
                            .as_slice()
                            .try_into()
                            .map_err(|_| StoreError::Corrupt {
                                tree: "meta",
                                detail: format!("permute key of length {length}"),
                            })?;
                    Some(Permuter::new(key, space))
                }
                _ => None,
            };
            tiers.insert(
                length,
                Tier {
                    length,
                    space,
                    check: tier.check,
                    strategy,
                    batch: tier.batch.max(1),
                    low_water: tier.low_water,
                    permuter,
                    refilling: Mutex::new(()),
                    queued: AtomicBool::new(false),
                    random_exhausted: AtomicBool::new(false),
                },
            );
        }
        let computed = config
            .tiers
            .iter()
            .filter(|(_, t)| t.strategy == crate::config::TierStrategy::Hash)
            .map(|(l, t)| (*l, t.check))
            .collect();
        Ok(Self {
            store,
            clock,
            tiers,
            computed,
            rules: CodeRules::new(&config.codes.blocked_words),
            signal: Mutex::new(None),
            worker: Mutex::new(None),
            blocking_creates: tokio::sync::Semaphore::new(BLOCKING_CREATES),
        })
    }

    /// Starts the refill worker: a thread that refills a length whenever a create leaves its
    /// pool under `low_water`, so that creates never wait for generation while codes remain.
    pub fn start_background(self: &Arc<Self>) -> std::io::Result<()> {
        let (tx, rx) = mpsc::channel::<u8>();
        let pools = Arc::downgrade(self);
        let handle = std::thread::Builder::new()
            .name("vsl-refill".into())
            .spawn(move || {
                while let Ok(length) = rx.recv() {
                    let Some(pools) = pools.upgrade() else { break };
                    if let Some(tier) = pools.tiers.get(&length) {
                        tier.queued.store(false, Ordering::Release);
                        let want = tier.batch;
                        if let Err(e) = pools.refill(length, want) {
                            tracing::error!(length, error = %e, "background refill failed");
                        }
                    }
                }
            })?;
        *self.signal.lock() = Some(tx);
        *self.worker.lock() = Some(handle);
        Ok(())
    }

    /// Stops the refill worker (after the refill it is doing, if any).
    pub fn stop_background(&self) {
        self.signal.lock().take();
        if let Some(handle) = self.worker.lock().take() {
            let _ = handle.join();
        }
    }

    /// Fills every pool up to its low-water mark now (start-up).
    pub fn prime(&self) -> StoreResult<()> {
        for (&length, tier) in &self.tiers {
            let counts = self.store.pool_counts(length, self.clock.now())?;
            if counts.available < tier.low_water.max(1) {
                self.refill(length, tier.batch)?;
            }
        }
        Ok(())
    }

    /// Lengths with a pool.
    pub fn lengths(&self) -> impl Iterator<Item = u8> + '_ {
        self.tiers.keys().copied()
    }

    /// True when `length` has a pool.
    pub fn has_pool(&self, length: u8) -> bool {
        self.tiers.contains_key(&length)
    }

    /// Creates a link. A pooled create that finds its pool empty generates synchronously and
    /// tries again; one that leaves the pool under `low_water` queues a background refill.
    pub fn create(&self, new: &NewLink) -> StoreResult<Created> {
        let CodeChoice::Pool(length) = new.code else {
            return self.store.create_link(new);
        };
        if !self.tiers.contains_key(&length) {
            return Err(StoreError::PoolEmpty(length));
        }
        let tier = &self.tiers[&length];
        let mut attempt = std::borrow::Cow::Borrowed(new);
        for _ in 0..MAX_EMPTY_RETRIES {
            match self.store.create_link(&attempt) {
                Ok(created) => {
                    self.check_low_water(length, attempt.now);
                    return Ok(created);
                }
                Err(StoreError::PoolEmpty(_)) => {
                    // Other creates may drain what this refill adds; only a refill that finds
                    // nothing new means the length is exhausted.
                    if self.refill_if_empty(tier)? == 0
                        && self.store.pool_counts(length, self.clock.now())?.available == 0
                    {
                        return Err(StoreError::PoolEmpty(length));
                    }
                    // Fresh codes are scored with the refill's clock reading, which is later
                    // than this request's.
                    attempt.to_mut().now = attempt.now.max(self.clock.now());
                }
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::PoolEmpty(length))
    }

    /// Creates a link without holding a thread: a pooled create is handed to the store, which
    /// returns at once (`LinkStore::submit_create`), and awaited; everything else (custom
    /// codes, an empty pool that needs a synchronous refill) runs [`Pools::create`] on a
    /// blocking thread.
    pub async fn create_async(self: &Arc<Self>, new: NewLink) -> StoreResult<Created> {
        if let CodeChoice::Pool(length) = new.code {
            if self.tiers.contains_key(&length) {
                let (answer, answered) = tokio::sync::oneshot::channel();
                self.store.submit_create(
                    new.clone(),
                    Box::new(move |outcome| {
                        let _ = answer.send(outcome);
                    }),
                );
                match answered.await {
                    Ok(Err(StoreError::PoolEmpty(_))) => {}
                    Ok(outcome) => {
                        // A blocking call, like every store call from the runtime (see
                        // `store`): counters in memory on sled, one indexed count on PostgreSQL.
                        self.check_low_water(length, new.now);
                        return outcome;
                    }
                    Err(_) => {
                        return Err(StoreError::Backend("the create was dropped".into()));
                    }
                }
            }
        }
        // Never closed, so a permit always comes.
        let _permit = self.blocking_creates.acquire().await;
        let pools = self.clone();
        tokio::task::spawn_blocking(move || pools.create(&new))
            .await
            .unwrap_or_else(|e| Err(StoreError::Backend(format!("create task failed: {e}"))))
    }

    /// The synchronous refill of a create that found its pool empty. Creates that found it
    /// empty at the same moment queue on the refill lock; the first one refills and the others
    /// find codes available and generate nothing.
    fn refill_if_empty(&self, tier: &Tier) -> StoreResult<u64> {
        let _one_at_a_time = tier.refilling.lock();
        if self
            .store
            .pool_counts(tier.length, self.clock.now())?
            .available
            > 0
        {
            return Ok(1);
        }
        self.refill_locked(tier, tier.batch)
    }

    fn check_low_water(&self, length: u8, now: Millis) {
        let Some(tier) = self.tiers.get(&length) else {
            return;
        };
        let low = self
            .store
            .pool_below(length, now, tier.low_water)
            .unwrap_or(false);
        if !low || tier.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        match self.signal.lock().as_ref() {
            Some(tx) if tx.send(length).is_ok() => {}
            // No worker (tools, tests): the next empty take refills synchronously.
            _ => tier.queued.store(false, Ordering::Release),
        }
    }

    /// Generates up to `count` new codes into the pool of `length`; returns how many were
    /// added (fewer, or 0, when the strategy is exhausted).
    pub fn refill(&self, length: u8, count: u64) -> StoreResult<u64> {
        let tier = self
            .tiers
            .get(&length)
            .ok_or_else(|| StoreError::Backend(format!("no pool of length {length}")))?;
        let _one_at_a_time = tier.refilling.lock();
        self.refill_locked(tier, count)
    }

    fn refill_locked(&self, tier: &Tier, count: u64) -> StoreResult<u64> {
        match tier.strategy {
            Strategy::Random => self.refill_random(tier, count),
            Strategy::Step => self.refill_step(tier, count),
            Strategy::Permute => self.refill_permute(tier, count),
        }
    }

    fn refill_random(&self, tier: &Tier, count: u64) -> StoreResult<u64> {
        let want = usize::try_from(count).unwrap_or(usize::MAX);
        let mut rng = rand::rng();
        let mut picked = HashSet::with_capacity(want);
        let mut attempts = 0usize;
        let mut added = 0u64;
        let budget = want.saturating_mul(RANDOM_ATTEMPTS_PER_CODE);
        // Rounds of candidates until enough are in: the store skips the taken ones (its own
        // check, which a code filter makes cheap), and a crowded space takes more rounds.
        while added < count && attempts < budget {
            let missing = usize::try_from(count - added).unwrap_or(usize::MAX);
            let mut codes = Vec::with_capacity(missing.min(4096));
            while codes.len() < missing && attempts < budget {
                let chunk = (missing - codes.len()).min(4096);
                attempts += chunk;
                for n in random::candidates(tier.space, chunk, &mut rng) {
                    let code = tier.code(n);
                    if self.rules.allows_generated(&code) && picked.insert(n) {
                        codes.push(code);
                    }
                }
            }
            if !codes.is_empty() {
                added += self.add(tier, codes, None)?;
            }
        }
        if added == 0 {
            tier.random_exhausted.store(true, Ordering::Release);
        }
        Ok(added)
    }

    fn refill_step(&self, tier: &Tier, count: u64) -> StoreResult<u64> {
        let mut state: StepState = self.load_state(tier.length)?;
        let mut added = 0;
        while added < count && !state.exhausted {
            let (values, next) = step::next_batch(tier.space, tier.batch, &state);
            let codes = self.allowed(tier, values);
            let encoded = encode_state(tier.length, &next)?;
            added += self.add(tier, codes, Some(encoded))?;
            state = next;
        }
        Ok(added)
    }

    fn refill_permute(&self, tier: &Tier, count: u64) -> StoreResult<u64> {
        let Some(permuter) = &tier.permuter else {
            return Ok(0);
        };
        let mut state: PermuteState = self.load_state(tier.length)?;
        let mut added = 0;
        while added < count && !state.exhausted {
            let (values, next) = permute::next_batch(permuter, count - added, &state);
            let codes = self.allowed(tier, values);
            let encoded = encode_state(tier.length, &next)?;
            added += self.add(tier, codes, Some(encoded))?;
            state = next;
        }
        Ok(added)
    }

    fn allowed(&self, tier: &Tier, values: Vec<u64>) -> Vec<String> {
        values
            .into_iter()
            .map(|n| tier.code(n))
            .filter(|c| self.rules.allows_generated(c))
            .collect()
    }

    fn add(&self, tier: &Tier, codes: Vec<String>, state: Option<Vec<u8>>) -> StoreResult<u64> {
        let now = self.clock.now();
        let result = self.store.pool_add(&PoolBatch {
            length: tier.length,
            codes,
            score: now,
            now,
            state,
            shuffle: tier.strategy != Strategy::Step,
        })?;
        Ok(result.added)
    }

    fn load_state<T: serde::de::DeserializeOwned + Default>(&self, length: u8) -> StoreResult<T> {
        match self.store.strategy_state(length)? {
            None => Ok(T::default()),
            Some(bytes) => rmp_serde::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                tree: "meta",
                detail: format!("strategy state of length {length}: {e}"),
            }),
        }
    }

    /// Levels and state of one pool.
    pub fn status(&self, length: u8) -> StoreResult<Option<PoolStatus>> {
        let Some(tier) = self.tiers.get(&length) else {
            return Ok(None);
        };
        let counts = self.store.pool_counts(length, self.clock.now())?;
        let (state, exhausted) = match tier.strategy {
            Strategy::Random => (
                StrategyState::Random {},
                tier.random_exhausted.load(Ordering::Acquire),
            ),
            Strategy::Step => {
                let s: StepState = self.load_state(length)?;
                let exhausted = s.exhausted;
                (StrategyState::Step(s), exhausted)
            }
            Strategy::Permute => {
                let s: PermuteState = self.load_state(length)?;
                let exhausted = s.exhausted;
                (StrategyState::Permute(s), exhausted)
            }
        };
        Ok(Some(PoolStatus {
            length,
            strategy: tier.strategy,
            check: tier.check,
            counts,
            exhausted,
            state,
        }))
    }

    /// Levels and state of every pool, by length.
    pub fn statuses(&self) -> StoreResult<Vec<PoolStatus>> {
        self.lengths()
            .filter_map(|l| self.status(l).transpose())
            .collect()
    }

    /// Every length whose codes the service makes, pooled or computed, by length.
    pub fn tier_statuses(&self) -> StoreResult<Vec<TierStatus>> {
        let mut all: Vec<TierStatus> = self.statuses()?.into_iter().map(TierStatus::Pool).collect();
        all.extend(self.computed.iter().map(|(&length, &check)| {
            TierStatus::Computed(ComputedStatus {
                length,
                strategy: "hash",
                check,
                available: None,
                cooling: 0,
                generated_total: 0,
                recycled_total: 0,
                exhausted: false,
                state: serde_json::json!({}),
            })
        }));
        all.sort_by_key(|t| match t {
            TierStatus::Pool(p) => p.length,
            TierStatus::Computed(c) => c.length,
        });
        Ok(all)
    }

    /// Whether generated codes may use this code (no blocked word), for computed codes.
    pub fn allows_generated(&self, code: &str) -> bool {
        self.rules.allows_generated(code)
    }
}

/// A strategy's state as the store keeps it. A state that does not encode fails the refill:
/// writing an empty one would restart the strategy and offer its codes again.
fn encode_state<T: serde::Serialize>(length: u8, state: &T) -> StoreResult<Vec<u8>> {
    rmp_serde::to_vec(state).map_err(|e| {
        StoreError::Backend(format!(
            "strategy state of length {length} does not encode: {e}"
        ))
    })
}

impl Drop for Pools {
    fn drop(&mut self) {
        self.signal.get_mut().take();
    }
}
