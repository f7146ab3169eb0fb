//! Number spaces of auto-generated codes: which numbers encode to a code of a
//! given length. Pure computation; this module does no I/O.

/// Longest auto-generated code length; 62^10 still fits in a `u64`, 62^11 does not.
pub const MAX_GENERATED_LEN: u8 = 10;

/// An inclusive range `min..=max` of code numbers.
///
/// For a generated length L it is 62^(L-1) ..= 62^L − 1, i.e. exactly the
/// numbers whose base-62 form has L digits and no leading `'0'`, so every code
/// of that length is reachable and none is shorter. Length 1 is `1..=61`: `"0"`
/// is excluded to keep the "no leading zero" rule uniform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Smallest number in the space.
    pub min: u64,
    /// Largest number in the space (inclusive).
    pub max: u64,
}

impl Space {
    /// The space of generated codes of length `len`, or `None` outside
    /// `1..=MAX_GENERATED_LEN`.
    pub fn for_length(len: u8) -> Option<Space> {
        if !(1..=MAX_GENERATED_LEN).contains(&len) {
            return None;
        }
        let hi = 62u64.checked_pow(u32::from(len))?;
        let lo = if len == 1 {
            1
        } else {
            62u64.checked_pow(u32::from(len) - 1)?
        };
        Some(Space {
            min: lo,
            max: hi - 1,
        })
    }

    /// Number of values in the space; 0 if `max < min`.
    ///
    /// Saturates at `u64::MAX` for the one range (`0..=u64::MAX`) whose true
    /// size does not fit; generated spaces are far below that.
    pub fn size(&self) -> u64 {
        if self.max < self.min {
            0
        } else {
            (self.max - self.min).saturating_add(1)
        }
    }

    /// True if `n` lies in `min..=max`.
    pub fn contains(&self, n: u64) -> bool {
        (self.min..=self.max).contains(&n)
    }

    /// Length in characters of the longest code in the space (the base-62
    /// digit count of `max`); for spaces from [`Space::for_length`] every code
    /// has this length.
    pub fn length(&self) -> u8 {
        let mut n = self.max;
        let mut len = 1u8;
        while n >= 62 {
            n /= 62;
            len += 1;
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bounds() {
        assert_eq!(Space::for_length(1), Some(Space { min: 1, max: 61 }));
        assert_eq!(Space::for_length(2), Some(Space { min: 62, max: 3843 }));
        assert_eq!(
            Space::for_length(4),
            Some(Space {
                min: 238_328,
                max: 14_776_335
            })
        );
        assert_eq!(
            Space::for_length(5),
            Some(Space {
                min: 14_776_336,
                max: 916_132_831
            })
        );
        assert_eq!(
            Space::for_length(6),
            Some(Space {
                min: 916_132_832,
                max: 56_800_235_583
            })
        );
        assert_eq!(
            Space::for_length(10).map(|s| s.max),
            Some(839_299_365_868_340_223)
        );
        assert_eq!(Space::for_length(0), None);
        assert_eq!(Space::for_length(11), None);
    }

    #[test]
    fn spaces_are_contiguous_and_sized() {
        for len in 1..MAX_GENERATED_LEN {
            let a = Space::for_length(len).unwrap();
            let b = Space::for_length(len + 1).unwrap();
            assert_eq!(a.max + 1, b.min);
            assert_eq!(a.length(), len);
            assert_eq!(b.length(), len + 1);
            assert_eq!(b.size(), b.max - b.min + 1);
        }
        assert_eq!(Space::for_length(1).unwrap().size(), 61);
        assert_eq!(Space::for_length(4).unwrap().size(), 14_538_008);
    }

    #[test]
    fn contains_and_degenerate() {
        let s = Space::for_length(4).unwrap();
        assert!(s.contains(238_328));
        assert!(s.contains(14_776_335));
        assert!(!s.contains(238_327));
        assert!(!s.contains(14_776_336));
        assert_eq!(Space { min: 5, max: 4 }.size(), 0);
        assert_eq!(Space { min: 7, max: 7 }.size(), 1);
        assert_eq!(
            Space {
                min: 0,
                max: u64::MAX
            }
            .size(),
            u64::MAX
        );
    }
}
