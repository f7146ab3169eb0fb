//! `/ui/teams`: the caller's teams (admins: every team, and a form to make one), and
//! `/ui/teams/{slug}` for its members (owners and admins add, change and remove them), its
//! keys (owners and admins see and revoke them all; a member their own), its spaces and plan.
//! A team the caller does not belong to is a 404, as on the API. Who may do what is the
//! accounts service's; this file reads forms and shapes views.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::{context, Value};

use super::account::{key_views, notice, signed_in, Refusal};
use super::forms::{field, CheckedForm};
use super::render::{message, page, see_other, urlencoding, Visitor};
use super::PageState;
use crate::accounts::people::Acting;
use crate::accounts::NewTeam;
use crate::config::Role;
use crate::keys::Principal;
use crate::web::access::blocking;
use crate::web::accounts::change_as;
use crate::web::accounts::TeamView;
use crate::web::error::ApiError;

/// The team roles, in the order the menus offer them.
const TEAM_ROLES: [&str; 3] = ["viewer", "editor", "owner"];

/// What a page shows besides its records.
#[derive(Default)]
struct Shown {
    errors: BTreeMap<String, &'static str>,
    form: BTreeMap<String, String>,
    notice: Option<&'static str>,
}

fn values(fields: &super::forms::Fields, names: &[&str]) -> BTreeMap<String, String> {
    names
        .iter()
        .filter_map(|k| Some((k.to_string(), fields.get(*k)?.clone())))
        .collect()
}

fn render_list(
    state: &PageState,
    visitor: &Visitor,
    p: &Principal,
    status: StatusCode,
    shown: Shown,
) -> Response {
    let dir = state.accounts.directory();
    let mut teams = state.accounts.teams_for(p);
    teams.sort_by(|a, b| a.slug.cmp(&b.slug));
    let me = p.actor.user();
    let rows: Vec<Value> = teams
        .iter()
        .map(|t| {
            context! {
                t => Value::from_serialize(TeamView::new(t, None)),
                members => dir.members(&t.slug).count(),
                my_role => me.and_then(|id| dir.member_role(&t.slug, id)).map(|r| r.as_str()),
            }
        })
        .collect();
    page(
        state,
        visitor,
        status,
        "teams.html",
        "teams",
        context! {
            rows => rows,
            can_create => p.everywhere(),
            errors => shown.errors,
            form => shown.form,
        },
    )
}

/// `GET /ui/teams`.
pub async fn list(State(state): State<PageState>, visitor: Visitor) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    render_list(&state, &visitor, &p, StatusCode::OK, Shown::default())
}

/// `POST /ui/teams` (admins; `slug`, `name`, `plan`): makes a team and opens its page.
pub async fn create(
    State(state): State<PageState>,
    visitor: Visitor,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let text = |name: &str| field(&fields, name).map(str::to_string);
    let new = NewTeam {
        slug: text("slug").unwrap_or_default(),
        name: text("name"),
        plan: text("plan"),
        spaces: Vec::new(),
    };
    match change_as(&state, &p, visitor.ip, move |accounts, acting| {
        accounts.create_team(acting, new)
    })
    .await
    {
        Ok(team) => see_other(&format!(
            "/ui/teams/{}?done=created",
            urlencoding(&team.slug)
        )),
        Err(e) if e.status == StatusCode::FORBIDDEN => {
            message(&state, &visitor, StatusCode::FORBIDDEN, "msg.forbidden")
        }
        Err(e) => {
            let refusal = Refusal::of(e);
            let shown = Shown {
                errors: refusal.errors(""),
                form: values(&fields, &["slug", "name", "plan"]),
                notice: None,
            };
            render_list(&state, &visitor, &p, refusal.status, shown)
        }
    }
}

fn render_team(
    state: &PageState,
    visitor: &Visitor,
    p: &Principal,
    slug: &str,
    status: StatusCode,
    shown: Shown,
) -> Response {
    let team = match state.accounts.team_for(p, slug) {
        Ok(team) => team,
        Err(_) => return message(state, visitor, StatusCode::NOT_FOUND, "msg.no_such_team"),
    };
    let dir = state.accounts.directory();
    let usage = crate::web::accounts::team_usage(&state.config, &state.plans, slug);
    let quotas = usage.as_ref().map(quota_rows).unwrap_or_default();
    let view = TeamView::new(&team, Some(&dir)).with_usage(usage);
    let manage = p.role_in(slug) == Some(Role::Admin);
    // Only an admin of the instance sets a team's plan (owners see it).
    let plans = if p.everywhere() && !state.config.plans.is_empty() {
        state.plans.names()
    } else {
        Vec::new()
    };
    let keys = state
        .accounts
        .keys_for(p)
        .into_iter()
        .filter(|k| k.team.as_deref() == Some(slug))
        .collect();
    let me = p.actor.user().map(str::to_string);
    page(
        state,
        visitor,
        status,
        "team.html",
        "teams",
        context! {
            team => Value::from_serialize(&view),
            manage => manage,
            me => me,
            keys => key_views(&dir, keys),
            roles => TEAM_ROLES,
            quotas => quotas,
            plans => plans,
            errors => shown.errors,
            form => shown.form,
            notice => shown.notice,
            back => format!("/ui/teams/{}", urlencoding(slug)),
        },
    )
}

