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

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

pub use super::asked::Visit;
use super::asked::{host_of, redirect_to, retry_after, Asked, CACHE_CONTROL};
use super::gates::{self, Posted};
use super::observe::count_unmatched;
use crate::limits::Limit;
use crate::links::{Choice, LinkState, RequestFacts, Resolution, Routed, Unlock};
use crate::model::options::App;
use crate::model::{code_key, gate, Gate, InApp, LinkOptions, Passed, Route};
use crate::web::error::ApiError;
use crate::web::pages::PreviewHidden;
use crate::web::state::AppState;

#[utoipa::path(get, path = "/{code}", tag = "redirect",
    description = "`HEAD /{code}` answers what a `GET` would, but records no visit and claims no slot of a visit cap. `GET /{code}+` previews the destination instead of redirecting, and shows it only where a visitor reaches it without a gate (no password, no form; before `valid_from` it is 404).",
    params(("code" = String, Path, description = "A short code"),
        ("X-Link-Password" = Option<String>, Header, description = "The password of a protected link")),
    responses((status = 302, description = "To the long URL (status per `server.redirect_status`); for a link with rules or targets, to the destination they choose; for an ended link with a `fallback_url`, there"),
        (status = 200, description = "A protected link, to a browser: the password form"),
        (status = 401, description = "A protected link, to a JSON client without `X-Link-Password`: `password_required`"),
        (status = 403, description = "A wrong `X-Link-Password` (`wrong_password`), or a blocked destination"),
        (status = 404, description = "No such code, or a link before its `valid_from`"),
        (status = 410, description = "Expired (by date or visit cap) or deleted"),
        (status = 429, description = "Over `password_per_ip` or another address limit (`rate_limited`), or every password check `memory.budget` allows is running (`busy`, `Retry-After: 1`)")))]
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
    answer(&state, peer, code.as_deref(), query, &headers, visit)
        .finish(query, None)
        .await
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
    // With nothing to post to, the same answer a GET gets.
    answer(&state, peer, Some(&code), query, &headers, Visit::Posted)
        .finish(query, Some(body))
        .await
}

/// The answer to `/{code}`: at once (plain links, errors), or after the link's options have
/// been worked through ([`Later::finish`]).
pub enum Answer {
    Now(Response),
    Later(Box<Later>),
}

impl Answer {
    /// The response; a link with options is finished first (`body`: a post's form).
    pub async fn finish(self, raw_query: &str, body: Option<Posted>) -> Response {
        match self {
            Answer::Now(response) => response,
            Answer::Later(later) => later.finish(raw_query, body).await,
        }
    }
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
    answer_to(&Asked::new(state, peer, headers, visit), code, raw_query)
}

/// [`answer`], to `asked`.
fn answer_to(asked: &Asked<'_>, code: Option<&str>, raw_query: &str) -> Answer {
    let (state, headers) = (asked.state, asked.headers);
    if state.limits.limits_redirects() {
        if let Err(e) = state.limits.check_ip(Limit::RedirectPerIp, asked.ip(), 1) {
            return asked.rate_limited(e).into();
        }
    }
    // A key's separator is no code character: `/sale@3` must not reach another domain's link.
    let Some(code) = code.filter(|c| !c.contains(crate::model::domain::KEY_SEPARATOR)) else {
        return not_found(asked, code.unwrap_or("")).into();
    };
    // The request's domain (SPEC §26): its codes are kept under keys of their own. Nothing is
    // read while no other domain than the default is configured, and a default-domain key is
    // the code itself.
    let domains = state.links.domains();
    let domain = if domains.any_other() {
        domains.route(host_of(headers))
    } else {
        crate::model::DEFAULT_DOMAIN
    };
    if let Some(code) = code.strip_suffix('+') {
        return preview(asked, code, &code_key(domain, code)).into();
    }
    match state.links.resolve(&code_key(domain, code)) {
        Ok(Resolution::Found {
            id,
            url,
            state: None,
            in_app_from,
        }) => {
            // A plain link meets no gate but the in-app page, and only when that is the
            // default or its team's plan says so (`in_app_days`).
            if state.config.links.in_app == InApp::Interstitial || plan_in_app(state, in_app_from) {
                let ua = asked.text(header::USER_AGENT);
                if let Gate::InAppPage(app) = gate(None, InApp::Interstitial, Passed::default(), ua)
                {
                    return gates::in_app_page(asked, id, code, &url, app).into();
                }
            }
            found(asked, id, code, &url, None).into()
        }
        Ok(Resolution::Found {
            state: Some(link),
            in_app_from,
            ..
        }) => decide(
            asked,
            code,
            link,
            raw_query,
            plan_in_app(state, in_app_from),
        ),
        Ok(Resolution::Gone { fallback }) => gone(asked, code, fallback).into(),
        Ok(Resolution::NotFound) => not_found(asked, code).into(),
        Ok(Resolution::Blocked) => blocked(asked, code).into(),
        Err(e) => ApiError::from(e).into_response().into(),
    }
}

