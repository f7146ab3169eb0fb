//! The pages of the redirect path: 404, 410, 429 (too many requests) and 403 (a blocked
//! destination), rendered once per language at start-up (the redirect serves them for every
//! unknown code, so they cost a copy of a few bytes); and the preview of `/{code}+`.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::context;

use super::i18n::{accept_language, Catalogues, Lang};
use super::render::{visitor_page, Templates};

/// The statuses that have a page, and the catalogue table (`error.<kind>_…`) of each.
const KINDS: [(StatusCode, &str); 4] = [
    (StatusCode::NOT_FOUND, "not_found"),
    (StatusCode::GONE, "gone"),
    (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
    (StatusCode::FORBIDDEN, "blocked"),
];

pub struct ErrorPages {
    /// (language, status, page)
    pages: Vec<(Lang, StatusCode, Bytes)>,
    /// The 429 page per language saying when to try again: in a second, in N seconds, in a
    /// minute, in N minutes; each split where the number goes (nothing after the split when
    /// the words hold no number).
    waits: Vec<(Lang, [(String, String); 4])>,
}

/// Where the number of seconds or minutes goes in a rendered 429 page.
const WAIT_MARK: &str = "\u{1}n\u{1}";

impl ErrorPages {
    pub fn new(
        templates: &Templates,
        catalogues: &Catalogues,
        css: &str,
    ) -> Result<Self, minijinja::Error> {
        let mut pages = Vec::new();
        let mut waits = Vec::new();
        for lang in Lang::ALL {
            for (status, kind) in KINDS {
                let html = templates.render(
                    "error.html",
                    context! {
                        lang => lang.tag(),
                        t => catalogues.template(lang),
                        status => status.as_u16(),
                        kind => kind,
                        css => css,
                    },
                )?;
                pages.push((lang, status, Bytes::from(html)));
            }
            let mut halves: [(String, String); 4] = Default::default();
            for (i, unit) in ["sec", "secs", "min", "mins"].into_iter().enumerate() {
                let html = templates.render(
                    "error.html",
                    context! {
                        lang => lang.tag(),
                        t => catalogues.template(lang),
                        status => 429,
                        kind => "rate_limited",
                        wait => unit,
                        wait_mark => WAIT_MARK,
                        css => css,
                    },
                )?;
                halves[i] = match html.split_once(WAIT_MARK) {
                    Some((before, after)) => (before.to_string(), after.to_string()),
                    None => (html, String::new()),
                };
            }
            waits.push((lang, halves));
        }
        Ok(Self { pages, waits })
    }

    /// The 429 page in the visitor's language, saying to try again in `secs` seconds (or, past
    /// 90 of them, in minutes; "in a second", "in a minute" for one).
    pub fn rate_limited(&self, secs: u64, headers: &HeaderMap) -> Response {
        let lang = language(headers);
        let Some((_, halves)) = self.waits.iter().find(|(l, _)| *l == lang) else {
            return self.response(StatusCode::TOO_MANY_REQUESTS, headers);
        };
        let (i, n) = match secs {
            0 | 1 => (0, 1),
            2..=90 => (1, secs),
            _ => match secs.div_ceil(60) {
                1 => (2, 1),
                mins => (3, mins),
            },
        };
        let half = &halves[i];
        let body = if i % 2 == 0 {
            half.0.clone()
        } else {
            format!("{}{n}{}", half.0, half.1)
        };
        visitor_page(StatusCode::TOO_MANY_REQUESTS, Bytes::from(body))
    }

    /// The page of `status` (404 for any status without one) in the visitor's language.
    pub fn response(&self, status: StatusCode, headers: &HeaderMap) -> Response {
        let lang = language(headers);
        let kind = if KINDS.iter().any(|(s, _)| *s == status) {
            status
        } else {
            StatusCode::NOT_FOUND
        };
        let Some(body) = self
            .pages
            .iter()
            .find(|(l, s, _)| *l == lang && *s == kind)
            .map(|(_, _, page)| page.clone())
        else {
            return status.into_response();
        };
        visitor_page(status, body)
    }
}

/// The language of a page on the redirect path: the cookie only when one was sent (most
/// visitors send none, and this path is hot).
pub fn language(headers: &HeaderMap) -> Lang {
    if headers.contains_key(header::COOKIE) {
        super::i18n::negotiate(headers)
    } else {
        accept_language(headers).unwrap_or(Lang::En)
    }
}
