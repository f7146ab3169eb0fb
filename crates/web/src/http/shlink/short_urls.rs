//! `/rest/v3/short-urls` and `/rest/v3/short-urls/{shortCode}`: Shlink's requests read into
//! ours (`longUrl` → `url`, `customSlug` → `code`, `shortCodeLength` → `length`,
//! `validSince` → `valid_from`, `validUntil` → `expires_at`, `maxVisits` → `max_visits`,
//! `findIfExists` → dedup), the same services and checks as `/api/v1`, Shlink's shapes out.
//! Every bad field of a request is named at once in `invalidElements`.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::shapes::{parse_date, Paginated, Pagination, Params, ShortUrl};
use super::{json_object, json_ok, shlink_domain, ShlinkCaller, ShlinkError, ShortCode};
use crate::config::Role;
use crate::links::{rfc3339, CatalogueQuery, CreateLink, SortField, UpdateLink, DEFAULT_SPACE};
use crate::web::access::{authorize_create, blocking, check_create_rate};
use crate::web::state::AppState;

/// Short URLs per page when the client does not say.
const DEFAULT_PER_PAGE: usize = 10;
/// The most a page holds when a client asks for "all" (`itemsPerPage=-1`): the answer then
/// says this many per page, and a client reads the next pages as usual.
pub const MOST_AT_ONCE: usize = 5000;

/// A request body's fields, read leniently as Shlink reads them (unknown keys are ignored:
/// old clients send `validateUrl` and the like), the names of bad ones gathered.
struct Fields {
    map: Map<String, Value>,
    bad: Vec<&'static str>,
}

impl Fields {
    fn new(map: Map<String, Value>) -> Self {
        Fields {
            map,
            bad: Vec::new(),
        }
    }

    /// `None` absent, `Some(None)` null, `Some(Some(v))` a value of the right type.
    fn string(&mut self, name: &'static str) -> Option<Option<String>> {
        match self.map.get(name)? {
            Value::Null => Some(None),
            Value::String(s) => Some(Some(s.clone())),
            _ => {
                self.bad.push(name);
                None
            }
        }
    }

    /// A date, passed on as RFC 3339 (what our services read).
    fn date(&mut self, name: &'static str) -> Option<Option<String>> {
        match self.string(name)? {
            None => Some(None),
            Some(text) => match parse_date(&text) {
                Some(ms) => Some(Some(rfc3339(ms))),
                None => {
                    self.bad.push(name);
                    None
                }
            },
        }
    }

    /// A positive whole number (`null` allowed).
    fn count(&mut self, name: &'static str) -> Option<Option<Value>> {
        match self.map.get(name)? {
            Value::Null => Some(None),
            v if v.as_u64().is_some_and(|n| n >= 1) => Some(Some(v.clone())),
            _ => {
                self.bad.push(name);
                None
            }
        }
    }

    fn flag(&mut self, name: &'static str) -> bool {
        match self.map.get(name) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.bad.push(name);
                false
            }
        }
    }

    /// Tags normalised as Shlink does: trimmed, lowercased, spaces as `-`, each once.
    fn tags(&mut self) -> Option<Vec<String>> {
        match self.map.get("tags")? {
            Value::Null => None,
            Value::Array(items) if items.iter().all(Value::is_string) => {
                let mut tags: Vec<String> = Vec::new();
                for tag in items.iter().filter_map(Value::as_str) {
                    let tag = tag.trim().to_lowercase().replace(' ', "-");
                    if !tag.is_empty() && !tags.contains(&tag) {
                        tags.push(tag);
                    }
                }
                Some(tags)
            }
            _ => {
                self.bad.push("tags");
                None
            }
        }
    }

    fn done(self) -> Result<(), ShlinkError> {
        if self.bad.is_empty() {
            Ok(())
        } else {
            Err(ShlinkError::invalid(
                &self.bad,
                "Provided data is not valid",
            ))
        }
    }
}

/// The space a key's creates go to: its home (the default, a member's one team's space), or
/// its first space when it may not use that (as Shlink forces a domain-specific key's
/// domain).
fn create_space(caller: &ShlinkCaller) -> String {
    let Some(principal) = caller.0 .0.as_deref() else {
        return DEFAULT_SPACE.to_string();
    };
    let home = principal.home_space();
    match (&home, principal.spaces.as_ref()) {
        (Some(h), _) if principal.allows_space(h) => h.clone(),
        (_, Some(spaces)) => spaces
            .first()
            .cloned()
            .unwrap_or_else(|| DEFAULT_SPACE.to_string()),
        _ => home.unwrap_or_else(|| DEFAULT_SPACE.to_string()),
    }
}

