//! `/ui/links` (search, filter, page, copy, QR, delete; markers of what each link has beyond
//! its URL, and of a review that blocked it) and `/ui/links/{code}` (the link, its visits over
//! time and by destination, top lists, latest visits, QR, CSV, edit, its options with rules,
//! targets, the form before the visit, the in-app page and the social preview, the leads its
//! form collected, its latest review verdict with an admin's Approve and Block, delete).
//! Viewers read, but never leads (personal data); editors also change and delete and read
//! leads, and the server checks the role on every post and download, whatever the page showed.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use minijinja::{context, Value};

use super::chart::{stacked_bars, Bar};
use super::forms::{
    self, field, CheckedForm, Fields, FormError, OptionsAction, OptionsForm, VALIDITY_CHOICES,
};
use super::home::display_time;
use super::render::{message, page, refused, see_other, urlencoding, Visitor};
use super::PageState;
use crate::config::Role;
use crate::links::{LinkError, UpdateLink};
use crate::model::gates::MAX_FORM_FIELDS;
use crate::model::options::{MAX_RULES, MAX_TARGETS};
use crate::model::time::HOUR_MS;
use crate::model::{CapSlot, EndedBy, LeadPage, Link, LinkQuery, LinkStatus, Millis, Route};
use crate::visits::stats::{Granularity, LinkStats, DAY_MS, MAX_POINTS};
use crate::web::access::{authorized_link, blocking};
use crate::web::csv::{csv_response, leads_csv_response};
use crate::web::error::ApiError;
use crate::web::qr::{qr_response, QrParams};

/// Links per page of the list.
const PAGE: usize = 50;
/// Visits per page of a link's latest visits.
const VISITS_PAGE: usize = 20;
/// Leads shown on a link's page (the CSV has them all).
const LEADS_PAGE: usize = 50;
/// Notices a redirect may ask a page to show (`?notice=`), by catalogue key.
const NOTICES: &[&str] = &["saved", "deleted", "refilled", "approved", "blocked"];

fn notice(query: &HashMap<String, String>) -> Option<String> {
    query
        .get("notice")
        .filter(|n| NOTICES.contains(&n.as_str()))
        .map(|n| format!("notice.{n}"))
}

/// A link as the pages show it.
fn link_view(state: &PageState, link: &Link, visits: Option<u64>) -> Value {
    let short_url = state.links.short_url_of(link);
    // The short URL's host and path before the code, without the scheme: the page may shorten
    // it, never the code.
    let short_host = short_url
        .strip_suffix(link.code.as_str())
        .unwrap_or(&short_url)
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    context! {
        code => link.code.clone(),
        // What the pages' paths name the link by: its code on the default domain, its key
        // (`code@id`) on another.
        ref => link.key().into_owned(),
        domain => state.links.domain_of(link),
        short_host => short_host,
        short_url => short_url,
        url => link.url.clone(),
        space => link.space.clone(),
        status => link.status.as_str(),
        custom => link.custom,
        title => link.title.clone(),
        tags => link.tags.clone(),
        created_at => display_time(link.created_at),
        updated_at => display_time(link.updated_at),
        expires_at => link.expires_at.map(display_time),
        expires_date => link.expires_at.map(|ms| crate::links::rfc3339(ms).chars().take(10).collect::<String>()),
        visits => visits,
        markers => markers(link),
        review => link.review.as_ref().map(super::reviews::mark_view),
    }
}

/// What a link has beyond its URL, for the list's and the page's markers: its options, and
/// `blocked` when its latest review blocked it.
fn markers(link: &Link) -> Vec<&'static str> {
    let mut out = link
        .options
        .as_deref()
        .map(|o| o.markers())
        .unwrap_or_default();
    if link
        .review
        .as_ref()
        .is_some_and(|r| r.verdict == crate::model::Verdict::Blocked)
    {
        out.insert(0, "blocked");
    }
    out
}

