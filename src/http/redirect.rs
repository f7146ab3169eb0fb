//! `GET`/`HEAD /{code}` (a `GET` comes here from [`super::front`], a `HEAD` through
//! the router): resolve through the domain service and answer a redirect,
//! or the 404/410 page (problem+json for clients that ask for JSON), and hand the visit of a
//! `GET` to the visit queue (a `HEAD` is answered alike but records nothing). Never waits on
//! background work.
//!
//! `GET /{code}+` previews the destination instead (no redirect, no visit); a link whose host
//! is blocked answers 403 `blocked_url`. `GET /robots.txt` keeps crawlers out of `/api/` and
//! `/ui/`.
//!
//! Rate limits: `redirect_per_ip` is checked first when it is on; `not_found_per_ip`
//! only on the way to a 404, so that redirects that succeed never pay for it. Past a quota the
//! answer is 429 with `Retry-After` (a page, or problem+json for JSON clients).

use axum::extract::rejection::PathRejection;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::observe::count_unmatched;
use crate::limits::{Limit, RateLimited};
use crate::links::Resolution;
use crate::state::AppState;

/// Browsers come back for every visit, so every visit can be counted.
const CACHE_CONTROL: HeaderValue = HeaderValue::from_static("private, max-age=0");

#[utoipa::path(get, path = "/{code}", tag = "redirect",
    params(("code" = String, Path, description = "A short code")),
    responses((status = 302, description = "To the long URL (status per `server.redirect_status`)"),
        (status = 404, description = "No such code"), (status = 410, description = "Expired or deleted")))]
pub async fn redirect(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let code = path.ok().map(|Path(code)| code);
    // A visit is a GET: browsers prefetch and link checkers probe with HEAD.
    let visit = if method == Method::HEAD {
        Visit::NotCounted
    } else {
        Visit::Counted
    };
    answer(&state, peer, code.as_deref(), &headers, visit)
}

/// Whether a redirect records a visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    Counted,
    /// `HEAD /{code}`: the same answer, no visit.
    NotCounted,
}

/// The answer to `/{code}` (`None`: a path that does not even decode, so no code), for the
/// route above and for [`super::front`]'s fast path alike.
pub fn answer(
    state: &AppState,
    peer: SocketAddr,
    code: Option<&str>,
    headers: &HeaderMap,
    visit: Visit,
) -> Response {
    if state.limits.limits_redirects() {
        let ip = client_ip(state, peer, headers);
        if let Err(e) = state.limits.check_ip(Limit::RedirectPerIp, ip, 1) {
            return rate_limited(state, e, headers);
        }
    }
    let Some(code) = code else {
        return not_found(state, peer, "", headers);
    };
    if let Some(code) = code.strip_suffix('+') {
        return preview(state, peer, code, headers);
    }
    match state.links.resolve(code) {
        Ok(Resolution::Found { id, url }) => {
            let Ok(location) = HeaderValue::from_str(&url) else {
                return ApiError::internal(format!("stored URL of `{code}` is not a header value"))
                    .into_response();
            };
            let status = StatusCode::from_u16(state.config.server.redirect_status)
                .unwrap_or(StatusCode::FOUND);
            let mut response = status.into_response();
            let h = response.headers_mut();
            h.insert(header::LOCATION, location);
            h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
            if visit == Visit::Counted && state.recorder.enabled() {
                state.recorder.record(
                    id,
                    code,
                    state.client_ip(peer.ip(), headers),
                    headers.get(header::USER_AGENT),
                    headers.get(header::REFERER),
                );
            }
            response
        }
        Ok(Resolution::Gone) => missing(state, StatusCode::GONE, code, headers),
        Ok(Resolution::NotFound) => not_found(state, peer, code, headers),
        Ok(Resolution::Blocked) => blocked(state, code, headers),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// `GET /{code}+`: the destination, escaped, with a button to go on. Counts no visit.
fn preview(state: &AppState, peer: SocketAddr, code: &str, headers: &HeaderMap) -> Response {
    match state.links.resolve(code) {
        Ok(Resolution::Found { url, .. }) => {
            let mut response = state.ui.preview(&url, headers);
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, CACHE_CONTROL);
            response
        }
        Ok(Resolution::Gone) => missing(state, StatusCode::GONE, code, headers),
        Ok(Resolution::NotFound) => not_found(state, peer, code, headers),
        Ok(Resolution::Blocked) => blocked(state, code, headers),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// `GET /robots.txt`: everything but the API and the signed-in pages may be crawled.
#[utoipa::path(get, path = "/robots.txt", tag = "operations",
    responses((status = 200, description = "`Disallow: /api/` and `Disallow: /ui/`", content_type = "text/plain")))]
pub async fn robots() -> Response {
    let mut response = "User-agent: *\nDisallow: /api/\nDisallow: /ui/\n".into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// 403 for a link whose destination host is blocked.
fn blocked(state: &AppState, code: &str, headers: &HeaderMap) -> Response {
    let mut response = if wants_json(headers) {
        ApiError::blocked_url(format!("the destination of `{code}` is on a blocked host"))
            .into_response()
    } else {
        state.ui.errors.response(StatusCode::FORBIDDEN, headers)
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}

/// Any path that is no route and no code.
pub async fn fallback(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let response = not_found(&state, peer, "", &headers);
    count_unmatched(&state, &method, response.status());
    response
}

/// The client address (the proxy headers only when trusted).
fn client_ip(state: &AppState, peer: SocketAddr, headers: &HeaderMap) -> std::net::IpAddr {
    state.client_ip(peer.ip(), headers)
}

/// A 404, unless this address has had too many of them (`not_found_per_ip`): then 429.
fn not_found(state: &AppState, peer: SocketAddr, code: &str, headers: &HeaderMap) -> Response {
    let ip = client_ip(state, peer, headers);
    match state.limits.check_ip(Limit::NotFoundPerIp, ip, 1) {
        Ok(()) => missing(state, StatusCode::NOT_FOUND, code, headers),
        Err(e) => rate_limited(state, e, headers),
    }
}

/// 429 with `Retry-After`: problem+json for JSON clients, else the page.
fn rate_limited(state: &AppState, e: RateLimited, headers: &HeaderMap) -> Response {
    let secs = e.retry_after_secs;
    let mut response = if wants_json(headers) {
        ApiError::from(e).into_response()
    } else {
        state
            .ui
            .errors
            .response(StatusCode::TOO_MANY_REQUESTS, headers)
    };
    let h = response.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}

fn missing(state: &AppState, status: StatusCode, code: &str, headers: &HeaderMap) -> Response {
    let mut response = if wants_json(headers) {
        let (kind, detail) = if status == StatusCode::GONE {
            (
                "gone",
                format!("the link `{code}` has expired or was deleted"),
            )
        } else {
            ("not_found", format!("no link has the code `{code}`"))
        };
        ApiError::new(status, kind, detail).into_response()
    } else {
        state.ui.errors.response(status, headers)
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json") || v.contains("application/problem+json"))
}
