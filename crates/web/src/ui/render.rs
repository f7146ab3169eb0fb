//! Rendering a page: the template environment (autoescaping on for every `.html` template),
//! the [`Visitor`] every page handler takes (language, session, form token), the context every
//! page shares (words, signed-in user, asset URLs), and the security headers of every page.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::{context, Environment, Value};

use super::i18n::{negotiate, Lang};
use super::session::{
    cookie, random_token, same_token, set_cookie, Session, CSRF_COOKIE, SESSION_COOKIE,
};
use super::PageState;
use crate::config::Role;
use crate::web::caller::Caller;
use crate::web::error::ApiError;

/// Every template, compiled in.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "base.html",
        include_str!("../../../../assets/templates/base.html"),
    ),
    (
        "macros.html",
        include_str!("../../../../assets/templates/macros.html"),
    ),
    (
        "home.html",
        include_str!("../../../../assets/templates/home.html"),
    ),
    (
        "login.html",
        include_str!("../../../../assets/templates/login.html"),
    ),
    (
        "links.html",
        include_str!("../../../../assets/templates/links.html"),
    ),
    (
        "link.html",
        include_str!("../../../../assets/templates/link.html"),
    ),
    (
        "dashboard.html",
        include_str!("../../../../assets/templates/dashboard.html"),
    ),
    (
        "reviews.html",
        include_str!("../../../../assets/templates/reviews.html"),
    ),
    (
        "message.html",
        include_str!("../../../../assets/templates/message.html"),
    ),
    (
        "visitor.html",
        include_str!("../../../../assets/templates/visitor.html"),
    ),
    (
        "error.html",
        include_str!("../../../../assets/templates/error.html"),
    ),
    (
        "preview.html",
        include_str!("../../../../assets/templates/preview.html"),
    ),
    (
        "unlock.html",
        include_str!("../../../../assets/templates/unlock.html"),
    ),
    (
        "form.html",
        include_str!("../../../../assets/templates/form.html"),
    ),
    (
        "in_app.html",
        include_str!("../../../../assets/templates/in_app.html"),
    ),
    (
        "og.html",
        include_str!("../../../../assets/templates/og.html"),
    ),
    (
        "account.html",
        include_str!("../../../../assets/templates/account.html"),
    ),
    (
        "users.html",
        include_str!("../../../../assets/templates/users.html"),
    ),
    (
        "teams.html",
        include_str!("../../../../assets/templates/teams.html"),
    ),
    (
        "team.html",
        include_str!("../../../../assets/templates/team.html"),
    ),
    (
        "audit.html",
        include_str!("../../../../assets/templates/audit.html"),
    ),
    (
        "domains.html",
        include_str!("../../../../assets/templates/domains.html"),
    ),
    (
        "oidc_failed.html",
        include_str!("../../../../assets/templates/oidc_failed.html"),
    ),
];

/// `default-src 'self'` and nothing inline: the one script and stylesheet are files of ours;
/// `data:` images are the QR codes' and charts' own.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The compiled templates.
pub struct Templates {
    env: Environment<'static>,
}

impl Templates {
    pub fn new() -> Result<Self, minijinja::Error> {
        let mut env = Environment::new();
        // Printing a key missing from a catalogue or a context is a bug: fail the render, loudly
        // (tests render every page). `if` may still test for absence.
        env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)?;
        }
        Ok(Self { env })
    }

    pub fn render(&self, name: &str, ctx: Value) -> Result<String, minijinja::Error> {
        self.env.get_template(name)?.render(ctx)
    }
}

/// Who is looking at a page: their language, their session if signed in, and the token their
/// forms must carry.
pub struct Visitor {
    pub lang: Lang,
    pub session: Option<Session>,
    /// The form token: the session's, or the `vsl_csrf` cookie's before signing in.
    pub csrf: String,
    /// The `vsl_csrf` cookie is new and must be set on the response.
    new_csrf: bool,
    /// The path and query of this request (where the language switcher comes back to).
    pub path: String,
    /// The client address (proxy headers only when trusted): rate limits of anonymous creates.
    pub ip: std::net::IpAddr,
    /// The request's `Origin`, if it sent one.
    origin: Option<String>,
    host: Option<String>,
}

