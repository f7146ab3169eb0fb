//! Server-rendered pages (404 and 410 for now), from templates embedded in the binary
//! (`assets/`) through minijinja. User-facing text lives in [`Messages`], not in handlers, so
//! a second language can be added beside English.

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

/// The template environment.
pub struct Pages {
    env: Environment<'static>,
    messages: Messages,
}

impl Pages {
    pub fn new() -> Result<Self, minijinja::Error> {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            env.add_template(name, source)?;
        }
        Ok(Self {
            env,
            messages: ENGLISH,
        })
    }

    /// The 404 or 410 page for a code.
    pub fn error(&self, status: StatusCode, code: Option<&str>) -> Response {
        let m = &self.messages;
        let (title, message) = if status == StatusCode::GONE {
            (m.gone_title, m.gone_text)
        } else {
            (m.not_found_title, m.not_found_text)
        };
        let rendered = self.env.get_template("error.html").and_then(|t| {
            t.render(context! {
                lang => m.lang,
                status => status.as_u16(),
                title => title,
                message => message,
                code => code,
            })
        });
        match rendered {
            Ok(html) => html_response(status, html),
            Err(e) => {
                tracing::error!(error = %e, "page template failed");
                (status, title).into_response()
            }
        }
    }
}

fn html_response(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}
