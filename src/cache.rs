//! The redirect cache: code → target, in process (quick_cache), read-through from the active
//! mapping. Entries carry their insert time and their link's expiry, so a hit past either is a
//! miss. Only the domain service ([`crate::links`]) fills or invalidates it.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use quick_cache::sync::Cache;

use crate::links::LinkState;
use crate::store::Millis;

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
}

/// Hit and miss counters, shared with `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct CacheCounters {
    pub hits: Counter,
    pub misses: Counter,
}

/// A bounded cache of active mappings.
pub struct RedirectCache {
    entries: Cache<Box<str>, CachedTarget>,
    ttl_ms: u64,
    counters: CacheCounters,
}

impl RedirectCache {
    pub fn new(capacity: usize, ttl_ms: u64) -> Self {
        Self {
            entries: Cache::new(capacity.max(1)),
            ttl_ms,
            counters: CacheCounters::default(),
        }
    }

    /// A fresh entry for `code` that has not expired at `now`.
    pub fn get(&self, code: &str, now: Millis) -> Option<CachedTarget> {
        let Some(hit) = self.entries.get(code) else {
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
        self.entries.insert(code.into(), target);
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
}
