//! The link service over a sled store in a temp directory, built once per fuzz process, for the
//! targets that check input through the domain's rules (`url`, `import_row`). Included with
//! `#[path]`: each target is its own binary.

use std::sync::{Arc, OnceLock};

use vshortlink::clock::SystemClock;
use vshortlink::config::Config;
use vshortlink::links::Links;
use vshortlink::pools::Pools;
use vshortlink::store::sled::{SledStore, StoreOptions};
use vshortlink::store::Store;

/// The service with `toml` over the embedded defaults (the first call's `toml` wins).
pub fn links(toml: &str) -> &'static Links {
    static LINKS: OnceLock<(tempfile::TempDir, Links)> = OnceLock::new();
    &LINKS
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let store: Arc<dyn Store> =
                SledStore::open(&StoreOptions::new(dir.path())).expect("store");
            let config = Arc::new(Config::from_toml(toml).expect("config"));
            let clock = Arc::new(SystemClock);
            let pools = Arc::new(Pools::new(store.clone(), clock.clone(), &config).expect("pools"));
            let bounds = vshortlink::memory::Bounds::derive(&config).expect("bounds");
            let links = Links::new(store, pools, clock, config, bounds.links()).expect("links");
            (dir, links)
        })
        .1
}
