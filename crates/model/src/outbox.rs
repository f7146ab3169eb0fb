//! The webhook outbox, as stored: an event waiting to be delivered to one webhook, what each
//! delivery attempt found, and the log of attempts the dashboard shows. No I/O: the service
//! that fills the outbox, signs the bodies and POSTs them lives above the store.
//!
//! Ordering: every item carries a key (`link:<id>` for a link's events); the store hands out
//! the items of one (webhook, key) strictly in id order, one at a time, so that a link's
//! `created` never reaches a webhook after its `deleted`, whatever the retries in between.

use serde::{Deserialize, Serialize};

use super::time::Millis;

/// Log records kept per webhook; older ones go as new ones are written, so the log of a
/// webhook that fails for days stays a few hundred kilobytes.
pub const DELIVERY_LOG_KEEP: usize = 1000;

/// Longest error text kept with an item or a log record, in bytes: a failing endpoint's answer
/// can be large, and only its start helps whoever reads the dashboard.
pub const MAX_ERROR_LEN: usize = 500;

/// An event for one webhook, as the service hands it to `OutboxStore::enqueue` (in the store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOutboxItem {
    /// The webhook's name (the key its configuration is found by).
    pub webhook: String,
    /// `link.created`, `visit`, …
    pub event: String,
    /// The ordering key: items of one webhook and key go out strictly in id order.
    pub key: String,
    /// The JSON body, final: the bytes that are signed and sent.
    pub body: Vec<u8>,
    /// When the event happened; the item is due at once.
    pub created_at: Millis,
}

/// An event waiting in the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxItem {
    /// Assigned by the store, increasing.
    pub id: u64,
    pub webhook: String,
    pub event: String,
    pub key: String,
    pub body: Vec<u8>,
    pub created_at: Millis,
    /// Attempts made so far (each `retry` adds one).
    pub attempts: u32,
    /// Not taken before this.
    pub next_at: Millis,
    /// What the last failed attempt found.
    pub last_error: Option<String>,
}

/// How one delivery attempt ended, as the delivery log keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// A 2xx answer: the item left the outbox.
    Delivered,
    /// No answer or a non-2xx one: the item waits for its next attempt.
    Failed,
    /// The last attempt failed and no other is made: the item left the outbox undelivered.
    GaveUp,
}

impl DeliveryOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryOutcome::Delivered => "delivered",
            DeliveryOutcome::Failed => "failed",
            DeliveryOutcome::GaveUp => "gave_up",
        }
    }

    /// The number an outcome is stored as (never renumber).
    pub fn stored(self) -> u8 {
        match self {
            DeliveryOutcome::Delivered => 1,
            DeliveryOutcome::Failed => 2,
            DeliveryOutcome::GaveUp => 3,
        }
    }

    pub fn of_stored(n: u8) -> Option<DeliveryOutcome> {
        [
            DeliveryOutcome::Delivered,
            DeliveryOutcome::Failed,
            DeliveryOutcome::GaveUp,
        ]
        .into_iter()
        .find(|o| o.stored() == n)
    }

    /// Whether the dashboard's "last failures" shows it.
    pub fn is_failure(self) -> bool {
        self != DeliveryOutcome::Delivered
    }
}

/// What one attempt found, as the service reports it to the store; the store adds what it
/// knows of the item (webhook, event, key, attempts) to make the [`DeliveryRecord`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryAttempt {
    /// When the attempt ended.
    pub at: Millis,
    /// The HTTP status, when an answer came.
    pub status: Option<u16>,
    /// Why it failed without an answer (connect, timeout, …), or what the answer said.
    pub error: Option<String>,
}

impl DeliveryAttempt {
    /// The error as kept: `error` cut to [`MAX_ERROR_LEN`] bytes (at a character boundary),
    /// else the status of a non-2xx answer in words, else nothing.
    pub fn kept_error(&self) -> Option<String> {
        match (&self.error, self.status) {
            (Some(error), _) => Some(truncate(error, MAX_ERROR_LEN).to_string()),
            (None, Some(status)) if !(200..300).contains(&status) => Some(format!("HTTP {status}")),
            _ => None,
        }
    }

    /// The log record of this attempt on `item`, which has now been attempted `attempts`
    /// times.
    pub fn record(
        &self,
        item: &OutboxItem,
        attempts: u32,
        outcome: DeliveryOutcome,
    ) -> DeliveryRecord {
        DeliveryRecord {
            id: item.id,
            webhook: item.webhook.clone(),
            event: item.event.clone(),
            key: item.key.clone(),
            at: self.at,
            attempts,
            outcome,
            status: self.status,
            error: self.kept_error(),
        }
    }
}

/// One attempt in the delivery log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The item's id (what `X-Vsl-Delivery` is made from).
    pub id: u64,
    pub webhook: String,
    pub event: String,
    pub key: String,
    /// When the attempt ended.
    pub at: Millis,
    /// Attempts made so far, this one included.
    pub attempts: u32,
    pub outcome: DeliveryOutcome,
    pub status: Option<u16>,
    pub error: Option<String>,
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_round_trip_their_stored_numbers() {
        for outcome in [
            DeliveryOutcome::Delivered,
            DeliveryOutcome::Failed,
            DeliveryOutcome::GaveUp,
        ] {
            assert_eq!(DeliveryOutcome::of_stored(outcome.stored()), Some(outcome));
        }
        assert_eq!(DeliveryOutcome::of_stored(0), None);
    }

    #[test]
    fn the_kept_error_is_bounded_and_says_the_status() {
        let long = DeliveryAttempt {
            at: 1,
            status: None,
            error: Some("é".repeat(MAX_ERROR_LEN)),
        };
        let kept = long.kept_error().unwrap();
        assert!(kept.len() <= MAX_ERROR_LEN && kept.chars().all(|c| c == 'é'));
        let refused = DeliveryAttempt {
            at: 1,
            status: Some(503),
            error: None,
        };
        assert_eq!(refused.kept_error().as_deref(), Some("HTTP 503"));
        let fine = DeliveryAttempt {
            at: 1,
            status: Some(204),
            error: None,
        };
        assert_eq!(fine.kept_error(), None);
    }
}

/// What happened, as a webhook subscribes to it (`webhooks[].events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    LinkCreated,
    LinkUpdated,
    LinkDeleted,
    /// Expired, or its visit cap reached.
    LinkEnded,
    /// Visits, batched: at most one POST a second per webhook.
    Visit,
    /// A lead left through a link's form.
    Lead,
    /// A review's verdict.
    Review,
}

impl EventKind {
    pub const ALL: [EventKind; 7] = [
        EventKind::LinkCreated,
        EventKind::LinkUpdated,
        EventKind::LinkDeleted,
        EventKind::LinkEnded,
        EventKind::Visit,
        EventKind::Lead,
        EventKind::Review,
    ];

    /// The name in `events = [...]`, `X-Vsl-Event` and the body.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::LinkCreated => "link.created",
            EventKind::LinkUpdated => "link.updated",
            EventKind::LinkDeleted => "link.deleted",
            EventKind::LinkEnded => "link.ended",
            EventKind::Visit => "visit",
            EventKind::Lead => "lead",
            EventKind::Review => "review",
        }
    }

    pub fn parse(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}
