//! The answers of `/{code}` that stop before the destination, once [`crate::model::gate`]
//! has said which one stands: the form before the visit (its page, its submission, the pass
//! cookie that lets the same browser through for 30 days), the page for in-app browsers and
//! the `og:` page of link-preview crawlers. The order itself is decided in the model, once;
//! the redirect path ([`super::redirect`]) asks it and comes here, and what both answer with
//! is [`super::asked`]: this file never calls back into the redirect.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::asked::Asked;
use crate::leads::{LeadError, Leads};
use crate::limits::Limit;
use crate::links::LinkState;
use crate::model::gates::{FieldProblem, CONSENT_FIELD};
use crate::model::options::App;
use crate::model::{LeadForm, Route};
use crate::web::error::ApiError;
use crate::web::pages::FormPage;
use crate::web::state::AppState;

/// A visitor's form fields as posted (`application/x-www-form-urlencoded`).
pub type Posted = Vec<(String, String)>;

/// What was posted for a name.
pub fn posted<'a>(body: &'a Posted, name: &str) -> Option<&'a str> {
    body.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Whether a post is a submission of the link's form (the page's hidden `form` input, or any
/// of the form's fields: a client may post the fields alone), not only a password.
pub fn is_submission(form: &LeadForm, body: &Posted) -> bool {
    posted(body, "form").is_some() || form.fields.iter().any(|f| posted(body, &f.name).is_some())
}

/// Whether this browser has filled the link's form within 30 days (its pass cookie).
pub fn has_pass(state: &AppState, link_id: u64, headers: &HeaderMap) -> bool {
    crate::web::cookies::cookie(headers, &Leads::pass_name(link_id))
        .is_some_and(|value| state.leads.passes(link_id, value))
}

/// The form, to a `GET`: the page for a browser, 401 `form_required` for a JSON client.
pub fn form_page(
    asked: &Asked<'_>,
    code: &str,
    link: &LinkState,
    password: Option<&str>,
) -> Response {
    let Some(form) = &link.options.form else {
        return ApiError::internal("a form gate without a form").into_response();
    };
    if asked.wants_json() {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "form_required",
            format!("the link `{code}` asks visitors to fill a form first: open it in a browser"),
        )
        .into_response();
    }
    let none = |_: &str| None;
    asked.state.pages.lead_form(
        FormPage {
            action: &format!("/{code}"),
            form,
            value: &none,
            consented: false,
            problems: &[],
            password,
        },
        asked.headers,
    )
}

/// A submission of the link's form: the lead stored and the pass cookie's `Set-Cookie`, or
/// the answer that stops here (the form again with its problems, 400; 429 past
/// `form_per_ip`; a storage error).
pub async fn submit(
    asked: &Asked<'_>,
    code: &str,
    link: &LinkState,
    body: &Posted,
    password: Option<&str>,
) -> Result<HeaderValue, Response> {
    let state = asked.state;
    let Some(form) = &link.options.form else {
        return Err(ApiError::internal("a form submission without a form").into_response());
    };
    if let Err(e) = state.limits.check_ip(Limit::FormPerIp, asked.ip(), 1) {
        return Err(asked.rate_limited(e));
    }
    let consented = posted(body, CONSENT_FIELD).is_some_and(|v| !v.is_empty());
    let (leads, form_owned, body_owned, link_id) =
        (state.leads.clone(), form.clone(), body.clone(), link.id);
    let stored = tokio::task::spawn_blocking(move || {
        leads.submit(
            link_id,
            &form_owned,
            |name| posted(&body_owned, name),
            consented,
        )
    })
    .await
    .map_err(|e| ApiError::internal(e).into_response())?;
    match stored {
        Ok(_) => {
            let cookie = format!(
                "{}={}; Path=/{code}; Max-Age={}; HttpOnly; SameSite=Lax{}",
                Leads::pass_name(link.id),
                state.leads.pass(link.id),
                crate::model::gates::FORM_PASS_MS / 1000,
                if state.pages.secure_cookies() {
                    "; Secure"
                } else {
                    ""
                },
            );
            HeaderValue::from_str(&cookie).map_err(|e| ApiError::internal(e).into_response())
        }
        Err(LeadError::Invalid(problems)) => {
            Err(refused(asked, code, form, body, &problems, password))
        }
        Err(LeadError::Store(e)) => Err(ApiError::from(e).into_response()),
    }
}

/// The form again after a refused submission: 400, the values kept, each problem beside its
/// field (problem+json naming the first field for a JSON client).
fn refused(
    asked: &Asked<'_>,
    code: &str,
    form: &LeadForm,
    body: &Posted,
    problems: &[(String, FieldProblem)],
    password: Option<&str>,
) -> Response {
    if asked.wants_json() {
        let (field, problem) = problems
            .first()
            .map_or(("form", "required"), |(f, p)| (f.as_str(), p.key()));
        return ApiError::bad_request("invalid_form_value", field, format!("`{field}`: {problem}"))
            .into_response();
    }
    let value = |name: &str| posted(body, name);
    asked.state.pages.lead_form(
        FormPage {
            action: &format!("/{code}"),
            form,
            value: &value,
            consented: posted(body, CONSENT_FIELD).is_some_and(|v| !v.is_empty()),
            problems,
            password,
        },
        asked.headers,
    )
}

/// The page for an in-app browser; the visit is recorded (its route `in_app`; its user agent
/// says the app).
pub fn in_app_page(asked: &Asked<'_>, link_id: u64, code: &str, url: &str, app: App) -> Response {
    asked.record(link_id, code, Some(Route::InAppPage));
    let host = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let state = asked.state;
    // The short URL on the domain the visitor came on.
    let domain = state
        .links
        .domains()
        .route(super::asked::host_of(asked.headers));
    let short_url = state
        .links
        .domains()
        .short_url(&state.config.server.base_url, domain, code);
    state.pages.in_app(&short_url, &host, app, asked.headers)
}

/// The `og:` page for a link-preview crawler; the visit is recorded (as a bot, by its agent).
pub fn crawler_page(asked: &Asked<'_>, link: &LinkState) -> Response {
    let Some(preview) = &link.options.preview else {
        return ApiError::internal("a crawler preview without a preview").into_response();
    };
    // A link's state holds its key (`code@id` on a domain other than the default).
    let (code, domain) = crate::model::split_key(&link.code);
    asked.record(link.id, code, Some(Route::CrawlerPreview));
    let state = asked.state;
    state.pages.crawler_preview(
        &state
            .links
            .domains()
            .short_url(&state.config.server.base_url, domain, code),
        &link.url,
        preview,
        asked.headers,
    )
}
