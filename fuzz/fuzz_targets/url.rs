//! URL validation and normalisation (`Links::check_url`, SPEC §12): never panics; an accepted URL
//! is http(s), within `max_url_len`, accepted again unchanged, and its host as the redirect
//! path's blocklist check reads it (`blocklist::host_of`) is the `url` crate's host.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vshortlink::clock::SystemClock;
use vshortlink::config::Config;
use vshortlink::links::Links;
use vshortlink::pools::Pools;
use vshortlink::store::sled::{SledStore, StoreOptions};
use vshortlink::store::Store;

fn links() -> &'static Links {
    static LINKS: OnceLock<(tempfile::TempDir, Links)> = OnceLock::new();
    &LINKS
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let store: Arc<dyn Store> =
                SledStore::open(&StoreOptions::new(dir.path())).expect("store");
            let config = Arc::new(
                Config::from_toml("[limits]\nblocked_hosts = [\"blocked.example\"]\n")
                    .expect("config"),
            );
            let clock = Arc::new(SystemClock);
            let pools = Arc::new(Pools::new(store.clone(), clock.clone(), &config).expect("pools"));
            let links = Links::new(store, pools, clock, config).expect("links");
            (dir, links)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let links = links();
    if let Ok(normalised) = links.check_url(raw) {
        assert!(normalised.starts_with("http://") || normalised.starts_with("https://"));
        assert!(normalised.len() <= 4096);
        assert_eq!(
            links.check_url(&normalised).ok().as_deref(),
            Some(normalised.as_str())
        );
        let parsed = url::Url::parse(&normalised).expect("accepted URLs parse");
        assert_eq!(
            vshortlink::blocklist::host_of(&normalised),
            parsed.host_str(),
            "{normalised}"
        );
    }
});