/// `POST /rest/v3/short-urls`: 200 with the short URL, new or found.
#[utoipa::path(post, path = "/rest/v3/short-urls", tag = "shlink", security(("api_key" = [])),
    responses((status = 200, description = "The short URL, new or found (Shlink's shape)", body = super::shapes::ShortUrl),
        (status = 400, description = "`invalid-data` (naming `invalidElements`), `non-unique-slug`, `malformed-request-body` (Shlink problem+json)")))]
pub async fn create(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    caller: ShlinkCaller,
    body: Bytes,
) -> Result<Response, ShlinkError> {
    let mut fields = Fields::new(json_object(&body)?);
    caller.require(Role::Editor)?;
    let long_url = fields.string("longUrl").flatten();
    if long_url.as_deref().is_none_or(|u| u.trim().is_empty()) {
        fields.bad.push("longUrl");
    }
    let slug = fields
        .string("customSlug")
        .flatten()
        .map(|s| s.trim().replace(' ', "-"))
        .filter(|s| !s.is_empty());
    let length = match fields.map.get("shortCodeLength") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|n| u8::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                fields.bad.push("shortCodeLength");
                None
            }
        },
    };
    let valid_since = fields.date("validSince").flatten();
    let valid_until = fields.date("validUntil").flatten();
    let max_visits = fields.count("maxVisits").flatten();
    let title = fields.string("title").flatten();
    let tags = fields.tags();
    let find = fields.flag("findIfExists");
    let domain = fields.string("domain").flatten();
    let domain_id = shlink_domain(&state, domain.as_deref());
    if domain_id.is_none() {
        fields.bad.push("domain");
    }
    // The domain's host, for the create (the default domain: none).
    let domain = domain_id
        .filter(|id| *id != crate::model::DEFAULT_DOMAIN)
        .and_then(|id| state.links.domains().host_of(id));
    if fields
        .string("pathPrefix")
        .flatten()
        .is_some_and(|p| !p.is_empty())
    {
        // Codes are one segment of our alphabet; a prefix has no place in them.
        fields.bad.push("pathPrefix");
    }
    fields.flag("crawlable");
    fields.flag("forwardQuery");
    fields.done()?;
    let space = create_space(&caller);
    let ip = state.client_ip(peer.ip(), &headers);
    check_create_rate(&state, &caller.0, ip, 1).map_err(super::errors::from_api)?;
    authorize_create(&state, &caller.0, &space).map_err(super::errors::from_api)?;
    let req = CreateLink {
        url: long_url.unwrap_or_default(),
        // A slug decides the code; Shlink ignores the length then.
        length: if slug.is_some() { None } else { length },
        code: slug.clone(),
        space: Some(space),
        expires_at: valid_until.map(Some),
        title,
        tags,
        max_visits,
        valid_from: valid_since,
        domain,
        ..CreateLink::default()
    };
    let (links, stats) = (state.links.clone(), state.stats.clone());
    let (link, totals, created) = blocking(move || {
        let (link, created) = links.create_finding(req, find)?;
        let totals = stats.totals(link.id)?;
        Ok::<_, crate::web::error::ApiError>((link, totals, created))
    })
    .await
    .map_err(|e| {
        let e = ShlinkError::from(e);
        match &slug {
            Some(slug) => e.about(slug),
            None => e,
        }
    })?;
    if created {
        crate::web::access::audit_created(&state, caller.0 .0.as_deref(), &link.space, ip, 1);
    }
    Ok(json_ok(ShortUrl::new(&state, &link, totals)))
}

/// `orderBy`: `field`, `field-ASC` or `field-DESC`.
fn order_by(text: &str) -> Option<(SortField, bool)> {
    let (field, dir) = match text.rsplit_once('-') {
        Some((f, d)) if d.eq_ignore_ascii_case("asc") || d.eq_ignore_ascii_case("desc") => {
            (f, d.eq_ignore_ascii_case("desc"))
        }
        _ => (text, false),
    };
    let field = match field {
        "longUrl" => SortField::LongUrl,
        "shortCode" => SortField::ShortCode,
        "dateCreated" => SortField::DateCreated,
        "title" => SortField::Title,
        "visits" => SortField::Visits,
        "nonBotVisits" => SortField::NonBotVisits,
        _ => return None,
    };
    Some((field, dir))
}

