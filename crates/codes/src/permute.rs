//! The `permute` generation strategy: a counter is encrypted with FF1 (NIST SP 800-38G's
//! format-preserving encryption, the `fpe` crate) under a per-length key, with cycle-walking
//! into the length's space, so codes look unordered yet never repeat until the space is used
//! up. Pure computation (apart from drawing a fresh key from the thread RNG); no I/O.
//!
//! Why FF1 rather than FF3-1 (which the original design names): both are NIST's; FF3-1 has no
//! maintained Rust implementation, FF1 has `fpe` (Zcash's, with the standard's test vectors),
//! and FF1 takes any numeral-string length, where FF3-1 caps it.
//!
//! The numeral string is the code's own radix 62 when that domain reaches NIST's minimum of 10⁶
//! values (lengths 4 and up; 62 of every 61 encryptions land in the space, so cycle-walking
//! costs about one encryption a code, ~3 µs). Shorter spaces (lengths 1–3, at most 234,484
//! values) must use a larger domain, 20 bits, where cycle-walking would cost up to 17,000
//! encryptions a code; there the space's numbers are ranked once by their encryption (the same
//! keyed order, one encryption per number, ~1.6 s and 1 MB for length 3) and read from that table.

use std::sync::{Arc, OnceLock};

use aes::Aes128;
use fpe::ff1::{FlexibleNumeralString, FF1};
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::space::Space;

/// NIST SP 800-38G Rev. 1's smallest domain: radix^length must reach it.
const MIN_DOMAIN: u64 = 1_000_000;
/// Bits of the binary domain used below [`MIN_DOMAIN`] in radix 62 (2^20 ≥ 10⁶).
const MIN_BITS: u32 = 20;

/// The numeral strings FF1 permutes: `len` digits of `radix`, a domain of `radix^len` values
/// that holds the space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Domain {
    radix: u32,
    len: u32,
}

impl Domain {
    fn for_size(size: u64) -> Domain {
        let mut len = 1u32;
        let mut values = 62u64;
        while values < size {
            len += 1;
            values = values.saturating_mul(62);
        }
        if values >= MIN_DOMAIN {
            return Domain { radix: 62, len };
        }
        // Below the standard's minimum in radix 62 the space is under 10⁶ values: 2^20 holds it.
        Domain {
            radix: 2,
            len: MIN_BITS,
        }
    }

    /// `x`'s digits, most significant first (NIST's NUM order).
    fn digits(self, mut x: u64) -> Vec<u16> {
        let radix = u64::from(self.radix);
        let mut out = vec![0u16; self.len as usize];
        for digit in out.iter_mut().rev() {
            // A digit is below the radix (≤ 62), so it fits.
            *digit = (x % radix) as u16;
            x /= radix;
        }
        out
    }

    fn number(self, digits: &[u16]) -> u64 {
        let radix = u64::from(self.radix);
        digits.iter().fold(0u64, |n, &d| {
            n.wrapping_mul(radix).wrapping_add(u64::from(d))
        })
    }
}

/// Keyed bijection of `0..size` onto the numbers of a [`Space`].
#[derive(Clone)]
pub struct Permuter {
    cipher: Arc<FF1<Aes128>>,
    space: Space,
    size: u64,
    domain: Domain,
    /// Spaces below 10⁶ values: the space's numbers in the order of their encryption, built on
    /// first use and shared by clones.
    ranked: Arc<OnceLock<Box<[u32]>>>,
}

