//! `/ui/dashboard`: today and the last 14 days (creates, visits) as charts and tables, links by
//! status, every pool's level, with a refill button for admins, and the webhooks' last failed
//! deliveries.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use minijinja::{context, Value};

use super::chart::{stacked_bars, Bar};
use super::forms::CheckedForm;
use super::render::{message, page, see_other, Visitor};
use super::PageState;
use crate::config::Role;
use crate::model::StoreError;
use crate::pools::TierStatus;
use crate::web::access::blocking;

/// Webhook failures the dashboard lists.
const WEBHOOK_FAILURES: usize = 10;

/// `GET /ui/dashboard`.
pub async fn show(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(redirect) = visitor.require_session() {
        return redirect.into_response();
    }
    let stats = state.stats.clone();
    let pools = state.pools.clone();
    let webhooks = state.webhooks.clone();
    // A key limited to spaces sees its spaces' counts only.
    let spaces = visitor
        .session
        .as_ref()
        .and_then(|s| s.principal.spaces.clone());
    // Webhook deliveries concern every space and name receivers: admins of every space only.
    let sees_webhooks = webhooks.enabled()
        && spaces.is_none()
        && visitor
            .session
            .as_ref()
            .is_some_and(|s| s.principal.role == Role::Admin);
    // Every team's usage: admins of every space, when plans are configured (SPEC §25).
    let sees_usage = !state.config.plans.is_empty()
        && spaces.is_none()
        && visitor
            .session
            .as_ref()
            .is_some_and(|s| s.principal.everywhere());
    let (plans, directory) = (state.plans.clone(), state.accounts.directory());
    let read = blocking(move || {
        let usage: Vec<(String, crate::plans::Usage)> = if sees_usage {
            directory
                .teams()
                .map(|t| Ok((t.slug.clone(), plans.usage(&t.slug)?)))
                .collect::<Result<_, StoreError>>()?
        } else {
            Vec::new()
        };
        let system = stats.system(spaces.as_deref())?;
        let pools = pools.tier_statuses()?;
        let failures = if sees_webhooks {
            webhooks.failures(WEBHOOK_FAILURES)?
        } else {
            Vec::new()
        };
        Ok::<_, StoreError>((system, pools, failures, usage))
    })
    .await;
    let (system, pools, failures, usage) = match read {
        Ok(r) => r,
        Err(e) => return message(&state, &visitor, e.status, "msg.failed"),
    };
    let words = state.ui.catalogues.words(visitor.lang);
    let word = |k: &str| words.get(k).cloned().unwrap_or_default();
    let chart = |pick: fn(&crate::visits::stats::Day) -> u64, series: &str| {
        let bars: Vec<Bar> = system
            .days
            .iter()
            .map(|d| Bar {
                label: d.date.get(5..).unwrap_or(&d.date).to_string(),
                title: d.date.clone(),
                values: vec![pick(d)],
            })
            .collect();
        Value::from_safe_string(stacked_bars(&bars, &[series], series, 460.0))
    };
    let creates_chart = chart(|d| d.creates, &word("dash.creates"));
    let visits_chart = chart(|d| d.visits, &word("dash.visits"));
    let days: Vec<Value> = system
        .days
        .iter()
        .rev()
        .map(|d| context! { date => d.date.clone(), creates => d.creates, visits => d.visits })
        .collect();
    let pools: Vec<Value> = pools
        .iter()
        .map(|t| match t {
            TierStatus::Pool(p) => context! {
                length => p.length,
                strategy => p.strategy.as_str(),
                check => p.check,
                pooled => true,
                available => p.counts.available,
                cooling => p.counts.cooling,
                generated => p.counts.generated_total,
                recycled => p.counts.recycled_total,
                exhausted => p.exhausted,
            },
            // Computed codes (`hash`): no pool, nothing to count or refill.
            TierStatus::Computed(c) => context! {
                length => c.length,
                strategy => c.strategy,
                check => c.check,
                pooled => false,
                exhausted => false,
            },
        })
        .collect();
    let failures: Vec<Value> = failures
        .iter()
        .map(|f| {
            context! {
                webhook => f.webhook.clone(),
                event => f.event.clone(),
                at => super::home::display_time(f.at),
                attempts => f.attempts,
                gave_up => f.outcome == crate::model::outbox::DeliveryOutcome::GaveUp,
                status => f.status,
                error => f.error.clone(),
            }
        })
        .collect();
    let notice = query
        .get("notice")
        .filter(|n| n.as_str() == "refilled")
        .map(|_| "notice.refilled");
    page(
        &state,
        &visitor,
        StatusCode::OK,
        "dashboard.html",
        "dashboard",
        context! {
            today => context! { creates => system.today.creates, visits => system.today.visits },
            counts => context! {
                active => system.links.active,
                expired => system.links.expired,
                deleted => system.links.deleted,
                archived => system.links.archived,
            },
            creates_chart => creates_chart,
            visits_chart => visits_chart,
            days => days,
            pools => pools,
            webhooks => sees_webhooks,
            failures => failures,
            usage => usage.iter().map(|(team, u)| context! {
                team => team,
                plan => u.plan.clone(),
                links => u.links_this_month,
                active => u.active_links,
                visits => u.visits_this_month,
            }).collect::<Vec<_>>(),
            sees_usage => sees_usage,
            notice => notice,
        },
    )
}

/// `POST /ui/pools/{length}/refill` (admins): one batch of the tier now.
pub async fn refill(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(length): Path<String>,
    _form: CheckedForm,
) -> Response {
    if let Err(redirect) = visitor.require_session() {
        return redirect.into_response();
    }
    if let Err(e) = visitor.caller().require(Role::Admin) {
        return message(&state, &visitor, e.status, "msg.forbidden");
    }
    let Some(length) = length
        .parse::<u8>()
        .ok()
        .filter(|l| state.pools.has_pool(*l))
    else {
        return message(&state, &visitor, StatusCode::NOT_FOUND, "msg.no_such_pool");
    };
    let batch = state.config.tier(length).map_or(1000, |t| t.batch);
    let pools = state.pools.clone();
    match blocking(move || pools.refill(length, batch)).await {
        Ok(_) => see_other("/ui/dashboard?notice=refilled"),
        Err(e) => message(&state, &visitor, e.status, "msg.failed"),
    }
}
