//! Request metrics: a route layer that counts every matched request by route pattern (as
//! `/api/v1/links/:code`), method and status, and times the redirect. Unmatched requests (404 and 405 fallbacks) are counted
//! by [`count_unmatched`] from the fallback handlers, under the route `unmatched`.

use std::borrow::Cow;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::metrics::{RequestLabels, REDIRECT_LABEL};
use crate::web::state::AppState;

/// The route pattern of the redirect, whose latency is a histogram of its own.
pub const REDIRECT_ROUTE: &str = "/{code}";

/// `/api/v1/links/{code}` → `/api/v1/links/:code`.
fn route_label(pattern: &str) -> Cow<'static, str> {
    if pattern == REDIRECT_ROUTE {
        return Cow::Borrowed(REDIRECT_LABEL);
    }
    Cow::Owned(pattern.replace('{', ":").replace('}', ""))
}

fn method_label(method: &Method) -> Cow<'static, str> {
    Cow::Borrowed(match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    })
}

pub async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = match request.extensions().get::<MatchedPath>() {
        Some(p) => route_label(p.as_str()),
        None => Cow::Borrowed("unmatched"),
    };
    let response = next.run(request).await;
    if route == REDIRECT_LABEL {
        time_redirect(&state, started);
    }
    let labels = RequestLabels {
        route,
        method,
        status: response.status().as_u16(),
    };
    state.metrics.count_request(&labels);
    response
}

/// Counts and times a `GET /{code}` answered by [`super::front`], as this layer would have.
pub fn count_redirect(state: &AppState, started: Instant, status: StatusCode) {
    time_redirect(state, started);
    state.metrics.count_request(&RequestLabels {
        route: Cow::Borrowed(REDIRECT_LABEL),
        method: Cow::Borrowed("GET"),
        status: status.as_u16(),
    });
}

fn time_redirect(state: &AppState, started: Instant) {
    state
        .metrics
        .redirect_seconds
        .observe(started.elapsed().as_secs_f64());
}

/// Counts a request that matched no route.
pub fn count_unmatched(state: &AppState, method: &Method, status: StatusCode) {
    let labels = RequestLabels {
        route: Cow::Borrowed("unmatched"),
        method: method_label(method),
        status: status.as_u16(),
    };
    state.metrics.count_request(&labels);
}
