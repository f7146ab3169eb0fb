//! Shlink's JSON views of our records: a short URL ([`ShortUrl`]), a visit ([`VisitView`]),
//! the `pagination` object ([`Pagination`]), visit summaries; dates as PHP's `DATE_ATOM`
//! (`2025-01-02T03:04:05+00:00`: no fractions, never `Z`), read back from RFC 3339 or a bare
//! `YYYY-MM-DD`; and the query string as PHP reads it (`tags[]=a&tags[]=b`).

use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

use crate::model::options::Route;
use crate::model::{Link, LinkStatus, Millis, Visit, VisitTotals};
use crate::web::state::AppState;

/// A time as `DATE_ATOM`, in UTC.
pub fn atom(ms: Millis) -> String {
    let format = format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory]:[offset_minute]"
    );
    OffsetDateTime::from_unix_timestamp(i64::try_from(ms / 1000).unwrap_or(i64::MAX))
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

/// A date a Shlink client sends: RFC 3339 (ATOM is one), or `YYYY-MM-DD` (its UTC midnight).
pub fn parse_date(text: &str) -> Option<Millis> {
    let text = text.trim();
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .or_else(|_| OffsetDateTime::parse(&format!("{text}T00:00:00Z"), &Rfc3339))
        .ok()?;
    u64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).ok()
}

/// `{total, nonBots, bots}`.
#[derive(Clone, Copy, Debug, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VisitsSummary {
    pub total: u64,
    pub non_bots: u64,
    pub bots: u64,
}

impl From<VisitTotals> for VisitsSummary {
    fn from(t: VisitTotals) -> Self {
        let bots = t.bots.min(t.visits);
        VisitsSummary {
            total: t.visits,
            non_bots: t.visits - bots,
            bots,
        }
    }
}

/// `meta` of a short URL: every key always present, `null` when unset.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub valid_since: Option<String>,
    pub valid_until: Option<String>,
    pub max_visits: Option<u64>,
}

/// A short URL as Shlink shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShortUrl {
    pub short_url: String,
    pub short_code: String,
    pub long_url: String,
    pub date_created: String,
    pub tags: Vec<String>,
    pub meta: Meta,
    /// `null` on the default domain, else the link's domain's host (as Shlink).
    pub domain: Option<String>,
    pub title: Option<String>,
    /// Always false: `robots.txt` is ours.
    pub crawlable: bool,
    /// Always false: a redirect does not pass the visitor's query string on.
    pub forward_query: bool,
    pub visits_summary: VisitsSummary,
    /// True when the link has rules or rotation targets.
    pub has_redirect_rules: bool,
}

impl ShortUrl {
    pub fn new(state: &AppState, link: &Link, totals: VisitTotals) -> Self {
        let options = link.options.as_deref();
        // An ended link shows when it ended as its `validUntil`, as Shlink shows a disabled one.
        let valid_until = match link.status {
            LinkStatus::Expired | LinkStatus::Active => link.expires_at,
            _ => None,
        };
        ShortUrl {
            short_url: state.links.short_url_of(link),
            short_code: link.code.clone(),
            long_url: link.url.clone(),
            date_created: atom(link.created_at),
            tags: link.tags.clone(),
            meta: Meta {
                valid_since: options.and_then(|o| o.valid_from).map(atom),
                valid_until: valid_until.map(atom),
                max_visits: options.and_then(|o| o.max_visits),
            },
            domain: (link.domain != crate::model::DEFAULT_DOMAIN)
                .then(|| state.links.domain_of(link)),
            title: link.title.clone(),
            crawlable: false,
            forward_query: false,
            visits_summary: totals.into(),
            has_redirect_rules: options
                .is_some_and(|o| !o.rules.is_empty() || !o.targets.is_empty()),
        }
    }
}

/// Where a visit came from, or `null` when it was not located.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VisitLocation {
    pub country_code: String,
    /// Empty: we keep the code, not the name.
    pub country_name: String,
    pub region_name: String,
    pub city_name: String,
    /// 0: we keep no coordinates.
    pub latitude: f64,
    pub longitude: f64,
    pub timezone: String,
    pub is_empty: bool,
}

/// A visit as Shlink shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VisitView {
    pub referer: String,
    pub date: String,
    pub user_agent: String,
    pub visit_location: Option<VisitLocation>,
    pub potential_bot: bool,
    pub visited_url: String,
    /// Where the visitor was sent, when the visit says and the link still has that
    /// destination.
    pub redirect_url: Option<String>,
}

