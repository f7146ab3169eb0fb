//! Group commit: one background thread flushes sled for every writer waiting at that moment.
//!
//! A writer commits its transaction in memory, then calls [`Flusher::wait_durable`]. That takes
//! a ticket *after* the commit and waits until a flush that started after the ticket was taken
//! has finished. The flusher thread snapshots the highest ticket before each flush, so every
//! writer whose ticket is covered committed before the flush began. N concurrent writers
//! therefore cost about one flush, not N.
//!
//! In `power` durability the thread also fsyncs the store's files after sled's flush, because
//! sled 0.34's flush ends in `sync_file_range`, which survives a killed process but not a power
//! cut. This file owns no data; it never reads or writes records.
//!
//! After a flush the thread also runs the store's hook for what grows with writes (the page
//! table's watch, [`super::page_table`]), so that no writer waits for it.
//!
//! A writer that must not block (the create committer, [`super::group`]) hands over a callback
//! instead ([`Flusher::when_durable`]); the flusher thread calls it after the flush that covers
//! it, so that the writer goes on committing while the flush runs.

use crate::CommitStats;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::{Durability, StoreError, StoreResult};

/// How long the flusher waits for committing writers to join a flush, per round.
const COMMIT_DELAY_WINDOW: Duration = Duration::from_micros(100);
/// At most this many rounds (so a flush waits at most 1 ms for company).
const COMMIT_DELAY_ROUNDS: usize = 10;

/// Shared between writers and the flusher thread.
struct Shared {
    state: Mutex<State>,
    /// Writers inside a transaction that will ask for durability next.
    committing: AtomicUsize,
    /// Wakes the flusher thread when a ticket is taken or shutdown starts.
    work: Condvar,
    /// Wakes writers when `durable` advances.
    done: Condvar,
    /// The store's storage fault: the first failed flush.
    fault: super::errors::FaultCell,
}

#[derive(Default)]
struct State {
    /// The last ticket handed out.
    requested: u64,
    /// Every ticket up to this one is covered by a finished flush.
    durable: u64,
    /// Tickets up to this one were covered by a flush that failed.
    failed_upto: u64,
    last_error: Option<StoreError>,
    /// Callbacks waiting for their ticket to be covered, in ticket order.
    callbacks: Vec<(u64, Durable)>,
    shutdown: bool,
    /// Flush statistics for /metrics.
    flushes: u64,
    flush_nanos_total: u128,
    last_flush: Duration,
}

/// Called with the outcome of the flush that covers a commit.
pub type Durable = Box<dyn FnOnce(StoreResult<()>) + Send>;

/// Called on the flusher's thread after each flush.
pub type AfterFlush = Box<dyn Fn(&sled::Db) + Send>;

/// The group-commit flusher of one sled database.
pub struct Flusher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Flusher {
    /// Starts the flusher thread for `db`, whose files live in `dir`.
    /// In `power` durability, `also_sync` are files of the store's beside sled's (the claims
    /// journal) that each flush fsyncs too. `after` runs after each flush.
    pub fn start(
        db: sled::Db,
        dir: &Path,
        durability: Durability,
        also_sync: Vec<PathBuf>,
        after: AfterFlush,
    ) -> StoreResult<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            committing: AtomicUsize::new(0),
            work: Condvar::new(),
            done: Condvar::new(),
            fault: super::errors::FaultCell::default(),
        });
        let syncer = match durability {
            Durability::Process => None,
            Durability::Power => Some(FileSyncer::new(dir, also_sync)),
        };
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("vsl-flusher".into())
            .spawn(move || run(thread_shared, db, syncer, after))
            .map_err(|e| StoreError::Backend(format!("cannot start flusher thread: {e}")))?;
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Marks a writer as committing until the guard drops; the flusher waits briefly for
    /// committing writers so that they share its flush.
    pub fn committing(&self) -> CommitGuard<'_> {
        self.shared.committing.fetch_add(1, Ordering::AcqRel);
        CommitGuard(&self.shared.committing)
    }

    /// Blocks until everything committed before this call is durable.
    pub fn wait_durable(&self) -> StoreResult<()> {
        let mut state = self.shared.state.lock();
        if state.shutdown {
            return Err(StoreError::Backend("store is closed".into()));
        }
        state.requested += 1;
        let ticket = state.requested;
        self.shared.work.notify_one();
        while state.durable < ticket {
            self.shared.done.wait(&mut state);
        }
        state.outcome(ticket)
    }

    /// Returns at once; `then` is called on the flusher's thread once everything committed
    /// before this call is durable (or its flush failed, or the store closed first).
    pub fn when_durable(&self, then: Durable) {
        let mut state = self.shared.state.lock();
        if state.shutdown {
            drop(state);
            then(Err(StoreError::Backend("store is closed".into())));
            return;
        }
        state.requested += 1;
        let ticket = state.requested;
        state.callbacks.push((ticket, then));
        self.shared.work.notify_one();
    }

    /// The storage fault that failed a flush, if one did: every later write fails with it
    /// until the store is reopened.
    pub fn fault(&self) -> Option<crate::StorageFault> {
        self.shared.fault.get()
    }

    /// Flush statistics so far.
    pub fn stats(&self) -> CommitStats {
        let state = self.shared.state.lock();
        CommitStats {
            flushes: state.flushes,
            total: Duration::from_nanos(u64::try_from(state.flush_nanos_total).unwrap_or(u64::MAX)),
            last: state.last_flush,
        }
    }

    /// Serves the last waiters, then stops the thread. Later writes fail.
    pub fn shutdown(&self) {
        {
            let mut state = self.shared.state.lock();
            state.shutdown = true;
            self.shared.work.notify_one();
        }
        if let Some(handle) = self.thread.lock().take() {
            let _ = handle.join();
        }
    }
}

