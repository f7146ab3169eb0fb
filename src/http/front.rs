//! The first stop of every request. `GET /{code}`, the product's hot path, is answered here
//! without the router: no route matching over every route, no boxed route layer, no request
//! timeout (a redirect never waits on anything), no copy of the request's headers. Every
//! other request, `HEAD /{code}` included, goes to the router, whose `/{code}` route answers
//! the same way through the same [`redirect::answer`].
//!
//! Measured on 2 cores against the bare axum ceiling (`benches/run.py`): the router's layers
//! were a fixed cost on every redirect; see the README's "Benchmarks".

use std::net::SocketAddr;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Method, Request};
use axum::response::Response;
use axum::Router;
use tower::ServiceExt;

use super::observe::count_redirect;
use super::{redirect, OWN_ROUTES};
use crate::state::AppState;

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
    pub async fn handle(self, mut request: Request<Body>, peer: SocketAddr) -> Response {
        if let Some(segment) = code_segment(&request) {
            let started = Instant::now();
            // Decoded as axum's `Path` decodes: a segment that does not decode is no code.
            // Borrowed unless the segment has escapes: no allocation for a plain code.
            let code = percent_encoding::percent_decode_str(segment)
                .decode_utf8()
                .ok();
            let response = redirect::answer(&self.state, peer, code.as_deref(), request.headers());
            count_redirect(&self.state, started, response.status());
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
