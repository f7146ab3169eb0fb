//! The webhook outbox on sled: the items waiting for delivery, their order per key, when each
//! key's head is due, and the delivery log.
//!
//! | tree | key | value |
//! |---|---|---|
//! | `outbox` | id u64 | the item: a u32 length, that many bytes of MessagePack head (webhook, event, key, times, attempts, last error), then the body as it is |
//! | `outbox_keys` | webhook, key (each a u32 length then its bytes), id u64 | empty: each key's items in id order, the first its head |
//! | `outbox_due` | next_at u64, id u64 | empty: the heads only, soonest due first |
//! | `outbox_log` | log seq u64 | a [`DeliveryRecord`] (MessagePack) |
//! | `outbox_log_hooks` | webhook (a u32 length then its bytes), log seq u64 | empty: each webhook's records, for its listing and its bound |
//!
//! Only heads sit in `outbox_due`, so `take_due` reads the due heads and
//! nothing else, however many items wait behind a head that is retrying. Item ids and log
//! sequence numbers come from counters raised in the same transaction.
//!
//! Every outbox write holds [`Outbox`]'s lock from its first read to its commit: sled
//! transactions cannot scan a range, so what a write learns by scanning (whether a key has
//! items, which item comes next, which log records pass the bound) is read before, and must not
//! change before it commits. Leases live in memory, like the review queue's: one process uses a
//! sled store, and after a crash every item is free again, which is what a lease is for.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use sled::Transactional;

use super::codec::encode;
use super::errors::{backend, tx_error, TxResult};
use super::keys::{read_u64, split_time_id, time_id_key, u64_key};
use super::SledStore;
use crate::model::{
    DeliveryAttempt, DeliveryOutcome, DeliveryRecord, Millis, NewOutboxItem, OutboxItem,
    DELIVERY_LOG_KEEP,
};
use crate::{OutboxStore, StoreError, StoreResult};

/// The counter of the last item id given.
const OUTBOX_SEQ: &[u8] = b"outbox_seq";
/// The counter of the last log record written.
const OUTBOX_LOG_SEQ: &[u8] = b"outbox_log_seq";

/// What this process keeps of the outbox beyond the trees, under the lock every outbox write
/// holds.
pub(super) struct Outbox {
    /// Leased items, until when.
    leases: HashMap<u64, Millis>,
    /// Items in `outbox` (sled counts a tree by reading all of it; `/metrics` asks often).
    depth: u64,
    /// Log records per webhook, counted on a webhook's first record since the store opened.
    logged: HashMap<String, u64>,
}

impl Outbox {
    /// The state of a store just opened: nothing leased.
    pub(super) fn load(outbox: &sled::Tree) -> Self {
        Outbox {
            leases: HashMap::new(),
            depth: outbox.len() as u64,
            logged: HashMap::new(),
        }
    }
}

/// What becomes of a settled item.
#[derive(Clone, Copy)]
enum Settle {
    /// It leaves the outbox, logged with this outcome.
    Remove(DeliveryOutcome),
    /// It waits until then, logged as failed.
    Retry(Millis),
}

/// An item as stored, but its id (the key) and body (after it).
#[derive(Serialize, Deserialize)]
struct Head {
    webhook: String,
    event: String,
    key: String,
    created_at: Millis,
    attempts: u32,
    next_at: Millis,
    last_error: Option<String>,
}

fn corrupt(tree: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        tree,
        detail: detail.to_string(),
    }
}

/// The body goes after the head as it is: MessagePack would store it as an array of numbers.
fn encode_item(item: &OutboxItem) -> Vec<u8> {
    let head = encode(&Head {
        webhook: item.webhook.clone(),
        event: item.event.clone(),
        key: item.key.clone(),
        created_at: item.created_at,
        attempts: item.attempts,
        next_at: item.next_at,
        last_error: item.last_error.clone(),
    });
    let mut value = Vec::with_capacity(4 + head.len() + item.body.len());
    value.extend_from_slice(&u32::try_from(head.len()).unwrap_or(u32::MAX).to_be_bytes());
    value.extend_from_slice(&head);
    value.extend_from_slice(&item.body);
    value
}

