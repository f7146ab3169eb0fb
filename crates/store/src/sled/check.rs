//! `vshortlink check`: reads every tree and verifies the invariants the writes keep, without
//! changing anything. Each check says what it covered; each fault names the record.
//!
//! - every active link's code carries its redirect entry (same id, URL, expiry), an expired or
//!   deleted link's code its id alone, and every entry belongs to a link that owns that code;
//! - every active generated link has a dedup entry that leads to an active link of the same
//!   space, length and URL;
//! - every code a link owns is indexed to that link, and every non-archived link's code is;
//! - no code is both pooled and owned by a link; pool entries and pool members agree; each
//!   pool's size counter matches its tree;
//! - the code filter holds every issued code (owned or pooled);
//! - the link counters by status match the records, and the id counter is past every id.

use std::collections::HashMap;

use super::codec::{check_record, decode_code_value, decode_link, CodeValue};
use super::keys::{self, counter, read_u64};
use super::SledStore;
use crate::{CheckReport, LinkStatus, StoreError, StoreResult};

/// At most this many faults of one kind are listed (the count is always given).
const MAX_LISTED: usize = 20;

/// Collects faults of one kind, listing the first few.
struct Faults<'a> {
    report: &'a mut CheckReport,
    kind: &'static str,
    count: usize,
}

