//! `vshortlink export` and `vshortlink import`: every link (and optionally every visit) as JSON
//! lines out, and links in from our own export, YOURLS's `yourls_url` table, Shlink's CSV
//! export, or any CSV with a long-URL column (Bitly, Kutt).
//!
//! Both open the data directory themselves, so they run with the server stopped; against a
//! running server's directory the store refuses at once (its lock), and the message says so.
//! Export streams page by page (memory stays flat); import reads line by line, reports each
//! malformed or refused line with its number, and is idempotent: a code that already leads to
//! the same URL is "unchanged", one that leads elsewhere is refused, never overwritten.
//!
//! Owns the file formats only: records are written through [`Store::import_link`], and links
//! without a code are created by the domain service (so they get a pooled code and dedup).

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

use crate::clock::{Clock, SystemClock};
use crate::codes::is_code_syntax;
use crate::config::Config;
use crate::links::{rfc3339, CreateLink, LinkError, Links, DEFAULT_SPACE};
use crate::model::{CapSlot, EndedBy, LinkOptions, ReviewMark};
use crate::pools::Pools;
use crate::store::{Imported, Link, LinkQuery, LinkStatus, Millis, NewVisit, Store, Visit};
use crate::BoxError;

/// Links per page while exporting.
const PAGE: usize = 1000;
/// Visits written per `record_visits` call while importing.
const VISIT_BATCH: usize = 512;
/// Records imported between two syncs: a crash loses at most this many, and a rerun of the
/// import redoes them (it is idempotent).
const SYNC_EVERY: u64 = 10_000;
/// Link records written per store transaction while importing.
const LINK_BATCH: usize = 256;

/// One line of an export: a key of the store, a link or a visit.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
// One record at a time is read or written: the sizes of the variants never add up.
#[allow(clippy::large_enum_variant)]
pub enum Record {
    Key(KeyRecord),
    Link(LinkRecord),
    Visit(VisitRecord),
    Lead(LeadRecord),
}

/// A lead left through a link's form; `link_id` is the id of the link line it belongs to.
/// Personal data: written only by `export --leads`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeadRecord {
    pub id: u64,
    pub link_id: u64,
    pub at: String,
    /// `[name, value]` pairs in the form's order.
    pub values: Vec<(String, String)>,
    pub consent: Option<String>,
}

/// A key the store generated that decides codes: the `hash` strategy's secret, so that a
/// moved store computes the same codes for the same URLs. Written first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecord {
    pub name: String,
    /// Hex.
    pub value: String,
}

/// The keys an export carries (and an import accepts).
const CARRIED_KEYS: &[&str] = &[crate::links::HASH_SECRET_KEY];

/// Every field of a link record; times in RFC 3339 (UTC, millisecond precision).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRecord {
    pub id: u64,
    pub code: String,
    pub url: String,
    pub space: String,
    pub status: LinkStatus,
    pub custom: bool,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: Option<String>,
    #[serde(default)]
    pub deleted_at: Option<String>,
    pub title: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Password hash, cap, start time, end destination, rules and targets, as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<LinkOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    /// Redirects counted against the caps so far, by slot (0 the link, n + 1 target n).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted: Vec<(u32, u64)>,
    /// The latest review verdict: a blocked link stays blocked where it moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewMark>,
}

/// Every field of a visit; `link_id` is the id of the link line it belongs to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisitRecord {
    pub id: u64,
    pub link_id: u64,
    pub code: String,
    pub at: String,
    pub client_id: Arc<str>,
    pub ip: Option<Arc<str>>,
    pub user_agent: Arc<str>,
    pub referer: Arc<str>,
    pub browser: Arc<str>,
    pub browser_version: Arc<str>,
    pub os: Arc<str>,
    pub os_version: Arc<str>,
    pub device: Arc<str>,
    pub is_bot: bool,
    pub country: Option<Arc<str>>,
    pub region: Option<Arc<str>>,
    pub city: Option<Arc<str>>,
    pub isp: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Arc<str>>,
}

impl LinkRecord {
    fn from_link(link: &Link) -> Self {
        Self {
            id: link.id,
            code: link.code.clone(),
            url: link.url.clone(),
            space: link.space.clone(),
            status: link.status,
            custom: link.custom,
            created_at: rfc3339(link.created_at),
            updated_at: rfc3339(link.updated_at),
            expires_at: link.expires_at.map(rfc3339),
            deleted_at: link.deleted_at.map(rfc3339),
            title: link.title.clone(),
            tags: link.tags.clone(),
            options: link.options.as_deref().cloned(),
            ended_by: link.ended_by,
            counted: Vec::new(),
            review: link.review.clone(),
        }
    }

