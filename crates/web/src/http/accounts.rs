//! `/api/v1` for people: who am I (`/me`), users (admins), teams and their members, keys made
//! at run time, and the audit log. Thin: the accounts service decides who may do what; these
//! handlers read the request, call it off the async threads where it writes, and shape the
//! answer (never a password hash or a key's secret, but the new key once).

use std::collections::HashMap;

use crate::accounts::people::Acting;
use crate::accounts::{AccountError, Accounts, NewKey, NewTeam, NewUser, TeamPatch, UserPatch};
use crate::config::Role;
use crate::keys::Principal;
use crate::web::access::blocking;
use crate::web::accounts::change_as;
pub use crate::web::accounts::{
    audit_query, me_view, team_usage, AuditView, KeyView, MemberView, NewKeyView, TeamView,
    UserView,
};
use crate::web::caller::{Caller, ClientIp};
use crate::web::error::{ApiError, JsonBody};
use crate::web::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;

fn principal(caller: &Caller) -> Result<&Principal, ApiError> {
    caller.require(Role::Viewer)
}

/// An account change as the caller, from their address ([`change_as`]).
async fn as_caller<T, F>(
    state: &AppState,
    caller: &Caller,
    ip: &ClientIp,
    change: F,
) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Accounts, &Acting<'_>) -> Result<T, AccountError> + Send + 'static,
{
    change_as(state, principal(caller)?, ip.0, change).await
}

fn acting<'a>(caller: &'a Caller, ip: &ClientIp) -> Result<Acting<'a>, ApiError> {
    Ok(Acting {
        by: principal(caller)?,
        ip: ip.0,
    })
}

#[utoipa::path(get, path = "/api/v1/me", tag = "accounts", security(("api_key" = [])),
    responses((status = 200, description = "The caller (a user, a run-time key or a configured key): `{kind, name, role, everywhere, spaces: {space: role}, user, key, teams: [{slug, name, role}]}`"),
        (status = 401, description = "No key or session")))]
pub async fn me(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    let p = principal(&caller)?;
    Ok(Json(me_view(&state, p)))
}

/// `POST /api/v1/me/password`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    pub current: String,
    pub new: String,
}

#[utoipa::path(post, path = "/api/v1/me/password", tag = "accounts", request_body = PasswordChange, security(("api_key" = [])),
    responses((status = 204, description = "Changed; the user's other sessions end (their keys stay)"),
        (status = 400, description = "`invalid_password` naming `new`"),
        (status = 401, description = "`wrong_password`: the current password is wrong"),
        (status = 403, description = "A key, not a signed-in user")))]
pub async fn change_password(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    JsonBody(body): JsonBody<PasswordChange>,
) -> Result<StatusCode, ApiError> {
    let acting = acting(&caller, &ip)?;
    state
        .accounts
        .change_own_password(&acting, &body.current, &body.new)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/users", tag = "accounts", request_body = inline(Object), security(("api_key" = [])),
    responses((status = 201, description = "The user (`{email, name?, password?, role?}` in)", body = UserView),
        (status = 400, description = "A bad field, named"), (status = 403, description = "Not an admin"),
        (status = 409, description = "`email_taken`")))]
pub async fn create_user(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    JsonBody(body): JsonBody<NewUser>,
) -> Result<(StatusCode, Json<UserView>), ApiError> {
    let acting = acting(&caller, &ip)?;
    let user = state.accounts.create_user(&acting, body).await?;
    Ok((StatusCode::CREATED, Json(UserView::new(&user))))
}

#[utoipa::path(get, path = "/api/v1/users", tag = "accounts", security(("api_key" = [])),
    responses((status = 200, description = "`{users: [...]}` (admins)")))]
pub async fn list_users(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    let users = state.accounts.users_for(principal(&caller)?)?;
    let views: Vec<UserView> = users.iter().map(UserView::new).collect();
    Ok(Json(serde_json::json!({ "users": views })))
}

#[utoipa::path(get, path = "/api/v1/users/{id}", tag = "accounts", params(("id" = String, Path)), security(("api_key" = [])),
    responses((status = 200, body = UserView), (status = 404, description = "No such user")))]
