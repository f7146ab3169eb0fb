//! Durable creates through the store, side by side in one run: one writer (every create waits
//! for its own flush) against 64 concurrent writers (group commit shares flushes), in both
//! durability modes. Prints creates/s, flushes and the ratio.
//!
//! `cargo bench --bench store_create` (env SECONDS=5 per scenario by default).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vshortlink::clock::{Clock, SystemClock};
use vshortlink::config::Config;
use vshortlink::pools::Pools;
use vshortlink::store::prelude::*;
use vshortlink::store::sled::{SledStore, StoreOptions};
use vshortlink::store::{CodeChoice, Durability, NewLink, Store};

struct Outcome {
    per_second: f64,
    flushes: u64,
}

fn run(durability: Durability, writers: usize, seconds: u64) -> Outcome {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut options = StoreOptions::new(dir.path());
    options.durability = durability;
    let store = SledStore::open(&options).expect("open");
    // The default tier (batch 1000, low_water 100) with the background refill running, as in
    // the server; the pool starts with PREFILL codes (default 20000).
    let config = Config::from_toml("").expect("config");
    let dyn_store: Arc<dyn Store> = store.clone();
    let pools = Arc::new(Pools::new(dyn_store, Arc::new(SystemClock), &config).expect("pools"));
    let prefill = std::env::var("PREFILL")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    pools.refill(6, prefill).expect("prefill");
    pools.start_background().expect("refill worker");
    let flushes_before = store.commit_stats().flushes;
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (pools, stop, done) = (pools.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let new = NewLink {
                        code: CodeChoice::Pool(6),
                        url: format!("https://example.com/{w}/{i}"),
                        space: "default".into(),
                        expires_at: None,
                        title: None,
                        tags: vec![],
                        options: None,
                        domain: 0,
                        dedup: true,
                        now: SystemClock.now(),
                    };
                    pools.create(&new).expect("create");
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("writer");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let flushes = store.commit_stats().flushes - flushes_before;
    pools.stop_background();
    store.close().expect("close");
    Outcome {
        per_second: done.load(Ordering::Relaxed) as f64 / elapsed,
        flushes,
    }
}

fn main() {
    let seconds: u64 = std::env::var("SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!("durable creates through the store, {seconds}s per scenario");
    println!(
        "{:<10} {:>8} {:>12} {:>10} {:>16}",
        "mode", "writers", "creates/s", "flushes", "creates/flush"
    );
    for durability in [Durability::Process, Durability::Power] {
        let mut results = Vec::new();
        for writers in [1, 64] {
            let o = run(durability, writers, seconds);
            let total = o.per_second * seconds as f64;
            println!(
                "{:<10} {:>8} {:>12.0} {:>10} {:>16.1}",
                format!("{durability:?}").to_lowercase(),
                writers,
                o.per_second,
                o.flushes,
                total / o.flushes.max(1) as f64
            );
            results.push(o.per_second);
        }
        println!(
            "{:<10} group commit: 64 writers = {:.1}x one writer",
            "",
            results[1] / results[0]
        );
    }
}
