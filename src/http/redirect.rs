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

use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::observe::count_unmatched;
use crate::limits::{Limit, RateLimited};
use crate::links::{Choice, LinkState, RequestFacts, Resolution, Routed};
use crate::model::Route;
use crate::state::AppState;

/// Browsers come back for every visit, so every visit can be counted.
const CACHE_CONTROL: HeaderValue = HeaderValue::from_static("private, max-age=0");

#[utoipa::path(get, path = "/{code}", tag = "redirect",
    params(("code" = String, Path, description = "A short code"),
        ("X-Link-Password" = Option<String>, Header, description = "The password of a protected link")),
    responses((status = 302, description = "To the long URL (status per `server.redirect_status`); for a link with rules or targets, to the destination they choose; for an ended link with a `fallback_url`, there"),
        (status = 200, description = "A protected link, to a browser: the password form"),
        (status = 401, description = "A protected link, to a JSON client without `X-Link-Password`: `password_required`"),
        (status = 403, description = "A wrong `X-Link-Password` (`wrong_password`), or a blocked destination"),
        (status = 404, description = "No such code, or a link before its `valid_from`"),
        (status = 410, description = "Expired (by date or visit cap) or deleted"),
        (status = 429, description = "Over `password_per_ip` or another address limit")))]
pub async fn redirect(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    uri: Uri,
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
    let query = uri.query().unwrap_or("");
    match answer(&state, peer, code.as_deref(), query, &headers, visit) {
        Answer::Now(response) => response,
        Answer::Later(later) => later.finish(query, None).await,
    }
}

/// `POST /{code}`: the password form of a protected link. A right password redirects (and
/// counts the visit) as a `GET` would; a wrong one answers the form again, 403. No token:
/// a visitor has no session; `password_per_ip` is the defence.
#[utoipa::path(post, path = "/{code}", tag = "redirect",
    params(("code" = String, Path, description = "A short code")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "`password=…`"),
    responses((status = 302, description = "The right password: to the destination"),
        (status = 403, description = "A wrong password: the form again, with a message"),
        (status = 429, description = "Over `limits.rates.password_per_ip`")))]
pub async fn unlock(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    Path(code): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let password = url::form_urlencoded::parse(&body)
        .find(|(name, _)| name == "password")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let query = uri.query().unwrap_or("");
    match answer(&state, peer, Some(&code), query, &headers, Visit::Counted) {
        Answer::Later(later) => later.finish(query, Some(password)).await,
        // Not a protected link: the same answer a GET gets.
        Answer::Now(response) => response,
    }
}

/// Whether a redirect records a visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    Counted,
    /// `HEAD /{code}`: the same answer, no visit.
    NotCounted,
}

/// The answer to `/{code}`: at once (plain links, errors), or after the link's options have
/// been worked through ([`Later::finish`]).
pub enum Answer {
    Now(Response),
    Later(Box<Later>),
}

impl From<Response> for Answer {
    fn from(response: Response) -> Self {
        Answer::Now(response)
    }
}

/// The answer to `/{code}` (`None`: a path that does not even decode, so no code), for the
/// route above and for [`super::front`]'s fast path alike. A plain link is answered here;
/// a link with options, rules or targets is handed back to be finished asynchronously.
pub fn answer(
    state: &AppState,
    peer: SocketAddr,
    code: Option<&str>,
    raw_query: &str,
    headers: &HeaderMap,
    visit: Visit,
) -> Answer {
    if state.limits.limits_redirects() {
        let ip = client_ip(state, peer, headers);
        if let Err(e) = state.limits.check_ip(Limit::RedirectPerIp, ip, 1) {
            return rate_limited(state, e, headers).into();
        }
    }
    let Some(code) = code else {
        return not_found(state, peer, "", headers).into();
    };
    if let Some(code) = code.strip_suffix('+') {
        return preview(state, peer, code, headers).into();
    }
    match state.links.resolve(code) {
        Ok(Resolution::Found {
            id,
            url,
            state: None,
        }) => found(state, peer, id, code, &url, headers, visit, None).into(),
        Ok(Resolution::Found {
            state: Some(link), ..
        }) => decide(state, peer, code, link, raw_query, headers, visit),
        Ok(Resolution::Gone { fallback }) => gone(state, code, fallback, headers).into(),
        Ok(Resolution::NotFound) => not_found(state, peer, code, headers).into(),
        Ok(Resolution::Blocked) => blocked(state, code, headers).into(),
        Err(e) => ApiError::from(e).into_response().into(),
    }
}

/// A link with options, decided in memory where it can be: before `valid_from` the code is
/// unknown; a redirect chosen by rules and rotation with nothing to count is answered here.
/// A password to check or a cap to count goes on asynchronously ([`Later`]).
fn decide(
    state: &AppState,
    peer: SocketAddr,
    code: &str,
    link: Arc<LinkState>,
    raw_query: &str,
    headers: &HeaderMap,
    visit: Visit,
) -> Answer {
    if link.not_yet(state.links.now()) {
        return not_found(state, peer, code, headers).into();
    }
    let later = |choice| {
        Answer::Later(Box::new(Later {
            state: state.clone(),
            peer,
            code: code.to_string(),
            link: link.clone(),
            headers: headers.clone(),
            visit,
            choice,
        }))
    };
    if link.protected() {
        return later(None);
    }
    let ip = state.client_ip(peer.ip(), headers);
    match state.links.choose(&link, facts(ip, headers, raw_query)) {
        Choice::Done(routed) => {
            routed_answer(state, peer, code, &link, headers, visit, routed).into()
        }
        counted => later(Some(counted)),
    }
}

