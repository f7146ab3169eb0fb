//! How accounts look to a caller, for the API (`http/accounts.rs`) and the pages (`ui/`) alike:
//! users, teams with their members, run-time keys (never their secret), audit entries, the
//! caller as `/me` shows it, the audit log's query read from request parameters (who may
//! ask for what is checked here, once), and [`change_as`], the one way a handler runs an
//! account change. No handler lives here.

use std::collections::HashMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::accounts::people::Acting;
use crate::accounts::{AccountError, Accounts};
use crate::config::Role;
use crate::keys::{Actor, Principal};
use crate::links::rfc3339;
use crate::model::{AuditEntry, AuditQuery, Directory, RunKey, Team, User};
use crate::web::access::blocking;
use crate::web::error::ApiError;
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
    /// Links this month, active links and visits this month with the plan's limits (when
    /// plans are configured; SPEC §25).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::plans::Usage>,
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
            usage: None,
        }
    }

    /// The view with its team's usage.
    pub fn with_usage(mut self, usage: Option<crate::plans::Usage>) -> Self {
        self.usage = usage;
        self
    }
}

/// A team's usage when plans are configured (`None` otherwise, or when it cannot be read:
/// the page and the API still show the team).
pub fn team_usage(
    config: &crate::config::Config,
    plans: &crate::plans::Plans,
    slug: &str,
) -> Option<crate::plans::Usage> {
    if config.plans.is_empty() {
        return None;
    }
    match plans.usage(slug) {
        Ok(usage) => Some(usage),
        Err(e) => {
            tracing::warn!(team = slug, "the team's usage could not be read: {e}");
            None
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

/// Runs an account change by `by`, from `ip`, on the blocking pool (it writes the store before
/// it answers): every people handler, API or page, goes through here.
pub async fn change_as<T, F>(
    state: &AppState,
    by: &Principal,
    ip: IpAddr,
    change: F,
) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Accounts, &Acting<'_>) -> Result<T, AccountError> + Send + 'static,
{
    let (accounts, by) = (state.accounts.clone(), by.clone());
    blocking(move || change(&accounts, &Acting { by: &by, ip })).await
}
