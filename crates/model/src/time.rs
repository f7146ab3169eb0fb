//! Time as every record keeps it: milliseconds since the Unix epoch, and the spans the
//! counters are kept by. The clock itself is the application's `clock` module (replaceable in tests).

/// Milliseconds since the Unix epoch. Scores in pools and every timestamp in records use it.
pub type Millis = u64;

/// Milliseconds in a minute.
pub const MINUTE_MS: Millis = 60_000;
/// Milliseconds in an hour.
pub const HOUR_MS: Millis = 3_600_000;
/// Milliseconds in a UTC day.
pub const DAY_MS: Millis = 86_400_000;

/// Formats a timestamp as RFC 3339 (UTC); empty for one `time` cannot represent.
pub fn rfc3339(ms: Millis) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    ::time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&::time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// An RFC 3339 time as milliseconds since the epoch; `None` for anything else or a time
/// before 1970.
pub fn parse_rfc3339(text: &str) -> Option<Millis> {
    let parsed = ::time::OffsetDateTime::parse(
        text.trim(),
        &::time::format_description::well_known::Rfc3339,
    )
    .ok()?;
    u64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).ok()
}
