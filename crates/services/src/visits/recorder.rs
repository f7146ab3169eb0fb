//! The visit journal's two sides: the redirect's append and the writer that folds the journal
//! into the store (see docs/architecture.md, "Visits and statistics, inside").
//!
//! The redirect handler calls [`Recorder::record`], which stamps the visit and appends it,
//! as one record of a couple of hundred bytes, to the visit journal ([`super::journal`]: a
//! copy into its mapped segment). It never waits on the writer, the store or other redirects;
//! when it returns the visit is in the kernel's page cache, so a killed process keeps it, and
//! the redirect answers after that. Only a disk that refuses the journal room (full) drops
//! the visit, counted, and `/healthz` says so until appends succeed again.
//!
//! One writer task reads the journal from the position the store last noted (after a
//! restart, that read is the replay), at most a batch at a time, decodes and enriches the
//! visits on a blocking thread (user agent, geolocation, client id, stored address) and hands
//! them to the store with the position reached, in one write ([`crate::store::VisitStore::record_journaled_visits`]).
//! Once per [`INTERVAL`] (or at once when a whole batch was waiting); while a write runs the
//! next batch is read and enriched. A failed write is retried from the last noted position,
//! so nothing journaled is lost to a store error either. Folded segments are removed.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use smallvec::SmallVec;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::client;
use super::geo::{Geo, GeoDb, GeoError};
use super::journal::{Journal, Position};
use super::tally::referer_host;
use super::ua::{Agent, UaParser};
use crate::clock::Clock;
use crate::config::{IpMode, VisitsConfig};
use crate::model::Route;
use crate::model::{Millis, NewVisit, StoreError, Visit};
use crate::store::Store;

/// The writer's batch maps, keyed by header bytes: a fast seeded hash.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// How often the writer folds what the journal gained into the store. Each dirty counter is
/// written once per interval however many visits it gained, which is what lets one writer
/// keep up with every redirect two cores can answer. A crash loses none of it: the journal
/// holds every visit until a fold has noted it.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Most visits read from the journal for one fold without a configured bound (`memory.budget`
/// derives one: `writer_visits`): under a load that brings more in an interval, folds come
/// back to back, so the memory held stays bounded (about 400 bytes an enriched visit; at most
/// twice this, one fold being written and the next one being enriched).
pub const MAX_PENDING: usize = 65_536;
/// How long the writer waits before retrying a fold the store refused.
const RETRY: Duration = Duration::from_secs(1);
/// Longest user agent or referer kept; longer ones are cut (at a character boundary).
const MAX_HEADER_CHARS: usize = 1024;
/// Bytes of a user agent or referer the redirect copies: enough for [`MAX_HEADER_CHARS`]
/// characters of any width, so the cut the writer makes is the same as without this one.
const MAX_HEADER_BYTES: usize = 4 * MAX_HEADER_CHARS;
/// Bytes of a visit's code, user agent and referer held in the [`RawVisit`] itself. A
/// browser's user agent is 100 to 250 bytes and a referer usually less; longer ones go to the
/// heap.
const INLINE_BYTES: usize = 384;

/// A visit as the redirect saw it, read back from the journal ([`RawVisit::decode`]) and
/// enriched by the writer. The redirect itself builds none: it encodes the same fields straight
/// into the journal's append buffer. The code, user agent and referer are held in the record
/// itself (up to `INLINE_BYTES`), so a batch read for a fold is one allocation rather than
/// three a visit.
#[derive(Debug)]
pub struct RawVisit {
    pub link_id: u64,
    pub at: Millis,
    pub ip: IpAddr,
    /// Which destination served it, on a link with rules or targets.
    pub route: Option<Route>,
    /// The code, the user agent and the referer, back to back.
    text: SmallVec<[u8; INLINE_BYTES]>,
    code_len: u16,
    agent_len: u16,
}

/// A visit's journal record, borrowed from where its parts are: a redirect's request
/// ([`Recorder::record`] encodes it straight into the journal's append buffer, nothing
/// allocated on the way) or a decoded visit (`RawVisit::encode`, for the tests). One encoder
/// for both, so what the tests round-trip is what a redirect writes.
struct JournalRecord<'a> {
    link_id: u64,
    at: Millis,
    ip: IpAddr,
    route: Option<Route>,
    code: &'a [u8],
    agent: &'a [u8],
    referer: &'a [u8],
}