impl State {
    /// What a writer holding `ticket` learns once `durable` covers it.
    fn outcome(&self, ticket: u64) -> StoreResult<()> {
        if ticket <= self.failed_upto {
            return Err(self
                .last_error
                .clone()
                .unwrap_or_else(|| StoreError::Backend("flush failed".into())));
        }
        Ok(())
    }
}

/// See [`Flusher::committing`].
pub struct CommitGuard<'a>(&'a AtomicUsize);

impl Drop for CommitGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(shared: Arc<Shared>, db: sled::Db, mut syncer: Option<FileSyncer>, after: AfterFlush) {
    // Tickets the last flush covered.
    let mut covered_last = 0u64;
    loop {
        let durable_before;
        let target = {
            let mut state = shared.state.lock();
            durable_before = state.durable;
            while state.requested == state.durable && !state.shutdown {
                shared.work.wait(&mut state);
            }
            if state.requested == state.durable && state.shutdown {
                return;
            }
            // Commit delay: while writers are between starting a transaction and asking for
            // durability, give them a moment to join this flush. A flush costs about a
            // millisecond of I/O and CPU whatever it covers, so covering more commits per
            // flush raises throughput under load. A lone writer is never delayed: nobody is
            // committing when it asks.
            // Under load (the last flush covered several writers: redirects of a capped link,
            // concurrent creates), also wait while writers keep arriving: each window that
            // brings one more is worth a flush shared by more of them.
            let busy = covered_last > 1;
            for _ in 0..COMMIT_DELAY_ROUNDS {
                let arrived = state.requested;
                if state.shutdown {
                    break;
                }
                let committing = shared.committing.load(Ordering::Acquire) > 0;
                if !committing && !busy {
                    break;
                }
                shared.work.wait_for(&mut state, COMMIT_DELAY_WINDOW);
                if !committing && state.requested == arrived {
                    break;
                }
            }
            state.requested
        };
        covered_last = target.saturating_sub(durable_before);
        let started = Instant::now();
        let result = db
            .flush()
            .map(|_| ())
            .map_err(|e| super::errors::failed("flush failed", e))
            .and_then(|()| match syncer.as_mut() {
                Some(s) => s
                    .sync()
                    .map_err(|e| super::errors::failed("fsync failed", e)),
                None => Ok(()),
            });
        let took = started.elapsed();
        let mut state = shared.state.lock();
        state.durable = target;
        state.flushes += 1;
        state.flush_nanos_total += took.as_nanos();
        state.last_flush = took;
        if let Err(e) = result {
            // Logged once per storage fault (by the fault cell), not once per failed flush.
            tracing::debug!(error = %e, "flush failed; waiting writers get an error");
            shared.fault.note(&e);
            state.failed_upto = target;
            state.last_error = Some(e);
        }
        shared.done.notify_all();
        // The callbacks up to `target` are covered (tickets are pushed in order, under the
        // lock); they run outside it, so that they may take other locks.
        let upto = state
            .callbacks
            .partition_point(|(ticket, _)| *ticket <= target);
        let covered: Vec<_> = state.callbacks.drain(..upto).collect();
        let outcomes: Vec<_> = covered
            .into_iter()
            .map(|(ticket, then)| (state.outcome(ticket), then))
            .collect();
        drop(state);
        for (outcome, then) in outcomes {
            then(outcome);
        }
        after(&db);
    }
}

/// fsyncs sled's files after a flush (`power` durability).
///
/// fsync acts on the file whichever descriptor wrote it, so read-only handles opened here
/// cover sled's own writes.
struct FileSyncer {
    dir: PathBuf,
    also: Vec<PathBuf>,
    files: Vec<File>,
}

impl FileSyncer {
    fn new(dir: &Path, also: Vec<PathBuf>) -> Self {
        Self {
            dir: dir.to_path_buf(),
            also,
            files: Vec::new(),
        }
    }

    fn sync(&mut self) -> std::io::Result<()> {
        if self.files.is_empty() {
            // The data file and the directory (for metadata such as the file's length).
            // blobs/ only holds values larger than sled's blob threshold, which our records
            // never reach.
            self.files.push(File::open(&self.dir)?);
            self.files.push(File::open(self.dir.join("db"))?);
            for path in &self.also {
                self.files.push(File::open(path)?);
            }
        }
        for file in &self.files[1..] {
            file.sync_data()?;
        }
        self.files[0].sync_all()
    }
}