    /// The record as a link, its times parsed (no rule checked: see `Links::check_record`).
    pub fn to_link(&self) -> Result<Link, String> {
        let time =
            |field: &str, text: &str| parse_rfc3339(text).map_err(|e| format!("`{field}`: {e}"));
        let optional = |field: &str, text: &Option<String>| {
            text.as_deref().map(|t| time(field, t)).transpose()
        };
        Ok(Link {
            id: self.id,
            code: self.code.clone(),
            url: self.url.clone(),
            space: self.space.clone(),
            custom: self.custom,
            created_at: time("created_at", &self.created_at)?,
            expires_at: optional("expires_at", &self.expires_at)?,
            status: self.status,
            title: self.title.clone(),
            tags: self.tags.clone(),
            updated_at: time("updated_at", &self.updated_at)?,
            deleted_at: optional("deleted_at", &self.deleted_at)?,
            options: self.options.clone().map(Box::new),
            ended_by: self.ended_by,
            review: self.review.clone(),
        })
    }
}

impl VisitRecord {
    fn from_visit(v: &Visit) -> Self {
        Self {
            id: v.id,
            link_id: v.link_id,
            code: v.code.clone(),
            at: rfc3339(v.at),
            client_id: v.client_id.clone(),
            ip: v.ip.clone(),
            user_agent: v.user_agent.clone(),
            referer: v.referer.clone(),
            browser: v.browser.clone(),
            browser_version: v.browser_version.clone(),
            os: v.os.clone(),
            os_version: v.os_version.clone(),
            device: v.device.clone(),
            is_bot: v.is_bot,
            country: v.country.clone(),
            region: v.region.clone(),
            city: v.city.clone(),
            isp: v.isp.clone(),
            route: v.route.clone(),
        }
    }

    /// The visit for the store, belonging to `link_id` there.
    fn to_new_visit(&self, link_id: u64) -> Result<NewVisit, String> {
        let at = parse_rfc3339(&self.at).map_err(|e| format!("`at`: {e}"))?;
        // The distinct-visitor key is the first 8 bytes of the same SHA-1 (see visits::client).
        let client_hash = crate::visits::client::client_hash_from_id(&self.client_id)
            .ok_or("`client_id` is not a hex SHA-1")?;
        let referer_host = crate::visits::tally::referer_host(&self.referer).into();
        Ok(NewVisit {
            visit: Visit {
                // Kept only by `import_visits` (a store without visits); else numbered anew.
                id: self.id,
                link_id,
                code: self.code.clone(),
                at,
                client_id: self.client_id.clone(),
                ip: self.ip.clone(),
                user_agent: self.user_agent.clone(),
                referer: self.referer.clone(),
                browser: self.browser.clone(),
                browser_version: self.browser_version.clone(),
                os: self.os.clone(),
                os_version: self.os_version.clone(),
                device: self.device.clone(),
                is_bot: self.is_bot,
                country: self.country.clone(),
                region: self.region.clone(),
                city: self.city.clone(),
                isp: self.isp.clone(),
                route: self.route.clone(),
            },
            client_hash,
            referer_host,
        })
    }
}

fn parse_rfc3339(text: &str) -> Result<Millis, String> {
    let t = OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map_err(|e| format!("`{text}` is not an RFC 3339 time: {e}"))?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| format!("`{text}` is before 1970"))
}

/// YOURLS's `Y-m-d H:i:s` (taken as UTC), or RFC 3339.
fn parse_yourls_time(text: &str) -> Result<Millis, String> {
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    match PrimitiveDateTime::parse(text.trim(), &format) {
        Ok(t) => u64::try_from(t.assume_utc().unix_timestamp())
            .map(|s| s * 1000)
            .map_err(|_| format!("`{text}` is before 1970")),
        Err(_) => parse_rfc3339(text),
    }
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExportSummary {
    pub links: u64,
    pub visits: u64,
    pub leads: u64,
}

/// What an export writes beyond the links.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExportParts {
    /// Every visit, after the links.
    pub visits: bool,
    /// Every lead (personal data), after the visits.
    pub leads: bool,
}