impl<'a> JournalRecord<'a> {
    /// A missing header and an empty one are the same to the writer. Headers are cut at
    /// `MAX_HEADER_BYTES`.
    fn new(
        link_id: u64,
        code: &'a str,
        at: Millis,
        ip: IpAddr,
        user_agent: Option<&'a [u8]>,
        referer: Option<&'a [u8]>,
        route: Option<Route>,
    ) -> Self {
        JournalRecord {
            link_id,
            at,
            ip,
            route,
            // Codes are at most 16 characters (their syntax is checked before a lookup); the
            // cut only keeps the length within its field.
            code: &code.as_bytes()[..code.len().min(usize::from(u16::MAX))],
            agent: cut_header(user_agent),
            referer: cut_header(referer),
        }
    }

    /// Appends the record: version, link, time, address, route, the code's and the user
    /// agent's lengths, then the code, user agent and referer.
    fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(RECORD_VERSION);
        out.extend_from_slice(&self.link_id.to_le_bytes());
        out.extend_from_slice(&self.at.to_le_bytes());
        match self.ip {
            IpAddr::V4(ip) => {
                out.push(4);
                out.extend_from_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                out.push(6);
                out.extend_from_slice(&ip.octets());
            }
        }
        let (tag, n) = match self.route {
            None => (0u8, 0u16),
            Some(Route::Default) => (1, 0),
            Some(Route::Rule(n)) => (2, n),
            Some(Route::Target(n)) => (3, n),
            Some(Route::InAppPage) => (4, 0),
            Some(Route::CrawlerPreview) => (5, 0),
        };
        out.push(tag);
        out.extend_from_slice(&n.to_le_bytes());
        // Within u16 by the cuts in `new` (a decoded visit's were made when it was recorded).
        out.extend_from_slice(&(self.code.len() as u16).to_le_bytes());
        out.extend_from_slice(&(self.agent.len() as u16).to_le_bytes());
        out.extend_from_slice(self.code);
        out.extend_from_slice(self.agent);
        out.extend_from_slice(self.referer);
    }
}

impl RawVisit {
    /// A missing header and an empty one are the same to the writer. Headers are cut at
    /// `MAX_HEADER_BYTES`.
    #[cfg(test)]
    pub fn new(
        link_id: u64,
        code: &str,
        at: Millis,
        ip: IpAddr,
        user_agent: Option<&[u8]>,
        referer: Option<&[u8]>,
    ) -> Self {
        let record = JournalRecord::new(link_id, code, at, ip, user_agent, referer, None);
        let mut text =
            SmallVec::with_capacity(record.code.len() + record.agent.len() + record.referer.len());
        text.extend_from_slice(record.code);
        text.extend_from_slice(record.agent);
        text.extend_from_slice(record.referer);
        RawVisit {
            link_id,
            at,
            ip,
            route: None,
            text,
            // Both within u16 by the cuts `JournalRecord::new` makes.
            code_len: record.code.len() as u16,
            agent_len: record.agent.len() as u16,
        }
    }

    fn code(&self) -> &[u8] {
        &self.text[..usize::from(self.code_len)]
    }

    fn user_agent(&self) -> &[u8] {
        let start = usize::from(self.code_len);
        &self.text[start..start + usize::from(self.agent_len)]
    }

    fn referer(&self) -> &[u8] {
        &self.text[usize::from(self.code_len) + usize::from(self.agent_len)..]
    }

    /// The visit as a journal record again, through the encoder the redirect's record goes
    /// through: what the tests read back with [`RawVisit::decode`].
    #[cfg(test)]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + self.text.len());
        JournalRecord {
            link_id: self.link_id,
            at: self.at,
            ip: self.ip,
            route: self.route,
            code: self.code(),
            agent: self.user_agent(),
            referer: self.referer(),
        }
        .encode_into(&mut out);
        out
    }

    /// A journal record back as a visit; `None` for bytes no version of the record's encoder
    /// wrote (the checksum passed, so only a newer format or a bug).
    pub fn decode(bytes: &[u8]) -> Option<RawVisit> {
        let mut r = Fields(bytes);
        if r.u8()? != RECORD_VERSION {
            return None;
        }
        let link_id = r.u64()?;
        let at = r.u64()?;
        let ip = match r.u8()? {
            4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(r.take(4)?).ok()?)),
            6 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(r.take(16)?).ok()?)),
            _ => return None,
        };
        let (tag, n) = (r.u8()?, r.u16()?);
        let route = match tag {
            0 => None,
            1 => Some(Route::Default),
            2 => Some(Route::Rule(n)),
            3 => Some(Route::Target(n)),
            4 => Some(Route::InAppPage),
            5 => Some(Route::CrawlerPreview),
            _ => return None,
        };
        let code_len = r.u16()?;
        let agent_len = r.u16()?;
        let text = r.0;
        if usize::from(code_len) + usize::from(agent_len) > text.len() {
            return None;
        }
        Some(RawVisit {
            link_id,
            at,
            ip,
            route,
            text: SmallVec::from_slice(text),
            code_len,
            agent_len,
        })
    }
}

