//! Records kept for a while by id, for the web pages (page sessions, batch results): in the
//! shared store when instances share one, so that any instance may serve the next request, and
//! otherwise in memory, bounded per kind (the least recently touched go first). Which one is
//! chosen once, in `build()`; the pages never reach the store.
//!
//! A record lives `ttl` after it was last touched. Values are bytes the caller encodes.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::model::{Millis, StoreResult};
use crate::store::Store;

/// A kind of record and how many of it memory keeps at most.
#[derive(Clone, Copy, Debug)]
pub struct RecordKind {
    pub name: &'static str,
    pub capacity: usize,
}

/// One record in memory: when it was last touched, and its bytes.
type Entry = (Millis, Vec<u8>);

enum Backend {
    /// One instance: by kind, then by id.
    Memory(Mutex<HashMap<&'static str, HashMap<Vec<u8>, Entry>>>),
    /// Instances sharing one store keep the records there.
    Shared(Arc<dyn Store>),
}

pub struct RecordCache {
    backend: Backend,
}

impl RecordCache {
    /// In the store when it shares records between instances, else in memory.
    pub fn for_store(store: Arc<dyn Store>) -> Self {
        if store.cluster().is_some() {
            Self {
                backend: Backend::Shared(store),
            }
        } else {
            Self::memory()
        }
    }

    /// In memory (one instance).
    pub fn memory() -> Self {
        Self {
            backend: Backend::Memory(Mutex::new(HashMap::new())),
        }
    }

    /// Whether records reach other instances.
    pub fn shared(&self) -> bool {
        matches!(self.backend, Backend::Shared(_))
    }

    /// Keeps a record, touched `now`.
    pub fn put(
        &self,
        kind: RecordKind,
        id: &[u8],
        value: &[u8],
        now: Millis,
        ttl: Millis,
    ) -> StoreResult<()> {
        let map = match &self.backend {
            Backend::Shared(store) => {
                return match store.cluster().map(|c| c.records()) {
                    Some(shared) => shared.put(kind.name, id, value, now, ttl),
                    None => Ok(()),
                }
            }
            Backend::Memory(map) => map,
        };
        let mut kinds = map.lock();
        let records = kinds.entry(kind.name).or_default();
        if records.len() >= kind.capacity && !records.contains_key(id) {
            records.retain(|_, (at, _)| now.saturating_sub(*at) < ttl);
            if records.len() >= kind.capacity {
                if let Some(oldest) = records
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| k.clone())
                {
                    records.remove(&oldest);
                }
            }
        }
        records.insert(id.to_vec(), (now, value.to_vec()));
        Ok(())
    }

    /// A record touched within `ttl` before `now`; with `touch`, its clock restarts.
    pub fn get(
        &self,
        kind: RecordKind,
        id: &[u8],
        now: Millis,
        ttl: Millis,
        touch: bool,
    ) -> StoreResult<Option<Vec<u8>>> {
        let map = match &self.backend {
            Backend::Shared(store) => {
                return match store.cluster().map(|c| c.records()) {
                    Some(shared) => shared.get(kind.name, id, now, ttl, touch),
                    None => Ok(None),
                }
            }
            Backend::Memory(map) => map,
        };
        let mut kinds = map.lock();
        let Some(records) = kinds.get_mut(kind.name) else {
            return Ok(None);
        };
        let Some((at, value)) = records.get_mut(id) else {
            return Ok(None);
        };
        if now.saturating_sub(*at) >= ttl {
            records.remove(id);
            return Ok(None);
        }
        if touch {
            *at = now;
        }
        Ok(Some(value.clone()))
    }

    pub fn delete(&self, kind: RecordKind, id: &[u8]) -> StoreResult<()> {
        match &self.backend {
            Backend::Shared(store) => match store.cluster().map(|c| c.records()) {
                Some(shared) => shared.delete(kind.name, id),
                None => Ok(()),
            },
            Backend::Memory(map) => {
                if let Some(records) = map.lock().get_mut(kind.name) {
                    records.remove(id);
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: RecordKind = RecordKind {
        name: "test",
        capacity: 2,
    };

    #[test]
    fn records_live_ttl_after_their_last_touch_and_memory_is_bounded() {
        let records = RecordCache::memory();
        records.put(KIND, b"a", b"1", 0, 100).expect("put");
        assert_eq!(
            records.get(KIND, b"a", 50, 100, true).expect("get"),
            Some(b"1".to_vec())
        );
        // Touched at 50: alive at 149, gone at 150.
        assert!(records
            .get(KIND, b"a", 149, 100, false)
            .expect("get")
            .is_some());
        assert!(records
            .get(KIND, b"a", 150, 100, false)
            .expect("get")
            .is_none());
        records.put(KIND, b"x", b"1", 200, 100).expect("put");
        records.put(KIND, b"y", b"2", 210, 100).expect("put");
        records.put(KIND, b"z", b"3", 220, 100).expect("put");
        assert!(
            records
                .get(KIND, b"x", 221, 100, false)
                .expect("get")
                .is_none(),
            "the oldest went"
        );
        assert!(records
            .get(KIND, b"z", 221, 100, false)
            .expect("get")
            .is_some());
        records.delete(KIND, b"z").expect("delete");
        assert!(records
            .get(KIND, b"z", 221, 100, false)
            .expect("get")
            .is_none());
    }
}
