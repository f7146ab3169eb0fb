//! The visit queue and its writer (see docs/architecture.md, "Visits and statistics, inside").
//!
//! The redirect handler calls [`Recorder::record`], which stamps the visit, copies what it
//! needs of the request into a fixed-size record ([`RawVisit`]) and offers it to a bounded
//! channel without waiting: when the channel is full the visit is dropped and counted, so
//! recording never slows or fails a redirect. One writer task takes whatever has queued
//! (up to [`BATCH`] visits, gathering for [`GATHER`] between partial batches) and enriches it
//! on a blocking thread (user agent, geolocation, client id, stored address). Once per
//! [`INTERVAL`] (or sooner when [`MAX_PENDING`] visits are waiting) it hands everything
//! enriched to the store in one call, which writes the visits in large blocks, each dirty
//! counter once, and flushes once. While a write runs, the queue keeps draining into the next
//! write, so a slow write does not make the queue overflow.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use smallvec::SmallVec;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::client;
use super::geo::{Geo, GeoDb, GeoError};
use super::tally::referer_host;
use super::ua::{Agent, UaParser};
use crate::clock::Clock;
use crate::config::{IpMode, VisitsConfig};
use crate::model::Route;
use crate::model::{Millis, NewVisit, StoreError, Visit};
use crate::store::Store;

/// The writer's batch maps, keyed by header bytes: a fast seeded hash.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Most visits the writer takes from the queue (and enriches) at once.
pub const BATCH: usize = 4096;
/// How long the writer lets a partial batch gather before taking it from the queue, so that
/// light traffic is enriched a few dozen visits at a time rather than one by one.
pub const GATHER: Duration = Duration::from_millis(25);
/// How often enriched visits are written, with their counters, and flushed. Each dirty
/// counter is written once per interval however many visits it gained, which is what lets one
/// writer keep up with every redirect two cores can answer. It is also what a crash can lose:
/// the visits of the interval not yet written. Visits are acknowledged to no one, so the
/// delay is invisible except to a statistic read within the second.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Most enriched visits held for one write without a configured bound (`memory.budget`
/// derives one: `writer_visits`): under a load that fills this before the interval ends,
/// writes come sooner, so the memory held stays bounded (about 400 bytes a visit; at most
/// twice this, one write's worth in flight and one gathering).
pub const MAX_PENDING: usize = 65_536;
/// Longest user agent or referer kept; longer ones are cut (at a character boundary).
const MAX_HEADER_CHARS: usize = 1024;
/// Bytes of a user agent or referer the redirect copies: enough for [`MAX_HEADER_CHARS`]
/// characters of any width, so the cut the writer makes is the same as without this one.
const MAX_HEADER_BYTES: usize = 4 * MAX_HEADER_CHARS;
/// Bytes of a visit's code, user agent and referer held in its queue slot itself. A browser's
/// user agent is 100 to 250 bytes and a referer usually less; longer ones go to the heap.
const INLINE_BYTES: usize = 384;
/// Bytes of a queue slot: a visit whose code and headers fit `INLINE_BYTES` takes this
/// and no more; a longer one also takes its text's length ([`RawVisit::queued_bytes`]).
pub const SLOT_BYTES: usize = std::mem::size_of::<RawVisit>();

/// A visit as the redirect saw it; enriched later by the writer.
///
/// A fixed-size record: the code, user agent and referer are copied into the record itself,
/// so the redirect allocates nothing for it (before, each visit was three heap allocations
/// made on a runtime worker and freed on the writer's thread). Copied rather than shared: a
/// `HeaderValue` clone would keep the connection's whole read buffer alive while the visit
/// waits in the queue.
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

impl RawVisit {
    /// A missing header and an empty one are the same to the writer. Headers are cut at
    /// `MAX_HEADER_BYTES`.
    pub fn new(
        link_id: u64,
        code: &str,
        at: Millis,
        ip: IpAddr,
        user_agent: Option<&[u8]>,
        referer: Option<&[u8]>,
    ) -> Self {
        // Codes are at most 16 characters (their syntax is checked before a lookup); the cut
        // only keeps the length within its field.
        let code = &code.as_bytes()[..code.len().min(usize::from(u16::MAX))];
        let (agent, referer) = (cut_header(user_agent), cut_header(referer));
        let mut text = SmallVec::with_capacity(code.len() + agent.len() + referer.len());
        text.extend_from_slice(code);
        text.extend_from_slice(agent);
        text.extend_from_slice(referer);
        RawVisit {
            link_id,
            at,
            ip,
            route: None,
            text,
            // Both within u16 by the cuts above.
            code_len: code.len() as u16,
            agent_len: agent.len() as u16,
        }
    }

    /// What the visit holds while queued: its slot, and its text when that spilled to the
    /// heap.
    pub fn queued_bytes(&self) -> usize {
        SLOT_BYTES
            + if self.text.spilled() {
                self.text.capacity()
            } else {
                0
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
}

/// Counters of the visit pipeline, shared with `/metrics`.
#[derive(Clone, Debug)]
pub struct VisitMetrics {
    pub accepted: Counter,
    pub dropped: Counter,
    pub written: Counter,
    pub failed: Counter,
    pub batch_seconds: Histogram,
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
        }
    }
}

