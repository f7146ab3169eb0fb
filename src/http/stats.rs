//! Visit and statistics handlers (see docs/api.md, "Statistics and visits"): a link's
//! statistics and visits (JSON pages or streamed CSV), the system-wide statistics, and
//! `/metrics`. Statistics read counters only.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::api::{blocking, page_params, CodePath};
use super::auth::Caller;
use super::error::ApiError;
use crate::config::Role;
use crate::csv_safe::CsvWriter;
use crate::links::rfc3339;
use crate::model::options::App;
use crate::model::{Millis, Visit};
use crate::state::AppState;
use crate::visits::stats::{self, Granularity, MAX_POINTS};
use crate::visits::Statistics;

/// Visits read per store call while streaming CSV: bounds the memory of one export.
pub const CSV_PAGE: usize = 1000;
/// CSV chunks buffered ahead of a slow client.
const CSV_AHEAD: usize = 4;

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
#[utoipa::path(get, path = "/api/v1/links/{code}/stats", tag = "statistics", params(("code" = String, Path, description = "The link's code")), security(("api_key" = [])),
    responses((status = 200, description = "`{total, unique_visitors, bots, series, top}`")))]
pub async fn link_stats(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<stats::LinkStats>, ApiError> {
    let link = super::api::authorized_link(&state, &caller, &code, Role::Viewer)?;
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

/// A visit as the API and the CSV export show it.
#[derive(Serialize)]
struct VisitView {
    id: u64,
    at: String,
    code: String,
    client_id: Arc<str>,
    ip: Option<Arc<str>>,
    user_agent: Arc<str>,
    referer: Arc<str>,
    browser: Arc<str>,
    browser_version: Arc<str>,
    os: Arc<str>,
    os_version: Arc<str>,
    device: Arc<str>,
    is_bot: bool,
    country: Option<Arc<str>>,
    region: Option<Arc<str>>,
    city: Option<Arc<str>>,
    isp: Option<Arc<str>>,
    /// `default`, `rule:N` or `target:N`; `in_app` or `preview` for a visit that stopped at
    /// the page for in-app browsers or for crawlers.
    route: Option<Arc<str>>,
    /// The in-app browser the visit came from (`wechat`, `qq`, …), read from its user agent.
    app: Option<&'static str>,
}

/// The columns of a visits CSV, in the order of [`VisitView::cells`].
const VISIT_COLUMNS: [&str; 19] = [
    "id",
    "at",
    "code",
    "client_id",
    "ip",
    "user_agent",
    "referer",
    "browser",
    "browser_version",
    "os",
    "os_version",
    "device",
    "is_bot",
    "country",
    "region",
    "city",
    "isp",
    "route",
    "app",
];

impl VisitView {
    /// The visit as a CSV row ([`VISIT_COLUMNS`]).
    fn cells(&self) -> [String; 19] {
        let text = |v: &Option<Arc<str>>| v.as_deref().unwrap_or("").to_string();
        [
            self.id.to_string(),
            self.at.clone(),
            self.code.clone(),
            self.client_id.to_string(),
            text(&self.ip),
            self.user_agent.to_string(),
            self.referer.to_string(),
            self.browser.to_string(),
            self.browser_version.to_string(),
            self.os.to_string(),
            self.os_version.to_string(),
            self.device.to_string(),
            self.is_bot.to_string(),
            text(&self.country),
            text(&self.region),
            text(&self.city),
            text(&self.isp),
            text(&self.route),
            self.app.unwrap_or("").to_string(),
        ]
    }
}

impl From<Visit> for VisitView {
    fn from(v: Visit) -> Self {
        let app = App::of_user_agent(&v.user_agent).map(App::as_str);
        VisitView {
            id: v.id,
            at: rfc3339(v.at),
            code: v.code,
            client_id: v.client_id,
            ip: v.ip,
            user_agent: v.user_agent,
            referer: v.referer,
            browser: v.browser,
            browser_version: v.browser_version,
            os: v.os,
            os_version: v.os_version,
            device: v.device,
            is_bot: v.is_bot,
            country: v.country,
            region: v.region,
            city: v.city,
            isp: v.isp,
            // A plain link's visits store no route (nothing to tell apart): theirs is the
            // default.
            route: v.route.or_else(|| Some(Arc::from("default"))),
            app,
        }
    }
}

#[derive(Serialize)]
struct VisitPageView {
    items: Vec<VisitView>,
    next_cursor: Option<String>,
}

/// `GET /api/v1/links/{code}/visits?cursor&limit`, or `?format=csv` for all of them streamed.
#[utoipa::path(get, path = "/api/v1/links/{code}/visits", tag = "statistics", params(("code" = String, Path, description = "The link's code")), security(("api_key" = [])),
    responses((status = 200, description = "`{items, next_cursor}`, or CSV with `format=csv`")))]
pub async fn link_visits(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let link = super::api::authorized_link(&state, &caller, &code, Role::Viewer)?;
    let (after, limit) = page_params(&params)?;
    match params.get("format").map(String::as_str) {
        None | Some("") | Some("json") => {}
        Some("csv") => return Ok(csv_response(state.stats.clone(), link.id, after, &code)),
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

/// A link's visits as a streamed CSV download.
pub fn csv_response(
    stats: Arc<Statistics>,
    link_id: u64,
    after: Option<u64>,
    code: &str,
) -> Response {
    let mut response = Response::new(csv_body(stats, link_id, after));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"visits-{code}.csv\""))
    {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// Every visit of a link (after `after`) as a CSV body, streamed one store page
/// ([`CSV_PAGE`] visits) per chunk: at most [`CSV_AHEAD`] chunks wait for a slow client, so an
/// export of any size holds a few thousand visits in memory.
pub fn csv_body(stats: Arc<Statistics>, link_id: u64, after: Option<u64>) -> Body {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(CSV_AHEAD);
    tokio::spawn(async move {
        let mut after = after;
        let mut header = true;
        loop {
            let service = stats.clone();
            let page =
                tokio::task::spawn_blocking(move || service.visits(link_id, after, CSV_PAGE)).await;
            let page = match page {
                Ok(Ok(page)) => page,
                Ok(Err(e)) => return fail(&sender, e.to_string()).await,
                Err(e) => return fail(&sender, e.to_string()).await,
            };
            let mut writer = CsvWriter::new(Vec::with_capacity(256 * CSV_PAGE));
            if header {
                if let Err(e) = writer.record(VISIT_COLUMNS) {
                    return fail(&sender, e.to_string()).await;
                }
            }
            header = false;
            for visit in page.items {
                if let Err(e) = writer.record(VisitView::from(visit).cells()) {
                    return fail(&sender, e.to_string()).await;
                }
            }
            match writer.into_inner() {
                Ok(bytes) => {
                    if sender.send(Ok(Bytes::from(bytes))).await.is_err() {
                        return; // the client went away
                    }
                }
                Err(e) => return fail(&sender, e.to_string()).await,
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    });
    Body::from_stream(ReceiverStream::new(receiver))
}

/// Ends a stream with an error: the client sees a truncated (failed) transfer, not a short
/// file that looks complete.
async fn fail(sender: &mpsc::Sender<Result<Bytes, std::io::Error>>, detail: String) {
    tracing::error!("visit export failed: {detail}");
    let _ = sender.send(Err(std::io::Error::other(detail))).await;
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
