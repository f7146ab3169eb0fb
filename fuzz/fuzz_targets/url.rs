//! URL validation and normalisation (`Links::check_url`): never panics; an accepted URL
//! is http(s), within `max_url_len`, accepted again unchanged, and its host as the redirect
//! path's blocklist check reads it (`blocklist::host_of`) is the `url` crate's host.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../shared/links.rs"]
mod shared;

fn links() -> &'static vshortlink::links::Links {
    shared::links("[limits]\nblocked_hosts = [\"blocked.example\"]\n")
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
