//! Who is calling the API: the [`Caller`] extractor reads the key a request carries
//! and asks the accounts service who holds it (a configured key, or one made at run time). A missing or unknown key is 401; a known
//! key whose role or spaces do not allow the request is 403. Failed keys count against
//! `limits.rates.auth_per_ip` per client address; past it every key is 429.

use std::sync::Arc;

use crate::accounts::KeyRefused;
use crate::config::Role;
pub use crate::keys::Principal;
use crate::web::error::ApiError;
use crate::web::state::AppState;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;

/// The caller of a request: a known key, or nobody (no key sent). An unknown key is rejected
/// by the extractor itself.
#[derive(Clone, Debug)]
pub struct Caller(pub Option<Arc<Principal>>);

impl Caller {
    /// The principal, if its role is at least `role`.
    pub fn require(&self, role: Role) -> Result<&Principal, ApiError> {
        let principal = self.0.as_deref().ok_or_else(ApiError::unauthorized)?;
        if principal.role < role {
            return Err(ApiError::forbidden(
                format!(
                    "the key `{}` has the role {:?}; this needs {:?} or above",
                    principal.name, principal.role, role
                )
                .to_lowercase(),
            ));
        }
        Ok(principal)
    }

    /// The principal, if it may act on links of `space` with `role`.
    pub fn require_space(&self, role: Role, space: &str) -> Result<&Principal, ApiError> {
        let principal = self.require(role)?;
        if !principal.allows_space(space) {
            return Err(ApiError::forbidden(format!(
                "the key `{}` may not use the space `{space}`",
                principal.name
            )));
        }
        Ok(principal)
    }
}

/// The client address of a request (the forwarding headers only from a trusted proxy).
pub struct ClientIp(pub IpAddr);

impl<S> FromRequestParts<S> for ClientIp
where
    AppState: axum::extract::FromRef<S>,
    S: Send + Sync,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = &<AppState as axum::extract::FromRef<S>>::from_ref(state);
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
        Ok(ClientIp(state.client_ip(peer, &parts.headers)))
    }
}

/// The key a request carries, from `Authorization: Bearer` or `X-Api-Key`.
pub fn presented_key(parts: &Parts) -> Option<&str> {
    if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
        let value = value.to_str().ok()?.trim();
        let (scheme, rest) = value.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim());
    }
    parts
        .headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

impl<S> FromRequestParts<S> for Caller
where
    AppState: axum::extract::FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = &<AppState as axum::extract::FromRef<S>>::from_ref(state);
        let has_header = parts.headers.contains_key(header::AUTHORIZATION)
            || parts.headers.contains_key("x-api-key");
        if !has_header {
            return Ok(Caller(None));
        }
        // `limits.rates.auth_per_ip`: a key cannot be guessed faster than the quota, and past
        // it even the right one is refused, so that its answer tells a guesser nothing.
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
        let ip = state.client_ip(peer, &parts.headers);
        state.limits.check_auth(ip)?;
        // A malformed Authorization header is as good as a wrong key.
        let found = presented_key(parts)
            .ok_or(KeyRefused::Unknown)
            .and_then(|key| state.accounts.authenticate(key));
        match found {
            Ok(principal) => Ok(Caller(Some(principal))),
            Err(refused) => {
                state.limits.auth_failed(ip)?;
                Err(match refused {
                    KeyRefused::Expired => ApiError::key_expired(),
                    KeyRefused::Unknown => ApiError::unauthorized(),
                })
            }
        }
    }
}
