//! Links in sled: creating (one at a time; groups are in `group.rs`), resolving, reading,
//! updating, deleting, expiring, recycling and listing them, with the indexes each change keeps
//! in step (`codes`, `dedup`, `expiry`, `ended`) in the same transaction. Pool
//! bookkeeping it shares with `pools.rs`; it does not touch visits.
//!
//! `LinkStore` is implemented here; an import groups its records by code length and hands
//! each group to `import.rs`, a pooled create goes to the committer (`group.rs`).

use sled::transaction::{abort, TransactionError, TransactionalTree, UnabortableTransactionError};
use sled::Transactional;

use super::codec::{
    active_code_value, bump, bump_status, code_owner, decode_code_value, decode_link, encode,
    owned_code_value, stored_id, tx_code_owner, tx_decode_link, tx_next_link_id, CodeValue,
};
use super::errors::{backend, tx_error, Abort, TxResult};
use super::keys::{self, counter, read_u64};
use super::pools::{length_of, take_out_of_pool};
use super::{SledStore, DAY_MS, LIST_SCAN_BUDGET};
use std::collections::BTreeMap;

use crate::{
    ActiveEntry, CodeChoice, CreateDone, Created, Imported, Link, LinkCounts, LinkPage, LinkPatch,
    LinkQuery, LinkStatus, LinkStore, Millis, NewLink, StoreError, StoreResult,
};

/// Fragments on disk at which a redirect's read of a `codes` leaf rewrites it whole. A leaf
/// changes by fragments linked to it (a create, an update, an expiry: one each) until sled
/// rewrites it at ten; a leaf the cache does not hold is read back one fragment at a time,
/// each a read and a decode, and under redirects over more links than the caches hold that
/// was most of a redirect's cost (leaves read back at 3.2 fragments on average on the
/// benchmark's store). Rewritten as the redirects read them, they are read as one;
/// at three, a leaf changed by creates is rewritten at most once every two of them.
const CONSOLIDATE_AT: usize = 3;

/// Writes a new active link with every index it belongs to (record, code with its redirect
/// entry, dedup entry for a generated link, expiry), inside a create transaction: the one
/// place a create, alone or in a group, lays out its writes.
pub(super) fn insert_active(
    [links, codes, dedup, expiry]: [&TransactionalTree; 4],
    link: &Link,
    dedup_key: Option<&[u8]>,
) -> Result<(), UnabortableTransactionError> {
    let id_key = keys::u64_key(link.id);
    links.insert(&id_key[..], encode(link))?;
    codes.insert(link.key().as_bytes(), active_code_value(link))?;
    if let Some(key) = dedup_key {
        // A link with options is no dedup target: it takes the entry only where there is
        // none, so that a plain link of the URL keeps it and plain creates keep finding it.
        let plain = link.options.as_ref().is_none_or(|o| o.is_empty());
        if plain || dedup.get(key)?.is_none() {
            dedup.insert(key, &id_key[..])?;
        }
    }
    if let Some(at) = link.expires_at {
        expiry.insert(&keys::time_id_key(at, link.id)[..], &[][..])?;
    }
    Ok(())
}

/// Removes a link's dedup entry if it still points at the link.
pub(super) fn unlink_dedup(
    dedup: &TransactionalTree,
    link: &Link,
) -> Result<(), UnabortableTransactionError> {
    if link.custom {
        return Ok(());
    }
    let key = keys::dedup_key(&link.space, link.domain, link.length(), &link.url);
    if dedup.get(&key)?.and_then(|v| read_u64(&v)) == Some(link.id) {
        dedup.remove(key)?;
    }
    Ok(())
}

impl SledStore {
    /// Stores written before an active link's redirect entry moved into `codes` kept the
    /// entries in an `active` tree of their own: this copies each over its code's id in
    /// `codes`, makes the copy durable, then drops the old tree. It runs at open, before
    /// anything else writes; a crash part way repeats it (the copy is idempotent, and the old
    /// tree goes only once the copy is durable). Returns the entries moved.
    pub(super) fn fold_active_tree(&self) -> StoreResult<u64> {
        if !self.db.tree_names().iter().any(|n| n.as_ref() == b"active") {
            return Ok(0);
        }
        let active = self.db.open_tree("active").map_err(backend)?;
        let mut moved = 0u64;
        let mut batch = sled::Batch::default();
        for item in active.iter() {
            let (code, entry) = item.map_err(backend)?;
            batch.insert(code, entry);
            moved += 1;
            if moved % 4096 == 0 {
                self.codes
                    .apply_batch(std::mem::take(&mut batch))
                    .map_err(backend)?;
            }
        }
        self.codes.apply_batch(batch).map_err(backend)?;
        self.db.flush().map_err(backend)?;
        drop(active);
        self.db.drop_tree("active").map_err(backend)?;
        self.db.flush().map_err(backend)?;
        Ok(moved)
    }

