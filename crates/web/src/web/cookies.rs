//! Cookies as both the pages (sessions, language) and the redirect path (a form's pass) read
//! and set them.

use axum::http::{header, HeaderMap};

/// A cookie's value from the request.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Lax`, path `/`, `Secure` on https. Lax, not
/// Strict: a sign-in coming back from an identity provider (a top-level navigation from
/// another site) must carry its cookies; every form that changes something carries a CSRF
/// token, so Lax's cross-site top-level GETs change nothing.
pub fn set_cookie(name: &str, value: &str, max_age: Option<u64>, secure: bool) -> String {
    let mut cookie = format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax");
    if let Some(age) = max_age {
        cookie.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        cookie.push_str("; Secure");
    }
    cookie
}
