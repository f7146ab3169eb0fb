//! Plans' usage counters on sled (`QuotaStore`): held in memory under one lock, never
//! written. Only this process opens the store (sled locks its directory), so the records are
//! the whole truth at every open: each counter starts unset and the services count it from
//! the links and visits when they first need it ([`crate::QuotaStore::quota_get`] is `None`).
//! A take is then a map update under a lock, which costs a create next to nothing, and a crash
//! can leave no counter out of step with the records.

use super::SledStore;
use crate::{QuotaStore, QuotaTaken, StoreResult};

impl QuotaStore for SledStore {
    fn quota_get(&self, key: &str) -> StoreResult<Option<u64>> {
        Ok(self.quotas.lock().get(key).copied())
    }

    fn quota_init(&self, key: &str, value: u64) -> StoreResult<u64> {
        Ok(*self.quotas.lock().entry(key.to_string()).or_insert(value))
    }

    fn quota_take(
        &self,
        key: &str,
        want: u64,
        limit: u64,
        partial: bool,
    ) -> StoreResult<QuotaTaken> {
        let mut quotas = self.quotas.lock();
        let used = quotas.entry(key.to_string()).or_insert(0);
        let room = limit.saturating_sub(*used);
        let granted = match (want <= room, partial) {
            (true, _) => want,
            (false, true) => room,
            (false, false) => 0,
        };
        *used += granted;
        Ok(QuotaTaken {
            granted,
            used: *used,
        })
    }

    fn quota_release(&self, key: &str, n: u64) -> StoreResult<()> {
        if let Some(used) = self.quotas.lock().get_mut(key) {
            *used = used.saturating_sub(n);
        }
        Ok(())
    }

    fn quota_clear(&self) -> StoreResult<()> {
        self.quotas.lock().clear();
        Ok(())
    }
}
