//! The redirect cache: code → target, in process (quick_cache), read-through from the active
//! mapping. Entries carry their insert time and their link's expiry, so a hit past either is a
//! miss. Only the link service, its parent, fills or invalidates it.
//!
//! Bounded in bytes (its share of `memory.budget`): each entry weighs an estimate of what it
//! holds, so that long URLs and links with options take more of the cache than short plain
//! ones. With `cache.capacity` set it counts entries instead, each weighing one.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::LinkState;
use crate::model::Millis;

/// What a cached redirect needs.
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

/// Hit and miss counters, shared with `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct CacheCounters {
    pub hits: Counter,
    pub misses: Counter,
}

/// What an entry holds besides its code and URL: the key's and the value's own bytes, the
/// `Arc` header of the URL, the cache's slot (a resident's, and the share of a ghost's: the
/// cache remembers the hashes of recently evicted codes in slots of the same size) and hash
/// table share. Measured: a heap profile (heaptrack) of the loaded server at 1 M links held
/// 35 MB in a cache weighed at 19 MB with 128 here; with 260, quick_cache filled to a bound of
/// 17.6 MB with 6-character codes and 35-byte URLs allocated 20.4 MB (349 bytes an entry),
/// so 310 weighs what the cache holds.
pub const ENTRY_OVERHEAD: usize = 310;
/// Entries of a typical weight (a 6-character code and a URL of about a hundred bytes), to
/// size the cache's table when it is bounded in bytes.
const TYPICAL_ENTRY: u64 = 256;

/// A cached target and its weight, worked out once when it is inserted (the weighter is
/// called during eviction and must be cheap).
#[derive(Clone)]
struct Entry {
    target: CachedTarget,
    weight: u64,
}

/// Reads an entry's stored weight.
#[derive(Clone, Copy)]
struct ByWeight;

impl Weighter<Box<str>, Entry> for ByWeight {
    fn weight(&self, _code: &Box<str>, entry: &Entry) -> u64 {
        entry.weight
    }
}

/// A bounded cache of active mappings.
pub struct RedirectCache {
    entries: Cache<Box<str>, Entry, ByWeight>,
    /// Entries weigh their estimated bytes (else one each).
    by_bytes: bool,
    ttl_ms: u64,
    counters: CacheCounters,
}

impl RedirectCache {
    /// A cache of at most `capacity` entries (`cache.capacity`).
    pub fn new(capacity: usize, ttl_ms: u64) -> Self {
        let capacity = capacity.max(1);
        Self {
            entries: Cache::with_weighter(capacity, capacity as u64, ByWeight),
            by_bytes: false,
            ttl_ms,
            counters: CacheCounters::default(),
        }
    }

    /// A cache whose entries weigh their estimated bytes, at most `bytes` together (its share
    /// of `memory.budget`).
    pub fn with_bytes(bytes: u64, ttl_ms: u64) -> Self {
        let bytes = bytes.max(TYPICAL_ENTRY);
        let items = usize::try_from(bytes / TYPICAL_ENTRY).unwrap_or(usize::MAX);
        Self {
            entries: Cache::with_weighter(items, bytes, ByWeight),
            by_bytes: true,
            ttl_ms,
            counters: CacheCounters::default(),
        }
    }

    /// What an entry for `code` holds, estimated: its strings, the entry, the link's state.
    pub fn weight_of(code: &str, target: &CachedTarget) -> u64 {
        let state = target.state.as_ref().map_or(0, |s| s.estimated_bytes());
        (code.len() + target.url.len() + ENTRY_OVERHEAD + state) as u64
    }

    /// A fresh entry for `code` that has not expired at `now`.
    pub fn get(&self, code: &str, now: Millis) -> Option<CachedTarget> {
        let Some(Entry { target: hit, .. }) = self.entries.get(code) else {
            self.counters.misses.inc();
            return None;
        };
        let fresh = now < hit.cached_at.saturating_add(self.ttl_ms);
        let live = hit.expires_at.is_none_or(|at| now < at);
        if fresh && live {
            self.counters.hits.inc();
            Some(hit)
        } else {
            self.counters.misses.inc();
            self.entries.remove(code);
            None
        }
    }

    pub fn counters(&self) -> &CacheCounters {
        &self.counters
    }

    pub fn insert(&self, code: &str, target: CachedTarget) {
        let weight = if self.by_bytes {
            Self::weight_of(code, &target)
        } else {
            1
        };
        self.entries.insert(code.into(), Entry { target, weight });
    }

    /// The entries' weight: bytes, or entries with `cache.capacity`.
    pub fn weight(&self) -> u64 {
        self.entries.weight()
    }

    /// Forgets a code at once (update, delete, expiry).
    pub fn invalidate(&self, code: &str) {
        self.entries.remove(code);
    }

    /// Forgets every code (changes made elsewhere may have been missed).
    pub fn clear(&self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.len() == 0
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
    fn a_cache_bounded_in_bytes_holds_fewer_long_urls() {
        let url = |n: usize| -> CachedTarget {
            CachedTarget {
                url: format!("https://example.com/{}", "x".repeat(n)).into(),
                ..target(None, 0)
            }
        };
        let short = RedirectCache::with_bytes(64 * 1024, 1000);
        let long = RedirectCache::with_bytes(64 * 1024, 1000);
        for i in 0..2000 {
            short.insert(&format!("s{i}"), url(10));
            long.insert(&format!("l{i}"), url(2000));
        }
        assert!(short.weight() <= 64 * 1024 && long.weight() <= 64 * 1024);
        assert!(long.len() < 40, "{} long entries", long.len());
        assert!(
            short.len() > 5 * long.len(),
            "{} short entries",
            short.len()
        );
        assert_eq!(
            RedirectCache::weight_of("abc", &url(10)),
            (3 + 30 + ENTRY_OVERHEAD) as u64
        );
        // Counted in entries, as `cache.capacity` asks.
        let counted = RedirectCache::new(10, 1000);
        for i in 0..100 {
            counted.insert(&format!("c{i}"), url(2000));
        }
        assert!(counted.len() <= 10 && counted.weight() == counted.len() as u64);
    }
}