fn decode_item(id: u64, value: &[u8]) -> StoreResult<OutboxItem> {
    let length = value
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| corrupt("outbox", "no head length"))?;
    let head = value
        .get(4..4 + length)
        .ok_or_else(|| corrupt("outbox", "a head longer than the value"))?;
    let head: Head = rmp_serde::from_slice(head).map_err(|e| corrupt("outbox", e))?;
    Ok(OutboxItem {
        id,
        webhook: head.webhook,
        event: head.event,
        key: head.key,
        body: value.get(4 + length..).unwrap_or_default().to_vec(),
        created_at: head.created_at,
        attempts: head.attempts,
        next_at: head.next_at,
        last_error: head.last_error,
    })
}

fn decode_record(value: &[u8]) -> StoreResult<DeliveryRecord> {
    rmp_serde::from_slice(value).map_err(|e| corrupt("outbox_log", e))
}

/// Appends a u32 length and the text: no text is a prefix of another's key that way.
fn push_text(key: &mut Vec<u8>, text: &str) {
    key.extend_from_slice(&u32::try_from(text.len()).unwrap_or(u32::MAX).to_be_bytes());
    key.extend_from_slice(text.as_bytes());
}

/// The prefix of one key's items in `outbox_keys`.
fn key_prefix(webhook: &str, key: &str) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(8 + webhook.len() + key.len() + 8);
    push_text(&mut prefix, webhook);
    push_text(&mut prefix, key);
    prefix
}

/// The prefix of one webhook's records in `outbox_log_hooks`.
fn hook_prefix(webhook: &str) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(4 + webhook.len() + 8);
    push_text(&mut prefix, webhook);
    prefix
}

fn with_number(mut prefix: Vec<u8>, n: u64) -> Vec<u8> {
    prefix.extend_from_slice(&u64_key(n));
    prefix
}

/// The number that ends a key of `outbox_keys` or `outbox_log_hooks`.
fn number_at_end(tree: &'static str, key: &[u8]) -> StoreResult<u64> {
    key.len()
        .checked_sub(8)
        .and_then(|at| read_u64(&key[at..]))
        .ok_or_else(|| corrupt(tree, "malformed key"))
}

