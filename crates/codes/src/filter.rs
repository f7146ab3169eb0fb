//! Bloom filter of every code ever issued, used by the `random` strategy to
//! discard candidates that may already exist, plus its versioned byte format.
//! Pure in-memory computation (apart from drawing a hash seed from the thread
//! RNG); this module does no I/O — callers persist the bytes.

use std::hash::Hasher;

use bloomfilter::Bloom;
use rand::RngExt;
use siphasher::sip::SipHasher13;

/// Magic bytes at the start of a serialized filter.
pub const MAGIC: &[u8; 8] = b"VSLBLOOM";
/// Current serialization format version.
pub const FORMAT_VERSION: u8 = 1;
/// Smallest capacity a filter is built for; tiny filters saturate too quickly.
pub const MIN_CAPACITY: u64 = 1000;
/// Largest capacity a filter is built for, so a bad config cannot ask for an
/// absurd allocation (1e9 codes at 1% is about 1.2 GB).
pub const MAX_CAPACITY: u64 = 1_000_000_000;
/// Highest accepted false-positive rate; above it the filter rejects most
/// candidates and is useless.
pub const MAX_FP_RATE: f64 = 0.5;
/// Lowest accepted false-positive rate; below it memory grows for no benefit.
pub const MIN_FP_RATE: f64 = 1e-9;
/// Rate used when the configured one is NaN.
pub const DEFAULT_FP_RATE: f64 = 0.001;

/// Most hash functions a deserialized filter may claim; the optimal count for
/// [`MIN_FP_RATE`] is about 30, so more means corruption (and would make every
/// check slow).
const MAX_HASH_FUNCTIONS: u32 = 64;

/// magic + version + capacity + fp rate + inserted + bloom length.
const HEADER_LEN: usize = 8 + 1 + 8 + 8 + 8 + 8;
/// Trailing checksum over everything before it.
const CHECKSUM_LEN: usize = 8;

/// Why serialized filter bytes were rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FilterError {
    /// The bytes do not start with [`MAGIC`].
    #[error("not a vshortlink bloom filter (bad magic)")]
    BadMagic,
    /// The format version is not one this build understands.
    #[error("unsupported bloom filter format version {0} (expected {FORMAT_VERSION})")]
    UnsupportedVersion(u8),
    /// Fewer bytes than the header declares.
    #[error("bloom filter data truncated: need {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the header says should be present.
        needed: usize,
        /// Bytes actually present.
        got: usize,
    },
    /// More bytes than the header declares.
    #[error("bloom filter data has {0} unexpected trailing bytes")]
    TrailingBytes(usize),
    /// The checksum does not match the content.
    #[error("bloom filter checksum mismatch (data corrupted)")]
    ChecksumMismatch,
    /// A header field holds an impossible value.
    #[error("invalid bloom filter header field: {0}")]
    InvalidField(&'static str),
    /// The embedded bloom bitmap was rejected.
    #[error("invalid bloom filter bitmap: {0}")]
    Bloom(&'static str),
}

/// Bloom filter over issued code strings, with an insert counter so callers
/// can tell when it has been filled past the size it was built for.
#[derive(Debug)]
pub struct CodeFilter {
    bloom: Bloom<str>,
    capacity: u64,
    fp_rate: f64,
    inserted: u64,
}

fn clamp_capacity(capacity: u64) -> u64 {
    capacity.clamp(MIN_CAPACITY, MAX_CAPACITY)
}

fn clamp_fp_rate(fp_rate: f64) -> f64 {
    if fp_rate.is_nan() {
        DEFAULT_FP_RATE
    } else {
        fp_rate.clamp(MIN_FP_RATE, MAX_FP_RATE)
    }
}

fn checksum(bytes: &[u8]) -> u64 {
    // Fixed zero key: this detects corruption, it is not authentication.
    let mut h = SipHasher13::new_with_keys(0, 0);
    h.write(bytes);
    h.finish()
}

/// Splits `n` bytes off the front of `input`; the caller has checked the length.
fn take<'a>(input: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, tail) = input.split_at(n);
    *input = tail;
    head
}

