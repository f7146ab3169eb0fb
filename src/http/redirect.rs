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

use super::gates::{self, Posted};
use super::observe::count_unmatched;
use crate::limits::{Limit, RateLimited};
use crate::links::{Choice, LinkState, RequestFacts, Resolution, Routed, Unlock};
use crate::model::{gate, Gate, InApp, Passed, Route};
use crate::web::error::ApiError;
use crate::web::pages::PreviewHidden;
use crate::web::state::AppState;

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

/// `POST /{code}`: the password form of a protected link, and the form before the visit. A
/// right password goes on as a `GET` would (to the form, if the link has one too); a wrong
/// one answers the password form again, 403. Valid form values store a lead, set the pass
/// cookie and redirect (the visit counted); invalid ones answer the form again, 400, nothing
/// stored. No token: a visitor has no session; `password_per_ip` and `form_per_ip` are the
/// defence.
#[utoipa::path(post, path = "/{code}", tag = "redirect",
    params(("code" = String, Path, description = "A short code")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "`password=…`, and the form's fields by name (`consent=yes` for its checkbox)"),
    responses((status = 302, description = "The right password, or valid form values: to the destination"),
        (status = 200, description = "The right password of a link with a form: the form"),
        (status = 400, description = "Invalid form values: the form again, each problem beside its field"),
        (status = 403, description = "A wrong password: the form again, with a message"),
        (status = 429, description = "Over `limits.rates.password_per_ip` or `form_per_ip`")))]
pub async fn post(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    Path(code): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body: Posted = url::form_urlencoded::parse(&body).into_owned().collect();
    let query = uri.query().unwrap_or("");
    match answer(&state, peer, Some(&code), query, &headers, Visit::Posted) {
        Answer::Later(later) => later.finish(query, Some(body)).await,
        // Nothing to post to: the same answer a GET gets.
        Answer::Now(response) => response,
    }
}

/// Whether a redirect records a visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    Counted,
    /// `HEAD /{code}`: the same answer, no visit.
    NotCounted,
    /// `POST /{code}`: the visitor's password or form, then counted as a `GET`.
    Posted,
}

impl Visit {
    pub fn counts(self) -> bool {
        self != Visit::NotCounted
    }
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
        }) => {
            // A plain link meets no gate but the in-app page, and only when that is the default.
            if state.config.links.in_app == InApp::Interstitial {
                let ua = text(headers, header::USER_AGENT);
                if let Gate::InAppPage(app) = gate(None, InApp::Interstitial, Passed::default(), ua)
                {
                    return gates::in_app_page(state, peer, id, code, &url, app, headers, visit)
                        .into();
                }
            }
            found(state, peer, id, code, &url, headers, visit, None).into()
        }
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
    let passed = Passed {
        password: false,
        form: link.options.form.is_some() && gates::has_pass(state, link.id, headers),
    };
    let ua = text(headers, header::USER_AGENT);
    match gate(Some(&link.options), state.config.links.in_app, passed, ua) {
        Gate::Password => return later(None),
        Gate::Form if visit == Visit::Posted => return later(None),
        Gate::Form => return gates::form_page(state, code, &link, None, headers).into(),
        Gate::InAppPage(app) => {
            return gates::in_app_page(state, peer, link.id, code, &link.url, app, headers, visit)
                .into()
        }
        Gate::CrawlerPreview => {
            return gates::crawler_page(state, peer, &link, headers, visit).into()
        }
        Gate::Destination => {}
    }
    let ip = state.client_ip(peer.ip(), headers);
    match state.links.choose(&link, facts(ip, headers, raw_query)) {
        Choice::Done(routed) => {
            routed_answer(state, peer, code, &link, headers, visit, routed).into()
        }
        // A HEAD answers where a GET would go, claiming no cap slot.
        counted if !visit.counts() => {
            let routed = counted.uncounted(&link);
            routed_answer(state, peer, code, &link, headers, visit, routed).into()
        }
        counted => later(Some(counted)),
    }
}

/// What the rules read from a request.
fn facts<'a>(ip: std::net::IpAddr, headers: &'a HeaderMap, raw_query: &'a str) -> RequestFacts<'a> {
    RequestFacts {
        ip,
        user_agent: text(headers, header::USER_AGENT),
        accept_language: text(headers, header::ACCEPT_LANGUAGE),
        raw_query,
    }
}

