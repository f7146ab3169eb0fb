//! Signing in through an OpenID Connect provider: `GET /ui/oidc/{name}` starts it (the
//! protocol's [`Pending`] kept server-side under a random id that a short-lived cookie names,
//! then 303 to the provider) and `GET /ui/oidc/{name}/callback` finishes it (the pending
//! record taken and deleted on first use, the code traded, the person mapped to a user by the
//! accounts service, a session opened). Every failure is a page in the visitor's language with
//! its own status, and signs nobody in. The protocol is `accounts::oidc`'s and who the person
//! is the accounts service's; this file only carries the browser from one to the other.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use sha2::{Digest, Sha256};

use super::login::open_session;
use super::render::{local_path, page, Visitor};
use super::session::{cookie, random_token, set_cookie, SignedIn};
use super::PageState;
use crate::accounts::oidc::{callback_error, OidcError, Pending, PENDING_TTL_MS};
use crate::accounts::ProviderRefused;
use crate::records::RecordKind;

/// The cookie naming the browser's started sign-in (its value is the record's id; the
/// record holds the secrets, the cookie none).
pub const PENDING_COOKIE: &str = "vsl_oidc";

/// Started sign-ins, at most this many in one instance's memory (the oldest go first).
const KIND: RecordKind = RecordKind {
    name: "oidc_pending",
    capacity: 10_000,
};

/// Where a sign-in leads when the login page did not say.
const AFTER_SIGN_IN: &str = "/ui/links";

/// What is kept between the start and the callback.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    pending: Pending,
    /// Where to go once signed in (a local path, checked again when used).
    next: String,
}

/// Why the page says a sign-in failed: the catalogue key under `oidc` and the status.
fn failure(e: &OidcError) -> (StatusCode, &'static str) {
    match e {
        OidcError::UnknownProvider => (StatusCode::NOT_FOUND, "unknown"),
        OidcError::Unreachable => (StatusCode::BAD_GATEWAY, "unreachable"),
        OidcError::Discovery => (StatusCode::BAD_GATEWAY, "discovery"),
        OidcError::StateMismatch => (StatusCode::BAD_REQUEST, "state"),
        OidcError::Expired => (StatusCode::BAD_REQUEST, "expired"),
        OidcError::ProviderError(code) if code == "access_denied" => {
            (StatusCode::FORBIDDEN, "denied")
        }
        OidcError::ProviderError(_) => (StatusCode::BAD_GATEWAY, "provider_error"),
        OidcError::CodeRejected => (StatusCode::BAD_REQUEST, "code"),
        OidcError::BadToken => (StatusCode::BAD_GATEWAY, "token"),
        OidcError::MissingClaim(_) => (StatusCode::BAD_GATEWAY, "claim"),
    }
}

fn refusal(r: &ProviderRefused) -> (StatusCode, &'static str) {
    match r {
        ProviderRefused::Unverified => (StatusCode::FORBIDDEN, "unverified"),
        ProviderRefused::NoAccount => (StatusCode::FORBIDDEN, "no_account"),
        ProviderRefused::Disabled => (StatusCode::FORBIDDEN, "disabled"),
        ProviderRefused::NoEmail => (StatusCode::FORBIDDEN, "no_email"),
        ProviderRefused::Failed => (StatusCode::SERVICE_UNAVAILABLE, "failed"),
    }
}

