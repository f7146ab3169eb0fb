//! Local redirects (`back`, `next`): whatever a query or form holds, the place a
//! browser is sent to is a plain path of this site — a valid `Location` header that a browser
//! resolves against this site to this site — and asking again gives the same answer.
#![no_main]

use axum::http::HeaderValue;
use libfuzzer_sys::fuzz_target;
use vshortlink::ui::render::{is_local_path, local_path};

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let to = local_path(Some(raw), "/ui/links");
    assert!(is_local_path(&to), "{to:?}");
    assert!(HeaderValue::from_str(&to).is_ok(), "{to:?}");
    let base = url::Url::parse("https://short.example/ui/").expect("base");
    let resolved = base.join(&to).expect("a local path resolves");
    assert_eq!(resolved.host_str(), Some("short.example"), "{to:?}");
    assert_eq!(resolved.scheme(), "https");
    assert!(!to.starts_with("//") && !to.contains('\\'), "{to:?}");
    assert_eq!(local_path(Some(&to), "/ui/links"), to);
});