fn read_u64(input: &mut &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(take(input, 8));
    u64::from_le_bytes(buf)
}

impl CodeFilter {
    /// An empty filter sized for `capacity` codes at `fp_rate` false
    /// positives. Capacity is clamped to
    /// [`MIN_CAPACITY`]..=[`MAX_CAPACITY`], the rate into
    /// [`MIN_FP_RATE`]..=[`MAX_FP_RATE`].
    pub fn new(capacity: u64, fp_rate: f64) -> Self {
        let capacity = clamp_capacity(capacity);
        let fp_rate = clamp_fp_rate(fp_rate);
        let mut seed = [0u8; 32];
        rand::rng().fill(&mut seed);
        let items = usize::try_from(capacity).unwrap_or(usize::MAX);
        // The clamps above satisfy every precondition of the bloomfilter
        // constructor (items > 0, 0 < fp < 1, bitmap size > 0), and with them
        // it always returns Ok, so this cannot fire.
        let bloom = Bloom::new_for_fp_rate_with_seed(items, fp_rate, &seed)
            .expect("bloom parameters are clamped to valid ranges");
        CodeFilter {
            bloom,
            capacity,
            fp_rate,
            inserted: 0,
        }
    }

    /// True if `code` may have been inserted (false positives possible, false
    /// negatives not).
    pub fn check(&self, code: &str) -> bool {
        self.bloom.check(code)
    }

    /// Records `code`. Every call is counted, even for a code already present,
    /// so the count can only overestimate fill and capacity warnings err early.
    pub fn insert(&mut self, code: &str) {
        self.bloom.set(code);
        self.inserted = self.inserted.saturating_add(1);
    }

    /// Number of [`CodeFilter::insert`] calls so far.
    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    /// Number of codes the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// False-positive rate the filter was sized for.
    pub fn fp_rate(&self) -> f64 {
        self.fp_rate
    }

    /// True once more codes were inserted than the filter was sized for, so
    /// its real false-positive rate exceeds the configured one and it should
    /// be rebuilt larger.
    pub fn is_over_capacity(&self) -> bool {
        self.inserted > self.capacity
    }

    /// Approximate heap plus inline memory used by the filter.
    pub fn memory_bytes(&self) -> usize {
        self.bloom.as_slice().len() + std::mem::size_of::<Self>()
    }

