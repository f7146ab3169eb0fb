//! Measures what the redirect cache holds per entry, with a heap profiler (dhat): gives a
//! cache `N` × 120 bytes, fills it twice over with plain links (6-character codes, 80-byte
//! URLs, the same codes on a second domain, then URLs of 26 bytes), and prints the heap bytes
//! each entry it holds costs, beside the bytes it takes in the log. The README's "links the default budget
//! holds" comes from here.
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

/// 26 bytes or so, the benchmark's (`https://example.com/{i}`): the table, sized for 80-byte
/// URLs, doubles out of the log's unwritten bytes to hold more of them.
fn short_url(i: usize) -> Arc<str> {
    format!("https://example.com/{}", 100_000 + i).into()
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

/// A budget of `n` entries at 120 bytes: the figure printed is what one entry costs when
/// the cache is full, its log and its table included.
fn budget(n: usize) -> u64 {
    n as u64 * 120
}

fn measure(label: &str, n: usize, key: impl Fn(usize) -> String, url: impl Fn(usize) -> Arc<str>) {
    // The keys and URLs are made before the count starts: the cache keeps its own copies.
    let items: Vec<(String, Arc<str>)> = (0..2 * n).map(|i| (key(i), url(i))).collect();
    let before = dhat::HeapStats::get().curr_bytes;
    // Filled twice over: a full cache, evicting, is what the budget pays for.
    let cache = RedirectCache::with_bytes(budget(n), u64::MAX / 2);
    for (i, (k, u)) in items.iter().enumerate() {
        cache.insert(k, plain(i as u64, u));
    }
    let after = dhat::HeapStats::get().curr_bytes;
    println!(
        "{label}: {} entries held in {:.1} MB, {:.0} heap bytes an entry, {:.0} in the log",
        cache.len(),
        (after - before) as f64 / 1e6,
        (after - before) as f64 / cache.len() as f64,
        cache.weight() as f64 / cache.len() as f64
    );
    drop(cache);
}

/// What filling a cache of `n` × 120 bytes twice over adds to the resident set.
fn resident(label: &str, n: usize, url: impl Fn(usize) -> Arc<str>) {
    let items: Vec<(String, Arc<str>)> = (0..2 * n).map(|i| (code(i), url(i))).collect();
    let before = rss_bytes();
    let cache = RedirectCache::with_bytes(budget(n), u64::MAX / 2);
    for (i, (k, u)) in items.iter().enumerate() {
        cache.insert(k, plain(i as u64, u));
    }
    let full = rss_bytes().saturating_sub(before);
    println!(
        "resident set, {label}: {:.1} MB of {:.1}, {:.0} bytes an entry ({} entries held after \
         {} inserts)",
        full as f64 / 1e6,
        budget(n) as f64 / 1e6,
        full as f64 / cache.len() as f64,
        cache.len(),
        2 * n
    );
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    // First the resident set, with nothing tracking the heap (dhat's own books would count).
    resident("80-byte URLs", n, url);
    resident("26-byte URLs", n, short_url);
    let _profiler = dhat::Profiler::builder().testing().build();
    measure("default domain, 6-character codes", n, code, url);
    measure(
        "a second domain (code@id keys)",
        n,
        |i| format!("{}@7", code(i)),
        url,
    );
    measure("26-byte URLs", n, code, short_url);
}
