//! The review of destinations over the API: a link's reviews, links by their latest verdict,
//! asking for a review, and an admin's verdict. The rules (who may, what a verdict does) are
//! the review service's and the keys'; this file checks the caller and shapes the answers.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::api::{page_params, CodePath, LinkView};
use crate::config::Role;
use crate::links::rfc3339;
use crate::model::{CheckRecord, Review, Verdict};
use crate::web::access::{authorized_link, blocking};
use crate::web::caller::Caller;
use crate::web::error::ApiError;
use crate::web::state::AppState;

/// A review as the API shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ReviewView {
    pub id: u64,
    pub at: String,
    /// `created`, `changed`, `visits`, `requested` or `override`.
    pub trigger: &'static str,
    /// Each check in order: `{check, outcome, detail}`.
    #[schema(value_type = Vec<Object>)]
    pub checks: Vec<CheckRecord>,
    pub score: Option<f64>,
    pub reason: Option<String>,
    /// `ok`, `flagged`, `blocked` or `unscored`.
    pub verdict: &'static str,
    pub final_url: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub screenshot: bool,
    /// The key's name behind an override.
    pub by: Option<String>,
}

impl From<Review> for ReviewView {
    fn from(r: Review) -> Self {
        Self {
            id: r.id,
            at: rfc3339(r.at),
            trigger: r.trigger.as_str(),
            checks: r.checks,
            score: r.score,
            reason: r.reason,
            verdict: r.verdict.as_str(),
            final_url: r.final_url,
            title: r.title,
            description: r.description,
            screenshot: r.screenshot,
            by: r.by,
        }
    }
}

#[derive(Serialize)]
struct ReviewList {
    items: Vec<ReviewView>,
}

/// `GET /api/v1/links/{code}/reviews`: the link's reviews, newest first (at most 100).
#[utoipa::path(get, path = "/api/v1/links/{code}/reviews", tag = "review",
    params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404")), security(("api_key" = [])),
    responses((status = 200, description = "`{items: [{id, at, trigger, checks, score, reason, verdict, final_url, title, description, screenshot, by}]}`: `title` and `description` are the fetched page's `<title>` and meta description"),
        (status = 403, description = "The key may not use the link's space"),
        (status = 404, description = "No such code")))]
pub async fn link_reviews(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
) -> Result<Response, ApiError> {
    let link = authorized_link(&state, &caller, &code, Role::Viewer)?;
    let reviews = state.reviews.clone();
    let items = blocking(move || reviews.list(link.id)).await?;
    Ok(Json(ReviewList {
        items: items.into_iter().map(ReviewView::from).collect(),
    })
    .into_response())
}

/// The body of `POST /api/v1/links/{code}/review`: none to ask for a review, or an admin's
/// verdict.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// `ok` or `blocked`.
    pub verdict: String,
}

/// `POST /api/v1/links/{code}/review`: with no body, queue the link for review (editors of
/// its space; 202); with `{"verdict": "ok"|"blocked"}`, an admin's verdict (200, the review).
#[utoipa::path(post, path = "/api/v1/links/{code}/review", tag = "review",
    params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404")), security(("api_key" = [])),
    request_body(content = Option<Decision>, description = "None: review it; `{\"verdict\"}`: an admin's verdict"),
    responses((status = 202, description = "Queued (`{\"queued\": true}`, or false when it already waits)"),
        (status = 200, description = "The admin's verdict, kept as a review"),
        (status = 400, description = "A verdict other than ok or blocked"),
        (status = 409, description = "`review_disabled`: `review.enabled` is off"),
        (status = 403, description = "A verdict from a key that is not an admin's, or a key that may not use the link's space")))]
