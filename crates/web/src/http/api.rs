//! `/api/v1` handlers: thin adapters between HTTP and the domain service. They check
//! the caller, parse, call [`crate::links::Links`] or [`crate::pools::Pools`] on the blocking
//! pool (writes wait for a durable flush), and shape the JSON. No business rules here.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequest, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::config::Role;
use crate::health::HealthStatus;
use crate::links::{
    form_json, rfc3339, rules_json, targets_json, CreateLink, UpdateLink, MAX_BATCH,
};
use crate::model::{CapSlot, EndedBy, InApp, Link, LinkQuery, LinkStatus, ReviewMark};
use crate::web::access::{
    audit_created, audit_link, authorize_create, authorized_link, blocking, check_create_rate,
    create_space,
};
use crate::web::caller::{Caller, ClientIp};
use crate::web::error::{from_value, ApiError, JsonBody};
use crate::web::state::AppState;

/// Most links in one listing page.
pub const MAX_PAGE: usize = 1000;
const DEFAULT_PAGE: usize = 100;

/// A link's latest verdict as `GET` of a link shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ReviewMarkView {
    pub verdict: &'static str,
    pub score: Option<f64>,
    pub reason: Option<String>,
    pub at: String,
}

impl From<&ReviewMark> for ReviewMarkView {
    fn from(m: &ReviewMark) -> Self {
        Self {
            verdict: m.verdict.as_str(),
            score: m.score,
            reason: m.reason.clone(),
            at: rfc3339(m.at),
        }
    }
}

/// A link as the API shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct LinkView {
    pub id: u64,
    pub code: String,
    /// The host of the link's domain (SPEC §26).
    pub domain: String,
    pub short_url: String,
    pub url: String,
    pub space: String,
    pub length: usize,
    /// active, expired or deleted.
    #[schema(value_type = String)]
    pub status: LinkStatus,
    pub custom: bool,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: Option<String>,
    pub title: Option<String>,
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visits_total: Option<u64>,
    /// True when visitors need a password (never shown).
    pub password_protected: bool,
    /// Redirects after which the link ends.
    pub max_visits: Option<u64>,
    /// What is left of `max_visits` (on `GET` of one link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visits_remaining: Option<u64>,
    /// Before this, the code answers 404.
    pub valid_from: Option<String>,
    /// Where visitors go once the link has ended.
    pub fallback_url: Option<String>,
    /// `[{"if": {conditions}, "url"}]`, the first that holds decides.
    #[schema(value_type = Vec<Object>)]
    pub rules: serde_json::Value,
    /// `[{"url", "weight", "max_visits"?, "visits_remaining"?}]`.
    #[schema(value_type = Vec<Object>)]
    pub targets: serde_json::Value,
    /// `weighted`, `round_robin` or `failover` (with targets).
    pub rotation: Option<&'static str>,
    /// Why an expired link ended: `expiry` or `max_visits`.
    pub ended_by: Option<&'static str>,
    /// `direct` or `interstitial` when the link says; `null`: `links.in_app` decides.
    pub in_app: Option<&'static str>,
    /// The form visitors fill before the destination:
    /// `{"fields": [{"name", "label", "type", "required"}], "consent", "retention"}`.
    #[schema(value_type = Option<Object>)]
    pub form: Option<serde_json::Value>,
    /// What link-preview crawlers are shown.
    pub og_title: Option<String>,
    pub og_description: Option<String>,
    pub og_image: Option<String>,
    /// The latest verdict of the review of its destinations; `null`: never reviewed.
    pub review: Option<ReviewMarkView>,
    /// What the link has beyond its URL: `password`, `max_visits`, `valid_from`,
    /// `fallback_url`, `rules`, `targets`, `in_app`, `form`, `preview`.
    pub features: Vec<&'static str>,
}