/// A header as text ("" when absent or not text).
fn text(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
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
    record_visit(state, peer, id, code, headers, visit, route);
    response
}

/// Hands the visit of a `GET` (or a post that went through) to the visit queue, with the route
/// that served it: a destination, or a page that stopped the visitor there.
pub(super) fn record_visit(
    state: &AppState,
    peer: SocketAddr,
    link_id: u64,
    code: &str,
    headers: &HeaderMap,
    visit: Visit,
    route: Option<Route>,
) {
    if visit.counts() && state.recorder.enabled() {
        state.recorder.record(
            link_id,
            code,
            state.client_ip(peer.ip(), headers),
            headers.get(header::USER_AGENT),
            headers.get(header::REFERER),
            route,
        );
    }
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
    /// What [`decide`] chose already (a redirect to count); `None` when a gate (the password,
    /// a posted form) comes first.
    choice: Option<Choice>,
}

impl Later {
    /// The gates that wait: a protected link wants its password first (`body`: the visitor's
    /// post, else `X-Link-Password`); a posted form is checked and stored; then the gates
    /// after them (the form page, the in-app page, the crawler preview), or the rules, the
    /// rotation and the caps choose the destination, or end the link. (`valid_from` was
    /// checked by [`decide`], which made this.)
    pub async fn finish(self, raw_query: &str, body: Option<Posted>) -> Response {
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
        let password = body
            .as_ref()
            .and_then(|b| gates::posted(b, "password"))
            .map(str::to_string);
        if link.protected() {
            let from_form = body.is_some();
            if let Some(refused) = check_password(
                &state,
                ip,
                &code,
                &link,
                &headers,
                password.clone(),
                from_form,
            )
            .await
            {
                return refused;
            }
        }
        // Carried on to the form, in a hidden input, when the link has one too.
        let password = password.filter(|_| link.protected());
        let mut passed = Passed {
            password: true,
            form: link.options.form.is_some() && gates::has_pass(&state, link.id, &headers),
        };
        let mut pass_cookie = None;
        if let (Some(form), Some(body)) = (&link.options.form, &body) {
            if !passed.form && gates::is_submission(form, body) {
                match gates::submit(
                    &state,
                    ip,
                    &code,
                    &link,
                    body,
                    password.as_deref(),
                    &headers,
                )
                .await
                {
                    Ok(cookie) => {
                        passed.form = true;
                        pass_cookie = Some(cookie);
                    }
                    Err(refused) => return refused,
                }
            }
        }
        let ua = text(&headers, header::USER_AGENT);
        let mut response = match gate(Some(&link.options), state.config.links.in_app, passed, ua) {
            Gate::Password | Gate::Form => {
                gates::form_page(&state, &code, &link, password.as_deref(), &headers)
            }
            Gate::InAppPage(app) => gates::in_app_page(
                &state, peer, link.id, &code, &link.url, app, &headers, visit,
            ),
            Gate::CrawlerPreview => gates::crawler_page(&state, peer, &link, &headers, visit),
            Gate::Destination => {
                let choice = choice
                    .unwrap_or_else(|| state.links.choose(&link, facts(ip, &headers, raw_query)));
                let routed = match choice {
                    Choice::Done(routed) => routed,
                    counted if !visit.counts() => counted.uncounted(&link),
                    Choice::Count(pending, route, slots) => {
                        match state.links.count(&link, pending, route, slots).await {
                            Ok(routed) => routed,
                            Err(e) => return ApiError::from(e).into_response(),
                        }
                    }
                };
                routed_answer(&state, peer, &code, &link, &headers, visit, routed)
            }
        };
        if let Some(cookie) = pass_cookie {
            response.headers_mut().append(header::SET_COOKIE, cookie);
        }
        response
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
    from_form: bool,
) -> Option<Response> {
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
            state.pages.unlock(&format!("/{code}"), false, headers)
        });
    };
    if let Err(e) = state.limits.check_ip(Limit::PasswordPerIp, ip, 1) {
        return Some(rate_limited(state, e, headers));
    }
    match state.links.unlock(link, &password).await {
        Unlock::Right => return None,
        Unlock::Busy => return Some(busy(state, headers)),
        Unlock::Wrong => {}
    }
    Some(if from_form {
        state.pages.unlock(&format!("/{code}"), true, headers)
    } else {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "wrong_password",
            format!("X-Link-Password is not the password of `{code}`"),
        )
        .into_response()
    })
}

