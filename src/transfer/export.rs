//! `vshortlink export`: every key the store carries, every link (then, when asked, every
//! visit and every lead) written as JSON lines, page by page so that memory stays flat.

use std::io::Write;

use super::progress::Progress;
use super::records::{KeyRecord, LeadRecord, LinkRecord, Record, VisitRecord, CARRIED_KEYS};
use crate::config::Config;
use crate::links::rfc3339;
use crate::model::LinkQuery;
use crate::store::Store;
use crate::BoxError;

/// Links per page while exporting.
const PAGE: usize = 1000;

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
