//! Signing in with an email and a password (the pages' form, YOURLS `username`/`password`).
//!
//! A wrong password, an unknown email and a disabled user answer alike, in about the same
//! time: an unknown email is checked against a hash made at start, so it costs one Argon2 run
//! like any other. Failures count against `limits.rates.auth_per_ip` per address and
//! `auth_per_account` per account (known or not) and address, ten times that per account;
//! past any of them the sign-in answers 429 whether or not the password is right, until the
//! quota lets one more through. A success resets nothing (a guesser who found it would
//! otherwise reset their own count), and a 429 is not a failure.

use std::net::IpAddr;
use std::sync::OnceLock;

use super::Accounts;
use crate::limits::{RateLimited, RateLimits};
use crate::model::account::email_key;
use crate::model::{AccountRecord, AccountWrite, User};
use crate::passwords::Check;

/// Why a sign-in signed nobody in.
#[derive(Clone, Debug)]
pub enum SignInRefused {
    /// Wrong password, unknown email, disabled user: one answer (401).
    Wrong,
    /// Past a quota (429 with `Retry-After`).
    Throttled(RateLimited),
    /// No password check slot came free (429 `busy`).
    Busy,
}

/// A hash of a password nobody has, checked for unknown emails so that they take as long.
fn decoy() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| {
        let secret: [u8; 16] = rand::random();
        crate::passwords::argon2id(&hex::encode(secret)).unwrap_or_default()
    })
}

impl Accounts {
    /// Signs a person in by email and password; the user, their last sign-in noted.
    pub async fn sign_in(
        &self,
        limits: &RateLimits,
        email: &str,
        password: &str,
        ip: IpAddr,
    ) -> Result<User, SignInRefused> {
        let account = email_key(email);
        limits
            .check_auth(ip)
            .and_then(|()| limits.check_account(&account, ip))
            .map_err(SignInRefused::Throttled)?;
        let user = self.directory().user_by_email(&account).cloned();
        let hash = user
            .as_ref()
            .filter(|u| !u.disabled)
            .and_then(|u| u.password.clone());
        let known = hash.is_some();
        let hash = hash.unwrap_or_else(|| decoy().to_string());
        let check = self.passwords().verify(hash, password.to_string()).await;
        match (check, user) {
            (Check::Busy, _) => Err(SignInRefused::Busy),
            (Check::Right, Some(user)) if known => {
                let now = self.now();
                let id = user.id.clone();
                let signed = self.change(|dir| {
                    let mut user = dir
                        .user(&id)
                        .cloned()
                        .ok_or(super::AccountError::NotFound(String::new()))?;
                    user.last_sign_in_at = Some(now);
                    Ok((AccountWrite::put(AccountRecord::User(user.clone())), user))
                });
                self.audit.record(
                    &format!("user:{id}"),
                    "sign_in",
                    &format!("user:{id}"),
                    ip,
                    None,
                );
                signed.map_err(|e| {
                    tracing::warn!(error = %e, "a sign-in could not be noted");
                    SignInRefused::Wrong
                })
            }
            _ => {
                self.audit
                    .record(&account, "sign_in.failed", &account, ip, None);
                // Both count, whichever is past its quota. A failure that goes past one is
                // still answered as a failure (its password was checked); the next attempt
                // is the one refused.
                let _ = limits.auth_failed(ip);
                let _ = limits.account_failed(&account, ip);
                Err(SignInRefused::Wrong)
            }
        }
    }
}
