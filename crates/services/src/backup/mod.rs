//! Backups of a running server (docs/operations.md, "Backups"): the export format streamed
//! while redirects and creates go on, closed by an `end` line that makes a cut or changed file
//! recognisable; the scheduled copies into `[backup] dir`; and the check of a file that
//! `vshortlink backup --verify` and `vshortlink restore` run before anything is written.
//!
//! The one home of the export format's writing: `vshortlink export` (the root crate's
//! `transfer`) writes through [`write_sections`] too, so a file from either is read the same way.
//!
//! | file          | owns                                                                     |
//! |---------------|--------------------------------------------------------------------------|
//! | `records.rs`  | the format's records (key, link, visit, lead, end) and their conversions |
//! | `sections.rs` | what a backup holds, section by section, written page by page            |
//! | `stream.rs`   | the `end` line, zstd, and the bounded stream the HTTP API sends          |
//! | `verify.rs`   | reading a file (plain or zstd, by its first bytes) and checking it whole |
//! | `schedule.rs` | the scheduled backups: turns, the job lock, atomic files, `keep`         |
//!
//! Knows nothing of HTTP: the web turns [`Backups::stream`]'s chunks into a response body.

pub mod records;
pub mod schedule;
pub mod sections;
pub mod stream;
pub mod verify;

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use crate::store::Store;

pub use self::records::{
    parse_rfc3339, DomainRecord, EndRecord, KeyRecord, LeadRecord, LinkRecord, Record, VisitRecord,
    CARRIED_KEYS,
};
pub use self::sections::{write_sections, BackupOptions, Counts, Section};
pub use self::stream::{write_backup, Chunk};
pub use self::verify::{open_backup, verify, Verified};

/// What `/metrics` says of the scheduled backups.
#[derive(Clone, Debug, Default)]
pub struct BackupCounters {
    /// `vsl_backup_last_success_timestamp_seconds`: when the last scheduled backup was
    /// written (0 before the first).
    pub last_success: Gauge,
    /// `vsl_backup_failures_total`: scheduled backups that failed (each is retried at the
    /// next turn).
    pub failures: Counter,
}

/// The backup service: streams of the running store for the API, and the schedule.
pub struct Backups {
    store: Arc<dyn Store>,
    pub counters: BackupCounters,
    schedule: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Backups {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            counters: BackupCounters::default(),
            schedule: parking_lot::Mutex::new(None),
        }
    }

    /// A backup of the store as it is now, in chunks read off the async threads (see
    /// [`stream::spawn`]): the receiver's pace is the reading's pace.
    pub fn stream(
        &self,
        options: BackupOptions,
        compress: bool,
    ) -> tokio::sync::mpsc::Receiver<Chunk> {
        stream::spawn(self.store.clone(), options, compress)
    }

    /// Starts the scheduled backups of `[backup]` (nothing when `every` is empty).
    pub fn start_schedule(
        self: &Arc<Self>,
        config: &crate::config::BackupConfig,
        clock: Arc<dyn crate::clock::Clock>,
    ) {
        if let Some(every) = config.every.0 {
            let job = schedule::Scheduled::new(
                self.store.clone(),
                config,
                every,
                clock,
                self.counters.clone(),
            );
            *self.schedule.lock() = Some(tokio::spawn(job.run()));
        }
    }

    /// Stops scheduling (shutdown); a backup being written finishes on its blocking thread.
    pub fn stop(&self) {
        if let Some(task) = self.schedule.lock().take() {
            task.abort();
        }
    }
}