/// What the link's page says of its options: protection (never the hash), the visit cap and
/// what is left of it, the start, the end destination, and whether its cap ended it.
fn options_view(link: &Link, counted: &[(CapSlot, u64)], now: Millis) -> Value {
    let options = link.options.as_deref();
    let used = counted
        .iter()
        .find(|(slot, _)| *slot == CapSlot::Link)
        .map_or(0, |(_, n)| *n);
    let valid_from = options.and_then(|o| o.valid_from);
    context! {
        any => options.is_some(),
        password_protected => options.is_some_and(|o| o.password.is_some()),
        max_visits => options.and_then(|o| o.max_visits),
        visits_remaining => options.and_then(|o| o.max_visits).map(|cap| cap.saturating_sub(used)),
        valid_from => valid_from.map(display_time),
        not_started => valid_from.is_some_and(|at| now < at),
        fallback_url => options.and_then(|o| o.fallback_url.clone()),
        ended_by_cap => link.ended_by() == Some(EndedBy::MaxVisits),
    }
}

/// A link's newest leads as the page shows them: one column per field (the form's fields in
/// order by their labels, then any other name these leads hold), each lead's values in that
/// order, and whether the visitor ticked a consent box.
fn leads_view(link: &Link, page: &LeadPage, total: u64) -> Value {
    let form = link.options.as_deref().and_then(|o| o.form.as_ref());
    let mut columns: Vec<(String, String)> = form
        .map(|f| {
            f.fields
                .iter()
                .map(|f| (f.name.clone(), f.label.clone()))
                .collect()
        })
        .unwrap_or_default();
    for lead in &page.leads {
        for (name, _) in &lead.values {
            if !columns.iter().any(|(n, _)| n == name) {
                columns.push((name.clone(), name.clone()));
            }
        }
    }
    let rows: Vec<Value> = page
        .leads
        .iter()
        .map(|lead| {
            let values: Vec<String> = columns
                .iter()
                .map(|(name, _)| {
                    lead.values
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                })
                .collect();
            context! {
                at => display_time(lead.at),
                values => values,
                consent => lead.consent.clone(),
            }
        })
        .collect();
    context! {
        total => total,
        shown => page.leads.len(),
        more => total > page.leads.len() as u64,
        columns => columns.into_iter().map(|(name, label)| context! { name => name, label => label }).collect::<Vec<_>>(),
        rows => rows,
        with_consent => form.is_some_and(|f| f.consent.is_some()) || page.leads.iter().any(|l| l.consent.is_some()),
        kept => form.map(|f| kept_for(f.retention)).map(|(unit, n)| context! { unit => unit, n => n.to_string() }),
    }
}

/// A retention in the largest whole unit the page names: days, hours, or minutes (rounded up).
fn kept_for(ms: Millis) -> (&'static str, u64) {
    if ms % DAY_MS == 0 {
        ("d", ms / DAY_MS)
    } else if ms % HOUR_MS == 0 {
        ("h", ms / HOUR_MS)
    } else {
        ("m", ms.div_ceil(60_000))
    }
}

/// The visits by destination, with each route in words the page translates: `default`, or a
/// rule's or target's number counted from 1.
fn destinations_view(stats: &LinkStats) -> Vec<Value> {
    let total: u64 = stats.destinations.iter().map(|d| d.visits).sum();
    stats
        .destinations
        .iter()
        .map(|d| {
            let (kind, n) = match Route::parse(&d.route) {
                Some(Route::Default) => ("default", 0),
                Some(Route::Rule(n)) => ("rule", usize::from(n) + 1),
                Some(Route::Target(n)) => ("target", usize::from(n) + 1),
                Some(Route::InAppPage) => ("in_app", 0),
                Some(Route::CrawlerPreview) => ("preview", 0),
                None => ("other", 0),
            };
            context! {
                kind => kind,
                n => n.to_string(),
                route => d.route.clone(),
                url => d.url.clone(),
                visits => d.visits,
                share => (d.visits * 100).checked_div(total).unwrap_or(0),
            }
        })
        .collect()
}

