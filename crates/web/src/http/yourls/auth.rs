//! Who calls `/yourls-api.php`, by YOURLS's three ways to sign in: `timestamp` + `signature`
//! (a hash of the time and a configured API key), `signature` alone (a key itself, configured or
//! made at run time), `username` + `password` (configured in `yourls.users`, each standing for
//! an API key; else a user's email and password).

use std::sync::Arc;

use md5::Md5;
use sha2::{Digest, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

use super::params::Params;
use crate::accounts::SignInRefused;
use crate::web::caller::Principal;
use crate::web::state::AppState;

/// Why a request was not let in.
pub(super) enum AuthFailure {
    /// YOURLS's message for a missing or wrong credential.
    Denied(&'static str),
    /// Past `limits.rates.auth_per_ip`.
    Limited(crate::limits::RateLimited),
}

/// Who signs in, by YOURLS's rules and in its order: `timestamp` + `signature`, then
/// `signature` alone (a configured key or one made at run time), then `username` +
/// `password` (`yourls.users`, else a user's email and password). A failure is counted
/// against the quotas (`presented`: some credential was sent) and comes back as YOURLS's
/// message or a 429.
pub(super) async fn authenticate(
    state: &AppState,
    params: &Params,
    ip: std::net::IpAddr,
    presented: bool,
) -> Result<Arc<Principal>, AuthFailure> {
    // A username throttled as an account (`auth_per_account`) is refused before any password
    // is looked at, a configured one (`yourls.users`) too.
    if let (Some(user), Some(_)) = (params.filled("username"), params.filled("password")) {
        let account = crate::model::account::email_key(user);
        state
            .limits
            .check_account(&account, ip)
            .map_err(AuthFailure::Limited)?;
    }
    let found =
        if let (Some(ts), Some(sig)) = (params.filled("timestamp"), params.filled("signature")) {
            check_timestamp_signature(state, ts, sig, params.get("hash"))
        } else if params.get("timestamp").is_none() {
            if let Some(sig) = params.filled("signature") {
                state.accounts.authenticate(sig).ok()
            } else {
                check_password(state, params)
            }
        } else {
            check_password(state, params)
        };
    if let Some(principal) = found {
        return Ok(principal);
    }
    let password_given = params.get("username").is_some() || params.get("password").is_some();
    if let (Some(email), Some(password), None) = (
        params.filled("username"),
        params.filled("password"),
        params.filled("signature"),
    ) {
        // A person's email and password: the sign-in counts its own failures.
        return match state
            .accounts
            .sign_in(&state.limits, email, password, ip)
            .await
        {
            Ok(user) => state
                .accounts
                .user_principal(&user.id, None)
                .ok_or(AuthFailure::Denied("Invalid username or password")),
            Err(SignInRefused::Throttled(e)) => Err(AuthFailure::Limited(e)),
            Err(SignInRefused::Busy) => Err(AuthFailure::Limited(crate::limits::RateLimited {
                limit: crate::limits::Limit::AuthPerAccount,
                retry_after_secs: 1,
            })),
            Err(SignInRefused::Wrong) => Err(AuthFailure::Denied("Invalid username or password")),
        };
    }
    if presented {
        state.limits.auth_failed(ip).map_err(AuthFailure::Limited)?;
    }
    Err(AuthFailure::Denied(if password_given {
        "Invalid username or password"
    } else {
        "Please log in"
    }))
}

fn check_password(state: &AppState, params: &Params) -> Option<Arc<Principal>> {
    let (user, password) = (params.filled("username")?, params.filled("password")?);
    state
        .config
        .yourls
        .users
        .iter()
        .find(|u| {
            // Compare digests so the time taken says nothing about the secret.
            constant_eq(u.username.as_bytes(), user.as_bytes())
                & constant_eq(
                    &Sha256::digest(u.password.as_bytes()),
                    &Sha256::digest(password.as_bytes()),
                )
        })
        .and_then(|u| state.accounts.authenticate(&u.key).ok())
}

/// `signature` = hash(timestamp . key) or hash(key . timestamp), `hash` = md5 (default),
/// sha256, sha384 or sha512, with `timestamp` (seconds) within `yourls.signature_window`.
fn check_timestamp_signature(
    state: &AppState,
    timestamp: &str,
    signature: &str,
    hash: Option<&str>,
) -> Option<Arc<Principal>> {
    // PHP's (int) cast: leading digits, anything else is 0.
    let digits: String = timestamp
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let ts: i128 = digits.parse().unwrap_or(0);
    let now = i128::from(state.links.now() / 1000);
    let window = i128::from(state.config.yourls.signature_window.millis()? / 1000);
    if (now - ts).abs() >= window {
        return None;
    }
    let digest: fn(&[u8]) -> String = match hash.unwrap_or("md5") {
        "md5" => |b| hex::encode(Md5::digest(b)),
        "sha256" => |b| hex::encode(Sha256::digest(b)),
        "sha384" => |b| hex::encode(Sha384::digest(b)),
        "sha512" => |b| hex::encode(Sha512::digest(b)),
        _ => return None,
    };
    let signature = signature.to_ascii_lowercase();
    state.accounts.ring().find(|key| {
        let before = digest(format!("{timestamp}{key}").as_bytes());
        let after = digest(format!("{key}{timestamp}").as_bytes());
        constant_eq(before.as_bytes(), signature.as_bytes())
            | constant_eq(after.as_bytes(), signature.as_bytes())
    })
}

/// Equal bytes, compared in time that does not depend on where they differ.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}
