//! The Shlink-compatible REST API (`/rest/v3`, also answered as `/rest/v1` and `/rest/v2`,
//! which Shlink 4+ serves alike), so that Shlink's SDK, web client and CLI work against this
//! server. `docs/shlink.md` lists every Shlink route and field, answered or not, and how each
//! maps onto ours. Thin handlers as everywhere in `http/`: they read Shlink's shapes, call the
//! same services as `/api/v1` with the same key checks (roles and spaces), and shape Shlink's
//! answer.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`router`], the key extractor ([`ShlinkCaller`]), CORS, health, domains, Mercure, routes we do not answer (404 `not-found`) |
//! | `errors.rs` | Shlink's problem+json and the one translation of our errors into it |
//! | `shapes.rs` | the JSON views (short URL, visit, pagination), ATOM dates, PHP-style query strings |
//! | `short_urls.rs` | list, create, get, edit, delete short URLs |
//! | `visits.rs` | a short URL's visits, the visits overview, orphan visits (we have none) |
//! | `tags.rs` | tags, and tags with their counts |
//! | `rules.rs` | redirect rules, mapped both ways onto our link rules |

pub mod errors;
pub mod rules;
pub mod shapes;
pub mod short_urls;
pub mod tags;
pub mod visits;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};

use crate::config::Role;
use crate::health::HealthStatus;
use crate::model::{code_key, Link, LinkStatus};
use crate::web::access::authorized_link;
use crate::web::caller::Caller;
use crate::web::state::AppState;
use errors::from_api;
pub use errors::ShlinkError;

/// The Shlink version `/rest/health` reports. Clients turn features on by it: 5.0 has the
/// `before-date` and `after-date` rule conditions, which we map; 5.1's `browser` condition we
/// cannot, so we do not claim 5.1.
pub const SHLINK_VERSION: &str = "5.0.0";

/// The methods CORS preflights are told every `/rest` route may use.
const METHODS: &str = "GET,POST,PUT,PATCH,DELETE,OPTIONS";

/// `/rest/...`: the versioned routes three times, the unversioned health route, CORS around
/// all of it, and Shlink's 404 for the rest.
pub fn router() -> Router<AppState> {
    let rest = Router::new()
        .route("/health", get(health))
        .nest("/v1", versioned())
        .nest("/v2", versioned())
        .nest("/v3", versioned())
        .fallback(not_answered)
        .layer(middleware::from_fn(cors));
    Router::new().nest("/rest", rest)
}

fn versioned() -> Router<AppState> {
    Router::new()
        .route("/health", get(health))
        .route(
            "/short-urls",
            get(short_urls::list).post(short_urls::create),
        )
        .route(
            "/short-urls/{shortCode}",
            get(short_urls::get)
                .patch(short_urls::edit)
                .delete(short_urls::delete),
        )
        .route("/short-urls/{shortCode}/visits", get(visits::short_url))
        .route(
            "/short-urls/{shortCode}/redirect-rules",
            get(rules::get).post(rules::set).patch(rules::set),
        )
        .route("/visits", get(visits::overview))
        .route(
            "/visits/orphan",
            get(visits::orphan).delete(visits::delete_orphan),
        )
        .route("/tags", get(tags::list))
        .route("/tags/stats", get(tags::stats))
        .route("/domains", get(domains))
        .route("/domains/redirects", axum::routing::patch(set_redirects))
        .route("/mercure-info", get(mercure_info))
        // Shlink answers a method a path does not allow as an unknown route.
        .method_not_allowed_fallback(not_answered)
        .fallback(not_answered)
}

/// The caller of a `/rest` route: every one but health needs a known key. A missing key is
/// Shlink's `missing-authentication`, an unknown one `invalid-api-key`.
pub struct ShlinkCaller(pub Caller);

impl FromRequestParts<AppState> for ShlinkCaller {
    type Rejection = ShlinkError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        match Caller::from_request_parts(parts, state).await {
            Ok(Caller(None)) => Err(ShlinkError::missing_key()),
            Ok(caller) => Ok(ShlinkCaller(caller)),
            Err(e) => Err(from_api(e)),
        }
    }
}

impl ShlinkCaller {
    /// 403 when the key's role is below `role`.
    pub fn require(&self, role: Role) -> Result<&crate::keys::Principal, ShlinkError> {
        self.0.require(role).map_err(from_api)
    }

    /// The spaces the key sees (`None`: all).
    pub fn spaces(&self, role: Role) -> Result<Option<Vec<String>>, ShlinkError> {
        Ok(self.require(role)?.spaces.clone())
    }

