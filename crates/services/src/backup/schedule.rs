//! The scheduled backups of `[backup]`: at every multiple of `every` since the Unix epoch
//! (UTC), a zstd backup written into `dir` as `vshortlink-YYYYMMDDTHHMMSSZ.jsonl.zst` — to a
//! hidden temporary file, fsynced, renamed, the directory fsynced — then the oldest beyond
//! `keep` deleted. A failure is logged and counted ([`BackupCounters`]) and the next turn
//! tries again; nothing here can stop the server.
//!
//! With several instances on one PostgreSQL database exactly one takes each turn: under the
//! job lock it reads the last turn taken from the shared records, and takes this one only when
//! it is newer (the turn's time is kept in the store, so an instance that starts late or runs
//! slow never repeats a turn another took).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::sections::BackupOptions;
use super::stream::{in_background, write_backup};
use super::BackupCounters;
use crate::clock::Clock;
use crate::config::BackupConfig;
use crate::model::Millis;
use crate::store::Store;
use crate::BoxError;

/// The job lock's name, and the shared record's kind and id that keep the last turn taken.
const JOB: &str = "backup";
const TURN_ID: &[u8] = b"last_turn";
/// How long the shared record of the last turn is kept untouched: far beyond any `every`.
const TURN_TTL: Millis = 10 * 365 * 86_400_000;
/// The names of the files this job writes (and the only ones `keep` deletes).
const PREFIX: &str = "vshortlink-";
const SUFFIX: &str = ".jsonl.zst";

/// The job: what it writes, where, how often.
pub struct Scheduled {
    store: Arc<dyn Store>,
    dir: PathBuf,
    every: Millis,
    keep: usize,
    options: BackupOptions,
    clock: Arc<dyn Clock>,
    counters: BackupCounters,
    /// The last turn this process took (the store's record is the shared one).
    last_turn: Millis,
}

impl Scheduled {
    pub fn new(
        store: Arc<dyn Store>,
        config: &BackupConfig,
        every: Duration,
        clock: Arc<dyn Clock>,
        counters: BackupCounters,
    ) -> Self {
        Self {
            store,
            dir: config.dir.clone(),
            every: u64::try_from(every.as_millis())
                .unwrap_or(u64::MAX)
                .max(1000),
            keep: config.keep.max(1),
            options: BackupOptions {
                visits: config.visits,
                leads: config.leads,
                accounts: true,
            },
            clock,
            counters,
            last_turn: 0,
        }
    }

    /// Waits for each turn and takes it, forever (aborted at shutdown).
    pub async fn run(mut self) {
        tracing::info!(
            dir = %self.dir.display(),
            every_ms = self.every,
            keep = self.keep,
            "scheduled backups: on"
        );
        loop {
            let now = self.clock.now();
            let turn = (now / self.every + 1) * self.every;
            tokio::time::sleep(Duration::from_millis(turn - now)).await;
            let job = Turn {
                store: self.store.clone(),
                dir: self.dir.clone(),
                keep: self.keep,
                options: self.options,
                clock: self.clock.clone(),
                last_turn: self.last_turn,
            };
            let outcome = match in_background(move || job.take(turn)) {
                Ok(done) => done.await.map_err(|_| "its thread ended early".to_string()),
                Err(e) => Err(format!("cannot start its thread: {e}")),
            };
            match outcome {
                Ok(Ok(Some(file))) => {
                    self.last_turn = turn;
                    self.counters
                        .last_success
                        .set(i64::try_from(turn / 1000).unwrap_or(i64::MAX));
                    tracing::info!(file = %file.display(), "scheduled backup written");
                }
                Ok(Ok(None)) => {
                    self.last_turn = turn;
                    tracing::debug!(turn, "scheduled backup: another instance took this turn");
                }
                Ok(Err(e)) => {
                    self.last_turn = turn;
                    self.counters.failures.inc();
                    tracing::error!(error = %e, dir = %self.dir.display(),
                        "scheduled backup failed; the next turn tries again");
                }
                Err(e) => {
                    self.counters.failures.inc();
                    tracing::error!(error = %e, "scheduled backup task failed");
                }
            }
        }
    }
}

/// One turn's work, on a thread of its own, paced like a streamed backup.
struct Turn {
    store: Arc<dyn Store>,
    dir: PathBuf,
    keep: usize,
    options: BackupOptions,
    clock: Arc<dyn Clock>,
    last_turn: Millis,
}

impl Turn {
    /// Takes the turn unless another instance has (`None`), writes the backup and prunes.
    fn take(self, turn: Millis) -> Result<Option<PathBuf>, BoxError> {
        if turn <= self.last_turn || !self.claim(turn)? {
            return Ok(None);
        }
        let name = file_name(turn)?;
        let file = write_atomically(&self.dir, &name, |out| {
            write_backup(&*self.store, self.options, out, true, &mut |_| {}).map(|_| ())
        })?;
        prune(&self.dir, self.keep)?;
        Ok(Some(file))
    }

    /// Whether this instance takes the turn: always alone on its store; with a shared one,
    /// when the store's last turn is older (checked and moved under the job lock).
    fn claim(&self, turn: Millis) -> Result<bool, BoxError> {
        let Some(cluster) = self.store.cluster() else {
            return Ok(true);
        };
        let _lock = cluster.job_lock(JOB)?;
        let now = self.clock.now();
        let records = cluster.records();
        let last = records
            .get(JOB, TURN_ID, now, TURN_TTL, false)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
            .map_or(0, u64::from_be_bytes);
        if last >= turn {
            return Ok(false);
        }
        records.put(JOB, TURN_ID, &turn.to_be_bytes(), now, TURN_TTL)?;
        Ok(true)
    }
}

/// `vshortlink-YYYYMMDDTHHMMSSZ.jsonl.zst` for a turn (UTC).
pub fn file_name(turn: Millis) -> Result<String, BoxError> {
    let at = OffsetDateTime::from_unix_timestamp(i64::try_from(turn / 1000)?)?;
    Ok(format!(
        "{PREFIX}{:04}{:02}{:02}T{:02}{:02}{:02}Z{SUFFIX}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    ))
}

/// Writes `dir/name` whole or not at all: into a hidden temporary file beside it, fsynced,
/// renamed over the name, the directory fsynced so that the rename survives a power cut. The
/// temporary file is removed when `write` fails.
pub fn write_atomically(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> Result<(), BoxError>,
) -> Result<PathBuf, BoxError> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let target = dir.join(name);
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| -> Result<(), BoxError> {
        let file = std::fs::File::create(&temp)
            .map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
        let mut out = std::io::BufWriter::with_capacity(256 * 1024, &file);
        write(&mut out)?;
        out.flush()?;
        drop(out);
        file.sync_all()?;
        std::fs::rename(&temp, &target)
            .map_err(|e| format!("cannot rename to {}: {e}", target.display()))?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(target)
}

/// Deletes the oldest scheduled backups in `dir` beyond the newest `keep` (their names sort
/// by time); other files are left alone.
fn prune(dir: &Path, keep: usize) -> Result<(), BoxError> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
        .collect();
    names.sort();
    let excess = names.len().saturating_sub(keep);
    for name in &names[..excess] {
        std::fs::remove_file(dir.join(name))
            .map_err(|e| format!("cannot delete the old backup {name}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_utc_and_sort_by_time() {
        assert_eq!(
            file_name(1_700_000_000_000).unwrap(),
            "vshortlink-20231114T221320Z.jsonl.zst"
        );
        assert!(file_name(1_000).unwrap() < file_name(86_400_000).unwrap());
    }
}
