//! The `random` generation strategy: uniform candidate numbers in a space.
//! Deduplication against issued codes is the caller's job (see
//! [`crate::filter`]). Pure computation on a caller-supplied RNG; this
//! module does no I/O.

use rand::RngExt;

use super::space::Space;

/// Draws `count` numbers uniformly from `space` (duplicates possible).
///
/// Returns an empty vec for an empty space rather than panicking.
pub fn candidates<R: rand::Rng + ?Sized>(space: Space, count: usize, rng: &mut R) -> Vec<u64> {
    if space.size() == 0 {
        return Vec::new();
    }
    (0..count)
        .map(|_| rng.random_range(space.min..=space.max))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn all_candidates_inside_space() {
        let mut rng = StdRng::seed_from_u64(42);
        for len in [1u8, 2, 4, 6, 10] {
            let space = Space::for_length(len).unwrap();
            let c = candidates(space, 100_000, &mut rng);
            assert_eq!(c.len(), 100_000);
            assert!(c.iter().all(|&v| space.contains(v)));
        }
    }

    #[test]
    fn candidates_cover_small_space() {
        // 100k draws over 61 values: every value should appear.
        let space = Space::for_length(1).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let c = candidates(space, 100_000, &mut rng);
        let distinct: std::collections::HashSet<_> = c.into_iter().collect();
        assert_eq!(distinct.len() as u64, space.size());
    }

    #[test]
    fn works_with_thread_rng_and_dyn() {
        let space = Space::for_length(4).unwrap();
        let c = candidates(space, 10, &mut rand::rng());
        assert!(c.iter().all(|&v| space.contains(v)));
        assert!(candidates(Space { min: 3, max: 2 }, 10, &mut rand::rng()).is_empty());
        assert!(candidates(space, 0, &mut rand::rng()).is_empty());
    }
}
