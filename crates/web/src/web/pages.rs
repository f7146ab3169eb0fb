//! The pages a visitor meets on the redirect path (the 403/404/410 pages, the preview, the
//! password form, the form before the visit, the crawlers' page), as the redirect handlers ask
//! for them. The pages (`ui/`) render them; this trait is how `http/` reaches them without
//! naming `ui/`.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use crate::model::gates::FieldProblem;
use crate::model::options::App;
use crate::model::{LeadForm, SocialPreview};

/// What the form page shows.
pub struct FormPage<'a> {
    /// The short link's path, where the form posts.
    pub action: &'a str,
    pub form: &'a LeadForm,
    /// What was sent for a field (after an error), to show again.
    pub value: &'a dyn Fn(&str) -> Option<&'a str>,
    pub consented: bool,
    pub problems: &'a [(String, FieldProblem)],
    pub password: Option<&'a str>,
}

/// Why `/{code}+` does not show a destination: a visitor reaches it only through a gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreviewHidden {
    /// A password protects the link.
    Password,
    /// A form comes before the destination.
    Form,
}

impl PreviewHidden {
    /// The catalogue key under `preview` that says why.
    pub fn key(self) -> &'static str {
        match self {
            PreviewHidden::Password => "protected",
            PreviewHidden::Form => "form",
        }
    }
}

/// The visitor pages, in the visitor's language (from `Accept-Language`).
pub trait VisitorPages: Send + Sync {
    /// The page of an error status (404, 410, 403, 429; another status gets the 404 page).
    fn error(&self, status: StatusCode, headers: &HeaderMap) -> Response;

    /// The 429 page, saying when to try again (`retry_after_secs`, as `Retry-After` says).
    fn rate_limited(&self, retry_after_secs: u64, headers: &HeaderMap) -> Response;

    /// The preview of `/{code}+`: where the link goes and a button to go on (`url`), or, for
    /// a link behind a gate, why it is not shown and a button to the short link.
    fn preview(&self, url: &str, hidden: Option<PreviewHidden>, headers: &HeaderMap) -> Response;

    /// The password form of a protected link, posting to `action`; `wrong` after a wrong
    /// password (403).
    fn unlock(&self, action: &str, wrong: bool, headers: &HeaderMap) -> Response;

    /// The form before the visit.
    fn lead_form(&self, page: FormPage<'_>, headers: &HeaderMap) -> Response;

    /// The page for in-app browsers: how to open the short link (`short_url`, to `host`) in a
    /// real browser from `app`.
    fn in_app(&self, short_url: &str, host: &str, app: App, headers: &HeaderMap) -> Response;

    /// The `og:` page link-preview crawlers read.
    fn crawler_preview(
        &self,
        short_url: &str,
        destination: &str,
        preview: &SocialPreview,
        headers: &HeaderMap,
    ) -> Response;

    /// Whether cookies get `Secure` (the public base URL is https).
    fn secure_cookies(&self) -> bool;
}
