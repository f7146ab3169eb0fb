//! What a backup (and `vshortlink export`) holds, section by section: the store's carried keys,
//! every link, then as asked every visit, every lead and every account, each written as JSON
//! lines page by page, so that memory stays flat whatever the store's size. The one writer of
//! the export format; the callers choose where the lines go (a file, the HTTP stream, a
//! scheduled file) and whether an `end` line closes them ([`super::stream`]).

use std::io::Write;

use super::records::{
    DomainRecord, KeyRecord, LeadRecord, LinkRecord, Record, VisitRecord, CARRIED_KEYS,
};
use crate::links::rfc3339;
use crate::model::LinkQuery;
use crate::store::Store;
use crate::BoxError;

/// Links (and a link's visits, leads) read per store call: small enough that a page is a
/// short read beside the redirects, large enough that a page's round trip to PostgreSQL is
/// paid once per thousand records.
const PAGE: usize = 1000;

/// What a backup holds beyond the keys and the links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackupOptions {
    /// Every visit, after the links.
    pub visits: bool,
    /// Every lead (personal data), after the visits.
    pub leads: bool,
    /// Every account record (users, teams, memberships, identities, run-time keys, with
    /// their hashes) and the key pepper, after the leads.
    pub accounts: bool,
}

/// One part of a backup, in the order the file holds them. A restore reads a file front to
/// back, so a part comes after everything it refers to (visits and leads after their links).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// The store's generated keys that decide codes (the `hash` strategy's secret).
    Keys,
    /// The configured domains (SPEC §26), before the links that name them.
    Domains,
    Links,
    Visits,
    Leads,
    /// The key pepper, then users, teams, memberships, identities and the keys made at run
    /// time.
    Accounts,
}

impl BackupOptions {
    /// The sections these options ask for, in file order. Adding a section is one line here
    /// and one arm in `Section::write`.
    pub fn sections(&self) -> Vec<Section> {
        [
            (Section::Keys, true),
            (Section::Domains, true),
            (Section::Links, true),
            (Section::Visits, self.visits),
            (Section::Leads, self.leads),
            (Section::Accounts, self.accounts),
        ]
        .into_iter()
        .filter_map(|(section, asked)| asked.then_some(section))
        .collect()
    }
}

/// How many records of each kind were written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub keys: u64,
    pub domains: u64,
    pub links: u64,
    pub visits: u64,
    pub leads: u64,
    pub accounts: u64,
}

impl Counts {
    /// Every record written.
    pub fn total(&self) -> u64 {
        self.keys + self.domains + self.links + self.visits + self.leads + self.accounts
    }
}

/// Where the records go: the output, the counts, and who hears of each record (a progress
/// bar).
struct Lines<'a> {
    out: &'a mut dyn Write,
    counts: Counts,
    tick: &'a mut dyn FnMut(&Counts),
}

impl Lines<'_> {
    fn put(&mut self, record: &Record) -> Result<(), BoxError> {
        serde_json::to_writer(&mut *self.out, record)?;
        self.out.write_all(b"\n")?;
        match record {
            Record::Key(_) => self.counts.keys += 1,
            Record::Domain(_) => self.counts.domains += 1,
            Record::Link(_) => self.counts.links += 1,
            Record::Visit(_) => self.counts.visits += 1,
            Record::Lead(_) => self.counts.leads += 1,
            Record::Account(_) => self.counts.accounts += 1,
            Record::End(_) => {}
        }
        (self.tick)(&self.counts);
        Ok(())
    }
}

/// Writes the sections `options` ask for as JSON lines to `out`, page by page; `tick` hears
/// of every record. Links are read in id order: every link written before the call began is
/// in the output, each one whole (the store hands out whole records), whatever is created,
/// changed or deleted meanwhile.
pub fn write_sections(
    store: &dyn Store,
    options: BackupOptions,
    out: &mut dyn Write,
    tick: &mut dyn FnMut(&Counts),
) -> Result<Counts, BoxError> {
    let mut lines = Lines {
        out,
        counts: Counts::default(),
        tick,
    };
    for section in options.sections() {
        section.write(store, &mut lines)?;
    }
    lines.out.flush()?;
    Ok(lines.counts)
}

