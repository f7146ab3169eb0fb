//! Decoding of every stored record type: a truncated, bit-flipped or arbitrary record is an
//! error (`StoreError::Corrupt`), never a panic. Input: a tree selector byte, a key length byte,
//! the key, then the value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::store::sled::check_record;

const TREES: &[&str] = &[
    "links",
    "codes",
    "visits",
    "days",
    "expiry",
    "ended",
    "counters",
    "pool/4",
    "pool/5",
    "pool/6",
];

fuzz_target!(|data: &[u8]| {
    let [selector, key_len, rest @ ..] = data else {
        return;
    };
    let tree = TREES[usize::from(*selector) % TREES.len()];
    let split = usize::from(*key_len).min(rest.len());
    let (key, value) = rest.split_at(split);
    let _ = check_record(tree, key, value);
    // The code filter file and the distinct-visitor sketch are records too.
    let _ = vshortlink::codes::filter::CodeFilter::from_bytes(value);
});