/// The redirect's side of the visit queue.
pub struct Recorder {
    /// `None` when `visits.enabled` is off.
    sender: Option<mpsc::Sender<RawVisit>>,
    capacity: usize,
    /// Bytes of the visits queued ([`RawVisit::queued_bytes`]), shared with the writer, which
    /// subtracts what it takes; a visit that would take it past `max_bytes` is dropped as a
    /// full queue drops it. An atomic, not a lock: the redirect adds, checks, and takes back
    /// what it added if the visit does not go in.
    queued_bytes: Arc<AtomicUsize>,
    max_bytes: usize,
    clock: Arc<dyn Clock>,
    metrics: VisitMetrics,
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

impl Recorder {
    /// Opens the geolocation database (if configured) and starts the writer task. Must be
    /// called inside a tokio runtime.
    pub fn start(
        config: &VisitsConfig,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Recorder>, GeoError> {
        let metrics = VisitMetrics::default();
        let stop = Arc::new(Notify::new());
        if !config.enabled {
            return Ok(Arc::new(Recorder {
                sender: None,
                capacity: 0,
                queued_bytes: Arc::default(),
                max_bytes: 0,
                clock,
                metrics,
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
            ua: UaParser::new(config.bounds.user_agents),
            geo: geo.clone(),
            ip_mode: config.ip,
        });
        // Set when the configuration is loaded (`memory.budget`, or `visits.queue`).
        let capacity = config.bounds.entries.max(1);
        let (sender, receiver) = mpsc::channel(capacity);
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let written = Hooks::default();
        let writer = tokio::spawn(write_loop(
            receiver,
            queued_bytes.clone(),
            enricher,
            Writer {
                store,
                metrics: metrics.clone(),
                written: written.clone(),
            },
            stop.clone(),
            match config.bounds.writer_visits {
                0 => MAX_PENDING,
                n => n,
            },
        ));
        Ok(Arc::new(Recorder {
            sender: Some(sender),
            capacity,
            queued_bytes,
            max_bytes: config.bounds.bytes,
            clock,
            metrics,
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

    /// Queues a visit without waiting; drops (and counts) it when the queue is full.
    /// `route` says which destination served it, on a link with rules or targets.
    pub fn record(
        &self,
        link_id: u64,
        code: &str,
        ip: IpAddr,
        user_agent: Option<&HeaderValue>,
        referer: Option<&HeaderValue>,
        route: Option<Route>,
    ) {
        let Some(sender) = &self.sender else {
            return;
        };
        let mut visit = RawVisit::new(
            link_id,
            code,
            self.clock.now(),
            ip,
            user_agent.map(HeaderValue::as_bytes),
            referer.map(HeaderValue::as_bytes),
        );
        visit.route = route;
        let bytes = visit.queued_bytes();
        if self.queued_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes > self.max_bytes {
            self.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.metrics.dropped.inc();
            return;
        }
        match sender.try_send(visit) {
            Ok(()) => self.metrics.accepted.inc(),
            Err(_) => {
                self.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.metrics.dropped.inc()
            }
        };
    }

    /// Bytes of the visits in the queue ([`RawVisit::queued_bytes`]).
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Relaxed)
    }

    /// Is recording on?
    pub fn enabled(&self) -> bool {
        self.sender.is_some()
    }

    /// Visits waiting in the queue.
    pub fn depth(&self) -> usize {
        self.sender
            .as_ref()
            .map_or(0, |s| self.capacity.saturating_sub(s.capacity()))
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Visits taken but not yet written (or failed): in the queue, being enriched, waiting
    /// for the next write or in it.
    pub fn unwritten(&self) -> u64 {
        self.metrics
            .accepted
            .get()
            .saturating_sub(self.metrics.written.get())
            .saturating_sub(self.metrics.failed.get())
    }

    pub fn metrics(&self) -> &VisitMetrics {
        &self.metrics
    }

    /// Stops taking visits, writes everything queued, and returns when the writer is done
    /// (SIGTERM: "drain the visit queue").
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

async fn write_loop(
    mut receiver: mpsc::Receiver<RawVisit>,
    queued_bytes: Arc<AtomicUsize>,
    enricher: Arc<Enricher>,
    writer: Writer,
    stop: Arc<Notify>,
    max_pending: usize,
) {
    let mut batch = Vec::with_capacity(BATCH);
    // Enriched visits waiting for the next write.
    let mut pending: Vec<NewVisit> = Vec::new();
    let mut stopping = false;
    let mut next_write = tokio::time::Instant::now() + INTERVAL;
    // The write under way, if any.
    let mut writing: Option<JoinHandle<()>> = None;
    loop {
        let mut closed = false;
        if stopping {
            closed = receiver.recv_many(&mut batch, BATCH).await == 0;
        } else {
            tokio::select! {
                n = receiver.recv_many(&mut batch, BATCH) => closed = n == 0,
                () = stop.notified() => {
                    // No new visits from here on; what is queued is still written.
                    receiver.close();
                    stopping = true;
                }
                () = tokio::time::sleep_until(next_write), if !pending.is_empty() => {}
            }
        }
        let received = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
        let full = received.len() == BATCH;
        let taken: usize = received.iter().map(RawVisit::queued_bytes).sum();
        queued_bytes.fetch_sub(taken, Ordering::Relaxed);
        if !received.is_empty() {
            // Enrichment is CPU work (user agents, hashes, geolocation): off the runtime's
            // workers, so that it never delays a redirect.
            let enricher = enricher.clone();
            match tokio::task::spawn_blocking(move || enricher.enrich_all(received)).await {
                Ok(mut enriched) => {
                    // Grown by hand, not by `append`'s doubling: a pending list just past half
                    // the bound would otherwise take twice the bound's slots, and the budget
                    // counts `max_pending` visits (`memory::shares::WRITER_BATCHES`).
                    let needed = pending.len() + enriched.len();
                    if needed > pending.capacity() {
                        let target = needed.max((pending.len() * 2).min(max_pending));
                        pending.reserve_exact(target - pending.len());
                    }
                    pending.append(&mut enriched);
                }
                Err(e) => tracing::error!("the visit enricher panicked: {e}"),
            }
        }
        let now = tokio::time::Instant::now();
        let due = now >= next_write || closed || pending.len() >= max_pending;
        if due && !pending.is_empty() {
            // One write at a time (ids and counters are assigned in write order), but the
            // queue keeps draining while it runs, so a slow write delays visits instead of
            // dropping them. Only when a whole second more is waiting does the loop wait for it.
            if let Some(running) = writing.take() {
                if running.is_finished() || closed || pending.len() >= max_pending {
                    finish(running).await;
                } else {
                    writing = Some(running);
                }
            }
            if writing.is_none() {
                let visits = std::mem::take(&mut pending);
                writing = Some(tokio::spawn(writer.clone().write(visits)));
                next_write = now + INTERVAL;
            } else {
                // Look again soon rather than spin on a deadline already past.
                next_write = now + GATHER;
            }
        } else if pending.is_empty() && now >= next_write {
            next_write = now + INTERVAL;
        }
        if closed {
            if let Some(running) = writing.take() {
                finish(running).await;
            }
            if !pending.is_empty() {
                writer.clone().write(std::mem::take(&mut pending)).await;
            }
            break;
        }
        if !full && !stopping {
            // Let a partial batch gather rather than enrich a handful of visits at a time.
            tokio::select! {
                () = tokio::time::sleep(GATHER) => {}
                () = stop.notified() => {
                    receiver.close();
                    stopping = true;
                }
            }
        }
    }
}

/// Waits for a write started earlier.
async fn finish(running: JoinHandle<()>) {
    if let Err(e) = running.await {
        tracing::error!("the visit writer's write task failed: {e}");
    }
}

/// What writes the visits: the store, the metrics, who is told of each batch.
#[derive(Clone)]
struct Writer {
    store: Arc<dyn Store>,
    metrics: VisitMetrics,
    written: Hooks,
}

impl Writer {
    /// Writes one interval's visits with their counters (one store call, one flush).
    async fn write(self, mut visits: Vec<NewVisit>) {
        let Writer {
            store,
            metrics,
            written: hook,
        } = self;
        let count = visits.len() as u64;
        let started = Instant::now();
        // The visits come back (with their ids) for whoever is told of the batch.
        let written = tokio::task::spawn_blocking(move || {
            let result = store.record_visits(&mut visits);
            (result, visits)
        })
        .await;
        metrics
            .batch_seconds
            .observe(started.elapsed().as_secs_f64());
        match written {
            Ok((Ok(()), visits)) => {
                metrics.written.inc_by(count);
                for tell in hook.read().iter() {
                    tell(&visits);
                }
            }
            Ok((Err(e), _)) => {
                metrics.failed.inc_by(count);
                if matches!(e, StoreError::Full(_) | StoreError::Unavailable(_)) {
                    // A storage fault: the store logged it once for the episode; every write
                    // fails until the store is reopened, and `vsl_visits_failed_total` counts
                    // them.
                    tracing::debug!("{count} visits could not be written: {e}");
                } else {
                    tracing::error!("{count} visits could not be written: {e}");
                }
            }
            Err(e) => {
                metrics.failed.inc_by(count);
                tracing::error!("the visit writer panicked on {count} visits: {e}");
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
    fn long_headers_are_cut_at_a_character_boundary() {
        let long = "é".repeat(2000);
        assert_eq!(
            header_text(long.as_bytes()).chars().count(),
            MAX_HEADER_CHARS
        );
        assert_eq!(header_text(b""), "");
    }
}