impl<'a> Faults<'a> {
    fn new(report: &'a mut CheckReport, kind: &'static str) -> Self {
        Self {
            report,
            kind,
            count: 0,
        }
    }
    fn add(&mut self, detail: String) {
        self.count += 1;
        if self.count <= MAX_LISTED {
            self.report.faults.push(format!("{}: {detail}", self.kind));
        }
    }
    fn done(self) {
        if self.count > MAX_LISTED {
            self.report.faults.push(format!(
                "{}: {} more not listed",
                self.kind,
                self.count - MAX_LISTED
            ));
        }
    }
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SledStore {
    /// Verifies the store's invariants (read only).
    pub fn check(&self) -> StoreResult<CheckReport> {
        let mut report = CheckReport::default();
        let mut by_status: HashMap<LinkStatus, u64> = HashMap::new();
        let mut max_id = 0u64;
        let mut owned = 0u64;
        // Every record that does not decode is named (tree and key) and left out of the
        // checks below, which then go on with the rest.
        let mut damaged_links = std::collections::HashSet::new();
        {
            let mut damaged = Faults::new(&mut report, "damaged record");
            let mut read = 0u64;
            let mut trees: Vec<(String, &sled::Tree)> = vec![
                ("links".into(), &self.links),
                ("codes".into(), &self.codes),
                ("expiry".into(), &self.expiry),
                ("ended".into(), &self.ended),
                ("counters".into(), &self.counters),
                ("visit_blocks".into(), &self.visit_blocks),
                ("days".into(), &self.visit_days),
            ];
            for (i, pool) in self.pools.iter().enumerate() {
                trees.push((format!("pool/{}", i + 1), pool));
            }
            for (name, tree) in &trees {
                for item in tree.iter() {
                    let (key, value) = item.map_err(backend)?;
                    read += 1;
                    if let Err(e) = check_record(name, &key, &value) {
                        if name == "links" {
                            damaged_links.insert(key.to_vec());
                        }
                        damaged.add(format!(
                            "tree `{name}`, key {}: {e}",
                            hex::encode(&key[..key.len().min(32)])
                        ));
                    }
                }
            }
            damaged.done();
            report.ok(format!("{read} records in {} trees decode", trees.len()));
        }
        {
            let mut mapping = Faults::new(&mut report, "active mapping");
            let mut index = Vec::new();
            let mut dedup = Vec::new();
            for item in self.links.iter() {
                let (key, bytes) = item.map_err(backend)?;
                if damaged_links.contains(key.as_ref()) {
                    continue;
                }
                let link = decode_link(&bytes)?;
                let id = read_u64(&key).unwrap_or(0);
                max_id = max_id.max(id);
                *by_status.entry(link.status).or_default() += 1;
                let value = self
                    .codes
                    .get(link.key().as_bytes())
                    .map_err(backend)?
                    .map(|v| decode_code_value(&v));
                if link.status != LinkStatus::Archived {
                    owned += 1;
                    match &value {
                        Some(Ok(v)) if v.owner() == id => {}
                        Some(Ok(v)) => index.push(format!(
                            "link {id} (`{}`) is indexed to link {}",
                            link.code,
                            v.owner()
                        )),
                        Some(Err(e)) => index.push(format!(
                            "link {id} (`{}`) has a damaged index entry: {e}",
                            link.code
                        )),
                        None => index.push(format!("link {id} (`{}`) is not indexed", link.code)),
                    }
                }
                match (link.status, &value) {
                    (LinkStatus::Active, Some(Ok(CodeValue::Active(e))))
                        if e.id == id && e.url == link.url && e.expires_at == link.expires_at => {}
                    (LinkStatus::Active, Some(Ok(CodeValue::Active(e)))) if e.id == id => mapping
                        .add(format!(
                            "active link {id} (`{}`) maps to {} (expiring {:?})",
                            link.code, e.url, e.expires_at
                        )),
                    (LinkStatus::Active, Some(Ok(CodeValue::Owned(owner)))) if *owner == id => {
                        mapping.add(format!(
                            "active link {id} (`{}`) is missing from the active mapping",
                            link.code
                        ))
                    }
                    (LinkStatus::Expired | LinkStatus::Deleted, Some(Ok(CodeValue::Active(e))))
                        if e.id == id =>
                    {
                        mapping.add(format!(
                            "{} link {id} (`{}`) still redirects",
                            link.status.as_str(),
                            link.code
                        ))
                    }
                    // Any other disagreement is the code index's fault, listed there.
                    _ => {}
                }
                if link.status == LinkStatus::Active && !link.custom {
                    let key = keys::dedup_key(&link.space, link.domain, link.length(), &link.url);
                    let target = self
                        .dedup
                        .get(key)
                        .map_err(backend)?
                        .and_then(|v| read_u64(&v))
                        .map(|t| self.links.get(keys::u64_key(t)))
                        .transpose()
                        .map_err(backend)?
                        .flatten()
                        .and_then(|b| decode_link(&b).ok());
                    let fine = target.is_some_and(|t| {
                        t.status == LinkStatus::Active
                            && t.url == link.url
                            && t.space == link.space
                            && t.length() == link.length()
                    });
                    if !fine {
                        dedup.push(format!(
                            "active generated link {id} (`{}`) has no dedup entry leading to an active link of its URL",
                            link.code
                        ));
                    }
                }
            }
            // The other way round: every entry of the code index belongs to a link that owns
            // that code.
            let active_links = by_status.get(&LinkStatus::Active).copied().unwrap_or(0);
            let (mut entries, mut stray) = (0u64, 0u64);
            for item in self.codes.iter() {
                let (code, bytes) = item.map_err(backend)?;
                // A damaged entry is listed with the damaged records.
                let Ok(value) = decode_code_value(&bytes) else {
                    continue;
                };
                let redirects = matches!(value, CodeValue::Active(_));
                entries += u64::from(redirects);
                let owner = self
                    .links
                    .get(keys::u64_key(value.owner()))
                    .map_err(backend)?
                    .and_then(|b| decode_link(&b).ok());
                // Whether it redirects as its owner's status says is checked from the links.
                let fine = owner.is_some_and(|l| {
                    l.key().as_bytes() == code.as_ref() && l.status != LinkStatus::Archived
                });
                if !fine {
                    stray += 1;
                    let code = String::from_utf8_lossy(&code);
                    if redirects {
                        mapping.add(format!(
                            "the active mapping has `{code}`, which no active link owns"
                        ));
                    } else {
                        index.push(format!(
                            "the code index has `{code}` for link {}, which does not own it",
                            value.owner()
                        ));
                    }
                }
            }
            mapping.done();
            report.ok(format!(
                "{active_links} active links against the active mapping ({entries} entries, {stray} stray)"
            ));
            let mut f = Faults::new(&mut report, "code index");
            let index_len = index.len();
            for line in index {
                f.add(line);
            }
            f.done();
            report.ok(format!(
                "{owned} codes owned by links against the code index ({index_len} wrong)"
            ));
            let mut f = Faults::new(&mut report, "dedup index");
            let dedup_len = dedup.len();
            for line in dedup {
                f.add(line);
            }
            f.done();
            report.ok(format!(
                "active generated links against the dedup index ({dedup_len} missing)"
            ));
        }

        // Pools: each code once, sizes match counters, nothing pooled is owned.
        let filter = self.filter.read();
        let mut pooled = 0u64;
        let mut both = Faults::new(&mut report, "pooled and live");
        let mut both_count = 0;
        let mut pool_lines = Vec::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let length = u8::try_from(i + 1).unwrap_or(u8::MAX);
            let mut size = 0u64;
            let mut seen = std::collections::HashSet::new();
            for item in pool.iter().keys() {
                let key = item.map_err(backend)?;
                size += 1;
                let Some((_, code)) = keys::split_pool_key(&key, length) else {
                    pool_lines.push(format!("pool {length}: a malformed key"));
                    continue;
                };
                if self.codes.get(code.as_bytes()).map_err(backend)?.is_some() {
                    both_count += 1;
                    both.add(format!(
                        "`{code}` sits in pool {length} and is owned by a link"
                    ));
                }
                if !seen.insert(code.to_string()) {
                    pool_lines.push(format!("pool {length}: `{code}` sits there twice"));
                }
                if !filter.check(code) {
                    pool_lines.push(format!("filter: pooled `{code}` is missing"));
                }
            }
            pooled += size;
            let stored = self.counter(&counter::pool_size(length))?;
            if stored != size {
                pool_lines.push(format!(
                    "pool {length}: its size counter says {stored}, the tree holds {size}"
                ));
            }
        }
        both.done();
        report.ok(format!(
            "{pooled} pooled codes: none owned by a link ({both_count} are), each once, size counters"
        ));
        // Every owned code in the filter.
        for item in self.codes.iter().keys() {
            let key = item.map_err(backend)?;
            let code = String::from_utf8_lossy(&key);
            if !filter.check(&code) {
                pool_lines.push(format!("filter: owned `{code}` is missing"));
            }
        }
        drop(filter);
        report.ok(format!(
            "the code filter against {} owned and {pooled} pooled codes",
            self.codes.len()
        ));
        let mut f = Faults::new(&mut report, "pools");
        for line in pool_lines {
            f.add(line);
        }
        f.done();

        // Counters.
        let mut counter_lines = Vec::new();
        for status in LinkStatus::ALL {
            let counted = by_status.get(&status).copied().unwrap_or(0);
            let stored = self.counter(&counter::links(status))?;
            if counted != stored {
                counter_lines.push(format!(
                    "links.{}: the counter says {stored}, the records {counted}",
                    status.as_str()
                ));
            }
        }
        let last_id = self.counter(counter::LINK_ID)?;
        if last_id < max_id {
            counter_lines.push(format!(
                "link_id: the counter is {last_id}, below the highest id {max_id}"
            ));
        }
        let mut f = Faults::new(&mut report, "counters");
        for line in counter_lines {
            f.add(line);
        }
        f.done();
        report.ok(format!(
            "link counters by status and the id counter against {} records",
            self.links.len()
        ));
        Ok(report)
    }
}
