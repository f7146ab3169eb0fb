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
                limits.account_failed(&account, ip);
                Err(SignInRefused::Wrong)
            }
        }
    }
}

/// Why a sign-in through an OpenID provider signed nobody in (each a page of its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderRefused {
    /// An existing user has this email, and the provider does not vouch for it
    /// (`email_verified` is not true): nothing joined, nothing made.
    Unverified,
    /// Nobody has this email and `auto_create` is off.
    NoAccount,
    /// The user is disabled.
    Disabled,
    /// The provider sent no email for a person it does not know yet.
    NoEmail,
    /// The store failed.
    Failed,
}

impl Accounts {
    /// Signs in the person a provider vouched for: by `(issuer, sub)`; a first sign-in joins
    /// the user of the same email only when the email is verified, or makes a user when
    /// `auto_create`. `admin_group` and `team_groups` are applied at every sign-in (a
    /// membership in a team `team_groups` names ends when the groups no longer give it;
    /// others, given by hand, stay; the last admin is never demoted).
    pub fn provider_sign_in(
        &self,
        config: &crate::config::OidcConfig,
        claims: &super::oidc::Claims,
        ip: IpAddr,
    ) -> Result<User, ProviderRefused> {
        use crate::model::account::{member_id, RecordAddress};
        use crate::model::{Identity, Member, UserRole};
        let grants = super::oidc::grants(config, claims);
        let now = self.now();
        let outcome = self.change(|dir| {
            let known = dir
                .identity(&claims.issuer, &claims.sub)
                .and_then(|i| dir.user(&i.user_id))
                .cloned();
            let mut write = AccountWrite::default();
            let mut user = match known {
                Some(user) => user,
                None => {
                    let Some(email) = claims.email.as_deref() else {
                        return Ok((write, Err(ProviderRefused::NoEmail)));
                    };
                    let user = match dir.user_by_email(email) {
                        Some(existing) if claims.email_verified => existing.clone(),
                        Some(_) => return Ok((write, Err(ProviderRefused::Unverified))),
                        None if config.auto_create => User {
                            id: super::random_text(12, super::ID_ALPHABET),
                            email: email.trim().to_string(),
                            name: claims.name.clone().unwrap_or_default(),
                            role: UserRole::Member,
                            disabled: false,
                            created_at: now,
                            last_sign_in_at: None,
                            password: None,
                            session_epoch: 0,
                            key_epoch: 0,
                        },
                        None => return Ok((write, Err(ProviderRefused::NoAccount))),
                    };
                    write.put.push(AccountRecord::Identity(Identity {
                        issuer: claims.issuer.clone(),
                        subject: claims.sub.clone(),
                        user_id: user.id.clone(),
                        created_at: now,
                    }));
                    user
                }
            };
            if user.disabled {
                return Ok((AccountWrite::default(), Err(ProviderRefused::Disabled)));
            }
            if config.admin_group.is_some() {
                let wanted = if grants.admin {
                    UserRole::Admin
                } else {
                    UserRole::Member
                };
                // Never demote the last admin: the instance would have none.
                let last = user.role == UserRole::Admin && dir.enabled_admins() <= 1;
                if !(wanted == UserRole::Member && last) {
                    user.role = wanted;
                }
            }
            user.last_sign_in_at = Some(now);
            for (team, role) in &grants.teams {
                if dir.team(team).is_some() && dir.member_role(team, &user.id) != Some(*role) {
                    write.put.push(AccountRecord::Member(Member {
                        team: team.clone(),
                        user_id: user.id.clone(),
                        role: *role,
                    }));
                }
            }
            for team in &grants.managed {
                let given = grants.teams.iter().any(|(t, _)| t == team);
                if !given && dir.member_role(team, &user.id).is_some() {
                    write.delete.push(RecordAddress {
                        kind: "member".into(),
                        id: member_id(team, &user.id),
                    });
                }
            }
            write.put.push(AccountRecord::User(user.clone()));
            Ok((write, Ok(user)))
        });
        match outcome {
            Ok(Ok(user)) => {
                self.audit.record(
                    &format!("user:{}", user.id),
                    "sign_in",
                    &format!("user:{}", user.id),
                    ip,
                    None,
                );
                Ok(user)
            }
            Ok(Err(refused)) => {
                let who = claims.email.clone().unwrap_or_else(|| claims.sub.clone());
                self.audit.record(&who, "sign_in.failed", &who, ip, None);
                Err(refused)
            }
            Err(e) => {
                tracing::warn!(error = %e, "a provider's sign-in could not be written");
                Err(ProviderRefused::Failed)
            }
        }
    }
}
