//! The audit log: every change made through any API or page, every sign-in and failed
//! sign-in, as `{at, actor, action, target, ip}` (and the team whose record it is). Entries
//! wait in memory and are written together about every second (the accounts' background
//! task, and before every listing, so a reader sees what was just done); link creates are
//! folded into one `link.created` entry per actor, team and minute with a `count`, so a bulk
//! import is one entry, not a million. Entries older than `auth.audit_retention` are removed by
//! the daily job.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::clock::Clock;
use crate::model::time::MINUTE_MS;
use crate::model::{AuditEntry, AuditPage, AuditQuery, Millis, StoreResult};
use crate::store::Store;

/// Entries held before a write is forced (a flood of failed sign-ins cannot grow memory).
const MAX_PENDING: usize = 10_000;

/// Creates counted, by actor and team, in the minute they began.
type Creates = HashMap<(String, Option<String>), (Millis, u64, String)>;

pub struct Audit {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    pending: Mutex<Vec<AuditEntry>>,
    creates: Mutex<Creates>,
    /// Serialises writes, so that entries keep their order.
    writing: Mutex<()>,
}

impl Audit {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            pending: Mutex::new(Vec::new()),
            creates: Mutex::new(HashMap::new()),
            writing: Mutex::new(()),
        }
    }

    /// Notes one change.
    pub fn record(&self, actor: &str, action: &str, target: &str, ip: IpAddr, team: Option<&str>) {
        let entry = AuditEntry {
            id: 0,
            at: self.clock.now(),
            actor: actor.to_string(),
            action: action.to_string(),
            target: target.to_string(),
            ip: ip.to_string(),
            team: team.map(str::to_string),
            count: None,
        };
        let full = {
            let mut pending = self.pending.lock();
            pending.push(entry);
            pending.len() >= MAX_PENDING
        };
        if full {
            self.flush_logged();
        }
    }

    /// Notes `n` links created by `actor` in `team`'s space, folded per minute.
    pub fn created(&self, actor: &str, team: Option<&str>, ip: IpAddr, n: u64) {
        let now = self.clock.now();
        let minute = now - now % MINUTE_MS;
        let mut creates = self.creates.lock();
        let key = (actor.to_string(), team.map(str::to_string));
        let slot = creates
            .entry(key.clone())
            .or_insert((minute, 0, ip.to_string()));
        if slot.0 != minute {
            // The minute turned: the last one's count is an entry of its own.
            let (at, count, ip) = std::mem::replace(slot, (minute, 0, ip.to_string()));
            self.pending.lock().push(create_entry(&key, at, count, ip));
        }
        slot.1 += n;
    }

    /// Writes what is waiting; with `all`, the creates of the current minute too (shutdown,
    /// and before a listing).
    pub fn flush(&self, all: bool) -> StoreResult<()> {
        let _writing = self.writing.lock();
        let now = self.clock.now();
        let minute = now - now % MINUTE_MS;
        let mut entries = std::mem::take(&mut *self.pending.lock());
        {
            let mut creates = self.creates.lock();
            let done: Vec<_> = creates
                .iter()
                .filter(|(_, (at, _, _))| all || *at < minute)
                .map(|(k, _)| k.clone())
                .collect();
            for key in done {
                if let Some((at, count, ip)) = creates.remove(&key) {
                    entries.push(create_entry(&key, at, count, ip));
                }
            }
        }
        entries.sort_by_key(|e| e.at);
        if let Err(e) = self.store.audit_append(&entries) {
            // Kept for the next try, unless memory's bound is reached.
            let mut pending = self.pending.lock();
            if pending.len() + entries.len() <= MAX_PENDING {
                entries.append(&mut pending);
                *pending = entries;
            }
            return Err(e);
        }
        Ok(())
    }

    fn flush_logged(&self) {
        if let Err(e) = self.flush(false) {
            tracing::warn!(error = %e, "audit entries could not be written; kept for the next try");
        }
    }

    /// A page of the log, newest first, with what waits written first.
    pub fn list(&self, query: &AuditQuery) -> StoreResult<AuditPage> {
        self.flush(true)?;
        self.store.audit(query)
    }

    /// Removes entries older than `retention` (the daily job).
    pub fn prune(&self, retention: Millis) -> StoreResult<u64> {
        let before = self.clock.now().saturating_sub(retention);
        self.store.audit_prune(before)
    }
}

fn create_entry(key: &(String, Option<String>), at: Millis, count: u64, ip: String) -> AuditEntry {
    AuditEntry {
        id: 0,
        at,
        actor: key.0.clone(),
        action: "link.created".into(),
        target: key
            .1
            .as_ref()
            .map_or_else(|| "links".into(), |t| format!("team:{t}")),
        ip,
        team: key.1.clone(),
        count: Some(count),
    }
}