/// The journal record's format version ([`RawVisit::encode`]).
const RECORD_VERSION: u8 = 1;

/// A record's fields, read in order.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// Counters of the visit pipeline, shared with `/metrics`.
#[derive(Clone, Debug)]
pub struct VisitMetrics {
    /// Visits appended to the journal.
    pub accepted: Counter,
    /// Visits the journal could not take (a full disk).
    pub dropped: Counter,
    /// Visits folded into the store.
    pub written: Counter,
    /// Visits of folds the store refused (retried from the journal, not lost).
    pub failed: Counter,
    pub batch_seconds: Histogram,
    /// Torn or corrupt journal stretches skipped.
    pub skipped: Counter,
}

impl Default for VisitMetrics {
    fn default() -> Self {
        Self {
            accepted: Counter::default(),
            dropped: Counter::default(),
            written: Counter::default(),
            failed: Counter::default(),
            // 0.5 ms .. ~1 s
            batch_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 12)),
            skipped: Counter::default(),
        }
    }
}

/// Why the recorder could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("visits.geo_db: {0}")]
    Geo(#[from] GeoError),
    #[error("the visit journal in {path}: {error}")]
    Journal { path: String, error: io::Error },
    #[error("the visit journal's position in the store: {0}")]
    Store(#[from] StoreError),
}

/// Levels of the journal the writer measures each interval, for `/metrics`.
#[derive(Debug, Default)]
pub struct JournalLevels {
    /// Bytes of the segment files.
    pub bytes: AtomicU64,
    /// Past `visits.journal_max`.
    pub over_max: AtomicBool,
}

/// The redirect's side of the visit journal, and the writer's handle.
pub struct Recorder {
    /// `None` when `visits.enabled` is off.
    journal: Option<Arc<Journal>>,
    /// Most visits the writer reads for one fold.
    batch: usize,
    clock: Arc<dyn Clock>,
    metrics: VisitMetrics,
    levels: Arc<JournalLevels>,
    stop: Arc<Notify>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The geolocation database, shared with the redirect's `country` rules.
    geo: Option<Arc<GeoDb>>,
    /// Told every batch once written (the review's visit trigger, webhooks' visit events).
    written: Hooks,
}

/// Called after each written batch with its visits (their ids assigned).
pub type WrittenHook = Arc<dyn Fn(&[NewVisit]) + Send + Sync>;

/// Who is told of written batches.
type Hooks = Arc<parking_lot::RwLock<Vec<WrittenHook>>>;

/// What the writer needs to turn raw visits into records.
struct Enricher {
    ua: UaParser,
    geo: Option<Arc<GeoDb>>,
    ip_mode: IpMode,
}

/// The visit writer's share of `memory.budget` (derived by the `memory` module): what it
/// reads from the journal and enriches for one fold, and the agents it has parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterBounds {
    /// Parsed user agents the writer remembers.
    pub user_agents: usize,
    /// Most enriched visits the writer gathers for one write.
    pub writer_visits: usize,
}

/// How the journal is kept, beside `[visits]`: where, and whether it is synced.
#[derive(Clone, Debug)]
pub struct JournalOptions<'a> {
    /// `<storage.path>/journal`: per instance, also in front of a shared PostgreSQL.
    pub dir: &'a Path,
    /// `storage.durability = "power"`: `fdatasync` the journal at every fold interval.
    pub sync: bool,
}

impl Recorder {
    /// [`Recorder::start_admitting`] with no say over which visits are recorded.
    pub fn start(
        config: &VisitsConfig,
        bounds: WriterBounds,
        journal: JournalOptions<'_>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Recorder>, StartError> {
        Self::start_admitting(config, bounds, journal, store, clock, None)
    }