/// Writes every link (then, as `parts` say, every visit and every lead) as JSON lines,
/// streaming.
pub fn export(
    store: &dyn Store,
    parts: ExportParts,
    out: &mut dyn Write,
) -> Result<ExportSummary, BoxError> {
    let mut summary = ExportSummary::default();
    let mut progress = Progress::new("exporting", None);
    for name in CARRIED_KEYS {
        if let Some(value) = store.meta_get(name)? {
            let record = Record::Key(KeyRecord {
                name: name.to_string(),
                value: hex::encode(value),
            });
            serde_json::to_writer(&mut *out, &record)?;
            out.write_all(b"\n")?;
        }
    }
    let mut after = None;
    loop {
        let page = store.list_links(&LinkQuery {
            after,
            limit: PAGE,
            ..LinkQuery::default()
        })?;
        for link in &page.items {
            let mut record = LinkRecord::from_link(link);
            if link.options.as_ref().is_some_and(|o| o.is_capped()) {
                record.counted = store
                    .counted(link.id)?
                    .into_iter()
                    .map(|(slot, n)| (slot.stored(), n))
                    .collect();
            }
            serde_json::to_writer(&mut *out, &Record::Link(record))?;
            out.write_all(b"\n")?;
            summary.links += 1;
            progress.tick(1);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    // Visits in a second pass over the links, so that nothing grows with the link count.
    let mut after_link = None;
    if parts.visits {
        loop {
            let links = store.list_links(&LinkQuery {
                after: after_link,
                limit: PAGE,
                ..LinkQuery::default()
            })?;
            for link in &links.items {
                visits_of(store, link.id, out, &mut summary, &mut progress)?;
            }
            match links.next {
                Some(next) => after_link = Some(next),
                None => break,
            }
        }
    }
    if parts.leads {
        for link_id in store.lead_links()? {
            leads_of(store, link_id, out, &mut summary, &mut progress)?;
        }
    }
    out.flush()?;
    progress.finish(&format!(
        "exported {} links, {} visits, {} leads",
        summary.links, summary.visits, summary.leads
    ));
    Ok(summary)
}

fn visits_of(
    store: &dyn Store,
    id: u64,
    out: &mut dyn Write,
    summary: &mut ExportSummary,
    progress: &mut Progress,
) -> Result<(), BoxError> {
    let mut after = None;
    loop {
        let page = store.visits_page(id, after, PAGE)?;
        for visit in &page.items {
            serde_json::to_writer(&mut *out, &Record::Visit(VisitRecord::from_visit(visit)))?;
            out.write_all(b"\n")?;
            summary.visits += 1;
            progress.tick(1);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

/// A link's leads, newest first as the store lists them (an import keeps their ids, so the
/// order is not theirs to keep).
fn leads_of(
    store: &dyn Store,
    link_id: u64,
    out: &mut dyn Write,
    summary: &mut ExportSummary,
    progress: &mut Progress,
) -> Result<(), BoxError> {
    let mut before = None;
    loop {
        let page = store.leads(link_id, before, PAGE)?;
        for lead in page.leads {
            let record = Record::Lead(LeadRecord {
                id: lead.id,
                link_id: lead.link_id,
                at: rfc3339(lead.at),
                values: lead.values,
                consent: lead.consent,
            });
            serde_json::to_writer(&mut *out, &record)?;
            out.write_all(b"\n")?;
            summary.leads += 1;
            progress.tick(1);
        }
        match page.next {
            Some(next) => before = Some(next),
            None => return Ok(()),
        }
    }
}

/// The formats `import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Our own export (JSON lines).
    Vsl,
    /// YOURLS's `yourls_url` table as CSV: keyword,url,title,timestamp,ip,clicks.
    YourlsCsv,
    /// Shlink's short-URL CSV export (createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits).
    ShlinkCsv,
    /// Any CSV with a header naming a long-URL column and optionally a short-code column.
    Csv,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "vsl" => Ok(Format::Vsl),
            "yourls-csv" => Ok(Format::YourlsCsv),
            "shlink-csv" => Ok(Format::ShlinkCsv),
            "csv" => Ok(Format::Csv),
            other => Err(format!(
                "`{other}` is not a format: vsl, yourls-csv, shlink-csv or csv"
            )),
        }
    }
}

/// How `import` runs.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    pub format: Format,
    pub dry_run: bool,
    /// `csv`: the long-URL column's header (else guessed).
    pub url_column: Option<String>,
    /// `csv`: the short-code column's header (else guessed; none is fine).
    pub code_column: Option<String>,
}

/// What an import did (or, dry, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Records read (links and visits; not headers or blank lines).
    pub read: u64,
    pub created: u64,
    pub unchanged: u64,
    /// Malformed lines and records not written (conflicts, invalid values).
    pub refused: u64,
    /// Of `created`, how many were visits.
    pub visits_created: u64,
}