impl LinkView {
    pub fn new(state: &AppState, link: &Link) -> Self {
        let options = link.options.as_deref();
        let preview = options.and_then(|o| o.preview.as_ref());
        Self {
            id: link.id,
            code: link.code.clone(),
            domain: state.links.domain_of(link),
            short_url: state.links.short_url_of(link),
            url: link.url.clone(),
            space: link.space.clone(),
            length: link.code.len(),
            status: link.status,
            custom: link.custom,
            created_at: rfc3339(link.created_at),
            updated_at: rfc3339(link.updated_at),
            expires_at: link.expires_at.map(rfc3339),
            title: link.title.clone(),
            tags: link.tags.clone(),
            created: None,
            visits_total: None,
            password_protected: options.is_some_and(|o| o.password.is_some()),
            max_visits: options.and_then(|o| o.max_visits),
            visits_remaining: None,
            valid_from: options.and_then(|o| o.valid_from).map(rfc3339),
            fallback_url: options.and_then(|o| o.fallback_url.clone()),
            rules: rules_json(options.map_or(&[][..], |o| &o.rules)),
            targets: options.map_or(serde_json::Value::Array(Vec::new()), |o| {
                targets_json(o, &[])
            }),
            rotation: options
                .filter(|o| !o.targets.is_empty())
                .map(|o| o.rotation.as_str()),
            ended_by: link.ended_by().map(EndedBy::as_str),
            in_app: options.and_then(|o| o.in_app).map(InApp::as_str),
            form: options.and_then(|o| o.form.as_ref()).map(form_json),
            og_title: preview.and_then(|p| p.title.clone()),
            og_description: preview.and_then(|p| p.description.clone()),
            og_image: preview.and_then(|p| p.image.clone()),
            review: link.review.as_ref().map(Into::into),
            features: options.map(|o| o.markers()).unwrap_or_default(),
        }
    }
}

/// The `{code}` of an API path on the domain its `?domain=HOST` names (the default domain
/// when absent), as the key the services address it by ([`crate::model::code_key`]); a path
/// that does not decode is an unknown code, an unconfigured HOST an unknown domain (404).
pub struct CodePath(pub String);

impl axum::extract::FromRequestParts<AppState> for CodePath {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Path(code) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found("no link has this code"))?;
        let host = domain_param(parts.uri.query());
        Ok(CodePath(
            state.links.domains().key_of(host.as_deref(), &code)?,
        ))
    }
}

/// The `domain` parameter of a query string, if any.
pub fn domain_param(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "domain")
        .map(|(_, v)| v.into_owned())
}

/// `cursor` and `limit` of a listing (a limit over [`MAX_PAGE`] is clamped).
pub fn page_params(params: &HashMap<String, String>) -> Result<(Option<u64>, usize), ApiError> {
    let after = match params.get("cursor").filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(c.parse::<u64>().map_err(|_| {
            ApiError::bad_request("invalid_query", "cursor", format!("`{c}` is not a cursor"))
        })?),
    };
    let limit = match params.get("limit") {
        None => DEFAULT_PAGE,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_query",
                    "limit",
                    format!("`{l}` is not a positive number"),
                )
            })?
            .min(MAX_PAGE),
    };
    Ok((after, limit))
}

/// Rejects a request without any usable key before its body is read, so that a missing key
/// is 401 whatever the body holds.
fn authenticate_writer(state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    if caller.0.is_none() && state.accounts.ring().anonymous_create {
        return Ok(());
    }
    caller.require(Role::Editor).map(|_| ())
}

/// The client address (the proxy headers only when trusted).
fn request_ip(state: &AppState, request: &Request) -> IpAddr {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    state.client_ip(peer, request.headers())
}

#[utoipa::path(post, path = "/api/v1/links", tag = "links", request_body = CreateLink, security(("api_key" = [])),
    responses((status = 201, description = "Created", body = LinkView),
        (status = 200, description = "The existing link of this URL (dedup: a create that sets no option, of the same space, length and URL as an active generated link without options; a create that sets any option always makes a link of its own)", body = LinkView),
        (status = 400, description = "Invalid input, or an unknown field (`unknown_field`), as problem+json naming the field"),
        (status = 403, description = "The space's team's plan (SPEC §25) lacks a feature the request uses (`feature_not_in_plan`, naming the field: `password`, `length`, `code`, `domain` for a domain other than the default, …), or `domain` belongs to another team (`forbidden`, field `domain`), or the create is past one of its limits (`quota_exceeded` with `quota` — `links_per_month`, `active_links`, `max_ttl` — `limit` and `used`); nothing is written"),
        (status = 409, description = "The code is taken (problem+json)"),
        (status = 415, description = "The body is not sent as `application/json` (problem+json)"),
        (status = 429, description = "Over a rate limit, or past `auth_per_ip` after failed keys (problem+json, `Retry-After`)"),
        (status = 503, description = "No code available (problem+json)")))]
pub async fn create_link(
    State(state): State<AppState>,
    caller: Caller,
    request: Request,
) -> Result<Response, ApiError> {
    authenticate_writer(&state, &caller)?;
    let ip = request_ip(&state, &request);
    check_create_rate(&state, &caller, ip, 1)?;
    let JsonBody(mut req) = JsonBody::<CreateLink>::from_request(request, &()).await?;
    let space = create_space(&caller, req.space.as_deref())?;
    authorize_create(&state, &caller, &space)?;
    req.space = Some(space);
    let (link, created) = state.links.create_async(req).await?;
    if created {
        audit_created(&state, caller.0.as_deref(), &link.space, ip, 1);
    }
    let mut view = LinkView::new(&state, &link);
    view.created = Some(created);
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)).into_response())
}