    pub(super) fn find_dedup(&self, new: &NewLink, length: u8) -> StoreResult<Option<Link>> {
        let key = keys::dedup_key(&new.space, new.domain, length, &new.url);
        let Some(id) = self.dedup.get(key).map_err(backend)? else {
            return Ok(None);
        };
        let link = self.link_by_id(stored_id("dedup", &id)?)?;
        Ok(link.filter(|l| l.is_dedup_target(new.now)))
    }

    /// The create transaction. `taken` is the pool key to remove (pool creates) or `None`
    /// (custom creates, which remove their code from a pool themselves if it is there).
    pub(super) fn create_tx(
        &self,
        new: &NewLink,
        code: &str,
        taken: Option<&[u8]>,
    ) -> Result<(Created, Option<Millis>), TransactionError<Abort>> {
        let length = length_of(code).ok_or(TransactionError::Abort(Abort::CodeTaken))?;
        let pool = self
            .pool(length)
            .ok_or(TransactionError::Abort(Abort::CodeTaken))?;
        let dedup_key = (!matches!(new.code, CodeChoice::Custom(_)))
            .then(|| keys::dedup_key(&new.space, new.domain, length, &new.url));
        // Where the code is kept on its domain; into the filter before the commit, like every
        // code (a pooled code is there already, not its key on another domain).
        let key = crate::model::code_key(new.domain, code);
        if new.domain != crate::model::DEFAULT_DOMAIN {
            self.filter_insert([key.as_ref()]);
        }
        let mut members = self
            .members(length)
            .ok_or(TransactionError::Abort(Abort::CodeTaken))?;
        let held = &*members;
        let trees = (
            &self.links,
            &self.codes,
            &self.dedup,
            &self.expiry,
            pool,
            &self.counters,
        );
        let outcome = trees.transaction(|(links, codes, dedup, expiry, pool, counters)| {
            if let (Some(key), true) = (&dedup_key, new.dedup) {
                if let Some(id) = dedup.get(key)? {
                    if let Some(bytes) = links.get(id)? {
                        let link = tx_decode_link(&bytes)?;
                        if link.is_dedup_target(new.now) {
                            return Ok((Created::Existing(link), None));
                        }
                    }
                }
            }
            let mut unpooled = None;
            match taken {
                Some(pool_key) => {
                    if pool.remove(pool_key)?.is_none() {
                        return abort(Abort::Raced);
                    }
                    if codes.get(key.as_bytes())?.is_some() {
                        // Never reachable when the trees agree; if they ever disagree,
                        // refuse to give one code to two links.
                        return abort(Abort::Owned);
                    }
                    bump(counters, &counter::pool_size(length), -1)?;
                }
                None => {
                    if codes.get(key.as_bytes())?.is_some() {
                        return abort(Abort::CodeTaken);
                    }
                    match take_out_of_pool(held, pool, code)? {
                        Some(score) => {
                            unpooled = Some(score);
                            bump(counters, &counter::pool_size(length), -1)?;
                        }
                        // A code never issued before: it counts as issued now.
                        None => bump(counters, counter::CODES_ISSUED, 1)?,
                    }
                }
            }
            let last = counters
                .get(counter::LINK_ID)?
                .and_then(|v| read_u64(&v))
                .unwrap_or(0);
            let id = tx_next_link_id(links, last)?;
            counters.insert(counter::LINK_ID, &id.to_be_bytes()[..])?;
            let link = new.record(id, code, matches!(new.code, CodeChoice::Custom(_)));
            insert_active([links, codes, dedup, expiry], &link, dedup_key.as_deref())?;
            bump_status(counters, None, LinkStatus::Active)?;
            bump(counters, &counter::day_creates(new.now / DAY_MS), 1)?;
            Ok((Created::New(link), unpooled))
        })?;
        // The code has an owner now: if it was pooled, it is not any more.
        if matches!(outcome.0, Created::New(_)) {
            members.taken(code);
        }
        Ok(outcome)
    }