/// What a post to the link's page brought back to be shown again.
enum Posted<'a> {
    Nothing,
    /// The edit form (URL, title, tags, validity).
    Edit(&'a Fields),
    /// The link's one editor: its URL, title, tags and validity (the posted fields) and its
    /// options.
    Options(&'a OptionsForm, &'a Fields),
}

/// `GET /ui/links?q&space&status&length&domain&cursor`: newest first.
pub async fn list(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let session = match visitor.require_session() {
        Ok(s) => s.principal.clone(),
        Err(redirect) => return redirect.into_response(),
    };
    let get = |name: &str| query.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let space = get("space").map(str::to_string);
    if let Some(space) = &space {
        if let Err(e) = visitor.caller().require_space(Role::Viewer, space) {
            return refused(&state, &visitor, &e);
        }
    }
    let status = get("status").and_then(|s| LinkStatus::ALL.into_iter().find(|x| x.as_str() == s));
    let length = get("length").and_then(|l| l.parse::<u8>().ok());
    let after = get("cursor").and_then(|c| c.parse::<u64>().ok());
    // A host no domain has is ignored, as the other filters' unknown values are.
    let domain = get("domain").and_then(|h| state.links.domains().by_host(h));
    let link_query = LinkQuery {
        space: space.clone(),
        status,
        length,
        domain: domain.as_ref().map(|d| d.id),
        after,
        newest_first: true,
        limit: PAGE,
        ..LinkQuery::default()
    }
    .search(get("q"));
    let links = state.links.clone();
    let stats = state.stats.clone();
    let principal = session.clone();
    let listed = blocking(move || {
        let page = links.list(&link_query)?;
        let mut rows = Vec::with_capacity(page.items.len());
        for link in page.items {
            if !principal.allows_space(&link.space) {
                continue;
            }
            let visits = stats.totals(link.id).map_err(LinkError::Store)?.visits;
            rows.push((link, visits));
        }
        Ok::<_, LinkError>((rows, page.next))
    })
    .await;
    let (rows, next) = match listed {
        Ok(r) => r,
        Err(e) => return refused(&state, &visitor, &e),
    };
    let items: Vec<Value> = rows
        .iter()
        .map(|(l, v)| link_view(&state, l, Some(*v)))
        .collect();
    let mut keep: Vec<(String, String)> = Vec::new();
    for name in ["q", "space", "status", "length"] {
        if let Some(v) = get(name) {
            keep.push((name.to_string(), v.to_string()));
        }
    }
    if let Some(domain) = &domain {
        keep.push(("domain".to_string(), domain.host.clone()));
    }
    let next_href = next.map(|n| {
        let mut q: String = keep
            .iter()
            .map(|(k, v)| format!("{k}={}&", urlencoding(v)))
            .collect();
        q.push_str(&format!("cursor={n}"));
        format!("/ui/links?{q}")
    });
    let lengths: Vec<u8> = state.config.tiers.keys().copied().collect();
    page(
        &state,
        &visitor,
        StatusCode::OK,
        "links.html",
        "links",
        context! {
            items => items,
            many_domains => state.links.domains().any_other(),
            domains => state.links.domains().list().iter().map(|d| d.host.clone()).collect::<Vec<_>>(),
            filtered => !keep.is_empty(),
            filter => ["q", "space", "status", "length", "domain"]
                .iter()
                .map(|k| (k.to_string(), keep.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default()))
                .collect::<HashMap<_, _>>(),
            statuses => LinkStatus::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            lengths => lengths,
            spaces => session.spaces.clone(),
            next_href => next_href,
            first_page => after.is_some(),
            notice => notice(&query),
        },
    )
}

