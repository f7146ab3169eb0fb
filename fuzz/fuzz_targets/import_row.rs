//! An import's rows (`vshortlink import`): an exported link line or a CSV code cell,
//! however malformed, is refused or accepted without a panic, and what is accepted obeys the
//! API's rules — a code of the right syntax that is no reserved word, an http(s) URL, a valid
//! space, a title and tags within their limits — and passes the same check again unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::codes::{is_code_syntax, is_reserved};
use vshortlink::transfer::{code_of, Record};

#[path = "../shared/links.rs"]
mod shared;

fn links() -> &'static vshortlink::links::Links {
    shared::links("")
}

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(code) = code_of(raw.trim()) {
        assert!(raw.contains('/') || code == raw.trim());
        assert!(!raw.contains('/') || is_code_syntax(&code), "{raw:?} gave {code:?}");
    }
    let Ok(Record::Link(record)) = serde_json::from_str::<Record>(raw) else {
        return;
    };
    let Ok(link) = record.to_link() else {
        return;
    };
    let links = links();
    if let Ok(checked) = links.check_record(link) {
        assert!(is_code_syntax(&checked.code) && !is_reserved(&checked.code));
        assert!(checked.url.starts_with("http://") || checked.url.starts_with("https://"));
        assert!(!checked.space.is_empty() && checked.space.len() <= 64);
        assert!(checked.title.as_ref().is_none_or(|t| t.chars().count() <= 512));
        assert!(checked.tags.len() <= 32);
        assert!(checked.updated_at >= checked.created_at);
        assert_eq!(links.check_record(checked.clone()).ok(), Some(checked));
    }
});
