//! The pages a visitor may meet on the way to a destination: the preview of `/{code}+`, the
//! password form of a protected link, the form before the visit, the page for in-app
//! browsers, and the `og:` page link-preview crawlers read. Small, in the visitor's language,
//! readable without script, nothing from another host, the pages' security headers.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{errors, render, Ui};
use crate::model::gates::CONSENT_FIELD;
use crate::model::options::App;
use crate::model::SocialPreview;
use crate::web::error::ApiError;
use crate::web::pages::{FormPage, PreviewHidden, VisitorPages};

/// The pages' policy, but a form may lead anywhere: Chromium applies `form-action` to the
/// redirect that answers a submission, and this form's answer is the link's destination.
/// The form's own `action` is always the short link (the template writes it).
const FORM_CSP: Option<&str> = Some(
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self' http: https:; frame-ancestors 'none'",
);

impl Ui {
    /// The preview of `/{code}+`: where the link goes (escaped) and a button to go on. For a
    /// protected link, `url` is the short link itself and the page says that the destination
    /// is shown only to those who know the password.
    pub fn preview(
        &self,
        url: &str,
        hidden: Option<PreviewHidden>,
        headers: &HeaderMap,
    ) -> Response {
        self.visitor_page(StatusCode::OK, "preview.html", headers, |ctx| {
            ctx.insert("url", url.into());
            ctx.insert("hidden", hidden.map(PreviewHidden::key).into());
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
        self.visitor_page_with(status, "unlock.html", headers, FORM_CSP, |ctx| {
            ctx.insert("action", action.into());
            ctx.insert("wrong", wrong.into());
        })
    }

    /// The form of a link before the destination, posting to `action`: the fields with the
    /// values sent (kept after an error) and each field's problem beside it; `password` is the
    /// visitor's right password, carried in a hidden input when the link has one too. 200, or
    /// 400 with problems.
    pub fn lead_form(&self, page: FormPage<'_>, headers: &HeaderMap) -> Response {
        let fields: Vec<minijinja::Value> = page
            .form
            .fields
            .iter()
            .map(|f| {
                let problem = page
                    .problems
                    .iter()
                    .find(|(name, _)| *name == f.name)
                    .map(|(_, p)| p.key());
                minijinja::context! {
                    name => f.name,
                    label => f.label,
                    kind => f.kind.as_str(),
                    required => f.required,
                    value => (page.value)(&f.name).unwrap_or(""),
                    problem => problem,
                }
            })
            .collect();
        let consent_problem = page.problems.iter().any(|(name, _)| name == CONSENT_FIELD);
        let status = if page.problems.is_empty() {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        self.visitor_page_with(status, "form.html", headers, FORM_CSP, |ctx| {
            ctx.insert("action", page.action.into());
            ctx.insert("fields", fields.into());
            ctx.insert("consent", page.form.consent.clone().into());
            ctx.insert("consented", page.consented.into());
            ctx.insert("consent_problem", consent_problem.into());
            ctx.insert("invalid", (!page.problems.is_empty()).into());
            ctx.insert("password", page.password.into());
        })
    }

    /// The page for a visitor inside an app's own browser: open the link in the system
    /// browser (the app's menu), with the short link to copy and the destination's host.
    pub fn in_app(&self, short_url: &str, host: &str, app: App, headers: &HeaderMap) -> Response {
        self.visitor_page(StatusCode::OK, "in_app.html", headers, |ctx| {
            ctx.insert("short_url", short_url.into());
            ctx.insert("host", host.into());
            ctx.insert("app", app.as_str().into());
            // iPhones and iPads name the way out after Safari; other systems (desktop WeChat,
            // Android) after the browser.
            let ua = headers
                .get(axum::http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let ios = ["iPhone", "iPad", "iPod"].iter().any(|d| ua.contains(d));
            ctx.insert("ios", ios.into());
            ctx.insert("js", self.assets.versioned("visitor.js").into());
        })
    }

    /// What a link-preview crawler reads: the `og:` and `twitter:` tags (escaped by the
    /// templates) and a link to the destination.
    pub fn crawler_preview(
        &self,
        short_url: &str,
        destination: &str,
        preview: &SocialPreview,
        headers: &HeaderMap,
    ) -> Response {
        let mut response = self.visitor_page(StatusCode::OK, "og.html", headers, |ctx| {
            ctx.insert("short_url", short_url.into());
            ctx.insert("destination", destination.into());
            ctx.insert("og_title", preview.title.clone().into());
            ctx.insert("og_description", preview.description.clone().into());
            ctx.insert("og_image", preview.image.clone().into());
        });
        // Crawlers cache previews by themselves; let them keep this one a little.
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        );
        response
    }

    fn visitor_page(
        &self,
        status: StatusCode,
        template: &str,
        headers: &HeaderMap,
        fill: impl FnOnce(&mut std::collections::BTreeMap<&'static str, minijinja::Value>),
    ) -> Response {
        self.visitor_page_with(status, template, headers, None, fill)
    }

    /// [`Ui::visitor_page`] with another `Content-Security-Policy` when `csp` says.
    fn visitor_page_with(
        &self,
        status: StatusCode,
        template: &str,
        headers: &HeaderMap,
        csp: Option<&'static str>,
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
                if let Some(csp) = csp {
                    response.headers_mut().insert(
                        header::CONTENT_SECURITY_POLICY,
                        HeaderValue::from_static(csp),
                    );
                }
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

/// The visitor pages as the redirect path shows them.
impl VisitorPages for Ui {
    fn error(&self, status: StatusCode, headers: &HeaderMap) -> Response {
        self.errors.response(status, headers)
    }

    fn rate_limited(&self, retry_after_secs: u64, headers: &HeaderMap) -> Response {
        self.errors.rate_limited(retry_after_secs, headers)
    }

    fn preview(&self, url: &str, hidden: Option<PreviewHidden>, headers: &HeaderMap) -> Response {
        Ui::preview(self, url, hidden, headers)
    }

    fn unlock(&self, action: &str, wrong: bool, headers: &HeaderMap) -> Response {
        Ui::unlock(self, action, wrong, headers)
    }

    fn lead_form(&self, page: FormPage<'_>, headers: &HeaderMap) -> Response {
        Ui::lead_form(self, page, headers)
    }

    fn crawler_preview(
        &self,
        short_url: &str,
        destination: &str,
        preview: &SocialPreview,
        headers: &HeaderMap,
    ) -> Response {
        Ui::crawler_preview(self, short_url, destination, preview, headers)
    }

    fn in_app(&self, short_url: &str, host: &str, app: App, headers: &HeaderMap) -> Response {
        Ui::in_app(self, short_url, host, app, headers)
    }

    fn secure_cookies(&self) -> bool {
        self.secure_cookies
    }
}