/// The time range of a statistics view.
struct Range {
    key: String,
    from: Millis,
    to: Millis,
    granularity: Granularity,
}

/// `range` = 24h | 7d | 30d | 1y | custom (`from`, `to` as dates, both days included).
fn range(query: &HashMap<String, String>, now: Millis) -> Result<Range, &'static str> {
    let to = now + 1;
    let (key, from, to) = match query.get("range").map(String::as_str).unwrap_or("7d") {
        "24h" => ("24h", to.saturating_sub(DAY_MS), to),
        "30d" => ("30d", to.saturating_sub(30 * DAY_MS), to),
        "1y" => ("1y", to.saturating_sub(365 * DAY_MS), to),
        "custom" => {
            let date = |name: &str| {
                query
                    .get(name)
                    .and_then(|d| {
                        time::Date::parse(
                            d.trim(),
                            time::macros::format_description!("[year]-[month]-[day]"),
                        )
                        .ok()
                    })
                    .map(|d| {
                        let secs = d.midnight().assume_utc().unix_timestamp();
                        u64::try_from(secs).unwrap_or(0) * 1000
                    })
            };
            let (Some(from), Some(last)) = (date("from"), date("to")) else {
                return Err("err.invalid_date");
            };
            ("custom", from, last + DAY_MS)
        }
        _ => ("7d", to.saturating_sub(7 * DAY_MS), to),
    };
    if from >= to {
        return Err("err.range_order");
    }
    let granularity = Granularity::for_range(from, to);
    if granularity.points(from, to) > MAX_POINTS {
        return Err("err.range_too_long");
    }
    Ok(Range {
        key: key.to_string(),
        from,
        to,
        granularity,
    })
}

/// `GET /ui/links/{code}`.
pub async fn detail(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(code): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    render_detail(
        &state,
        &visitor,
        &code,
        &query,
        StatusCode::OK,
        Posted::Nothing,
        &[],
    )
    .await
}

