//! Keys as requests present them (`Authorization: Bearer`, `X-Api-Key`, YOURLS `signature`):
//! whatever the bytes, the run-time key parser never panics, takes only `vsl_<12 id
//! characters>_<32 secret characters>` of the alphabets it issues, and what it takes is
//! exactly the input split in two; anything else is not a run-time key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::accounts::keys::{parse, KEY_ID_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if let Some((id, secret)) = parse(raw) {
        assert_eq!(format!("vsl_{id}_{secret}"), raw);
        assert_eq!(id.len(), KEY_ID_LEN);
        assert!(id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert!(secret.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(secret.len(), 32);
    }
});
