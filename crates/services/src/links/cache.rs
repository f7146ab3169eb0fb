//! The redirect cache: code → target, in process, read-through from the active mapping.
//! Entries are served until the earlier of their link's expiry and the cache's ttl after they
//! were filled; a hit past that is a miss. Only the link service, its parent, fills or
//! invalidates it.
//!
//! Bounded in bytes (its share of `memory.budget`): each entry takes what it holds, so that
//! long URLs and links with options take more of the cache than short plain ones. With
//! `cache.capacity` set it holds at most that many entries instead.
//!
//! Compact, so that a small team's links stay cached whole at the default budget: entries are
//! written back to back into a log per shard (`cache/log.rs`), a plain link's entry being its
//! header, key and URL and a slot of the table (`cache/table.rs`); what only some links carry
//! (options, a review's block, a plan's in-app day) sits in a side table that plain links
//! leave empty.
//! `examples/cache_footprint.rs` measures an entry with a heap profiler.

mod log;
mod table;

use std::hash::BuildHasher;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;

use self::log::{Entry, Found, Shard, HEADER};
use super::LinkState;
use crate::model::Millis;

/// What the link service fills an entry with.
#[derive(Clone, Debug)]
pub struct CachedTarget {
    pub id: u64,
    pub url: Arc<str>,
    pub expires_at: Option<Millis>,
    /// When the entry was filled; it is served for at most the cache's ttl after.
    pub cached_at: Millis,
    /// A link with options: what decides its redirects (`None` for a plain link).
    pub state: Option<Arc<LinkState>>,
    /// A review blocked the link.
    pub blocked: bool,
    /// From when in-app visitors get the in-app page by the team's plan (`in_app_days`);
    /// `None` for a link no plan decides this for.
    pub in_app_from: Option<Millis>,
}

/// What a hit gives the redirect.
#[derive(Clone, Debug)]
pub struct CacheHit {
    pub id: u64,
    pub url: Arc<str>,
    pub state: Option<Arc<LinkState>>,
    pub blocked: bool,
    pub in_app_from: Option<Millis>,
}

/// Hit and miss counters, shared with `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct CacheCounters {
    pub hits: Counter,
    pub misses: Counter,
}

/// What only some links carry.
struct Extra {
    state: Option<Arc<LinkState>>,
    blocked: bool,
    in_app_from: Option<Millis>,
    /// The state's estimated bytes, worked out once.
    state_bytes: usize,
}

impl Extra {
    /// What the entry's extra part holds besides its slot in the log.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Extra>() + 16 + self.state_bytes
    }
}

/// Entries of a typical size (a 6-character code and an 80-byte URL), to size the tables.
const TYPICAL_ENTRY: usize = HEADER + 6 + 80;
/// A shard's log is cut into segments of at most this many bytes; eviction empties one.
const SEGMENT: usize = 16 * 1024;
/// Segments a shard's log has at least: eviction empties one at a time, so this bounds the
/// share of the cache an eviction forgets at once, and the share left empty after it.
/// (A URL longer than a segment, past 16 KB at the default budget, is not cached.)
const MIN_SEGMENTS: usize = 32;
/// Most shards: each has its own lock, and two cores seldom wait on sixteen.
const MAX_SHARDS: usize = 16;
/// Fewest bytes a shard is given before the cache takes fewer shards.
const MIN_SHARD: usize = 256 * 1024;
/// The bytes a `cache.capacity` entry is given in the log: entries are counted, and this much
/// room each keeps long URLs from evicting before the count is reached.
pub const BYTES_PER_COUNTED: usize = 512;

/// A bounded cache of active mappings.
pub struct RedirectCache {
    shards: Box<[Mutex<Shard<foldhash::fast::RandomState>>]>,
    hasher: foldhash::fast::RandomState,
    ttl_ms: u64,
    counters: CacheCounters,
    /// Counted in entries (`cache.capacity`), not bytes.
    counted: bool,
}

impl RedirectCache {
    /// A cache of at most `capacity` entries (`cache.capacity`).
    pub fn new(capacity: usize, ttl_ms: u64) -> Self {
        let capacity = capacity.max(1);
        // Room enough that a URL of any allowed length is cached whatever the count; pages
        // of the log no entry reached are never resident.
        let bytes = capacity
            .saturating_mul(BYTES_PER_COUNTED)
            .max(MIN_SEGMENTS * SEGMENT);
        Self::build(bytes, capacity, ttl_ms)
    }

