//! The check character: a code's last character is the Luhn mod 62 check
//! character of the characters before it, so that a mistyped code is refused before any
//! lookup. With N = 62 (the alphabet's values, '0' = 0 … 'Z' = 61): from the rightmost payload
//! character leftwards the factors are 2, 1, 2, 1, …; each product `f·v` adds
//! `f·v / 62 + f·v % 62` to a sum, and the check value is `(62 − sum % 62) % 62`.
//!
//! Doubling is a permutation of 0…61 under this rule (`v` < 31 gives the even `2v`, `v` ≥ 31
//! the odd `2v − 61`), so every single-character substitution changes the sum and fails the
//! check; so does every adjacent transposition except of a pair the doubling maps alike.
//! Pure computation.

use super::alphabet::{digit, ALPHABET};

/// The Luhn sum of `chars` read right to left, the rightmost with factor `first`.
fn sum(chars: &[u8], first: u32) -> Option<u32> {
    let mut factor = first;
    let mut total = 0u32;
    for &b in chars.iter().rev() {
        let product = factor * u32::try_from(digit(b)?).ok()?;
        total += product / 62 + product % 62;
        factor = 3 - factor;
    }
    Some(total)
}

/// The check character of a payload, or `None` if the payload has a character outside the
/// alphabet (`_` and `-` of custom codes have no value).
pub fn check_char(payload: &str) -> Option<char> {
    let total = sum(payload.as_bytes(), 2)?;
    let value = (62 - total % 62) % 62;
    ALPHABET.get(value as usize).map(|&b| char::from(b))
}

/// The payload followed by its check character.
pub fn with_check(payload: &str) -> Option<String> {
    let check = check_char(payload)?;
    let mut code = String::with_capacity(payload.len() + 1);
    code.push_str(payload);
    code.push(check);
    Some(code)
}

/// Whether a code (payload and check character) passes the check: its whole Luhn sum, the
/// check character with factor 1, is a multiple of 62.
pub fn passes(code: &str) -> bool {
    code.len() >= 2 && sum(code.as_bytes(), 1).is_some_and(|total| total % 62 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand: "aZ3k9Q" has the values 10, 61, 3, 20, 9, 52. Right to left with
    /// factors 2, 1, 2, 1, 2, 1: Q 52·2 = 104 → 1 + 42 = 43; 9·1 = 9; k 20·2 = 40;
    /// 3·1 = 3; Z 61·2 = 122 → 1 + 60 = 61; a 10·1 = 10. The sum is 166, 166 % 62 = 42, and
    /// (62 − 42) % 62 = 20, which is 'k'.
    #[test]
    fn a_check_character_worked_by_hand() {
        assert_eq!(check_char("aZ3k9Q"), Some('k'));
        assert_eq!(with_check("aZ3k9Q").as_deref(), Some("aZ3k9Qk"));
        assert!(passes("aZ3k9Qk"));
        // "000000": every product is 0, the sum 0, the check (62 − 0) % 62 = 0.
        assert_eq!(check_char("000000"), Some('0'));
        // "1": 1·2 = 2, the check 60 = 'Y'; "10": 0·2 + 1·1 = 1, the check 61 = 'Z'.
        assert_eq!(check_char("1"), Some('Y'));
        assert_eq!(check_char("10"), Some('Z'));
        assert_eq!(check_char("a_b"), None);
        assert!(!passes("aZ3k9Qj"));
        assert!(!passes("k"));
    }

    /// A small deterministic generator, so the property runs the same everywhere.
    fn codes(n: usize) -> impl Iterator<Item = String> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        (0..n).map(move |_| {
            (0..6)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from(ALPHABET[(state % 62) as usize])
                })
                .collect::<String>()
        })
    }

    #[test]
    fn every_single_substitution_fails_and_most_transpositions_do() {
        let (mut swaps, mut caught) = (0u32, 0u32);
        for payload in codes(2000) {
            let code = with_check(&payload).expect("alphabet only");
            assert!(passes(&code), "{code}");
            let bytes = code.as_bytes();
            for i in 0..bytes.len() {
                for &other in ALPHABET.iter().filter(|&&b| b != bytes[i]) {
                    let mut typo = bytes.to_vec();
                    typo[i] = other;
                    let typo = String::from_utf8(typo).expect("ascii");
                    assert!(!passes(&typo), "{code} → {typo} passed");
                }
            }
            for i in 0..bytes.len() - 1 {
                if bytes[i] == bytes[i + 1] {
                    continue;
                }
                let mut typo = bytes.to_vec();
                typo.swap(i, i + 1);
                swaps += 1;
                caught += u32::from(!passes(&String::from_utf8(typo).expect("ascii")));
            }
        }
        // Only pairs whose doubled values sum alike slip through: about 1 in 60.
        assert!(
            caught * 100 >= swaps * 95,
            "{caught} of {swaps} transpositions caught"
        );
    }
}
