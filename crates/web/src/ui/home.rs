//! `/`: paste a URL, get its short URL with a copy button and its QR code; or paste up to
//! 1,000 URLs, one a line, and get a table and a CSV. Signed-in editors create in their spaces;
//! visitors who are not signed in create only when `auth.anonymous_create` is on.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::{context, Value};

use super::batch::BatchLine;
use super::forms::{self, field, CheckedForm, Fields, FormError, VALIDITY_CHOICES};
use super::render::{message, page, Visitor};
use super::PageState;
use crate::config::Role;
use crate::links::{rfc3339, CreateLink};
use crate::web::access::{authorize_create, check_create_rate};
use crate::web::error::ApiError;

/// Every field of the form (absent ones render empty).
const FIELDS: &[&str] = &[
    "url", "urls", "code", "length", "validity", "until", "space", "title", "tags", "domain",
];

/// Most lines of one "many at once" request (the API's batch limit).
pub const MAX_LINES: usize = crate::links::MAX_BATCH;

/// Whether this visitor may create, and if not, why (a catalogue key).
fn may_create(state: &PageState, visitor: &Visitor) -> Result<(), &'static str> {
    match visitor.role() {
        Some(role) if role >= Role::Editor => Ok(()),
        Some(_) => Err("viewer_cannot_create"),
        None if state.accounts.ring().anonymous_create => Ok(()),
        None => Err("sign_in_to_create"),
    }
}

/// `GET /`.
pub async fn show(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let mode = if query.get("mode").map(String::as_str) == Some("many") {
        "many"
    } else {
        "one"
    };
    render(
        &state,
        &visitor,
        StatusCode::OK,
        mode,
        &Fields::new(),
        Value::from(()),
        &[],
    )
}