    /// Opens the geolocation database (if configured) and the journal, reads where the store
    /// last folded it, and starts the writer (which replays the journal from there first).
    /// Must be called inside a tokio runtime.
    ///
    /// `admission` (the teams' plans) decides from the first batch on, the journal's replay
    /// at start included, which visits are recorded.
    pub fn start_admitting(
        config: &VisitsConfig,
        bounds: WriterBounds,
        journal: JournalOptions<'_>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        admitting: Option<Arc<dyn Admission>>,
    ) -> Result<Arc<Recorder>, StartError> {
        let metrics = VisitMetrics::default();
        let stop = Arc::new(Notify::new());
        let levels = Arc::new(JournalLevels::default());
        let batch = match bounds.writer_visits {
            0 => MAX_PENDING,
            n => n,
        };
        if !config.enabled {
            return Ok(Arc::new(Recorder {
                journal: None,
                batch,
                clock,
                metrics,
                levels,
                stop,
                writer: Mutex::new(None),
                geo: None,
                written: Hooks::default(),
            }));
        }
        let geo = match config.geo_db.trim() {
            "" => None,
            path => Some(Arc::new(GeoDb::open(std::path::Path::new(path))?)),
        };
        let enricher = Arc::new(Enricher {
            ua: UaParser::new(bounds.user_agents),
            geo: geo.clone(),
            ip_mode: config.ip,
        });
        let opened = Journal::open(journal.dir).map_err(|error| StartError::Journal {
            path: journal.dir.display().to_string(),
            error,
        })?;
        let opened = Arc::new(opened);
        let folded = store
            .journal_position(opened.id())?
            .and_then(|bytes| Position::decode(&bytes))
            .unwrap_or_default();
        let written = Hooks::default();
        let writer = tokio::spawn(write_loop(
            opened.clone(),
            folded,
            enricher,
            Writer {
                store,
                journal: opened.id().to_string(),
                metrics: metrics.clone(),
                written: written.clone(),
                delay: test_fold_delay(),
                admission: admitting,
            },
            Tick {
                stop: stop.clone(),
                batch,
                sync: journal.sync,
                max_bytes: config.journal_max.0,
                levels: levels.clone(),
                metrics: metrics.clone(),
            },
        ));
        Ok(Arc::new(Recorder {
            journal: Some(opened),
            batch,
            clock,
            metrics,
            levels,
            stop,
            writer: Mutex::new(Some(writer)),
            geo,
            written,
        }))
    }

    /// Tells `hook` of every batch written from now on.
    pub fn on_written(&self, hook: WrittenHook) {
        self.written.write().push(hook);
    }

    /// The geolocation database, when one is configured and visits are recorded.
    pub fn geo(&self) -> Option<Arc<GeoDb>> {
        self.geo.clone()
    }

    /// Appends a visit to the journal (never a wait on the writer, the store or another
    /// redirect); the redirect answers after it. The visit is dropped (counted, and logged
    /// once an episode) only when the journal cannot be written (a full disk). `route` says
    /// which destination served it, on a link with rules or targets.
    pub fn record(
        &self,
        link_id: u64,
        code: &str,
        ip: IpAddr,
        user_agent: Option<&HeaderValue>,
        referer: Option<&HeaderValue>,
        route: Option<Route>,
    ) {
        let Some(journal) = self.journal.as_ref() else {
            return;
        };
        let record = JournalRecord::new(
            link_id,
            code,
            self.clock.now(),
            ip,
            user_agent.map(HeaderValue::as_bytes),
            referer.map(HeaderValue::as_bytes),
            route,
        );
        let was_refusing = journal.refusing();
        match journal.append_with(|out| record.encode_into(out)) {
            Ok(_) => {
                self.metrics.accepted.inc();
                if was_refusing {
                    tracing::info!("the visit journal takes visits again");
                }
            }
            Err(e) => {
                self.metrics.dropped.inc();
                if !was_refusing {
                    tracing::error!(
                        "the visit journal cannot be written ({e}): visits are dropped and \
                         counted until it can"
                    );
                }
            }
        }
    }

    /// Is recording on?
    pub fn enabled(&self) -> bool {
        self.journal.is_some()
    }

    /// Has the journal's last append failed (a full disk)? `/healthz` says so.
    pub fn journal_failing(&self) -> bool {
        self.journal.as_ref().is_some_and(|j| j.failing())
    }

    /// The journal's levels, as the writer last measured them.
    pub fn journal_levels(&self) -> &JournalLevels {
        &self.levels
    }

    /// Visits journaled by this process and not yet folded.
    pub fn depth(&self) -> usize {
        usize::try_from(self.unwritten()).unwrap_or(usize::MAX)
    }

    /// Most visits read from the journal for one fold.
    pub fn capacity(&self) -> usize {
        self.batch
    }

    /// Visits journaled by this process and not yet folded (a replay after a restart folds
    /// visits this process did not journal, so this can read low then).
    pub fn unwritten(&self) -> u64 {
        self.metrics
            .accepted
            .get()
            .saturating_sub(self.metrics.written.get())
    }

    pub fn metrics(&self) -> &VisitMetrics {
        &self.metrics
    }

