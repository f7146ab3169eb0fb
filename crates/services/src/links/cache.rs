//! The redirect cache: code → target, in process (quick_cache), read-through from the active
//! mapping. Entries carry their insert time and their link's expiry, so a hit past either is a
//! miss. Only the link service, its parent, fills or invalidates it.
//!
//! Bounded in bytes (its share of `memory.budget`): each entry weighs what it holds, so that
//! long URLs and links with options take more of the cache than short plain ones. With
//! `cache.capacity` set it counts entries instead, each weighing one.
//!
//! Compact, so that a small team's links stay cached whole at the default budget: a key of up
//! to 18 ASCII characters (every generated code, nearly every custom one, with the domain the
//! link service appends) is packed into two words instead of a string of its own; a plain
//! link's entry is its URL, id, expiry and fill time, and what only some links carry (options,
//! a review's block, a plan's in-app day) sits behind one pointer that plain links leave empty.
//! `examples/cache_footprint.rs` measures an entry with a heap profiler.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

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

/// What an entry costs besides its URL and a key too long to pack: the URL's `Arc` header,
/// the entry in quick_cache's slab and its share of the ghosts' (the hashes of evicted codes,
/// kept in slots of the same size), the hash table's share, the allocator's rounding of the
/// URL. Measured by `examples/cache_footprint.rs` (100,000 plain links with 80-byte URLs and
/// 6-character codes): 218 bytes an entry in the heap profile (dhat), 208 resident when the
/// cache first fills and 236 once as many again were evicted (its ghosts, the allocator's
/// free lists). Before this layout: 266 in the heap profile and about 350 resident.
pub const ENTRY_OVERHEAD: usize = 160;
/// Entries of a typical weight (a URL of about a hundred bytes), to size the cache's table
/// when it is bounded in bytes.
const TYPICAL_ENTRY: u64 = 250;
/// The evicted codes remembered, as a share of the estimated entries ([`table`]).
const GHOST_SHARE: f64 = 0.25;
/// The longest key packed into two words: 9 characters of 7 bits in each.
const PACKED_LEN: usize = 18;

/// A code (with its domain, as the link service writes it) as the cache keys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// Up to [`PACKED_LEN`] ASCII characters, 7 bits each; a zero ends the key.
    Packed([u64; 2]),
    /// Anything longer, or not ASCII.
    Text(Box<str>),
}

impl Key {
    fn of(code: &str) -> Key {
        let bytes = code.as_bytes();
        if bytes.len() > PACKED_LEN || !bytes.iter().all(|b| (1..0x80).contains(b)) {
            return Key::Text(code.into());
        }
        let mut words = [0u64; 2];
        for (i, &b) in bytes.iter().enumerate() {
            words[i / 9] |= u64::from(b) << (7 * (i % 9));
        }
        Key::Packed(words)
    }

    /// Bytes the key holds outside the entry.
    fn heap_bytes(&self) -> usize {
        match self {
            Key::Packed(_) => 0,
            Key::Text(text) => text.len(),
        }
    }
}

/// An entry as the cache holds it; [`CachedTarget`] is what it is read as.
#[derive(Clone)]
struct Stored {
    url: Arc<str>,
    id: u64,
    /// `Millis::MAX`: the link does not expire.
    expires_at: Millis,
    cached_at: Millis,
    /// `None` for a plain link.
    extra: Option<Arc<Extra>>,
}

/// What only some links carry.
struct Extra {
    state: Option<Arc<LinkState>>,
    blocked: bool,
    in_app_from: Option<Millis>,
    /// The state's estimated bytes, worked out once (the weighter runs during eviction).
    state_bytes: u64,
}

impl Stored {
    fn of(target: CachedTarget) -> Stored {
        let CachedTarget {
            id,
            url,
            expires_at,
            cached_at,
            state,
            blocked,
            in_app_from,
        } = target;
        let extra = (state.is_some() || blocked || in_app_from.is_some()).then(|| {
            let state_bytes = state.as_ref().map_or(0, |s| s.estimated_bytes() as u64);
            Arc::new(Extra {
                state,
                blocked,
                in_app_from,
                state_bytes,
            })
        });
        Stored {
            url,
            id,
            expires_at: expires_at.unwrap_or(Millis::MAX),
            cached_at,
            extra,
        }
    }

    fn target(&self) -> CachedTarget {
        let extra = self.extra.as_deref();
        CachedTarget {
            id: self.id,
            url: self.url.clone(),
            expires_at: (self.expires_at != Millis::MAX).then_some(self.expires_at),
            cached_at: self.cached_at,
            state: extra.and_then(|e| e.state.clone()),
            blocked: extra.is_some_and(|e| e.blocked),
            in_app_from: extra.and_then(|e| e.in_app_from),
        }
    }
}

/// Weighs an entry: its bytes, or one with `cache.capacity`.
#[derive(Clone, Copy)]
struct ByWeight {
    by_bytes: bool,
}

impl Weighter<Key, Stored> for ByWeight {
    fn weight(&self, key: &Key, stored: &Stored) -> u64 {
        if !self.by_bytes {
            return 1;
        }
        let extra = stored
            .extra
            .as_ref()
            .map_or(0, |e| std::mem::size_of::<Extra>() as u64 + e.state_bytes);
        (key.heap_bytes() + stored.url.len() + ENTRY_OVERHEAD) as u64 + extra
    }
}

