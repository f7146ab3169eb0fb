//! The 404 and 410 pages of the redirect path, rendered once per language at start-up: the
//! redirect serves them for every unknown code, so they cost a copy of a few bytes.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::context;

use super::i18n::{accept_language, Catalogues, Lang};
use super::render::{add_security_headers, Templates};

pub struct ErrorPages {
    /// (language, 404 page, 410 page)
    pages: Vec<(Lang, Bytes, Bytes)>,
}

impl ErrorPages {
    pub fn new(
        templates: &Templates,
        catalogues: &Catalogues,
        css: &str,
    ) -> Result<Self, minijinja::Error> {
        let mut pages = Vec::new();
        for lang in Lang::ALL {
            let render = |status: StatusCode, kind: &str| {
                templates.render(
                    "error.html",
                    context! {
                        lang => lang.tag(),
                        t => catalogues.template(lang),
                        status => status.as_u16(),
                        kind => kind,
                        css => css,
                    },
                )
            };
            let not_found = render(StatusCode::NOT_FOUND, "not_found")?;
            let gone = render(StatusCode::GONE, "gone")?;
            pages.push((lang, not_found.into(), gone.into()));
        }
        Ok(Self { pages })
    }

    /// The 404 or 410 page in the visitor's language.
    pub fn response(&self, status: StatusCode, headers: &HeaderMap) -> Response {
        let lang = if headers.contains_key(header::COOKIE) {
            super::i18n::negotiate(headers)
        } else {
            accept_language(headers).unwrap_or(Lang::En)
        };
        let Some((_, not_found, gone)) = self
            .pages
            .iter()
            .find(|(l, _, _)| *l == lang)
            .or(self.pages.first())
        else {
            return status.into_response();
        };
        let body = if status == StatusCode::GONE {
            gone.clone()
        } else {
            not_found.clone()
        };
        let mut response = (status, body).into_response();
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        add_security_headers(h);
        response
    }
}