impl std::fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "read {}, created {} ({} visits), unchanged {}, refused {}",
            self.read, self.created, self.visits_created, self.unchanged, self.refused
        )
    }
}

/// One row of a CSV format, as a link to be.
struct Row {
    code: Option<String>,
    url: String,
    title: Option<String>,
    tags: Vec<String>,
    created_at: Option<Millis>,
}

/// The importer: the store, the domain service for URL checks and pooled creates, counters.
struct Importer<'a> {
    store: Arc<dyn Store>,
    links: &'a Links,
    dry_run: bool,
    summary: ImportSummary,
    /// Export link id → id here, for links created by this run (their visits come along).
    created_ids: HashMap<u64, u64>,
    /// Export link ids seen as unchanged: their visits are already here (their leads are
    /// written again, skipped when there), with their ids here.
    known_ids: HashMap<u64, u64>,
    visits: Vec<NewVisit>,
    /// Link records waiting to be written together, with their line numbers.
    pending: Vec<(u64, Link)>,
    /// Whether visits keep their ids, decided at the first visit batch.
    keep_visit_ids: Option<bool>,
    /// Export link id → the redirects its record says were counted against its caps.
    counted: HashMap<u64, Vec<(CapSlot, u64)>>,
    report: &'a mut dyn Write,
}

