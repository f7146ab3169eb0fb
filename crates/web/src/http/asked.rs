//! One request to `/{code}`, as the redirect ([`super::redirect`]) and the pages before the
//! destination ([`super::gates`]) both read it, and the answers both give: a redirect with
//! `Location` and `Cache-Control`, 429 with `Retry-After`, the visit handed to the queue.
//! Both files build on this one and neither reaches into the other, so the redirect path runs
//! in one direction: `redirect` decides, `gates` answers the gates, this answers for both.

use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::limits::RateLimited;
use crate::model::Route;
use crate::web::error::ApiError;
use crate::web::state::AppState;

/// Browsers come back for every visit, so every visit can be counted.
pub const CACHE_CONTROL: HeaderValue = HeaderValue::from_static("private, max-age=0");

/// Whether a request to `/{code}` records a visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    Counted,
    /// `HEAD /{code}`: the same answer, no visit, no cap slot claimed.
    NotCounted,
    /// `POST /{code}`: the visitor's password or form, then counted as a `GET`.
    Posted,
}

impl Visit {
    pub fn counts(self) -> bool {
        self != Visit::NotCounted
    }
}

/// A request to `/{code}`: who asked (the peer, and the client address worked out from it
/// once, when first needed), with which headers, and whether it counts as a visit.
pub struct Asked<'a> {
    pub state: &'a AppState,
    pub peer: SocketAddr,
    pub headers: &'a HeaderMap,
    pub visit: Visit,
    ip: OnceLock<IpAddr>,
}

impl<'a> Asked<'a> {
    pub fn new(
        state: &'a AppState,
        peer: SocketAddr,
        headers: &'a HeaderMap,
        visit: Visit,
    ) -> Self {
        Asked {
            state,
            peer,
            headers,
            visit,
            ip: OnceLock::new(),
        }
    }

    /// The client address (the proxy header only when trusted: `server.client_ip_header`),
    /// worked out on first use; a plain redirect with no address limit never needs it until
    /// its visit is recorded.
    pub fn ip(&self) -> IpAddr {
        *self
            .ip
            .get_or_init(|| self.state.client_ip(self.peer.ip(), self.headers))
    }

    /// A header as text ("" when absent or not text).
    pub fn text(&self, name: header::HeaderName) -> &'a str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn wants_json(&self) -> bool {
        wants_json(self.headers)
    }

    /// Appends the visit of a `GET` (or of a post that went through) to the visit journal,
    /// with the route that served it: a destination, or a page that stopped the visitor there.
    pub fn record(&self, link_id: u64, code: &str, route: Option<Route>) {
        let state = self.state;
        if self.visit.counts() && state.recorder.enabled() {
            state.recorder.record(
                link_id,
                code,
                self.ip(),
                self.headers.get(header::USER_AGENT),
                self.headers.get(header::REFERER),
                route,
            );
        }
    }

    /// 429 with `Retry-After`: problem+json for JSON clients, else the page.
    pub fn rate_limited(&self, e: RateLimited) -> Response {
        let secs = e.retry_after_secs;
        let response = if self.wants_json() {
            ApiError::from(e).into_response()
        } else {
            self.state.pages.rate_limited(secs, self.headers)
        };
        retry_after(response, secs)
    }
}

/// `status` to `location`, not cached past the visit; `None` when `location` is no header
/// value.
pub fn redirect_to(status: StatusCode, location: &str) -> Option<Response> {
    let location = HeaderValue::from_str(location).ok()?;
    let mut response = status.into_response();
    let h = response.headers_mut();
    h.insert(header::LOCATION, location);
    h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
    Some(response)
}

/// The answer with `Retry-After: secs` and not cached.
pub fn retry_after(mut response: Response, secs: u64) -> Response {
    let h = response.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}

/// Whether the client asked for JSON (`application/json` or `application/problem+json`).
pub fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json") || v.contains("application/problem+json"))
}

/// The `Host` a request names, if it is text (SPEC §26: which domain it is for).
pub fn host_of(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::HOST).and_then(|v| v.to_str().ok())
}
