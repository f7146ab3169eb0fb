//! Time as every record keeps it: milliseconds since the Unix epoch, and the spans the
//! counters are kept by. The clock itself is the application's `clock` module (replaceable in tests).

/// Milliseconds since the Unix epoch. Scores in pools and every timestamp in records use it.
pub type Millis = u64;

/// Milliseconds in an hour.
pub const HOUR_MS: Millis = 3_600_000;
/// Milliseconds in a UTC day.
pub const DAY_MS: Millis = 86_400_000;