pub async fn get_user(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<UserView>, ApiError> {
    let user = state.accounts.user_for(principal(&caller)?, &id)?;
    Ok(Json(UserView::new(&user)))
}

#[utoipa::path(patch, path = "/api/v1/users/{id}", tag = "accounts", params(("id" = String, Path)), request_body = inline(Object), security(("api_key" = [])),
    responses((status = 200, description = "The user (`{name?, role?, disabled?, password?}` in; a disable or a new password ends the user's sessions and keys)", body = UserView),
        (status = 409, description = "`last_admin`")))]
pub async fn update_user(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<UserPatch>,
) -> Result<Json<UserView>, ApiError> {
    let acting = acting(&caller, &ip)?;
    let user = state.accounts.update_user(&acting, &id, body).await?;
    Ok(Json(UserView::new(&user)))
}

#[utoipa::path(delete, path = "/api/v1/users/{id}", tag = "accounts", params(("id" = String, Path)), security(("api_key" = [])),
    responses((status = 204, description = "Deleted, with their memberships and keys"), (status = 409, description = "`last_admin`")))]
pub async fn delete_user(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    as_caller(&state, &caller, &ip, move |a, by| a.delete_user(by, &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/teams", tag = "accounts", request_body = inline(Object), security(("api_key" = [])),
    responses((status = 201, description = "The team (`{slug, name?, plan?, spaces?}` in; admins)", body = TeamView),
        (status = 409, description = "`team_exists`, `space_taken`")))]
pub async fn create_team(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    JsonBody(body): JsonBody<NewTeam>,
) -> Result<(StatusCode, Json<TeamView>), ApiError> {
    let team = as_caller(&state, &caller, &ip, move |a, by| a.create_team(by, body)).await?;
    Ok((StatusCode::CREATED, Json(TeamView::new(&team, None))))
}

#[utoipa::path(get, path = "/api/v1/teams", tag = "accounts", security(("api_key" = [])),
    responses((status = 200, description = "`{teams: [...]}`: the caller's (admins: all)")))]
pub async fn list_teams(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    let teams = state.accounts.teams_for(principal(&caller)?);
    let views: Vec<TeamView> = teams.iter().map(|t| TeamView::new(t, None)).collect();
    Ok(Json(serde_json::json!({ "teams": views })))
}

#[utoipa::path(get, path = "/api/v1/teams/{slug}", tag = "accounts", params(("slug" = String, Path)), security(("api_key" = [])),
    responses((status = 200, description = "The team with its `members`, and its `usage` when plans are configured (links this month, active links, visits this month, each `{used, limit}`)", body = TeamView), (status = 404, description = "No such team, or not the caller's")))]
pub async fn get_team(
    State(state): State<AppState>,
    caller: Caller,
    Path(slug): Path<String>,
) -> Result<Json<TeamView>, ApiError> {
    let team = state.accounts.team_for(principal(&caller)?, &slug)?;
    let (config, plans) = (state.config.clone(), state.plans.clone());
    let usage = blocking(move || Ok::<_, ApiError>(team_usage(&config, &plans, &slug))).await?;
    Ok(Json(
        TeamView::new(&team, Some(&state.accounts.directory())).with_usage(usage),
    ))
}

#[utoipa::path(patch, path = "/api/v1/teams/{slug}", tag = "accounts", params(("slug" = String, Path)), request_body = inline(Object), security(("api_key" = [])),
    responses((status = 200, description = "The team (`{name?, plan?, spaces?}` in; owners may rename, admins change the rest; a plan change applies from the next request)", body = TeamView),
        (status = 400, description = "`plan` names no configured plan (`unknown_plan`, field `plan`)")))]
pub async fn update_team(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<TeamPatch>,
) -> Result<Json<TeamView>, ApiError> {
    let team = as_caller(&state, &caller, &ip, move |a, by| {
        a.update_team(by, &slug, body)
    })
    .await?;
    let (config, plans, slug) = (state.config.clone(), state.plans.clone(), team.slug.clone());
    let usage = blocking(move || Ok::<_, ApiError>(team_usage(&config, &plans, &slug))).await?;
    Ok(Json(
        TeamView::new(&team, Some(&state.accounts.directory())).with_usage(usage),
    ))
}