    /// A cache whose entries take their bytes, the log and its table at most `bytes`
    /// together (its share of `memory.budget`).
    pub fn with_bytes(bytes: u64, ttl_ms: u64) -> Self {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        Self::build(bytes, usize::MAX, ttl_ms)
    }

    fn build(bytes: usize, max_entries: usize, ttl_ms: u64) -> Self {
        let bytes = bytes.max(2 * (HEADER + 64) * MIN_SEGMENTS);
        let shards = 1 << (bytes / MIN_SHARD).clamp(1, MAX_SHARDS).ilog2();
        let per_shard = bytes / shards;
        let counted = max_entries != usize::MAX;
        let max_per_shard = match max_entries {
            usize::MAX => usize::MAX,
            n => n.div_ceil(shards),
        };
        // The table takes 8 bytes a slot at a load of up to 7/8 ([`table`]); the log has the
        // rest.
        let expected = if counted {
            max_per_shard
        } else {
            per_shard / (TYPICAL_ENTRY + 10)
        };
        let table = table::Table::new(expected).bytes();
        let log = if counted {
            per_shard
        } else {
            per_shard.saturating_sub(table).max(per_shard / 2)
        };
        let segment = (log / MIN_SEGMENTS).min(SEGMENT);
        let segments = log / segment;
        let hasher = foldhash::fast::RandomState::default();
        Self {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(Shard::new(
                        hasher.clone(),
                        segments,
                        segment,
                        expected,
                        max_per_shard,
                    ))
                })
                .collect(),
            hasher,
            ttl_ms,
            counters: CacheCounters::default(),
            counted,
        }
    }

    fn shard(&self, key: &[u8]) -> (u64, &Mutex<Shard<foldhash::fast::RandomState>>) {
        let hash = self.hasher.hash_one(key);
        // The table places by the low bits and tells apart by the top seven: the shard is
        // picked by bits neither uses much.
        let shard = (hash >> 32) as usize & (self.shards.len() - 1);
        (hash, &self.shards[shard])
    }

    /// A fresh entry for `code` that has not expired at `now`.
    pub fn get(&self, code: &str, now: Millis) -> Option<CacheHit> {
        let (hash, shard) = self.shard(code.as_bytes());
        let found = shard.lock().get(hash, code.as_bytes(), now);
        match found {
            Found::Hit { id, url, extra } => {
                self.counters.hits.inc();
                let extra = extra.as_deref();
                Some(CacheHit {
                    id,
                    url,
                    state: extra.and_then(|e| e.state.clone()),
                    blocked: extra.is_some_and(|e| e.blocked),
                    in_app_from: extra.and_then(|e| e.in_app_from),
                })
            }
            Found::Stale | Found::Missing => {
                self.counters.misses.inc();
                None
            }
        }
    }

    pub fn counters(&self) -> &CacheCounters {
        &self.counters
    }

    pub fn insert(&self, code: &str, target: CachedTarget) {
        let CachedTarget {
            id,
            url,
            expires_at,
            cached_at,
            state,
            blocked,
            in_app_from,
        } = target;
        let until = cached_at
            .saturating_add(self.ttl_ms)
            .min(expires_at.unwrap_or(Millis::MAX));
        let extra = (state.is_some() || blocked || in_app_from.is_some()).then(|| {
            let state_bytes = state.as_ref().map_or(0, |s| s.estimated_bytes());
            Arc::new(Extra {
                state,
                blocked,
                in_app_from,
                state_bytes,
            })
        });
        let key = code.as_bytes();
        let (hash, shard) = self.shard(key);
        let mut shard = shard.lock();
        if !shard.fits(key, &url) {
            // Longer than a segment: served from the store each time.
            shard.remove(hash, key);
            return;
        }
        shard.insert(
            hash,
            Entry {
                key,
                id,
                url: &url,
                until,
                extra,
            },
        );
    }

    /// What the entries weigh: their bytes, or their number with `cache.capacity`.
    pub fn weight(&self) -> u64 {
        if self.counted {
            return self.len() as u64;
        }
        self.shards.iter().map(|s| s.lock().live_bytes()).sum()
    }

    /// Bytes the cache holds however full it is: every shard's log and table.
    pub fn footprint(&self) -> usize {
        self.shards.iter().map(|s| s.lock().footprint()).sum()
    }

    /// Forgets a code at once (update, delete, expiry).
    pub fn invalidate(&self, code: &str) {
        let (hash, shard) = self.shard(code.as_bytes());
        shard.lock().remove(hash, code.as_bytes());
    }

    /// Forgets every code (changes made elsewhere may have been missed).
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            shard.lock().clear();
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(expires_at: Option<Millis>, cached_at: Millis) -> CachedTarget {
        CachedTarget {
            id: 1,
            url: "https://example.com/".into(),
            expires_at,
            cached_at,
            state: None,
            blocked: false,
            in_app_from: None,
        }
    }

    #[test]
    fn hits_stop_at_the_cache_ttl_and_at_the_link_expiry() {
        let cache = RedirectCache::new(10, 1000);
        cache.insert("a", target(None, 0));
        assert!(cache.get("a", 999).is_some());
        assert!(cache.get("a", 1000).is_none());
        cache.insert("b", target(Some(500), 0));
        assert!(cache.get("b", 499).is_some());
        assert!(
            cache.get("b", 500).is_none(),
            "an expired link is never served"
        );
        cache.insert("c", target(None, 0));
        cache.invalidate("c");
        assert!(cache.get("c", 1).is_none());
    }

    #[test]
    fn entries_read_back_as_they_went_in() {
        let cache = RedirectCache::new(10, 1000);
        let mut rich = target(Some(900), 5);
        rich.blocked = true;
        rich.in_app_from = Some(3);
        cache.insert("rich", rich);
        cache.insert("plain", target(None, 5));
        cache.insert("中文@7", target(None, 5));
        let rich = cache.get("rich", 10).expect("cached");
        assert!(rich.blocked && rich.in_app_from == Some(3) && rich.state.is_none());
        let plain = cache.get("plain", 10).expect("cached");
        assert!(!plain.blocked && plain.in_app_from.is_none());
        assert_eq!(&*plain.url, "https://example.com/");
        assert!(cache.get("中文@7", 10).is_some() && cache.get("中文", 10).is_none());
        // A key longer than its length's field is not cached (nothing that long is a code).
        let long_key = "k".repeat(300);
        cache.insert(&long_key, target(None, 5));
        assert!(cache.get(&long_key, 10).is_none());
        // A replaced entry reads as the new one, and counts once.
        let mut again = target(None, 5);
        again.url = "https://example.org/new".into();
        cache.insert("plain", again);
        assert_eq!(
            &*cache.get("plain", 10).expect("cached").url,
            "https://example.org/new"
        );
        assert_eq!(cache.len(), 3);
        cache.clear();
        assert!(cache.is_empty() && cache.get("rich", 10).is_none());
    }

    fn url(n: usize) -> CachedTarget {
        CachedTarget {
            url: format!("https://example.com/{}", "x".repeat(n)).into(),
            ..target(None, 0)
        }
    }

    #[test]
    fn a_cache_bounded_in_bytes_holds_fewer_long_urls() {
        let short = RedirectCache::with_bytes(256 * 1024, 1000);
        let long = RedirectCache::with_bytes(256 * 1024, 1000);
        for i in 0..20_000 {
            short.insert(&format!("s{i}"), url(10));
            long.insert(&format!("l{i}"), url(2000));
        }
        assert!(
            short.footprint() <= 256 * 1024 && long.footprint() <= 256 * 1024,
            "{} and {} bytes",
            short.footprint(),
            long.footprint()
        );
        assert!(short.weight() <= 256 * 1024 && long.weight() <= 256 * 1024);
        assert!(long.len() < 130, "{} long entries", long.len());
        assert!(long.len() > 80, "{} long entries", long.len());
        assert!(short.len() > 15 * long.len(), "{} short", short.len());
        // The table is first sized for 80-byte URLs (about 2,240 entries here); entries of
        // 56 bytes fill the log's bytes instead, the table doubled out of its unwritten end.
        assert!(short.len() > 3_400, "{} short entries", short.len());
        // An entry weighs its header, key and URL.
        let one = RedirectCache::with_bytes(1 << 20, 1000);
        one.insert("abc", url(10));
        assert_eq!(one.weight(), (HEADER + 3 + 30) as u64);
        // Longer than a segment: not cached, and an older entry for the key goes.
        let small = RedirectCache::with_bytes(0, 1000);
        small.insert("big", url(10));
        assert!(small.get("big", 1).is_some());
        small.insert("big", url(100_000));
        assert!(small.get("big", 1).is_none() && small.is_empty());
    }

    #[test]
    fn a_counted_cache_holds_its_count() {
        let counted = RedirectCache::new(10, 1000);
        for i in 0..100 {
            counted.insert(&format!("c{i}"), url(2000));
            assert!(counted.len() <= 10);
        }
        // Past its count a shard (two here, five entries each) empties its oldest segment,
        // which holds up to four entries of URLs this long: each keeps at least its newest.
        assert!(counted.len() >= 2 && counted.weight() == counted.len() as u64);
        assert!(counted.get("c99", 1).is_some(), "the newest stays");
    }

    #[test]
    fn eviction_keeps_what_is_read() {
        // About 2,000 entries fit; 200 are read between every 100 new ones.
        let cache = RedirectCache::with_bytes(256 * 1024, u64::MAX / 2);
        for i in 0..200 {
            cache.insert(&format!("hot{i}"), url(60));
        }
        for round in 0..200 {
            for i in 0..100 {
                cache.insert(&format!("cold{round}-{i}"), url(60));
            }
            for i in 0..200 {
                assert!(
                    cache.get(&format!("hot{i}"), 1).is_some(),
                    "hot{i} evicted in round {round}"
                );
            }
        }
        assert!(cache.get("cold0-0", 1).is_none(), "the cold go");
        let held = cache.len();
        assert!(held > 1_500, "{held} entries in 256 KiB");
        // Invalidated entries free their room when their segment is emptied.
        for i in 0..200 {
            cache.invalidate(&format!("hot{i}"));
        }
        assert_eq!(cache.len(), held - 200);
        assert!(cache.get("hot3", 1).is_none());
    }

    #[test]
    fn entries_with_extra_parts_give_them_back_when_they_go() {
        let cache = RedirectCache::with_bytes(256 * 1024, u64::MAX / 2);
        for i in 0..10_000 {
            let mut t = url(40);
            t.in_app_from = Some(i);
            cache.insert(&format!("e{i}"), t);
        }
        let held = cache.len();
        assert!(held > 500, "{held}");
        let newest = cache.get("e9999", 1).expect("cached");
        assert_eq!(newest.in_app_from, Some(9999));
        for i in 0..10_000 {
            if let Some(hit) = cache.get(&format!("e{i}"), 1) {
                assert_eq!(hit.in_app_from, Some(i), "e{i} reads its own part");
            }
        }
    }

    #[test]
    fn random_use_never_serves_a_wrong_or_removed_entry() {
        // A small cache (a few hundred entries, many evictions) against a model of what was
        // last written and removed: a hit is always the key's last URL, never a removed one.
        let cache = RedirectCache::with_bytes(64 * 1024, u64::MAX / 2);
        let mut model: std::collections::HashMap<u32, Option<u32>> = Default::default();
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        for version in 0..200_000u32 {
            let key = next() % 2_000;
            let code = format!("k{key}");
            match next() % 10 {
                0 => {
                    cache.invalidate(&code);
                    model.insert(key, None);
                }
                1..=4 => {
                    let mut t = url((next() % 300) as usize);
                    t.id = u64::from(version);
                    if next() % 4 == 0 {
                        t.in_app_from = Some(u64::from(version));
                    }
                    cache.insert(&code, t);
                    model.insert(key, Some(version));
                }
                _ => {
                    if let Some(hit) = cache.get(&code, 1) {
                        let want = model.get(&key).copied().flatten();
                        assert_eq!(Some(hit.id as u32), want, "{code}");
                        assert!(hit.in_app_from.is_none_or(|v| v == hit.id));
                    }
                }
            }
        }
        assert!(cache.footprint() <= 64 * 1024);
    }

    #[test]
    fn threads_share_it() {
        let cache = Arc::new(RedirectCache::with_bytes(128 * 1024, u64::MAX / 2));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    for i in 0..50_000u64 {
                        let key = format!("c{}", (i * 7 + t) % 3_000);
                        match i % 5 {
                            0 => cache.invalidate(&key),
                            1 | 2 => cache.insert(
                                &key,
                                CachedTarget {
                                    url: format!("https://example.com/{key}").into(),
                                    ..target(None, 0)
                                },
                            ),
                            _ => {
                                if let Some(hit) = cache.get(&key, 1) {
                                    assert_eq!(&*hit.url, format!("https://example.com/{key}"));
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("no panic");
        }
        assert!(cache.len() <= 3_000);
    }
}