impl VisitView {
    pub fn new(state: &AppState, link: &Link, visit: &Visit) -> Self {
        let text = |v: &Option<std::sync::Arc<str>>| v.as_deref().unwrap_or("").to_string();
        let located = visit.country.is_some() || visit.region.is_some() || visit.city.is_some();
        let redirect_url = match visit.route.as_deref() {
            None => Some(link.url.clone()),
            Some(name) => Route::parse(name)
                .and_then(|route| route.url(&link.url, link.options.as_deref()))
                .map(str::to_string),
        };
        VisitView {
            referer: visit.referer.to_string(),
            date: atom(visit.at),
            user_agent: visit.user_agent.to_string(),
            visit_location: located.then(|| VisitLocation {
                country_code: text(&visit.country),
                country_name: String::new(),
                region_name: text(&visit.region),
                city_name: text(&visit.city),
                latitude: 0.0,
                longitude: 0.0,
                timezone: String::new(),
                is_empty: false,
            }),
            potential_bot: visit.is_bot,
            visited_url: state.links.short_url(&visit.code),
            redirect_url,
        }
    }
}

/// The `pagination` of every paginated list.
#[derive(Clone, Copy, Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pagination {
    pub current_page: u64,
    pub pages_count: u64,
    pub items_per_page: u64,
    pub items_in_current_page: u64,
    pub total_items: u64,
}

impl Pagination {
    /// `per_page` `None` is "all": Shlink then reports `max(total, 1)` per page.
    pub fn new(page: usize, per_page: Option<usize>, in_page: usize, total: u64) -> Self {
        let per_page = per_page.map_or(total.max(1), |n| n.max(1) as u64);
        Pagination {
            current_page: page as u64,
            pages_count: total.div_ceil(per_page).max(1),
            items_per_page: per_page,
            items_in_current_page: in_page as u64,
            total_items: total,
        }
    }
}

/// `{"data": [...], "pagination": {...}}`.
#[derive(Clone, Debug, Serialize)]
pub struct Paginated<T> {
    pub data: Vec<T>,
    pub pagination: Pagination,
}

/// A query string as PHP reads it: `name`, `name[]` and `name[N]` all name the same list;
/// `+` is a space.
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: Option<&str>) -> Params {
        Params(
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The last value of a single parameter, when not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        let last = self.0.iter().rfind(|(k, _)| k == name)?;
        Some(last.1.as_str()).filter(|v| !v.is_empty())
    }

    /// A date parameter; one that does not read as a date is named in `bad`.
    pub fn date(&self, name: &'static str, bad: &mut Vec<&'static str>) -> Option<Millis> {
        let text = self.get(name)?;
        let parsed = parse_date(text);
        if parsed.is_none() {
            bad.push(name);
        }
        parsed
    }

    /// A `…Mode` parameter: `any` (the default) or `all` (true); anything else is named in
    /// `bad`.
    pub fn all_mode(&self, name: &'static str, bad: &mut Vec<&'static str>) -> bool {
        match self.get(name) {
            None | Some("any") => false,
            Some("all") => true,
            Some(_) => {
                bad.push(name);
                false
            }
        }
    }

    /// Whether the parameter is there at all (Shlink's `excludeBots` is a presence flag).
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(k, _)| k == name)
    }

    /// Every value of a list parameter, in order.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| {
                k == name
                    || k.strip_prefix(name)
                        .and_then(|rest| rest.strip_prefix('['))
                        .and_then(|rest| rest.strip_suffix(']'))
                        .is_some_and(|inside| inside.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// `"true"` is true; anything else, or absent, false.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_atom_and_read_back() {
        assert_eq!(atom(1_735_787_045_678), "2025-01-02T03:04:05+00:00");
        assert_eq!(
            parse_date("2025-01-02T03:04:05+00:00"),
            Some(1_735_787_045_000)
        );
        assert_eq!(
            parse_date("2025-01-02T03:04:05.5Z"),
            Some(1_735_787_045_500)
        );
        assert_eq!(parse_date("2025-01-02"), Some(1_735_776_000_000));
        assert_eq!(parse_date("tomorrow"), None);
    }

    #[test]
    fn pagination_counts_pages_and_all_means_the_total() {
        let p = Pagination::new(2, Some(10), 5, 15);
        assert_eq!((p.pages_count, p.items_per_page), (2, 10));
        let all = Pagination::new(1, None, 3, 3);
        assert_eq!((all.pages_count, all.items_per_page), (1, 3));
        let empty = Pagination::new(1, None, 0, 0);
        assert_eq!((empty.pages_count, empty.items_per_page), (1, 1));
    }

    #[test]
    fn php_lists_are_read_in_every_spelling() {
        let p = Params::parse(Some("tags%5B%5D=a&tags[1]=b+c&tags=d&tagsx=e&excludeBots"));
        assert_eq!(p.list("tags"), vec!["a", "b c", "d"]);
        assert!(p.has("excludeBots"));
        assert_eq!(p.get("tagsx"), Some("e"));
    }
}