async fn render_detail(
    state: &PageState,
    visitor: &Visitor,
    code: &str,
    query: &HashMap<String, String>,
    status: StatusCode,
    posted: Posted<'_>,
    errors: &[FormError],
) -> Response {
    if let Err(redirect) = visitor.require_session() {
        return redirect.into_response();
    }
    let link = match state.links.get(code) {
        Ok(link) => link,
        Err(e) => return refused(state, visitor, &e.into()),
    };
    if let Err(e) = visitor.caller().require_space(Role::Viewer, &link.space) {
        return refused(state, visitor, &e);
    }
    let now = state.links.now();
    let (range, range_error) = match range(query, now) {
        Ok(r) => (r, None),
        Err(key) => (
            Range {
                key: "7d".into(),
                from: now + 1 - 7 * DAY_MS,
                to: now + 1,
                granularity: Granularity::Day,
            },
            Some(key),
        ),
    };
    let before = query.get("before").and_then(|b| b.parse::<u64>().ok());
    // Leads are personal data: editors and admins of the link's space read them, as in the API.
    let may_read_leads = visitor
        .caller()
        .require_space(Role::Editor, &link.space)
        .is_ok();
    let stats_service = state.stats.clone();
    let lead_service = state.leads.clone();
    let (id, from, to, granularity) = (link.id, range.from, range.to, range.granularity);
    let stats_link = link.clone();
    let links = state.links.clone();
    let read = blocking(move || {
        let counted = links.counted(&stats_link).map_err(ApiError::from)?;
        let stats = stats_service.link(&stats_link, from, to, granularity)?;
        let totals = stats_service.totals(id)?;
        let recent = stats_service.recent(id, before, VISITS_PAGE)?;
        let leads = if may_read_leads {
            let total = lead_service.count(id).map_err(ApiError::from)?;
            let page = if total > 0 {
                lead_service
                    .page(id, None, LEADS_PAGE)
                    .map_err(ApiError::from)?
            } else {
                LeadPage::default()
            };
            Some((page, total))
        } else {
            None
        };
        Ok::<_, ApiError>((stats, totals, recent, counted, leads))
    })
    .await;
    let (stats, totals, recent, counted, leads) = match read {
        Ok(r) => r,
        Err(e) => return refused(state, visitor, &e),
    };
    let words = state.ui.catalogues.words(visitor.lang);
    let word = |k: &str| words.get(k).cloned().unwrap_or_default();
    let (bars, rows) = series(&stats, range.granularity);
    let chart = stacked_bars(
        &bars,
        &[&word("stats.humans"), &word("stats.bots")],
        &word("stats.chart_label"),
        1040.0,
    );
    let visits: Vec<Value> = recent
        .items
        .iter()
        .map(|v| {
            context! {
                at => display_time(v.at),
                browser => format!("{} {}", v.browser, v.browser_version).trim().to_string(),
                os => {
                    let (os, version) = crate::visits::ua::friendly_os(&v.os, &v.os_version);
                    format!("{os} {version}").trim().to_string()
                },
                device => v.device.clone(),
                is_bot => v.is_bot,
                place => [v.country.clone(), v.city.clone()].into_iter().flatten().collect::<Vec<_>>().join(" · "),
                referer => v.referer.clone(),
            }
        })
        .collect();
    let range_query = |extra: &str| {
        let mut q = format!("range={}", range.key);
        if range.key == "custom" {
            for name in ["from", "to"] {
                if let Some(v) = query.get(name) {
                    q.push_str(&format!("&{name}={}", urlencoding(v)));
                }
            }
        }
        format!("/ui/links/{}?{q}{extra}", urlencoding(&link.key()))
    };
    let older_href = recent
        .next
        .map(|n| range_query(&format!("&before={n}#visits")));
    let newest_href = before.map(|_| range_query("#visits"));
    let tops = [
        ("browser", &stats.top.browser),
        ("os", &stats.top.os),
        ("device", &stats.top.device),
        ("country", &stats.top.country),
        ("referer", &stats.top.referer),
    ]
    .into_iter()
    .map(|(name, entries)| {
        let sum: u64 = entries.iter().map(|e| e.visits).sum();
        context! {
            name => name,
            entries => entries.iter().map(|e| context! {
                value => if name == "os" {
                    crate::visits::ua::friendly_os(&e.value, "").0.to_string()
                } else {
                    e.value.clone()
                },
                visits => e.visits,
                share => (e.visits * 100).checked_div(sum).unwrap_or(0),
            }).collect::<Vec<_>>(),
        }
    })
    .collect::<Vec<_>>();
    let mut form_values: Fields = match posted {
        Posted::Edit(f) => f.clone(),
        Posted::Options(_, f) if f.contains_key("url") => f.clone(),
        _ => {
            let mut f = Fields::new();
            f.insert("url".into(), link.url.clone());
            f.insert("title".into(), link.title.clone().unwrap_or_default());
            f.insert("tags".into(), link.tags.join(", "));
            f
        }
    };
    for name in ["url", "title", "tags", "validity", "until"] {
        form_values.entry(name.to_string()).or_default();
    }
    let options_form = match posted {
        Posted::Options(f, _) => f.clone(),
        _ => OptionsForm::from_options(link.options.as_deref(), &counted),
    };
    let editable = visitor.can_edit() && link.status == LinkStatus::Active;
    // A link with a form, or whose form (since removed) left leads, has the section.
    let leads = leads
        .filter(|(_, total)| {
            *total > 0 || link.options.as_deref().is_some_and(|o| o.form.is_some())
        })
        .map(|(page, total)| leads_view(&link, &page, total));
    page(
        state,
        visitor,
        status,
        "link.html",
        "links",
        context! {
            link => link_view(state, &link, Some(totals.visits)),
            options => options_view(&link, &counted, now),
            opts => Value::from_serialize(&options_form),
            opts_posted => matches!(posted, Posted::Options(..)),
            blank_rule => Value::from_serialize(forms::RuleForm::default()),
            blank_target => Value::from_serialize(forms::TargetForm { weight: "1".into(), ..forms::TargetForm::default() }),
            devices => forms::DEVICES,
            systems => forms::SYSTEMS,
            apps => forms::apps(),
            rotations => forms::ROTATIONS,
            max_rules => MAX_RULES,
            max_targets => MAX_TARGETS,
            blank_field => Value::from_serialize(forms::FieldForm::default()),
            field_kinds => forms::FIELD_KINDS,
            in_app_choices => forms::IN_APP_CHOICES,
            in_app_default => state.config.links.in_app.as_str(),
            max_fields => MAX_FORM_FIELDS,
            leads => leads,
            destinations => destinations_view(&stats),
            // A plain link's visits all go to its URL: no table for that alone.
            show_destinations => link.options.as_deref().is_some_and(|o| !o.rules.is_empty() || !o.targets.is_empty())
                || stats.destinations.iter().any(|d| d.route != Route::Default.name()),
            editable => editable,
            deletable => visitor.can_edit() && matches!(link.status, LinkStatus::Active | LinkStatus::Expired),
            range => range.key.clone(),
            custom_from => query.get("from").cloned().unwrap_or_default(),
            custom_to => query.get("to").cloned().unwrap_or_default(),
            range_error => range_error,
            granularity => match range.granularity { Granularity::Hour => "hour", Granularity::Day => "day" },
            total => stats.total,
            bots => stats.bots,
            humans => stats.total - stats.bots,
            unique => stats.unique_visitors,
            chart => Value::from_safe_string(chart),
            rows => rows,
            tops => tops,
            visits => visits,
            older_href => older_href,
            newest_href => newest_href,
            form => form_values,
            errors => errors.iter().map(|e| (e.field.clone(), e.key.clone())).collect::<HashMap<_, _>>(),
            validity_choices => VALIDITY_CHOICES.iter().filter(|(v, _)| !v.is_empty()).map(|(v, k)| context! { value => *v, key => *k }).collect::<Vec<_>>(),
            notice => notice(query),
        },
    )
}