impl OutboxStore for SledStore {
    fn enqueue(&self, items: &[NewOutboxItem]) -> StoreResult<Vec<u64>> {
        let bytes = items.iter().map(|i| i.body.len() as u64).sum();
        self.space.admit(bytes)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = self.outbox_state.lock();
        // An item heads its key when none of that key waits, nor comes before it in the batch.
        let mut seen = HashSet::new();
        let mut heads = Vec::with_capacity(items.len());
        for item in items {
            let prefix = key_prefix(&item.webhook, &item.key);
            let empty = self
                .outbox_keys
                .scan_prefix(&prefix)
                .next()
                .transpose()
                .map_err(backend)?
                .is_none();
            heads.push(empty && seen.insert(prefix));
        }
        let trees = (
            &self.outbox,
            &self.outbox_keys,
            &self.outbox_due,
            &self.counters,
        );
        let last = trees
            .transaction(|(outbox, keys, due, counters)| {
                let mut id = counters
                    .get(OUTBOX_SEQ)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0);
                for (new, &head) in items.iter().zip(&heads) {
                    id += 1;
                    let item = OutboxItem {
                        id,
                        webhook: new.webhook.clone(),
                        event: new.event.clone(),
                        key: new.key.clone(),
                        body: new.body.clone(),
                        created_at: new.created_at,
                        attempts: 0,
                        next_at: new.created_at,
                        last_error: None,
                    };
                    outbox.insert(&u64_key(id)[..], encode_item(&item))?;
                    keys.insert(with_number(key_prefix(&new.webhook, &new.key), id), &[][..])?;
                    if head {
                        due.insert(&time_id_key(new.created_at, id)[..], &[][..])?;
                    }
                }
                counters.insert(OUTBOX_SEQ, &u64_key(id)[..])?;
                TxResult::Ok(id)
            })
            .map_err(|e| tx_error(e, ""))?;
        let count = items.len() as u64;
        state.depth += count;
        drop(state);
        self.flusher.wait_durable()?;
        Ok((last + 1 - count..=last).collect())
    }

    fn take_due(&self, now: Millis, lease: Millis, limit: usize) -> StoreResult<Vec<OutboxItem>> {
        let mut taken = Vec::new();
        if limit == 0 {
            return Ok(taken);
        }
        let mut state = self.outbox_state.lock();
        for entry in self.outbox_due.range(..=time_id_key(now, u64::MAX)) {
            let (key, _) = entry.map_err(backend)?;
            let (_, id) =
                split_time_id(&key).ok_or_else(|| corrupt("outbox_due", "malformed key"))?;
            if state.leases.get(&id).is_some_and(|until| *until > now) {
                continue;
            }
            let value = self
                .outbox
                .get(u64_key(id))
                .map_err(backend)?
                .ok_or_else(|| corrupt("outbox_due", format!("item {id} is not in `outbox`")))?;
            taken.push(decode_item(id, &value)?);
            state.leases.insert(id, now.saturating_add(lease));
            if taken.len() >= limit {
                break;
            }
        }
        Ok(taken)
    }

    fn delivered(&self, id: u64, attempt: &DeliveryAttempt) -> StoreResult<bool> {
        self.space.admit(0)?;
        self.settle(id, attempt, Settle::Remove(DeliveryOutcome::Delivered))
    }

    fn retry(&self, id: u64, attempt: &DeliveryAttempt, next_at: Millis) -> StoreResult<bool> {
        self.space.admit(0)?;
        self.settle(id, attempt, Settle::Retry(next_at))
    }

    fn give_up(&self, id: u64, attempt: &DeliveryAttempt) -> StoreResult<bool> {
        self.space.admit(0)?;
        self.settle(id, attempt, Settle::Remove(DeliveryOutcome::GaveUp))
    }

    fn outbox_depth(&self) -> StoreResult<u64> {
        Ok(self.outbox_state.lock().depth)
    }

    fn deliveries(
        &self,
        webhook: Option<&str>,
        failed_only: bool,
        limit: usize,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let wanted = |r: &DeliveryRecord| !failed_only || r.outcome.is_failure();
        let mut records = Vec::new();
        if limit == 0 {
            return Ok(records);
        }
        match webhook {
            None => {
                for entry in self.outbox_log.iter().rev() {
                    let (_, value) = entry.map_err(backend)?;
                    let record = decode_record(&value)?;
                    if wanted(&record) {
                        records.push(record);
                        if records.len() >= limit {
                            break;
                        }
                    }
                }
            }
            Some(webhook) => {
                for key in self
                    .outbox_log_hooks
                    .scan_prefix(hook_prefix(webhook))
                    .keys()
                    .rev()
                {
                    let seq = number_at_end("outbox_log_hooks", &key.map_err(backend)?)?;
                    let value = self
                        .outbox_log
                        .get(u64_key(seq))
                        .map_err(backend)?
                        .ok_or_else(|| {
                            corrupt(
                                "outbox_log_hooks",
                                format!("record {seq} is not in the log"),
                            )
                        })?;
                    let record = decode_record(&value)?;
                    if wanted(&record) {
                        records.push(record);
                        if records.len() >= limit {
                            break;
                        }
                    }
                }
            }
        }
        Ok(records)
    }
}