impl std::fmt::Debug for Permuter {
    // The key is a secret that makes the code order unguessable; it stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permuter")
            .field("space", &self.space)
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl Permuter {
    /// Builds the permutation of `space` selected by `key` (an AES-128 key).
    pub fn new(key: [u8; 16], space: Space) -> Self {
        let size = space.size();
        let domain = Domain::for_size(size);
        let cipher = match FF1::<Aes128>::new(&key, domain.radix) {
            Ok(cipher) => cipher,
            // Both radixes used here are within FF1's 2..=2^16.
            Err(e) => unreachable!("FF1 radix {}: {e}", domain.radix),
        };
        Permuter {
            cipher: Arc::new(cipher),
            space,
            size,
            domain,
            ranked: Arc::new(OnceLock::new()),
        }
    }

    /// A fresh random 16-byte key from the thread RNG.
    pub fn generate_key() -> [u8; 16] {
        let mut key = [0u8; 16];
        rand::rng().fill(&mut key);
        key
    }

    /// The space this permuter maps onto.
    pub fn space(&self) -> Space {
        self.space
    }

    /// Maps counter `n` (expected `< size`) to a number in the space, `min + π(n)`.
    ///
    /// An out-of-range `n` is reduced modulo the size rather than rejected: cycle-walking only
    /// terminates for starting points inside the domain, and a panic here would take down code
    /// generation.
    pub fn permute(&self, n: u64) -> u64 {
        if self.size == 0 {
            return self.space.min;
        }
        let mut x = n % self.size;
        if self.domain.radix == 2 {
            // The space is below 10⁶ values (see `Domain::for_size`), so its offsets fit a u32.
            return self.space.min + u64::from(self.ranked()[x as usize]);
        }
        // Cycle-walking: FF1 permutes the whole domain; following the cycle from x until it
        // re-enters 0..size yields a permutation of 0..size. It ends because x's own cycle
        // comes back to x.
        loop {
            x = self.encrypt(x);
            if x < self.size {
                return self.space.min + x;
            }
        }
    }

    /// The space's offsets ranked by their encryption: a keyed permutation of `0..size` that
    /// costs one encryption per offset, once.
    fn ranked(&self) -> &[u32] {
        self.ranked.get_or_init(|| {
            let mut order: Vec<(u64, u32)> = (0..self.size)
                .map(|x| (self.encrypt(x), x as u32))
                .collect();
            order.sort_unstable();
            order.into_iter().map(|(_, x)| x).collect()
        })
    }

    fn encrypt(&self, x: u64) -> u64 {
        let digits = FlexibleNumeralString::from(self.domain.digits(x));
        match self.cipher.encrypt(&[], &digits) {
            Ok(out) => self.domain.number(&Vec::from(out)),
            // The digits are below the radix and the length is the domain's, which meets the
            // standard's minimum by construction: FF1 has nothing to refuse.
            Err(e) => unreachable!("FF1 refused a numeral string of {:?}: {e}", self.domain),
        }
    }
}

/// Persisted progress of the permute strategy for one space and key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermuteState {
    /// Next counter value to permute; equals the number of codes produced.
    pub counter: u64,
    /// True once the counter has reached the size of the space.
    pub exhausted: bool,
}

