//! Short-code rules and generation: the base-62 alphabet, per-length number
//! spaces, reserved/blocked words, the three pooled generation strategies, the
//! codes computed from a URL (`hash`), the check character and the
//! issued-code Bloom filter. Everything here is pure computation; this module
//! does no I/O (callers persist state and filter bytes).

pub mod alphabet;
pub mod check;
pub mod filter;
pub mod hash;
pub mod permute;
pub mod random;
pub mod space;
pub mod step;
pub mod words;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use alphabet::{decode, encode, is_code_syntax, ALPHABET, MAX_CODE_LEN};
pub use filter::{CodeFilter, FilterError};
pub use permute::{PermuteState, Permuter};
pub use space::{Space, MAX_GENERATED_LEN};
pub use step::{step_width, StepState};
pub use words::{is_reserved, CodeRules, RESERVED};

/// How auto-generated codes are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Uniform random numbers, deduplicated through a [`CodeFilter`].
    Random,
    /// Interleaved batches over the space (see [`step`]).
    Step,
    /// A keyed permutation of the space (see [`permute`]).
    Permute,
}

impl Strategy {
    /// Every strategy, in declaration order.
    pub const ALL: [Strategy; 3] = [Strategy::Random, Strategy::Step, Strategy::Permute];

    /// The lowercase name used in config and serialized state.
    pub fn as_str(&self) -> &'static str {
        match self {
            Strategy::Random => "random",
            Strategy::Step => "step",
            Strategy::Permute => "permute",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strategy name that is not `random`, `step` or `permute`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown code strategy {0:?} (expected one of: random, step, permute)")]
pub struct ParseStrategyError(pub String);

impl FromStr for Strategy {
    type Err = ParseStrategyError;

    /// Parses a strategy name, ignoring ASCII case and surrounding whitespace
    /// since it usually comes from hand-written config.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Strategy::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| ParseStrategyError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_names_round_trip() {
        for st in Strategy::ALL {
            assert_eq!(st.to_string(), st.as_str());
            assert_eq!(st.as_str().parse::<Strategy>(), Ok(st));
        }
        assert_eq!(" Permute ".parse::<Strategy>(), Ok(Strategy::Permute));
        assert_eq!("STEP".parse::<Strategy>(), Ok(Strategy::Step));
    }

    #[test]
    fn strategy_parse_error_names_value() {
        let err = "sequential".parse::<Strategy>().unwrap_err();
        assert_eq!(err, ParseStrategyError("sequential".to_string()));
        assert!(err.to_string().contains("\"sequential\""));
        assert!("".parse::<Strategy>().is_err());
    }
}
