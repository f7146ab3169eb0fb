//! Domains on sled (`DomainStore`): the `domains` tree holds each record under `d` and its id
//! (big-endian), as JSON (few records, read whole at start and after a change), and the host
//! index under `h` and the host, holding the id; the next id under `domain_seq` in
//! `counters`, raised in the same transaction as an add, so an id is never given twice.

use sled::Transactional;

use super::errors::{backend, tx_error};
use super::keys::{read_u64, u64_key};
use super::SledStore;
use crate::{Domain, DomainAdded, DomainStore, StoreError, StoreResult};

const SEQ: &[u8] = b"domain_seq";

fn record_key(id: u16) -> Vec<u8> {
    let mut key = b"d".to_vec();
    key.extend_from_slice(&id.to_be_bytes());
    key
}

fn host_key(host: &str) -> Vec<u8> {
    let mut key = b"h".to_vec();
    key.extend_from_slice(host.as_bytes());
    key
}

fn corrupt(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        tree: "domains",
        detail: detail.to_string(),
    }
}

fn id_of(bytes: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.try_into().ok()?))
}

impl SledStore {
    /// Whether a key of the codes tree is a code of domain `id` (`code@id`).
    fn key_on_domain(key: &[u8], id: u16) -> bool {
        let suffix = format!("@{id}");
        key.ends_with(suffix.as_bytes())
    }
}

impl DomainStore for SledStore {
    fn domains(&self) -> StoreResult<Vec<Domain>> {
        self.domains
            .scan_prefix(b"d")
            .values()
            .map(|v| {
                let v = v.map_err(backend)?;
                serde_json::from_slice(&v).map_err(corrupt)
            })
            .collect()
    }

    fn add_domain(&self, domain: &Domain) -> StoreResult<DomainAdded> {
        self.space.admit(0)?;
        let host = host_key(&domain.host);
        let outcome = (&self.domains, &self.counters)
            .transaction(|(domains, counters)| {
                if domains.get(host.as_slice())?.is_some() {
                    return Ok(None);
                }
                let next = counters
                    .get(SEQ)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(1)
                    .max(1);
                let Ok(id) = u16::try_from(next) else {
                    return Ok(Some(Err(())));
                };
                let mut record = domain.clone();
                record.id = id;
                let bytes = serde_json::to_vec(&record).unwrap_or_default();
                domains.insert(record_key(id), bytes)?;
                domains.insert(host.as_slice(), &id.to_be_bytes()[..])?;
                counters.insert(SEQ, &u64_key(next + 1)[..])?;
                Ok(Some(Ok(record)))
            })
            .map_err(|e| tx_error(e, ""))?;
        match outcome {
            None => Ok(DomainAdded::Exists),
            Some(Err(())) => Err(StoreError::Backend("no domain id is left".into())),
            Some(Ok(record)) => {
                self.flusher.wait_durable()?;
                Ok(DomainAdded::Added(record))
            }
        }
    }

    fn put_domain(&self, domain: &Domain) -> StoreResult<bool> {
        self.space.admit(0)?;
        let bytes = serde_json::to_vec(domain).map_err(corrupt)?;
        let host = host_key(&domain.host);
        let id = domain.id;
        let written = (&self.domains, &self.counters)
            .transaction(|(domains, counters)| {
                if let Some(owner) = domains.get(host.as_slice())? {
                    if id_of(&owner) != Some(id) {
                        return Ok(false);
                    }
                }
                // A changed host leaves its old index entry.
                if let Some(old) = domains.get(record_key(id))? {
                    if let Ok(old) = serde_json::from_slice::<Domain>(&old) {
                        domains.remove(host_key(&old.host))?;
                    }
                }
                domains.insert(record_key(id), bytes.as_slice())?;
                domains.insert(host.as_slice(), &id.to_be_bytes()[..])?;
                let next = counters.get(SEQ)?.and_then(|v| read_u64(&v)).unwrap_or(1);
                if u64::from(id) >= next {
                    counters.insert(SEQ, &u64_key(u64::from(id) + 1)[..])?;
                }
                Ok(true)
            })
            .map_err(|e| tx_error(e, ""))?;
        if written {
            self.flusher.wait_durable()?;
        }
        Ok(written)
    }

    fn delete_domain(&self, id: u16) -> StoreResult<bool> {
        self.space.admit(0)?;
        let removed = self
            .domains
            .transaction(|domains| {
                let Some(old) = domains.remove(record_key(id))? else {
                    return Ok(false);
                };
                if let Ok(old) = serde_json::from_slice::<Domain>(&old) {
                    domains.remove(host_key(&old.host))?;
                }
                Ok(true)
            })
            .map_err(|e| tx_error(e, ""))?;
        if removed {
            self.flusher.wait_durable()?;
        }
        Ok(removed)
    }

    fn domain_in_use(&self, id: u16) -> StoreResult<bool> {
        // Codes of non-archived links are the codes tree's keys: a scan of keys alone, and
        // deleting a domain is rare.
        for key in self.codes.iter().keys() {
            if Self::key_on_domain(&key.map_err(backend)?, id) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