/// `POST /`: one URL (`mode=one`) or many (`mode=many`).
pub async fn shorten(
    State(state): State<PageState>,
    visitor: Visitor,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let mode = if field(&fields, "mode") == Some("many") {
        "many"
    } else {
        "one"
    };
    if let Err(key) = may_create(&state, &visitor) {
        let status = if visitor.session.is_some() {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::UNAUTHORIZED
        };
        return message(&state, &visitor, status, &format!("msg.{key}"));
    }
    let known = |k: &str| state.ui.catalogues.words(visitor.lang).contains_key(k);
    // The form again, its values kept, with the error beside its field.
    let fail = |status: StatusCode, error: FormError| {
        render(
            &state,
            &visitor,
            status,
            mode,
            &fields,
            Value::from(()),
            &[error],
        )
    };
    let options = match options(&fields) {
        Ok(o) => o,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let caller = visitor.caller();
    let space = match crate::web::access::create_space(&caller, options.space.as_deref()) {
        Ok(space) => space,
        Err(e) => return fail(e.status, FormError::from_api(&e, known).with_field("space")),
    };
    if let Err(e) = authorize_create(&state, &caller, &space) {
        return fail(e.status, FormError::from_api(&e, known).with_field("space"));
    }
    // Every line of "many at once" counts against the create quota, as batch items do.
    let items = if mode == "many" {
        fields
            .get("urls")
            .map_or(0, |u| u.lines().filter(|l| !l.trim().is_empty()).count())
    } else {
        1
    };
    if let Err(e) = check_create_rate(&state, &caller, visitor.ip, items.max(1)) {
        return fail(e.status, FormError::from_api(&e, known));
    }
    if mode == "many" {
        return shorten_many(&state, &visitor, &fields, options).await;
    }
    let Some(url) = field(&fields, "url") else {
        return fail(
            StatusCode::BAD_REQUEST,
            FormError::new("url", "err.missing_url"),
        );
    };
    let mut req = options.request(url);
    req.code = field(&fields, "code").map(str::to_string);
    req.title = field(&fields, "title").map(str::to_string);
    match state.links.create_async(req).await.map_err(ApiError::from) {
        Ok((link, created)) => {
            if created {
                let who = visitor.caller();
                crate::web::access::audit_created(
                    &state,
                    who.0.as_deref(),
                    &link.space,
                    visitor.ip,
                    1,
                );
            }
            let short_url = state.links.short_url_of(&link);
            let qr = crate::qr::svg(&short_url).unwrap_or_default();
            let result = context! {
                code => link.code.clone(),
                ref => link.key().into_owned(),
                short_url => short_url,
                url => link.url.clone(),
                created => created,
                expires_at => link.expires_at.map(display_time),
                qr_svg => Value::from_safe_string(qr),
            };
            let status = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            render(&state, &visitor, status, mode, &Fields::new(), result, &[])
        }
        Err(e) => fail(e.status, FormError::from_api(&e, known)),
    }
}

/// The options a form shares between one URL and many.
struct Options {
    space: Option<String>,
    domain: Option<String>,
    length: Option<u8>,
    ttl: Option<i64>,
    expires_at: Option<Option<String>>,
    tags: Option<Vec<String>>,
}

impl Options {
    fn request(&self, url: &str) -> CreateLink {
        CreateLink {
            url: url.to_string(),
            length: self.length,
            code: None,
            space: self.space.clone(),
            domain: self.domain.clone(),
            ttl: self.ttl,
            expires_at: self.expires_at.clone(),
            title: None,
            tags: self.tags.clone(),
            ..CreateLink::default()
        }
    }
}

fn options(fields: &Fields) -> Result<Options, FormError> {
    let length = match field(fields, "length") {
        None => None,
        Some(l) => Some(
            l.parse::<u8>()
                .map_err(|_| FormError::new("length", "err.invalid_length"))?,
        ),
    };
    let (ttl, expires_at) = forms::validity(fields)?.to_request();
    Ok(Options {
        space: field(fields, "space").map(str::to_string),
        domain: field(fields, "domain").map(str::to_string),
        length,
        ttl,
        expires_at,
        tags: forms::tags(fields),
    })
}

async fn shorten_many(
    state: &PageState,
    visitor: &Visitor,
    fields: &Fields,
    options: Options,
) -> Response {
    let urls: Vec<(usize, &str)> = fields
        .get("urls")
        .map(String::as_str)
        .unwrap_or("")
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let error = if urls.is_empty() {
        Some("err.missing_urls")
    } else if urls.len() > MAX_LINES {
        Some("err.too_many_lines")
    } else {
        None
    };
    if let Some(key) = error {
        let e = FormError::new("urls", key);
        return render(
            state,
            visitor,
            StatusCode::BAD_REQUEST,
            "many",
            fields,
            Value::from(()),
            &[e],
        );
    }
    let reqs = urls.iter().map(|(_, url)| options.request(url)).collect();
    let outcomes = state.links.create_many(reqs).await;
    let made = outcomes
        .iter()
        .filter(|o| matches!(o, Ok((_, true))))
        .count();
    if let Some(Ok((link, _))) = outcomes.iter().find(|o| o.is_ok()) {
        let who = visitor.caller();
        crate::web::access::audit_created(
            state,
            who.0.as_deref(),
            &link.space,
            visitor.ip,
            made as u64,
        );
    }
    let known = |k: &str| state.ui.catalogues.words(visitor.lang).contains_key(k);
    let lines: Vec<BatchLine> = urls
        .iter()
        .zip(outcomes)
        .map(|((line, url), outcome)| match outcome {
            Ok((link, created)) => BatchLine {
                line: *line,
                url: link.url.clone(),
                short_url: Some(state.links.short_url_of(&link)),
                code: Some(link.code),
                created,
                error: None,
                detail: None,
            },
            Err(e) => {
                let e = ApiError::from(e);
                BatchLine {
                    line: *line,
                    url: url.to_string(),
                    code: None,
                    short_url: None,
                    created: false,
                    error: Some(FormError::from_api(&e, known).key),
                    detail: Some(e.detail),
                }
            }
        })
        .collect();
    let failed = lines.iter().filter(|l| l.error.is_some()).count();
    let created = lines
        .iter()
        .filter(|l| l.error.is_none() && l.created)
        .count();
    let existing = lines.len() - failed - created;
    let id = state.ui.batches.keep(lines.clone(), &visitor.csrf);
    let batch = context! {
        lines => lines,
        created => created,
        existing => existing,
        failed => failed,
        csv => format!("/ui/batch/{id}.csv"),
    };
    let mut keep = Fields::new();
    for name in ["space", "length", "validity", "until", "tags"] {
        if let Some(v) = fields.get(name) {
            keep.insert(name.to_string(), v.clone());
        }
    }
    // Like the API's batch: the request worked, each line says how it went.
    let status = StatusCode::OK;
    let mut ctx = base_context(state, visitor, "many", &keep, Value::from(()), &[]);
    ctx.batch = batch;
    page(
        state,
        visitor,
        status,
        "home.html",
        "home",
        Value::from_serialize(&ctx),
    )
}

/// Renders `/` with a form's values, a result and any errors.
fn render(
    state: &PageState,
    visitor: &Visitor,
    status: StatusCode,
    mode: &str,
    fields: &Fields,
    result: Value,
    errors: &[FormError],
) -> Response {
    let ctx = base_context(state, visitor, mode, fields, result, errors);
    page(
        state,
        visitor,
        status,
        "home.html",
        "home",
        Value::from_serialize(&ctx),
    )
}

/// What `home.html` reads.
#[derive(serde::Serialize)]
struct HomeContext {
    mode: String,
    form: Fields,
    errors: HashMap<String, String>,
    result: Value,
    batch: Value,
    blocked: Option<&'static str>,
    lengths: Vec<u8>,
    default_length: u8,
    spaces: Option<Vec<String>>,
    /// The domains a create may land on, the default first, when there is more than one.
    domains: Vec<String>,
    validity_choices: Vec<Value>,
    more_open: bool,
    max_lines: usize,
}

fn base_context(
    state: &PageState,
    visitor: &Visitor,
    mode: &str,
    fields: &Fields,
    result: Value,
    errors: &[FormError],
) -> HomeContext {
    let lengths: Vec<u8> = state.pools.lengths().collect();
    let spaces = visitor
        .session
        .as_ref()
        .and_then(|s| s.principal.spaces.clone());
    let blocked = may_create(state, visitor).err();
    // Open "more options" when the form came back with one of them filled or wrong.
    let more_open = [
        "code", "length", "validity", "until", "space", "title", "tags",
    ]
    .iter()
    .any(|f| field(fields, f).is_some())
        || errors.iter().any(|e| e.field != "url" && e.field != "form");
    let mut form = fields.clone();
    for name in FIELDS {
        form.entry(name.to_string()).or_default();
    }
    HomeContext {
        mode: mode.to_string(),
        form,
        errors: errors
            .iter()
            .map(|e| (e.field.clone(), e.key.clone()))
            .collect(),
        result,
        batch: Value::from(()),
        blocked,
        lengths,
        default_length: state.config.codes.default_length,
        spaces,
        domains: if state.links.domains().any_other() {
            state
                .links
                .domains()
                .list()
                .iter()
                .map(|d| d.host.clone())
                .collect()
        } else {
            Vec::new()
        },
        validity_choices: VALIDITY_CHOICES
            .iter()
            .map(|(v, k)| context! { value => *v, key => *k })
            .collect(),
        more_open,
        max_lines: MAX_LINES,
    }
}

/// A time as the pages show it: `2026-11-23 04:10 UTC`.
pub fn display_time(ms: crate::model::Millis) -> String {
    let text = rfc3339(ms);
    match (text.get(..10), text.get(11..16)) {
        (Some(date), Some(time)) => format!("{date} {time} UTC"),
        _ => text,
    }
}

impl FormError {
    /// The same error shown beside another field.
    pub fn with_field(mut self, field: &str) -> Self {
        self.field = field.to_string();
        self
    }
}
