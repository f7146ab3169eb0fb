//! Query and header parsers: the API's listing parameters (`cursor`, `limit`, clamped to 1000)
//! and the client address from proxy headers. Never a panic. Input: a query string,
//! a newline, then header values for X-Forwarded-For, X-Real-IP and Forwarded, one a line.
#![no_main]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use axum::http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use vshortlink::http::api::{page_params, MAX_PAGE};
use vshortlink::config::{ClientIpHeader, TrustedProxies};
use vshortlink::visits::client::client_ip;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let query = lines.next().unwrap_or_default();
    let params: HashMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    if let Ok((_, limit)) = page_params(&params) {
        assert!((1..=MAX_PAGE).contains(&limit));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in ["x-forwarded-for", "x-real-ip", "forwarded"]
        .iter()
        .zip(lines)
    {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(*name, value);
        }
    }
    let peer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let proxies = TrustedProxies(vec!["192.0.2.0/24".parse().expect("net")]);
    let direct = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
    for which in [
        ClientIpHeader::XForwardedFor,
        ClientIpHeader::XRealIp,
        ClientIpHeader::Forwarded,
    ] {
        let client = client_ip(peer, &headers, Some(&proxies), which);
        // The answer is the peer or an address from the headers; a proxy only when every hop
        // is.
        assert!(client == peer || !proxies.contains(client) || !headers.is_empty());
        assert_eq!(client_ip(peer, &headers, None, which), peer);
        // A peer that is no proxy is the client, whatever the headers say.
        assert_eq!(client_ip(direct, &headers, Some(&proxies), which), direct);
    }
});