/// Produces up to `count` numbers (at least one; `count == 0` is treated as 1)
/// starting at the state's counter, and the state to persist after them.
///
/// Once exhausted, returns an empty vec and the state marked exhausted.
pub fn next_batch(p: &Permuter, count: u64, state: &PermuteState) -> (Vec<u64>, PermuteState) {
    let size = p.size;
    let start = state.counter;
    if state.exhausted || start >= size {
        return (
            Vec::new(),
            PermuteState {
                counter: start,
                exhausted: true,
            },
        );
    }
    let end = start.saturating_add(count.max(1)).min(size);
    let out: Vec<u64> = (start..end).map(|n| p.permute(n)).collect();
    (
        out,
        PermuteState {
            counter: end,
            exhausted: end >= size,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: [u8; 16] = *b"0123456789abcdef";
    const KEY_B: [u8; 16] = *b"0123456789abcdeg";

    fn assert_bijection(p: &Permuter) -> Vec<u64> {
        let space = p.space();
        let size = usize::try_from(space.size()).unwrap();
        let mut seen = vec![false; size];
        let mut order = Vec::with_capacity(size);
        for n in 0..space.size() {
            let v = p.permute(n);
            assert!(space.contains(v), "{v} outside {space:?}");
            let idx = usize::try_from(v - space.min).unwrap();
            assert!(!seen[idx], "{v} hit twice");
            seen[idx] = true;
            order.push(v);
        }
        assert!(seen.iter().all(|&s| s));
        order
    }

    #[test]
    fn bijection_length_1_and_2() {
        assert_bijection(&Permuter::new(KEY_A, Space::for_length(1).unwrap()));
        assert_bijection(&Permuter::new(KEY_A, Space::for_length(2).unwrap()));
        assert_bijection(&Permuter::new(KEY_A, Space { min: 7, max: 7 }));
        assert_bijection(&Permuter::new(KEY_A, Space { min: 0, max: 16 }));
    }

    #[test]
    fn bijection_length_3() {
        let space = Space::for_length(3).unwrap();
        assert_eq!(space.size(), 234_484);
        let order = assert_bijection(&Permuter::new(KEY_B, space));
        // Not the identity order: a shuffle should leave few fixed points.
        let fixed = order
            .iter()
            .enumerate()
            .filter(|(i, &v)| v == space.min + *i as u64)
            .count();
        assert!(fixed < 100, "{fixed} fixed points");
    }

    #[test]
    fn keys_change_the_order() {
        let space = Space::for_length(2).unwrap();
        let a = assert_bijection(&Permuter::new(KEY_A, space));
        let b = assert_bijection(&Permuter::new(KEY_B, space));
        assert_ne!(a, b);
        let differing = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(differing > a.len() / 2);
        // Same key, same order: the key alone must reproduce the sequence.
        let a2 = assert_bijection(&Permuter::new(KEY_A, space));
        assert_eq!(a, a2);
    }

    #[test]
    fn large_space_stays_in_range() {
        let space = Space::for_length(10).unwrap();
        let p = Permuter::new(Permuter::generate_key(), space);
        let mut seen = std::collections::HashSet::new();
        for n in 0..10_000 {
            let v = p.permute(n);
            assert!(space.contains(v));
            assert!(seen.insert(v));
        }
        assert!(space.contains(p.permute(space.size() - 1)));
        // Out-of-range counters wrap instead of panicking or looping.
        assert_eq!(p.permute(space.size()), p.permute(0));
        assert!(space.contains(p.permute(u64::MAX)));
    }

    #[test]
    fn domains_meet_the_standard_minimum() {
        let size = |len| Space::for_length(len).unwrap().size();
        assert_eq!(Domain::for_size(size(1)), Domain { radix: 2, len: 20 });
        assert_eq!(Domain::for_size(size(3)), Domain { radix: 2, len: 20 });
        assert_eq!(Domain::for_size(size(4)), Domain { radix: 62, len: 4 });
        assert_eq!(Domain::for_size(size(10)), Domain { radix: 62, len: 10 });
        let p = Permuter::new(KEY_A, Space::for_length(4).unwrap());
        assert_eq!(p.domain.digits(1_234_567).len(), 4);
        assert_eq!(p.domain.number(&p.domain.digits(1_234_567)), 1_234_567);
    }

    #[test]
    fn generated_keys_differ() {
        assert_ne!(Permuter::generate_key(), Permuter::generate_key());
    }

    #[test]
    fn next_batch_reaches_exhaustion_at_size() {
        let space = Space::for_length(2).unwrap();
        let p = Permuter::new(KEY_A, space);
        let mut state = PermuteState::default();
        let mut all = Vec::new();
        let mut calls = 0;
        while !state.exhausted {
            let (vals, next) = next_batch(&p, 500, &state);
            assert!(!vals.is_empty());
            assert_eq!(next.counter, state.counter + vals.len() as u64);
            all.extend(vals);
            state = next;
            calls += 1;
        }
        assert_eq!(calls, 8); // ceil(3782 / 500)
        assert_eq!(state.counter, space.size());
        assert_eq!(all.len() as u64, space.size());
        let unique: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len());

        let (vals, after) = next_batch(&p, 500, &state);
        assert!(vals.is_empty());
        assert_eq!(after, state);

        let (vals, s) = next_batch(&p, 0, &PermuteState::default());
        assert_eq!(vals.len(), 1);
        assert_eq!(s.counter, 1);
    }
}
