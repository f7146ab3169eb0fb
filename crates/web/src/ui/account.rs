//! `/ui/account`: who is signed in (name, email, teams and roles), their own password (a change
//! reopens this session under the new epoch and ends the others), and their own keys: make one
//! (shown once, with a copy button) and revoke. Also the revoke post the team page shares, and
//! what the people pages share: a refused account change as a catalogue key next to its field.
//! The rules are the accounts service's; this file reads forms and shapes views.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use minijinja::{context, Value};

use super::forms::{field, CheckedForm};
use super::login::open_session;
use super::render::{local_path, message, page, see_other, Visitor};
use super::session::{cookie, SignedIn, SESSION_COOKIE};
use super::PageState;
use crate::accounts::people::Acting;
use crate::accounts::{AccountError, NewKey};
use crate::config::Role;
use crate::keys::{Actor, Principal};
use crate::model::{Directory, Maker, RunKey};
use crate::web::access::blocking;
use crate::web::accounts::change_as;
use crate::web::accounts::{me_view, KeyView};
use crate::web::error::ApiError;

/// A refused change as a page shows it: the field it is about (`""`: the form as a whole),
/// the catalogue key under `acct_err`, and the status.
pub(super) struct Refusal {
    pub status: StatusCode,
    pub field: String,
    pub code: &'static str,
}

impl Refusal {
    pub fn of(e: ApiError) -> Self {
        Refusal {
            status: e.status,
            field: e.field.unwrap_or_default(),
            code: match e.status {
                StatusCode::NOT_FOUND => "not_found",
                StatusCode::TOO_MANY_REQUESTS => "busy",
                s if s.is_server_error() => "failed",
                _ => e.code,
            },
        }
    }

    /// The `errors` a template reads: field (with `prefix`) → key.
    pub fn errors(&self, prefix: &str) -> BTreeMap<String, &'static str> {
        let name = if self.field.is_empty() {
            "form"
        } else {
            &self.field
        };
        BTreeMap::from([(format!("{prefix}{name}"), self.code)])
    }
}

impl From<AccountError> for Refusal {
    fn from(e: AccountError) -> Self {
        Refusal::of(ApiError::from(e))
    }
}

/// The signed-in principal, or the response that sends the visitor to sign in.
pub(super) fn signed_in(visitor: &Visitor) -> Result<std::sync::Arc<Principal>, Box<Response>> {
    match visitor.require_session() {
        Ok(session) => Ok(session.principal.clone()),
        Err(redirect) => Err(Box::new(redirect.into_response())),
    }
}

/// The maker a principal's own keys have.
fn own_maker(p: &Principal) -> Option<Maker> {
    match &p.actor {
        Actor::User(id) => Some(Maker::User(id.clone())),
        Actor::Config(name) => Some(Maker::Config(name.clone())),
        Actor::Key { user: Some(id), .. } => Some(Maker::User(id.clone())),
        Actor::Key { user: None, .. } => None,
    }
}

/// Keys as the pages list them, newest first, each with its maker's email when a user made
/// it.
pub(super) fn key_views(dir: &Directory, mut keys: Vec<RunKey>) -> Vec<Value> {
    keys.sort_by_key(|k| std::cmp::Reverse(k.created_at));
    keys.iter()
        .map(|k| {
            let maker_email = match &k.maker {
                Maker::User(id) => dir.user(id).map(|u| u.email.clone()),
                Maker::Config(_) => None,
            };
            context! { maker_email => maker_email, ..Value::from_serialize(KeyView::new(k)) }
        })
        .collect()
}

/// The roles a principal may give a key (at most its own), weakest first.
pub(super) fn roles_up_to(role: Role) -> Vec<&'static str> {
    [Role::Viewer, Role::Editor, Role::Admin]
        .into_iter()
        .filter(|r| *r <= role)
        .map(Role::as_str)
        .collect()
}

/// What the account page shows besides the account itself.
#[derive(Default)]
struct Shown {
    errors: BTreeMap<String, &'static str>,
    notice: Option<&'static str>,
    /// The key just made: its view and the key itself, shown this once.
    new_key: Option<(KeyView, String)>,
    /// The key form's values after an error.
    form: BTreeMap<String, String>,
}

fn render(
    state: &PageState,
    visitor: &Visitor,
    p: &Principal,
    status: StatusCode,
    shown: Shown,
) -> Response {
    let dir = state.accounts.directory();
    let me = me_view(state, p);
    let maker = own_maker(p);
    let keys: Vec<RunKey> = state
        .accounts
        .keys_for(p)
        .into_iter()
        .filter(|k| Some(&k.maker) == maker.as_ref())
        .collect();
    // The teams a key may be limited to: those where the principal has a role.
    let teams: Vec<Value> = dir
        .teams()
        .filter(|t| p.role_in(&t.slug).is_some())
        .map(|t| context! { slug => t.slug.clone(), name => t.name.clone() })
        .collect();
    let is_user = matches!(p.actor, Actor::User(_));
    page(
        state,
        visitor,
        status,
        "account.html",
        "account",
        context! {
            me => Value::from_serialize(&me),
            is_user => is_user,
            keys => key_views(&dir, keys),
            key_roles => roles_up_to(p.role),
            key_teams => teams,
            errors => shown.errors,
            notice => shown.notice,
            new_key => shown.new_key.map(|(view, key)| context! {
                view => Value::from_serialize(&view),
                key => key,
            }),
            form => shown.form,
            today => crate::links::rfc3339(state.accounts.now()).get(..10).map(str::to_string),
        },
    )
}