/// `POST /api/v1/links/batch` body: at most 1000 create requests.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    #[schema(value_type = Vec<CreateLink>)]
    links: Vec<serde_json::Value>,
}

#[derive(Serialize)]
struct BatchItem {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<LinkView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<serde_json::Value>,
}

#[utoipa::path(post, path = "/api/v1/links/batch", tag = "links", request_body = BatchRequest, security(("api_key" = [])),
    responses((status = 200, description = "One result per link, in order: `{ok, link}` or `{ok, error}` (an unknown field of an item is its `unknown_field` error, e.g. `links[3].lenght`)"),
        (status = 415, description = "The body is not sent as `application/json` (problem+json)")))]
pub async fn create_batch(
    State(state): State<AppState>,
    caller: Caller,
    request: Request,
) -> Result<Json<serde_json::Value>, ApiError> {
    authenticate_writer(&state, &caller)?;
    let ip = request_ip(&state, &request);
    let JsonBody(batch) = JsonBody::<BatchRequest>::from_request(request, &()).await?;
    if batch.links.len() > MAX_BATCH {
        return Err(ApiError::bad_request(
            "invalid_batch",
            "links",
            format!(
                "a batch holds at most {MAX_BATCH} links, not {}",
                batch.links.len()
            ),
        ));
    }
    // Every item counts, and a refused batch creates none of them.
    check_create_rate(&state, &caller, ip, batch.links.len())?;
    let count = batch.links.len();
    let mut results: Vec<Option<BatchItem>> = (0..count).map(|_| None).collect();
    let mut valid = Vec::with_capacity(count);
    let mut valid_index = Vec::with_capacity(count);
    for (index, value) in batch.links.into_iter().enumerate() {
        let mut req = match from_value::<CreateLink>(value) {
            Ok(req) => req,
            Err(e) => {
                results[index] = Some(failure(prefix_field(e, index)));
                continue;
            }
        };
        let space = match create_space(&caller, req.space.as_deref())
            .and_then(|space| authorize_create(&state, &caller, &space).map(|()| space))
        {
            Ok(space) => space,
            Err(e) => {
                results[index] = Some(failure(e));
                continue;
            }
        };
        req.space = Some(space);
        valid.push(req);
        valid_index.push(index);
    }
    let outcomes = state.links.create_many(valid).await;
    for (index, outcome) in valid_index.into_iter().zip(outcomes) {
        results[index] = Some(match outcome {
            Ok((link, created)) => {
                if created {
                    audit_created(&state, caller.0.as_deref(), &link.space, ip, 1);
                }
                let mut view = LinkView::new(&state, &link);
                view.created = Some(created);
                BatchItem {
                    ok: true,
                    link: Some(view),
                    error: None,
                }
            }
            Err(e) => failure(prefix_field(e.into(), index)),
        });
    }
    let results: Vec<BatchItem> = results.into_iter().flatten().collect();
    Ok(Json(serde_json::json!({ "results": results })))
}

fn failure(e: ApiError) -> BatchItem {
    BatchItem {
        ok: false,
        link: None,
        error: Some(e.to_json()),
    }
}

/// Names the item in a batch error's field: `links[3].url`.
fn prefix_field(mut e: ApiError, index: usize) -> ApiError {
    e.field = Some(match e.field.take() {
        Some(f) if f != "body" => format!("links[{index}].{f}"),
        _ => format!("links[{index}]"),
    });
    e
}

#[utoipa::path(get, path = "/api/v1/links", tag = "links", security(("api_key" = [])),
    params(("space" = Option<String>, Query), ("status" = Option<String>, Query), ("length" = Option<u8>, Query), ("q" = Option<String>, Query), ("domain" = Option<String>, Query, description = "Only the links of this domain (its host, SPEC §26); an unconfigured one: 400 `invalid_query` naming `domain`"), ("cursor" = Option<String>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "`{items, next_cursor}`"), (status = 400, description = "A filter's value is not one it takes (`invalid_query`, naming the filter: `status`, `length`, `domain`, `cursor`)")))]
