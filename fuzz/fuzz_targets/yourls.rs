//! The YOURLS API's parameter parser: a query string, a content type and a body (urlencoded or
//! multipart, as browser extensions post them). Never a panic; every value read back is one
//! the parser produced. Input: the query string, a newline, the content type, a newline, the
//! body.
#![no_main]

use axum::http::{header, HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use vshortlink::http::yourls::Params;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |b| *b == b'\n');
    let query = parts.next().map(String::from_utf8_lossy);
    let kind = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default();
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_bytes(kind) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    let params = Params::parse(query.as_deref(), &headers, body);
    for (name, value) in params.pairs() {
        let last = params.get(name).expect("a parsed name reads back");
        let _ = (last, value);
    }
});