    pub(super) fn create_from_pool(&self, new: &NewLink, length: u8) -> StoreResult<Created> {
        let pool = self.pool(length).ok_or(StoreError::PoolEmpty(length))?;
        let _taker = self.takers[usize::from(length) - 1].lock();
        loop {
            let Some((key, code)) = self.pool_head(pool, length, new.now)? else {
                // Nothing to take, but a dedup hit needs no code.
                if new.dedup {
                    if let Some(link) = self.find_dedup(new, length)? {
                        return Ok(Created::Existing(link));
                    }
                }
                return Err(StoreError::PoolEmpty(length));
            };
            match self.create_tx(new, &code, Some(&key)) {
                Ok((created, _)) => return Ok(created),
                // A custom create took this code from the pool first.
                Err(TransactionError::Abort(Abort::Raced)) => continue,
                Err(TransactionError::Abort(Abort::Owned)) => {
                    tracing::error!(code = %code, "a pooled code is owned by a link; dropping it from the pool");
                    self.drop_pool_entry(pool, &key, &code)?;
                }
                Err(e) => return Err(tx_error(e, &code)),
            }
        }
    }

    pub(super) fn create_custom(&self, new: &NewLink, code: &str) -> StoreResult<Created> {
        // Into the filter before the commit, so that the filter always covers what is
        // committed (see `checkpoint`). If the create fails, the code is a harmless false
        // positive.
        self.filter_insert([code]);
        let (created, unpooled) = self
            .create_tx(new, code, None)
            .map_err(|e| tx_error(e, code))?;
        // The code left its pool (with the score the transaction saw): it is no longer
        // cooling there.
        if let (Some(score), Some(length)) = (unpooled, length_of(code)) {
            self.note_cooling(length, score, -1);
        }
        Ok(created)
    }

    /// A create of the first free code of `codes` (the `hash` strategy): each is tried like a
    /// custom code, in order, until one is not owned.
    fn create_computed(&self, new: &NewLink, codes: &[String]) -> StoreResult<Created> {
        for code in codes {
            self.filter_insert([code.as_str()]);
            match self.create_tx(new, code, None) {
                Ok((created, unpooled)) => {
                    if let (Some(score), Some(length)) = (unpooled, length_of(code)) {
                        self.note_cooling(length, score, -1);
                    }
                    return Ok(created);
                }
                Err(TransactionError::Abort(Abort::CodeTaken)) => continue,
                Err(e) => return Err(tx_error(e, code)),
            }
        }
        Err(StoreError::PoolEmpty(new.length()))
    }

    /// Reads a link by code inside a transaction.
    pub(super) fn tx_link_by_code(
        codes: &TransactionalTree,
        links: &TransactionalTree,
        code: &str,
    ) -> TxResult<Link> {
        let Some(value) = codes.get(code.as_bytes())? else {
            return abort(Abort::NotFound);
        };
        let id = tx_code_owner(&value)?;
        let Some(bytes) = links.get(&keys::u64_key(id)[..])? else {
            return abort(Abort::NotFound);
        };
        tx_decode_link(&bytes)
    }