/// One bar of the usage card: the quota's name (its catalogue key), used, its limit and the
/// share of it used (the `<meter>`'s value: a limit of 0 is a full bar).
#[derive(serde::Serialize)]
struct QuotaRow {
    quota: &'static str,
    used: u64,
    limit: Option<u64>,
    percent: Option<u64>,
}

fn quota_rows(usage: &crate::plans::Usage) -> Vec<QuotaRow> {
    [
        ("links_per_month", usage.links_this_month),
        ("active_links", usage.active_links),
        ("visits_per_month", usage.visits_this_month),
    ]
    .into_iter()
    .map(|(quota, m)| QuotaRow {
        quota,
        used: m.used,
        limit: m.limit,
        percent: m.percent(),
    })
    .collect()
}

/// The signed-in visitor, if the team `slug` is theirs to see (else the sign-in page, or the
/// same not-found page as for a team that does not exist).
fn of_team(
    state: &PageState,
    visitor: &Visitor,
    slug: &str,
) -> Result<std::sync::Arc<Principal>, Box<Response>> {
    let p = signed_in(visitor)?;
    if state.accounts.team_for(&p, slug).is_err() {
        return Err(Box::new(message(
            state,
            visitor,
            StatusCode::NOT_FOUND,
            "msg.no_such_team",
        )));
    }
    Ok(p)
}

/// `POST /ui/teams/{slug}/plan` (`plan`; empty: none): an admin sets the team's plan. It
/// applies from the next request on.
pub async fn set_plan(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(slug): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match of_team(&state, &visitor, &slug) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let plan = field(&fields, "plan")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    let (accounts, by, ip, team) = (state.accounts.clone(), p.clone(), visitor.ip, slug.clone());
    let done = blocking(move || {
        let patch = crate::accounts::TeamPatch {
            name: None,
            plan: Some(plan),
            spaces: None,
        };
        accounts.update_team(&Acting { by: &by, ip }, &team, patch)
    })
    .await;
    match done {
        Ok(_) => see_other(&format!("/ui/teams/{}?done=plan#usage", urlencoding(&slug))),
        Err(e) => {
            let refusal = Refusal::of(e);
            let shown = Shown {
                errors: BTreeMap::from([("plan".to_string(), refusal.code)]),
                form: values(&fields, &["plan"]),
                notice: None,
            };
            render_team(&state, &visitor, &p, &slug, refusal.status, shown)
        }
    }
}

/// `GET /ui/teams/{slug}` (`?done=` after a change).
pub async fn show(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(slug): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let notice = notice(
        &query,
        &[
            ("created", "team_created"),
            ("member", "member_saved"),
            ("removed", "member_removed"),
            ("plan", "plan_saved"),
        ],
    );
    let shown = Shown {
        notice,
        ..Shown::default()
    };
    render_team(&state, &visitor, &p, &slug, StatusCode::OK, shown)
}

/// `POST /ui/teams/{slug}/members` with `action`: `add` (`email`, `role`), `set` (`user_id`,
/// `role`), `remove` (`user_id`). Owners and admins.
pub async fn members(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(slug): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match of_team(&state, &visitor, &slug) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let action = field(&fields, "action").unwrap_or_default().to_string();
    let role = field(&fields, "role").unwrap_or_default().to_string();
    // Who: by id from a member's row, by email from the add form (a person knows a
    // colleague's email, not their id).
    let user_id = match action.as_str() {
        "add" => {
            let email = field(&fields, "email").unwrap_or_default();
            match state.accounts.directory().user_by_email(email) {
                Some(user) => user.id.clone(),
                None => {
                    let shown = Shown {
                        errors: BTreeMap::from([("email".to_string(), "no_such_user")]),
                        form: values(&fields, &["email", "role"]),
                        notice: None,
                    };
                    return render_team(
                        &state,
                        &visitor,
                        &p,
                        &slug,
                        StatusCode::BAD_REQUEST,
                        shown,
                    );
                }
            }
        }
        "set" | "remove" => field(&fields, "user_id").unwrap_or_default().to_string(),
        _ => return message(&state, &visitor, StatusCode::BAD_REQUEST, "msg.bad_form"),
    };
    let (accounts, by, ip, team) = (state.accounts.clone(), p.clone(), visitor.ip, slug.clone());
    let remove = action == "remove";
    let uid = user_id.clone();
    let done: Result<&str, ApiError> = blocking(move || {
        let acting = Acting { by: &by, ip };
        if remove {
            accounts
                .remove_member(&acting, &team, &uid)
                .map(|()| "removed")
        } else {
            accounts
                .set_member(&acting, &team, &uid, &role)
                .map(|_| "member")
        }
    })
    .await;
    match done {
        Ok(done) => see_other(&format!(
            "/ui/teams/{}?done={done}#members",
            urlencoding(&slug)
        )),
        Err(e) => {
            let refusal = Refusal::of(e);
            let key = if action == "add" {
                match refusal.field.as_str() {
                    "" => "form".to_string(),
                    f => f.to_string(),
                }
            } else {
                format!("row.{user_id}")
            };
            let shown = Shown {
                errors: BTreeMap::from([(key, refusal.code)]),
                form: if action == "add" {
                    values(&fields, &["email", "role"])
                } else {
                    BTreeMap::new()
                },
                notice: None,
            };
            render_team(&state, &visitor, &p, &slug, refusal.status, shown)
        }
    }
}