impl SledStore {
    /// Logs an attempt on an item and removes it or sets its next attempt, in one transaction.
    fn settle(&self, id: u64, attempt: &DeliveryAttempt, how: Settle) -> StoreResult<bool> {
        let mut state = self.outbox_state.lock();
        let Some(value) = self.outbox.get(u64_key(id)).map_err(backend)? else {
            return Ok(false);
        };
        let item = decode_item(id, &value)?;
        let attempts = item.attempts.saturating_add(1);
        let outcome = match how {
            Settle::Remove(outcome) => outcome,
            Settle::Retry(_) => DeliveryOutcome::Failed,
        };
        let record = encode(&attempt.record(&item, attempts, outcome));
        // The key's first two items: whether this one is its head (only heads are taken, but a
        // caller may settle any item), and which item heads the key after it.
        let prefix = key_prefix(&item.webhook, &item.key);
        let mut firsts = Vec::with_capacity(2);
        for key in self.outbox_keys.scan_prefix(&prefix).keys().take(2) {
            firsts.push(number_at_end("outbox_keys", &key.map_err(backend)?)?);
        }
        let is_head = firsts.first() == Some(&id);
        let due_out = is_head.then(|| time_id_key(item.next_at, id));
        // The item's new value (`None`: it leaves) and its, or its successor's, due entry.
        let (rewritten, due_in) = match how {
            Settle::Retry(next_at) => {
                let retried = OutboxItem {
                    attempts,
                    next_at,
                    last_error: attempt.kept_error(),
                    ..item.clone()
                };
                (
                    Some(encode_item(&retried)),
                    is_head.then(|| time_id_key(next_at, id)),
                )
            }
            Settle::Remove(_) => {
                let next = match firsts.get(1) {
                    Some(&next) if is_head => Some(next),
                    _ => None,
                };
                let due_in = match next {
                    Some(next) => {
                        let value = self
                            .outbox
                            .get(u64_key(next))
                            .map_err(backend)?
                            .ok_or_else(|| {
                                corrupt("outbox_keys", format!("item {next} is not in `outbox`"))
                            })?;
                        Some(time_id_key(decode_item(next, &value)?.next_at, next))
                    }
                    None => None,
                };
                (None, due_in)
            }
        };
        // The webhook's oldest records past the bound, once this one is written.
        let logged = self.logged(&mut state, &item.webhook)?;
        let over = usize::try_from(logged.saturating_add(1))
            .unwrap_or(usize::MAX)
            .saturating_sub(DELIVERY_LOG_KEEP);
        let mut pruned = Vec::with_capacity(over);
        for key in self
            .outbox_log_hooks
            .scan_prefix(hook_prefix(&item.webhook))
            .keys()
            .take(over)
        {
            let key = key.map_err(backend)?;
            let seq = number_at_end("outbox_log_hooks", &key)?;
            pruned.push((key, seq));
        }
        let item_key = with_number(prefix, id);
        let trees = (
            &self.outbox,
            &self.outbox_keys,
            &self.outbox_due,
            &self.outbox_log,
            &self.outbox_log_hooks,
            &self.counters,
        );
        trees
            .transaction(|(outbox, keys, due, log, hooks, counters)| {
                match &rewritten {
                    Some(value) => {
                        outbox.insert(&u64_key(id)[..], value.as_slice())?;
                    }
                    None => {
                        outbox.remove(&u64_key(id)[..])?;
                        keys.remove(item_key.as_slice())?;
                    }
                }
                if let Some(key) = due_out {
                    due.remove(&key[..])?;
                }
                if let Some(key) = due_in {
                    due.insert(&key[..], &[][..])?;
                }
                let seq = counters
                    .get(OUTBOX_LOG_SEQ)?
                    .and_then(|v| read_u64(&v))
                    .unwrap_or(0)
                    + 1;
                counters.insert(OUTBOX_LOG_SEQ, &u64_key(seq)[..])?;
                log.insert(&u64_key(seq)[..], record.as_slice())?;
                hooks.insert(with_number(hook_prefix(&item.webhook), seq), &[][..])?;
                for (key, old) in &pruned {
                    hooks.remove(key)?;
                    log.remove(&u64_key(*old)[..])?;
                }
                TxResult::Ok(())
            })
            .map_err(|e| tx_error(e, ""))?;
        state.leases.remove(&id);
        if rewritten.is_none() {
            state.depth = state.depth.saturating_sub(1);
        }
        state.logged.insert(
            item.webhook,
            logged.saturating_add(1).saturating_sub(pruned.len() as u64),
        );
        drop(state);
        self.flusher.wait_durable()?;
        Ok(true)
    }

    /// How many log records a webhook has (counted on first use, then kept up to date).
    fn logged(&self, state: &mut Outbox, webhook: &str) -> StoreResult<u64> {
        if let Some(&n) = state.logged.get(webhook) {
            return Ok(n);
        }
        let mut n = 0;
        for key in self
            .outbox_log_hooks
            .scan_prefix(hook_prefix(webhook))
            .keys()
        {
            key.map_err(backend)?;
            n += 1;
        }
        state.logged.insert(webhook.to_string(), n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_reads_back_as_written() {
        let item = OutboxItem {
            id: 7,
            webhook: "hooks.example".into(),
            event: "link.created".into(),
            key: "link:3".into(),
            body: b"{\"\xff\"}".to_vec(),
            created_at: 10,
            attempts: 2,
            next_at: 20,
            last_error: Some("HTTP 500".into()),
        };
        assert_eq!(decode_item(7, &encode_item(&item)).unwrap(), item);
        assert!(decode_item(7, &[0, 0, 0, 9, 1]).is_err());
        assert!(decode_item(7, &[0]).is_err());
    }

    #[test]
    fn no_key_prefix_is_another_keys() {
        // ("ab", "c") and ("a", "bc") would share a prefix without the lengths.
        assert!(!key_prefix("ab", "c").starts_with(&key_prefix("a", "bc")));
        assert!(!key_prefix("a", "bc").starts_with(&key_prefix("ab", "c")));
        let key = with_number(key_prefix("a", "b"), 42);
        assert_eq!(number_at_end("outbox_keys", &key).unwrap(), 42);
    }
}