    /// [`ShlinkCaller::link`] for a route that takes `?domain=`: a domain other than ours
    /// has no short URLs here.
    pub fn link_on(
        &self,
        state: &AppState,
        target: &ShortCode,
        role: Role,
    ) -> Result<Link, ShlinkError> {
        let Some(domain) = shlink_domain(state, target.params.get("domain"))
            .filter(|_| !target.code.contains(crate::model::domain::KEY_SEPARATOR))
        else {
            return Err(ShlinkError::short_url_not_found(&target.code));
        };
        let link = self.link(state, &code_key(domain, &target.code), role)?;
        Ok(link)
    }

    /// The link of `code` when the key may act on it with `role`. As in Shlink, a link outside
    /// the key's spaces is not found (never 403), and so is a deleted or recycled one (Shlink
    /// deletes its rows); a role too weak is 403.
    pub fn link(&self, state: &AppState, code: &str, role: Role) -> Result<Link, ShlinkError> {
        self.require(role)?;
        match authorized_link(state, &self.0, code, role) {
            Ok(link) if matches!(link.status, LinkStatus::Active | LinkStatus::Expired) => Ok(link),
            Ok(_) => Err(ShlinkError::short_url_not_found(code)),
            Err(e) if e.status == StatusCode::FORBIDDEN => {
                Err(ShlinkError::short_url_not_found(code))
            }
            Err(e) => Err(from_api(e).about(code)),
        }
    }
}

/// The `{shortCode}` of a path and the request's query string, as the routes about one short
/// URL read them. A path segment that does not decode names no short URL.
pub struct ShortCode {
    pub code: String,
    pub params: shapes::Params,
}

impl<S: Send + Sync> FromRequestParts<S> for ShortCode {
    type Rejection = ShlinkError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = shapes::Params::parse(parts.uri.query());
        match axum::extract::Path::<String>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(code)) => Ok(ShortCode { code, params }),
            Err(_) => Err(ShlinkError::route_not_found(
                parts.method.as_str(),
                &parts.uri.to_string(),
            )),
        }
    }
}

/// A JSON body as Shlink reads one: empty is `{}`; anything but an object is malformed.
pub fn json_object(body: &Bytes) -> Result<Map<String, Value>, ShlinkError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ShlinkError::malformed()),
    }
}

/// The domain a `domain` a client names: absent, `DEFAULT` or the authority of our base URL
/// is the default domain; a configured domain's host is that domain; anything else `None`.
pub fn shlink_domain(state: &AppState, domain: Option<&str>) -> Option<u16> {
    match domain.map(str::trim) {
        None | Some("") | Some("DEFAULT") => Some(crate::model::DEFAULT_DOMAIN),
        Some(d) if d.eq_ignore_ascii_case(&our_domain(state)) => Some(crate::model::DEFAULT_DOMAIN),
        Some(d) => state.links.domains().by_host(d).map(|d| d.id),
    }
}

/// The authority of the base URL: our one domain.
pub fn our_domain(state: &AppState) -> String {
    url::Url::parse(&state.config.server.base_url)
        .ok()
        .and_then(|u| {
            let host = u.host_str()?.to_string();
            Some(match u.port() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            })
        })
        .unwrap_or_default()
}

/// A JSON answer.
pub fn json_ok(value: impl serde::Serialize) -> Response {
    axum::Json(value).into_response()
}

/// CORS for browser clients (shlink-web-client sends `X-Api-Key`, which makes every request a
/// preflighted one): a preflight is answered here, without a key; every answer to a request
/// with an `Origin` may be read by any origin. No cookie is ever read on `/rest`, so an open
/// origin grants nothing a key does not.
async fn cors(request: Request, next: Next) -> Response {
    let has_origin = request.headers().contains_key(header::ORIGIN);
    if request.method() == Method::OPTIONS {
        let asked = request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned()
            .unwrap_or(HeaderValue::from_static(
                "X-Api-Key, Content-Type, Authorization",
            ));
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(METHODS),
        );
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("3600"),
        );
        headers.insert(header::ALLOW, HeaderValue::from_static(METHODS));
        return response;
    }
    let mut response = next.run(request).await;
    if has_origin {
        response.headers_mut().insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
    }
    response
}

/// `GET /rest/health` and `/rest/v3/health`: no key, `application/health+json`, 503 when the
/// store does not answer.
#[utoipa::path(get, path = "/rest/v3/health", tag = "shlink",
    responses((status = 200, description = "`{status: \"pass\", version, links}` as `application/health+json`; no key"), (status = 503, description = "`status: \"fail\"`")))]
