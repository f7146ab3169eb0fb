//! Server-rendered pages (404 and 410 for now), from templates embedded in the binary
//! (`assets/`) through minijinja. User-facing text lives in [`Messages`], not in handlers, so
//! a second language can be added beside English.

use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::{context, Environment};

/// Every page template, compiled in.
const TEMPLATES: &[(&str, &str)] = &[("error.html", include_str!("../../assets/error.html"))];

/// The words on the pages, per language.
#[derive(Clone, Copy, Debug)]
pub struct Messages {
    pub lang: &'static str,
    pub not_found_title: &'static str,
    pub not_found_text: &'static str,
    pub gone_title: &'static str,
    pub gone_text: &'static str,
}

pub const ENGLISH: Messages = Messages {
    lang: "en",
    not_found_title: "Link not found",
    not_found_text: "There is no short link here. Check the address for typos.",
    gone_title: "Link no longer available",
    gone_text: "This short link has expired or was removed by its owner.",
};

/// The template environment, and the 404/410 pages rendered once: the redirect path serves
/// them for every unknown code, so they must cost no more than a copy of a few bytes.
pub struct Pages {
    not_found: Bytes,
    gone: Bytes,
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
        Ok(Self { not_found, gone })
    }

    /// The 404 or 410 page.
    pub fn error(&self, status: StatusCode) -> Response {
        let page = if status == StatusCode::GONE {
            self.gone.clone()
        } else {
            self.not_found.clone()
        };
        html_response(status, page)
    }
}

fn render_error(
    env: &Environment<'static>,
    m: &Messages,
    status: StatusCode,
) -> Result<String, minijinja::Error> {
    let (title, message) = if status == StatusCode::GONE {
        (m.gone_title, m.gone_text)
    } else {
        (m.not_found_title, m.not_found_text)
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