impl Importer<'_> {
    fn refuse(&mut self, line: u64, why: impl std::fmt::Display) {
        self.summary.refused += 1;
        let _ = writeln!(self.report, "line {line}: refused: {why}");
    }

    /// Refuses a line at once, after writing the links before it, so that reports come in
    /// line order.
    fn refuse_now(&mut self, line: u64, why: impl std::fmt::Display) -> Result<(), BoxError> {
        self.flush_links()?;
        self.refuse(line, why);
        Ok(())
    }

    /// A record from a file passes the same checks as a create through the API (a file is
    /// input like any other: a `javascript:` URL, a reserved code or a 2 MiB title must not
    /// get in this way).
    fn checked_link(&mut self, line: u64, link: Link) -> Result<(), BoxError> {
        match self.links.check_record(link) {
            Ok(link) => self.link(line, link),
            Err(LinkError::Store(e)) => Err(e.into()),
            Err(e) => self.refuse_now(line, e),
        }
    }

    fn link(&mut self, line: u64, link: Link) -> Result<(), BoxError> {
        if self.dry_run {
            match self.store.link_by_code(&link.code)? {
                Some(existing) if existing.url == link.url => self.summary.unchanged += 1,
                Some(existing) => self.refuse(
                    line,
                    format!(
                        "the code `{}` already leads to {}, not {}",
                        link.code, existing.url, link.url
                    ),
                ),
                None => {
                    self.summary.created += 1;
                    self.created_ids.insert(link.id, link.id);
                }
            }
            return Ok(());
        }
        let alone = link.status == LinkStatus::Archived;
        let other_length = self
            .pending
            .first()
            .is_some_and(|(_, l)| l.code.len() != link.code.len());
        if alone || other_length {
            self.flush_links()?;
        }
        self.pending.push((line, link));
        if alone || self.pending.len() >= LINK_BATCH {
            self.flush_links()?;
        }
        Ok(())
    }

    /// Writes the buffered links in one store transaction and accounts for each.
    fn flush_links(&mut self) -> Result<(), BoxError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch: Vec<(u64, Link)> = std::mem::take(&mut self.pending);
        let links: Vec<Link> = batch.iter().map(|(_, l)| l.clone()).collect();
        let results = self.store.import_links(&links)?;
        let created_before = self.summary.created;
        for ((line, link), result) in batch.into_iter().zip(results) {
            match result {
                Imported::Created(stored) => {
                    self.summary.created += 1;
                    self.created_ids.insert(link.id, stored.id);
                    if let Some(counted) = self.counted.remove(&link.id) {
                        self.store.import_counted(stored.id, &counted)?;
                    }
                }
                Imported::Unchanged(stored) => {
                    self.summary.unchanged += 1;
                    self.known_ids.insert(link.id, stored.id);
                }
                Imported::Conflict(existing) if link.status == LinkStatus::Archived => self.refuse(
                    line,
                    format!(
                        "the archived record {} is taken by another link (`{}`)",
                        link.id, existing.code
                    ),
                ),
                Imported::Conflict(existing) => self.refuse(
                    line,
                    format!(
                        "the code `{}` already leads to {}, not {}",
                        link.code, existing.url, link.url
                    ),
                ),
            }
        }
        if self.summary.created / SYNC_EVERY != created_before / SYNC_EVERY {
            self.store.sync()?;
        }
        Ok(())
    }

    /// A key of the exported store: kept when this store has none yet (or the same one).
    fn key(&mut self, line: u64, record: KeyRecord) -> Result<(), BoxError> {
        if !CARRIED_KEYS.contains(&record.name.as_str()) {
            return self.refuse_now(
                line,
                format!("`{}` is not a key an import sets", record.name),
            );
        }
        let Ok(value) = hex::decode(&record.value) else {
            return self.refuse_now(
                line,
                format!("malformed: the value of `{}` is not hex", record.name),
            );
        };
        if value.len() < 16 {
            return self.refuse_now(line, format!("`{}` is shorter than 16 bytes", record.name));
        }
        let before = self.store.meta_get(&record.name)?;
        let stored = match (&before, self.dry_run) {
            (Some(stored), _) => stored.clone(),
            (None, true) => value.clone(),
            (None, false) => self.store.meta_init(&record.name, &value)?,
        };
        if stored == value {
            if before.is_some() {
                self.summary.unchanged += 1;
            } else {
                self.summary.created += 1;
            }
            Ok(())
        } else {
            self.refuse_now(
                line,
                format!(
                    "this store has its own `{}`: links made here by the `hash` strategy get \
                     other codes than in the exported store",
                    record.name
                ),
            )
        }
    }

    fn visit(&mut self, line: u64, record: VisitRecord) -> Result<(), BoxError> {
        // The link lines before this one must be written for its link's id to be known.
        self.flush_links()?;
        if let Some(&id) = self.created_ids.get(&record.link_id) {
            match record.to_new_visit(id) {
                Ok(visit) => {
                    self.summary.created += 1;
                    self.summary.visits_created += 1;
                    if !self.dry_run {
                        self.visits.push(visit);
                        if self.visits.len() >= VISIT_BATCH {
                            self.flush_visits()?;
                        }
                    }
                }
                Err(why) => self.refuse_now(line, why)?,
            }
        } else if self.known_ids.contains_key(&record.link_id) {
            self.summary.unchanged += 1;
        } else {
            self.refuse_now(
                line,
                format!("the visit's link {} is not in this file", record.link_id),
            )?;
        }
        Ok(())
    }

    /// A lead: written under its link's id here, keeping its own id; one already there is
    /// unchanged.
    fn lead(&mut self, line: u64, record: LeadRecord) -> Result<(), BoxError> {
        self.flush_links()?;
        let Some(&link_id) = self
            .created_ids
            .get(&record.link_id)
            .or_else(|| self.known_ids.get(&record.link_id))
        else {
            return self.refuse_now(
                line,
                format!("the lead's link {} is not in this file", record.link_id),
            );
        };
        let at = match parse_rfc3339(&record.at) {
            Ok(at) => at,
            Err(why) => return self.refuse_now(line, format!("malformed: {why}")),
        };
        if record.id == 0 || record.values.len() > crate::model::gates::MAX_FORM_FIELDS * 4 {
            return self.refuse_now(line, "malformed: a lead has an id and a few values");
        }
        let lead = crate::model::Lead {
            id: record.id,
            link_id,
            at,
            values: record.values,
            consent: record.consent,
        };
        let written = if self.dry_run {
            1
        } else {
            self.store.import_leads(std::slice::from_ref(&lead))?
        };
        if written == 1 {
            self.summary.created += 1;
        } else {
            self.summary.unchanged += 1;
        }
        Ok(())
    }

    fn flush_visits(&mut self) -> Result<(), BoxError> {
        if self.visits.is_empty() {
            return Ok(());
        }
        // Into a store that never had a visit, visits keep their ids (the export's ids are
        // unique and in order per link), so an export → import round trip is exact; anywhere
        // else they are numbered anew.
        let keep = match self.keep_visit_ids {
            Some(keep) => keep,
            None => {
                let keep = self.store.last_visit_id()? == 0;
                self.keep_visit_ids = Some(keep);
                keep
            }
        };
        if keep {
            self.store.import_visits(&mut self.visits)?;
        } else {
            self.store.record_visits(&mut self.visits)?;
        }
        self.visits.clear();
        Ok(())
    }

    /// A CSV row: with a code, a custom link that keeps it; without, a pooled create (dedup
    /// makes a second import of the same row a no-op).
    fn row(&mut self, line: u64, row: Row) -> Result<(), BoxError> {
        let Some(code) = row.code else {
            let url = match self.links.check_url(&row.url) {
                Ok(url) => url,
                Err(e) => return self.refuse_now(line, e),
            };
            if self.dry_run {
                self.summary.created += 1;
                return Ok(());
            }
            let req = CreateLink {
                url,
                title: row.title,
                tags: Some(row.tags),
                ..CreateLink::default()
            };
            match self.links.create(req) {
                Ok((_, true)) => self.summary.created += 1,
                Ok((_, false)) => self.summary.unchanged += 1,
                Err(LinkError::Store(e)) => return Err(e.into()),
                Err(e) => self.refuse_now(line, e)?,
            }
            return Ok(());
        };
        let now = self.links.now();
        let created_at = row.created_at.unwrap_or(now);
        let link = Link {
            id: 0,
            code,
            url: row.url,
            space: DEFAULT_SPACE.to_string(),
            custom: true,
            created_at,
            expires_at: None,
            status: LinkStatus::Active,
            title: row.title.filter(|t| !t.is_empty()),
            tags: row.tags,
            updated_at: created_at,
            deleted_at: None,
            options: None,
            ended_by: None,
            review: None,
        };
        self.checked_link(line, link)
    }
}