impl Section {
    fn write(self, store: &dyn Store, lines: &mut Lines<'_>) -> Result<(), BoxError> {
        match self {
            Section::Keys => keys(store, lines),
            Section::Domains => {
                for domain in store.domains()? {
                    lines.put(&Record::Domain(DomainRecord::from_domain(&domain)))?;
                }
                Ok(())
            }
            Section::Links => links(store, lines),
            Section::Visits => each_link(store, lines, visits_of),
            Section::Leads => {
                for link_id in store.lead_links()? {
                    leads_of(store, link_id, lines)?;
                }
                Ok(())
            }
            Section::Accounts => accounts(store, lines),
        }
    }
}

fn accounts(store: &dyn Store, lines: &mut Lines<'_>) -> Result<(), BoxError> {
    for name in super::records::ACCOUNT_KEYS {
        if let Some(value) = store.meta_get(name)? {
            lines.put(&Record::Key(KeyRecord {
                name: name.to_string(),
                value: hex::encode(value),
            }))?;
        }
    }
    let snapshot = store.accounts()?;
    for bytes in &snapshot.records {
        let record = crate::model::AccountRecord::decode(bytes)
            .map_err(|e| format!("an account record does not decode: {e}"))?;
        lines.put(&Record::Account(record))?;
    }
    Ok(())
}

fn keys(store: &dyn Store, lines: &mut Lines<'_>) -> Result<(), BoxError> {
    for name in CARRIED_KEYS {
        if let Some(value) = store.meta_get(name)? {
            lines.put(&Record::Key(KeyRecord {
                name: name.to_string(),
                value: hex::encode(value),
            }))?;
        }
    }
    Ok(())
}

fn links(store: &dyn Store, lines: &mut Lines<'_>) -> Result<(), BoxError> {
    // A link names its domain by host: ids are this store's own.
    let hosts: std::collections::HashMap<u16, String> = store
        .domains()?
        .into_iter()
        .map(|d| (d.id, d.host))
        .collect();
    let mut after = None;
    loop {
        let page = store.list_links(&LinkQuery {
            after,
            limit: PAGE,
            ..LinkQuery::default()
        })?;
        for link in &page.items {
            let mut record = LinkRecord::from_link(link);
            // (Only archived links can outlive their domain, which owns none of their codes.)
            if link.domain != crate::model::DEFAULT_DOMAIN {
                record.domain = hosts.get(&link.domain).cloned();
            }
            if link.options.as_ref().is_some_and(|o| o.is_capped()) {
                record.counted = store
                    .counted(link.id)?
                    .into_iter()
                    .map(|(slot, n)| (slot.stored(), n))
                    .collect();
            }
            lines.put(&Record::Link(record))?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

/// Calls `each` for every link, in a pass of its own over the links (so that nothing grows
/// with the link count).
fn each_link(
    store: &dyn Store,
    lines: &mut Lines<'_>,
    each: fn(&dyn Store, u64, &mut Lines<'_>) -> Result<(), BoxError>,
) -> Result<(), BoxError> {
    let mut after = None;
    loop {
        let page = store.list_links(&LinkQuery {
            after,
            limit: PAGE,
            ..LinkQuery::default()
        })?;
        for link in &page.items {
            each(store, link.id, lines)?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

fn visits_of(store: &dyn Store, id: u64, lines: &mut Lines<'_>) -> Result<(), BoxError> {
    let mut after = None;
    loop {
        let page = store.visits_page(id, after, PAGE)?;
        for visit in &page.items {
            lines.put(&Record::Visit(VisitRecord::from_visit(visit)))?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

/// A link's leads, newest first as the store lists them (a restore keeps their ids, so the
/// order is not theirs to keep).
fn leads_of(store: &dyn Store, link_id: u64, lines: &mut Lines<'_>) -> Result<(), BoxError> {
    let mut before = None;
    loop {
        let page = store.leads(link_id, before, PAGE)?;
        for lead in page.leads {
            lines.put(&Record::Lead(LeadRecord {
                id: lead.id,
                link_id: lead.link_id,
                at: rfc3339(lead.at),
                values: lead.values,
                consent: lead.consent,
            }))?;
        }
        match page.next {
            Some(next) => before = Some(next),
            None => return Ok(()),
        }
    }
}