    /// Folds everything journaled, then returns (SIGTERM: "drain the visit queue"; called
    /// once the redirects have stopped).
    pub async fn shutdown(&self) {
        self.stop.notify_one();
        let writer = self.writer.lock().take();
        if let Some(writer) = writer {
            if let Err(e) = writer.await {
                tracing::error!("the visit writer failed: {e}");
            }
        }
    }
}

/// Test builds only: `VSHORTLINK_TEST_FOLD_DELAY_MS` slows every fold by that long, so that
/// the journal grows ahead of the store (the crash tests). Release builds have no such knob.
fn test_fold_delay() -> Duration {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("VSHORTLINK_TEST_FOLD_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return Duration::from_millis(ms);
    }
    Duration::ZERO
}

/// What the writer's loop keeps besides the journal and the store.
struct Tick {
    stop: Arc<Notify>,
    batch: usize,
    sync: bool,
    max_bytes: u64,
    levels: Arc<JournalLevels>,
    metrics: VisitMetrics,
}

/// A batch read from the journal: its visits enriched, and where the next read starts.
struct Batch {
    visits: Vec<NewVisit>,
    next: Position,
    /// The read stopped at the batch bound (more is waiting).
    full: bool,
}

/// Reads and enriches up to `max` visits from `from` (blocking: file reads and CPU work).
fn read_batch(
    journal: &Journal,
    enricher: &Enricher,
    from: Position,
    max: usize,
    metrics: &VisitMetrics,
) -> io::Result<Batch> {
    let mut raw = Vec::new();
    let mut undecodable = 0u64;
    let taken = journal.read(from, max, |payload| match RawVisit::decode(payload) {
        Some(visit) => raw.push(visit),
        None => undecodable += 1,
    })?;
    if undecodable > 0 {
        tracing::warn!("{undecodable} visit journal records of an unknown format skipped");
    }
    metrics.skipped.inc_by(taken.skipped.len() as u64);
    Ok(Batch {
        full: taken.records >= max,
        visits: enricher.enrich_all(raw),
        next: taken.next,
    })
}

async fn write_loop(
    journal: Arc<Journal>,
    mut folded: Position,
    enricher: Arc<Enricher>,
    writer: Writer,
    tick: Tick,
) {
    if folded != Position::default() || journal.end().segment > 1 {
        tracing::info!(
            segment = folded.segment,
            offset = folded.offset,
            "visit journal: folding what the store has not noted yet"
        );
    }
    let mut read_from = folded;
    // The fold under way: its task, and the position it notes.
    let mut writing: Option<(JoinHandle<bool>, Position)> = None;
    let mut stopping = false;
    loop {
        let started = tokio::time::Instant::now();
        let (j, e, m) = (journal.clone(), enricher.clone(), tick.metrics.clone());
        let (from, max) = (read_from, tick.batch);
        let batch =
            match tokio::task::spawn_blocking(move || read_batch(&j, &e, from, max, &m)).await {
                Ok(Ok(batch)) => Some(batch),
                Ok(Err(e)) => {
                    tracing::error!("the visit journal could not be read: {e}");
                    None
                }
                Err(e) => {
                    tracing::error!("the visit journal reader panicked: {e}");
                    None
                }
            };
        // The fold before this one must be noted before the next is written (positions
        // advance in order).
        let mut retry = false;
        if let Some((running, through)) = writing.take() {
            if running.await.unwrap_or(false) {
                folded = through;
                let j = journal.clone();
                match tokio::task::spawn_blocking(move || j.remove_before(through)).await {
                    Ok(Err(e)) => tracing::warn!("folded journal segments not removed: {e}"),
                    Err(e) => tracing::error!("the journal cleaner panicked: {e}"),
                    Ok(Ok(_)) => {}
                }
            } else {
                retry = true;
            }
        }
        // Whether the read stopped at the batch bound, and whether it took nothing.
        let (full, idle) = match batch {
            Some(batch) if !retry => {
                let idle = batch.next == read_from;
                if !idle {
                    writing = Some((
                        tokio::spawn(writer.clone().write(batch.visits, batch.next)),
                        batch.next,
                    ));
                    read_from = batch.next;
                }
                (batch.full, idle)
            }
            _ => {
                // Read again from what the store has noted, after a pause.
                read_from = folded;
                if !stopping {
                    tokio::select! {
                        () = tokio::time::sleep(RETRY) => {}
                        () = tick.stop.notified() => stopping = true,
                    }
                }
                if stopping {
                    // A store (or journal) that fails at shutdown: what is journaled stays
                    // for the next start, which folds it.
                    tracing::warn!(
                        "visits not folded at shutdown stay in the journal for the next start"
                    );
                    break;
                }
                continue;
            }
        };
        measure(&journal, &tick).await;
        if stopping && idle && writing.is_none() {
            break;
        }
        if !full && !stopping {
            tokio::select! {
                () = tokio::time::sleep_until(started + INTERVAL) => {}
                () = tick.stop.notified() => stopping = true,
            }
        }
    }
}

