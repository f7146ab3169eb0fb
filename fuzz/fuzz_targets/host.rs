//! Hosts (SPEC §26): an admin's host is checked and normalised, a request's `Host` is matched,
//! and a code's key on a domain is split again, never panicking. A host that passes is a
//! lowercase ASCII DNS name that passes again unchanged (normalising is idempotent), and
//! routing it gives it back as it is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::model::domain::{code_key, parse_host, route_host, split_key, MAX_HOST_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(host) = parse_host(text) {
        assert!(!host.is_empty() && host.len() <= MAX_HOST_LEN);
        assert!(host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'));
        assert_eq!(parse_host(&host).as_deref(), Ok(host.as_str()));
        assert_eq!(route_host(&host), host.as_str());
    }
    let routed = route_host(text);
    assert!(!routed.bytes().any(|b| b.is_ascii_uppercase()));
    for domain in [0u16, 1, 65535] {
        if vshortlink::codes::is_code_syntax(text) {
            assert_eq!(split_key(&code_key(domain, text)), (text, domain));
        }
    }
});