pub async fn list_links(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let principal = caller.require(Role::Viewer)?;
    let space = params.get("space").filter(|s| !s.is_empty()).cloned();
    if let Some(space) = &space {
        caller.require_space(Role::Viewer, space)?;
    }
    let status = match params.get("status").map(String::as_str) {
        None | Some("") => None,
        Some(s) => Some(
            LinkStatus::ALL
                .into_iter()
                .find(|x| x.as_str() == s)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_query",
                        "status",
                        format!("`{s}` is not one of active, expired, deleted, archived"),
                    )
                })?,
        ),
    };
    let length = match params.get("length").filter(|l| !l.is_empty()) {
        None => None,
        Some(l) => Some(l.parse::<u8>().map_err(|_| {
            ApiError::bad_request("invalid_query", "length", format!("`{l}` is not a length"))
        })?),
    };
    // A host no domain has is a bad filter value, as the other filters' are.
    let domain = match params.get("domain").filter(|d| !d.trim().is_empty()) {
        None => None,
        Some(host) => Some(
            state
                .links
                .domains()
                .by_host(host)
                .map(|d| d.id)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_query",
                        "domain",
                        format!("`{host}` is no configured domain"),
                    )
                })?,
        ),
    };
    let (after, limit) = page_params(&params)?;
    let query = LinkQuery {
        space,
        status,
        length,
        domain,
        after,
        limit,
        ..LinkQuery::default()
    }
    .search(params.get("q").map(String::as_str));
    let links = state.links.clone();
    let page = blocking(move || links.list(&query)).await?;
    let items: Vec<LinkView> = page
        .items
        .iter()
        .filter(|l| principal.allows_space(&l.space))
        .map(|l| LinkView::new(&state, l))
        .collect();
    Ok(Json(serde_json::json!({
        "items": items,
        "next_cursor": page.next.map(|n| n.to_string()),
    })))
}

#[utoipa::path(get, path = "/api/v1/links/{code}", tag = "links", params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404")), security(("api_key" = [])),
    responses((status = 200, description = "The link and `visits_total`", body = LinkView), (status = 404, description = "No such link")))]
pub async fn get_link(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
) -> Result<Json<LinkView>, ApiError> {
    let link = authorized_link(&state, &caller, &code, Role::Viewer)?;
    let mut view = LinkView::new(&state, &link);
    let (service, links) = (state.stats.clone(), state.links.clone());
    let (totals, counted) = blocking(move || {
        let counted = links.counted(&link)?;
        Ok::<_, ApiError>((service.totals(link.id)?, (link, counted)))
    })
    .await?;
    let (link, counted) = counted;
    view.visits_total = Some(totals.visits);
    if let Some(options) = link.options.as_deref() {
        view.visits_remaining = options.remaining(CapSlot::Link, &counted);
        view.targets = targets_json(options, &counted);
    }
    Ok(Json(view))
}

#[utoipa::path(patch, path = "/api/v1/links/{code}", tag = "links", params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404")), request_body = UpdateLink, security(("api_key" = [])),
    responses((status = 200, description = "The updated link", body = LinkView), (status = 400, description = "Invalid value or unknown field (problem+json naming it)"),
        (status = 403, description = "The link's team's plan lacks a feature the change sets (`feature_not_in_plan`, naming the field), or an `expires_at` past its `max_ttl` (`quota_exceeded`); nothing is written"),
        (status = 404, description = "No such link"), (status = 415, description = "The body is not sent as `application/json` (problem+json)")))]
pub async fn update_link(
    State(state): State<AppState>,
    caller: Caller,
    ClientIp(ip): ClientIp,
    CodePath(code): CodePath,
    request: Request,
) -> Result<Json<LinkView>, ApiError> {
    authorized_link(&state, &caller, &code, Role::Editor)?;
    let JsonBody(patch) = JsonBody::<UpdateLink>::from_request(request, &()).await?;
    let links = state.links.clone();
    let updated = blocking(move || links.update(&code, patch)).await?;
    audit_link(&state, caller.0.as_deref(), "link.updated", &updated, ip);
    Ok(Json(LinkView::new(&state, &updated)))
}

#[utoipa::path(delete, path = "/api/v1/links/{code}", tag = "links", params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404")), security(("api_key" = [])),
    responses((status = 204, description = "Deleted; redirects stop at once"), (status = 404, description = "No such link")))]
pub async fn delete_link(
    State(state): State<AppState>,
    caller: Caller,
    ClientIp(ip): ClientIp,
    CodePath(code): CodePath,
) -> Result<StatusCode, ApiError> {
    let link = authorized_link(&state, &caller, &code, Role::Editor)?;
    if link.status == LinkStatus::Deleted {
        return Err(ApiError::not_found(format!(
            "the link `{code}` is already deleted"
        )));
    }
    let links = state.links.clone();
    blocking(move || links.delete(&code)).await?;
    audit_link(&state, caller.0.as_deref(), "link.deleted", &link, ip);
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/pools", tag = "pools", security(("api_key" = [])),
    responses((status = 200, description = "`{pools: [...]}`, one per generated length")))]
