//! The visit writer's sustained throughput, side by side in one run:
//!
//! - `pipeline`: visits offered to the [`Recorder`] as fast as one task can (the redirect's
//!   side), drained by the writer task in batches: user-agent parsing, geolocation (when
//!   `GEO_DB` names an .mmdb), client id, then one store transaction and one flush per batch.
//!   Reports visits/s from the first offer to the last durable write.
//! - `store only`: the same number of already-enriched visits written in the writer's batches
//!   straight through `Store::record_visits`, to show what enrichment costs.
//!
//! `cargo bench --bench visit_writer` (env VISITS=200000, LINKS=10000, DURABILITY=process;
//! HELD_BYTES, each held part's bound in bytes: 15000000 is about the default budget's).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use vshortlink::clock::SystemClock;
use vshortlink::config::Config;
use vshortlink::model::{NewVisit, Visit};
use vshortlink::store::sled::{SledStore, StoreOptions};
use vshortlink::store::{Durability, Store};
use vshortlink::visits::recorder::JournalOptions;
use vshortlink::visits::recorder::MAX_PENDING;
use vshortlink::visits::Recorder;

const AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "curl/8.5.0",
];

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn open(durability: Durability) -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut options = StoreOptions::new(dir.path());
    options.durability = durability;
    // The default `memory.budget` gives each held part about 15 MB: folds then come as often
    // as they do in the server, where StoreOptions' own bound is far larger.
    if let Some(bytes) = std::env::var("HELD_BYTES")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        options.held_counts_bytes = bytes;
        options.held_index_bytes = bytes;
    }
    let store: Arc<dyn Store> = SledStore::open(&options).expect("open");
    (dir, store)
}

fn ip(i: u64) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x5100_0000u32 | (i % 5_000) as u32))
}

async fn pipeline(durability: Durability, visits: u64, links: u64) -> (f64, f64) {
    let (_dir, store) = open(durability);
    let geo = std::env::var("GEO_DB").unwrap_or_default();
    let queue = visits as usize;
    let toml = format!("[visits]\nqueue = {queue}\ngeo_db = \"{geo}\"\n");
    let config = Config::from_toml(&toml).expect("config");
    let journal = _dir.path().join("journal");
    let recorder = Recorder::start(
        &config.visits,
        vshortlink::memory::Bounds::derive(&config)
            .expect("bounds")
            .visit_writer(),
        JournalOptions {
            dir: &journal,
            sync: durability == Durability::Power,
        },
        store,
        Arc::new(SystemClock),
    )
    .expect("start");
    let agents: Vec<HeaderValue> = AGENTS.iter().map(|a| HeaderValue::from_static(a)).collect();
    let referer = HeaderValue::from_static("https://news.example.org/item?id=1");
    let started = Instant::now();
    for i in 0..visits {
        let agent = &agents[(i % agents.len() as u64) as usize];
        recorder.record(
            i % links,
            "abcdef",
            ip(i),
            Some(agent),
            Some(&referer),
            None,
        );
        if i % 4096 == 0 {
            tokio::task::yield_now().await; // let the writer run beside the offers
        }
    }
    let metrics = recorder.metrics().clone();
    while metrics.written.get() + metrics.failed.get() < visits {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let took = started.elapsed().as_secs_f64();
    assert_eq!(metrics.dropped.get(), 0, "the queue holds every visit");
    assert_eq!(metrics.failed.get(), 0, "no batch failed");
    recorder.shutdown().await;
    (visits as f64 / took, took)
}

fn store_only(durability: Durability, visits: u64, links: u64) -> (f64, f64) {
    let (_dir, store) = open(durability);
    let started = Instant::now();
    let mut i = 0;
    while i < visits {
        let end = (i + MAX_PENDING as u64).min(visits);
        let mut batch: Vec<NewVisit> = (i..end)
            .map(|n| NewVisit {
                visit: Visit {
                    link_id: n % links,
                    code: "abcdef".into(),
                    at: vshortlink::clock::system_now(),
                    client_id: format!("{:040x}", n % 5_000).into(),
                    ip: Some("81.0.0.0".into()),
                    user_agent: AGENTS[(n % AGENTS.len() as u64) as usize].into(),
                    referer: "https://news.example.org/item?id=1".into(),
                    browser: "Chrome".into(),
                    browser_version: "120.0.0.0".into(),
                    os: "Windows 10".into(),
                    os_version: "NT 10.0".into(),
                    device: "desktop".into(),
                    ..Visit::default()
                },
                client_hash: (n % 5_000).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                referer_host: "news.example.org".into(),
            })
            .collect();
        store.record_visits(&mut batch).expect("record");
        i = end;
    }
    let took = started.elapsed().as_secs_f64();
    (visits as f64 / took, took)
}

fn main() {
    let visits = env_u64("VISITS", 200_000);
    let links = env_u64("LINKS", 10_000).max(1);
    let durability = match std::env::var("DURABILITY").as_deref() {
        Ok("power") => Durability::Power,
        _ => Durability::Process,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "visit writer: {visits} visits over {links} links, durability {durability:?}, store writes of up to {MAX_PENDING}, {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let (p_rate, p_took) = runtime.block_on(pipeline(durability, visits, links));
    let (s_rate, s_took) = store_only(durability, visits, links);
    println!("{:<44} {:>12} {:>8}", "scenario", "visits/s", "seconds");
    println!(
        "{:<44} {:>12.0} {:>8.2}",
        "pipeline (queue → enrich → store + flush)", p_rate, p_took
    );
    println!(
        "{:<44} {:>12.0} {:>8.2}",
        "store only (pre-enriched, writer-size writes)", s_rate, s_took
    );
    println!(
        "enrichment share of the pipeline's time: {:.0} %",
        100.0 * (1.0 - p_rate.min(s_rate) / s_rate.max(1.0))
    );
}
