//! Accounts on sled (`AccountStore`): the `accounts` tree, keyed by kind, a zero byte, then
//! id, holding each record's bytes; its version under `accounts_version` in `counters`, raised
//! in the same transaction as every write; and the `audit` tree, keyed by entry id
//! (big-endian, so newest first is a reverse scan), ids from `audit_seq` in `counters`.

use sled::Transactional;

use super::errors::{backend, tx_error};
use super::keys::{read_u64, u64_key};
use super::SledStore;
use crate::model::account::RecordAddress;
use crate::{
    AccountStore, AccountWrite, AccountsSnapshot, AuditEntry, AuditPage, AuditQuery, Millis,
    StoreError, StoreResult,
};

const VERSION: &[u8] = b"accounts_version";
const AUDIT_SEQ: &[u8] = b"audit_seq";
/// At most this many entries are read for one page of a filtered listing; the cursor goes on.
const AUDIT_SCAN_BUDGET: usize = 50_000;

fn key(address: &RecordAddress) -> Vec<u8> {
    let mut key = Vec::with_capacity(address.kind.len() + 1 + address.id.len());
    key.extend_from_slice(address.kind.as_bytes());
    key.push(0);
    key.extend_from_slice(address.id.as_bytes());
    key
}

fn corrupt(tree: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        tree,
        detail: detail.to_string(),
    }
}

impl AccountStore for SledStore {
    fn accounts(&self) -> StoreResult<AccountsSnapshot> {
        // The version and the records must agree: read both in one transaction's view.
        let version = self
            .counters
            .get(VERSION)
            .map_err(backend)?
            .and_then(|v| read_u64(&v))
            .unwrap_or(0);
        let records = self
            .accounts
            .iter()
            .values()
            .map(|v| v.map(|v| v.to_vec()).map_err(backend))
            .collect::<StoreResult<Vec<_>>>()?;
        // A write between the two reads raised the version: read again rather than hand out
        // records newer than their version (the caller would then refuse its own next write
        // once and reload, which is harmless, but a consistent pair is simpler to reason on).
        let after = self
            .counters
            .get(VERSION)
            .map_err(backend)?
            .and_then(|v| read_u64(&v))
            .unwrap_or(0);
        if after != version {
            return self.accounts();
        }
        Ok(AccountsSnapshot { version, records })
    }

    fn write_accounts(&self, version: u64, write: &AccountWrite) -> StoreResult<Option<u64>> {
        self.space.admit(0)?;
        let puts: Vec<(Vec<u8>, Vec<u8>)> = write
            .put
            .iter()
            .map(|r| (key(&r.address()), r.encode()))
            .collect();
        let deletes: Vec<Vec<u8>> = write.delete.iter().map(key).collect();
        let outcome = (&self.accounts, &self.counters)
            .transaction(|(accounts, counters)| {
                let now = counters
                    .get(VERSION)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0);
                if now != version {
                    return Ok(None);
                }
                for k in &deletes {
                    accounts.remove(k.as_slice())?;
                }
                for (k, v) in &puts {
                    accounts.insert(k.as_slice(), v.as_slice())?;
                }
                counters.insert(VERSION, &u64_key(version + 1)[..])?;
                Ok(Some(version + 1))
            })
            .map_err(|e| tx_error(e, ""))?;
        if outcome.is_some() {
            self.flusher.wait_durable()?;
        }
        Ok(outcome)
    }

    fn audit_append(&self, entries: &[AuditEntry]) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.space.admit(0)?;
        let mut encoded = Vec::with_capacity(entries.len());
        for entry in entries {
            encoded.push(serde_json::to_vec(entry).map_err(|e| corrupt("audit", e))?);
        }
        (&self.audit, &self.counters)
            .transaction(|(audit, counters)| {
                let mut last = counters
                    .get(AUDIT_SEQ)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0);
                for bytes in &encoded {
                    last += 1;
                    audit.insert(&u64_key(last)[..], bytes.as_slice())?;
                }
                counters.insert(AUDIT_SEQ, &u64_key(last)[..])?;
                Ok(())
            })
            .map_err(|e| tx_error(e, ""))?;
        self.flusher.wait_durable()
    }

    fn audit(&self, query: &AuditQuery) -> StoreResult<AuditPage> {
        let end = u64_key(query.before.unwrap_or(u64::MAX));
        let mut entries = Vec::new();
        for (scanned, item) in self.audit.range(..end).rev().enumerate() {
            let (k, v) = item.map_err(backend)?;
            let id = read_u64(&k).ok_or_else(|| corrupt("audit", "malformed key"))?;
            if entries.len() >= query.limit || scanned >= AUDIT_SCAN_BUDGET {
                return Ok(AuditPage {
                    entries,
                    next: Some(id + 1),
                });
            }
            let mut entry: AuditEntry =
                serde_json::from_slice(&v).map_err(|e| corrupt("audit", e))?;
            entry.id = id;
            if query.to.is_some_and(|to| entry.at >= to) {
                continue;
            }
            if query.from.is_some_and(|from| entry.at < from) {
                // Ids grow with time (one clock per instance): older entries are all earlier.
                break;
            }
            if query.matches(&entry) {
                entries.push(entry);
            }
        }
        Ok(AuditPage {
            entries,
            next: None,
        })
    }

    fn audit_prune(&self, before: Millis) -> StoreResult<u64> {
        let mut gone = 0;
        loop {
            let mut batch = sled::Batch::default();
            let mut n = 0;
            for item in self.audit.iter().take(1000) {
                let (k, v) = item.map_err(backend)?;
                let entry: AuditEntry =
                    serde_json::from_slice(&v).map_err(|e| corrupt("audit", e))?;
                if entry.at >= before {
                    break;
                }
                batch.remove(k);
                n += 1;
            }
            if n == 0 {
                return Ok(gone);
            }
            self.audit.apply_batch(batch).map_err(backend)?;
            self.flusher.wait_durable()?;
            gone += n;
        }
    }
}