impl FromRequestParts<PageState> for Visitor {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &PageState,
    ) -> Result<Self, Self::Rejection> {
        let headers = &parts.headers;
        let lang = negotiate(headers);
        let session = cookie(headers, SESSION_COOKIE)
            .and_then(|t| state.ui.sessions.touch(t, &state.accounts));
        let (csrf, new_csrf) = match (&session, cookie(headers, CSRF_COOKIE)) {
            (Some(s), _) => (s.csrf.clone(), false),
            (None, Some(c)) if c.len() == 64 => (c.to_string(), false),
            (None, _) => (random_token(), true),
        };
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |c| {
                c.0.ip()
            });
        let ip = state.client_ip(peer, headers);
        Ok(Visitor {
            ip,
            lang,
            session,
            csrf,
            new_csrf,
            path,
            origin: text(header::ORIGIN),
            host: text(header::HOST),
        })
    }
}

impl Visitor {
    /// The API caller this visitor acts as: the same role and space checks as the API.
    pub fn caller(&self) -> Caller {
        Caller(self.session.as_ref().map(|s| s.principal.clone()))
    }

    pub fn role(&self) -> Option<Role> {
        self.session.as_ref().map(|s| s.principal.role)
    }

    pub fn can_edit(&self) -> bool {
        self.role().is_some_and(|r| r >= Role::Editor)
    }

    /// The signed-in session, or a redirect to the sign-in page that comes back here.
    pub fn require_session(&self) -> Result<&Session, Redirect> {
        self.session.as_ref().ok_or_else(|| {
            let next = urlencoding(&self.path);
            Redirect::to(&format!("/ui/login?next={next}"))
        })
    }

    /// Checks a submitted form: its token must match, and a browser that says where the form
    /// came from must say it came from here.
    pub fn check_form(&self, submitted: Option<&str>) -> bool {
        let same_origin = match (&self.origin, &self.host) {
            (Some(origin), Some(host)) => origin
                .split_once("://")
                .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(host)),
            (Some(_), None) => false,
            (None, _) => true,
        };
        same_origin && submitted.is_some_and(|t| same_token(t, &self.csrf))
    }
}

