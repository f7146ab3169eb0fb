//! Key layouts of the sled trees. Numbers are big-endian so that byte order is numeric order.
//!
//! | tree           | key                                   | value                         |
//! |----------------|---------------------------------------|-------------------------------|
//! | `links`        | id u64                                | `Link` (MessagePack)          |
//! | `codes`        | code                                  | every code a link owns: `ActiveEntry` (MessagePack) if the link is active, else its id u64 |
//! | `dedup`        | space, 0, length u8, SHA-256(url)[..16]| id u64 (active generated)    |
//! | `expiry`       | expires_at u64, id u64                | empty (active links expiring) |
//! | `ended`        | ended_at u64, id u64                  | empty (expired/deleted, awaiting recycling) |
//! | `pool/<L>`     | score u64, tiebreak u32, code         | empty (the ZSet of length L)  |
//! | `counters`     | name                                  | u64                           |
//! | `meta`         | name                                  | bytes                         |
//!
//! The pool tiebreak orders codes that share a score: random for the `random` and `permute`
//! strategies (a batch's codes share one score, and `score ++ code` would hand them out in
//! ascending order, so each code would tell a scanner where the next one lies), 0 for `step`
//! and for recycled codes, which keep code order. Keys written before the tiebreak existed
//! (`score ++ code`) are still read: the code is the last L bytes of a key in `pool/<L>`.
//! Where each pooled code sits is held in memory (`pools.rs`, `Members`); stores written
//! before kept it in a `pool_members` tree, which opening drops.
//!
//! An active link's `codes` value is what a redirect needs (one read on a cache miss); stores
//! written before it moved there kept it in an `active` tree of its own, which opening moves
//! into `codes` (`links.rs`, `fold_active_tree`).
//!
//! The visit trees are described in `visits/mod.rs`.

use sha2::{Digest, Sha256};

use crate::Millis;

/// Bytes of SHA-256 kept in a dedup key: 128 bits make an accidental collision negligible.
const URL_HASH_LEN: usize = 16;

pub fn u64_key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

pub fn read_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?))
}

pub fn dedup_key(space: &str, domain: u16, length: u8, url: &str) -> Vec<u8> {
    let digest = Sha256::digest(url.as_bytes());
    // Per space and domain: the default domain's keys are what they were before domains.
    let space = crate::model::code_key(domain, space);
    let mut key = Vec::with_capacity(space.len() + 2 + URL_HASH_LEN);
    key.extend_from_slice(space.as_bytes());
    key.push(0);
    key.push(length);
    key.extend_from_slice(&digest[..URL_HASH_LEN]);
    key
}

/// `time ++ id`, the layout of the `expiry` and `ended` indexes.
pub fn time_id_key(at: Millis, id: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&at.to_be_bytes());
    key[8..].copy_from_slice(&id.to_be_bytes());
    key
}

pub fn split_time_id(key: &[u8]) -> Option<(Millis, u64)> {
    Some((read_u64(key)?, read_u64(key.get(8..)?)?))
}

/// Bytes of the tiebreak between score and code in a pool key.
pub const TIEBREAK_LEN: usize = 4;

/// `score ++ tiebreak ++ code`, a key of `pool/<L>`.
pub fn pool_key(score: Millis, tiebreak: u32, code: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + TIEBREAK_LEN + code.len());
    key.extend_from_slice(&score.to_be_bytes());
    key.extend_from_slice(&tiebreak.to_be_bytes());
    key.extend_from_slice(code.as_bytes());
    key
}

/// Score and code of a key of `pool/<length>` (the code is its last `length` bytes).
pub fn split_pool_key(key: &[u8], length: u8) -> Option<(Millis, &str)> {
    let score = read_u64(key)?;
    let middle = key.len().checked_sub(8 + usize::from(length))?;
    if middle != 0 && middle != TIEBREAK_LEN {
        return None;
    }
    let code = std::str::from_utf8(key.get(8 + middle..)?).ok()?;
    Some((score, code))
}

