//! Base-62 alphabet: converting code numbers to and from their text form, and
//! the cheap syntax check shared by custom codes and the redirect path.
//! Pure computation; this module does no I/O.

/// The code alphabet, in digit order: `0-9`, then `a-z`, then `A-Z`.
///
/// The order is part of the persisted format (a code's number is its base-62
/// value under this order), so it must never change.
pub const ALPHABET: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Longest code accepted anywhere (custom codes and the redirect path check).
pub const MAX_CODE_LEN: usize = 16;

const BASE: u64 = 62;

/// Digit value of one alphabet byte, or `None` if the byte is not in the alphabet.
pub fn digit(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'z' => Some(u64::from(b - b'a') + 10),
        b'A'..=b'Z' => Some(u64::from(b - b'A') + 36),
        _ => None,
    }
}

/// Encodes `n` as base-62 text without leading zeros (`0` encodes as `"0"`).
pub fn encode(mut n: u64) -> String {
    if n == 0 {
        return "0".to_string();
    }
    // u64::MAX needs 11 base-62 digits.
    let mut buf = [0u8; 11];
    let mut pos = buf.len();
    while n > 0 {
        pos -= 1;
        // n % 62 < 62, so the index is always in bounds.
        buf[pos] = ALPHABET[(n % BASE) as usize];
        n /= BASE;
    }
    buf[pos..].iter().map(|&b| char::from(b)).collect()
}

/// Decodes base-62 text to its number.
///
/// Returns `None` for an empty string, any byte outside the alphabet, or a
/// value that does not fit in a `u64`. Leading zeros are accepted.
pub fn decode(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.bytes()
        .try_fold(0u64, |acc, b| acc.checked_mul(BASE)?.checked_add(digit(b)?))
}

/// True if `s` is 1..=[`MAX_CODE_LEN`] bytes of `[0-9A-Za-z_-]`.
///
/// This is deliberately only a syntax check: it says nothing about reserved
/// or blocked words, which callers check separately with
/// [`crate::words`].
pub fn is_code_syntax(s: &str) -> bool {
    (1..=MAX_CODE_LEN).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::{Space, MAX_GENERATED_LEN};

    #[test]
    fn digit_order_is_fixed() {
        assert_eq!(decode("0"), Some(0));
        assert_eq!(decode("9"), Some(9));
        assert_eq!(decode("a"), Some(10));
        assert_eq!(decode("z"), Some(35));
        assert_eq!(decode("A"), Some(36));
        assert_eq!(decode("Z"), Some(61));
        assert_eq!(decode("10"), Some(62));
        assert_eq!(encode(0), "0");
        assert_eq!(encode(61), "Z");
        assert_eq!(encode(62), "10");
        for (i, &b) in ALPHABET.iter().enumerate() {
            assert_eq!(digit(b), Some(i as u64));
        }
    }

    #[test]
    fn round_trip_many_values() {
        let p10 = 62u64.pow(10);
        let mut values: Vec<u64> = (0..10_000).collect();
        for len in 1..=10u32 {
            let p = 62u64.pow(len);
            values.extend([p - 2, p - 1, p, p + 1]);
        }
        values.extend([p10 - 1, p10 / 2, u64::MAX, u64::MAX - 1]);
        // A multiplicative walk to hit varied mid-range values.
        let mut x = 1u64;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            values.push(x % p10);
        }
        for v in values {
            let s = encode(v);
            assert_eq!(decode(&s), Some(v), "round trip of {v} via {s:?}");
        }
    }

    #[test]
    fn length_bounds_encode_as_expected() {
        assert_eq!(encode(Space::for_length(1).unwrap().min), "1");
        assert_eq!(encode(Space::for_length(1).unwrap().max), "Z");
        assert_eq!(encode(Space::for_length(4).unwrap().min), "1000");
        assert_eq!(encode(Space::for_length(4).unwrap().max), "ZZZZ");
        assert_eq!(encode(Space::for_length(5).unwrap().min), "10000");
        assert_eq!(encode(Space::for_length(5).unwrap().max), "ZZZZZ");
        assert_eq!(encode(Space::for_length(6).unwrap().min), "100000");
        assert_eq!(encode(Space::for_length(6).unwrap().max), "ZZZZZZ");
        for len in 2..=MAX_GENERATED_LEN {
            let s = Space::for_length(len).unwrap();
            let l = usize::from(len);
            assert_eq!(encode(s.min), format!("1{}", "0".repeat(l - 1)));
            assert_eq!(encode(s.max), "Z".repeat(l));
        }
    }

    #[test]
    fn decode_rejects_bad_input() {
        assert_eq!(decode(""), None);
        assert_eq!(decode("ab-c"), None);
        assert_eq!(decode("a_b"), None);
        assert_eq!(decode("é"), None);
        assert_eq!(decode(" 1"), None);
        assert_eq!(decode("1/"), None);
        // 62^11 > u64::MAX
        assert_eq!(decode("10000000000"), Some(62u64.pow(10)));
        assert_eq!(decode("ZZZZZZZZZZZ"), None);
        assert_eq!(decode("100000000000"), None);
        assert_eq!(decode(&encode(u64::MAX)), Some(u64::MAX));
        // Leading zeros decode to the same number.
        assert_eq!(decode("00a"), Some(10));
    }

    #[test]
    fn code_syntax() {
        assert!(is_code_syntax("a"));
        assert!(is_code_syntax("My_Code-1"));
        assert!(is_code_syntax(&"x".repeat(16)));
        assert!(!is_code_syntax(""));
        assert!(!is_code_syntax(&"x".repeat(17)));
        assert!(!is_code_syntax("a.b"));
        assert!(!is_code_syntax("a/b"));
        assert!(!is_code_syntax("a b"));
        assert!(!is_code_syntax("ü"));
        assert!(!is_code_syntax("favicon.ico"));
    }
}
