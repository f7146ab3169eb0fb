//! The pages a visitor may meet on the way to a destination: the preview of `/{code}+`, and
//! the password form of a protected link. Small, in the visitor's language, no script, nothing
//! from another host, the pages' security headers.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{errors, render, Ui};
use crate::http::error::ApiError;

impl Ui {
    /// The preview of `/{code}+`: where the link goes (escaped) and a button to go on. For a
    /// protected link, `url` is the short link itself and the page says that the destination
    /// is shown only to those who know the password.
    pub fn preview(&self, url: &str, protected: bool, headers: &HeaderMap) -> Response {
        self.visitor_page(StatusCode::OK, "preview.html", headers, |ctx| {
            ctx.insert("url", url.into());
            ctx.insert("protected", protected.into());
        })
    }

    /// The password form of a protected link, posting to `action` (the short link's path);
    /// `wrong` after a wrong password (403).
    pub fn unlock(&self, action: &str, wrong: bool, headers: &HeaderMap) -> Response {
        let status = if wrong {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::OK
        };
        self.visitor_page(status, "unlock.html", headers, |ctx| {
            ctx.insert("action", action.into());
            ctx.insert("wrong", wrong.into());
        })
    }

    fn visitor_page(
        &self,
        status: StatusCode,
        template: &str,
        headers: &HeaderMap,
        fill: impl FnOnce(&mut std::collections::BTreeMap<&'static str, minijinja::Value>),
    ) -> Response {
        let lang = errors::language(headers);
        let mut ctx = std::collections::BTreeMap::new();
        ctx.insert("lang", lang.tag().into());
        ctx.insert("t", self.catalogues.template(lang));
        ctx.insert("css", self.assets.versioned("app.css").into());
        fill(&mut ctx);
        match self.templates.render(template, minijinja::Value::from(ctx)) {
            Ok(html) => {
                let mut response = render::visitor_page(status, html);
                response.headers_mut().insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("private, no-store"),
                );
                response
            }
            Err(e) => ApiError::internal(e).into_response(),
        }
    }
}