/// `GET /rest/v3/short-urls`: a numbered page of the key's short URLs.
#[utoipa::path(get, path = "/rest/v3/short-urls", tag = "shlink", security(("api_key" = [])),
    params(("page" = Option<u32>, Query), ("itemsPerPage" = Option<i32>, Query), ("searchTerm" = Option<String>, Query), ("tags[]" = Option<Vec<String>>, Query), ("orderBy" = Option<String>, Query)),
    responses((status = 200, description = "`{shortUrls: {data, pagination}}`")))]
pub async fn list(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    RawQuery(query): RawQuery,
) -> Result<Response, ShlinkError> {
    let spaces = caller.spaces(Role::Viewer)?;
    let params = Params::parse(query.as_deref());
    let mut bad = Vec::new();
    let page = match params.get("page") {
        None => 1,
        Some(p) => p
            .parse::<usize>()
            .ok()
            .filter(|p| *p >= 1)
            .unwrap_or_else(|| {
                bad.push("page");
                1
            }),
    };
    // `None`: all (a negative number).
    let per_page = match params.get("itemsPerPage") {
        None => Some(DEFAULT_PER_PAGE),
        Some(n) => match n.parse::<i64>() {
            Ok(n) if n < 0 => None,
            Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(MOST_AT_ONCE)),
            _ => {
                bad.push("itemsPerPage");
                Some(DEFAULT_PER_PAGE)
            }
        },
    };
    let (order, descending) = match params.get("orderBy") {
        None => (SortField::DateCreated, true),
        Some(text) => order_by(text).unwrap_or_else(|| {
            bad.push("orderBy");
            (SortField::DateCreated, true)
        }),
    };
    let created_from = params.date("startDate", &mut bad);
    let created_to = params.date("endDate", &mut bad);
    let all_tags = params.all_mode("tagsMode", &mut bad);
    let exclude_all = params.all_mode("excludeTagsMode", &mut bad);
    if !bad.is_empty() {
        return Err(ShlinkError::invalid(&bad, "Provided data is not valid"));
    }
    let wanted = |name| {
        params
            .list(name)
            .into_iter()
            .map(|t| t.trim().to_lowercase().replace(' ', "-"))
            .collect::<Vec<_>>()
    };
    let catalogue = CatalogueQuery {
        spaces,
        search: params
            .get("searchTerm")
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty()),
        tags: wanted("tags"),
        all_tags,
        exclude_tags: wanted("excludeTags"),
        exclude_all,
        created_from,
        created_to,
        exclude_capped: params.flag("excludeMaxVisitsReached"),
        exclude_expired: params.flag("excludePastValidUntil"),
        order,
        descending,
        domain: None,
    };
    // `domain` keeps that domain's short URLs (an unknown one has none here).
    let asked = params.get("domain").filter(|d| !d.trim().is_empty());
    let chosen = asked.map(|d| shlink_domain(&state, Some(d)));
    let ours = !matches!(chosen, Some(None));
    let mut catalogue = catalogue;
    catalogue.domain = chosen.flatten();
    let take = per_page.unwrap_or(MOST_AT_ONCE);
    let links = state.links.clone();
    let numbered = if ours {
        blocking(move || links.numbered_page(&catalogue, page, take))
            .await
            .map_err(ShlinkError::from)?
    } else {
        // Another domain has no short URLs here.
        Default::default()
    };
    let shown = match per_page {
        None if numbered.total <= MOST_AT_ONCE as u64 => None,
        None => Some(MOST_AT_ONCE),
        some => some,
    };
    let data: Vec<ShortUrl> = numbered
        .items
        .iter()
        .map(|(link, totals)| ShortUrl::new(&state, link, *totals))
        .collect();
    let pagination = Pagination::new(page, shown, data.len(), numbered.total);
    Ok(json_ok(json!({
        "shortUrls": Paginated { data, pagination }
    })))
}

/// `GET /rest/v3/short-urls/{shortCode}`: also for an ended link, as Shlink shows a disabled
/// one.
#[utoipa::path(get, path = "/rest/v3/short-urls/{shortCode}", tag = "shlink", params(("shortCode" = String, Path, description = "The short code")), security(("api_key" = [])),
    responses((status = 200, description = "The short URL", body = super::shapes::ShortUrl), (status = 404, description = "`short-url-not-found`")))]
