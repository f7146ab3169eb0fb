//! What makes a delivery trustworthy and when the next attempt is: the body's signature, the
//! headers every POST carries, and the retry schedule (exponential with jitter, for 24 hours).
//! Pure: no I/O, no clock.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::model::Millis;

/// How long an event is retried before it is given up.
pub const RETRY_FOR_MS: Millis = 24 * 3_600_000;
/// The first retry's delay; each later one doubles it.
const FIRST_DELAY_MS: Millis = 1_000;
/// The longest wait between two attempts.
const MAX_DELAY_MS: Millis = 3_600_000;

/// `X-Vsl-Signature`: `sha256=` and the hex HMAC-SHA256 of the body with the webhook's secret,
/// as GitHub and Dub sign theirs, so receivers can reuse their checks.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // HMAC takes a key of any length: the error cannot happen.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256=");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// When to try again after `attempts` failed attempts of an event created at `created_at`,
/// or `None` when its 24 hours are over. `jitter` in `0.0..1.0` spreads the retries of many
/// events that failed together (a receiver that was down) over the second half of the delay.
pub fn next_attempt(created_at: Millis, attempts: u32, now: Millis, jitter: f64) -> Option<Millis> {
    let doubled = FIRST_DELAY_MS.saturating_mul(1u64 << attempts.saturating_sub(1).min(31));
    let delay = doubled.min(MAX_DELAY_MS);
    let spread = (delay as f64 * (0.5 + 0.5 * jitter.clamp(0.0, 1.0))) as Millis;
    let at = now.saturating_add(spread.max(1));
    (at < created_at.saturating_add(RETRY_FOR_MS)).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hex_hmac_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn retries_double_up_to_an_hour_and_stop_after_a_day() {
        let t0 = 1_000_000;
        assert_eq!(next_attempt(t0, 1, t0, 1.0), Some(t0 + 1_000));
        assert_eq!(next_attempt(t0, 2, t0, 1.0), Some(t0 + 2_000));
        assert_eq!(next_attempt(t0, 5, t0, 1.0), Some(t0 + 16_000));
        assert_eq!(next_attempt(t0, 30, t0, 1.0), Some(t0 + 3_600_000));
        // Jitter spreads a delay over its second half.
        assert_eq!(next_attempt(t0, 3, t0, 0.0), Some(t0 + 2_000));
        // Past the day: given up.
        assert_eq!(next_attempt(t0, 40, t0 + RETRY_FOR_MS - 10, 1.0), None);
    }
}