    /// Serializes the filter: magic, format version, capacity, fp rate,
    /// insert count, bloom length, bloom bytes (all integers little-endian),
    /// then a checksum of everything before it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let bloom = self.bloom.as_slice();
        let mut out = Vec::with_capacity(HEADER_LEN + bloom.len() + CHECKSUM_LEN);
        out.extend_from_slice(MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&self.capacity.to_le_bytes());
        out.extend_from_slice(&self.fp_rate.to_bits().to_le_bytes());
        out.extend_from_slice(&self.inserted.to_le_bytes());
        out.extend_from_slice(&(bloom.len() as u64).to_le_bytes());
        out.extend_from_slice(bloom);
        let sum = checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Parses bytes produced by [`CodeFilter::to_bytes`], rejecting anything
    /// malformed rather than returning a filter that could give false
    /// negatives (which would let duplicate codes through).
    pub fn from_bytes(b: &[u8]) -> Result<Self, FilterError> {
        if b.len() < MAGIC.len() {
            return Err(if MAGIC.starts_with(b) && !b.is_empty() {
                FilterError::Truncated {
                    needed: HEADER_LEN,
                    got: b.len(),
                }
            } else {
                FilterError::BadMagic
            });
        }
        let mut rest = b;
        if take(&mut rest, MAGIC.len()) != MAGIC {
            return Err(FilterError::BadMagic);
        }
        if rest.is_empty() {
            return Err(FilterError::Truncated {
                needed: HEADER_LEN,
                got: b.len(),
            });
        }
        let version = take(&mut rest, 1)[0];
        if version != FORMAT_VERSION {
            return Err(FilterError::UnsupportedVersion(version));
        }
        if b.len() < HEADER_LEN {
            return Err(FilterError::Truncated {
                needed: HEADER_LEN,
                got: b.len(),
            });
        }
        let capacity = read_u64(&mut rest);
        let fp_rate = f64::from_bits(read_u64(&mut rest));
        let inserted = read_u64(&mut rest);
        let bloom_len = read_u64(&mut rest);

        let needed = usize::try_from(bloom_len)
            .ok()
            .and_then(|l| l.checked_add(HEADER_LEN + CHECKSUM_LEN))
            .ok_or(FilterError::InvalidField("bloom length"))?;
        if b.len() < needed {
            return Err(FilterError::Truncated {
                needed,
                got: b.len(),
            });
        }
        if b.len() > needed {
            return Err(FilterError::TrailingBytes(b.len() - needed));
        }
        let body_len = needed - CHECKSUM_LEN;
        let mut sum_bytes = &b[body_len..];
        if read_u64(&mut sum_bytes) != checksum(&b[..body_len]) {
            return Err(FilterError::ChecksumMismatch);
        }

        if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(FilterError::InvalidField("capacity"));
        }
        if !(MIN_FP_RATE..=MAX_FP_RATE).contains(&fp_rate) {
            return Err(FilterError::InvalidField("false-positive rate"));
        }
        let bloom =
            Bloom::<str>::from_slice(&b[HEADER_LEN..body_len]).map_err(FilterError::Bloom)?;
        // An empty bitmap would divide by zero on every check. (`Bloom::is_empty`
        // means "no bits set", not "no bits", hence the explicit length test.)
        #[allow(clippy::len_zero)]
        if bloom.len() == 0 {
            return Err(FilterError::Bloom("empty bitmap"));
        }
        if bloom.number_of_hash_functions() > MAX_HASH_FUNCTIONS {
            return Err(FilterError::Bloom("too many hash functions"));
        }
        Ok(CodeFilter {
            bloom,
            capacity,
            fp_rate,
            inserted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alphabet::encode;
    use crate::random::candidates;
    use crate::space::Space;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const FP: f64 = 0.01;
    const N: u64 = 100_000;

    /// A filter holding the codes for even offsets of the length-6 space.
    fn filled() -> (CodeFilter, Space) {
        let space = Space::for_length(6).unwrap();
        let mut f = CodeFilter::new(N, FP);
        for i in 0..N {
            f.insert(&encode(space.min + 2 * i));
        }
        (f, space)
    }

    fn false_positives(f: &CodeFilter, space: Space) -> u64 {
        (0..N)
            .filter(|i| f.check(&encode(space.min + 2 * i + 1)))
            .count() as u64
    }

    #[test]
    fn inserted_codes_always_found_and_fp_rate_bounded() {
        let (f, space) = filled();
        for i in 0..N {
            assert!(f.check(&encode(space.min + 2 * i)));
        }
        assert_eq!(f.inserted(), N);
        assert_eq!(f.capacity(), N);
        assert!(!f.is_over_capacity());
        let fps = false_positives(&f, space);
        let rate = fps as f64 / N as f64;
        assert!(rate < 2.0 * FP, "false-positive rate {rate}");
    }

    #[test]
    fn random_candidates_against_filter() {
        let space = Space::for_length(6).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let issued = candidates(space, 100_000, &mut rng);
        let mut f = CodeFilter::new(N, FP);
        for &n in &issued {
            assert!(space.contains(n));
            f.insert(&encode(n));
        }
        assert!(issued.iter().all(|&n| f.check(&encode(n))));
    }

    #[test]
    fn round_trip_preserves_answers_and_counters() {
        let (f, space) = filled();
        let bytes = f.to_bytes();
        assert_eq!(&bytes[..8], MAGIC);
        let g = CodeFilter::from_bytes(&bytes).unwrap();
        assert_eq!(g.inserted(), f.inserted());
        assert_eq!(g.capacity(), f.capacity());
        assert_eq!(g.fp_rate(), f.fp_rate());
        assert_eq!(g.memory_bytes(), f.memory_bytes());
        for i in 0..2 * N {
            let code = encode(space.min + i);
            assert_eq!(f.check(&code), g.check(&code), "{code}");
        }
        assert_eq!(g.to_bytes(), bytes);
    }

    #[test]
    fn corrupted_bytes_are_errors() {
        let mut f = CodeFilter::new(1000, FP);
        f.insert("abc");
        let good = f.to_bytes();
        assert!(CodeFilter::from_bytes(&good).is_ok());

        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(
            CodeFilter::from_bytes(&bad).err(),
            Some(FilterError::BadMagic)
        );
        assert_eq!(
            CodeFilter::from_bytes(b"").err(),
            Some(FilterError::BadMagic)
        );
        assert_eq!(
            CodeFilter::from_bytes(b"not a filter at all").err(),
            Some(FilterError::BadMagic)
        );

        let mut bad = good.clone();
        bad[8] = 99;
        assert_eq!(
            CodeFilter::from_bytes(&bad).err(),
            Some(FilterError::UnsupportedVersion(99))
        );

        for cut in [3, 8, 9, 20, HEADER_LEN, good.len() / 2, good.len() - 1] {
            assert!(
                matches!(
                    CodeFilter::from_bytes(&good[..cut]),
                    Err(FilterError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }

        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            CodeFilter::from_bytes(&long).err(),
            Some(FilterError::TrailingBytes(1))
        );

        // A flipped bit anywhere after the version is caught by the checksum.
        for pos in [10, 30, HEADER_LEN + 5, good.len() - 20, good.len() - 1] {
            let mut bad = good.clone();
            bad[pos] ^= 0x01;
            assert!(CodeFilter::from_bytes(&bad).is_err(), "flip at {pos}");
        }

        // A huge declared bloom length must not overflow or allocate.
        let mut bad = good.clone();
        bad[33..41].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(CodeFilter::from_bytes(&bad).is_err());
    }

    #[test]
    fn consistent_but_invalid_fields_are_errors() {
        // Re-sign a body with a bad field so only field validation can catch it.
        let good = CodeFilter::new(1000, FP).to_bytes();
        let resign = |mut v: Vec<u8>| {
            let body = v.len() - CHECKSUM_LEN;
            let sum = checksum(&v[..body]);
            v[body..].copy_from_slice(&sum.to_le_bytes());
            v
        };
        let mut bad = good.clone();
        bad[17..25].copy_from_slice(&0.9f64.to_bits().to_le_bytes());
        assert_eq!(
            CodeFilter::from_bytes(&resign(bad)).err(),
            Some(FilterError::InvalidField("false-positive rate"))
        );
        let mut bad = good.clone();
        bad[9..17].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(
            CodeFilter::from_bytes(&resign(bad)).err(),
            Some(FilterError::InvalidField("capacity"))
        );
        // Bloom's own header: zero hash functions.
        let mut bad = good.clone();
        bad[HEADER_LEN + 9..HEADER_LEN + 13].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            CodeFilter::from_bytes(&resign(bad)),
            Err(FilterError::Bloom(_))
        ));
    }

    #[test]
    fn parameters_are_clamped() {
        let f = CodeFilter::new(0, 0.0);
        assert_eq!(f.capacity(), MIN_CAPACITY);
        assert_eq!(f.fp_rate(), MIN_FP_RATE);
        let f = CodeFilter::new(10, 0.9);
        assert_eq!(f.fp_rate(), MAX_FP_RATE);
        let f = CodeFilter::new(5000, f64::NAN);
        assert_eq!(f.capacity(), 5000);
        assert_eq!(f.fp_rate(), DEFAULT_FP_RATE);
        let f = CodeFilter::new(5000, -1.0);
        assert_eq!(f.fp_rate(), MIN_FP_RATE);
        assert!(f.memory_bytes() > 0);
    }

    #[test]
    fn over_capacity_after_capacity_inserts() {
        let mut f = CodeFilter::new(1000, FP);
        for i in 0..1000u64 {
            f.insert(&encode(i));
        }
        assert!(!f.is_over_capacity());
        f.insert("one-more");
        assert!(f.is_over_capacity());
        assert_eq!(f.inserted(), 1001);
    }
}