/// The signed-in admin (the people and domains pages); the 403 page for anyone else.
pub(super) fn admin(
    state: &PageState,
    visitor: &Visitor,
) -> Result<std::sync::Arc<Principal>, Box<Response>> {
    let p = signed_in(visitor)?;
    if !p.everywhere() {
        return Err(Box::new(message(
            state,
            visitor,
            StatusCode::FORBIDDEN,
            "msg.forbidden",
        )));
    }
    Ok(p)
}

/// The notice a page shows after a change, by its `?done=` word: `(word, catalogue key)`.
pub(super) fn notice(
    query: &std::collections::HashMap<String, String>,
    notices: &[(&str, &'static str)],
) -> Option<&'static str> {
    let done = query.get("done")?;
    notices
        .iter()
        .find(|(word, _)| word == done)
        .map(|(_, key)| *key)
}

/// `GET /ui/account` (`?done=password|revoked` after a change).
pub async fn show(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let notice = notice(
        &query,
        &[("password", "password_changed"), ("revoked", "key_revoked")],
    );
    let shown = Shown {
        notice,
        ..Shown::default()
    };
    render(&state, &visitor, &p, StatusCode::OK, shown)
}

/// `POST /ui/account/password` (`current`, `new`): on success this session is reopened under
/// the new epoch (a new token), and every other session of the user ends.
pub async fn change_password(
    State(state): State<PageState>,
    visitor: Visitor,
    headers: axum::http::HeaderMap,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let Actor::User(id) = &p.actor else {
        return message(&state, &visitor, StatusCode::FORBIDDEN, "msg.forbidden");
    };
    // A wrong current password is a guess like a sign-in's: the same quota.
    if let Err(e) = state.limits.check_auth(visitor.ip) {
        let mut shown = Shown::default();
        shown.errors.insert("current".into(), "too_many");
        let mut response = render(&state, &visitor, &p, StatusCode::TOO_MANY_REQUESTS, shown);
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(e.retry_after_secs),
        );
        return response;
    }
    let current = fields.get("current").map(String::as_str).unwrap_or("");
    let new = fields.get("new").map(String::as_str).unwrap_or("");
    let acting = Acting {
        by: &p,
        ip: visitor.ip,
    };
    match state
        .accounts
        .change_own_password(&acting, current, new)
        .await
    {
        Ok(epoch) => {
            if let Some(token) = cookie(&headers, SESSION_COOKIE) {
                state.ui.sessions.close(token);
            }
            open_session(
                &state,
                &visitor,
                SignedIn::User { id, epoch },
                "/ui/account?done=password",
            )
        }
        Err(e) => {
            if matches!(e, AccountError::WrongPassword) {
                let _ = state.limits.auth_failed(visitor.ip);
            }
            let refusal = Refusal::from(e);
            let field = match refusal.field.as_str() {
                "" => "current".to_string(),
                f => f.to_string(),
            };
            let mut shown = Shown::default();
            shown.errors.insert(field, refusal.code);
            render(&state, &visitor, &p, refusal.status, shown)
        }
    }
}

/// `POST /ui/account/keys` (`name`, `role`, `team`, `expires` a date): the new key is shown
/// on the answer, this once.
pub async fn make_key(
    State(state): State<PageState>,
    visitor: Visitor,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let text = |name: &str| field(&fields, name).map(str::to_string);
    // A date means the end of that day (UTC); a full time is taken as given.
    let expires_at = text("expires").map(|d| {
        if d.len() == 10 {
            format!("{d}T23:59:59Z")
        } else {
            d
        }
    });
    let new = NewKey {
        name: text("name").unwrap_or_default(),
        role: text("role"),
        team: text("team"),
        expires_at,
    };
    let made = change_as(&state, &p, visitor.ip, move |accounts, acting| {
        accounts.make_key(acting, new)
    })
    .await;
    match made {
        Ok((record, key)) => {
            let shown = Shown {
                new_key: Some((KeyView::new(&record), key)),
                ..Shown::default()
            };
            render(&state, &visitor, &p, StatusCode::OK, shown)
        }
        Err(e) => {
            let refusal = Refusal::of(e);
            let field = match refusal.field.as_str() {
                "expires_at" => "key.expires".to_string(),
                // More than the maker may: said next to the role asked for.
                "" if refusal.code == "role_not_allowed" => "key.role".to_string(),
                "" => "key.form".to_string(),
                f => format!("key.{f}"),
            };
            let form = ["name", "role", "team", "expires"]
                .iter()
                .filter_map(|k| Some((k.to_string(), fields.get(*k)?.clone())))
                .collect();
            let shown = Shown {
                errors: BTreeMap::from([(field, refusal.code)]),
                form,
                ..Shown::default()
            };
            render(&state, &visitor, &p, refusal.status, shown)
        }
    }
}

/// `POST /ui/keys/{id}/revoke` (`back`: the page to return to): the account page's and the
/// team page's revoke buttons.
pub async fn revoke_key(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(id): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let p = match signed_in(&visitor) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let back = local_path(field(&fields, "back"), "/ui/account?done=revoked");
    let (accounts, ip) = (state.accounts.clone(), visitor.ip);
    match blocking(move || accounts.revoke_key(&Acting { by: &p, ip }, &id)).await {
        Ok(()) => see_other(&back),
        Err(e) => {
            let key = match e.status {
                StatusCode::NOT_FOUND => "msg.no_such_key",
                StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => "msg.forbidden",
                _ => "msg.failed",
            };
            message(&state, &visitor, e.status, key)
        }
    }
}