/// quick_cache with a quarter of the estimated entries remembered as ghosts (the hashes of
/// evicted codes, which let a code seen again come back as hot): its default of a half cost a
/// slot of the entry's size for every second entry, about 20 bytes an entry more.
fn table(items: usize, weight: u64, weigher: ByWeight) -> Cache<Key, Stored, ByWeight> {
    let options = OptionsBuilder::new()
        .estimated_items_capacity(items)
        .weight_capacity(weight)
        .ghost_allocation(GHOST_SHARE)
        .build();
    match options {
        Ok(options) => {
            Cache::with_options(options, weigher, Default::default(), Default::default())
        }
        // Only an unset capacity is refused, and both are set above.
        Err(_) => Cache::with_weighter(items, weight, weigher),
    }
}

/// A bounded cache of active mappings.
pub struct RedirectCache {
    entries: Cache<Key, Stored, ByWeight>,
    ttl_ms: u64,
    counters: CacheCounters,
}

impl RedirectCache {
    /// A cache of at most `capacity` entries (`cache.capacity`).
    pub fn new(capacity: usize, ttl_ms: u64) -> Self {
        let capacity = capacity.max(1);
        Self {
            entries: table(capacity, capacity as u64, ByWeight { by_bytes: false }),
            ttl_ms,
            counters: CacheCounters::default(),
        }
    }

    /// A cache whose entries weigh their bytes, at most `bytes` together (its share of
    /// `memory.budget`).
    pub fn with_bytes(bytes: u64, ttl_ms: u64) -> Self {
        let bytes = bytes.max(TYPICAL_ENTRY);
        let items = usize::try_from(bytes / TYPICAL_ENTRY).unwrap_or(usize::MAX);
        Self {
            entries: table(items, bytes, ByWeight { by_bytes: true }),
            ttl_ms,
            counters: CacheCounters::default(),
        }
    }

    /// A fresh entry for `code` that has not expired at `now`.
    pub fn get(&self, code: &str, now: Millis) -> Option<CachedTarget> {
        let key = Key::of(code);
        let Some(hit) = self.entries.get(&key) else {
            self.counters.misses.inc();
            return None;
        };
        let fresh = now < hit.cached_at.saturating_add(self.ttl_ms);
        if fresh && now < hit.expires_at {
            self.counters.hits.inc();
            Some(hit.target())
        } else {
            self.counters.misses.inc();
            self.entries.remove(&key);
            None
        }
    }

    pub fn counters(&self) -> &CacheCounters {
        &self.counters
    }

    pub fn insert(&self, code: &str, target: CachedTarget) {
        self.entries.insert(Key::of(code), Stored::of(target));
    }

    /// The entries' weight: bytes, or entries with `cache.capacity`.
    pub fn weight(&self) -> u64 {
        self.entries.weight()
    }

    /// Forgets a code at once (update, delete, expiry).
    pub fn invalidate(&self, code: &str) {
        self.entries.remove(&Key::of(code));
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
    fn keys_pack_without_colliding() {
        let codes = [
            "a",
            "a0",
            "0a",
            "abcdefghi",
            "abcdefghij",
            "abcdefghijklmnopqr",
            "x@7",
        ];
        let keys: std::collections::HashSet<Key> = codes.iter().map(|c| Key::of(c)).collect();
        assert_eq!(keys.len(), codes.len());
        assert!(codes.iter().all(|c| matches!(Key::of(c), Key::Packed(_))));
        assert!(matches!(Key::of("abcdefghijklmnopqrs"), Key::Text(_)));
        assert!(matches!(Key::of("中文"), Key::Text(_)));
        // Entries with and without the rarer parts read back as they went in.
        let cache = RedirectCache::new(10, 1000);
        let mut rich = target(Some(900), 5);
        rich.blocked = true;
        rich.in_app_from = Some(3);
        cache.insert("rich", rich);
        cache.insert("plain", target(None, 5));
        let rich = cache.get("rich", 10).expect("cached");
        assert!(rich.blocked && rich.in_app_from == Some(3) && rich.expires_at == Some(900));
        let plain = cache.get("plain", 10).expect("cached");
        assert!(!plain.blocked && plain.in_app_from.is_none() && plain.expires_at.is_none());
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
        // A packed key weighs nothing beyond the entry; a long one its bytes.
        let one = RedirectCache::with_bytes(1 << 20, 1000);
        one.insert("abc", url(10));
        assert_eq!(one.weight(), (30 + ENTRY_OVERHEAD) as u64);
        let long_key = "a-custom-code-longer-than-eighteen";
        one.insert(long_key, url(10));
        assert_eq!(
            one.weight(),
            (2 * (30 + ENTRY_OVERHEAD) + long_key.len()) as u64
        );
        // Counted in entries, as `cache.capacity` asks.
        let counted = RedirectCache::new(10, 1000);
        for i in 0..100 {
            counted.insert(&format!("c{i}"), url(2000));
        }
        assert!(counted.len() <= 10 && counted.weight() == counted.len() as u64);
    }
}