/// The failure page; `detail` is the provider's error code when it sent one (a short plain
/// code `callback_error` kept, never its description). The pending cookie is cleared.
fn failed_page(
    state: &PageState,
    visitor: &Visitor,
    provider: &str,
    (status, key): (StatusCode, &'static str),
    detail: Option<&str>,
) -> Response {
    let mut response = page(
        state,
        visitor,
        status,
        "oidc_failed.html",
        "login",
        context! {
            status => status.as_u16(),
            key => key,
            provider => provider,
            detail => detail,
        },
    );
    clear_cookie(state, &mut response);
    response
}

fn clear_cookie(state: &PageState, response: &mut Response) {
    let expired = set_cookie(PENDING_COOKIE, "", Some(0), state.ui.secure_cookies);
    if let Ok(v) = HeaderValue::from_str(&expired) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The record id of a cookie value: its SHA-256, so that the store never holds the cookie.
fn record_id(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// `GET /ui/oidc/{name}?next=/path`: discovers the provider if needed, keeps the pending
/// sign-in, and sends the browser to the provider.
pub async fn start(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let started = match state.ui.providers.start(&name).await {
        Ok(started) => started,
        Err(e) => {
            tracing::warn!(provider = %name, error = %e, "an OpenID sign-in could not start");
            return failed_page(&state, &visitor, &name, failure(&e), None);
        }
    };
    let kept = Kept {
        pending: started.pending,
        next: local_path(query.get("next").map(String::as_str), AFTER_SIGN_IN),
    };
    let id = random_token();
    let stored = serde_json::to_vec(&kept).map_err(|e| e.to_string());
    let now = state.ui.clock.now();
    let put = stored.and_then(|bytes| {
        state
            .ui
            .records
            .put(KIND, &record_id(&id), &bytes, now, PENDING_TTL_MS)
            .map_err(|e| e.to_string())
    });
    if let Err(e) = put {
        tracing::error!(error = %e, "a started OpenID sign-in could not be kept");
        return failed_page(
            &state,
            &visitor,
            &name,
            refusal(&ProviderRefused::Failed),
            None,
        );
    }
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    match HeaderValue::from_str(&started.redirect) {
        Ok(v) => {
            headers.insert(header::LOCATION, v);
        }
        Err(_) => {
            return failed_page(
                &state,
                &visitor,
                &name,
                failure(&OidcError::Discovery),
                None,
            )
        }
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let cookie = set_cookie(
        PENDING_COOKIE,
        &id,
        Some(PENDING_TTL_MS / 1000),
        state.ui.secure_cookies,
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        headers.append(header::SET_COOKIE, v);
    }
    response
}

/// Takes the browser's pending sign-in out of the records: it is good for one callback only
/// (a replayed callback finds nothing, which is a state mismatch).
fn take_pending(state: &PageState, headers: &HeaderMap) -> Option<Kept> {
    let id = record_id(cookie(headers, PENDING_COOKIE)?);
    let now = state.ui.clock.now();
    let bytes = state
        .ui
        .records
        .get(KIND, &id, now, PENDING_TTL_MS, false)
        .map_err(|e| tracing::warn!(error = %e, "a pending OpenID sign-in could not be read"))
        .ok()??;
    if let Err(e) = state.ui.records.delete(KIND, &id) {
        // Not deleted: not used either, or a replay could find it.
        tracing::warn!(error = %e, "a pending OpenID sign-in could not be deleted");
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// `GET /ui/oidc/{name}/callback?state&code` (or `?error=`): finishes the sign-in.
pub async fn callback(
    State(state): State<PageState>,
    visitor: Visitor,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    // Past the failed sign-ins' quota from this address, nothing is tried.
    if let Err(e) = state.limits.check_auth(visitor.ip) {
        let mut response = failed_page(
            &state,
            &visitor,
            &name,
            (StatusCode::TOO_MANY_REQUESTS, "too_many"),
            None,
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(e.retry_after_secs));
        return response;
    }
    let kept = take_pending(&state, &headers);
    let claims = match (&kept, query.get("error")) {
        (_, Some(error)) => Err(callback_error(
            error,
            query.get("error_description").map(String::as_str),
        )),
        (None, None) => Err(OidcError::StateMismatch),
        (Some(kept), None) => {
            let param = |k: &str| query.get(k).map(String::as_str).unwrap_or_default();
            state
                .ui
                .providers
                .finish(&name, &kept.pending, param("state"), param("code"))
                .await
        }
    };
    let claims = match claims {
        Ok(claims) => claims,
        Err(e) => {
            tracing::warn!(provider = %name, error = %e, "an OpenID sign-in failed");
            let _ = state.limits.auth_failed(visitor.ip);
            let detail = match &e {
                OidcError::ProviderError(code) => Some(code.as_str()),
                _ => None,
            };
            return failed_page(&state, &visitor, &name, failure(&e), detail);
        }
    };
    let Some(config) = state.ui.providers.config(&name).cloned() else {
        return failed_page(
            &state,
            &visitor,
            &name,
            failure(&OidcError::UnknownProvider),
            None,
        );
    };
    // The account write and the password-free sign-in run off the async threads.
    let (accounts, ip) = (state.accounts.clone(), visitor.ip);
    let signed =
        tokio::task::spawn_blocking(move || accounts.provider_sign_in(&config, &claims, ip))
            .await
            .unwrap_or(Err(ProviderRefused::Failed));
    match signed {
        Ok(user) => {
            let next = kept.map_or_else(|| AFTER_SIGN_IN.to_string(), |k| k.next);
            let next = local_path(Some(&next), AFTER_SIGN_IN);
            let mut response = open_session(
                &state,
                &visitor,
                SignedIn::User {
                    id: &user.id,
                    epoch: user.session_epoch,
                },
                &next,
            );
            clear_cookie(&state, &mut response);
            response
        }
        Err(refused) => {
            tracing::info!(provider = %name, refused = ?refused, "an OpenID sign-in was refused");
            let _ = state.limits.auth_failed(visitor.ip);
            failed_page(&state, &visitor, &name, refusal(&refused), None)
        }
    }
}