/// Reads `input` in `options.format` into the store. Reports go to `report` (one line per
/// refusal, with its line number); the summary is returned.
pub fn import(
    store: Arc<dyn Store>,
    config: Arc<Config>,
    input: &mut dyn BufRead,
    options: &ImportOptions,
    report: &mut dyn Write,
) -> Result<ImportSummary, BoxError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let pools = Arc::new(Pools::new(store.clone(), clock.clone(), &config)?);
    let links = Links::new(store.clone(), pools, clock, config)?;
    let mut importer = Importer {
        store,
        links: &links,
        dry_run: options.dry_run,
        summary: ImportSummary::default(),
        created_ids: HashMap::new(),
        known_ids: Default::default(),
        visits: Vec::new(),
        pending: Vec::new(),
        keep_visit_ids: None,
        counted: HashMap::new(),
        report,
    };
    let mut progress = Progress::new("importing", None);
    match options.format {
        Format::Vsl => {
            let mut line = String::new();
            let mut number = 0u64;
            loop {
                line.clear();
                if input.read_line(&mut line)? == 0 {
                    break;
                }
                number += 1;
                if line.trim().is_empty() {
                    continue;
                }
                importer.summary.read += 1;
                progress.tick(1);
                match serde_json::from_str::<Record>(&line) {
                    Ok(Record::Link(record)) => match record.to_link() {
                        Ok(link) => {
                            let counted: Vec<(CapSlot, u64)> = record
                                .counted
                                .iter()
                                .filter_map(|&(slot, n)| Some((CapSlot::of_stored(slot)?, n)))
                                .collect();
                            if !counted.is_empty() {
                                importer.counted.insert(link.id, counted);
                            }
                            importer.checked_link(number, link)?
                        }
                        Err(why) => importer.refuse_now(number, format!("malformed: {why}"))?,
                    },
                    Ok(Record::Visit(record)) => importer.visit(number, record)?,
                    Ok(Record::Lead(record)) => importer.lead(number, record)?,
                    Ok(Record::Key(record)) => importer.key(number, record)?,
                    Err(e) => importer.refuse_now(number, format!("malformed: {e}"))?,
                }
            }
        }
        Format::YourlsCsv | Format::ShlinkCsv | Format::Csv => {
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .from_reader(input);
            let mut columns: Option<Columns> = None;
            for result in reader.records() {
                let record = match result {
                    Ok(r) => r,
                    Err(e) => {
                        let number = e.position().map_or(0, |p| p.line());
                        importer.summary.read += 1;
                        importer.refuse_now(number, format!("malformed: {e}"))?;
                        continue;
                    }
                };
                let number = record.position().map_or(0, |p| p.line());
                if record.iter().all(|f| f.trim().is_empty()) {
                    continue;
                }
                let cols = match &columns {
                    Some(c) => c,
                    None => {
                        let (found, header) = Columns::find(options, &record)?;
                        columns = Some(found);
                        if header {
                            continue;
                        }
                        columns.as_ref().ok_or("no columns")?
                    }
                };
                importer.summary.read += 1;
                progress.tick(1);
                match cols.row(options.format, &record) {
                    Ok(row) => importer.row(number, row)?,
                    Err(why) => importer.refuse_now(number, format!("malformed: {why}"))?,
                }
            }
        }
    }
    importer.flush_links()?;
    importer.flush_visits()?;
    if !options.dry_run {
        importer.store.sync()?;
    }
    let summary = importer.summary.clone();
    progress.finish(&format!(
        "{}{summary}",
        if options.dry_run { "dry run: " } else { "" }
    ));
    Ok(summary)
}

