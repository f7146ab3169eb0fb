//! Webhooks: events told by the services go through a persisted outbox (the store's
//! [`OutboxStore`](crate::store::OutboxStore)) to each `[[webhooks]]` endpoint that wants them,
//! signed, retried with backoff for 24 hours, in order per link, and never on the redirect's or
//! a create's path.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the service: the queue events are told into, the writer that fans them out into the outbox, the sender that drains it, the counts `/metrics` shows |
//! | `events.rs` | the events and the JSON each POST carries |
//! | `signing.rs` | the signature, the retry schedule |
//!
//! Telling is a `try_send` into a bounded queue (a full queue drops the event and counts it);
//! the writer gathers what arrived during its last write into one durable `enqueue`; visits
//! are gathered for a second and go as one event. The sender takes due items (leased, so that
//! instances sharing PostgreSQL never send one twice at once), POSTs them side by side, and
//! settles each: delivered, retried later, or given up after a day.

pub mod events;
pub mod signing;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::Value;
use tokio::sync::{mpsc, Notify};

use self::events::{Event, EventKind};
use crate::clock::Clock;
use crate::config::WebhookConfig;
use crate::model::outbox::{
    DeliveryAttempt, DeliveryOutcome, DeliveryRecord, NewOutboxItem, OutboxItem,
};
use crate::model::Millis;
use crate::store::Store;

/// POSTs in flight at most (and the most items one round takes).
const BATCH: usize = 32;
/// How long a taken item is ours: longer than a POST may take.
const LEASE_MS: Millis = 60_000;
/// A POST that has not answered by then failed.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often visits go out, at most, per webhook.
const VISITS_EVERY: Duration = Duration::from_secs(1);
/// How long shutdown waits for told events to reach the outbox.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// How long the sender rests when nothing is due (a new event wakes it sooner).
const IDLE: Duration = Duration::from_millis(500);

/// A label of the deliveries counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// Deliveries by outcome, and the events a full queue dropped, for `/metrics`.
#[derive(Default)]
pub struct Counts {
    pub deliveries: Family<OutcomeLabel, Counter>,
    pub dropped: Counter,
}

impl Counts {
    fn count(&self, outcome: DeliveryOutcome) {
        self.deliveries
            .get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            })
            .inc();
    }
}

/// How much the service holds in memory before the outbox ([`crate::memory`] derives them).
#[derive(Clone, Copy, Debug)]
pub struct QueueBounds {
    /// Events waiting for the outbox writer.
    pub events: usize,
    /// Visits waiting to be gathered into one event.
    pub visits: usize,
}

/// The webhooks service.
pub struct Webhooks {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    hooks: Vec<WebhookConfig>,
    queue: mpsc::Sender<Event>,
    /// Visits told since the last visit event.
    visits: Mutex<Vec<Value>>,
    /// Most visits held in `visits`.
    held_visits: usize,
    wake: Notify,
    client: reqwest::Client,
    pub counts: Counts,
    /// Events told but not yet in the outbox (shutdown waits for none).
    unwritten: AtomicU64,
}

