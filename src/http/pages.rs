//! Server-rendered pages (404, 410, 429, 403 for a blocked destination, and the preview of
//! `/{code}+`), from templates embedded in the binary
//! (`assets/`) through minijinja. User-facing text lives in [`Messages`], not in handlers, so
//! a second language can be added beside English.

use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::{context, Environment};

/// Every page template, compiled in.
const TEMPLATES: &[(&str, &str)] = &[
    ("error.html", include_str!("../../assets/error.html")),
    ("preview.html", include_str!("../../assets/preview.html")),
];

/// The words on the pages, per language.
#[derive(Clone, Copy, Debug)]
pub struct Messages {
    pub lang: &'static str,
    pub not_found_title: &'static str,
    pub not_found_text: &'static str,
    pub gone_title: &'static str,
    pub gone_text: &'static str,
    pub rate_limited_title: &'static str,
    pub rate_limited_text: &'static str,
    pub blocked_title: &'static str,
    pub blocked_text: &'static str,
    pub preview_title: &'static str,
    pub preview_text: &'static str,
    pub preview_button: &'static str,
}

pub const ENGLISH: Messages = Messages {
    lang: "en",
    not_found_title: "Link not found",
    not_found_text: "There is no short link here. Check the address for typos.",
    gone_title: "Link no longer available",
    gone_text: "This short link has expired or was removed by its owner.",
    rate_limited_title: "Too many requests",
    rate_limited_text: "Too many requests came from your address. Wait a moment and try again.",
    blocked_title: "Destination blocked",
    blocked_text: "This short link leads to a site that has been blocked on this server.",
    preview_title: "Where this link goes",
    preview_text: "This short link leads to the address below. Check it before you go on.",
    preview_button: "Go to this address",
};

/// The template environment, and the 404/410 pages rendered once: the redirect path serves
/// them for every unknown code, so they must cost no more than a copy of a few bytes.
pub struct Pages {
    env: Environment<'static>,
    messages: Messages,
    not_found: Bytes,
    gone: Bytes,
    rate_limited: Bytes,
    blocked: Bytes,
}

impl Pages {
    pub fn new() -> Result<Self, minijinja::Error> {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            env.add_template(name, source)?;
        }
        let messages = ENGLISH;
        let not_found = render_error(&env, &messages, StatusCode::NOT_FOUND)?.into();
        let gone = render_error(&env, &messages, StatusCode::GONE)?.into();
        let rate_limited = render_error(&env, &messages, StatusCode::TOO_MANY_REQUESTS)?.into();
        let blocked = render_error(&env, &messages, StatusCode::FORBIDDEN)?.into();
        Ok(Self {
            env,
            messages,
            not_found,
            gone,
            rate_limited,
            blocked,
        })
    }

    /// The 404, 410, 429 (rate limited) or 403 (blocked destination) page.
    pub fn error(&self, status: StatusCode) -> Response {
        let page = match status {
            StatusCode::GONE => self.gone.clone(),
            StatusCode::TOO_MANY_REQUESTS => self.rate_limited.clone(),
            StatusCode::FORBIDDEN => self.blocked.clone(),
            _ => self.not_found.clone(),
        };
        html_response(status, page)
    }

    /// The preview of a short link: its destination, escaped by the template, and a button.
    pub fn preview(&self, url: &str) -> Result<Response, minijinja::Error> {
        let m = &self.messages;
        let html = self.env.get_template("preview.html")?.render(context! {
            lang => m.lang,
            title => m.preview_title,
            message => m.preview_text,
            button => m.preview_button,
            url => url,
        })?;
        Ok(html_response(StatusCode::OK, html.into()))
    }
}

fn render_error(
    env: &Environment<'static>,
    m: &Messages,
    status: StatusCode,
) -> Result<String, minijinja::Error> {
    let (title, message) = match status {
        StatusCode::GONE => (m.gone_title, m.gone_text),
        StatusCode::TOO_MANY_REQUESTS => (m.rate_limited_title, m.rate_limited_text),
        StatusCode::FORBIDDEN => (m.blocked_title, m.blocked_text),
        _ => (m.not_found_title, m.not_found_text),
    };
    env.get_template("error.html")?.render(context! {
        lang => m.lang,
        status => status.as_u16(),
        title => title,
        message => message,
    })
}

fn html_response(status: StatusCode, html: Bytes) -> Response {
    let mut response = (status, html).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}