/// After each fold: `fdatasync` in `power` mode, the journal's size against its bound.
async fn measure(journal: &Arc<Journal>, tick: &Tick) {
    let j = journal.clone();
    let sync = tick.sync;
    let measured = tokio::task::spawn_blocking(move || {
        if sync {
            j.sync()?;
        }
        j.bytes()
    })
    .await;
    let bytes = match measured {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            tracing::error!("the visit journal could not be synced or measured: {e}");
            return;
        }
        Err(e) => {
            tracing::error!("the visit journal's sync panicked: {e}");
            return;
        }
    };
    tick.levels.bytes.store(bytes, Ordering::Relaxed);
    let over = bytes > tick.max_bytes;
    if over != tick.levels.over_max.swap(over, Ordering::Relaxed) {
        if over {
            tracing::warn!(
                bytes,
                max = tick.max_bytes,
                "the visit journal is past visits.journal_max: the store is not keeping up \
                 with visits (they are kept, and folded as it catches up)"
            );
        } else {
            tracing::info!(bytes, "the visit journal is back under visits.journal_max");
        }
    }
}

/// Decides, before a batch is written, which of its visits are recorded (the teams' plans'
/// `visits_per_month`): drops the others and returns what it counted, which is given back if
/// the write fails (the batch is then read again from the journal and counted again).
pub trait Admission: Send + Sync {
    fn admit(&self, visits: &mut Vec<NewVisit>) -> Vec<(String, u64)>;
    fn not_written(&self, taken: Vec<(String, u64)>);
}

impl Admission for crate::plans::Plans {
    fn admit(&self, visits: &mut Vec<NewVisit>) -> Vec<(String, u64)> {
        self.admit_visits(visits)
    }
    fn not_written(&self, taken: Vec<(String, u64)>) {
        self.visits_not_written(taken)
    }
}

/// What folds visits into the store: the store, the journal's name there, the metrics, who
/// is told of each batch.
#[derive(Clone)]
struct Writer {
    store: Arc<dyn Store>,
    journal: String,
    metrics: VisitMetrics,
    written: Hooks,
    /// The plans' say over which visits are recorded ([`Recorder::start_admitting`]).
    admission: Option<Arc<dyn Admission>>,
    /// Test builds only: a pause before each fold ([`test_fold_delay`]).
    delay: Duration,
}

impl Writer {
    /// Writes one batch with its counters and the journal position it reaches (one store
    /// call, one flush). True when the store took it.
    async fn write(self, mut visits: Vec<NewVisit>, through: Position) -> bool {
        let Writer {
            store,
            journal,
            metrics,
            written: hook,
            delay,
            admission,
        } = self;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let count = visits.len() as u64;
        let started = Instant::now();
        // The visits come back (with their ids) for whoever is told of the batch.
        let written = tokio::task::spawn_blocking(move || {
            let admission = admission.as_deref();
            let taken = admission.map(|a| a.admit(&mut visits)).unwrap_or_default();
            let result = store.record_journaled_visits(&mut visits, &journal, &through.encode());
            if let (Err(_), Some(admission)) = (&result, admission) {
                admission.not_written(taken);
            }
            (result, visits)
        })
        .await;
        metrics
            .batch_seconds
            .observe(started.elapsed().as_secs_f64());
        match written {
            Ok((Ok(()), visits)) => {
                metrics.written.inc_by(count);
                if !visits.is_empty() {
                    for tell in hook.read().iter() {
                        tell(&visits);
                    }
                }
                true
            }
            Ok((Err(e), _)) => {
                metrics.failed.inc_by(count);
                if matches!(e, StoreError::Full(_) | StoreError::Unavailable(_)) {
                    // A storage fault: the store logged it once for the episode; the fold is
                    // retried from the journal, and `vsl_visits_failed_total` counts tries.
                    tracing::debug!("{count} visits not folded yet: {e}");
                } else {
                    tracing::error!("{count} visits not folded yet (retried): {e}");
                }
                false
            }
            Err(e) => {
                metrics.failed.inc_by(count);
                tracing::error!("the visit writer panicked on {count} visits: {e}");
                false
            }
        }
    }
}

/// A client: its address and its raw user agent.
type ClientKey<'a> = (IpAddr, &'a [u8]);

