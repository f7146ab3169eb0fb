//! What handlers of both kinds run before the work: the caller's right to a link or to create,
//! the create rate, and blocking service work moved off the async threads with its error
//! mapped once.

use std::net::IpAddr;

use crate::config::Role;
use crate::keys::Principal;
use crate::limits::Limit;
use crate::links::DEFAULT_SPACE;
use crate::model::Link;
use crate::web::caller::Caller;
use crate::web::error::ApiError;
use crate::web::state::AppState;

/// Runs blocking service work (durable writes, counter reads) off the async threads. Its error
/// goes through the one mapper (`error.rs`): a full disk is 507 whichever service met it; only
/// a task that panicked is a bare 500.
pub async fn blocking<T, E>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError>
where
    T: Send + 'static,
    E: Into<ApiError> + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(Into::into),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// The link of `code`, when the caller's role and spaces allow `role` on it: 401/403 for a
/// missing or weak key before the lookup, 404 for an unknown code, 403 for another space.
pub fn authorized_link(
    state: &AppState,
    caller: &Caller,
    code: &str,
    role: Role,
) -> Result<Link, ApiError> {
    caller.require(role)?;
    let link = state.links.get(code)?;
    caller.require_space(role, &link.space)?;
    Ok(link)
}

/// The space a create goes to: the one asked for, else the caller's home (the default space,
/// or the one team's space of a member); a member of several teams must say (400
/// `space_required`).
pub fn create_space(caller: &Caller, asked: Option<&str>) -> Result<String, ApiError> {
    if let Some(space) = asked {
        return Ok(space.to_string());
    }
    match caller.0.as_deref() {
        None => Ok(DEFAULT_SPACE.to_string()),
        Some(p) => p.home_space().ok_or_else(|| {
            ApiError::bad_request(
                "space_required",
                "space",
                format!(
                    "`{}` belongs to several teams: say which space the link goes to",
                    p.name
                ),
            )
        }),
    }
}

/// May this caller create links in `space`? Anonymous creates, when enabled, go to the
/// default space only.
pub fn authorize_create(state: &AppState, caller: &Caller, space: &str) -> Result<(), ApiError> {
    if caller.0.is_none() && state.accounts.ring().anonymous_create && space == DEFAULT_SPACE {
        return Ok(());
    }
    caller.require_space(Role::Editor, space).map(|_| ())
}

/// `items` creates against `create_per_key` (a caller with a key) or `create_per_ip`
/// (anonymous). Checked before anything is written, so a refused request writes nothing.
pub fn check_create_rate(
    state: &AppState,
    caller: &Caller,
    ip: IpAddr,
    items: usize,
) -> Result<(), ApiError> {
    let cells = u32::try_from(items).unwrap_or(u32::MAX);
    match &caller.0 {
        Some(principal) => state.limits.check_key(&principal.actor.label(), cells)?,
        None => state.limits.check_ip(Limit::CreatePerIp, ip, cells)?,
    }
    Ok(())
}

/// Who the audit log names for a caller: its actor, or `anonymous`.
fn actor_of(who: Option<&Principal>) -> String {
    who.map_or_else(|| "anonymous".to_string(), |p| p.actor.label())
}

/// Notes `n` links made in `space` in the audit log (folded per actor and minute).
pub fn audit_created(state: &AppState, who: Option<&Principal>, space: &str, ip: IpAddr, n: u64) {
    if n == 0 {
        return;
    }
    let dir = state.accounts.directory();
    state
        .accounts
        .audit
        .created(&actor_of(who), dir.space_owner(space), ip, n);
}

/// Notes a change to a link (`link.updated`, `link.deleted`, `review.override`).
pub fn audit_link(
    state: &AppState,
    who: Option<&Principal>,
    action: &str,
    link: &Link,
    ip: IpAddr,
) {
    let dir = state.accounts.directory();
    state.accounts.audit.record(
        &actor_of(who),
        action,
        &format!("link:{}", link.code),
        ip,
        dir.space_owner(&link.space),
    );
}