pub async fn health(State(state): State<AppState>) -> Response {
    let (status, word) = match state.health.check() {
        HealthStatus::Ok => (StatusCode::OK, "pass"),
        HealthStatus::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "fail"),
    };
    let body = json!({
        "status": word,
        "version": SHLINK_VERSION,
        "links": {
            "about": "https://shlink.io",
            "project": "https://github.com/shlinkio/shlink",
        },
    });
    let mut response = (status, axum::Json(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/health+json"),
    );
    response
}

/// A domain's redirects as Shlink names them.
fn redirects_of(domain: &crate::model::Domain) -> Value {
    json!({
        "baseUrlRedirect": domain.root_url,
        "regular404Redirect": domain.other_url,
        "invalidShortUrlRedirect": domain.not_found_url,
    })
}

/// `GET /rest/v3/domains`: every domain (the default first, as our base URL's authority),
/// each with its redirects; `defaultRedirects` are the default domain's.
#[utoipa::path(get, path = "/rest/v3/domains", tag = "shlink", security(("api_key" = [])),
    responses((status = 200, description = "`{domains: {data: [{domain, isDefault, redirects: {baseUrlRedirect, regular404Redirect, invalidShortUrlRedirect}}], defaultRedirects}}`")))]
pub async fn domains(
    State(state): State<AppState>,
    caller: ShlinkCaller,
) -> Result<Response, ShlinkError> {
    caller.require(Role::Viewer)?;
    let all = state.links.domains().list();
    let default = state.links.domains().default();
    let data: Vec<Value> = all
        .iter()
        .map(|d| {
            json!({
                "domain": if d.is_default() { our_domain(&state) } else { d.host.clone() },
                "isDefault": d.is_default(),
                "redirects": redirects_of(d),
            })
        })
        .collect();
    Ok(json_ok(json!({
        "domains": {
            "data": data,
            "defaultRedirects": redirects_of(&default),
        }
    })))
}

/// `PATCH /rest/v3/domains/redirects`: `{domain, baseUrlRedirect?, regular404Redirect?,
/// invalidShortUrlRedirect?}` sets a domain's `root_url`, `other_url` and `not_found_url`
/// (`null` clears one; an absent one stays); admins. Answers the domain's redirects.
#[utoipa::path(patch, path = "/rest/v3/domains/redirects", tag = "shlink", request_body = inline(Object), security(("api_key" = [])),
    responses((status = 200, description = "`{baseUrlRedirect, regular404Redirect, invalidShortUrlRedirect}`"),
        (status = 400, description = "`invalid-data`: no `domain`, an unknown one, or a redirect that is no http(s) URL")))]
pub async fn set_redirects(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    body: Bytes,
) -> Result<Response, ShlinkError> {
    let principal = caller.require(Role::Admin)?;
    if !principal.everywhere() {
        return Err(from_api(crate::web::error::ApiError::forbidden(
            "domains are for admins of every space",
        )));
    }
    let body = json_object(&body)?;
    let field = |name: &str| -> Result<Option<Option<String>>, ()> {
        match body.get(name) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::String(s)) => Ok(Some(Some(s.clone()))),
            Some(_) => Err(()),
        }
    };
    let mut bad = Vec::new();
    let domain = match body.get("domain").and_then(Value::as_str) {
        Some(d) => match shlink_domain(&state, Some(d)) {
            Some(id) => state.links.domains().by_id(id),
            None => None,
        },
        None => None,
    };
    if domain.is_none() {
        bad.push("domain");
    }
    let mut patch = crate::domains::DomainPatch::default();
    for (name, slot) in [
        ("baseUrlRedirect", &mut patch.root_url),
        ("regular404Redirect", &mut patch.other_url),
        ("invalidShortUrlRedirect", &mut patch.not_found_url),
    ] {
        match field(name) {
            Ok(value) => *slot = value,
            Err(()) => bad.push(name),
        }
    }
    let Some(domain) = domain.filter(|_| bad.is_empty()) else {
        return Err(ShlinkError::invalid(&bad, "Provided data is not valid"));
    };
    let links = state.links.clone();
    let host = domain.host.clone();
    let patched = crate::web::access::blocking(move || {
        let now = links.now();
        links.domains().patch(&host, patch, now)
    })
    .await
    .map_err(from_api)?;
    Ok(json_ok(redirects_of(&patched)))
}

/// `GET /rest/v3/mercure-info`: 501, as Shlink without a Mercure hub; clients poll.
async fn mercure_info(caller: ShlinkCaller) -> Result<Response, ShlinkError> {
    caller.require(Role::Viewer)?;
    Err(ShlinkError::mercure_not_configured())
}

/// Every other `/rest` request: Shlink's 404 `not-found`, key or no key.
async fn not_answered(method: Method, uri: axum::extract::OriginalUri) -> ShlinkError {
    ShlinkError::route_not_found(method.as_str(), &uri.0.to_string())
}
