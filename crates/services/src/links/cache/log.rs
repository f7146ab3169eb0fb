//! One shard of the redirect cache: its entries written back to back into segments of one
//! buffer (a log), a hash table of their positions, and eviction a whole segment at a time.
//!
//! Why a log and not an entry per allocation: a plain link's entry is then its bytes and
//! nothing else — no allocation header, no allocator rounding, no pointer to a URL held
//! elsewhere, no slab slot, no ghost list. An entry costs its header ([`HEADER`] bytes), its
//! key and URL, and its share of the table (an 8-byte slot at the table's load, [`super::table`]):
//! about 120 bytes for a 6-character code and an 80-byte URL.
//!
//! Eviction is FIFO with reinsertion (what CLOCK does, in a log's order): when no segment is
//! free, the oldest is emptied, and an entry read since it was written is written again at the
//! head with its mark cleared instead of being dropped. An entry read once in a cycle of the
//! log stays, one nobody asked for goes; a segment of entries all read again is kept whole and
//! the next one emptied, and each mark is cleared on the way, so emptying ends within a cycle.
//! Removed and replaced entries are marked dead where they lie and their bytes come back when
//! their segment is emptied.
//!
//! The table is first sized for entries of a typical URL. When it fills while part of the log
//! was never written (the URLs are shorter than that), it doubles and the log gives up as
//! many never-written bytes as the table took, so short URLs fill the shard's bytes rather
//! than its table's slots; the shard's footprint stays what it was given.

use std::hash::BuildHasher;
use std::sync::Arc;

use super::table::Table;
use super::Extra;
use crate::model::Millis;

/// Bytes of an entry's header: id (8), served until (6: milliseconds to the year 10889),
/// extra (3), marks (1), key length (1), URL length (2); the key and the URL follow.
pub(super) const HEADER: usize = 21;
const ID: usize = 0;
const UNTIL: usize = 8;
const EXTRA: usize = 14;
const MARKS: usize = 17;
const KEY_LEN: usize = 18;
const URL_LEN: usize = 19;
/// Longest key and URL an entry holds (their lengths' fields).
const MAX_KEY: usize = u8::MAX as usize;
const MAX_URL: usize = u16::MAX as usize;
/// Latest time an entry is served until (its field's width); later is "until then".
const MAX_UNTIL: Millis = (1 << 48) - 1;
/// Read since it was written (or last moved to the head).
const READ: u8 = 1;
/// Removed or replaced: skipped when its segment is emptied.
const DEAD: u8 = 2;
/// An entry without extra parts; also one past the most extra parts a shard holds.
const NO_EXTRA: u32 = (1 << 24) - 1;

/// What a lookup found.
pub(super) enum Found {
    Hit {
        id: u64,
        url: Arc<str>,
        extra: Option<Arc<Extra>>,
    },
    /// Past its time; removed.
    Stale,
    Missing,
}

/// An entry to write.
pub(super) struct Entry<'a> {
    pub key: &'a [u8],
    pub id: u64,
    pub url: &'a str,
    /// Served while `now < until`: the earlier of the link's expiry and the cache's ttl.
    pub until: Millis,
    pub extra: Option<Arc<Extra>>,
}

/// A shard: a buffer cut into equal segments, the table of where each key's entry lies.
pub(super) struct Shard<S> {
    hasher: S,
    table: Table,
    /// Every segment's bytes, in one allocation; pages never written are never resident.
    log: Box<[u8]>,
    segment: usize,
    /// Segments written so far: they are the first `written` (segments are taken in order
    /// until one is emptied), so the pages past them were never touched.
    written: usize,
    /// The most entries the cache's configuration allows this shard (`usize::MAX` when only
    /// its bytes bound it); `max_entries` is this or the table's capacity, if lower.
    max_allowed: usize,
    /// Bytes written in each segment.
    used: Vec<u32>,
    /// Segments holding entries, oldest first; the last is the one being written.
    order: std::collections::VecDeque<u32>,
    free: Vec<u32>,
    /// What only some entries carry, by index; freed slots are reused.
    extras: Vec<Option<Arc<Extra>>>,
    free_extras: Vec<u32>,
    /// Entries in the table.
    entries: usize,
    /// Most entries: `cache.capacity`'s share, or what the table was sized for.
    max_entries: usize,
    /// Bytes of the live entries and their extra parts.
    live_bytes: u64,
    /// Entries to write again while a segment is emptied, and their old places and hashes
    /// (both kept to reuse their allocations: a segment is emptied every few hundred inserts).
    keep: Vec<u8>,
    moved: Vec<(usize, u64)>,
}