/// A link with options, decided in memory where it can be: before `valid_from` the code is
/// unknown; a redirect chosen by rules and rotation with nothing to count is answered here.
/// A password to check or a cap to count goes on asynchronously ([`Later`]).
fn decide(
    asked: &Asked<'_>,
    code: &str,
    link: Arc<LinkState>,
    raw_query: &str,
    in_app_by_plan: bool,
) -> Answer {
    let state = asked.state;
    if link.not_yet(state.links.now()) {
        return not_found(asked, code).into();
    }
    let later = |choice| {
        Answer::Later(Box::new(Later {
            state: state.clone(),
            peer: asked.peer,
            code: code.to_string(),
            link: link.clone(),
            headers: asked.headers.clone(),
            visit: asked.visit,
            choice,
            in_app_by_plan,
        }))
    };
    let passed = Passed {
        password: false,
        form: link.options.form.is_some() && gates::has_pass(state, link.id, asked.headers),
    };
    let ua = asked.text(header::USER_AGENT);
    match gate_by_plan(
        Some(&link.options),
        state.config.links.in_app,
        passed,
        ua,
        in_app_by_plan,
    ) {
        Gate::Password => return later(None),
        Gate::Form if asked.visit == Visit::Posted => return later(None),
        Gate::Form => return gates::form_page(asked, code, &link, None).into(),
        Gate::InAppPage(app) => {
            return gates::in_app_page(asked, link.id, code, &link.url, app).into()
        }
        Gate::CrawlerPreview => return gates::crawler_page(asked, &link).into(),
        Gate::Destination => {}
    }
    match state.links.choose(&link, facts(asked, raw_query)) {
        Choice::Done(routed) => routed_answer(asked, code, &link, routed).into(),
        // A HEAD answers where a GET would go, claiming no cap slot.
        counted if !asked.visit.counts() => {
            let routed = counted.uncounted(&link);
            routed_answer(asked, code, &link, routed).into()
        }
        counted => later(Some(counted)),
    }
}

/// Whether the link's team's plan sends in-app visitors to the in-app page now: past
/// `in_app_days` after the link's creation (decided from the cached entry, no read).
fn plan_in_app(state: &AppState, in_app_from: Option<u64>) -> bool {
    in_app_from.is_some_and(|from| state.links.now() >= from)
}

/// [`gate`], with the in-app page forced by the team's plan whatever the link's own `in_app`
/// says (SPEC §25): the password and the form still come first.
fn gate_by_plan(
    options: Option<&LinkOptions>,
    in_app: InApp,
    passed: Passed,
    ua: &str,
    by_plan: bool,
) -> Gate {
    match gate(options, in_app, passed, ua) {
        decided @ (Gate::Destination | Gate::CrawlerPreview) if by_plan => {
            App::of_user_agent(ua).map_or(decided, Gate::InAppPage)
        }
        decided => decided,
    }
}

/// What the rules read from a request.
fn facts<'a>(asked: &Asked<'a>, raw_query: &'a str) -> RequestFacts<'a> {
    RequestFacts {
        ip: asked.ip(),
        user_agent: asked.text(header::USER_AGENT),
        accept_language: asked.text(header::ACCEPT_LANGUAGE),
        raw_query,
    }
}

/// The answer to a routed redirect of a link with options.
fn routed_answer(asked: &Asked<'_>, code: &str, link: &LinkState, routed: Routed) -> Response {
    match routed {
        Routed::Go { url, route } => {
            let mut response = found(asked, link.id, code, &url, Some(route));
            // A protected link's destination is no one else's business.
            if link.protected() {
                response
                    .headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            }
            response
        }
        Routed::Ended { fallback } => gone(asked, code, fallback),
    }
}

/// The redirect itself, and the visit of a `GET` handed to the visit queue.
fn found(asked: &Asked<'_>, id: u64, code: &str, url: &str, route: Option<Route>) -> Response {
    let status = StatusCode::from_u16(asked.state.config.server.redirect_status)
        .unwrap_or(StatusCode::FOUND);
    let Some(response) = redirect_to(status, url) else {
        return ApiError::internal(format!("stored URL of `{code}` is not a header value"))
            .into_response();
    };
    asked.record(id, code, route);
    response
}

