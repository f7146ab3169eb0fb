//! Writing whole link records as they are (`vshortlink import`): the record keeps its code,
//! dates, status and expiry, and its id when that id is free and one the store could have
//! given (at most [`crate::MAX_LINK_ID`]; the counter then never wraps). Its code leaves any pool it sits
//! in and enters the code filter, and every index a link of that status belongs to is written,
//! in one transaction, like a create. Not durable on return: the importer makes a run of
//! records durable with one `sync`, as the lifecycle job does with its chunks.

use sled::transaction::{abort, TransactionError};
use sled::Transactional;

use super::codec::{
    active_code_value, bump, bump_status, encode, tx_code_owner, tx_decode_link, tx_next_link_id,
};
use super::errors::{tx_error, Abort};
use super::keys::{self, counter, read_u64};
use super::pools::{length_of, take_out_of_pool};
use super::{SledStore, DAY_MS};
use crate::{is_keepable_id, Imported, Link, LinkStatus, StoreError, StoreResult};

impl SledStore {
    /// Imports records in one transaction (an archived record alone, on its own path). Every
    /// non-archived record of one call must have a code of the same length.
    pub(super) fn import_batch(&self, batch: &[Link]) -> StoreResult<Vec<Imported>> {
        let Some(first) = batch.first() else {
            return Ok(Vec::new());
        };
        if batch.len() == 1 && first.status == LinkStatus::Archived {
            return Ok(vec![self.import_archived(first)?]);
        }
        let length = length_of(&first.code).ok_or_else(|| StoreError::Corrupt {
            tree: "import",
            detail: format!("`{}` is not a code length the store keeps", first.code),
        })?;
        if let Some(odd) = batch
            .iter()
            .find(|l| l.status == LinkStatus::Archived || length_of(&l.code) != Some(length))
        {
            return Err(StoreError::Corrupt {
                tree: "import",
                detail: format!(
                    "`{}` does not belong in a batch of length {length}",
                    odd.code
                ),
            });
        }
        let pool = self.pool(length).ok_or(StoreError::NotFound)?;
        // Into the filter before the commit, like a custom create.
        let keys: Vec<std::borrow::Cow<'_, str>> = batch.iter().map(Link::key).collect();
        self.filter_insert(keys.iter().map(|k| k.as_ref()));
        let committing = self.flusher.committing();
        let mut members = self.members(length).ok_or(StoreError::NotFound)?;
        let held = &*members;
        let trees = (
            &self.links,
            &self.codes,
            &self.dedup,
            &self.expiry,
            &self.ended,
            pool,
            &self.counters,
        );
        let outcome = trees
            .transaction(|(links, codes, dedup, expiry, ended, pool, counters)| {
                let mut results = Vec::with_capacity(batch.len());
                let mut last = counters
                    .get(counter::LINK_ID)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0);
                let mut by_status: [i64; 4] = [0; 4];
                let mut issued = 0i64;
                let mut unpooled_count = 0i64;
                let mut days: Vec<(u64, i64)> = Vec::new();
                for link in batch {
                    let code = link.code.as_str();
                    let key = link.key();
                    if let Some(value) = codes.get(key.as_bytes())? {
                        let id = tx_code_owner(&value)?;
                        let Some(bytes) = links.get(&keys::u64_key(id)[..])? else {
                            return abort(Abort::Corrupt(
                                "codes",
                                format!("`{code}` has no record"),
                            ));
                        };
                        let existing = tx_decode_link(&bytes)?;
                        results.push(if existing.url == link.url {
                            (Imported::Unchanged(existing), None)
                        } else {
                            (Imported::Conflict(existing), None)
                        });
                        continue;
                    }
                    let mut unpooled = None;
                    match take_out_of_pool(held, pool, code)? {
                        Some(score) => {
                            unpooled = Some(score);
                            unpooled_count += 1;
                        }
                        None => issued += 1,
                    }
                    // The record keeps its id when the store could have given it and no
                    // record holds it; else it gets the next one, like a create.
                    let free =
                        is_keepable_id(link.id) && links.get(keys::u64_key(link.id))?.is_none();
                    let id = if free {
                        link.id
                    } else {
                        tx_next_link_id(links, last)?
                    };
                    last = last.max(id);
                    let mut record = link.clone();
                    record.id = id;
                    let id_key = keys::u64_key(id);
                    links.insert(&id_key[..], encode(&record))?;
                    match record.status {
                        LinkStatus::Active => {
                            codes.insert(key.as_bytes(), active_code_value(&record))?;
                            if !record.custom {
                                let key = keys::dedup_key(
                                    &record.space,
                                    record.domain,
                                    length,
                                    &record.url,
                                );
                                if dedup.get(&key)?.is_none() {
                                    dedup.insert(key, &id_key[..])?;
                                }
                            }
                            if let Some(at) = record.expires_at {
                                expiry.insert(&keys::time_id_key(at, id)[..], &[][..])?;
                            }
                        }
                        LinkStatus::Expired | LinkStatus::Deleted => {
                            codes.insert(key.as_bytes(), &id_key[..])?;
                            if let Some(at) = record.ended_at() {
                                ended.insert(&keys::time_id_key(at, id)[..], &[][..])?;
                            }
                        }
                        LinkStatus::Archived => {}
                    }
                    if let Some(slot) = LinkStatus::ALL.iter().position(|s| *s == record.status) {
                        by_status[slot] += 1;
                    }
                    let day = record.created_at / DAY_MS;
                    match days.iter_mut().find(|(d, _)| *d == day) {
                        Some((_, n)) => *n += 1,
                        None => days.push((day, 1)),
                    }
                    results.push((Imported::Created(record), unpooled));
                }
                counters.insert(counter::LINK_ID, &last.to_be_bytes()[..])?;
                for (status, n) in LinkStatus::ALL.iter().zip(by_status) {
                    if n != 0 {
                        bump(counters, &counter::links(*status), n)?;
                    }
                }
                if issued != 0 {
                    bump(counters, counter::CODES_ISSUED, issued)?;
                }
                if unpooled_count != 0 {
                    bump(counters, &counter::pool_size(length), -unpooled_count)?;
                }
                for (day, n) in &days {
                    bump(counters, &counter::day_creates(*day), *n)?;
                }
                Ok(results)
            })
            .map_err(|e: TransactionError<Abort>| tx_error(e, &first.code));
        drop(committing);
        let results = outcome?;
        for (imported, unpooled) in &results {
            if let (Imported::Created(link), Some(_)) = (imported, unpooled) {
                members.taken(&link.code);
            }
        }
        drop(members);
        Ok(results
            .into_iter()
            .map(|(imported, unpooled)| {
                if let Some(score) = unpooled {
                    self.note_cooling(length, score, -1);
                }
                imported
            })
            .collect())
    }

    /// An archived record owns no code: it is kept by id (with its visits), nothing else.
    fn import_archived(&self, link: &Link) -> StoreResult<Imported> {
        let committing = self.flusher.committing();
        let outcome = (&self.links, &self.counters)
            .transaction(|(links, counters)| {
                if is_keepable_id(link.id) {
                    if let Some(bytes) = links.get(keys::u64_key(link.id))? {
                        let existing = tx_decode_link(&bytes)?;
                        return Ok(if existing == *link {
                            Imported::Unchanged(existing)
                        } else {
                            Imported::Conflict(existing)
                        });
                    }
                }
                let last = counters
                    .get(counter::LINK_ID)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0);
                let id = if is_keepable_id(link.id) {
                    link.id
                } else {
                    tx_next_link_id(links, last)?
                };
                counters.insert(counter::LINK_ID, &last.max(id).to_be_bytes()[..])?;
                let mut record = link.clone();
                record.id = id;
                links.insert(&keys::u64_key(id)[..], encode(&record))?;
                bump_status(counters, None, LinkStatus::Archived)?;
                bump(
                    counters,
                    &counter::day_creates(record.created_at / DAY_MS),
                    1,
                )?;
                Ok(Imported::Created(record))
            })
            .map_err(|e: TransactionError<Abort>| tx_error(e, &link.code));
        drop(committing);
        outcome
    }
}
