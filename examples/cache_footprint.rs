//! Measures what the redirect cache holds per entry, with a heap profiler (dhat): fills a
//! cache bounded far above what it is given with `N` plain links (6-character codes, 80-byte
//! URLs, and the same codes on a second domain), and prints the heap bytes an entry costs,
//! beside the weight the cache counts for it. The README's "links the default budget holds"
//! comes from here.
//! Usage: `cargo run --release --example cache_footprint [N]` (default 100,000).

use std::sync::Arc;

use vshortlink::links::cache::{CachedTarget, RedirectCache};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn url(i: usize) -> Arc<str> {
    // 80 bytes, like a typical long link with a path and a query.
    let s = format!("https://www.example.com/products/catalogue/item?id={i:010}&utm_source=mail");
    format!("{s:x<80}").into()
}

fn code(i: usize) -> String {
    vshortlink::codes::encode(62u64.pow(5) + i as u64)
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// A plain link's entry (no options, no review, no plan).
fn plain(id: u64, url: &str) -> CachedTarget {
    CachedTarget {
        id,
        url: Arc::from(url),
        expires_at: None,
        cached_at: 1,
        state: None,
        blocked: false,
        in_app_from: None,
    }
}

fn measure(label: &str, n: usize, key: impl Fn(usize) -> String) {
    // The keys and URLs are made before the count starts: the cache keeps its own copies.
    let items: Vec<(String, Arc<str>)> = (0..n).map(|i| (key(i), url(i))).collect();
    let before = dhat::HeapStats::get().curr_bytes;

    // Bounded as the budget bounds it, just above what the entries weigh: its table is sized
    // from the bound, and a full cache is what the budget pays for.
    let weight = (vshortlink::links::cache::ENTRY_OVERHEAD + 80) as u64;
    let cache = RedirectCache::with_bytes(n as u64 * (weight + 8), u64::MAX / 2);
    for (i, (k, u)) in items.iter().enumerate() {
        cache.insert(k, plain(i as u64, u));
    }
    let after = dhat::HeapStats::get().curr_bytes;
    assert_eq!(cache.len(), n, "every entry stays");
    println!(
        "{label}: {n} entries, {:.0} heap bytes an entry, weighed at {:.0}",
        (after - before) as f64 / n as f64,
        cache.weight() as f64 / n as f64
    );
    drop(cache);
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    // First the resident set, with nothing tracking the heap (dhat's own books would count).
    let items: Vec<(String, Arc<str>)> = (0..n).map(|i| (code(i), url(i))).collect();
    let before = rss_bytes();
    let weight = (vshortlink::links::cache::ENTRY_OVERHEAD + 80) as u64;
    let cache = RedirectCache::with_bytes(n as u64 * (weight + 8), u64::MAX / 2);
    for (i, (k, u)) in items.iter().enumerate() {
        cache.insert(k, plain(i as u64, u));
    }
    let full = rss_bytes().saturating_sub(before);
    println!(
        "resident set: {:.0} bytes an entry ({} entries)",
        full as f64 / cache.len() as f64,
        cache.len()
    );
    // As many again, evicting: the cache now also remembers evicted codes (its ghosts).
    let more: Vec<(String, Arc<str>)> = (n..2 * n).map(|i| (code(i), url(i))).collect();
    let before_more = rss_bytes();
    for (i, (k, u)) in more.iter().enumerate() {
        cache.insert(k, plain(i as u64, u));
    }
    let grown = rss_bytes().saturating_sub(before_more);
    println!(
        "resident set after as many evictions: {:.0} bytes an entry ({} entries, {:.1} MB more)",
        (full + grown) as f64 / cache.len() as f64,
        cache.len(),
        grown as f64 / 1e6
    );
    drop(more);
    drop((cache, items));
    let _profiler = dhat::Profiler::builder().testing().build();
    measure("default domain, 6-character codes", n, code);
    measure("a second domain (code@id keys)", n, |i| {
        format!("{}@7", code(i))
    });
}