/// One batch's memory of what it has enriched: each distinct user agent is cut, parsed and
/// allocated once, each referer once, each client's id hashed once and each address written
/// out once, and every visit of the batch shares the results. Keyed by the raw header bytes,
/// so that a repeat costs one hash and no UTF-8 check. (Before, every visit allocated a dozen
/// strings of its own, and the allocator was a quarter of the writer's time.)
#[derive(Default)]
struct Seen<'a> {
    /// User agent → its text and what it says.
    agents: FastMap<&'a [u8], (Arc<str>, Arc<Agent>)>,
    /// Referer → its text and its host.
    referers: FastMap<&'a [u8], (Arc<str>, Arc<str>)>,
    /// (address, user agent) → client id and hash.
    clients: FastMap<ClientKey<'a>, (Arc<str>, u64)>,
    /// Address → the address as stored (`visits.ip`).
    addresses: FastMap<IpAddr, Option<Arc<str>>>,
}

impl Enricher {
    /// Enriches a batch, in order.
    fn enrich_all(&self, raw: Vec<RawVisit>) -> Vec<NewVisit> {
        let mut seen = Seen::default();
        raw.iter().map(|v| self.enrich(v, &mut seen)).collect()
    }

    fn enrich<'a>(&self, raw: &'a RawVisit, seen: &mut Seen<'a>) -> NewVisit {
        let (ip, agent_bytes, referer_bytes) = (raw.ip, raw.user_agent(), raw.referer());
        let (user_agent, agent) = seen
            .agents
            .entry(agent_bytes)
            .or_insert_with(|| {
                let text: Arc<str> = header_text(agent_bytes).into();
                let agent = self.ua.parse(&text);
                (text, agent)
            })
            .clone();
        let (referer, referer_host) = seen
            .referers
            .entry(referer_bytes)
            .or_insert_with(|| {
                let text = header_text(referer_bytes);
                let host = referer_host(&text);
                (text.into(), host.into())
            })
            .clone();
        let (client_id, client_hash) = seen
            .clients
            .entry((ip, agent_bytes))
            .or_insert_with(|| {
                let (id, hash) = client::client_key(ip, &user_agent);
                (id.into(), hash)
            })
            .clone();
        let stored_ip = seen
            .addresses
            .entry(ip)
            .or_insert_with(|| client::stored_ip(ip, self.ip_mode).map(Into::into))
            .clone();
        let geo = self
            .geo
            .as_ref()
            .map_or_else(Geo::default, |db| db.lookup(ip));
        NewVisit {
            visit: Visit {
                id: 0,
                link_id: raw.link_id,
                code: String::from_utf8_lossy(raw.code()).into_owned(),
                at: raw.at,
                client_id,
                ip: stored_ip,
                user_agent,
                referer,
                browser: Arc::clone(&agent.browser),
                browser_version: Arc::clone(&agent.browser_version),
                os: Arc::clone(&agent.os),
                os_version: Arc::clone(&agent.os_version),
                device: agent.device.shared(),
                is_bot: agent.is_bot,
                country: geo.country.map(Into::into),
                region: geo.region.map(Into::into),
                city: geo.city.map(Into::into),
                isp: geo.isp.map(Into::into),
                route: raw.route.map(route_name),
            },
            client_hash,
            referer_host,
        }
    }
}

/// A route's name as a shared string: every visit of a plain link holds the same `default`.
fn route_name(route: Route) -> Arc<str> {
    static DEFAULT: std::sync::LazyLock<Arc<str>> =
        std::sync::LazyLock::new(|| Arc::from("default"));
    match route {
        Route::Default => Arc::clone(&DEFAULT),
        other => Arc::from(other.name()),
    }
}

/// A header's bytes (none: empty), cut to [`MAX_HEADER_BYTES`].
fn cut_header(value: Option<&[u8]>) -> &[u8] {
    let value = value.unwrap_or_default();
    &value[..value.len().min(MAX_HEADER_BYTES)]
}

