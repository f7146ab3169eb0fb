//! The `step` generation strategy (see docs/architecture.md, "How codes work"): walks a
//! space in interleaved batches so consecutive codes are far apart, and every number is
//! produced exactly once over a full cycle. Pure computation; this module does no I/O.

use serde::{Deserialize, Serialize};

use super::space::Space;

/// Persisted progress of the step strategy for one space.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepState {
    /// Last number produced, if any.
    pub last_id: Option<u64>,
    /// Offset `k` of the next batch to produce; equals the number of batches
    /// already produced.
    pub batch_index: u64,
    /// True once the final batch (`k = step − 1`) has been produced.
    pub exhausted: bool,
    /// The batch size the cycle started with (0 before the first batch). The step width
    /// depends on it, so a cycle keeps it even if the configured batch changes; otherwise
    /// some residues would never be produced.
    #[serde(default)]
    pub batch: u64,
}

/// Distance between consecutive numbers within one batch: ceil(size / batch).
///
/// The ceiling (rather than floor) guarantees `i = 0..batch` reaches the end
/// of the space, so `step` batches cover it completely. `batch == 0` is
/// treated as 1; an empty space gives 0.
pub fn step_width(space: Space, batch: u64) -> u64 {
    space.size().div_ceil(batch.max(1))
}

/// Produces the next batch of numbers and the state to persist after it.
///
/// Batch `k` is `min + k + i·step` for `i = 0..batch`, skipping values past
/// `max`. Every number `min + x` belongs to exactly one batch (`k = x mod
/// step`), so a full cycle is a permutation of the space. `batch` must stay
/// the same for a given space across calls, since it determines `step`.
///
/// Once exhausted, returns an empty vec and the state marked exhausted.
pub fn next_batch(space: Space, batch: u64, state: &StepState) -> (Vec<u64>, StepState) {
    let batch = if state.batch > 0 {
        state.batch
    } else {
        batch.max(1)
    };
    let step = step_width(space, batch);
    let k = state.batch_index;
    if state.exhausted || k >= step {
        let mut done = state.clone();
        done.exhausted = true;
        return (Vec::new(), done);
    }

    let size = space.size();
    // Capacity bounded by the space so a huge `batch` cannot over-allocate.
    let cap = usize::try_from(batch.min(size)).unwrap_or(usize::MAX);
    let mut out = Vec::with_capacity(cap.min(1 << 20));
    // Offsets grow with i, so the first one past the space ends the batch.
    let mut offset = k;
    for _ in 0..batch {
        if offset >= size {
            break;
        }
        out.push(space.min + offset);
        match offset.checked_add(step) {
            Some(next) => offset = next,
            None => break,
        }
    }

    let next = StepState {
        last_id: out.last().copied().or(state.last_id),
        batch_index: k + 1,
        exhausted: k + 1 >= step,
        batch,
    };
    (out, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a full cycle and checks every number is produced exactly once.
    fn full_cycle(space: Space, batch: u64) -> u64 {
        let size = usize::try_from(space.size()).unwrap();
        let mut seen = vec![false; size];
        let mut state = StepState::default();
        let mut batches = 0u64;
        let mut produced = 0usize;
        while !state.exhausted {
            let (vals, next) = next_batch(space, batch, &state);
            assert!(!vals.is_empty(), "a non-final batch must not be empty");
            assert!(vals.len() as u64 <= batch.max(1));
            for &v in &vals {
                assert!(space.contains(v), "{v} outside {space:?}");
                let idx = usize::try_from(v - space.min).unwrap();
                assert!(!seen[idx], "{v} produced twice");
                seen[idx] = true;
            }
            produced += vals.len();
            batches += 1;
            assert_eq!(next.batch_index, batches);
            assert_eq!(next.last_id, vals.last().copied());
            state = next;
        }
        assert_eq!(produced, size);
        assert!(seen.iter().all(|&s| s));
        assert_eq!(batches, step_width(space, batch));

        // Exhausted: further calls yield nothing and keep the state.
        let (vals, after) = next_batch(space, batch, &state);
        assert!(vals.is_empty());
        assert_eq!(after, state);
        let (vals, again) = next_batch(space, batch, &after);
        assert!(vals.is_empty());
        assert_eq!(again, state);
        batches
    }

    #[test]
    fn length2_batch100_covers_space_once() {
        let space = Space::for_length(2).unwrap();
        assert_eq!((space.min, space.max), (62, 3843));
        // 3782 values / 100 -> step 38 (ceiling), so 38 batches.
        assert_eq!(step_width(space, 100), 38);
        assert_eq!(full_cycle(space, 100), 38);
    }

    #[test]
    fn first_batch_is_spread_out() {
        let space = Space::for_length(2).unwrap();
        let (vals, st) = next_batch(space, 100, &StepState::default());
        assert_eq!(vals.len(), 100);
        assert_eq!(vals[0], 62);
        assert_eq!(vals[1], 62 + 38);
        assert_eq!(st.batch_index, 1);
        assert!(!st.exhausted);
        assert_eq!(st.last_id, Some(62 + 99 * 38));
    }

    #[test]
    fn uneven_batches() {
        let space = Space::for_length(2).unwrap();
        // 3782 = 2 * 31 * 61; 7 and 1000 do not divide it.
        for batch in [7, 1000, 3781, 3783, 10_000] {
            full_cycle(space, batch);
        }
        full_cycle(Space::for_length(1).unwrap(), 8);
        full_cycle(Space { min: 10, max: 10 }, 3);
    }

    #[test]
    fn batch_one_and_zero() {
        let space = Space::for_length(2).unwrap();
        assert_eq!(full_cycle(space, 1), space.size());
        assert_eq!(full_cycle(space, 0), space.size());
        // With batch 1, values come out in plain order.
        let (v, s) = next_batch(space, 1, &StepState::default());
        assert_eq!(v, vec![62]);
        let (v, _) = next_batch(space, 1, &s);
        assert_eq!(v, vec![63]);
    }

    #[test]
    fn large_space_first_batch() {
        let space = Space::for_length(10).unwrap();
        let (vals, st) = next_batch(space, 1000, &StepState::default());
        assert_eq!(vals.len(), 1000);
        assert!(vals.iter().all(|&v| space.contains(v)));
        assert!(!st.exhausted);
        // An oversized batch on a small space is one batch of everything.
        let small = Space::for_length(2).unwrap();
        let (v, st) = next_batch(small, u64::MAX, &StepState::default());
        assert_eq!(v.len() as u64, small.size());
        assert!(st.exhausted);
    }

    #[test]
    fn empty_space_is_exhausted() {
        let (v, s) = next_batch(Space { min: 5, max: 4 }, 10, &StepState::default());
        assert!(v.is_empty());
        assert!(s.exhausted);
    }

    #[test]
    fn a_changed_batch_does_not_change_a_started_cycle() {
        let space = Space::for_length(2).unwrap();
        let mut seen = std::collections::HashSet::new();
        let (first, mut state) = next_batch(space, 100, &StepState::default());
        seen.extend(first);
        while !state.exhausted {
            // The configured batch changes after the first batch; the cycle keeps its own.
            let (values, next) = next_batch(space, 37, &state);
            for v in values {
                assert!(seen.insert(v), "{v} produced twice");
            }
            state = next;
        }
        assert_eq!(seen.len() as u64, space.size());
    }
}