/// Where each field is in a CSV format.
struct Columns {
    url: usize,
    code: Option<usize>,
    title: Option<usize>,
    tags: Option<usize>,
    created: Option<usize>,
}

impl Columns {
    /// From the first row: a header when it names columns, else YOURLS's fixed order.
    /// Returns whether the first row was a header.
    fn find(options: &ImportOptions, first: &csv::StringRecord) -> Result<(Self, bool), BoxError> {
        let names: Vec<String> = first
            .iter()
            .map(|h| h.trim().trim_start_matches('\u{feff}').to_ascii_lowercase())
            .collect();
        let at = |wanted: &[&str]| {
            wanted
                .iter()
                .find_map(|w| names.iter().position(|n| n == w))
        };
        match options.format {
            Format::YourlsCsv => {
                let header = names.first().is_some_and(|n| n == "keyword");
                Ok((
                    Columns {
                        code: Some(at(&["keyword"]).unwrap_or(0)),
                        url: at(&["url"]).unwrap_or(1),
                        title: Some(at(&["title"]).unwrap_or(2)),
                        created: Some(at(&["timestamp"]).unwrap_or(3)),
                        tags: None,
                    },
                    header,
                ))
            }
            Format::ShlinkCsv => {
                let url = at(&["longurl"]).ok_or(
                    "a Shlink CSV export starts with a header naming `longUrl` (createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits)",
                )?;
                Ok((
                    Columns {
                        url,
                        code: at(&["shortcode"]),
                        title: at(&["title"]),
                        tags: at(&["tags"]),
                        created: at(&["createdat", "datecreated"]),
                    },
                    true,
                ))
            }
            _ => {
                let named = |flag: &Option<String>| {
                    flag.as_ref()
                        .map(|f| {
                            names
                                .iter()
                                .position(|n| n.eq_ignore_ascii_case(f.trim()))
                                .ok_or_else(|| format!("no column is named `{f}`"))
                        })
                        .transpose()
                };
                let url = match named(&options.url_column)? {
                    Some(i) => i,
                    None => at(&[
                        "long_url",
                        "longurl",
                        "long url",
                        "original_url",
                        "original url",
                        "destination",
                        "target",
                        "url",
                        "link",
                        "long_link",
                    ])
                    .ok_or("no long-URL column found; name it with --url-column")?,
                };
                let code = match named(&options.code_column)? {
                    Some(i) => Some(i),
                    None => at(&[
                        "short_code",
                        "shortcode",
                        "short code",
                        "code",
                        "keyword",
                        "slug",
                        "alias",
                        "custom_path",
                        "back_half",
                        "short_url",
                        "shorturl",
                        "short url",
                        "link_short",
                        "address",
                    ]),
                };
                Ok((
                    Columns {
                        url,
                        code: code.filter(|c| *c != url),
                        title: at(&["title", "name", "description"]),
                        tags: at(&["tags"]),
                        created: at(&["created_at", "createdat", "created", "date", "timestamp"]),
                    },
                    true,
                ))
            }
        }
    }

