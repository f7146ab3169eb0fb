//! The events a webhook may subscribe to and the JSON each POST carries. Pure: the service
//! builds an [`Event`] where something happened and hands it over; the body is made here once
//! and stored as the bytes that are signed and sent.

use serde_json::{json, Value};

use crate::links::rfc3339;
use crate::model::Millis;

/// What happened.
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

/// One event, before it is fanned out to the webhooks that want it.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    /// The ordering key: `link:<id>` for a link's events, so that a receiver never sees a
    /// link's `deleted` before its `created`; `visits` for the batched visits.
    pub key: String,
    pub at: Millis,
    pub data: Value,
}

impl Event {
    /// An event about one link.
    pub fn of_link(kind: EventKind, link_id: u64, at: Millis, data: Value) -> Event {
        Event {
            kind,
            key: format!("link:{link_id}"),
            at,
            data,
        }
    }

    /// The POST body: `{"event", "at", "data"}`.
    pub fn body(&self) -> Vec<u8> {
        let body = json!({
            "event": self.kind.as_str(),
            "at": rfc3339(self.at),
            "data": self.data,
        });
        // A `Value` always serialises.
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_its_name() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(EventKind::parse("link.exploded"), None);
    }

    #[test]
    fn the_body_names_the_event_and_its_time() {
        let event = Event::of_link(
            EventKind::LinkCreated,
            7,
            1_700_000_000_000,
            json!({"code": "abc"}),
        );
        assert_eq!(event.key, "link:7");
        let body: Value = serde_json::from_slice(&event.body()).unwrap();
        assert_eq!(body["event"], "link.created");
        assert_eq!(body["at"], "2023-11-14T22:13:20Z");
        assert_eq!(body["data"]["code"], "abc");
    }
}
