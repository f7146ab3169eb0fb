//! Code parsing: syntax check, base-62 decoding and custom-code rules never panic, and
//! a decoded number encodes to a code that decodes to it again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::codes::{decode, encode, is_code_syntax, is_reserved};

fuzz_target!(|data: &[u8]| {
    let Ok(code) = std::str::from_utf8(data) else {
        return;
    };
    let syntax = is_code_syntax(code);
    let _ = is_reserved(code);
    let custom = vshortlink::links::check_custom_code(code);
    assert!(custom.is_err() || syntax);
    if let Some(n) = decode(code) {
        let again = encode(n);
        assert_eq!(decode(&again), Some(n));
    }
});
