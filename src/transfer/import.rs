//! `vshortlink import`: reads our own export or a CSV format (see `csv.rs` for the columns)
//! line by line into the store, each record checked like a create through the API, refusals
//! reported with their line numbers; idempotent, so a rerun is safe.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::Arc;

use super::csv::{Columns, Row};
use super::options::{Format, ImportOptions};
use super::progress::Progress;
use crate::backup::{
    parse_rfc3339, DomainRecord, KeyRecord, LeadRecord, LinkRecord, Record, VisitRecord,
    CARRIED_KEYS,
};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::links::{CreateLink, LinkError, Links, DEFAULT_SPACE};
use crate::model::CapSlot;
use crate::model::{Link, LinkStatus, NewVisit};
use crate::pools::Pools;
use crate::store::{Imported, Store};
use crate::BoxError;

/// Visits written per `record_visits` call while importing.
const VISIT_BATCH: usize = 512;
/// Records imported between two syncs: a crash loses at most this many, and a rerun of the
/// import redoes them (it is idempotent).
const SYNC_EVERY: u64 = 10_000;
/// Link records written per store transaction while importing.
const LINK_BATCH: usize = 256;

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

/// The importer: the store, the domain service for URL checks and pooled creates, counters.
struct Importer<'a> {
    store: Arc<dyn Store>,
    links: &'a Links,
    dry_run: bool,
    replace_keys: bool,
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
    /// Account records, with their line numbers, written together at the end (one version).
    accounts: Vec<(u64, crate::model::AccountRecord)>,
    /// What each pending line took from its team's quotas (its plan), by line.
    held: HashMap<u64, crate::plans::Held>,
    /// Hosts of the file's domains this run wrote (a dry run writes none, but its links may
    /// name them).
    planned_domains: std::collections::HashSet<String>,
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
    /// input like any other: a `javascript:` URL, a reserved code, a 2 MiB title, a URL with
    /// CR/LF in an option or a password hash that costs a gigabyte a guess must not get in
    /// this way). The refusal names the record's field.
    fn checked_link(&mut self, line: u64, link: Link) -> Result<(), BoxError> {
        let checked = self.links.check_record(link).and_then(|link| {
            // A record of a team on a plan: its features and quotas, as a create's.
            let held = self.links.check_imported(&link, self.dry_run)?;
            Ok((link, held))
        });
        match checked {
            Ok((link, held)) => {
                if let Some(held) = held {
                    self.held.insert(line, held);
                }
                self.link(line, link)
            }
            Err(LinkError::Store(e)) => Err(e.into()),
            Err(e) => self.refuse_now(line, naming_field(&e)),
        }
    }

    fn link(&mut self, line: u64, link: Link) -> Result<(), BoxError> {
        if self.dry_run {
            match self.store.link_by_code(&link.key())? {
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
            // A plan's quotas keep only what was written.
            let held = self.held.remove(&line);
            self.links
                .imported(held, matches!(result, Imported::Created(_)));
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

    /// A domain record (SPEC §26): the default domain's settings go to this store's default
    /// domain; another domain is added unless a domain of its host is here (then it is
    /// unchanged: the settings here stay).
    fn domain(&mut self, line: u64, record: DomainRecord) -> Result<(), BoxError> {
        let domain = match record.to_domain() {
            Ok(domain) => domain,
            Err(why) => return self.refuse_now(line, format!("malformed: {why}")),
        };
        let domains = self.links.domains();
        if record.default {
            if !self.dry_run {
                let mut here = (*domains.default()).clone();
                here.team = None;
                here.root_url = domain.root_url;
                here.not_found_url = domain.not_found_url;
                here.other_url = domain.other_url;
                here.apple_app_site_association = domain.apple_app_site_association;
                here.assetlinks = domain.assetlinks;
                here.created_at = domain.created_at;
                here.updated_at = domain.updated_at;
                domains
                    .import(&here)
                    .map_err(|e| format!("line {line}: {e}"))?;
            }
            self.summary.unchanged += 1;
            return Ok(());
        }
        let host = match crate::model::domain::parse_host(&domain.host) {
            Ok(host) => host,
            Err(why) => return self.refuse_now(line, why),
        };
        if domains.by_host(&host).is_some() {
            self.summary.unchanged += 1;
            return Ok(());
        }
        if self.dry_run {
            self.planned_domains.insert(host);
            self.summary.created += 1;
            return Ok(());
        }
        let record = crate::model::Domain { host, ..domain };
        match self.store.add_domain(&record)? {
            crate::store::DomainAdded::Added(_) => self.summary.created += 1,
            crate::store::DomainAdded::Exists => self.summary.unchanged += 1,
        }
        domains.reload();
        Ok(())
    }

    /// The id here of the domain a link record names (the default domain when it names none);
    /// a host no domain has here is refused, naming `domain`.
    fn on_domain(&self, record: &LinkRecord) -> Result<u16, String> {
        let Some(host) = record.domain.as_deref() else {
            return Ok(crate::model::DEFAULT_DOMAIN);
        };
        match self.links.domains().by_host(host) {
            Some(domain) => Ok(domain.id),
            None if self.planned_domains.contains(host) => Ok(crate::model::DEFAULT_DOMAIN),
            None => Err(format!("`domain`: `{host}` is no domain here")),
        }
    }

    /// An account record: checked (a password hash must not ask more than this server's
    /// cost), then kept for [`Importer::flush_accounts`].
    fn account(&mut self, line: u64, record: crate::model::AccountRecord) -> Result<(), BoxError> {
        if let crate::model::AccountRecord::User(user) = &record {
            if let Some(hash) = &user.password {
                if let Err(why) = crate::passwords::check_cost(hash) {
                    return self.refuse_now(line, format!("password: {why}"));
                }
            }
        }
        self.accounts.push((line, record));
        Ok(())
    }

    /// Writes the account records in one write: a user whose email another user of this store
    /// has is refused (emails are unique); everything else is put over what is there.
    fn flush_accounts(&mut self) -> Result<(), BoxError> {
        if self.accounts.is_empty() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.accounts);
        loop {
            let snapshot = self.store.accounts()?;
            let (dir, _) = crate::model::Directory::load(&snapshot);
            let existing: std::collections::HashSet<&[u8]> =
                snapshot.records.iter().map(Vec::as_slice).collect();
            let mut write = crate::model::AccountWrite::default();
            let mut refused = Vec::new();
            for (line, record) in &records {
                if let crate::model::AccountRecord::User(user) = record {
                    if dir
                        .user_by_email(&user.email)
                        .is_some_and(|u| u.id != user.id)
                    {
                        refused.push((
                            *line,
                            format!("another user has the email `{}`", user.email),
                        ));
                        continue;
                    }
                }
                if existing.contains(record.encode().as_slice()) {
                    self.summary.unchanged += 1;
                } else {
                    write.put.push(record.clone());
                }
            }
            let made = write.put.len() as u64;
            if !self.dry_run
                && !write.is_empty()
                && self.store.write_accounts(dir.version, &write)?.is_none()
            {
                // Another writer came first (a running instance on PostgreSQL): again.
                continue;
            }
            self.summary.created += made;
            for (line, why) in refused {
                self.refuse(line, why);
            }
            return Ok(());
        }
    }

    /// The key pepper of the exported store: taken when this store has no key made at run
    /// time (its own pepper then verifies nothing), else refused, since this store's keys would
    /// stop working.
    fn account_key(&mut self, line: u64, record: KeyRecord) -> Result<(), BoxError> {
        let Ok(value) = hex::decode(&record.value) else {
            return self.refuse_now(
                line,
                format!("malformed: the value of `{}` is not hex", record.name),
            );
        };
        if value.len() != 32 {
            return self.refuse_now(line, format!("`{}` is not 32 bytes", record.name));
        }
        if self.store.meta_get(&record.name)?.as_ref() == Some(&value) {
            self.summary.unchanged += 1;
            return Ok(());
        }
        let (dir, _) = crate::model::Directory::load(&self.store.accounts()?);
        if dir.keys().next().is_some() {
            return self.refuse_now(
                line,
                format!(
                    "this store has keys made at run time under its own `{}`: the file's keys \
                     will not be recognised here (make new ones)",
                    record.name
                ),
            );
        }
        if !self.dry_run {
            self.store.meta_replace(&record.name, &value)?;
        }
        self.summary.created += 1;
        Ok(())
    }

    /// A key of the exported store: kept when this store has none yet (or the same one).
    fn key(&mut self, line: u64, record: KeyRecord) -> Result<(), BoxError> {
        if crate::backup::records::ACCOUNT_KEYS.contains(&record.name.as_str()) {
            return self.account_key(line, record);
        }
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
        if self.replace_keys && before.as_ref() != Some(&value) {
            if !self.dry_run {
                self.store.meta_replace(&record.name, &value)?;
            }
            self.summary.created += 1;
            return Ok(());
        }
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
                Err(e) => return self.refuse_now(line, naming_field(&e)),
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
                Err(e) => self.refuse_now(line, naming_field(&e))?,
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
            domain: crate::model::DEFAULT_DOMAIN,
        };
        self.checked_link(line, link)
    }
}

