//! The `permute` generation strategy: a counter is pushed through a keyed
//! bijection of the space (a Feistel network with cycle-walking), so codes look
//! unordered yet never repeat until the space is used up. Pure computation
//! (apart from drawing a fresh key from the thread RNG); this module does no I/O.

use std::hash::Hasher;

use rand::RngExt;
use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher24;

use super::space::Space;

/// Feistel rounds. Four rounds already give a strong pseudo-random
/// permutation (Luby–Rackoff); eight leaves a wide margin for the tiny half
/// widths used on small spaces.
const ROUNDS: u32 = 8;

/// Smallest half width, so even tiny spaces get a non-trivial round function.
const MIN_HALF_BITS: u32 = 2;

/// Keyed bijection of `0..size` onto the numbers of a [`Space`].
#[derive(Clone)]
pub struct Permuter {
    key: [u8; 16],
    space: Space,
    size: u64,
    half_bits: u32,
    half_mask: u64,
}

impl std::fmt::Debug for Permuter {
    // The key is a secret that makes the code order unguessable; keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permuter")
            .field("space", &self.space)
            .field("half_bits", &self.half_bits)
            .finish_non_exhaustive()
    }
}

impl Permuter {
    /// Builds the permutation of `space` selected by `key`.
    pub fn new(key: [u8; 16], space: Space) -> Self {
        let size = space.size();
        // Smallest even total width 2k (k >= MIN_HALF_BITS) with 2^(2k) >= size,
        // so cycle-walking needs fewer than 4 encryptions on average.
        let mut half_bits = MIN_HALF_BITS;
        while half_bits < 32 && (1u64 << (2 * half_bits)) < size {
            half_bits += 1;
        }
        Permuter {
            key,
            space,
            size,
            half_bits,
            half_mask: (1u64 << half_bits) - 1,
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

    /// Maps counter `n` (expected `< size`) to a number in the space,
    /// `min + π(n)`.
    ///
    /// An out-of-range `n` is reduced modulo the size rather than rejected:
    /// cycle-walking only terminates for starting points inside the domain,
    /// and a panic here would take down code generation.
    pub fn permute(&self, n: u64) -> u64 {
        if self.size == 0 {
            return self.space.min;
        }
        let mut x = n % self.size;
        // Cycle-walking: the Feistel network permutes 0..2^(2k); following the
        // cycle from x until it re-enters 0..size yields a permutation of
        // 0..size. It terminates because x's own cycle returns to x.
        loop {
            x = self.encrypt(x);
            if x < self.size {
                return self.space.min + x;
            }
        }
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mut left = (x >> self.half_bits) & self.half_mask;
        let mut right = x & self.half_mask;
        for round in 0..ROUNDS {
            let f = self.round_fn(round, right);
            (left, right) = (right, left ^ f);
        }
        (left << self.half_bits) | right
    }

    fn round_fn(&self, round: u32, half: u64) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write_u32(round);
        h.write_u64(half);
        h.finish() & self.half_mask
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