/// A link whose time has passed: to its `fallback_url` if it has one (no visit), else a
/// browser to its domain's `not_found_url` when set, else 410.
fn gone(asked: &Asked<'_>, code: &str, fallback: Option<Arc<str>>) -> Response {
    if let Some(response) = fallback.and_then(|url| redirect_to(StatusCode::FOUND, &url)) {
        return response;
    }
    if !asked.wants_json() {
        let domain = asked.state.links.domains().routed(host_of(asked.headers));
        if let Some(response) = domain
            .not_found_url
            .as_deref()
            .and_then(|url| redirect_to(StatusCode::FOUND, url))
        {
            return response;
        }
    }
    missing(asked, StatusCode::GONE, code)
}

/// What a domain answers itself (SPEC §26), before the router: `/` to its `root_url`, and
/// its well-known files for apps. `None`: the request goes on as it would.
pub fn domain_answer(
    state: &AppState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Option<Response> {
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    let routed = || state.links.domains().routed(host_of(headers));
    match path {
        "/" => {
            let domain = routed();
            redirect_to(StatusCode::FOUND, domain.root_url.as_deref()?)
        }
        "/.well-known/apple-app-site-association" | "/.well-known/assetlinks.json" => {
            let domain = routed();
            let body = if path.ends_with(".json") {
                domain.assetlinks.clone()?
            } else {
                domain.apple_app_site_association.clone()?
            };
            let mut response = body.into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Some(response)
        }
        _ => None,
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
    /// The team's plan sends in-app visitors to the in-app page ([`plan_in_app`]).
    in_app_by_plan: bool,
}

impl Later {
    /// The gates that wait: a protected link wants its password first (`body`: the visitor's
    /// post, else `X-Link-Password`); a posted form is checked and stored; then the gates
    /// after them (the form page, the in-app page, the crawler preview), or the rules, the
    /// rotation and the caps choose the destination, or end the link. (`valid_from` was
    /// checked by `decide`, which made this.)
    pub async fn finish(self, raw_query: &str, body: Option<Posted>) -> Response {
        let Later {
            state,
            peer,
            code,
            link,
            headers,
            visit,
            choice,
            in_app_by_plan,
        } = self;
        let asked = Asked::new(&state, peer, &headers, visit);
        let password = body
            .as_ref()
            .and_then(|b| gates::posted(b, "password"))
            .map(str::to_string);
        if link.protected() {
            let from_form = body.is_some();
            if let Some(refused) =
                check_password(&asked, &code, &link, password.clone(), from_form).await
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
                match gates::submit(&asked, &code, &link, body, password.as_deref()).await {
                    Ok(cookie) => {
                        passed.form = true;
                        pass_cookie = Some(cookie);
                    }
                    Err(refused) => return refused,
                }
            }
        }
        let ua = asked.text(header::USER_AGENT);
        let mut response = match gate_by_plan(
            Some(&link.options),
            state.config.links.in_app,
            passed,
            ua,
            in_app_by_plan,
        ) {
            Gate::Password | Gate::Form => {
                gates::form_page(&asked, &code, &link, password.as_deref())
            }
            Gate::InAppPage(app) => gates::in_app_page(&asked, link.id, &code, &link.url, app),
            Gate::CrawlerPreview => gates::crawler_page(&asked, &link),
            Gate::Destination => {
                let choice =
                    choice.unwrap_or_else(|| state.links.choose(&link, facts(&asked, raw_query)));
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
                routed_answer(&asked, &code, &link, routed)
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
    asked: &Asked<'_>,
    code: &str,
    link: &Arc<LinkState>,
    form: Option<String>,
    from_form: bool,
) -> Option<Response> {
    let state = asked.state;
    let given = form.or_else(|| {
        asked
            .headers
            .get(PASSWORD_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    let Some(password) = given else {
        return Some(if asked.wants_json() {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "password_required",
                format!("the link `{code}` is protected: send its password in X-Link-Password"),
            )
            .into_response()
        } else {
            state
                .pages
                .unlock(&format!("/{code}"), false, asked.headers)
        });
    };
    if let Err(e) = state.limits.check_ip(Limit::PasswordPerIp, asked.ip(), 1) {
        return Some(asked.rate_limited(e));
    }
    match state.links.unlock(link, &password).await {
        Unlock::Right => return None,
        Unlock::Busy => return Some(busy(asked)),
        Unlock::Wrong => {}
    }
    Some(if from_form {
        state.pages.unlock(&format!("/{code}"), true, asked.headers)
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
fn busy(asked: &Asked<'_>) -> Response {
    let response = if asked.wants_json() {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "busy",
            "every password check the server's memory budget allows is running; retry in 1 s",
        )
        .into_response()
    } else {
        asked.state.pages.rate_limited(1, asked.headers)
    };
    retry_after(response, 1)
}

/// The header a client sends a protected link's password in.
const PASSWORD_HEADER: &str = "x-link-password";

/// `GET /{code}+`: the destination, escaped, with a button to go on. Counts no visit. It
/// shows only what a visitor reaches without a gate: a link before its `valid_from` is as
/// unknown as on `/{code}`, and the destination of a link behind a password or a form is not
/// shown (a blocked link answers 403 like the redirect).
fn preview(asked: &Asked<'_>, code: &str, key: &str) -> Response {
    let state = asked.state;
    match state.links.resolve(key) {
        Ok(Resolution::Found {
            url, state: link, ..
        }) => {
            if link.as_ref().is_some_and(|l| l.not_yet(state.links.now())) {
                return not_found(asked, code);
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
                Some(_) => match state.links.get(key) {
                    Ok(link) => state.links.short_url_of(&link),
                    Err(_) => state.links.short_url(code),
                },
                None => url.to_string(),
            };
            let mut response = state.pages.preview(&shown, hidden, asked.headers);
            let cache_control = match hidden {
                Some(_) => HeaderValue::from_static("no-store"),
                None => CACHE_CONTROL,
            };
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, cache_control);
            response
        }
        Ok(Resolution::Gone { .. }) => missing(asked, StatusCode::GONE, code),
        Ok(Resolution::NotFound) => not_found(asked, code),
        Ok(Resolution::Blocked) => blocked(asked, code),
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
fn blocked(asked: &Asked<'_>, code: &str) -> Response {
    let mut response = if asked.wants_json() {
        ApiError::blocked_url(format!("the destination of `{code}` is on a blocked host"))
            .into_response()
    } else {
        asked
            .state
            .pages
            .error(StatusCode::FORBIDDEN, asked.headers)
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
    let asked = Asked::new(&state, peer, &headers, Visit::NotCounted);
    // Only what could be a short link goes to `not_found_url`; the API's and the pages' own
    // paths answer 404 as they are.
    let own = ["/api/", "/ui/", "/static/", "/rest/", "/yourls-api.php"]
        .iter()
        .any(|prefix| uri.path().starts_with(prefix));
    let response = if own {
        missing(&asked, StatusCode::NOT_FOUND, "")
    } else {
        not_found_as(&asked, "", Missing::Other)
    };
    count_unmatched(&state, &method, response.status());
    response
}

/// What a 404 is for: a code no link has, or another path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    Code,
    Other,
}

/// A 404 for a code no link has ([`not_found_as`]).
fn not_found(asked: &Asked<'_>, code: &str) -> Response {
    not_found_as(asked, code, Missing::Code)
}

/// A 404, unless this address has had too many of them (`not_found_per_ip`): then 429. A
/// browser goes to its domain's `not_found_url` (a code) or `other_url` (another path)
/// instead, when set, else to `server.not_found_url`, when set.
fn not_found_as(asked: &Asked<'_>, code: &str, what: Missing) -> Response {
    let state = asked.state;
    if let Err(e) = state.limits.check_ip(Limit::NotFoundPerIp, asked.ip(), 1) {
        return asked.rate_limited(e);
    }
    if !asked.wants_json() {
        let domain = state.links.domains().routed(host_of(asked.headers));
        let url = match what {
            Missing::Code => domain.not_found_url.as_deref(),
            Missing::Other => domain.other_url.as_deref(),
        };
        if let Some(response) = url.and_then(|url| redirect_to(StatusCode::FOUND, url)) {
            return response;
        }
    }
    let elsewhere = state.config.server.not_found_url.trim();
    if !elsewhere.is_empty() && !asked.wants_json() {
        if let Some(response) = redirect_to(StatusCode::FOUND, elsewhere) {
            return response;
        }
    }
    missing(asked, StatusCode::NOT_FOUND, code)
}

/// 404 or 410: problem+json for JSON clients, else the page.
fn missing(asked: &Asked<'_>, status: StatusCode, code: &str) -> Response {
    let mut response = if asked.wants_json() {
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
        asked.state.pages.error(status, asked.headers)
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}
