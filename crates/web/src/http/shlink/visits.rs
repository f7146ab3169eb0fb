//! `/rest/v3/short-urls/{shortCode}/visits`, `/rest/v3/visits` (the overview) and
//! `/rest/v3/visits/orphan`. Every visit we record belongs to a link, so orphan visits (Shlink's
//! visits to unknown codes and the base URL) are always an empty list and zero counts.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use serde_json::json;

use super::shapes::{Paginated, Pagination, Params, VisitView, VisitsSummary};
use super::short_urls::MOST_AT_ONCE;
use super::{json_ok, ShlinkCaller, ShlinkError, ShortCode};
use crate::config::Role;
use crate::model::VisitTotals;
use crate::visits::VisitFilter;
use crate::web::access::blocking;
use crate::web::state::AppState;

/// `page` (from 1; anything else is 1) and `itemsPerPage` (`None`: all, the default) of a
/// visits or tags list.
pub fn page_of(params: &Params) -> (usize, Option<usize>) {
    let page = params
        .get("page")
        .and_then(|p| p.parse::<usize>().ok())
        .filter(|p| *p >= 1)
        .unwrap_or(1);
    let per_page = params
        .get("itemsPerPage")
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| *n > 0)
        .map(|n| usize::try_from(n).unwrap_or(MOST_AT_ONCE));
    (page, per_page)
}

/// The per-page count an answer reports: "all" is the total, unless that is more than one
/// answer holds.
pub fn shown(per_page: Option<usize>, total: u64) -> Option<usize> {
    match per_page {
        None if total > MOST_AT_ONCE as u64 => Some(MOST_AT_ONCE),
        other => other,
    }
}

/// `GET /rest/v3/short-urls/{shortCode}/visits`: newest first, with `startDate`, `endDate`
/// (inclusive), `excludeBots` (present means yes, as in Shlink), `page`, `itemsPerPage`.
#[utoipa::path(get, path = "/rest/v3/short-urls/{shortCode}/visits", tag = "shlink", params(("shortCode" = String, Path, description = "The short code")), security(("api_key" = [])),
    responses((status = 200, description = "`{visits: {data, pagination}}`, newest first"), (status = 404, description = "`short-url-not-found`")))]
pub async fn short_url(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    target: ShortCode,
) -> Result<Response, ShlinkError> {
    let link = caller.link_on(&state, &target, Role::Viewer)?;
    let params = target.params;
    let mut bad = Vec::new();
    let filter = VisitFilter {
        from: params.date("startDate", &mut bad),
        to: params.date("endDate", &mut bad),
        exclude_bots: params.has("excludeBots"),
    };
    if !bad.is_empty() {
        return Err(ShlinkError::invalid(&bad, "Provided data is not valid"));
    }
    let (page, per_page) = page_of(&params);
    let take = per_page.unwrap_or(MOST_AT_ONCE);
    let skip = (page - 1).saturating_mul(take);
    let stats = state.stats.clone();
    let id = link.id;
    let (visits, total) = blocking(move || stats.numbered_visits(id, filter, skip, take))
        .await
        .map_err(ShlinkError::from)?;
    let data: Vec<VisitView> = visits
        .iter()
        .map(|v| VisitView::new(&state, &link, v))
        .collect();
    let pagination = Pagination::new(page, shown(per_page, total), data.len(), total);
    Ok(json_ok(json!({ "visits": Paginated { data, pagination } })))
}

/// `GET /rest/v3/visits`: the visits of the key's short URLs, summed; no orphan visits.
#[utoipa::path(get, path = "/rest/v3/visits", tag = "shlink", security(("api_key" = [])),
    responses((status = 200, description = "`{visits: {nonOrphanVisits, orphanVisits}}`")))]
pub async fn overview(
    State(state): State<AppState>,
    caller: ShlinkCaller,
) -> Result<Response, ShlinkError> {
    let spaces = caller.spaces(Role::Viewer)?;
    let links = state.links.clone();
    let totals = blocking(move || links.visits_summed(spaces.as_deref()))
        .await
        .map_err(ShlinkError::from)?;
    Ok(json_ok(json!({
        "visits": {
            "nonOrphanVisits": VisitsSummary::from(totals),
            "orphanVisits": VisitsSummary::from(VisitTotals::default()),
        }
    })))
}

/// `GET /rest/v3/visits/orphan`: always an empty page.
pub async fn orphan(
    caller: ShlinkCaller,
    RawQuery(query): RawQuery,
) -> Result<Response, ShlinkError> {
    caller.require(Role::Viewer)?;
    let (page, per_page) = page_of(&Params::parse(query.as_deref()));
    let data: Vec<VisitView> = Vec::new();
    let pagination = Pagination::new(page, per_page, 0, 0);
    Ok(json_ok(json!({ "visits": Paginated { data, pagination } })))
}

/// `DELETE /rest/v3/visits/orphan`: there are none to delete.
pub async fn delete_orphan(caller: ShlinkCaller) -> Result<Response, ShlinkError> {
    caller.require(Role::Editor)?;
    Ok(json_ok(json!({ "deletedVisits": 0 })))
}
