//! Signing in with an API key (`/ui/login`, the form field is `key`) or as a person (fields
//! `email` and `password`), signing out
//! (`/ui/logout`), and the language switcher (`/ui/lang`).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use minijinja::context;

use super::forms::{field, CheckedForm};
use super::i18n::{Lang, LANG_COOKIE};
use super::render::{local_path, message, page, see_other, Visitor};
use super::session::{cookie, set_cookie, SignedIn, SESSION_COOKIE};
use super::PageState;
use crate::accounts::SignInRefused;
use crate::limits::Limit;

/// Where signing in leads when the form does not say.
const AFTER_SIGN_IN: &str = "/ui/links";

/// `GET /ui/login`.
pub async fn show(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let next = local_path(query.get("next").map(String::as_str), AFTER_SIGN_IN);
    render(&state, &visitor, StatusCode::OK, &next, None)
}

fn render(
    state: &PageState,
    visitor: &Visitor,
    status: StatusCode,
    next: &str,
    error: Option<&str>,
) -> Response {
    page(
        state,
        visitor,
        status,
        "login.html",
        "login",
        context! {
            next => next,
            error => error,
            providers => state.ui.providers.names(),
            next_query => super::render::urlencoding(next),
        },
    )
}

/// `POST /ui/login`: a known key opens a session (field `key`), or a person's email and
/// password (fields `email` and `password`).
pub async fn sign_in(
    State(state): State<PageState>,
    visitor: Visitor,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let next = local_path(field(&fields, "next"), AFTER_SIGN_IN);
    let limited = |e: crate::limits::RateLimited| {
        let mut response = render(
            &state,
            &visitor,
            StatusCode::TOO_MANY_REQUESTS,
            &next,
            Some("login.too_many"),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(e.retry_after_secs));
        response
    };
    // Every attempt counts, the right one too: were only failures counted, an answer other
    // than 429 past the quota would tell a guesser that this guess was right. Failed ones
    // also count against `auth_per_ip` with the API's keys (one quota for every way of
    // guessing a credential).
    if let Err(e) = state
        .limits
        .check_ip(Limit::LoginPerIp, visitor.ip, 1)
        .and_then(|()| state.limits.check_auth(visitor.ip))
    {
        return limited(e);
    }
    let who = if let Some(email) = field(&fields, "email") {
        let password = field(&fields, "password").unwrap_or_default();
        match state
            .accounts
            .sign_in(&state.limits, email, password, visitor.ip)
            .await
        {
            Ok(user) => Ok((user.id, user.session_epoch)),
            Err(SignInRefused::Throttled(e)) => return limited(e),
            Err(SignInRefused::Busy) => {
                return limited(crate::limits::RateLimited {
                    limit: Limit::AuthPerAccount,
                    retry_after_secs: 1,
                })
            }
            Err(SignInRefused::Wrong) => Err("login.wrong_password"),
        }
    } else {
        let key = field(&fields, "key").unwrap_or_default();
        match state.accounts.authenticate(key) {
            Ok(_) => {
                return open_session(&state, &visitor, SignedIn::Key(key), &next);
            }
            Err(refused) => {
                if let Err(e) = state.limits.auth_failed(visitor.ip) {
                    return limited(e);
                }
                Err(match refused {
                    crate::accounts::KeyRefused::Expired => "login.key_expired",
                    crate::accounts::KeyRefused::Unknown => "login.unknown_key",
                })
            }
        }
    };
    match who {
        Ok((id, epoch)) => open_session(&state, &visitor, SignedIn::User { id: &id, epoch }, &next),
        Err(error) => render(
            &state,
            &visitor,
            StatusCode::UNAUTHORIZED,
            &next,
            Some(error),
        ),
    }
}

/// Opens a session and sends the browser on with its cookie (a new token at every sign-in).
pub fn open_session(
    state: &PageState,
    visitor: &Visitor,
    who: SignedIn<'_>,
    next: &str,
) -> Response {
    let token = match state.ui.sessions.open(who) {
        Ok(token) => token,
        Err(e) => {
            tracing::error!(error = %e, "page session could not be opened");
            return message(
                state,
                visitor,
                StatusCode::SERVICE_UNAVAILABLE,
                "msg.failed",
            );
        }
    };
    let cookie = set_cookie(
        SESSION_COOKIE,
        &token,
        Some(state.ui.sessions.ttl_secs()),
        state.ui.secure_cookies,
    );
    let mut response = see_other(next);
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

/// `POST /ui/logout`: ends the session. A form with the session's token: another site cannot
/// sign a browser out.
pub async fn sign_out(
    State(state): State<PageState>,
    headers: axum::http::HeaderMap,
    CheckedForm(_): CheckedForm,
) -> Response {
    if let Some(token) = cookie(&headers, SESSION_COOKIE) {
        state.ui.sessions.close(token);
    }
    let mut response = see_other("/");
    let expired = set_cookie(SESSION_COOKIE, "", Some(0), state.ui.secure_cookies);
    if let Ok(v) = HeaderValue::from_str(&expired) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

/// `GET /ui/lang?set=zh-CN&back=/ui/links`: remembers a language for a year.
pub async fn switch_language(
    State(state): State<PageState>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let back = local_path(query.get("back").map(String::as_str), "/");
    let mut response = see_other(&back);
    // A language we do not speak changes nothing.
    let Some(lang) = query.get("set").and_then(|t| Lang::from_tag(t)) else {
        return response;
    };
    let value = set_cookie(
        LANG_COOKIE,
        lang.tag(),
        Some(365 * 86_400),
        state.ui.secure_cookies,
    );
    if let Ok(v) = HeaderValue::from_str(&value) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}
