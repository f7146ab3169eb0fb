//! `/ui/reviews` (admins): links by their latest review verdict — flagged by default, blocked,
//! ok or unscored — paged by cursor, each with its latest review (trigger, score, reason, what
//! the fetch found, each check, the screenshot; behind an admin's override, which checks
//! nothing, those of the latest checked review) and an admin's Approve and Block; the
//! screenshots' route; and the verdict post that the link's page shares. An admin limited to
//! spaces sees, and decides on, the links of those spaces only. The rules (who may, what a
//! verdict does) are the review service's; this file checks the admin and shapes views.

use super::render::refused;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::{context, Value};

use super::forms::{field, CheckedForm};
use super::home::display_time;
use super::render::{local_path, message, page, see_other, urlencoding, Visitor};
use super::PageState;
use crate::config::Role;
use crate::model::{Link, Review, ReviewMark, Verdict};
use crate::web::access::{authorized_link, blocking};
use crate::web::error::ApiError;

/// Links per page of the list.
const PAGE: usize = 20;

/// The verdicts the page has a tab for, in the tabs' order.
const TABS: [Verdict; 4] = [
    Verdict::Flagged,
    Verdict::Blocked,
    Verdict::Ok,
    Verdict::Unscored,
];

/// Signed in as an admin, or the response that says why not (sign-in redirect, 403 page).
fn require_admin(state: &PageState, visitor: &Visitor) -> Result<(), Box<Response>> {
    if let Err(redirect) = visitor.require_session() {
        return Err(Box::new(redirect.into_response()));
    }
    if let Err(e) = visitor.caller().require(Role::Admin) {
        return Err(Box::new(message(state, visitor, e.status, "msg.forbidden")));
    }
    Ok(())
}

/// A score as the pages show it (two decimals).
fn score_text(score: Option<f64>) -> Option<String> {
    score.map(|s| format!("{s:.2}"))
}

/// A link's latest verdict (kept on the link) as the pages show it.
pub fn mark_view(mark: &ReviewMark) -> Value {
    context! {
        verdict => mark.verdict.as_str(),
        score => score_text(mark.score),
        reason => mark.reason.clone(),
        at => display_time(mark.at),
    }
}

/// A review as the list shows it.
fn review_view(review: &Review) -> Value {
    context! {
        id => review.id,
        at => display_time(review.at),
        trigger => review.trigger.as_str(),
        verdict => review.verdict.as_str(),
        score => score_text(review.score),
        reason => review.reason.clone(),
        title => review.title.clone(),
        description => review.description.clone(),
        final_url => review.final_url.clone(),
        screenshot => review.screenshot,
        by => review.by.clone(),
        checks => review.checks.iter().map(|c| context! {
            check => c.check.clone(),
            outcome => c.outcome.clone(),
            detail => c.detail.clone(),
        }).collect::<Vec<_>>(),
    }
}

/// `GET /ui/reviews?verdict=flagged|blocked|ok|unscored&after=N` (admins).
pub async fn list(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(response) = require_admin(&state, &visitor) {
        return *response;
    }
    let verdict = query
        .get("verdict")
        .and_then(|v| Verdict::parse(v))
        .unwrap_or(Verdict::Flagged);
    let after = query.get("after").and_then(|a| a.parse::<u64>().ok());
    // The admin's spaces, as on every other page: another space's links, destinations and
    // screenshots are not theirs to see.
    let spaces = visitor.caller().0.and_then(|p| p.spaces.clone());
    let reviews = state.reviews.clone();
    let read = blocking(move || {
        let (links, next) = reviews.by_verdict(verdict, after, PAGE, spaces.as_deref())?;
        let mut out: Vec<(Link, Option<Review>, Option<Review>)> = Vec::with_capacity(links.len());
        for link in links {
            let (latest, checked) = reviews.latest_and_checked(link.id)?;
            out.push((link, latest, checked));
        }
        // Each tab's count, up to a page ("50+" past it).
        let mut counts = std::collections::BTreeMap::new();
        for tab in TABS {
            let (some, more) = reviews.by_verdict(tab, None, PAGE, spaces.as_deref())?;
            let n = some.len().to_string();
            counts.insert(tab.as_str(), if more.is_some() { n + "+" } else { n });
        }
        Ok::<_, ApiError>((out, next, counts))
    })
    .await;
    let (items, next, counts) = match read {
        Ok(r) => r,
        Err(e) => return refused(&state, &visitor, &e),
    };
    let items: Vec<Value> = items
        .iter()
        .map(|(link, latest, checked)| {
            context! {
                code => link.code.clone(),
                // The pages' paths name a link of another domain by its key (`code@id`).
                ref => link.key().into_owned(),
                url => link.url.clone(),
                status => link.status.as_str(),
                link_title => link.title.clone(),
                review => latest.as_ref().map(review_view),
                // What the checks found: the latest review's own, or behind an override the
                // latest checked one's (an override checks nothing).
                found => checked.as_ref().map(review_view),
            }
        })
        .collect();
    let here = format!("/ui/reviews?verdict={}", verdict.as_str());
    let back = match after {
        Some(a) => format!("{here}&after={a}"),
        None => here.clone(),
    };
    page(
        &state,
        &visitor,
        StatusCode::OK,
        "reviews.html",
        "reviews",
        context! {
            verdict => verdict.as_str(),
            tabs => TABS.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
            counts => counts,
            items => items,
            enabled => state.reviews.enabled(),
            back => back,
            first_href => after.map(|_| here.clone()),
            next_href => next.map(|n| format!("{here}&after={n}")),
            notice => notice(&query),
        },
    )
}

