//! `/api/v1` for people: who am I (`/me`), users (admins), teams and their members, keys made
//! at run time, and the audit log. Thin: the accounts service decides who may do what; these
//! handlers read the request, call it off the async threads where it writes, and shape the
//! answer (never a password hash or a key's secret, but the new key once).

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;

use crate::accounts::people::Acting;
use crate::accounts::{NewKey, NewTeam, NewUser, TeamPatch, UserPatch};
use crate::config::Role;
use crate::keys::{Actor, Principal};
use crate::links::rfc3339;
use crate::model::{AuditEntry, AuditQuery, Directory, RunKey, Team, User};
use crate::web::access::blocking;
use crate::web::caller::{Caller, ClientIp};
use crate::web::error::{ApiError, JsonBody};
use crate::web::state::AppState;

/// A user as the API shows one.
#[derive(Serialize, utoipa::ToSchema)]
pub struct UserView {
    pub id: String,
    pub email: String,
    pub name: String,
    /// `admin` or `member`.
    pub role: String,
    pub disabled: bool,
    pub created_at: String,
    pub last_sign_in_at: Option<String>,
    /// Whether a password is set (else the user signs in through a provider).
    pub has_password: bool,
}

impl UserView {
    pub fn new(user: &User) -> Self {
        Self {
            id: user.id.clone(),
            email: user.email.clone(),
            name: user.name.clone(),
            role: user.role.as_str().into(),
            disabled: user.disabled,
            created_at: rfc3339(user.created_at),
            last_sign_in_at: user.last_sign_in_at.map(rfc3339),
            has_password: user.password.is_some(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct MemberView {
    pub user_id: String,
    pub email: String,
    pub name: String,
    /// `owner`, `editor` or `viewer`.
    pub role: String,
}

/// A team as the API shows one.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TeamView {
    pub slug: String,
    pub name: String,
    pub plan: Option<String>,
    /// Every space it owns, its own first.
    pub spaces: Vec<String>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<MemberView>>,
}

impl TeamView {
    pub fn new(team: &Team, members: Option<&Directory>) -> Self {
        Self {
            slug: team.slug.clone(),
            name: team.name.clone(),
            plan: team.plan.clone(),
            spaces: team.all_spaces().map(str::to_string).collect(),
            created_at: rfc3339(team.created_at),
            members: members.map(|dir| {
                dir.members(&team.slug)
                    .map(|(id, role)| {
                        let user = dir.user(id);
                        MemberView {
                            user_id: id.to_string(),
                            email: user.map(|u| u.email.clone()).unwrap_or_default(),
                            name: user.map(|u| u.name.clone()).unwrap_or_default(),
                            role: role.as_str().into(),
                        }
                    })
                    .collect()
            }),
        }
    }
}

/// A run-time key as the API lists one: never its secret.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KeyView {
    pub id: String,
    pub name: String,
    pub role: String,
    pub team: Option<String>,
    /// `vsl_<id>_`: what the key starts with, to recognise it.
    pub prefix: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
    /// Who made it: `user:<id>` or `config:<name>`.
    pub maker: String,
}

impl KeyView {
    pub fn new(key: &RunKey) -> Self {
        Self {
            id: key.id.clone(),
            name: key.name.clone(),
            role: key.role.as_str().into(),
            team: key.team.clone(),
            prefix: format!("vsl_{}_", key.id),
            created_at: rfc3339(key.created_at),
            expires_at: key.expires_at.map(rfc3339),
            last_used_at: key.last_used_at.map(rfc3339),
            maker: match &key.maker {
                crate::model::Maker::User(id) => format!("user:{id}"),
                crate::model::Maker::Config(name) => format!("config:{name}"),
            },
        }
    }
}

/// A new key: the listing's fields and the key itself, shown this once.
#[derive(Serialize, utoipa::ToSchema)]
pub struct NewKeyView {
    #[serde(flatten)]
    pub view: KeyView,
    pub key: String,
}

fn principal(caller: &Caller) -> Result<&Principal, ApiError> {
    caller.require(Role::Viewer)
}

fn acting<'a>(caller: &'a Caller, ip: &ClientIp) -> Result<Acting<'a>, ApiError> {
    Ok(Acting {
        by: principal(caller)?,
        ip: ip.0,
    })
}