/// The chart's bars and the table's rows of a statistics series.
fn series(stats: &LinkStats, granularity: Granularity) -> (Vec<Bar>, Vec<Value>) {
    let mut bars = Vec::with_capacity(stats.series.len());
    let mut rows = Vec::with_capacity(stats.series.len());
    for point in &stats.series {
        let (date, hour) = (
            point.t.get(..10).unwrap_or_default(),
            point.t.get(11..16).unwrap_or_default(),
        );
        let (label, title) = match granularity {
            Granularity::Hour => (hour.to_string(), format!("{date} {hour} UTC")),
            Granularity::Day => (date.get(5..).unwrap_or(date).to_string(), date.to_string()),
        };
        let humans = point.visits - point.bots;
        rows.push(context! { label => title.clone(), humans => humans, bots => point.bots, total => point.visits });
        bars.push(Bar {
            label,
            title,
            values: vec![humans, point.bots],
        });
    }
    (bars, rows)
}

/// Checks the visitor's right to change `code` (the form's token was checked by [`CheckedForm`]).
fn check_change(state: &PageState, visitor: &Visitor, code: &str) -> Result<Link, Box<Response>> {
    if let Err(redirect) = visitor.require_session() {
        return Err(Box::new(redirect.into_response()));
    }
    let link = state
        .links
        .get(code)
        .map_err(|e| Box::new(refused(state, visitor, &e.into())))?;
    visitor
        .caller()
        .require_space(Role::Editor, &link.space)
        .map_err(|e| Box::new(refused(state, visitor, &e)))?;
    Ok(link)
}