    pub(super) fn scan_index(
        &self,
        tree: &sled::Tree,
        upto: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Link>> {
        let mut out = Vec::new();
        for item in tree.range(..keys::u64_key(upto.saturating_add(1))) {
            if out.len() >= limit {
                break;
            }
            let (key, _) = item.map_err(backend)?;
            let Some((_, id)) = keys::split_time_id(&key) else {
                continue;
            };
            if let Some(link) = self.link_by_id(id)? {
                out.push(link);
            }
        }
        Ok(out)
    }

    /// A blocking create: a pooled one waits for the committer ([`super::group`]), a custom
    /// one commits on the caller's thread.
    pub(super) fn create_blocking(&self, new: &NewLink) -> StoreResult<Created> {
        let created = match &new.code {
            CodeChoice::Pool(length) if self.pool(*length).is_some() => {
                let (answer, answered) = std::sync::mpsc::sync_channel(1);
                self.committer.submit(
                    new.clone(),
                    *length,
                    Box::new(move |outcome| {
                        let _ = answer.send(outcome);
                    }),
                );
                // Answered after the flush that covers it.
                return answered
                    .recv()
                    .unwrap_or_else(|_| Err(backend("the create thread stopped")));
            }
            CodeChoice::Pool(length) => return Err(StoreError::PoolEmpty(*length)),
            CodeChoice::Custom(code) => {
                let _committing = self.flusher.committing();
                self.create_custom(new, code)?
            }
            CodeChoice::Computed(codes) => {
                let _committing = self.flusher.committing();
                self.create_computed(new, codes)?
            }
        };
        // A dedup hit may return a link whose own create is still waiting for its flush:
        // answer only once that link is durable too.
        self.flusher.wait_durable()?;
        Ok(created)
    }
}

impl LinkStore for SledStore {
    /// A create that returns at once: a pooled one is queued to the committer, which calls
    /// `done` after the flush; a custom one runs here.
    fn submit_create(&self, new: NewLink, done: CreateDone) {
        match new.code {
            CodeChoice::Pool(length) if self.pool(length).is_some() => {
                self.committer.submit(new, length, done)
            }
            // Custom and computed codes, and lengths without a pool, on the caller's thread.
            _ => done(
                self.space
                    .admit(0)
                    .and_then(|()| self.create_blocking(&new)),
            ),
        }
    }

    fn resolve(&self, code: &str) -> StoreResult<Option<ActiveEntry>> {
        let Some(bytes) = self
            .codes
            .get_peeking(code.as_bytes(), CONSOLIDATE_AT)
            .map_err(backend)?
        else {
            return Ok(None);
        };
        match decode_code_value(&bytes) {
            Ok(CodeValue::Active(entry)) => Ok(Some(entry)),
            // Owned by a link that is not active: nothing to redirect to.
            Ok(CodeValue::Owned(_)) => Ok(None),
            Err(e) => Err(StoreError::Corrupt {
                tree: "codes",
                detail: format!("code `{code}`: {e}"),
            }),
        }
    }

    fn may_exist(&self, code: &str) -> bool {
        self.filter.read().check(code)
    }

    fn link_by_code(&self, code: &str) -> StoreResult<Option<Link>> {
        let Some(value) = self.codes.get(code.as_bytes()).map_err(backend)? else {
            return Ok(None);
        };
        self.link_by_id(code_owner(&value).map_err(|e| match e {
            StoreError::Corrupt { tree, detail } => StoreError::Corrupt {
                tree,
                detail: format!("{detail} (code `{code}`)"),
            },
            other => other,
        })?)
    }

    fn link_by_id(&self, id: u64) -> StoreResult<Option<Link>> {
        self.links
            .get(keys::u64_key(id))
            .map_err(backend)?
            .map(|bytes| {
                decode_link(&bytes).map_err(|e| match e {
                    StoreError::Corrupt { tree, detail } => StoreError::Corrupt {
                        tree,
                        detail: format!("link id {id}: {detail}"),
                    },
                    other => other,
                })
            })
            .transpose()
    }

    fn update_link(&self, code: &str, patch: &LinkPatch, now: Millis) -> StoreResult<Link> {
        self.space.admit(0)?;
        let trees = (&self.links, &self.codes, &self.dedup, &self.expiry);
        let link = trees
            .transaction(|(links, codes, dedup, expiry)| {
                let old = Self::tx_link_by_code(codes, links, code)?;
                if old.status != LinkStatus::Active {
                    return abort(Abort::WrongStatus(old.status));
                }
                let link = patch.apply(&old, now);
                if link.url != old.url && !link.custom {
                    unlink_dedup(dedup, &old)?;
                    let key = keys::dedup_key(&link.space, link.domain, link.length(), &link.url);
                    // Another active link may already be the dedup target for the new URL.
                    if dedup.get(&key)?.is_none() {
                        dedup.insert(key, &keys::u64_key(link.id)[..])?;
                    }
                }
                if link.expires_at != old.expires_at {
                    if let Some(at) = old.expires_at {
                        expiry.remove(&keys::time_id_key(at, link.id)[..])?;
                    }
                    if let Some(at) = link.expires_at {
                        expiry.insert(&keys::time_id_key(at, link.id)[..], &[][..])?;
                    }
                }
                codes.insert(code.as_bytes(), active_code_value(&link))?;
                links.insert(&keys::u64_key(link.id)[..], encode(&link))?;
                Ok(link)
            })
            .map_err(|e| tx_error(e, code))?;
        self.flusher.wait_durable()?;
        Ok(link)
    }

