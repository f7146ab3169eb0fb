//! The events a webhook may subscribe to and the JSON each POST carries. Pure: the service
//! builds an [`Event`] where something happened and hands it over; the body is made here once
//! and stored as the bytes that are signed and sent.

use serde_json::{json, Value};

use crate::links::rfc3339;
use crate::model::{Lead, Link, Millis, Review, Visit};

pub use crate::model::EventKind;

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

/// A link as its events carry it. `visit` events name the link by `code`; the ip and user
/// agent of a visit stay out (a receiver gets what the statistics show, not personal data).
pub fn link_data(link: &Link, short_url: &str, domain: &str) -> Value {
    json!({
        "id": link.id,
        "code": link.code,
        "domain": domain,
        "short_url": short_url,
        "url": link.url,
        "space": link.space,
        "title": link.title,
        "tags": link.tags,
        "status": link.status.as_str(),
        "created_at": rfc3339(link.created_at),
        "updated_at": rfc3339(link.updated_at),
        "expires_at": link.expires_at.map(rfc3339),
    })
}

/// One visit of a `visit` event; `domain` is the host of the visited link's domain (a code
/// is a link only together with its domain).
pub fn visit_data(visit: &Visit, domain: Option<&str>) -> Value {
    json!({
        "id": visit.id,
        "code": visit.code,
        "domain": domain,
        "at": rfc3339(visit.at),
        "referer": &*visit.referer,
        "browser": &*visit.browser,
        "os": &*visit.os,
        "device": &*visit.device,
        "is_bot": visit.is_bot,
        "country": visit.country.as_deref(),
        "route": visit.route.as_deref(),
    })
}

/// A lead as its event carries it: what the visitor typed is personal data, sent only to
/// webhooks that asked for `lead`.
/// The link is named by its id, as `link.*` events carry it, and by its domain's host.
pub fn lead_data(lead: &Lead, domain: Option<&str>) -> Value {
    let values: serde_json::Map<String, Value> = lead
        .values
        .iter()
        .map(|(name, value)| (name.clone(), Value::String(value.clone())))
        .collect();
    json!({
        "id": lead.id,
        "link_id": lead.link_id,
        "domain": domain,
        "at": rfc3339(lead.at),
        "values": values,
        "consent": lead.consent,
    })
}

/// A review's verdict; `code` and `domain` (its host) name the link when it is known.
pub fn review_data(review: &Review, code: Option<&str>, domain: Option<&str>) -> Value {
    json!({
        "id": review.id,
        "link_id": review.link_id,
        "code": code,
        "domain": domain,
        "at": rfc3339(review.at),
        "verdict": review.verdict.as_str(),
        "score": review.score,
        "reason": review.reason,
        "by": review.by,
    })
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
