//! The redirect cache's table: where each key's entry lies in its shard's log, by the key's
//! hash. Open addressing with linear probing and backward-shift deletion.
//!
//! Why not `hashbrown`: a removal there may leave a tombstone, and tombstones make a full
//! table grow to twice its size; a cache removes as often as it inserts. Here a removal
//! moves the following slots back, so the table never holds more than its entries, grows
//! only when its shard decides to ([`Table::doubled`], paid for out of the log), and costs
//! 8 bytes a slot at a load of up to [`LOAD`] — about 9 bytes an entry.

/// The most entries a table takes, as a share of its slots.
const LOAD: f64 = 0.875;
/// A slot's position when it is empty.
const EMPTY: u32 = u32::MAX;

/// A slot: the entry's position in the log and the low half of its key's hash.
#[derive(Clone, Copy)]
struct Slot {
    at: u32,
    hash: u32,
}

pub(super) struct Table {
    slots: Box<[Slot]>,
    len: usize,
}

impl Table {
    /// A table that holds `entries` without passing [`LOAD`].
    pub fn new(entries: usize) -> Self {
        let slots = Self::slots_for(entries);
        Self {
            slots: vec![Slot { at: EMPTY, hash: 0 }; slots].into_boxed_slice(),
            len: 0,
        }
    }

    fn slots_for(entries: usize) -> usize {
        ((entries.max(1) as f64 / LOAD).ceil() as usize).max(2)
    }

    /// Bytes of a table that holds `entries` ([`Table::new`]).
    pub fn bytes_for(entries: usize) -> usize {
        Self::slots_for(entries) * std::mem::size_of::<Slot>()
    }

    /// Entries the table takes before an insert must evict.
    pub fn capacity(&self) -> usize {
        (self.slots.len() as f64 * LOAD) as usize
    }

    pub fn bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }

    /// The slot a hash starts probing at (a multiply, not a modulo, so any size works).
    fn home(&self, hash: u32) -> usize {
        ((u64::from(hash) * self.slots.len() as u64) >> 32) as usize
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// The slot of the entry with this hash that `is` accepts.
    pub fn find(&self, hash: u64, mut is: impl FnMut(u32) -> bool) -> Option<usize> {
        let hash = hash as u32;
        let mut i = self.home(hash);
        loop {
            let slot = self.slots[i];
            if slot.at == EMPTY {
                return None;
            }
            if slot.hash == hash && is(slot.at) {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    pub fn at(&self, slot: usize) -> u32 {
        self.slots[slot].at
    }

    /// Points a slot at the entry's new position.
    pub fn set(&mut self, slot: usize, at: u32) {
        self.slots[slot].at = at;
    }

    /// Adds an entry the table does not hold; the caller keeps `len` within
    /// [`Table::capacity`], so an empty slot is always found.
    pub fn insert(&mut self, hash: u64, at: u32) {
        let hash = hash as u32;
        let mut i = self.home(hash);
        while self.slots[i].at != EMPTY {
            i = self.next(i);
        }
        self.slots[i] = Slot { at, hash };
        self.len += 1;
    }

    /// Empties a slot, moving back each following entry that probing would otherwise no
    /// longer reach.
    pub fn remove(&mut self, slot: usize) {
        let mut hole = slot;
        let mut i = self.next(slot);
        while self.slots[i].at != EMPTY {
            let home = self.home(self.slots[i].hash);
            // The entry at `i` may move to the hole unless its home lies cyclically in
            // (hole, i]: then it would be probed for before the hole is reached.
            let between = if hole <= i {
                hole < home && home <= i
            } else {
                hole < home || home <= i
            };
            if !between {
                self.slots[hole] = self.slots[i];
                hole = i;
            }
            i = self.next(i);
        }
        self.slots[hole] = Slot { at: EMPTY, hash: 0 };
        self.len -= 1;
    }

    /// A table of twice the capacity holding the same entries.
    pub fn doubled(&self) -> Self {
        let mut doubled = Self::new(self.capacity() * 2);
        for slot in self.slots.iter().filter(|s| s.at != EMPTY) {
            doubled.insert(u64::from(slot.hash), slot.at);
        }
        doubled
    }

    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| s.at = EMPTY);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_keep_every_other_entry_reachable() {
        // Few slots and colliding hashes: long runs that wrap around the end.
        let mut table = Table::new(50);
        let mut held = std::collections::HashMap::new();
        let mut seed = 7u64;
        for round in 0..20_000u32 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (seed >> 40) as u32 % 80;
            let hash = u64::from(key % 13) << 28 | u64::from(key);
            match held.get(&key) {
                Some(_) => {
                    let slot = table.find(hash, |at| at == key).expect("held is found");
                    table.remove(slot);
                    held.remove(&key);
                }
                None if table.len < table.capacity() => {
                    table.insert(hash, key);
                    held.insert(key, round);
                }
                None => {}
            }
            for &k in held.keys() {
                let h = u64::from(k % 13) << 28 | u64::from(k);
                assert!(table.find(h, |at| at == k).is_some(), "{k} lost");
            }
        }
        assert_eq!(table.len, held.len());
        let doubled = table.doubled();
        assert!(doubled.capacity() >= 2 * table.capacity() && doubled.len == table.len);
        for &k in held.keys() {
            let h = u64::from(k % 13) << 28 | u64::from(k);
            assert!(
                doubled.find(h, |at| at == k).is_some(),
                "{k} lost in doubling"
            );
        }
    }
}