/// The caller as `/me` shows it.
pub fn me_view(state: &AppState, p: &Principal) -> serde_json::Value {
    let dir = state.accounts.directory();
    let (kind, user, key) = match &p.actor {
        Actor::User(id) => ("user", dir.user(id).map(UserView::new), None),
        Actor::Key { id, user } => (
            "key",
            user.as_deref().and_then(|u| dir.user(u)).map(UserView::new),
            dir.key(id).map(KeyView::new),
        ),
        Actor::Config(_) => ("config_key", None, None),
    };
    let teams: Vec<serde_json::Value> = match p.actor.user() {
        Some(id) => dir
            .teams_of(id)
            .into_iter()
            .map(|(t, r)| serde_json::json!({"slug": t.slug, "name": t.name, "role": r.as_str()}))
            .collect(),
        None => Vec::new(),
    };
    let rights: serde_json::Map<String, serde_json::Value> = p
        .grants
        .spaces
        .iter()
        .map(|(s, r)| (s.clone(), serde_json::Value::from(r.as_str())))
        .collect();
    serde_json::json!({
        "kind": kind,
        "name": p.name,
        "role": p.role.as_str(),
        "everywhere": p.grants.everywhere.map(Role::as_str),
        "spaces": rights,
        "user": user,
        "key": key,
        "teams": teams,
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
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    blocking(move || accounts.delete_user(&Acting { by: &by, ip }, &id)).await?;
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
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    let team = blocking(move || accounts.create_team(&Acting { by: &by, ip }, body)).await?;
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
    responses((status = 200, description = "The team with its `members`", body = TeamView), (status = 404, description = "No such team, or not the caller's")))]
pub async fn get_team(
    State(state): State<AppState>,
    caller: Caller,
    Path(slug): Path<String>,
) -> Result<Json<TeamView>, ApiError> {
    let team = state.accounts.team_for(principal(&caller)?, &slug)?;
    Ok(Json(TeamView::new(
        &team,
        Some(&state.accounts.directory()),
    )))
}

#[utoipa::path(patch, path = "/api/v1/teams/{slug}", tag = "accounts", params(("slug" = String, Path)), request_body = inline(Object), security(("api_key" = [])),
    responses((status = 200, description = "The team (`{name?, plan?, spaces?}` in; owners may rename, admins change the rest)", body = TeamView)))]
pub async fn update_team(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<TeamPatch>,
) -> Result<Json<TeamView>, ApiError> {
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    let team = blocking(move || accounts.update_team(&Acting { by: &by, ip }, &slug, body)).await?;
    Ok(Json(TeamView::new(
        &team,
        Some(&state.accounts.directory()),
    )))
}

#[utoipa::path(delete, path = "/api/v1/teams/{slug}", tag = "accounts", params(("slug" = String, Path)), security(("api_key" = [])),
    responses((status = 204, description = "Deleted with its memberships and team keys; its links stay in their spaces")))]
pub async fn delete_team(
    State(state): State<AppState>,
    caller: Caller,
    ip: ClientIp,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    blocking(move || accounts.delete_team(&Acting { by: &by, ip }, &slug)).await?;
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
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    let member =
        blocking(move || accounts.set_member(&Acting { by: &by, ip }, &slug, &user_id, &body.role))
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
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    blocking(move || accounts.remove_member(&Acting { by: &by, ip }, &slug, &user_id)).await?;
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
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    let (record, key) = blocking(move || accounts.make_key(&Acting { by: &by, ip }, body)).await?;
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
    let (accounts, by, ip) = (state.accounts.clone(), principal(&caller)?.clone(), ip.0);
    blocking(move || accounts.revoke_key(&Acting { by: &by, ip }, &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// An audit entry as the API shows one.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AuditView {
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub ip: String,
    pub team: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl AuditView {
    pub fn new(e: &AuditEntry) -> Self {
        Self {
            at: rfc3339(e.at),
            actor: e.actor.clone(),
            action: e.action.clone(),
            target: e.target.clone(),
            ip: e.ip.clone(),
            team: e.team.clone(),
            count: e.count,
        }
    }
}

/// Most entries one page holds.
const MAX_AUDIT_PAGE: usize = 500;

/// The audit query of a request's parameters, checked: admins see all, a team's owners only
/// `team=` their team.
pub fn audit_query(
    p: &Principal,
    params: &HashMap<String, String>,
) -> Result<AuditQuery, ApiError> {
    let time = |name: &'static str| -> Result<Option<u64>, ApiError> {
        params
            .get(name)
            .filter(|v| !v.is_empty())
            .map(|v| {
                crate::model::time::parse_rfc3339(v).ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_field",
                        name,
                        format!("`{name}` is an RFC 3339 time"),
                    )
                })
            })
            .transpose()
    };
    let limit = match params.get("limit") {
        None => 100,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_AUDIT_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_field",
                    "limit",
                    format!("`limit` is 1 to {MAX_AUDIT_PAGE}"),
                )
            })?,
    };
    let before = params
        .get("cursor")
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(
                    "invalid_field",
                    "cursor",
                    "`cursor` is a previous page's `next_cursor`",
                )
            })
        })
        .transpose()?;
    let team = params.get("team").filter(|t| !t.is_empty()).cloned();
    if !p.everywhere() {
        match &team {
            Some(t) if p.role_in(t) == Some(Role::Admin) => {}
            _ => {
                return Err(ApiError::forbidden(
                    "the audit log is for admins, and for a team's owners with `team=` their team",
                ))
            }
        }
    }
    let text = |name: &str| params.get(name).filter(|v| !v.is_empty()).cloned();
    Ok(AuditQuery {
        actor: text("actor"),
        action: text("action"),
        team,
        from: time("from")?,
        to: time("to")?,
        before,
        limit,
    })
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