    fn delete_link(&self, code: &str, now: Millis) -> StoreResult<Link> {
        self.space.admit(0)?;
        let trees = (
            &self.links,
            &self.codes,
            &self.dedup,
            &self.expiry,
            &self.ended,
            &self.counters,
        );
        let link = trees
            .transaction(|(links, codes, dedup, expiry, ended, counters)| {
                let old = Self::tx_link_by_code(codes, links, code)?;
                match old.status {
                    LinkStatus::Active => {
                        // It keeps its code until it is recycled, but redirects no more.
                        codes.insert(code.as_bytes(), &owned_code_value(old.id)[..])?;
                        unlink_dedup(dedup, &old)?;
                        if let Some(at) = old.expires_at {
                            expiry.remove(&keys::time_id_key(at, old.id)[..])?;
                        }
                    }
                    LinkStatus::Expired => {
                        // It waited for recycling from its expiry; now it waits from deletion.
                        if let Some(at) = old.expires_at {
                            ended.remove(&keys::time_id_key(at, old.id)[..])?;
                        }
                    }
                    other => return abort(Abort::WrongStatus(other)),
                }
                let mut link = old.clone();
                link.status = LinkStatus::Deleted;
                link.deleted_at = Some(now);
                link.updated_at = now;
                ended.insert(&keys::time_id_key(now, link.id)[..], &[][..])?;
                links.insert(&keys::u64_key(link.id)[..], encode(&link))?;
                bump_status(counters, Some(old.status), LinkStatus::Deleted)?;
                Ok(link)
            })
            .map_err(|e| tx_error(e, code))?;
        self.flusher.wait_durable()?;
        Ok(link)
    }

    /// Expires the links of `ids` that are active and due, in one transaction: sled applies
    /// each transaction under a global write lock that every read in the process waits
    /// behind, so the lifecycle job takes it once per group rather than once per link.
    fn expire_links(&self, ids: &[u64], now: Millis) -> StoreResult<Vec<Link>> {
        self.space.admit(0)?;
        let trees = (
            &self.links,
            &self.codes,
            &self.dedup,
            &self.expiry,
            &self.ended,
            &self.counters,
        );
        trees
            .transaction(|(links, codes, dedup, expiry, ended, counters)| {
                let mut expired = Vec::new();
                for &id in ids {
                    let id_key = keys::u64_key(id);
                    let Some(bytes) = links.get(&id_key[..])? else {
                        continue;
                    };
                    let old = tx_decode_link(&bytes)?;
                    let Some(at) = old.expires_at else {
                        continue;
                    };
                    if now < at {
                        continue;
                    }
                    if old.status != LinkStatus::Active {
                        // Not in the active set: whatever index entry led here is stale.
                        expiry.remove(&keys::time_id_key(at, id)[..])?;
                        continue;
                    }
                    codes.insert(old.key().as_bytes(), &owned_code_value(id)[..])?;
                    unlink_dedup(dedup, &old)?;
                    expiry.remove(&keys::time_id_key(at, id)[..])?;
                    ended.insert(&keys::time_id_key(at, id)[..], &[][..])?;
                    let mut link = old;
                    link.status = LinkStatus::Expired;
                    link.updated_at = now;
                    links.insert(&id_key[..], encode(&link))?;
                    bump_status(counters, Some(LinkStatus::Active), LinkStatus::Expired)?;
                    expired.push(link);
                }
                Ok(expired)
            })
            .map_err(|e| tx_error(e, ""))
    }

