//! The first stop of every request. `GET /{code}`, the product's hot path, is answered here
//! without the router: no route matching over every route, no boxed route layer, no request
//! timeout (a redirect never waits on anything), no copy of the request's headers. Every
//! other request, `HEAD /{code}` included, goes to the router, whose `/{code}` route answers
//! the same way through the same [`redirect::answer`].
//!
//! Also what every request passes: the head's size against `server.max_header_bytes`
//! (431), and `X-Content-Type-Options: nosniff` on every answer.
//!
//! Measured on 2 cores against the bare axum ceiling (`benches/run.py`): the router's layers
//! were a fixed cost on every redirect; see benches/RESULTS.md.

use std::net::SocketAddr;
use std::time::Instant;

use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower::ServiceExt;

use super::observe::count_redirect;
use super::{redirect, OWN_ROUTES};
use crate::web::error::ApiError;
use crate::web::state::AppState;

/// The router and, for the fast path, the state its handlers share.
#[derive(Clone)]
pub struct Front {
    router: Router,
    state: AppState,
}

impl Front {
    pub fn new(router: Router, state: AppState) -> Self {
        Self { router, state }
    }

    /// Answers one request from `peer`.
    pub async fn handle(self, request: Request<Body>, peer: SocketAddr) -> Response {
        let mut response = self.answer(request, peer).await;
        // Every answer, redirects and errors included: no browser guesses a type.
        response
            .headers_mut()
            .insert(header::X_CONTENT_TYPE_OPTIONS, NOSNIFF);
        response
    }

    async fn answer(self, mut request: Request<Body>, peer: SocketAddr) -> Response {
        let limit = self.state.config.server.max_header_bytes;
        if head_bytes(&request) > limit {
            return head_too_large(limit);
        }
        if let Some(segment) = code_segment(&request) {
            let started = Instant::now();
            // Decoded as axum's `Path` decodes: a segment that does not decode is no code.
            // Borrowed unless the segment has escapes: no allocation for a plain code.
            let code = percent_encoding::percent_decode_str(segment)
                .decode_utf8()
                .ok();
            let query = request.uri().query().unwrap_or("");
            let response = redirect::answer(
                &self.state,
                peer,
                code.as_deref(),
                query,
                request.headers(),
                redirect::Visit::Counted,
            )
            .finish(query, None)
            .await;
            count_redirect(&self.state, started, response.status());
            return response;
        }
        if let Some(response) = redirect::domain_answer(
            &self.state,
            request.method(),
            request.uri().path(),
            request.headers(),
        ) {
            return response;
        }
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        match self.router.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");

/// 431 for a head over `server.max_header_bytes`. Our own check: hyper's buffer limit lets a
/// head through whenever it arrived in one read, so the configured limit would not be the one
/// enforced. Out of line and cold, so that the redirect fast path around it stays small.
#[cold]
#[inline(never)]
fn head_too_large(limit: usize) -> Response {
    ApiError::new(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
        format!("the request line and headers are over {limit} bytes (server.max_header_bytes)"),
    )
    .into_response()
}

/// The size of a request's head as it came on the wire: the request line, each header line
/// and the blank line (HTTP/1.1 framing; the URI as sent).
#[inline]
fn head_bytes(request: &Request<Body>) -> usize {
    let uri = request.uri();
    let target = uri.path_and_query().map_or(1, |p| p.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.scheme_str().map_or(0, |s| s.len() + 3);
    let line = request.method().as_str().len() + 1 + target + 1 + "HTTP/1.1".len() + 2;
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    line + headers + 2
}

/// The raw code of a `GET /{code}` request: one non-empty path segment that is not a route
/// of its own.
fn code_segment(request: &Request<Body>) -> Option<&str> {
    if request.method() != Method::GET {
        return None;
    }
    let path = request.uri().path();
    let segment = path.strip_prefix('/')?;
    (!segment.is_empty() && !segment.contains('/') && !OWN_ROUTES.contains(&path))
        .then_some(segment)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str) -> Request<Body> {
        Request::get(uri).body(Body::empty()).expect("request")
    }

    #[test]
    fn only_a_get_of_one_segment_that_is_no_route_is_a_code() {
        assert_eq!(code_segment(&get("/abc123")), Some("abc123"));
        assert_eq!(code_segment(&get("/abc123?utm=x")), Some("abc123"));
        assert_eq!(code_segment(&get("/abc%2B")), Some("abc%2B"));
        assert_eq!(code_segment(&get("/abc+")), Some("abc+"));
        for path in [
            "/",
            "/healthz",
            "/metrics",
            "/robots.txt",
            "/yourls-api.php",
            "/a/b",
            "/a/",
        ] {
            assert_eq!(code_segment(&get(path)), None, "{path}");
        }
        let head = Request::head("/abc123")
            .body(Body::empty())
            .expect("request");
        assert_eq!(code_segment(&head), None);
    }
}
