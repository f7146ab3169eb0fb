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

use super::account::{key_views, signed_in, Refusal};
use super::forms::{field, CheckedForm};
use super::render::{message, page, see_other, urlencoding, Visitor};
use super::PageState;
use crate::accounts::people::Acting;
use crate::accounts::NewTeam;
use crate::config::Role;
use crate::keys::Principal;
use crate::web::access::blocking;
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
    let (accounts, by, ip) = (state.accounts.clone(), p.clone(), visitor.ip);
    match blocking(move || accounts.create_team(&Acting { by: &by, ip }, new)).await {
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
    let view = TeamView::new(&team, Some(&dir));
    let manage = p.role_in(slug) == Some(Role::Admin);
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
            errors => shown.errors,
            form => shown.form,
            notice => shown.notice,
            back => format!("/ui/teams/{}", urlencoding(slug)),
        },
    )
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
    let notice = match query.get("done").map(String::as_str) {
        Some("created") => Some("team_created"),
        Some("member") => Some("member_saved"),
        Some("removed") => Some("member_removed"),
        _ => None,
    };
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
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    // Not the caller's team: as absent as on the page.
    if state.accounts.team_for(&p, &slug).is_err() {
        return message(&state, &visitor, StatusCode::NOT_FOUND, "msg.no_such_team");
    }
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