/// Notices a verdict's redirect may ask a page to show (`?notice=`), by catalogue key.
pub const NOTICES: &[&str] = &["approved", "blocked"];

fn notice(query: &HashMap<String, String>) -> Option<String> {
    query
        .get("notice")
        .filter(|n| NOTICES.contains(&n.as_str()))
        .map(|n| format!("notice.{n}"))
}

/// `POST /ui/reviews/{code}` with `verdict=ok|blocked` (admins): an admin's verdict, kept as
/// a review with the key's name; then back to `back` (the list, or the link's page).
pub async fn decide(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(code): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    if let Err(response) = require_admin(&state, &visitor) {
        return *response;
    }
    let caller = visitor.caller();
    let Ok(principal) = caller.require(Role::Admin) else {
        return message(&state, &visitor, StatusCode::FORBIDDEN, "msg.forbidden");
    };
    let by = principal.name.clone();
    let verdict = match field(&fields, "verdict").and_then(Verdict::parse) {
        Some(v @ (Verdict::Ok | Verdict::Blocked)) => v,
        _ => return message(&state, &visitor, StatusCode::BAD_REQUEST, "msg.bad_form"),
    };
    let link = match authorized_link(&state, &caller, &code, Role::Admin) {
        Ok(link) => link,
        Err(e) => return refused(&state, &visitor, &e),
    };
    if let Err(e) = state.reviews.decide(link, verdict, &by).await {
        return refused(&state, &visitor, &ApiError::from(e));
    }
    let back = local_path(field(&fields, "back"), "/ui/reviews");
    let (path, fragment) = match back.split_once('#') {
        Some((p, f)) => (p.to_string(), format!("#{f}")),
        None => (back.clone(), String::new()),
    };
    let joiner = if path.contains('?') { '&' } else { '?' };
    let said = match verdict {
        Verdict::Blocked => "blocked",
        _ => "approved",
    };
    see_other(&format!(
        "{path}{joiner}notice={said}&code={}{fragment}",
        urlencoding(&code)
    ))
}

/// `GET /ui/reviews/{code}/{review_id}/screenshot.png` (admins of the link's space): the
/// screenshot of a review of that link, or 404. The code is in the path so that the admin's
/// right to the link is checked before anything of its review is read.
pub async fn screenshot(
    State(state): State<PageState>,
    visitor: Visitor,
    Path((code, review_id)): Path<(String, String)>,
) -> Response {
    if let Err(response) = require_admin(&state, &visitor) {
        return *response;
    }
    let not_found = |state: &PageState, visitor: &Visitor| {
        message(state, visitor, StatusCode::NOT_FOUND, "msg.no_screenshot")
    };
    let Ok(id) = review_id.parse::<u64>() else {
        return not_found(&state, &visitor);
    };
    let link = match authorized_link(&state, &visitor.caller(), &code, Role::Admin) {
        Ok(link) => link,
        Err(e) => return refused(&state, &visitor, &e),
    };
    let reviews = state.reviews.clone();
    match blocking(move || reviews.screenshot(link.id, id)).await {
        Ok(Some(png)) => {
            let mut response = (StatusCode::OK, png).into_response();
            let h = response.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=3600"),
            );
            response
        }
        Ok(None) => not_found(&state, &visitor),
        Err(e) => refused(&state, &visitor, &e),
    }
}