/// `POST /ui/links/{code}/edit`: URL, validity, title, tags.
pub async fn edit(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(code): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    if let Err(response) = check_change(&state, &visitor, &code) {
        return *response;
    }
    if field(&fields, "section") == Some("options") {
        return edit_options(&state, &visitor, &code, &fields).await;
    }
    let no_query = HashMap::new();
    let validity = match forms::validity(&fields) {
        Ok(v) => v,
        Err(e) => {
            return render_detail(
                &state,
                &visitor,
                &code,
                &no_query,
                StatusCode::BAD_REQUEST,
                Posted::Edit(&fields),
                &[e],
            )
            .await
        }
    };
    let patch = UpdateLink {
        url: field(&fields, "url").map(str::to_string),
        expires_at: validity.to_update(state.links.now()),
        title: Some(field(&fields, "title").map(str::to_string)),
        tags: Some(forms::tags(&fields).unwrap_or_default()),
        ..UpdateLink::default()
    };
    let links = state.links.clone();
    let target = code.clone();
    match blocking(move || links.update(&target, patch)).await {
        Ok(link) => {
            crate::web::access::audit_link(
                &state,
                visitor.caller().0.as_deref(),
                "link.updated",
                &link,
                visitor.ip,
            );
            see_other(&format!("/ui/links/{}?notice=saved", urlencoding(&code)))
        }
        Err(e) => {
            let known = |k: &str| state.ui.catalogues.words(visitor.lang).contains_key(k);
            let error = FormError::from_api(&e, known);
            render_detail(
                &state,
                &visitor,
                &code,
                &no_query,
                e.status,
                Posted::Edit(&fields),
                &[error],
            )
            .await
        }
    }
}

/// The options form of `POST /ui/links/{code}/edit` (`section=options`): a row button adds,
/// removes or moves a rule or target and shows the form again, unsaved; `save` sends every
/// option as one update, and a refusal is shown beside the input it is about, with every
/// value kept.
async fn edit_options(
    state: &PageState,
    visitor: &Visitor,
    code: &str,
    fields: &Fields,
) -> Response {
    let no_query = HashMap::new();
    let mut form = OptionsForm::from_fields(fields);
    let action = forms::options_action(fields);
    if action != OptionsAction::Save {
        form.apply(action);
        return render_detail(
            state,
            visitor,
            code,
            &no_query,
            StatusCode::OK,
            Posted::Options(&form, fields),
            &[],
        )
        .await;
    }
    // The editor also holds the link's URL, title, tags and validity (absent from a post
    // of the options alone): saved in the same update.
    let basics = fields.contains_key("url");
    let validity = if basics {
        forms::validity(fields).map(Some)
    } else {
        Ok(None)
    };
    let mut request = match (form.to_request(), validity) {
        (Ok(r), Ok(validity)) => (r, validity),
        (checked, validity) => {
            let mut errors = checked.err().unwrap_or_default();
            errors.extend(validity.err());
            return render_detail(
                state,
                visitor,
                code,
                &no_query,
                StatusCode::BAD_REQUEST,
                Posted::Options(&form, fields),
                &errors,
            )
            .await;
        }
    };
    if let Some(validity) = request.1 {
        let update = &mut request.0.update;
        update.url = field(fields, "url").map(str::to_string);
        update.title = Some(field(fields, "title").map(str::to_string));
        update.tags = Some(forms::tags(fields).unwrap_or_default());
        update.expires_at = validity.to_update(state.links.now());
    }
    let request = request.0;
    let links = state.links.clone();
    let target = code.to_string();
    let update = request.update.clone();
    match blocking(move || links.update(&target, update)).await {
        Ok(link) => {
            crate::web::access::audit_link(
                state,
                visitor.caller().0.as_deref(),
                "link.updated",
                &link,
                visitor.ip,
            );
            see_other(&format!(
                "/ui/links/{}?notice=saved#options",
                urlencoding(code)
            ))
        }
        Err(e) => {
            let known = |k: &str| state.ui.catalogues.words(visitor.lang).contains_key(k);
            // A refusal of the URL, title or tags goes beside them, as the edit form's.
            let error = match e.field.as_deref() {
                Some("url" | "title" | "tags" | "expires_at") if basics => {
                    FormError::from_api(&e, known)
                }
                _ => forms::options_error(&e, &request, known),
            };
            render_detail(
                state,
                visitor,
                code,
                &no_query,
                e.status,
                Posted::Options(&form, fields),
                &[error],
            )
            .await
        }
    }
}

