//! Plans' usage counters in sled (`QuotaStore`): each a big-endian u64 in the `meta` tree under
//! `quota/<name>`, taken with compare-and-swap so that concurrent creates never pass a limit
//! together. Not carried by backups (only named `meta` keys are): a restored store counts its
//! usage again from its records. Owns nothing else in `meta`.

use super::errors::backend;
use super::SledStore;
use crate::{QuotaStore, QuotaTaken, StoreResult};

/// Where the counters sit in `meta`.
const PREFIX: &str = "quota/";

fn key_of(name: &str) -> Vec<u8> {
    format!("{PREFIX}{name}").into_bytes()
}

fn value_of(bytes: Option<&[u8]>) -> Option<u64> {
    bytes
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
}

impl SledStore {
    /// Replaces the counter `key` by `next(current)` unless another writer changed it first
    /// (then reads it again and retries); `next` returning `None` leaves it as it is. Returns
    /// the value it was at when `next` decided.
    fn quota_update(
        &self,
        key: &[u8],
        mut next: impl FnMut(Option<u64>) -> Option<u64>,
    ) -> StoreResult<Option<u64>> {
        loop {
            let current = self.meta.get(key).map_err(backend)?;
            let value = value_of(current.as_deref());
            let Some(new) = next(value) else {
                return Ok(value);
            };
            let swapped = self
                .meta
                .compare_and_swap(key, current, Some(&new.to_be_bytes()[..]))
                .map_err(backend)?;
            if swapped.is_ok() {
                return Ok(value);
            }
        }
    }
}

impl QuotaStore for SledStore {
    fn quota_get(&self, key: &str) -> StoreResult<Option<u64>> {
        Ok(value_of(
            self.meta.get(key_of(key)).map_err(backend)?.as_deref(),
        ))
    }

    fn quota_init(&self, key: &str, value: u64) -> StoreResult<u64> {
        self.space.admit(0)?;
        let before = self.quota_update(&key_of(key), |current| match current {
            None => Some(value),
            Some(_) => None,
        })?;
        Ok(before.unwrap_or(value))
    }

    fn quota_take(
        &self,
        key: &str,
        want: u64,
        limit: u64,
        partial: bool,
    ) -> StoreResult<QuotaTaken> {
        self.space.admit(0)?;
        let grant = |used: u64| {
            let room = limit.saturating_sub(used);
            match (want <= room, partial) {
                (true, _) => want,
                (false, true) => room,
                (false, false) => 0,
            }
        };
        let before = self
            .quota_update(&key_of(key), |current| {
                let used = current.unwrap_or(0);
                match grant(used) {
                    0 => None,
                    granted => Some(used + granted),
                }
            })?
            .unwrap_or(0);
        let granted = grant(before);
        Ok(QuotaTaken {
            granted,
            used: before + granted,
        })
    }

    fn quota_release(&self, key: &str, n: u64) -> StoreResult<()> {
        self.quota_update(&key_of(key), |current| {
            current.map(|used| used.saturating_sub(n))
        })?;
        Ok(())
    }

    fn quota_clear(&self) -> StoreResult<()> {
        for entry in self.meta.scan_prefix(PREFIX) {
            let (key, _) = entry.map_err(backend)?;
            self.meta.remove(key).map_err(backend)?;
        }
        self.flusher.wait_durable()
    }
}
