//! The distinct-visitor sketch's bytes (as stored in day records): `Hll::from_bytes` never
//! panics, and a sketch it accepts round-trips, merges and estimates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::visits::hll::Hll;

fuzz_target!(|data: &[u8]| {
    if let Some(sketch) = Hll::from_bytes(data) {
        let estimate = sketch.estimate();
        let again = Hll::from_bytes(&sketch.to_bytes()).expect("own bytes decode");
        assert_eq!(again.estimate(), estimate);
        let mut merged = Hll::new();
        merged.merge(&sketch);
        merged.insert_hash(0x9e37_79b9_7f4a_7c15);
        let _ = merged.estimate();
    }
});