    fn row(&self, format: Format, record: &csv::StringRecord) -> Result<Row, String> {
        let field = |i: Option<usize>| {
            i.and_then(|i| record.get(i))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let url = field(Some(self.url)).ok_or("no URL")?;
        let code = field(self.code).map(|c| code_of(&c)).transpose()?;
        let created_at = field(self.created)
            .map(|t| match format {
                Format::YourlsCsv => parse_yourls_time(&t),
                _ => parse_yourls_time(&t),
            })
            .transpose()?;
        let tags = field(self.tags)
            .map(|t| {
                t.split(['|', ','])
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Row {
            code: code.filter(|c| !c.is_empty()),
            url,
            title: field(self.title),
            tags,
            created_at,
        })
    }
}

/// The code in a CSV's code column: the code itself, or (Bitly and others put a whole short
/// URL there) the one path segment of an http(s) short URL. Anything else, `../../x` among
/// them, is no code: a path is never shortened into one.
pub fn code_of(text: &str) -> Result<String, String> {
    if !text.contains('/') {
        return Ok(text.to_string());
    }
    let not_code = || format!("`{text}` is neither a code nor a short URL");
    let url = url::Url::parse(text).map_err(|_| not_code())?;
    if !matches!(url.scheme(), "http" | "https") || url.query().is_some() {
        return Err(not_code());
    }
    let mut segments = url.path_segments().ok_or_else(not_code)?;
    match (segments.next(), segments.next()) {
        (Some(code), None) if is_code_syntax(code) => Ok(code.to_string()),
        _ => Err(not_code()),
    }
}

/// A progress bar on a terminal; a plain line every few seconds otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: &'static str,
    count: u64,
    last: Instant,
}

impl Progress {
    fn new(label: &'static str, total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(n) => indicatif::ProgressBar::new(n),
                None => indicatif::ProgressBar::new_spinner(),
            };
            bar.set_message(label);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} {msg}: {pos} records ({per_sec})",
            ) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            label,
            count: 0,
            last: Instant::now(),
        }
    }

    fn tick(&mut self, n: u64) {
        self.count += n;
        match &self.bar {
            Some(bar) => bar.inc(n),
            None if self.last.elapsed() >= Duration::from_secs(5) => {
                eprintln!("{}: {} records", self.label, self.count);
                self.last = Instant::now();
            }
            None => {}
        }
    }

    fn finish(self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        eprintln!("{message}");
    }
}

/// `vshortlink export`: opens the stopped store and writes to `output` (stdout when `None`).
pub fn run_export(
    config: &Config,
    parts: ExportParts,
    output: Option<&std::path::Path>,
) -> Result<ExportSummary, BoxError> {
    let store = crate::open_store(config)?;
    let summary = match output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            export(&*store, parts, &mut std::io::BufWriter::new(file))?
        }
        None => export(
            &*store,
            parts,
            &mut std::io::BufWriter::new(std::io::stdout().lock()),
        )?,
    };
    store.close()?;
    Ok(summary)
}

/// `vshortlink import`: opens the stopped store and reads `input` (stdin when `None`).
pub fn run_import(
    config: Config,
    input: Option<&std::path::Path>,
    options: &ImportOptions,
) -> Result<ImportSummary, BoxError> {
    let mut reader: Box<dyn BufRead> = match input {
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        )),
        None => Box::new(std::io::BufReader::new(std::io::stdin().lock())),
    };
    let store = crate::open_store(&config)?;
    let summary = import(
        store.clone(),
        Arc::new(config),
        &mut reader,
        options,
        &mut std::io::stderr().lock(),
    )?;
    store.close()?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::code_of;

    #[test]
    fn a_code_column_holds_a_code_or_a_short_url() {
        assert_eq!(code_of("abc"), Ok("abc".to_string()));
        assert_eq!(code_of("https://bit.ly/3xYz"), Ok("3xYz".to_string()));
        assert_eq!(code_of("http://s.example/x_1-"), Ok("x_1-".to_string()));
        for bad in [
            "../../x",
            "a/b",
            "/x",
            "https://s.example/a/b",
            "https://s.example/",
            "https://s.example/x?y=1",
            "javascript:alert(1)//x",
            "ftp://s.example/x",
        ] {
            assert!(code_of(bad).is_err(), "{bad}");
        }
    }
}