pub async fn review_link(
    State(state): State<AppState>,
    caller: Caller,
    crate::web::caller::ClientIp(ip): crate::web::caller::ClientIp,
    CodePath(code): CodePath,
    body: Bytes,
) -> Result<Response, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        let link = authorized_link(&state, &caller, &code, Role::Editor)?;
        if !state.reviews.enabled() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "review_disabled",
                "reviews are off: set review.enabled to review destinations",
            ));
        }
        let reviews = state.reviews.clone();
        let queued = blocking(move || reviews.request(link.id)).await?;
        return Ok((
            StatusCode::ACCEPTED,
            Json(serde_json::json!({ "queued": queued })),
        )
            .into_response());
    }
    let principal = caller.require(Role::Admin)?.clone();
    let link = authorized_link(&state, &caller, &code, Role::Admin)?;
    let decision: Decision = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request("invalid_json", "verdict", format!("the body: {e}")))?;
    let verdict = match Verdict::parse(&decision.verdict) {
        Some(v @ (Verdict::Ok | Verdict::Blocked)) => v,
        _ => {
            return Err(ApiError::bad_request(
                "invalid_verdict",
                "verdict",
                format!("a verdict is `ok` or `blocked`, not `{}`", decision.verdict),
            ))
        }
    };
    crate::web::access::audit_link(&state, Some(&principal), "review.override", &link, ip);
    let review = state
        .reviews
        .decide(link, verdict, &principal.name)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(ReviewView::from(review)).into_response())
}

#[derive(Serialize)]
struct VerdictPage {
    items: Vec<ReviewedLink>,
    next_cursor: Option<String>,
}

/// A link of the listing by verdict: the link as `GET` of it shows it, its latest review in
/// full, and its latest checked review (the same unless the latest is an admin's override,
/// which checks nothing), so that a reviewer sees what the fetch found (final URL, title,
/// description) and each check without a request per link.
#[derive(Serialize)]
struct ReviewedLink {
    #[serde(flatten)]
    link: LinkView,
    latest_review: Option<ReviewView>,
    checked_review: Option<ReviewView>,
}

/// `GET /api/v1/reviews?verdict=flagged|blocked|ok|unscored&cursor&limit`: links by their
/// latest verdict, in id order (admins; a key limited to spaces lists the links of its spaces
/// only, as every other listing does).
#[utoipa::path(get, path = "/api/v1/reviews", tag = "review",
    params(("verdict" = String, Query, description = "`flagged` (default), `blocked`, `ok` or `unscored`"),
        ("cursor" = Option<String>, Query, description = "From a previous page"),
        ("limit" = Option<usize>, Query, description = "1 to 1000 (default 100)")),
    security(("api_key" = [])),
    responses((status = 200, description = "`{items: [link], next_cursor}`: the links of the key's spaces only; each link has `review` (its verdict), `latest_review` (the latest review in full, as `GET /api/v1/links/{code}/reviews` shows it: checks, final_url, title, description, …) and `checked_review` (the latest review that ran the checks: the same, unless the latest is an admin's override, which checks nothing). A page holds `limit` links while that many are left, except that one request looks at 10,000 listed links at most: past them a page may end short, with a `next_cursor`"),
        (status = 403, description = "Not an admin's key")))]
pub async fn by_verdict(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let spaces = caller.require(Role::Admin)?.spaces.clone();
    let verdict = match params.get("verdict").map(String::as_str) {
        None | Some("") => Verdict::Flagged,
        Some(text) => Verdict::parse(text).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_query",
                "verdict",
                format!("`{text}` is not one of ok, flagged, blocked, unscored"),
            )
        })?,
    };
    let (after, limit) = page_params(&params)?;
    let reviews = state.reviews.clone();
    let (links, next) = blocking(move || {
        let (links, next) = reviews.by_verdict(verdict, after, limit, spaces.as_deref())?;
        let mut out = Vec::with_capacity(links.len());
        for link in links {
            let (latest, checked) = reviews.latest_and_checked(link.id)?;
            out.push((link, latest, checked));
        }
        Ok::<_, ApiError>((out, next))
    })
    .await?;
    Ok(Json(VerdictPage {
        items: links
            .into_iter()
            .map(|(link, latest, checked)| ReviewedLink {
                link: LinkView::new(&state, &link),
                latest_review: latest.map(ReviewView::from),
                checked_review: checked.map(ReviewView::from),
            })
            .collect(),
        next_cursor: next.map(|n| n.to_string()),
    })
    .into_response())
}