pub async fn list_pools(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.require(Role::Viewer)?;
    let pools = state.pools.clone();
    let statuses = blocking(move || pools.tier_statuses()).await?;
    Ok(Json(serde_json::json!({ "pools": statuses })))
}

/// Most codes one refill request may generate.
const MAX_REFILL: u64 = 1_000_000;

#[utoipa::path(post, path = "/api/v1/pools/{length}/refill", tag = "pools", security(("api_key" = [])),
    params(("length" = u8, Path), ("count" = Option<u64>, Query)),
    responses((status = 200, description = "`{length, added}`")))]
pub async fn refill_pool(
    State(state): State<AppState>,
    caller: Caller,
    length: Result<Path<String>, axum::extract::rejection::PathRejection>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.require(Role::Admin)?;
    let length = length.map(|Path(l)| l).unwrap_or_default();
    let length: u8 = length.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_length",
            "length",
            format!("`{length}` is not a length"),
        )
    })?;
    let tier = state
        .config
        .tier(length)
        .filter(|_| state.pools.has_pool(length))
        .ok_or_else(|| ApiError::not_found(format!("there is no pool of length {length}")))?;
    let count = match params.get("count") {
        None => tier.batch,
        Some(c) => c
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=MAX_REFILL).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_query",
                    "count",
                    format!("count must be between 1 and {MAX_REFILL}, not `{c}`"),
                )
            })?,
    };
    let pools = state.pools.clone();
    let added = blocking(move || pools.refill(length, count)).await?;
    Ok(Json(
        serde_json::json!({ "length": length, "added": added }),
    ))
}

/// How long `POST /api/v1/maintenance/run` waits for the job before answering 202 and letting
/// it go on in the background. Small stores get their report at once; over a million links the
/// job takes minutes (it rests between chunks to leave the redirects their CPU), far beyond
/// the request timeout.
const MAINTENANCE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[utoipa::path(post, path = "/api/v1/maintenance/run", tag = "maintenance", security(("api_key" = [])),
    responses(
        (status = 200, description = "The job finished within 5 s: `{expired, recycled, retired, visits_pruned, took_ms}`"),
        (status = 202, description = "The job goes on in the background: `{status: \"started\", detail}`; `GET /api/v1/maintenance` reports when it is done")))]
pub async fn run_maintenance(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require(Role::Admin)?;
    let lifecycle = state.lifecycle.clone();
    let mut job = tokio::task::spawn_blocking(move || lifecycle.run());
    // On timeout the handle is dropped, which detaches the job: it runs to its end.
    match tokio::time::timeout(MAINTENANCE_WAIT, &mut job).await {
        Ok(done) => {
            let report = done??;
            Ok(Json(report).into_response())
        }
        Err(_) => Ok((
            StatusCode::ACCEPTED,
            Json(serde_json::json!({
                "status": "started",
                "detail": "the job goes on in the background; GET /api/v1/maintenance reports when it is done",
            })),
        )
            .into_response()),
    }
}

#[utoipa::path(get, path = "/api/v1/maintenance", tag = "maintenance", security(("api_key" = [])),
    responses((status = 200, description = "`{running, last}`: whether a run is under way, and the last finished run's report (or null)")))]
pub async fn maintenance_status(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<crate::jobs::lifecycle::MaintenanceStatus>, ApiError> {
    caller.require(Role::Admin)?;
    Ok(Json(state.lifecycle.status()))
}

#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive, and the store answers"), (status = 503, description = "The store does not answer")))]
pub async fn healthz(State(state): State<AppState>) -> Response {
    match state.health.check() {
        HealthStatus::Ok => Json(serde_json::json!({ "status": "ok" })).into_response(),
        HealthStatus::Unavailable(Some(reason)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "status": "unavailable", "reason": reason })),
        )
            .into_response(),
        HealthStatus::Unavailable(None) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "status": "unavailable" })),
        )
            .into_response(),
    }
}

pub async fn not_found(State(state): State<AppState>, method: axum::http::Method) -> ApiError {
    super::observe::count_unmatched(&state, &method, StatusCode::NOT_FOUND);
    ApiError::not_found("no such API route")
}

pub async fn method_not_allowed(
    State(state): State<AppState>,
    method: axum::http::Method,
) -> ApiError {
    super::observe::count_unmatched(&state, &method, StatusCode::METHOD_NOT_ALLOWED);
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not accept that method",
    )
}