    fn recycle_link(&self, id: u64, score: Millis) -> StoreResult<Option<Link>> {
        self.space.admit(0)?;
        let Some(current) = self.link_by_id(id)? else {
            return Ok(None);
        };
        let Some(length) = length_of(&current.code) else {
            return Ok(None);
        };
        let pool = self.pool(length).ok_or(StoreError::NotFound)?;
        let mut members = self.members(length).ok_or(StoreError::NotFound)?;
        let trees = (&self.links, &self.codes, &self.ended, pool, &self.counters);
        let id_key = keys::u64_key(id);
        let link = trees
            .transaction(|(links, codes, ended, pool, counters)| {
                let Some(bytes) = links.get(&id_key[..])? else {
                    return Ok(None);
                };
                let old = tx_decode_link(&bytes)?;
                if !old.status.recyclable() {
                    return Ok(None);
                }
                if let Some(at) = old.ended_at() {
                    ended.remove(&keys::time_id_key(at, id)[..])?;
                }
                let owned = match codes.get(old.key().as_bytes())? {
                    Some(value) => tx_code_owner(&value)? == id,
                    None => false,
                };
                if !owned {
                    // The code belongs to someone else: archive without pooling it.
                    let mut link = old.clone();
                    link.status = LinkStatus::Archived;
                    links.insert(&id_key[..], encode(&link))?;
                    bump_status(counters, Some(old.status), LinkStatus::Archived)?;
                    return Ok(Some((link, false)));
                }
                codes.remove(old.key().as_bytes())?;
                // Recycled codes have scores of their own: no tiebreak needed.
                pool.insert(keys::pool_key(score, 0, &old.code), &[][..])?;
                let mut link = old.clone();
                link.status = LinkStatus::Archived;
                links.insert(&id_key[..], encode(&link))?;
                bump_status(counters, Some(old.status), LinkStatus::Archived)?;
                bump(counters, &counter::pool_size(length), 1)?;
                bump(counters, &counter::pool_recycled(length), 1)?;
                Ok(Some((link, true)))
            })
            .map_err(|e| tx_error(e, &current.code))?;
        let Some((link, pooled)) = link else {
            return Ok(None);
        };
        if pooled {
            members.pooled(&link.code, &keys::pool_key(score, 0, &link.code));
            drop(members);
            self.note_cooling(length, score, 1);
        }
        Ok(Some(link))
    }

    fn list_links(&self, query: &LinkQuery) -> StoreResult<LinkPage> {
        let limit = query.limit.max(1);
        let range = if query.newest_first {
            let end = query.after.unwrap_or(u64::MAX);
            Box::new(self.links.range(..keys::u64_key(end)).rev())
                as Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>>
        } else {
            let start = query.after.map_or(0, |a| a.saturating_add(1));
            Box::new(self.links.range(keys::u64_key(start)..))
        };
        let mut page = LinkPage::default();
        for (scanned, item) in range.enumerate() {
            let (_, bytes) = item.map_err(backend)?;
            let link = decode_link(&bytes)?;
            let last_id = Some(link.id);
            if query.matches(&link) {
                page.items.push(link);
                if page.items.len() == limit {
                    page.next = last_id;
                    return Ok(page);
                }
            }
            // A search that matches little must not walk every link in one request: stop
            // and hand out a cursor to go on from.
            if scanned + 1 >= LIST_SCAN_BUDGET {
                page.next = last_id;
                return Ok(page);
            }
        }
        Ok(page)
    }

    fn due_for_expiry(&self, now: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.scan_index(&self.expiry, now, limit)
    }

    fn due_for_recycling(&self, ended_before: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.scan_index(&self.ended, ended_before.saturating_sub(1), limit)
    }

    fn retire_link(&self, id: u64) -> StoreResult<bool> {
        self.space.admit(0)?;
        let Some(link) = self.link_by_id(id)? else {
            return Ok(false);
        };
        let Some(at) = link.ended_at() else {
            return Ok(false);
        };
        Ok(self
            .ended
            .remove(keys::time_id_key(at, id))
            .map_err(backend)?
            .is_some())
    }