/// `POST /ui/links/{code}/delete`.
pub async fn delete(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(code): Path<String>,
    _form: CheckedForm,
) -> Response {
    let link = match check_change(&state, &visitor, &code) {
        Ok(link) => link,
        Err(response) => return *response,
    };
    if link.status == LinkStatus::Deleted {
        return message(
            &state,
            &visitor,
            StatusCode::NOT_FOUND,
            "msg.already_deleted",
        );
    }
    let links = state.links.clone();
    match blocking(move || links.delete(&code)).await {
        Ok(link) => {
            crate::web::access::audit_link(
                &state,
                visitor.caller().0.as_deref(),
                "link.deleted",
                &link,
                visitor.ip,
            );
            see_other("/ui/links?notice=deleted")
        }
        Err(e) => refused(&state, &visitor, &e),
    }
}

/// `GET /ui/links/{code}/qr?format=svg|png&size=N`: as the API's, behind the session.
pub async fn qr(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(code): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let result = (|| {
        let link = authorized_link(&state, &visitor.caller(), &code, Role::Viewer)?;
        let params = QrParams::parse(&query)?;
        qr_response(&state.links.short_url_of(&link), params)
    })();
    let mut response = result.unwrap_or_else(IntoResponse::into_response);
    if matches!(query.get("download").map(String::as_str), Some("1"))
        && response.status().is_success()
    {
        let ext = if query.get("format").map(String::as_str) == Some("png") {
            "png"
        } else {
            "svg"
        };
        if let Ok(v) =
            axum::http::HeaderValue::from_str(&format!("attachment; filename=\"qr-{code}.{ext}\""))
        {
            response
                .headers_mut()
                .insert(axum::http::header::CONTENT_DISPOSITION, v);
        }
    }
    response
}

/// `GET /ui/links/{code}/leads.csv`: every lead of the link's form, streamed; editors and
/// admins of its space only, as the API's.
pub async fn leads_csv(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(code): Path<String>,
) -> Response {
    if let Err(redirect) = visitor.require_session() {
        return redirect.into_response();
    }
    let link = match authorized_link(&state, &visitor.caller(), &code, Role::Editor) {
        Ok(link) => link,
        Err(e) => return refused(&state, &visitor, &e),
    };
    if let Err(e) = state.plans.require_in(&link.space, "export", "format") {
        return refused(&state, &visitor, &e.into());
    }
    match leads_csv_response(state.leads.clone(), link).await {
        Ok(response) => response,
        Err(e) => refused(&state, &visitor, &e),
    }
}

/// `GET /ui/links/{code}/visits.csv`: every visit, streamed.
pub async fn visits_csv(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(code): Path<String>,
) -> Response {
    if let Err(redirect) = visitor.require_session() {
        return redirect.into_response();
    }
    let link = match state.links.get(&code) {
        Ok(link) => link,
        Err(e) => return refused(&state, &visitor, &e.into()),
    };
    if let Err(e) = visitor.caller().require_space(Role::Viewer, &link.space) {
        return refused(&state, &visitor, &e);
    }
    if let Err(e) = state.plans.require_in(&link.space, "export", "format") {
        return refused(&state, &visitor, &e.into());
    }
    csv_response(state.stats.clone(), link.id, None, &link.code)
}
