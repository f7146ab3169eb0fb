//! The child process of `tests/core.rs`'s SIGKILL test: opens the store in the directory given
//! as its only argument, and has 32 threads create links forever, printing `ACK <code> <url>` for
//! each one after its create returned (so after it was durable). The test kills it with SIGKILL
//! mid-stream and checks that every acknowledged link survived.
//!
//! Not a `#[test]`: a test that returns early when its variable is unset passes without testing
//! anything. Usage: `crash_child DATA_DIR`.

use std::path::PathBuf;
use std::sync::Arc;

use vshortlink::clock::{Clock, SystemClock};
use vshortlink::config::Config;
use vshortlink::pools::Pools;
use vshortlink::store::sled::{SledStore, StoreOptions};
use vshortlink::store::{CodeChoice, NewLink, Store};

fn main() {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: crash_child DATA_DIR");
        std::process::exit(2);
    };
    let store: Arc<dyn Store> = SledStore::open(&StoreOptions::new(&dir)).expect("open store");
    let config = Config::from_toml("[tiers.6]\nbatch = 5000\n").expect("config");
    let pools = Arc::new(Pools::new(store, Arc::new(SystemClock), &config).expect("pools"));
    let handles: Vec<_> = (0..32)
        .map(|thread| {
            let pools = pools.clone();
            std::thread::spawn(move || {
                let pid = std::process::id();
                for i in 0u64.. {
                    // Unique across rounds too: a repeated URL would be a (correct) dedup hit.
                    let url = format!("https://example.com/{pid}/{thread}/{i}");
                    let new = NewLink {
                        code: CodeChoice::Pool(6),
                        url: url.clone(),
                        space: "default".into(),
                        expires_at: None,
                        title: None,
                        tags: vec![],
                        options: None,
                        domain: 0,
                        dedup: true,
                        now: SystemClock.now(),
                    };
                    let link = pools.create(&new).expect("create");
                    println!("ACK {} {}", link.link().code, url);
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}
