//! `/ui/admin/users` (admins of the whole instance): every user, a form to add one (email,
//! name, password, role), and per user: change the role, disable or enable, set a password,
//! delete (behind a confirmation). A refused change is shown next to its field (the add form)
//! or on its row (`last_admin` and the like). Who may do what is the accounts service's.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::{context, Value};

use super::account::{admin, notice, Refusal};
use super::forms::{field, CheckedForm};
use super::render::{message, page, see_other, Visitor};
use super::PageState;
use crate::accounts::people::Acting;
use crate::accounts::{NewUser, UserPatch};
use crate::keys::Principal;
use crate::web::access::blocking;
use crate::web::accounts::UserView;
use crate::web::error::ApiError;

/// What the page shows besides the users.
#[derive(Default)]
struct Shown {
    /// The add form's errors (`email`, `password`, …), and rows' (`row.<id>`).
    errors: BTreeMap<String, &'static str>,
    /// The add form's values after an error (never the password).
    form: BTreeMap<String, String>,
    notice: Option<&'static str>,
}

fn render(
    state: &PageState,
    visitor: &Visitor,
    p: &Principal,
    status: StatusCode,
    shown: Shown,
) -> Response {
    let users = match state.accounts.users_for(p) {
        Ok(users) => users,
        Err(_) => return message(state, visitor, StatusCode::FORBIDDEN, "msg.forbidden"),
    };
    let dir = state.accounts.directory();
    let mut users: Vec<_> = users.iter().collect();
    users.sort_by_key(|u| u.email.to_lowercase());
    let me = p.actor.user().map(str::to_string);
    let rows: Vec<Value> = users
        .iter()
        .map(|u| {
            let teams: Vec<Value> = dir
                .teams_of(&u.id)
                .into_iter()
                .map(|(t, r)| context! { slug => t.slug.clone(), role => r.as_str() })
                .collect();
            context! {
                u => Value::from_serialize(UserView::new(u)),
                teams => teams,
                is_me => me.as_deref() == Some(u.id.as_str()),
            }
        })
        .collect();
    page(
        state,
        visitor,
        status,
        "users.html",
        "users",
        context! {
            rows => rows,
            errors => shown.errors,
            form => shown.form,
            notice => shown.notice,
        },
    )
}

/// Signed in as an admin of the whole instance, or the response that says why not.
/// `GET /ui/admin/users` (`?done=` after a change).
pub async fn list(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let p = match admin(&state, &visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let notice = notice(
        &query,
        &[
            ("created", "user_created"),
            ("changed", "user_changed"),
            ("deleted", "user_deleted"),
        ],
    );
    let shown = Shown {
        notice,
        ..Shown::default()
    };
    render(&state, &visitor, &p, StatusCode::OK, shown)
}

/// `POST /ui/admin/users` (`email`, `name`, `password`, `role`): adds a user.
pub async fn create(
    State(state): State<PageState>,
    visitor: Visitor,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match admin(&state, &visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let text = |name: &str| field(&fields, name).map(str::to_string);
    let new = NewUser {
        email: text("email").unwrap_or_default(),
        name: text("name"),
        // Not trimmed: spaces may belong to a password.
        password: fields.get("password").filter(|v| !v.is_empty()).cloned(),
        role: text("role"),
    };
    let acting = Acting {
        by: &p,
        ip: visitor.ip,
    };
    match state.accounts.create_user(&acting, new).await {
        Ok(_) => see_other("/ui/admin/users?done=created"),
        Err(e) => {
            let refusal = Refusal::from(e);
            let form = ["email", "name", "role"]
                .iter()
                .filter_map(|k| Some((k.to_string(), fields.get(*k)?.clone())))
                .collect();
            let shown = Shown {
                errors: refusal.errors(""),
                form,
                notice: None,
            };
            render(&state, &visitor, &p, refusal.status, shown)
        }
    }
}

/// `POST /ui/admin/users/{id}` with `action`: `role` (and `role`), `disable`, `enable`,
/// `password` (and `password`), `delete`.
pub async fn change(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(id): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match admin(&state, &visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let action = field(&fields, "action").unwrap_or_default();
    let patch = |f: fn(&mut UserPatch)| {
        let mut patch = UserPatch::default();
        f(&mut patch);
        patch
    };
    let result: Result<&str, ApiError> = match action {
        "delete" => {
            let (accounts, by, ip, id) =
                (state.accounts.clone(), p.clone(), visitor.ip, id.clone());
            blocking(move || accounts.delete_user(&Acting { by: &by, ip }, &id))
                .await
                .map(|()| "deleted")
        }
        "role" | "disable" | "enable" | "password" => {
            let patch = match action {
                "role" => UserPatch {
                    role: Some(field(&fields, "role").unwrap_or_default().to_string()),
                    ..UserPatch::default()
                },
                "disable" => patch(|p| p.disabled = Some(true)),
                "enable" => patch(|p| p.disabled = Some(false)),
                _ => UserPatch {
                    password: Some(fields.get("password").cloned().unwrap_or_default()),
                    ..UserPatch::default()
                },
            };
            let acting = Acting {
                by: &p,
                ip: visitor.ip,
            };
            state
                .accounts
                .update_user(&acting, &id, patch)
                .await
                .map(|_| "changed")
                .map_err(ApiError::from)
        }
        _ => return message(&state, &visitor, StatusCode::BAD_REQUEST, "msg.bad_form"),
    };
    match result {
        Ok(done) => see_other(&format!("/ui/admin/users?done={done}#users")),
        Err(e) => {
            let refusal = Refusal::of(e);
            let shown = Shown {
                errors: BTreeMap::from([(format!("row.{id}"), refusal.code)]),
                ..Shown::default()
            };
            render(&state, &visitor, &p, refusal.status, shown)
        }
    }
}