    fn import_links(&self, links: &[Link]) -> StoreResult<Vec<Imported>> {
        self.space.admit(0)?;
        // One transaction per code length, under that length's pool lock; an archived record
        // owns no code and goes alone.
        let mut groups: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
        let mut alone = Vec::new();
        for (at, link) in links.iter().enumerate() {
            if link.status == LinkStatus::Archived {
                alone.push(vec![at]);
            } else {
                groups.entry(Some(link.code.len())).or_default().push(at);
            }
        }
        if alone.is_empty() && groups.len() == 1 {
            // One length, as the importer sends them: no copy.
            return self.import_batch(links);
        }
        let mut results: Vec<Option<Imported>> = vec![None; links.len()];
        for group in groups.into_values().chain(alone) {
            let batch: Vec<Link> = group.iter().map(|&at| links[at].clone()).collect();
            for (at, imported) in group.into_iter().zip(self.import_batch(&batch)?) {
                results[at] = Some(imported);
            }
        }
        results
            .into_iter()
            .map(|r| r.ok_or_else(|| backend("an imported record got no result")))
            .collect()
    }

    fn dedup_target(
        &self,
        space: &str,
        domain: u16,
        length: u8,
        url: &str,
    ) -> StoreResult<Option<Link>> {
        let Some(id) = self
            .dedup
            .get(keys::dedup_key(space, domain, length, url))
            .map_err(backend)?
        else {
            return Ok(None);
        };
        let link = self.link_by_id(read_u64(&id).unwrap_or(0))?;
        Ok(link.filter(|l| l.status == LinkStatus::Active))
    }

