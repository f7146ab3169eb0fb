//! An append-only list kept in chunks of a fixed size: what the visit writer holds until a fold
//! (`visit_index.rs`, `visit_counts.rs`) is kept in these, because a `Vec` doubles as it grows
//! (holding twice its length for a while, and copying all of it each time) and the bounds of
//! what the writer holds count bytes: a list in chunks holds at most one chunk more than its
//! items, and its bytes are known exactly.

/// Items in one chunk.
const CHUNK: usize = 4096;

/// The list; items are addressed by their position, in insertion order.
pub(super) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends; returns the item's position.
    pub(super) fn push(&mut self, item: T) -> usize {
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.push(item);
        }
        self.len += 1;
        self.len - 1
    }

    pub(super) fn get(&self, at: usize) -> Option<&T> {
        self.chunks.get(at / CHUNK)?.get(at % CHUNK)
    }

    pub(super) fn get_mut(&mut self, at: usize) -> Option<&mut T> {
        self.chunks.get_mut(at / CHUNK)?.get_mut(at % CHUNK)
    }

    pub(super) fn last(&self) -> Option<&T> {
        self.chunks.last()?.last()
    }

    /// The last item.
    pub(super) fn last_mut(&mut self) -> Option<&mut T> {
        self.chunks.last_mut()?.last_mut()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    /// Bytes allocated: whole chunks, and the list of them.
    pub(super) fn bytes(&self) -> usize {
        self.chunks.len() * CHUNK * std::mem::size_of::<T>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<T>>()
    }

    /// Bytes one more item may allocate: a chunk, when the last one is full.
    pub(super) fn growth_bytes(&self) -> usize {
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            CHUNK * std::mem::size_of::<T>() + 2 * std::mem::size_of::<Vec<T>>()
        } else {
            0
        }
    }

    /// Keeps the items `keep` says to, in order; frees what the list no longer needs.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        let mut kept = Chunked::default();
        for chunk in std::mem::take(&mut self.chunks) {
            for mut item in chunk {
                if keep(&mut item) {
                    kept.push(item);
                }
            }
        }
        *self = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_keep_their_positions_across_chunks_and_bytes_grow_a_chunk_at_a_time() {
        let mut list: Chunked<u64> = Chunked::default();
        assert_eq!((list.len(), list.bytes()), (0, 0));
        assert!(list.growth_bytes() >= CHUNK * 8);
        for n in 0..(CHUNK as u64 + 10) {
            assert_eq!(list.push(n), n as usize);
        }
        assert_eq!(list.get(CHUNK + 3), Some(&(CHUNK as u64 + 3)));
        assert_eq!(list.get(CHUNK + 10), None);
        assert!(list.bytes() >= 2 * CHUNK * 8 && list.bytes() < 2 * CHUNK * 8 + 256);
        assert_eq!(list.growth_bytes(), 0, "room left in the last chunk");
        *list.get_mut(5).expect("there") = 99;
        assert_eq!(list.iter().nth(5), Some(&99));
        list.retain(|n| *n % 2 == 0);
        assert_eq!(list.len(), CHUNK / 2 + 5);
        assert!(list.iter().all(|n| n % 2 == 0));
        list.retain(|_| false);
        assert_eq!((list.len(), list.bytes()), (0, 0));
    }
}