pub async fn get(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    target: ShortCode,
) -> Result<Response, ShlinkError> {
    let link = caller.link_on(&state, &target, Role::Viewer)?;
    let stats = state.stats.clone();
    let id = link.id;
    let totals = blocking(move || stats.totals(id))
        .await
        .map_err(ShlinkError::from)?;
    Ok(json_ok(ShortUrl::new(&state, &link, totals)))
}

/// `PATCH /rest/v3/short-urls/{shortCode}`: a key left out keeps its value, `null` clears
/// `validSince`, `validUntil`, `maxVisits` and `title`; `tags` replaces the tags. The body is
/// read before the link is looked up, as Shlink does.
#[utoipa::path(patch, path = "/rest/v3/short-urls/{shortCode}", tag = "shlink", params(("shortCode" = String, Path, description = "The short code")), security(("api_key" = [])),
    responses((status = 200, description = "The edited short URL", body = super::shapes::ShortUrl), (status = 400, description = "`invalid-data`"), (status = 404, description = "`short-url-not-found`")))]
pub async fn edit(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    crate::web::caller::ClientIp(ip): crate::web::caller::ClientIp,
    target: ShortCode,
    body: Bytes,
) -> Result<Response, ShlinkError> {
    let mut fields = Fields::new(json_object(&body)?);
    let url = fields.string("longUrl").flatten();
    let valid_from = fields.date("validSince");
    let expires_at = fields.date("validUntil");
    let max_visits = fields.count("maxVisits");
    let title = fields.string("title");
    let tags = fields.tags();
    fields.flag("crawlable");
    fields.flag("forwardQuery");
    fields.done()?;
    caller.link_on(&state, &target, Role::Editor)?;
    let code = target.code;
    let patch = UpdateLink {
        url,
        expires_at,
        title,
        tags,
        max_visits,
        valid_from,
        ..UpdateLink::default()
    };
    let (links, stats) = (state.links.clone(), state.stats.clone());
    let target = code.clone();
    let (link, totals) = blocking(move || {
        let link = links.update(&target, patch)?;
        let totals = stats.totals(link.id)?;
        Ok::<_, crate::web::error::ApiError>((link, totals))
    })
    .await
    .map_err(|e| ShlinkError::from(e).about(&code))?;
    crate::web::access::audit_link(&state, caller.0 .0.as_deref(), "link.updated", &link, ip);
    Ok(json_ok(ShortUrl::new(&state, &link, totals)))
}

/// `DELETE /rest/v3/short-urls/{shortCode}`: 204; redirects stop at once.
#[utoipa::path(delete, path = "/rest/v3/short-urls/{shortCode}", tag = "shlink", params(("shortCode" = String, Path, description = "The short code")), security(("api_key" = [])),
    responses((status = 204, description = "Deleted"), (status = 404, description = "`short-url-not-found`")))]
pub async fn delete(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    crate::web::caller::ClientIp(ip): crate::web::caller::ClientIp,
    target: ShortCode,
) -> Result<Response, ShlinkError> {
    caller.link_on(&state, &target, Role::Editor)?;
    let code = target.code;
    let links = state.links.clone();
    let target = code.clone();
    let link = blocking(move || links.delete(&target))
        .await
        .map_err(|e| ShlinkError::from(e).about(&code))?;
    crate::web::access::audit_link(&state, caller.0 .0.as_deref(), "link.deleted", &link, ip);
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_by_reads_a_field_and_a_direction() {
        assert_eq!(
            order_by("dateCreated-DESC"),
            Some((SortField::DateCreated, true))
        );
        assert_eq!(order_by("shortCode"), Some((SortField::ShortCode, false)));
        assert_eq!(
            order_by("nonBotVisits-ASC"),
            Some((SortField::NonBotVisits, false))
        );
        assert_eq!(order_by("visits-sideways"), None);
        assert_eq!(order_by("bogus"), None);
    }

    #[test]
    fn bad_fields_are_named_together() {
        let mut fields = Fields::new(
            serde_json::json!({"maxVisits": "x", "validUntil": "soon", "tags": ["A b", "a-b"]})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        assert_eq!(fields.count("maxVisits"), None);
        assert_eq!(fields.date("validUntil"), None);
        assert_eq!(fields.tags(), Some(vec!["a-b".to_string()]));
        let e = fields
            .done()
            .err()
            .map(|e| e.extra["invalidElements"].clone());
        assert_eq!(e, Some(serde_json::json!(["maxVisits", "validUntil"])));
    }
}
