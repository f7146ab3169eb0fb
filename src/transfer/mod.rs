//! `vshortlink export` and `vshortlink import`: every link (and optionally every visit and
//! every lead) as JSON lines out, and links in from our own export, YOURLS's `yourls_url` table, Shlink's CSV
//! export, or any CSV with a long-URL column (Bitly, Kutt).
//!
//! Both open the data directory themselves, so they run with the server stopped; against a
//! running server's directory the store refuses at once (its lock), and the message says so.
//! Export streams page by page (memory stays flat); import reads line by line, reports each
//! malformed or refused line with its number, and is idempotent: a code that already leads to
//! the same URL is "unchanged", one that leads elsewhere is refused, never overwritten.
//!
//! The export format's records and their writer live in [`crate::backup`] (the services),
//! which the server's backup API streams through too.
//!
//! Owns the file formats only: records are written through the store's import methods
//! ([`crate::store::LinkStore::import_links`] and its kin), and links without a code are
//! created by the domain service (so they get a pooled code and dedup).
//!
//! | file          | owns                                                                       |
//! |---------------|----------------------------------------------------------------------------|
//! | `export.rs`   | `export` and the `export` command (`run_export`)                           |
//! | `backup.rs`   | `backup` (a running server's, over HTTP), `backup --verify` and `restore`  |
//! | `import.rs`   | `import`, its summary, and the `import` command (`run_import`)            |
//! | `options.rs`  | what `import` is asked: the format and its columns                         |
//! | `csv.rs`      | the CSV formats' columns and rows, and the code in a code column           |
//! | `progress.rs` | the progress bar (or line) both commands show on stderr                    |

mod backup;
mod csv;
mod export;
mod import;
mod options;
mod progress;

pub use self::backup::{run_backup, run_restore, run_verify, BackupArgs};

pub use self::csv::code_of;
pub use self::export::{export, run_export, ExportParts, ExportSummary};
pub use self::import::{import, run_import, ImportSummary};
pub use self::options::{Format, ImportOptions};
pub use crate::backup::{KeyRecord, LeadRecord, LinkRecord, Record, VisitRecord};