pub fn pool_tree_name(length: u8) -> String {
    format!("pool/{length}")
}

/// Counter names. Kept in one place so that a rebuild or a metric cannot misspell one.
pub mod counter {
    use crate::LinkStatus;

    pub const LINK_ID: &[u8] = b"link_id";
    /// Distinct codes ever issued (pooled by generation, or custom). The code filter's own
    /// insert count must match it, or the filter is stale.
    pub const CODES_ISSUED: &[u8] = b"codes_issued";

    pub fn links(status: LinkStatus) -> Vec<u8> {
        format!("links.{}", status.as_str()).into_bytes()
    }
    pub fn pool_size(length: u8) -> Vec<u8> {
        format!("pool.{length}.size").into_bytes()
    }
    pub fn pool_generated(length: u8) -> Vec<u8> {
        format!("pool.{length}.generated").into_bytes()
    }
    pub fn pool_recycled(length: u8) -> Vec<u8> {
        format!("pool.{length}.recycled").into_bytes()
    }
    /// The id of the last visit recorded.
    pub const VISIT_ID: &[u8] = b"visit_id";
    /// The id of the last visit block written (`visit_blocks`).
    pub const VISIT_BLOCK_ID: &[u8] = b"visit_block_id";
    /// The last visit block whose `visit_index` entries are written (the rest are held in
    /// memory until the next fold, [`super::super::visit_index`]).
    pub const VISIT_INDEXED_BLOCK: &[u8] = b"visit_indexed_block";
    /// The last visit block whose visits the `visit_days` records count (the rest are held
    /// in memory until the next fold, [`super::super::visit_counts`]).
    pub const VISIT_COUNTED_BLOCK: &[u8] = b"visit_counted_block";
    /// Where the fold under way (or cut short by a crash) stops: records it wrote say so.
    pub const VISIT_COUNTING_BLOCK: &[u8] = b"visit_counting_block";

    /// Visits per UTC day (days since the epoch), for the system-wide statistics.
    pub fn day_visits(day: u64) -> Vec<u8> {
        let mut key = b"day.visits.".to_vec();
        key.extend_from_slice(&day.to_be_bytes());
        key
    }

    /// Creates per UTC day (days since the epoch), for the system-wide statistics.
    pub fn day_creates(day: u64) -> Vec<u8> {
        let mut key = b"day.creates.".to_vec();
        key.extend_from_slice(&day.to_be_bytes());
        key
    }
}

pub fn strategy_state_key(length: u8) -> String {
    format!("strategy/{length}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keys_sort_by_score_then_tiebreak_then_code() {
        let a = pool_key(5, u32::MAX, "zzzz");
        let b = pool_key(6, 0, "0000");
        assert!(a < b);
        assert!(pool_key(5, 1, "zzzz") < pool_key(5, 2, "0000"));
        assert!(pool_key(5, 0, "0000") < pool_key(5, 0, "zzzz"));
        assert_eq!(split_pool_key(&a, 4), Some((5, "zzzz")));
    }

    #[test]
    fn pool_keys_before_the_tiebreak_still_split() {
        // The layout before the tiebreak: `score ++ code`.
        let old_key = [&7u64.to_be_bytes()[..], b"abc"].concat();
        assert_eq!(split_pool_key(&old_key, 3), Some((7, "abc")));
        assert_eq!(split_pool_key(&old_key, 5), None);
    }

    #[test]
    fn dedup_key_separates_spaces_and_lengths() {
        let u = "https://example.com/";
        assert_ne!(dedup_key("a", 0, 6, u), dedup_key("a", 0, 5, u));
        assert_ne!(dedup_key("a", 0, 6, u), dedup_key("ab", 0, 6, u));
        assert_ne!(dedup_key("a", 0, 6, u), dedup_key("a", 1, 6, u));
        assert_eq!(dedup_key("a", 0, 6, u), dedup_key("a", 0, 6, u));
    }

    #[test]
    fn time_id_round_trip() {
        assert_eq!(split_time_id(&time_id_key(7, 9)), Some((7, 9)));
    }
}
