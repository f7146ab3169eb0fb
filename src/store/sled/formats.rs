//! The byte formats the sled readers and writers share, below all of them (so that no two
//! of them import each other): the keys of per-link records, and the fast map the visit writer keys by strings and ids. Pure; owns no tree.

use std::collections::HashMap;

/// The writer's maps are keyed by strings of one block and ids of one write: a fast seeded
/// hash (SipHash on every user agent of every visit was 3 % of a hot redirect profile).
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The key of a per-link record: link id, then a number (a block, a day), big-endian.
pub(super) fn link_key(link_id: u64, n: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&link_id.to_be_bytes());
    key[8..].copy_from_slice(&n.to_be_bytes());
    key
}
