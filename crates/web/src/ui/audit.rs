//! `/ui/admin/audit`: the audit log, newest first, filtered by actor, action, team and dates,
//! paged by cursor. Admins see every entry; a team's owners see their team's (the team filter
//! is then required and set to their first team). The query and who may ask are the API's
//! (`web::accounts::audit_query`), read the same way here.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::{context, Value};

use super::account::{signed_in, Refusal};
use super::render::{message, page, urlencoding, Visitor};
use super::PageState;
use crate::config::Role;
use crate::web::access::blocking;
use crate::web::accounts::{audit_query, AuditView};

/// Entries per page.
const PAGE: &str = "50";

/// The actions the filter offers (SPEC §24's list).
const ACTIONS: &[&str] = &[
    "link.created",
    "link.updated",
    "link.deleted",
    "key.created",
    "key.revoked",
    "user.created",
    "user.updated",
    "user.deleted",
    "team.created",
    "team.updated",
    "team.deleted",
    "member.set",
    "member.removed",
    "domain.created",
    "domain.updated",
    "domain.deleted",
    "review.override",
    "sign_in",
    "sign_in.failed",
];

/// `GET /ui/admin/audit?actor&action&team&from&to&cursor` (`from` and `to` are dates, or
/// RFC 3339 times).
pub async fn list(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    // The teams whose log this caller may read: every team for admins, else those it owns.
    let dir = state.accounts.directory();
    let teams: Vec<String> = dir
        .teams()
        .filter(|t| p.everywhere() || p.role_in(&t.slug) == Some(Role::Admin))
        .map(|t| t.slug.clone())
        .collect();
    if !p.everywhere() && teams.is_empty() {
        return message(&state, &visitor, StatusCode::FORBIDDEN, "msg.forbidden");
    }
    let text = |name: &str| {
        query
            .get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let mut filter: HashMap<String, String> = HashMap::new();
    for name in ["actor", "action", "team", "from", "to"] {
        if let Some(v) = text(name) {
            filter.insert(name.to_string(), v);
        }
    }
    if !p.everywhere() && !filter.contains_key("team") {
        if let Some(first) = teams.first() {
            filter.insert("team".into(), first.clone());
        }
    }
    // The API's parameters: a date is its day's start (`from`) or end (`to`), in UTC.
    let mut params = filter.clone();
    for (name, time) in [("from", "T00:00:00Z"), ("to", "T23:59:59.999Z")] {
        if let Some(v) = params.get_mut(name) {
            if v.len() == 10 {
                v.push_str(time);
            }
        }
    }
    params.insert("limit".into(), PAGE.into());
    if let Some(c) = text("cursor") {
        params.insert("cursor".into(), c);
    }
    let here = {
        let mut pairs: Vec<(&String, &String)> = filter.iter().collect();
        pairs.sort();
        let q: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencoding(v)))
            .collect();
        format!("/ui/admin/audit?{}", q.join("&"))
    };
    let (entries, next, errors) = match audit_query(&p, &params) {
        Ok(q) => {
            let accounts = state.accounts.clone();
            match blocking(move || accounts.audit.list(&q)).await {
                Ok(page) => (page.entries, page.next, Default::default()),
                Err(_) => {
                    return message(
                        &state,
                        &visitor,
                        StatusCode::SERVICE_UNAVAILABLE,
                        "msg.failed",
                    )
                }
            }
        }
        Err(e) if e.status == StatusCode::FORBIDDEN => {
            return message(&state, &visitor, StatusCode::FORBIDDEN, "msg.forbidden")
        }
        Err(e) => {
            let refusal = Refusal::of(e);
            (Vec::new(), None, refusal.errors(""))
        }
    };
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    // `user:<id>` as the person's email, which an admin recognises (the id stays in the
    // title and in the filter).
    let email = |who: &str| {
        who.strip_prefix("user:")
            .and_then(|id| dir.user(id))
            .map(|u| u.email.clone())
    };
    let entries: Vec<Value> = entries
        .iter()
        .map(|e| {
            context! {
                actor_email => email(&e.actor),
                target_email => email(&e.target),
                ..Value::from_serialize(AuditView::new(e))
            }
        })
        .collect();
    page(
        &state,
        &visitor,
        status,
        "audit.html",
        "audit",
        context! {
            entries => entries,
            filter => filter,
            teams => teams,
            all_teams => p.everywhere(),
            actions => ACTIONS,
            errors => errors,
            first_href => text("cursor").map(|_| here.clone()),
            next_href => next.map(|n| format!("{here}&cursor={n}")),
        },
    )
}
