//! `vshortlink export`: every key the store carries, every link (then, when asked, every
//! visit and every lead) written as JSON lines, page by page so that memory stays flat. The
//! lines are the backup's ([`crate::backup::write_sections`], one writer for both); an export
//! has no `end` line, since it is read by `import`, not checked by `restore`.

use std::io::Write;

use super::progress::Progress;
use crate::backup::{write_sections, BackupOptions};
use crate::config::Config;
use crate::store::Store;
use crate::BoxError;

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
    /// Every account record with its password and key hashes, and the key pepper (a
    /// secret file), after the leads.
    pub accounts: bool,
}

/// Writes every link (then, as `parts` say, every visit and every lead) as JSON lines,
/// streaming.
pub fn export(
    store: &dyn Store,
    parts: ExportParts,
    out: &mut dyn Write,
) -> Result<ExportSummary, BoxError> {
    let mut progress = Progress::new("exporting", None);
    let options = BackupOptions {
        visits: parts.visits,
        leads: parts.leads,
        accounts: parts.accounts,
    };
    let mut written = 0;
    let counts = write_sections(store, options, out, &mut |counts| {
        progress.tick(counts.total() - written);
        written = counts.total();
    })?;
    progress.finish(&format!(
        "exported {} links, {} visits, {} leads, {} account records",
        counts.links, counts.visits, counts.leads, counts.accounts
    ));
    Ok(ExportSummary {
        links: counts.links,
        visits: counts.visits,
        leads: counts.leads,
    })
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