/// 429 with `Retry-After: 1` when every password check the memory budget allows is running.
fn busy(state: &AppState, headers: &HeaderMap) -> Response {
    let mut response = if wants_json(headers) {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "busy",
            "every password check the server's memory budget allows is running; retry in 1 s",
        )
        .into_response()
    } else {
        state.pages.rate_limited(1, headers)
    };
    let h = response.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from(1u64));
    h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}

/// The header a client sends a protected link's password in.
const PASSWORD_HEADER: &str = "x-link-password";

/// `GET /{code}+`: the destination, escaped, with a button to go on. Counts no visit. It
/// shows only what a visitor reaches without a gate: a link before its `valid_from` is as
/// unknown as on `/{code}`, and the destination of a link behind a password or a form is not
/// shown (a blocked link answers 403 like the redirect).
fn preview(state: &AppState, peer: SocketAddr, code: &str, headers: &HeaderMap) -> Response {
    match state.links.resolve(code) {
        Ok(Resolution::Found {
            url, state: link, ..
        }) => {
            if link.as_ref().is_some_and(|l| l.not_yet(state.links.now())) {
                return not_found(state, peer, code, headers);
            }
            let hidden = link.as_ref().and_then(|l| {
                if l.protected() {
                    Some(PreviewHidden::Password)
                } else if l.options.form.is_some() {
                    Some(PreviewHidden::Form)
                } else {
                    None
                }
            });
            let shown = match hidden {
                Some(_) => state.links.short_url(code),
                None => url.to_string(),
            };
            let mut response = state.pages.preview(&shown, hidden, headers);
            let cache_control = match hidden {
                Some(_) => HeaderValue::from_static("no-store"),
                None => CACHE_CONTROL,
            };
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, cache_control);
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
        state.pages.error(StatusCode::FORBIDDEN, headers)
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
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    // Only what could be a short link goes to `not_found_url`; the API's and the pages' own
    // paths answer 404 as they are.
    let own = ["/api/", "/ui/", "/static/", "/rest/", "/yourls-api.php"]
        .iter()
        .any(|prefix| uri.path().starts_with(prefix));
    let response = if own {
        missing(&state, StatusCode::NOT_FOUND, "", &headers)
    } else {
        not_found(&state, peer, "", &headers)
    };
    count_unmatched(&state, &method, response.status());
    response
}

/// The client address (the proxy headers only when trusted).
fn client_ip(state: &AppState, peer: SocketAddr, headers: &HeaderMap) -> std::net::IpAddr {
    state.client_ip(peer.ip(), headers)
}

/// A 404, unless this address has had too many of them (`not_found_per_ip`): then 429. A
/// browser goes to `server.not_found_url` instead, when it is set.
fn not_found(state: &AppState, peer: SocketAddr, code: &str, headers: &HeaderMap) -> Response {
    let ip = client_ip(state, peer, headers);
    if let Err(e) = state.limits.check_ip(Limit::NotFoundPerIp, ip, 1) {
        return rate_limited(state, e, headers);
    }
    let elsewhere = state.config.server.not_found_url.trim();
    if !elsewhere.is_empty() && !wants_json(headers) {
        if let Ok(location) = HeaderValue::from_str(elsewhere) {
            let mut response = StatusCode::FOUND.into_response();
            let h = response.headers_mut();
            h.insert(header::LOCATION, location);
            h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
            return response;
        }
    }
    missing(state, StatusCode::NOT_FOUND, code, headers)
}

/// 429 with `Retry-After`: problem+json for JSON clients, else the page.
pub(super) fn rate_limited(state: &AppState, e: RateLimited, headers: &HeaderMap) -> Response {
    let secs = e.retry_after_secs;
    let mut response = if wants_json(headers) {
        ApiError::from(e).into_response()
    } else {
        state.pages.rate_limited(secs, headers)
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
        state.pages.error(status, headers)
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}

pub(super) fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json") || v.contains("application/problem+json"))
}