/// Percent-encodes a value for a query string.
pub fn urlencoding(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Where a `back` or `next` parameter may send a browser: `fallback` when none is given, the
/// value when it is a plain absolute path on this site ([`is_local_path`]), else `/`.
pub fn local_path(next: Option<&str>, fallback: &str) -> String {
    match next {
        None | Some("") => fallback.to_string(),
        Some(p) if is_local_path(p) => p.to_string(),
        Some(_) => "/".to_string(),
    }
}

/// Longest path a local redirect keeps.
const MAX_LOCAL_PATH: usize = 2048;

/// A plain absolute path on this site: `/` then visible ASCII only (no control character,
/// space or backslash, which browsers drop or turn into `/`), never `//` or `/\` (another
/// host), and a path that a browser resolves against this site stays on it. Such a value is
/// always a valid `Location` header.
pub fn is_local_path(path: &str) -> bool {
    let bytes = path.as_bytes();
    let plain = bytes.len() <= MAX_LOCAL_PATH
        && bytes.first() == Some(&b'/')
        && !matches!(bytes.get(1), Some(b'/' | b'\\'))
        && bytes.iter().all(|b| b.is_ascii_graphic() && *b != b'\\');
    plain && {
        const HERE: &str = "http://here.invalid/";
        url::Url::parse(HERE)
            .and_then(|base| base.join(path))
            .is_ok_and(|to| to.as_str().starts_with(HERE))
    }
}

/// Renders a page with the shared context and the visitor's cookies.
pub fn page(
    state: &PageState,
    visitor: &Visitor,
    status: StatusCode,
    template: &str,
    nav: &str,
    ctx: Value,
) -> Response {
    let ui = &state.ui;
    let user = visitor.session.as_ref().map(|s| {
        context! {
            name => s.principal.name.clone(),
            role => format!("{:?}", s.principal.role).to_lowercase(),
            spaces => s.principal.spaces.clone(),
        }
    });
    let other = visitor.lang.other();
    let principal = visitor.session.as_ref().map(|s| &s.principal);
    // The audit log is for admins, and for a team's owners (the admin role in a space).
    let audits = principal.is_some_and(|p| {
        p.everywhere()
            || (p.actor.user().is_some() && p.grants.spaces.values().any(|r| *r == Role::Admin))
    });
    let shared = context! {
        lang => visitor.lang.tag(),
        t => ui.catalogues.template(visitor.lang),
        user => user,
        can_edit => visitor.can_edit(),
        is_admin => visitor.role() == Some(Role::Admin),
        manages_users => principal.is_some_and(|p| p.everywhere()),
        audits => audits,
        csrf => visitor.csrf.clone(),
        nav => nav,
        path => visitor.path.clone(),
        switch_href => format!("/ui/lang?set={}&back={}", other.tag(), urlencoding(&visitor.path)),
        switch_tag => other.tag(),
        switch_name => other.native_name(),
        css => ui.assets.versioned("app.css"),
        js => ui.assets.versioned("app.js"),
        icon => ui.assets.versioned("icon.svg"),
    };
    let merged = context! { ..ctx, ..shared };
    match ui.templates.render(template, merged) {
        Ok(html) => {
            let mut response = (status, html).into_response();
            let h = response.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            h.insert(
                header::VARY,
                HeaderValue::from_static("Cookie, Accept-Language"),
            );
            if visitor.new_csrf {
                let value = set_cookie(CSRF_COOKIE, &visitor.csrf, None, ui.secure_cookies);
                if let Ok(v) = HeaderValue::from_str(&value) {
                    h.append(header::SET_COOKIE, v);
                }
            }
            response
        }
        Err(e) => {
            tracing::error!(template, error = %e, "page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

/// A short page that says one thing (forbidden, not found, form expired, failure).
pub fn message(state: &PageState, visitor: &Visitor, status: StatusCode, key: &str) -> Response {
    page(
        state,
        visitor,
        status,
        "message.html",
        "",
        context! { status => status.as_u16(), key => key },
    )
}

/// After a successful form: go to `to` (303, so a reload does not post again).
pub fn see_other(to: &str) -> Response {
    // Every caller passes a local path or a constant; anything else goes home rather than
    // failing the request (a 500 that still carried the caller's cookies).
    let to = if is_local_path(to) { to } else { "/" };
    Redirect::to(to).into_response()
}

/// Adds the pages' security headers to every response of the pages' router.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    add_security_headers(response.headers_mut());
    response
}

/// A page for a visitor on the way to a destination (the 404 and 410 pages, a preview, a
/// password form): HTML with the pages' security headers.
pub fn visitor_page(status: StatusCode, body: impl IntoResponse) -> Response {
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    add_security_headers(h);
    response
}

/// The headers every HTML page carries, also used by the 404/410 pages.
pub fn add_security_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// The visitor's session, for handlers that checked it already.
pub fn principal(visitor: &Visitor) -> Option<Arc<crate::keys::Principal>> {
    visitor.session.as_ref().map(|s| s.principal.clone())
}

/// The page for a failed check: 403 for role and space, 404 for unknown codes.
pub fn refused(state: &PageState, visitor: &Visitor, e: &ApiError) -> Response {
    let key = match e.status {
        StatusCode::NOT_FOUND => "msg.no_such_link",
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => "msg.forbidden",
        _ => "msg.failed",
    };
    message(state, visitor, e.status, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_absolute_paths_are_local() {
        for path in [
            "/",
            "/ui/links",
            "/ui/links?q=a%20b&page=2",
            "/a/b#x",
            "/%2F%2Fx",
        ] {
            assert!(is_local_path(path), "{path}");
            assert_eq!(local_path(Some(path), "/ui/links"), path);
        }
        for path in [
            "//evil.example/",
            "/\\evil.example/",
            "/\t/evil.example/",
            "/\n/x",
            "/\r\nSet-Cookie: a=b",
            "/ /x",
            "https://evil.example/",
            "evil.example",
            "ui/links",
            "/é",
            "\\evil.example",
            "/\u{0}x",
        ] {
            assert!(!is_local_path(path), "{path:?}");
            assert_eq!(local_path(Some(path), "/ui/links"), "/", "{path:?}");
        }
        assert_eq!(local_path(None, "/ui/links"), "/ui/links");
        assert_eq!(local_path(Some(""), "/ui/links"), "/ui/links");
        assert!(!is_local_path(&format!("/{}", "a".repeat(MAX_LOCAL_PATH))));
    }
}
