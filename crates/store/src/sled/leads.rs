//! Leads on sled: the `leads` tree, keyed by link id then lead id (both big-endian, so a
//! link's leads are one range in id order), and `lead_counts`, a link's count (whose keys are
//! also the links that have leads). Lead ids come from a counter in `counters`, raised in the
//! same transaction as the lead, so an id is never given twice, imports included.

use sled::transaction::TransactionalTree;
use sled::Transactional;

use super::codec::{bump, encode};
use super::errors::{backend, tx_error, TxResult};
use super::keys::{read_u64, u64_key};
use super::SledStore;
use crate::model::{Lead, LeadPage, Millis};
use crate::{LeadStore, StoreError, StoreResult};

/// The counter of the last lead id given.
const LEAD_SEQ: &[u8] = b"lead_seq";

/// A lead's value as stored (the key holds the link and the id).
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    at: Millis,
    values: Vec<(String, String)>,
    consent: Option<String>,
}

fn key(link_id: u64, id: u64) -> [u8; 16] {
    let mut key = [0; 16];
    key[..8].copy_from_slice(&u64_key(link_id));
    key[8..].copy_from_slice(&u64_key(id));
    key
}

fn decode(key: &[u8], value: &[u8]) -> StoreResult<Lead> {
    let corrupt = |detail: String| StoreError::Corrupt {
        tree: "leads",
        detail,
    };
    let (Some(link_id), Some(id)) = (read_u64(key), key.get(8..).and_then(read_u64)) else {
        return Err(corrupt("malformed key".into()));
    };
    let stored: Stored = rmp_serde::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
    Ok(Lead {
        id,
        link_id,
        at: stored.at,
        values: stored.values,
        consent: stored.consent,
    })
}

/// Writes one lead inside a transaction; `id` zero takes the next one from the counter, any
/// other raises the counter to it. False when the lead is there already (an import again).
fn tx_put(
    leads: &TransactionalTree,
    counts: &TransactionalTree,
    counters: &TransactionalTree,
    lead: &Lead,
) -> TxResult<Option<u64>> {
    let last = counters
        .get(LEAD_SEQ)?
        .and_then(|v| read_u64(&v))
        .unwrap_or(0);
    let id = if lead.id == 0 { last + 1 } else { lead.id };
    let k = key(lead.link_id, id);
    if leads.get(k)?.is_some() {
        return Ok(None);
    }
    let stored = Stored {
        at: lead.at,
        values: lead.values.clone(),
        consent: lead.consent.clone(),
    };
    leads.insert(&k[..], encode(&stored))?;
    bump(counts, &u64_key(lead.link_id), 1)?;
    counters.insert(LEAD_SEQ, &u64_key(last.max(id))[..])?;
    Ok(Some(id))
}

impl LeadStore for SledStore {
    fn add_lead(&self, mut lead: Lead) -> StoreResult<Lead> {
        self.space.admit(0)?;
        lead.id = 0;
        let id = (&self.leads, &self.lead_counts, &self.counters)
            .transaction(|(leads, counts, counters)| tx_put(leads, counts, counters, &lead))
            .map_err(|e| tx_error(e, ""))?;
        self.flusher.wait_durable()?;
        lead.id = id.unwrap_or(0);
        Ok(lead)
    }

    fn leads(&self, link_id: u64, before: Option<u64>, limit: usize) -> StoreResult<LeadPage> {
        let start = key(link_id, 0);
        let end = key(link_id, before.unwrap_or(u64::MAX));
        let mut leads = Vec::with_capacity(limit.min(1024));
        let mut range = self.leads.range(start..end).rev();
        for item in range.by_ref().take(limit) {
            let (k, v) = item.map_err(backend)?;
            leads.push(decode(&k, &v)?);
        }
        let more = range.next().is_some();
        let next = if more {
            leads.last().map(|l| l.id)
        } else {
            None
        };
        Ok(LeadPage { leads, next })
    }

    fn lead_count(&self, link_id: u64) -> StoreResult<u64> {
        Ok(self
            .lead_counts
            .get(u64_key(link_id))
            .map_err(backend)?
            .and_then(|v| read_u64(&v))
            .unwrap_or(0))
    }

    fn lead_links(&self) -> StoreResult<Vec<u64>> {
        self.lead_counts
            .iter()
            .keys()
            .map(|k| k.map_err(backend).map(|k| read_u64(&k).unwrap_or(0)))
            .collect()
    }

    /// Deletes a link's leads recorded before `before` (all of them with `None`), a chunk
    /// of keys per transaction.
    fn delete_leads(&self, link_id: u64, before: Option<Millis>) -> StoreResult<u64> {
        const CHUNK: usize = 1000;
        let mut deleted = 0;
        let mut after = 0;
        loop {
            let mut doomed = Vec::new();
            let mut scanned = 0;
            for item in self
                .leads
                .range(key(link_id, after)..=key(link_id, u64::MAX))
                .take(CHUNK)
            {
                let (k, v) = item.map_err(backend)?;
                scanned += 1;
                let lead = decode(&k, &v)?;
                after = lead.id.saturating_add(1);
                if before.is_none_or(|cutoff| lead.at < cutoff) {
                    doomed.push(k);
                }
            }
            if !doomed.is_empty() {
                let n = doomed.len();
                (&self.leads, &self.lead_counts)
                    .transaction(|(leads, counts)| {
                        let mut gone = 0i64;
                        for k in &doomed {
                            if leads.remove(k)?.is_some() {
                                gone += 1;
                            }
                        }
                        let key = u64_key(link_id);
                        bump(counts, &key, -gone)?;
                        if counts.get(key)?.and_then(|v| read_u64(&v)) == Some(0) {
                            counts.remove(&key[..])?;
                        }
                        TxResult::Ok(())
                    })
                    .map_err(|e| tx_error(e, ""))?;
                deleted += n as u64;
            }
            if scanned < CHUNK {
                break;
            }
        }
        Ok(deleted)
    }

    fn import_leads(&self, leads: &[Lead]) -> StoreResult<u64> {
        self.space.admit(0)?;
        let written = (&self.leads, &self.lead_counts, &self.counters)
            .transaction(|(tree, counts, counters)| {
                let mut written = 0;
                for lead in leads {
                    if lead.id == 0 {
                        continue;
                    }
                    if tx_put(tree, counts, counters, lead)?.is_some() {
                        written += 1;
                    }
                }
                Ok(written)
            })
            .map_err(|e| tx_error(e, ""))?;
        Ok(written)
    }
}
