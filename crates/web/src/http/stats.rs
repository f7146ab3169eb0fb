//! Visit and statistics handlers (see docs/api.md, "Statistics and visits"): a link's
//! statistics and visits (JSON pages or streamed CSV), the system-wide statistics, and
//! `/metrics`. Statistics read counters only.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::api::{page_params, CodePath};
use crate::config::Role;
use crate::model::Millis;
use crate::visits::stats::{self, Granularity, MAX_POINTS};
use crate::web::access::blocking;
use crate::web::caller::Caller;
use crate::web::csv::{csv_response, VisitView};
use crate::web::error::ApiError;
use crate::web::state::AppState;

/// A query time: RFC 3339, or a UTC date `YYYY-MM-DD` (its midnight).
fn parse_time(params: &HashMap<String, String>, field: &str) -> Result<Option<Millis>, ApiError> {
    let Some(text) = params.get(field).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::bad_request(
            "invalid_query",
            field,
            format!("`{text}` is not an RFC 3339 time or a YYYY-MM-DD date"),
        )
    };
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .or_else(|_| OffsetDateTime::parse(&format!("{text}T00:00:00Z"), &Rfc3339))
        .map_err(|_| bad())?;
    let ms = u64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).map_err(|_| bad())?;
    Ok(Some(ms))
}

/// `GET /api/v1/links/{code}/stats?from&to&granularity=hour|day`.
#[utoipa::path(get, path = "/api/v1/links/{code}/stats", tag = "statistics", params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404")), security(("api_key" = [])),
    responses((status = 200, description = "`{total, unique_visitors, bots, series, top}`")))]
pub async fn link_stats(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<stats::LinkStats>, ApiError> {
    let link = crate::web::access::authorized_link(&state, &caller, &code, Role::Viewer)?;
    let to = parse_time(&params, "to")?.unwrap_or_else(|| state.links.now() + 1);
    let from = parse_time(&params, "from")?.unwrap_or(link.created_at);
    if from >= to {
        return Err(ApiError::bad_request(
            "invalid_query",
            "from",
            "`from` must be before `to`",
        ));
    }
    let granularity = match params.get("granularity").map(String::as_str) {
        None | Some("") => Granularity::for_range(from, to),
        Some("hour") => Granularity::Hour,
        Some("day") => Granularity::Day,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                "granularity",
                format!("`{other}` is not one of hour, day"),
            ))
        }
    };
    if granularity.points(from, to) > MAX_POINTS {
        return Err(ApiError::bad_request(
            "invalid_query",
            "granularity",
            format!("the range needs more than {MAX_POINTS} points; use a coarser granularity or a shorter range"),
        ));
    }
    let service = state.stats.clone();
    let stats = blocking(move || service.link(&link, from, to, granularity)).await?;
    Ok(Json(stats))
}

#[derive(Serialize)]
struct VisitPageView {
    items: Vec<VisitView>,
    next_cursor: Option<String>,
}

/// `GET /api/v1/links/{code}/visits?cursor&limit`, or `?format=csv` for all of them streamed.
#[utoipa::path(get, path = "/api/v1/links/{code}/visits", tag = "statistics", params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404")), security(("api_key" = [])),
    responses((status = 200, description = "`{items, next_cursor}`, or CSV with `format=csv`")))]
pub async fn link_visits(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let link = crate::web::access::authorized_link(&state, &caller, &code, Role::Viewer)?;
    let (after, limit) = page_params(&params)?;
    match params.get("format").map(String::as_str) {
        None | Some("") | Some("json") => {}
        Some("csv") => {
            state.plans.require_in(&link.space, "export", "format")?;
            return Ok(csv_response(state.stats.clone(), link.id, after, &code));
        }
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                "format",
                format!("`{other}` is not one of json, csv"),
            ))
        }
    }
    let service = state.stats.clone();
    let page = blocking(move || service.visits(link.id, after, limit)).await?;
    Ok(Json(VisitPageView {
        items: page.items.into_iter().map(VisitView::from).collect(),
        next_cursor: page.next.map(|n| n.to_string()),
    })
    .into_response())
}

/// `GET /api/v1/stats`.
#[utoipa::path(get, path = "/api/v1/stats", tag = "statistics", security(("api_key" = [])),
    responses((status = 200, description = "`{links, today, days}`")))]
pub async fn system_stats(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<stats::SystemStats>, ApiError> {
    let spaces = caller.require(Role::Viewer)?.spaces.clone();
    let service = state.stats.clone();
    Ok(Json(
        blocking(move || service.system(spaces.as_deref())).await?,
    ))
}

/// `GET /metrics`, Prometheus text. Needs no key.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text")))]
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let text = {
        let s = state.clone();
        blocking(move || s.health.metrics_text()).await?
    };
    let mut response = (StatusCode::OK, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(response)
}
