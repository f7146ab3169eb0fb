//! `/api/v1/domains` (SPEC §26): the configured domains, for admins. Thin: the domains
//! service checks hosts and rules; these handlers check the caller, call it off the async
//! threads (its writes are durable) and shape the answer.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

use crate::config::Role;
use crate::domains::{DomainPatch, NewDomain};
use crate::keys::Principal;
use crate::web::access::blocking;
use crate::web::caller::Caller;
use crate::web::error::{ApiError, JsonBody};
use crate::web::state::AppState;

pub use crate::web::domains::DomainView;

/// Admins of every space only.
fn admin(caller: &Caller) -> Result<&Principal, ApiError> {
    let principal = caller.require(Role::Admin)?;
    if !principal.everywhere() {
        return Err(ApiError::forbidden(format!(
            "the key `{}` is no admin of every space; domains are for admins",
            principal.name
        )));
    }
    Ok(principal)
}

/// A team the domain goes to must exist.
fn check_team(state: &AppState, team: Option<&str>) -> Result<(), ApiError> {
    if let Some(slug) = team.filter(|t| !t.trim().is_empty()) {
        if state.accounts.directory().team(slug.trim()).is_none() {
            return Err(ApiError::bad_request(
                "invalid_team",
                "team",
                format!("no team has the slug `{slug}`"),
            ));
        }
    }
    Ok(())
}

#[utoipa::path(post, path = "/api/v1/domains", tag = "domains", request_body = NewDomain, security(("api_key" = [])),
    responses((status = 201, description = "The domain", body = DomainView),
        (status = 400, description = "`host` is no DNS name (`invalid_host`: a port, a trailing dot, a scheme or path, an empty or over-long label, an IP address), or another field is bad"),
        (status = 403, description = "Not an admin"),
        (status = 409, description = "`domain_exists`")))]
pub async fn create_domain(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<NewDomain>,
) -> Result<(StatusCode, Json<DomainView>), ApiError> {
    admin(&caller)?;
    check_team(&state, body.team.as_deref())?;
    let links = state.links.clone();
    let domain = blocking(move || {
        let now = links.now();
        links.domains().add(body, now)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(DomainView::new(&domain))))
}

#[utoipa::path(get, path = "/api/v1/domains", tag = "domains", security(("api_key" = [])),
    responses((status = 200, description = "`{items: [...]}`: every domain, the default first")))]
pub async fn list_domains(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.require(Role::Viewer)?;
    let items: Vec<DomainView> = state
        .links
        .domains()
        .list()
        .iter()
        .map(|d| DomainView::new(d))
        .collect();
    Ok(Json(serde_json::json!({ "items": items })))
}

#[utoipa::path(get, path = "/api/v1/domains/{host}", tag = "domains", params(("host" = String, Path)), security(("api_key" = [])),
    responses((status = 200, description = "The domain", body = DomainView), (status = 404, description = "No such domain")))]
pub async fn get_domain(
    State(state): State<AppState>,
    caller: Caller,
    Path(host): Path<String>,
) -> Result<Json<DomainView>, ApiError> {
    caller.require(Role::Viewer)?;
    let domain = state
        .links
        .domains()
        .by_host(&host)
        .ok_or_else(|| ApiError::not_found(format!("no domain has the host `{host}`")))?;
    Ok(Json(DomainView::new(&domain)))
}

#[utoipa::path(patch, path = "/api/v1/domains/{host}", tag = "domains", params(("host" = String, Path)), request_body = DomainPatch, security(("api_key" = [])),
    responses((status = 200, description = "The domain (`null` clears a field)", body = DomainView),
        (status = 404, description = "No such domain")))]
pub async fn update_domain(
    State(state): State<AppState>,
    caller: Caller,
    Path(host): Path<String>,
    JsonBody(body): JsonBody<DomainPatch>,
) -> Result<Json<DomainView>, ApiError> {
    admin(&caller)?;
    if let Some(team) = &body.team {
        check_team(&state, team.as_deref())?;
    }
    let links = state.links.clone();
    let domain = blocking(move || {
        let now = links.now();
        links.domains().patch(&host, body, now)
    })
    .await?;
    Ok(Json(DomainView::new(&domain)))
}

#[utoipa::path(delete, path = "/api/v1/domains/{host}", tag = "domains", params(("host" = String, Path)), security(("api_key" = [])),
    responses((status = 204, description = "Deleted"),
        (status = 404, description = "No such domain"),
        (status = 409, description = "`domain_in_use` (links that are not archived are on it) or `domain_is_default`")))]
pub async fn delete_domain(
    State(state): State<AppState>,
    caller: Caller,
    Path(host): Path<String>,
) -> Result<StatusCode, ApiError> {
    admin(&caller)?;
    let links = state.links.clone();
    blocking(move || links.domains().delete(&host)).await?;
    Ok(StatusCode::NO_CONTENT)
}