/// A header as text (lossy for non-UTF-8 bytes), cut to a bounded length.
fn header_text(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    match text.char_indices().nth(MAX_HEADER_CHARS) {
        Some((cut, _)) => text[..cut].to_string(),
        None => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 \
        (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";

    fn raw(ip: u8, agent: &str, referer: Option<&str>) -> RawVisit {
        RawVisit::new(
            1,
            "abc",
            0,
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, ip)),
            Some(agent.as_bytes()),
            referer.map(str::as_bytes),
        )
    }

    #[test]
    fn a_batch_shares_what_its_visits_repeat() {
        let enricher = Enricher {
            ua: UaParser::new(16),
            geo: None,
            ip_mode: IpMode::Truncated,
        };
        let visits = enricher.enrich_all(vec![
            raw(1, CHROME, Some("https://News.example.org/a")),
            raw(1, CHROME, Some("https://News.example.org/a")),
            raw(2, CHROME, None),
            raw(2, "curl/8.5.0", Some("not a url")),
        ]);
        let [a, b, c, d] = &visits[..] else {
            panic!("four visits in, {} out", visits.len());
        };
        // One allocation per distinct value, held by every visit that has it.
        assert!(Arc::ptr_eq(&a.visit.user_agent, &c.visit.user_agent));
        assert!(Arc::ptr_eq(&a.visit.browser, &c.visit.browser));
        assert!(Arc::ptr_eq(&a.visit.referer, &b.visit.referer));
        assert!(Arc::ptr_eq(&a.visit.client_id, &b.visit.client_id));
        let (Some(a_ip), Some(b_ip)) = (&a.visit.ip, &b.visit.ip) else {
            panic!("truncated addresses are stored");
        };
        assert!(Arc::ptr_eq(a_ip, b_ip));
        // ...and what differs, differs.
        assert_ne!(a.visit.client_id, c.visit.client_id);
        assert_eq!(&*a.visit.browser, "Chrome");
        assert_eq!(&*d.visit.browser, "curl");
        assert_eq!(&*a.visit.device, "desktop");
        assert_eq!(&*a.referer_host, "news.example.org");
        assert_eq!(&*c.visit.referer, "");
        assert_eq!(&*c.referer_host, "");
        assert_eq!(&*d.referer_host, "");
        assert_eq!(a.client_hash, b.client_hash);
        assert_eq!(a.visit.ip.as_deref(), Some("10.0.0.0"));
        assert_eq!(d.visit.code, "abc");
    }

    #[test]
    fn a_raw_visit_gives_back_its_code_and_headers() {
        let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let v = RawVisit::new(
            7,
            "abc123",
            5,
            local,
            Some(CHROME.as_bytes()),
            Some(b"https://a/"),
        );
        assert_eq!((v.link_id, v.at, v.ip), (7, 5, local));
        assert_eq!(v.code(), b"abc123");
        assert_eq!(v.user_agent(), CHROME.as_bytes());
        assert_eq!(v.referer(), b"https://a/");
        assert!(!v.text.spilled(), "a browser's visit fits its slot");
        let v = RawVisit::new(7, "abc123", 5, local, None, None);
        assert_eq!((v.user_agent(), v.referer()), (&b""[..], &b""[..]));
        // A header longer than the writer keeps is cut, to the same text the writer keeps.
        let long = "é".repeat(3000);
        let v = RawVisit::new(
            7,
            "c",
            5,
            local,
            Some(long.as_bytes()),
            Some(long.as_bytes()),
        );
        assert_eq!(v.user_agent().len(), MAX_HEADER_BYTES);
        assert_eq!(v.referer().len(), MAX_HEADER_BYTES);
        assert_eq!(header_text(v.user_agent()), header_text(long.as_bytes()));
        assert_eq!(v.code(), b"c");
    }

    #[test]
    fn a_visit_comes_back_from_its_journal_record() {
        let v6: IpAddr = "2001:db8::7".parse().expect("address");
        for (ip, route) in [
            (IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)), None),
            (v6, Some(Route::Target(3))),
            (v6, Some(Route::Rule(65535))),
            (v6, Some(Route::CrawlerPreview)),
        ] {
            let mut v = RawVisit::new(9, "abc", 1234, ip, Some(CHROME.as_bytes()), Some(b"r"));
            v.route = route;
            let back = RawVisit::decode(&v.encode()).expect("decodes");
            assert_eq!(
                (back.link_id, back.at, back.ip, back.route),
                (9, 1234, ip, route)
            );
            assert_eq!(back.code(), b"abc");
            assert_eq!(back.user_agent(), CHROME.as_bytes());
            assert_eq!(back.referer(), b"r");
        }
        let record = raw(1, CHROME, None).encode();
        assert!(RawVisit::decode(&record[..20]).is_none(), "cut short");
        assert!(RawVisit::decode(&[2u8; 60]).is_none(), "another version");
    }

    #[test]
    fn long_headers_are_cut_at_a_character_boundary() {
        let long = "é".repeat(2000);
        assert_eq!(
            header_text(long.as_bytes()).chars().count(),
            MAX_HEADER_CHARS
        );
        assert_eq!(header_text(b""), "");
    }
}