/// A refusal as the report gives it: the field first when the error is about one
/// (`` `options.password`: … ``), so that the line's fault can be found in the file.
fn naming_field(e: &LinkError) -> String {
    match e {
        LinkError::Invalid { field, detail, .. } => format!("`{field}`: {detail}"),
        other => other.to_string(),
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
    let bounds = crate::memory::Bounds::derive(&config)?.links();
    let links = Links::new(store.clone(), pools, clock.clone(), config.clone(), bounds)?;
    // Links into a team on a plan are checked like creates (SPEC §25): the teams are those
    // the store holds before the import.
    if !config.plans.is_empty() {
        let plans = Arc::new(crate::plans::Plans::new(&config, store.clone(), clock));
        let (directory, faults) = crate::model::Directory::load(&store.accounts()?);
        for fault in faults {
            tracing::warn!(fault = %fault, "an account record does not decode; it is ignored");
        }
        plans.set_directory(&directory);
        links.use_plans(plans);
    }
    let mut importer = Importer {
        store,
        links: &links,
        dry_run: options.dry_run,
        replace_keys: options.replace_keys,
        summary: ImportSummary::default(),
        created_ids: HashMap::new(),
        known_ids: Default::default(),
        visits: Vec::new(),
        pending: Vec::new(),
        keep_visit_ids: None,
        counted: HashMap::new(),
        accounts: Vec::new(),
        held: HashMap::new(),
        planned_domains: Default::default(),
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
                let record = serde_json::from_str::<Record>(&line);
                // A backup's closing line is the file's checksum, not a record to import
                // (`restore` checks it before it imports).
                if let Ok(Record::End(_)) = record {
                    continue;
                }
                importer.summary.read += 1;
                progress.tick(1);
                match record {
                    Ok(Record::End(_)) => {}
                    Ok(Record::Domain(record)) => importer.domain(number, record)?,
                    Ok(Record::Link(record)) => match importer.on_domain(&record) {
                        Err(why) => importer.refuse_now(number, why)?,
                        Ok(domain) => match record.to_link() {
                            Ok(mut link) => {
                                link.domain = domain;
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
                    },
                    Ok(Record::Visit(record)) => importer.visit(number, record)?,
                    Ok(Record::Lead(record)) => importer.lead(number, record)?,
                    Ok(Record::Key(record)) => importer.key(number, record)?,
                    Ok(Record::Account(record)) => importer.account(number, record)?,
                    Err(e) => importer.refuse_now(number, format!("malformed: {e}"))?,
                }
            }
        }
        Format::YourlsCsv | Format::ShlinkCsv | Format::Csv => {
            let mut reader = ::csv::ReaderBuilder::new()
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
                match cols.row(&record) {
                    Ok(row) => importer.row(number, row)?,
                    Err(why) => importer.refuse_now(number, format!("malformed: {why}"))?,
                }
            }
        }
    }
    importer.flush_links()?;
    importer.flush_visits()?;
    importer.flush_accounts()?;
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