#[utoipa::path(delete, path = "/api/v1/teams/{slug}", tag = "accounts", params(("slug" = String, Path)), security(("api_key" = [])),
    responses((status = 204, description = "Deleted with its memberships and team keys; its links stay in their spaces")))]
pub async fn delete_team(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    as_caller(&state, &caller, &ip, move |a, by| a.delete_team(by, &slug)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/teams/{slug}/members/{user_id}`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberRole {
    /// `owner`, `editor` or `viewer`.
    pub role: String,
}

#[utoipa::path(put, path = "/api/v1/teams/{slug}/members/{user_id}", tag = "accounts", params(("slug" = String, Path), ("user_id" = String, Path)), request_body = MemberRole, security(("api_key" = [])),
    responses((status = 200, description = "`{team, user_id, role}` (owners, admins)")))]
pub async fn set_member(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path((slug, user_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<MemberRole>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let member = as_caller(&state, &caller, &ip, move |a, by| {
        a.set_member(by, &slug, &user_id, &body.role)
    })
    .await?;
    Ok(Json(serde_json::json!({
        "team": member.team, "user_id": member.user_id, "role": member.role.as_str()
    })))
}

#[utoipa::path(delete, path = "/api/v1/teams/{slug}/members/{user_id}", tag = "accounts", params(("slug" = String, Path), ("user_id" = String, Path)), security(("api_key" = [])),
    responses((status = 204, description = "Removed, with the keys they limited to the team")))]
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path((slug, user_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    as_caller(&state, &caller, &ip, move |a, by| {
        a.remove_member(by, &slug, &user_id)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/keys", tag = "accounts", request_body = inline(Object), security(("api_key" = [])),
    responses((status = 201, description = "The key's record and `key`, shown this once (`{name, role?, team?, expires_at?}` in)", body = NewKeyView),
        (status = 403, description = "`role_not_allowed`: more than the caller may do")))]
pub async fn create_key(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    JsonBody(body): JsonBody<NewKey>,
) -> Result<(StatusCode, Json<NewKeyView>), ApiError> {
    let (record, key) = as_caller(&state, &caller, &ip, move |a, by| a.make_key(by, body)).await?;
    Ok((
        StatusCode::CREATED,
        Json(NewKeyView {
            view: KeyView::new(&record),
            key,
        }),
    ))
}

#[utoipa::path(get, path = "/api/v1/keys", tag = "accounts", security(("api_key" = [])),
    responses((status = 200, description = "`{keys: [...]}`: the caller's (admins: all), never a secret")))]
pub async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    let keys = state.accounts.keys_for(principal(&caller)?);
    let views: Vec<KeyView> = keys.iter().map(KeyView::new).collect();
    Ok(Json(serde_json::json!({ "keys": views })))
}

#[utoipa::path(delete, path = "/api/v1/keys/{id}", tag = "accounts", params(("id" = String, Path)), security(("api_key" = [])),
    responses((status = 204, description = "Revoked: refused from the next request on, on every instance"), (status = 404, description = "No such key of the caller's")))]
pub async fn revoke_key(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    as_caller(&state, &caller, &ip, move |a, by| a.revoke_key(by, &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/audit", tag = "accounts", security(("api_key" = [])),
    params(("actor" = Option<String>, Query), ("action" = Option<String>, Query), ("team" = Option<String>, Query),
        ("from" = Option<String>, Query), ("to" = Option<String>, Query), ("cursor" = Option<String>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "`{entries: [{at, actor, action, target, ip, team, count?}], next_cursor}`, newest first"),
        (status = 403, description = "Neither an admin nor an owner of `team`")))]
pub async fn audit(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let query = audit_query(principal(&caller)?, &params)?;
    let accounts = state.accounts.clone();
    let page = blocking(move || accounts.audit.list(&query)).await?;
    let entries: Vec<AuditView> = page.entries.iter().map(AuditView::new).collect();
    Ok(Json(serde_json::json!({
        "entries": entries,
        "next_cursor": page.next.map(|n| n.to_string()),
    })))
}
