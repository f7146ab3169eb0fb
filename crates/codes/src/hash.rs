//! Codes computed from the URL (the `hash` strategy). MD5 of the URL followed by a
//! secret gives 32 hex digits; each of its four 8-digit quarters, read as a hexadecimal number
//! and masked with `0x3FFFFFFF` (call it `L`), yields a 6-character candidate whose character
//! `i` (0…5, left to right) is the alphabet's character number `(L >> 5·i) & 0x3D`. The create
//! takes the first candidate that is free (the link service filters reserved and blocked
//! words, the store skips owned codes).
//!
//! The mask keeps the scheme's arithmetic exactly, including its quirk: `0x3D` clears bit 1,
//! so a position takes one of 32 characters (the last one of 16), about 10^9 codes in all —
//! plenty for URLs one instance shortens, and why the random fallback exists. Pure
//! computation; the secret comes from the caller.
//!
//! The secret is the store's, derived per space ([`space_secret`]): with one secret for
//! all, a space's create would skip candidates another space's link of the same URL owns, and
//! so tell a caller limited to one space whether any other space holds that URL.

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use sha2::Sha256;

use super::alphabet::ALPHABET;

/// Characters of a candidate.
pub const CANDIDATE_LEN: usize = 6;

/// The secret of one space's candidates: HMAC-SHA256 of the space's name under the store's
/// secret. Spaces' candidates are then independent; codes already issued keep redirecting
/// (a code is stored, never recomputed).
pub fn space_secret(store_secret: &[u8], space: &str) -> [u8; 32] {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(store_secret) else {
        return [0; 32];
    };
    mac.update(b"vshortlink hash space\0");
    mac.update(space.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The four candidates of a URL under a secret, in order.
pub fn candidates(url: &str, secret: &[u8]) -> [String; 4] {
    let digest = Md5::new()
        .chain_update(url.as_bytes())
        .chain_update(secret)
        .finalize();
    // A quarter of the 32 hex digits is 4 bytes of the digest, big-endian.
    std::array::from_fn(|k| {
        let quarter = u32::from_be_bytes([
            digest[4 * k],
            digest[4 * k + 1],
            digest[4 * k + 2],
            digest[4 * k + 3],
        ]);
        candidate(quarter)
    })
}

/// One quarter's candidate.
fn candidate(quarter: u32) -> String {
    let l = quarter & 0x3FFF_FFFF;
    (0..CANDIDATE_LEN)
        .map(|i| char::from(ALPHABET[((l >> (5 * i)) & 0x3D) as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1321's vector: MD5("abc") = 900150983cd24fb0d6963f7d28e17f72, so the URL "ab" with
    /// the secret "c" has the quarters 90015098, 3cd24fb0, d6963f7d, 28e17f72. Worked by hand
    /// (`a ≫ n` is a shift right by n bits):
    ///
    /// - 0x90015098 & 0x3FFFFFFF = 0x10015098. Its low byte 0x98 & 0x3D = 0x18 = 24, 'o';
    ///   ≫ 5 = 0x800A84, 0x84 & 0x3D = 4, '4'; ≫ 10 = 0x40054, 0x54 & 0x3D = 0x14 = 20, 'k';
    ///   ≫ 15 = 0x2002, 0x02 & 0x3D = 0, '0'; ≫ 20 = 0x100, '0'; ≫ 25 = 0x8, '8'.
    /// - 0x3CD24FB0 (the mask changes nothing): 0xB0 & 0x3D = 0x30 = 48, 'M'; ≫ 5 =
    ///   0x1E6927D, 0x7D & 0x3D = 61, 'Z'; ≫ 10 = 0xF3493, 0x93 & 0x3D = 17, 'h'; ≫ 15 =
    ///   0x79A4, 0xA4 & 0x3D = 36, 'A'; ≫ 20 = 0x3CD, 0xCD & 0x3D = 13, 'd'; ≫ 25 = 0x1E,
    ///   0x1E & 0x3D = 28, 's'.
    #[test]
    fn candidates_worked_by_hand() {
        let [first, second, third, fourth] = candidates("ab", b"c");
        assert_eq!(first, "o4k008");
        assert_eq!(second, "MZhAds");
        for c in [&third, &fourth] {
            assert_eq!(c.len(), CANDIDATE_LEN);
        }
        assert_eq!(candidate(0x90015098), "o4k008");
        assert_eq!(candidate(0x3CD24FB0), "MZhAds");
    }

    #[test]
    fn the_same_url_and_secret_give_the_same_codes_and_another_secret_others() {
        let url = "https://example.com/some/long/path";
        assert_eq!(candidates(url, b"secret"), candidates(url, b"secret"));
        assert_ne!(candidates(url, b"secret"), candidates(url, b"other"));
        assert_ne!(
            candidates(url, b"secret"),
            candidates("https://example.com/", b"secret")
        );
    }
}