impl<S: BuildHasher> Shard<S> {
    /// A shard of `segments` segments of `segment` bytes each (at least two), with a table
    /// sized for `expected` entries.
    pub fn new(
        hasher: S,
        segments: usize,
        segment: usize,
        expected: usize,
        max_entries: usize,
    ) -> Self {
        let segments = segments.max(2);
        let segment = segment.clamp(HEADER + 64, u32::MAX as usize / segments);
        let table = Table::new(expected);
        // Past what the table was sized for, entries are evicted as if the log were full
        // unless the log's unwritten end pays for a larger table (`grow_table`), so that many
        // short URLs cannot take more than the cache's bytes.
        let max_allowed = max_entries;
        let max_entries = max_entries.min(table.capacity());
        Self {
            hasher,
            table,
            // Zeroed: the allocator maps fresh pages, which cost nothing until written.
            log: vec![0u8; segments * segment].into_boxed_slice(),
            segment,
            written: 0,
            max_allowed,
            used: vec![0; segments],
            order: Default::default(),
            free: (0..segments as u32).rev().collect(),
            extras: Vec::new(),
            free_extras: Vec::new(),
            entries: 0,
            max_entries,
            live_bytes: 0,
            keep: Vec::new(),
            moved: Vec::new(),
        }
    }

    /// Bytes the shard holds whatever is in it: the log and the table.
    pub fn footprint(&self) -> usize {
        self.log.len() + self.table.bytes()
    }

    /// The longest entry a segment takes; longer ones are not cached.
    pub fn fits(&self, key: &[u8], url: &str) -> bool {
        HEADER + key.len() + url.len() <= self.segment
            && key.len() <= MAX_KEY
            && url.len() <= MAX_URL
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    pub fn get(&mut self, hash: u64, key: &[u8], now: Millis) -> Found {
        let log = &self.log;
        let Some(slot) = self.table.find(hash, |at| key_at(log, at) == key) else {
            return Found::Missing;
        };
        let at = self.table.at(slot) as usize;
        if now >= u48_at(&self.log, at + UNTIL) {
            self.remove_slot(slot, at);
            return Found::Stale;
        }
        self.log[at + MARKS] |= READ;
        let url = match std::str::from_utf8(url_at(&self.log, at)) {
            Ok(url) => Arc::from(url),
            // Written from a `&str`; never taken.
            Err(_) => return Found::Missing,
        };
        let extra = match u24_at(&self.log, at + EXTRA) {
            NO_EXTRA => None,
            i => self.extras.get(i as usize).cloned().flatten(),
        };
        Found::Hit {
            id: u64_at(&self.log, at + ID),
            url,
            extra,
        }
    }

    /// Writes an entry, replacing the key's entry if there is one. The caller checked
    /// [`Shard::fits`].
    pub fn insert(&mut self, hash: u64, entry: Entry<'_>) {
        self.remove(hash, entry.key);
        if entry.extra.is_some()
            && self.free_extras.is_empty()
            && self.extras.len() >= NO_EXTRA as usize
        {
            // Sixteen million links with options in one shard: the rest are not cached.
            return;
        }
        if self.entries >= self.max_entries {
            self.grow_table();
        }
        while self.entries >= self.max_entries && !self.order.is_empty() {
            self.empty_oldest();
        }
        let len = HEADER + entry.key.len() + entry.url.len();
        let at = self.room(len);
        let extra_bytes = entry.extra.as_ref().map_or(0, |e| e.bytes());
        let extra = match entry.extra {
            None => NO_EXTRA,
            Some(extra) => match self.free_extras.pop() {
                Some(i) => {
                    self.extras[i as usize] = Some(extra);
                    i
                }
                None => {
                    self.extras.push(Some(extra));
                    (self.extras.len() - 1) as u32
                }
            },
        };
        let out = &mut self.log[at..at + len];
        out[ID..ID + 8].copy_from_slice(&entry.id.to_le_bytes());
        out[UNTIL..UNTIL + 6].copy_from_slice(&entry.until.min(MAX_UNTIL).to_le_bytes()[..6]);
        out[EXTRA..EXTRA + 3].copy_from_slice(&extra.to_le_bytes()[..3]);
        out[MARKS] = 0;
        // Both within their fields: `fits` bounds them.
        out[KEY_LEN] = entry.key.len() as u8;
        out[URL_LEN..URL_LEN + 2].copy_from_slice(&(entry.url.len() as u16).to_le_bytes());
        out[HEADER..HEADER + entry.key.len()].copy_from_slice(entry.key);
        out[HEADER + entry.key.len()..].copy_from_slice(entry.url.as_bytes());
        self.table.insert(hash, at as u32);
        self.entries += 1;
        self.live_bytes += (len + extra_bytes) as u64;
    }

    /// Forgets a key's entry; whether there was one.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> bool {
        let log = &self.log;
        match self.table.find(hash, |at| key_at(log, at) == key) {
            Some(slot) => {
                let at = self.table.at(slot) as usize;
                self.remove_slot(slot, at);
                true
            }
            None => false,
        }
    }