impl Webhooks {
    /// The service and the receiving end of its queue (for [`Webhooks::start`]). With no
    /// webhook configured, telling does nothing.
    /// `bounds` are `memory.budget`'s: events waiting for the outbox writer and visits
    /// waiting to be gathered; past either, what comes is dropped (and counted).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        hooks: Vec<WebhookConfig>,
        bounds: QueueBounds,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Event>), reqwest::Error> {
        let (queue, received) = mpsc::channel(bounds.events.max(1));
        let client = reqwest::Client::builder()
            .timeout(POST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!(
                "vshortlink/",
                env!("CARGO_PKG_VERSION"),
                " webhooks"
            ))
            .build()?;
        Ok((
            Arc::new(Self {
                store,
                clock,
                hooks,
                queue,
                visits: Mutex::new(Vec::new()),
                held_visits: bounds.visits,
                wake: Notify::new(),
                client,
                counts: Counts::default(),
                unwritten: AtomicU64::new(0),
            }),
            received,
        ))
    }

    /// Whether any webhook is configured.
    pub fn enabled(&self) -> bool {
        !self.hooks.is_empty()
    }

    /// Whether some webhook wants `kind` (so that callers skip building events nobody wants).
    pub fn wants(&self, kind: EventKind) -> bool {
        self.hooks.iter().any(|h| h.wants(kind))
    }

    /// Tells an event; never waits. A full queue drops it (counted).
    pub fn tell(&self, event: Event) {
        if !self.wants(event.kind) {
            return;
        }
        self.unwritten.fetch_add(1, Ordering::AcqRel);
        if self.queue.try_send(event).is_err() {
            self.unwritten.fetch_sub(1, Ordering::AcqRel);
            self.counts.dropped.inc();
        }
    }

    /// Tells visits; they go out gathered, at most once a second.
    pub fn tell_visits(&self, visits: impl IntoIterator<Item = Value>) {
        if self.wants(EventKind::Visit) {
            let mut held = self.visits.lock();
            let room = self.held_visits.saturating_sub(held.len());
            let before = held.len();
            let mut visits = visits.into_iter();
            held.extend(visits.by_ref().take(room));
            if held.len() - before == room && visits.next().is_some() {
                self.counts.dropped.inc();
            }
        }
    }

    /// Starts the writer, the visit gatherer and the sender.
    pub fn start(self: &Arc<Self>, received: mpsc::Receiver<Event>) {
        if !self.enabled() {
            return;
        }
        tokio::spawn(self.clone().write(received));
        tokio::spawn(self.clone().gather_visits());
        tokio::spawn(self.clone().send());
    }

    /// The configured webhooks.
    pub fn hooks(&self) -> &[WebhookConfig] {
        &self.hooks
    }

    /// The last failed and given-up attempts, newest first (the dashboard).
    /// The last failed deliveries, each under its webhook's [`Webhooks::label`].
    pub fn failures(&self, limit: usize) -> crate::model::StoreResult<Vec<DeliveryRecord>> {
        let mut failures = self.store.deliveries(None, true, limit)?;
        for failure in &mut failures {
            failure.webhook = self.label(&failure.webhook);
        }
        Ok(failures)
    }

    /// What the dashboard and the log call a webhook: its configured `name`, or, for a
    /// webhook without one (its items are kept under its URL), the URL's host and port only.
    /// A receiver's path and query are often its secret (Slack's
    /// `/services/T000/B000/TOKEN`), so they are never shown.
    pub fn label(&self, stored: &str) -> String {
        let named = self
            .hooks
            .iter()
            .any(|h| h.name == stored && h.name != h.url);
        if named {
            return stored.to_string();
        }
        receiver_host(stored).unwrap_or_else(|| stored.to_string())
    }

    /// The outbox items an event becomes: one for each webhook that wants it.
    fn items(&self, event: &Event) -> Vec<NewOutboxItem> {
        let body = event.body();
        self.hooks
            .iter()
            .filter(|h| h.wants(event.kind))
            .map(|h| NewOutboxItem {
                webhook: h.name.clone(),
                event: event.kind.as_str().to_string(),
                key: event.key.clone(),
                body: body.clone(),
                created_at: event.at,
            })
            .collect()
    }

    /// Fans events out into the outbox: what arrived during one write goes in the next, as
    /// one durable write.
    async fn write(self: Arc<Self>, mut received: mpsc::Receiver<Event>) {
        let mut events = Vec::with_capacity(256);
        while received.recv_many(&mut events, 1024).await > 0 {
            let told = events.len() as u64;
            let items: Vec<NewOutboxItem> = events.drain(..).flat_map(|e| self.items(&e)).collect();
            let service = self.clone();
            match tokio::task::spawn_blocking(move || service.store.enqueue(&items)).await {
                Ok(Ok(_)) => self.wake.notify_one(),
                Ok(Err(e)) => tracing::error!(error = %e, "webhook events could not be queued"),
                Err(e) => tracing::error!(error = %e, "the webhook writer failed"),
            }
            self.unwritten.fetch_sub(told, Ordering::AcqRel);
        }
    }

    /// At shutdown, once the visit writer is done: the gathered visits and every event told
    /// go into the outbox before the store closes (what is there is sent after the restart).
    pub async fn shutdown(&self) {
        if !self.enabled() {
            return;
        }
        self.flush_visits().await;
        let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
        while self.unwritten.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The visits gathered since the last visit event, as one event.
    async fn flush_visits(&self) {
        let visits = std::mem::take(&mut *self.visits.lock());
        if visits.is_empty() {
            return;
        }
        let event = Event {
            kind: EventKind::Visit,
            key: "visits".into(),
            at: self.clock.now(),
            data: serde_json::json!({ "visits": visits }),
        };
        self.unwritten.fetch_add(1, Ordering::AcqRel);
        if self.queue.send(event).await.is_err() {
            self.unwritten.fetch_sub(1, Ordering::AcqRel);
        }
    }

    async fn gather_visits(self: Arc<Self>) {
        let mut every = tokio::time::interval(VISITS_EVERY);
        loop {
            every.tick().await;
            self.flush_visits().await;
        }
    }

    /// Drains the outbox: due items, POSTed side by side, each settled.
    async fn send(self: Arc<Self>) {
        // POSTs in flight hold a slot each, and the loop takes more while some run: a receiver
        // that hangs holds its own slots, not the other webhooks' deliveries. Items in flight
        // are leased, so no round takes them again.
        let slots = Arc::new(tokio::sync::Semaphore::new(BATCH));
        // Items being sent: a lease that ends mid-POST (the clock jumped past it) lets the
        // store hand an item out again, and this process must not send it twice at once.
        let in_flight: Arc<Mutex<std::collections::HashSet<u64>>> = Arc::default();
        loop {
            let Ok(first) = slots.clone().acquire_owned().await else {
                return;
            };
            let free = slots.available_permits() + 1;
            let service = self.clone();
            let now = self.clock.now();
            let taken =
                tokio::task::spawn_blocking(move || service.store.take_due(now, LEASE_MS, free))
                    .await;
            let items = match taken {
                Ok(Ok(items)) => items,
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "the webhook outbox could not be read");
                    Vec::new()
                }
                Err(_) => return,
            };
            if items.is_empty() {
                drop(first);
                let _ = tokio::time::timeout(IDLE, self.wake.notified()).await;
                continue;
            }
            let mut first = Some(first);
            for item in items {
                if !in_flight.lock().insert(item.id) {
                    continue;
                }
                let slot = match first.take() {
                    Some(slot) => slot,
                    None => match slots.clone().try_acquire_owned() {
                        Ok(slot) => slot,
                        // Taken with the free count: cannot run out.
                        Err(_) => break,
                    },
                };
                let service = self.clone();
                let in_flight = in_flight.clone();
                tokio::spawn(async move {
                    let id = item.id;
                    service.deliver(item).await;
                    in_flight.lock().remove(&id);
                    drop(slot);
                });
            }
        }
    }

    /// One attempt at one item, settled in the store.
    async fn deliver(self: Arc<Self>, item: OutboxItem) {
        let hook = self.hooks.iter().find(|h| h.name == item.webhook).cloned();
        let attempt = match &hook {
            None => DeliveryAttempt {
                at: self.clock.now(),
                status: None,
                error: Some("the webhook is no longer configured".into()),
            },
            Some(hook) => self.post(hook, &item).await,
        };
        let ok = attempt.status.is_some_and(|s| (200..300).contains(&s));
        let attempts = item.attempts.saturating_add(1);
        let next = if hook.is_some() && !ok {
            signing::next_attempt(item.created_at, attempts, attempt.at, rand::random::<f64>())
        } else {
            None
        };
        let service = self.clone();
        let settled = tokio::task::spawn_blocking(move || {
            let store = &service.store;
            if ok {
                service.counts.count(DeliveryOutcome::Delivered);
                store.delivered(item.id, &attempt)
            } else if let Some(next_at) = next {
                service.counts.count(DeliveryOutcome::Failed);
                store.retry(item.id, &attempt, next_at)
            } else {
                service.counts.count(DeliveryOutcome::GaveUp);
                tracing::warn!(webhook = %service.label(&item.webhook), event = %item.event, id = item.id, "a webhook delivery was given up");
                store.give_up(item.id, &attempt)
            }
        })
        .await;
        if let Ok(Err(e)) = settled {
            tracing::error!(error = %e, "a webhook delivery could not be settled");
        }
    }

    async fn post(&self, hook: &WebhookConfig, item: &OutboxItem) -> DeliveryAttempt {
        let answer = self
            .client
            .post(&hook.url)
            .header("content-type", "application/json")
            .header("x-vsl-event", &item.event)
            .header("x-vsl-delivery", item.id.to_string())
            .header(
                "x-vsl-signature",
                signing::signature(&hook.secret, &item.body),
            )
            .body(item.body.clone())
            .send()
            .await;
        let at = self.clock.now();
        match answer {
            Ok(response) => DeliveryAttempt {
                at,
                status: Some(response.status().as_u16()),
                error: None,
            },
            Err(e) => DeliveryAttempt {
                at,
                status: None,
                error: Some(describe(&e)),
            },
        }
    }
}

/// The host (and a port that is not the scheme's) of a URL, or `None` when `text` is no URL.
fn receiver_host(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    })
}

/// A failed request in a few words (reqwest's chain, without the URL's query).
fn describe(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(cause) = source {
        detail = cause.to_string();
        source = cause.source();
    }
    if detail.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::receiver_host;

    #[test]
    fn a_receiver_is_shown_by_its_host_only() {
        assert_eq!(
            receiver_host("https://hooks.slack.com/services/T000/B000/SECRET?x=1").as_deref(),
            Some("hooks.slack.com")
        );
        assert_eq!(
            receiver_host("http://127.0.0.1:9000/hook/SECRET").as_deref(),
            Some("127.0.0.1:9000")
        );
        assert_eq!(receiver_host("ops"), None);
    }
}