/// What the rules read from a request.
fn facts<'a>(ip: std::net::IpAddr, headers: &'a HeaderMap, raw_query: &'a str) -> RequestFacts<'a> {
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    RequestFacts {
        ip,
        user_agent: text(header::USER_AGENT),
        accept_language: text(header::ACCEPT_LANGUAGE),
        raw_query,
    }
}

/// The answer to a routed redirect of a link with options.
fn routed_answer(
    state: &AppState,
    peer: SocketAddr,
    code: &str,
    link: &LinkState,
    headers: &HeaderMap,
    visit: Visit,
    routed: Routed,
) -> Response {
    match routed {
        Routed::Go { url, route } => {
            let mut response = found(
                state,
                peer,
                link.id,
                code,
                &url,
                headers,
                visit,
                Some(route),
            );
            // A protected link's destination is no one else's business.
            if link.protected() {
                response
                    .headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            }
            response
        }
        Routed::Ended { fallback } => gone(state, code, fallback, headers),
    }
}

/// The redirect itself, and the visit of a `GET` handed to the visit queue.
#[allow(clippy::too_many_arguments)]
fn found(
    state: &AppState,
    peer: SocketAddr,
    id: u64,
    code: &str,
    url: &str,
    headers: &HeaderMap,
    visit: Visit,
    route: Option<Route>,
) -> Response {
    let Ok(location) = HeaderValue::from_str(url) else {
        return ApiError::internal(format!("stored URL of `{code}` is not a header value"))
            .into_response();
    };
    let status =
        StatusCode::from_u16(state.config.server.redirect_status).unwrap_or(StatusCode::FOUND);
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
            route,
        );
    }
    response
}

/// A link whose time has passed: to its `fallback_url` if it has one (no visit), else 410.
fn gone(state: &AppState, code: &str, fallback: Option<Arc<str>>, headers: &HeaderMap) -> Response {
    match fallback.and_then(|url| HeaderValue::from_str(&url).ok()) {
        Some(location) => {
            let mut response = StatusCode::FOUND.into_response();
            let h = response.headers_mut();
            h.insert(header::LOCATION, location);
            h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
            response
        }
        None => missing(state, StatusCode::GONE, code, headers),
    }
}

/// The redirect of a link with options that waits for something: a password to check, a
/// cap to count.
pub struct Later {
    state: AppState,
    peer: SocketAddr,
    code: String,
    link: Arc<LinkState>,
    headers: HeaderMap,
    visit: Visit,
    /// What [`decide`] chose already (a redirect to count); `None` for a protected link, whose
    /// password comes first.
    choice: Option<Choice>,
}

impl Later {
    /// A protected link wants its password first (`form`: the visitor's form, else
    /// `X-Link-Password`); then the rules, the rotation and the caps choose the destination,
    /// or end the link. (`valid_from` was checked by [`decide`], which made this.)
    pub async fn finish(self, raw_query: &str, form: Option<String>) -> Response {
        let Later {
            state,
            peer,
            code,
            link,
            headers,
            visit,
            choice,
        } = self;
        let ip = state.client_ip(peer.ip(), &headers);
        if link.protected() {
            if let Some(refused) = check_password(&state, ip, &code, &link, &headers, form).await {
                return refused;
            }
        }
        let choice =
            choice.unwrap_or_else(|| state.links.choose(&link, facts(ip, &headers, raw_query)));
        let routed = match choice {
            Choice::Done(routed) => routed,
            Choice::Count(pending, route, slots) => {
                match state.links.count(&link, pending, route, slots).await {
                    Ok(routed) => routed,
                    Err(e) => return ApiError::from(e).into_response(),
                }
            }
        };
        routed_answer(&state, peer, &code, &link, &headers, visit, routed)
    }
}

/// A protected link's password: `None` when it is right, else the answer (the form, 401, 403
/// or 429).
async fn check_password(
    state: &AppState,
    ip: std::net::IpAddr,
    code: &str,
    link: &Arc<LinkState>,
    headers: &HeaderMap,
    form: Option<String>,
) -> Option<Response> {
    let from_form = form.is_some();
    let given = form.or_else(|| {
        headers
            .get(PASSWORD_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    let Some(password) = given else {
        return Some(if wants_json(headers) {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "password_required",
                format!("the link `{code}` is protected: send its password in X-Link-Password"),
            )
            .into_response()
        } else {
            state.ui.unlock(&format!("/{code}"), false, headers)
        });
    };
    if let Err(e) = state.limits.check_ip(Limit::PasswordPerIp, ip, 1) {
        return Some(rate_limited(state, e, headers));
    }
    if state.links.unlock(link, &password).await {
        return None;
    }
    Some(if from_form {
        state.ui.unlock(&format!("/{code}"), true, headers)
    } else {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "wrong_password",
            format!("X-Link-Password is not the password of `{code}`"),
        )
        .into_response()
    })
}

/// The header a client sends a protected link's password in.
const PASSWORD_HEADER: &str = "x-link-password";

/// `GET /{code}+`: the destination, escaped, with a button to go on. Counts no visit. A
/// protected link's destination is not shown.
fn preview(state: &AppState, peer: SocketAddr, code: &str, headers: &HeaderMap) -> Response {
    match state.links.resolve(code) {
        Ok(Resolution::Found {
            url, state: link, ..
        }) => {
            let protected = link.as_ref().is_some_and(|l| l.protected());
            let shown = if protected {
                state.links.short_url(code)
            } else {
                url.to_string()
            };
            let mut response = state.ui.preview(&shown, protected, headers);
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, CACHE_CONTROL);
            response
        }
        Ok(Resolution::Gone { .. }) => missing(state, StatusCode::GONE, code, headers),
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