    /// Doubles the table when the log's never-written segments can pay for it: the log
    /// gives up that many segments from its end (its allocation shrinks: jemalloc returns a
    /// large allocation's tail in place). Otherwise the table stays as it is and the caller
    /// evicts.
    fn grow_table(&mut self) {
        if self.max_entries >= self.max_allowed {
            return;
        }
        let cost = Table::bytes_for(self.table.capacity() * 2).saturating_sub(self.table.bytes());
        let segments = self.log.len() / self.segment;
        let left = segments.saturating_sub(cost.div_ceil(self.segment));
        if left < self.written.max(2) {
            return;
        }
        let mut log = std::mem::take(&mut self.log).into_vec();
        log.truncate(left * self.segment);
        log.shrink_to_fit();
        self.log = log.into_boxed_slice();
        self.used.truncate(left);
        self.free.retain(|&s| (s as usize) < left);
        self.table = self.table.doubled();
        self.max_entries = self.max_allowed.min(self.table.capacity());
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.table.clear();
        self.used.iter_mut().for_each(|u| *u = 0);
        self.order.clear();
        self.free = (0..self.used.len() as u32).rev().collect();
        self.extras.clear();
        self.free_extras.clear();
        self.entries = 0;
        self.live_bytes = 0;
    }

    /// Takes the entry at `at` (in the table's `slot`) out of the table and marks it dead.
    fn remove_slot(&mut self, slot: usize, at: usize) {
        self.table.remove(slot);
        self.drop_entry(at);
    }

    /// Takes the entry at `at` (its key hashing to `hash`) out of the table and marks it
    /// dead.
    fn remove_at(&mut self, hash: u64, at: usize) {
        if let Some(slot) = self.table.find(hash, |a| a as usize == at) {
            self.table.remove(slot);
        }
        self.drop_entry(at);
    }

    /// An entry leaves: its mark, its extra part, the counts.
    fn drop_entry(&mut self, at: usize) {
        self.log[at + MARKS] |= DEAD;
        let mut bytes = entry_len(&self.log, at);
        let extra = u24_at(&self.log, at + EXTRA);
        if extra != NO_EXTRA {
            if let Some(slot) = self.extras.get_mut(extra as usize) {
                bytes += slot.take().map_or(0, |e| e.bytes());
                self.free_extras.push(extra);
            }
        }
        self.entries -= 1;
        self.live_bytes -= bytes as u64;
    }

    /// Where `len` bytes can be written at the head, emptying old segments for it.
    fn room(&mut self, len: usize) -> usize {
        loop {
            if let Some(&head) = self.order.back() {
                let used = self.used[head as usize] as usize;
                if used + len <= self.segment {
                    self.used[head as usize] += len as u32;
                    return head as usize * self.segment + used;
                }
            }
            match self.free.pop() {
                Some(segment) => {
                    self.written = self.written.max(segment as usize + 1);
                    self.order.push_back(segment);
                }
                None => self.empty_oldest(),
            }
        }
    }

    /// Empties the oldest segment: entries read since they were written move to the head
    /// with their mark cleared, the rest leave the cache.
    fn empty_oldest(&mut self) {
        let Some(segment) = self.order.pop_front() else {
            return;
        };
        let start = segment as usize * self.segment;
        let end = start + self.used[segment as usize] as usize;
        let mut keep = std::mem::take(&mut self.keep);
        let mut moved = std::mem::take(&mut self.moved);
        keep.clear();
        moved.clear();
        let mut at = start;
        while at < end {
            let len = entry_len(&self.log, at);
            let marks = self.log[at + MARKS];
            if marks & DEAD == 0 {
                let hash = self.hasher.hash_one(key_at(&self.log, at as u32));
                if marks & READ != 0 {
                    moved.push((at, hash));
                    keep.extend_from_slice(&self.log[at..at + len]);
                } else {
                    self.remove_at(hash, at);
                }
            }
            at += len;
        }
        self.used[segment as usize] = 0;
        self.free.push(segment);
        // Written again at the head (the emptied segment is free, so this empties nothing),
        // and the table pointed at the new place.
        let mut from = 0;
        for &(old, hash) in &moved {
            let len = entry_len(&keep, from);
            let new = self.room(len);
            self.log[new..new + len].copy_from_slice(&keep[from..from + len]);
            self.log[new + MARKS] &= !READ;
            if let Some(slot) = self.table.find(hash, |a| a as usize == old) {
                self.table.set(slot, new as u32);
            }
            from += len;
        }
        self.keep = keep;
        self.moved = moved;
    }
}

fn u64_at(log: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&log[at..at + 8]);
    u64::from_le_bytes(bytes)
}

fn u48_at(log: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..6].copy_from_slice(&log[at..at + 6]);
    u64::from_le_bytes(bytes)
}

fn u24_at(log: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([log[at], log[at + 1], log[at + 2], 0])
}

fn key_len(log: &[u8], at: usize) -> usize {
    usize::from(log[at + KEY_LEN])
}

fn url_len(log: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes([
        log[at + URL_LEN],
        log[at + URL_LEN + 1],
    ]))
}

fn key_at(log: &[u8], at: u32) -> &[u8] {
    let at = at as usize;
    &log[at + HEADER..at + HEADER + key_len(log, at)]
}

fn url_at(log: &[u8], at: usize) -> &[u8] {
    let start = at + HEADER + key_len(log, at);
    &log[start..start + url_len(log, at)]
}

fn entry_len(log: &[u8], at: usize) -> usize {
    HEADER + key_len(log, at) + url_len(log, at)
}