    fn link_counts(&self) -> StoreResult<LinkCounts> {
        Ok(LinkCounts {
            active: self.counter(&counter::links(LinkStatus::Active))?,
            expired: self.counter(&counter::links(LinkStatus::Expired))?,
            deleted: self.counter(&counter::links(LinkStatus::Deleted))?,
            archived: self.counter(&counter::links(LinkStatus::Archived))?,
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::CONSOLIDATE_AT;

    /// Every key below `n` once, in an order that spreads each leaf's inserts over time, so
    /// that leaves gather fragments as a store of pooled codes does (761 is prime and does
    /// not divide the `n`s used).
    fn scattered(n: u32) -> impl Iterator<Item = [u8; 4]> {
        (0..u64::from(n)).map(move |i| ((i * 761 % u64::from(n)) as u32).to_be_bytes())
    }

    /// A store with a small cache, so that leaves are read back from disk. sled's flusher
    /// thread lets go of the file lock a moment after the last handle is dropped: a reopen
    /// waits for it.
    pub(in crate::sled) fn open(path: &std::path::Path) -> sled::Db {
        let config = sled::Config::new().path(path).cache_capacity(64 * 1024);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match config.open() {
                Ok(db) => return db,
                Err(e) if std::time::Instant::now() < deadline => {
                    assert!(e.to_string().contains("lock"), "open: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("open: {e}"),
            }
        }
    }

    fn value(key: &[u8; 4], round: u8) -> Vec<u8> {
        let mut v = vec![round; 40];
        v[..4].copy_from_slice(key);
        v
    }

    #[test]
    fn a_read_rewrites_a_fragmented_leaf_as_one_and_what_it_holds_stays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = || open(dir.path());
        let db = open();
        let tree = db.open_tree("codes").expect("tree");
        for key in scattered(5_000) {
            tree.insert(key, value(&key, 1)).expect("insert");
        }
        let fragments = |key: &[u8; 4]| tree.fragments_of(key).expect("fragments");
        let many = scattered(5_000)
            .find(|k| fragments(k) >= CONSOLIDATE_AT)
            .expect("a leaf of several fragments");
        // Below the threshold a read writes nothing.
        if let Some(below) = scattered(5_000).find(|k| fragments(k) == CONSOLIDATE_AT - 1) {
            tree.get_consolidating(below, CONSOLIDATE_AT).expect("get");
            assert_eq!(fragments(&below), CONSOLIDATE_AT - 1);
        }
        for key in scattered(5_000) {
            let got = tree
                .get_consolidating(key, CONSOLIDATE_AT)
                .expect("get")
                .map(|v| v.to_vec());
            assert_eq!(got, Some(value(&key, 1)));
        }
        assert_eq!(fragments(&many), 1, "read back as one fragment");
        // Writes after the rewrite link to it as before, and everything reads back after a
        // reopen from disk.
        for key in scattered(5_000).step_by(7) {
            tree.insert(key, value(&key, 2)).expect("insert");
        }
        db.flush().expect("flush");
        drop(tree);
        drop(db);
        let db = open();
        let tree = db.open_tree("codes").expect("tree");
        for (i, key) in scattered(5_000).enumerate() {
            let round = if i % 7 == 0 { 2 } else { 1 };
            assert_eq!(
                tree.get(key).expect("get").map(|v| v.to_vec()),
                Some(value(&key, round)),
                "key {key:?}"
            );
        }
    }

    #[test]
    fn a_peeking_read_finds_what_a_read_finds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let n = 20_000;
        // Long values (shared, past sled's 22 inline bytes) and short ones; every 11th key
        // removed again, and keys past `n` never written.
        let stored = |key: &[u8; 4]| {
            let i = u32::from_be_bytes(*key);
            (i % 11 != 0 && i < n).then(|| {
                if i % 5 == 0 {
                    key.to_vec()
                } else {
                    value(key, 3)
                }
            })
        };
        {
            let db = open(dir.path());
            let tree = db.open_tree("codes").expect("tree");
            for key in scattered(n) {
                let v = stored(&key).unwrap_or_else(|| value(&key, 0));
                tree.insert(key, v).expect("insert");
            }
            for key in scattered(n).filter(|k| u32::from_be_bytes(*k) % 11 == 0) {
                tree.remove(key).expect("remove");
            }
            // Read in place, then from disk after a reopen (no leaf in memory).
            for key in (0..n + 500).map(u32::to_be_bytes) {
                let got = tree.get_peeking(key, CONSOLIDATE_AT).expect("get");
                assert_eq!(got.map(|v| v.to_vec()), stored(&key), "key {key:?}");
            }
            db.flush().expect("flush");
        }
        let db = open(dir.path());
        let tree = db.open_tree("codes").expect("tree");
        for _ in 0..2 {
            for key in (0..n + 500).rev().map(u32::to_be_bytes) {
                let got = tree.get_peeking(key, CONSOLIDATE_AT).expect("get");
                assert_eq!(got.map(|v| v.to_vec()), stored(&key), "key {key:?}");
                assert_eq!(
                    tree.get(key).expect("get").map(|v| v.to_vec()),
                    stored(&key)
                );
            }
        }
    }

    #[test]
    fn reads_that_rewrite_leaves_lose_no_write_racing_them() {
        reads_beside_writes(|tree, key| tree.get_consolidating(key, 2));
    }

    /// Leaves split under the reads as the odd keys go in, and are read from disk in place
    /// (the store's cache is small, and flushed before the writes start).
    #[test]
    fn peeking_reads_lose_no_write_racing_them() {
        reads_beside_writes(|tree, key| tree.get_peeking(key, 2));
    }

    fn reads_beside_writes(read: fn(&sled::Tree, [u8; 4]) -> sled::Result<Option<sled::IVec>>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path());
        let tree = db.open_tree("codes").expect("tree");
        let even = |key: [u8; 4]| u32::from_be_bytes(key) % 2 == 0;
        for key in scattered(8_000).filter(|k| even(*k)) {
            tree.insert(key, value(&key, 0)).expect("insert");
        }
        db.flush().expect("flush");
        // Beside the readers, in the same leaves: every odd key inserted once (one lost to a
        // rewrite would never come back), every even key overwritten three times.
        let writer = {
            let tree = tree.clone();
            std::thread::spawn(move || {
                for key in scattered(8_000).filter(|k| !even(*k)) {
                    tree.insert(key, value(&key, 1)).expect("insert");
                }
                for round in 2..=4u8 {
                    for key in scattered(8_000).filter(|k| even(*k)) {
                        tree.insert(key, value(&key, round)).expect("insert");
                    }
                }
            })
        };
        let mut reads = 0u32;
        while !writer.is_finished() {
            for key in scattered(8_000).filter(|k| even(*k)) {
                let got = read(&tree, key).expect("get").expect("there");
                assert_eq!(&got[..4], &key[..]);
            }
            reads += 1;
        }
        writer.join().expect("writer");
        assert!(reads > 0, "the reads ran beside the writes");
        for key in scattered(8_000) {
            let round = if even(key) { 4 } else { 1 };
            assert_eq!(
                read(&tree, key).expect("get").map(|v| v.to_vec()),
                Some(value(&key, round)),
                "key {key:?}"
            );
            assert_eq!(
                tree.get(key).expect("get").map(|v| v.to_vec()),
                Some(value(&key, round))
            );
        }
    }
}
