//! `/rest/v3/tags` (names) and `/rest/v3/tags/stats` (names with their short-URL and visit
//! counts), from the tags of the key's listed links: a tag exists while a link carries it
//! (we keep no tag table, so there are no unused tags). `searchTerm`, `orderBy`, `page` and
//! `itemsPerPage` as Shlink reads them.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use serde::Serialize;
use serde_json::json;

use super::shapes::{Paginated, Pagination, Params, VisitsSummary};
use super::visits::{page_of, shown};
use super::{json_ok, ShlinkCaller, ShlinkError};
use crate::config::Role;
use crate::links::TagStat;
use crate::web::access::blocking;
use crate::web::state::AppState;

/// A tag with its counts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TagInfo {
    tag: String,
    short_urls_count: u64,
    visits_summary: VisitsSummary,
}

/// The key's tags, filtered by `searchTerm`, in `orderBy`'s order, cut to the page; and the
/// total.
async fn tag_page(
    state: &AppState,
    caller: &ShlinkCaller,
    query: Option<&str>,
) -> Result<(Vec<TagStat>, usize, Option<usize>, u64), ShlinkError> {
    let spaces = caller.spaces(Role::Viewer)?;
    let params = Params::parse(query);
    let (page, per_page) = page_of(&params);
    let links = state.links.clone();
    let mut tags = blocking(move || links.tag_stats(spaces.as_deref()))
        .await
        .map_err(ShlinkError::from)?;
    if let Some(term) = params.get("searchTerm").map(str::to_lowercase) {
        tags.retain(|t| t.tag.to_lowercase().contains(&term));
    }
    let order = params.get("orderBy").unwrap_or("tag-ASC");
    let (field, descending) = match order.rsplit_once('-') {
        Some((f, d)) if d.eq_ignore_ascii_case("asc") || d.eq_ignore_ascii_case("desc") => {
            (f, d.eq_ignore_ascii_case("desc"))
        }
        _ => (order, false),
    };
    let non_bots = |t: &TagStat| t.visits.visits.saturating_sub(t.visits.bots);
    match field {
        "tag" => {}
        "shortUrlsCount" => tags.sort_by_key(|t| t.links),
        "visits" => tags.sort_by_key(|t| t.visits.visits),
        "nonBotVisits" => tags.sort_by_key(non_bots),
        _ => {
            return Err(ShlinkError::invalid(
                &["orderBy"],
                "Provided data is not valid",
            ))
        }
    }
    if descending {
        tags.reverse();
    }
    let total = tags.len() as u64;
    let take = per_page.unwrap_or(super::short_urls::MOST_AT_ONCE);
    let items = tags
        .into_iter()
        .skip((page - 1).saturating_mul(take))
        .take(take)
        .collect();
    Ok((items, page, shown(per_page, total), total))
}

/// `GET /rest/v3/tags`: `{"tags": {"data": ["a", …], "pagination": …}}`.
#[utoipa::path(get, path = "/rest/v3/tags", tag = "shlink", security(("api_key" = [])),
    responses((status = 200, description = "`{tags: {data: [name], pagination}}`")))]
pub async fn list(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    RawQuery(query): RawQuery,
) -> Result<Response, ShlinkError> {
    let (tags, page, per_page, total) = tag_page(&state, &caller, query.as_deref()).await?;
    let data: Vec<String> = tags.into_iter().map(|t| t.tag).collect();
    let pagination = Pagination::new(page, per_page, data.len(), total);
    Ok(json_ok(json!({ "tags": Paginated { data, pagination } })))
}

/// `GET /rest/v3/tags/stats`: each tag with `shortUrlsCount` and `visitsSummary`.
#[utoipa::path(get, path = "/rest/v3/tags/stats", tag = "shlink", security(("api_key" = [])),
    responses((status = 200, description = "`{tags: {data: [{tag, shortUrlsCount, visitsSummary}], pagination}}`")))]
pub async fn stats(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    RawQuery(query): RawQuery,
) -> Result<Response, ShlinkError> {
    let (tags, page, per_page, total) = tag_page(&state, &caller, query.as_deref()).await?;
    let data: Vec<TagInfo> = tags
        .into_iter()
        .map(|t| TagInfo {
            tag: t.tag,
            short_urls_count: t.links,
            visits_summary: t.visits.into(),
        })
        .collect();
    let pagination = Pagination::new(page, per_page, data.len(), total);
    Ok(json_ok(json!({ "tags": Paginated { data, pagination } })))
}
