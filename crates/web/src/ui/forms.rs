//! What the pages' forms mean: validity choices, tags typed as one line, a link's options with
//! its rules, targets and visitor-form fields as rows of indexed fields, its in-app choice and
//! social preview, and failures shown beside the field they are about. Turns form fields into
//! the same requests the API takes.

use std::collections::HashMap;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;

use serde::Serialize;
use serde_json::Value as Json;
use time::macros::format_description;
use time::{Date, OffsetDateTime, PrimitiveDateTime, Time};

use super::render::{message, Visitor};
use super::PageState;
use crate::links::{retention_text, rfc3339, UpdateLink};
use crate::model::gates::{FieldKind, MAX_FORM_FIELDS};
use crate::model::options::{App, Rotation, MAX_RULES, MAX_TARGETS};
use crate::model::{CapSlot, LinkOptions, Millis};
use crate::web::error::ApiError;

/// A submitted form.
pub type Fields = HashMap<String, String>;

/// A posted form whose token checked out (see [`Visitor::check_form`]). A body that is no
/// form is answered 400, a missing or wrong token 403, before the handler runs.
pub struct CheckedForm(pub Fields);

impl FromRequest<PageState> for CheckedForm {
    type Rejection = Response;

    async fn from_request(request: Request, state: &PageState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let visitor = match Visitor::from_request_parts(&mut parts, state).await {
            Ok(v) => v,
            Err(never) => match never {},
        };
        let request = Request::from_parts(parts, body);
        let Ok(Form(fields)) = Form::<Fields>::from_request(request, state).await else {
            return Err(message(
                state,
                &visitor,
                StatusCode::BAD_REQUEST,
                "msg.bad_form",
            ));
        };
        if !visitor.check_form(fields.get("csrf").map(String::as_str)) {
            return Err(message(
                state,
                &visitor,
                StatusCode::FORBIDDEN,
                "msg.form_expired",
            ));
        }
        Ok(CheckedForm(fields))
    }
}

/// A field's trimmed value, `None` when empty.
pub fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The validity a form chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    /// The tier's default (create) or unchanged (edit).
    Default,
    Permanent,
    /// This many seconds from now.
    Seconds(i64),
    /// Until the end of this UTC date.
    Until(Date),
}

/// The choices the validity menus offer, with their catalogue keys.
pub const VALIDITY_CHOICES: &[(&str, &str)] = &[
    ("", "validity.default"),
    ("1d", "validity.1d"),
    ("7d", "validity.7d"),
    ("30d", "validity.30d"),
    ("1y", "validity.1y"),
    ("permanent", "validity.permanent"),
    ("date", "validity.date"),
];

/// Reads `validity` (and `until` for a date).
pub fn validity(fields: &Fields) -> Result<Validity, FormError> {
    let choice = field(fields, "validity").unwrap_or("");
    Ok(match choice {
        "" | "keep" => {
            // Without script the date input is always visible: a date alone means "until".
            match field(fields, "until") {
                Some(_) => Validity::Until(until(fields)?),
                None => Validity::Default,
            }
        }
        "1d" => Validity::Seconds(86_400),
        "7d" => Validity::Seconds(7 * 86_400),
        "30d" => Validity::Seconds(30 * 86_400),
        "1y" => Validity::Seconds(365 * 86_400),
        "permanent" => Validity::Permanent,
        "date" => Validity::Until(until(fields)?),
        _ => return Err(FormError::new("validity", "err.invalid_validity")),
    })
}

fn until(fields: &Fields) -> Result<Date, FormError> {
    let text = field(fields, "until").ok_or_else(|| FormError::new("until", "err.missing_date"))?;
    Date::parse(text, format_description!("[year]-[month]-[day]"))
        .map_err(|_| FormError::new("until", "err.invalid_date"))
}

impl Validity {
    /// As the API's `(ttl, expires_at)`; a date ends at the last second of that UTC day.
    pub fn to_request(&self) -> (Option<i64>, Option<Option<String>>) {
        match self {
            Validity::Default => (None, None),
            Validity::Permanent => (None, Some(None)),
            Validity::Seconds(s) => (Some(*s), None),
            Validity::Until(date) => (None, Some(Some(end_of_day(*date)))),
        }
    }

    /// As an update's `expires_at` (relative choices count from `now`).
    pub fn to_update(&self, now: Millis) -> Option<Option<String>> {
        match self {
            Validity::Default => None,
            Validity::Permanent => Some(None),
            Validity::Seconds(s) => Some(Some(rfc3339(
                now.saturating_add(u64::try_from(*s).unwrap_or(0).saturating_mul(1000)),
            ))),
            Validity::Until(date) => Some(Some(end_of_day(*date))),
        }
    }
}

fn end_of_day(date: Date) -> String {
    let at = OffsetDateTime::new_utc(date, Time::from_hms(23, 59, 59).unwrap_or(Time::MIDNIGHT));
    rfc3339(
        u64::try_from(at.unix_timestamp())
            .unwrap_or(0)
            .saturating_mul(1000),
    )
}

/// Tags typed as one line, separated by commas.
pub fn tags(fields: &Fields) -> Option<Vec<String>> {
    field(fields, "tags").map(|t| {
        t.split([',', '，'])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// A failure to show beside a field: the field's name and the catalogue key of the message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FormError {
    pub field: String,
    pub key: String,
}

impl FormError {
    pub fn new(field: &str, key: &str) -> Self {
        Self {
            field: field.to_string(),
            key: key.to_string(),
        }
    }

    /// The page's words for an API error: `err.<code>`, beside the field it names.
    pub fn from_api(e: &ApiError, known: impl Fn(&str) -> bool) -> Self {
        let key = format!("err.{}", e.code);
        let key = if known(&key) {
            key
        } else {
            "err.internal".into()
        };
        // The API's fields by the names the forms give them.
        let field = match e
            .field
            .as_deref()
            .map(|f| f.rsplit('.').next().unwrap_or(f))
        {
            Some("expires_at") => "until",
            Some("ttl") => "validity",
            Some(f) => f,
            None => "form",
        };
        Self::new(field, &key)
    }
}

/// The device classes a rule may name, as the options form offers them.
pub const DEVICES: [&str; 4] = ["desktop", "mobile", "tablet", "bot"];
/// The operating systems a rule may name.
pub const SYSTEMS: [&str; 6] = ["ios", "android", "windows", "macos", "linux", "chromeos"];
/// The rotations a link with targets may use.
pub const ROTATIONS: [&str; 3] = ["weighted", "round_robin", "failover"];

/// The kinds of input a visitor form's field may be.
pub const FIELD_KINDS: [&str; 3] = ["tel", "email", "text"];
/// What a link may do in in-app browsers; empty: as the server's `links.in_app` says.
pub const IN_APP_CHOICES: [&str; 3] = ["", "direct", "interstitial"];

/// The in-app browsers a rule may name.
pub fn apps() -> Vec<&'static str> {
    App::ALL.iter().map(|a| a.as_str()).collect()
}

/// The link's options form (`section=options` on `/ui/links/{code}/edit`), as typed: every
/// value a string, so that a page shown again keeps exactly what was entered. Rules, targets
/// and the visitor form's fields are rows of indexed fields (`rule.0.url`, `rule.0.os.ios`,
/// `target.2.weight`, `field.1.label`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OptionsForm {
    /// A new password (never the current one: it is stored as a hash).
    pub password: String,
    pub password_remove: bool,
    pub max_visits: String,
    /// `datetime-local`, UTC.
    pub valid_from: String,
    pub fallback_url: String,
    pub rotation: String,
    pub rules: Vec<RuleForm>,
    pub targets: Vec<TargetForm>,
    /// `direct`, `interstitial`, or empty for the server's default.
    pub in_app: String,
    /// The fields of the form visitors fill before the destination.
    pub fields: Vec<FieldForm>,
    pub consent: String,
    /// As typed (`180d`); empty for the default.
    pub retention: String,
    pub og_title: String,
    pub og_description: String,
    pub og_image: String,
}

/// One field of the visitor form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldForm {
    pub name: String,
    pub label: String,
    /// `tel`, `email` or `text`.
    pub kind: String,
    pub required: bool,
}

impl Default for FieldForm {
    fn default() -> Self {
        Self {
            name: String::new(),
            label: String::new(),
            kind: FieldKind::Text.as_str().into(),
            required: false,
        }
    }
}

impl FieldForm {
    /// Without a name and a label a row asks for nothing (its type and box alone do not count).
    fn is_blank(&self) -> bool {
        self.name.is_empty() && self.label.is_empty()
    }
}

/// One rule of the form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuleForm {
    pub url: String,
    pub device: Vec<String>,
    pub os: Vec<String>,
    pub app: Vec<String>,
    /// Comma-separated lists.
    pub language: String,
    pub country: String,
    pub ip: String,
    /// `name=value` pairs, comma-separated; `*` is any value.
    pub query: String,
    /// `datetime-local`, UTC.
    pub after: String,
    pub before: String,
}

/// One rotation target of the form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TargetForm {
    pub url: String,
    pub weight: String,
    pub max_visits: String,
    /// What is left of the target's cap (shown for the stored targets only).
    pub remaining: Option<u64>,
}

/// Which list of rows a button acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    Rule,
    Target,
    /// A field of the visitor form.
    Field,
}

/// What the options form's submit button asked for (`action`): save, or change the rows and
/// show the form again without saving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionsAction {
    Save,
    Add(Rows),
    Remove(Rows, usize),
    Up(Rows, usize),
    Down(Rows, usize),
    /// An action this form does not know: shown again, unchanged.
    Unknown,
}

/// Reads `action`: `save` (or none: the Enter key), `add_rule`, `remove_rule.2`,
/// `up_target.0`, `down_field.1`…
pub fn options_action(fields: &Fields) -> OptionsAction {
    let Some(action) = field(fields, "action") else {
        return OptionsAction::Save;
    };
    if action == "save" {
        return OptionsAction::Save;
    }
    let (verb, index) = match action.split_once('.') {
        Some((verb, n)) => match n.parse::<usize>() {
            Ok(n) => (verb, Some(n)),
            Err(_) => return OptionsAction::Unknown,
        },
        None => (action, None),
    };
    let (verb, rows) = match verb.rsplit_once('_') {
        Some((verb, "rule")) => (verb, Rows::Rule),
        Some((verb, "target")) => (verb, Rows::Target),
        Some((verb, "field")) => (verb, Rows::Field),
        _ => return OptionsAction::Unknown,
    };
    match (verb, index) {
        ("add", None) => OptionsAction::Add(rows),
        ("remove", Some(n)) => OptionsAction::Remove(rows, n),
        ("up", Some(n)) => OptionsAction::Up(rows, n),
        ("down", Some(n)) => OptionsAction::Down(rows, n),
        _ => OptionsAction::Unknown,
    }
}

/// The options as an update sends them, with which form row each sent rule, target and field
/// came from (blank rows are left out), to put the service's errors beside the right inputs.
#[derive(Debug)]
pub struct OptionsRequest {
    pub update: UpdateLink,
    pub rule_rows: Vec<usize>,
    pub target_rows: Vec<usize>,
    pub field_rows: Vec<usize>,
}

impl OptionsForm {
    /// The form filled with a link's options; `counted` is what its caps have used.
    pub fn from_options(options: Option<&LinkOptions>, counted: &[(CapSlot, u64)]) -> Self {
        let Some(o) = options else {
            return Self {
                rotation: Rotation::default().as_str().into(),
                ..Self::default()
            };
        };
        let form = o.form.as_ref();
        let preview = o.preview.clone().unwrap_or_default();
        let rules = o
            .rules
            .iter()
            .map(|rule| {
                let c = &rule.when;
                RuleForm {
                    url: rule.url.clone(),
                    device: c.device.iter().map(name_of).collect(),
                    os: c.os.iter().map(name_of).collect(),
                    app: c.app.iter().map(|a| a.as_str().to_string()).collect(),
                    language: c.language.join(", "),
                    country: c.country.join(", "),
                    ip: c
                        .ip
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    query: c
                        .query
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    after: c.after.map(datetime_local).unwrap_or_default(),
                    before: c.before.map(datetime_local).unwrap_or_default(),
                }
            })
            .collect();
        let targets = o
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let slot = CapSlot::Target(u16::try_from(i).unwrap_or(u16::MAX));
                let used = counted
                    .iter()
                    .find(|(s, _)| *s == slot)
                    .map_or(0, |(_, n)| *n);
                TargetForm {
                    url: t.url.clone(),
                    weight: t.weight.to_string(),
                    max_visits: t.max_visits.map(|m| m.to_string()).unwrap_or_default(),
                    remaining: t.max_visits.map(|cap| cap.saturating_sub(used)),
                }
            })
            .collect();
        Self {
            password: String::new(),
            password_remove: false,
            max_visits: o.max_visits.map(|m| m.to_string()).unwrap_or_default(),
            valid_from: o.valid_from.map(datetime_local).unwrap_or_default(),
            fallback_url: o.fallback_url.clone().unwrap_or_default(),
            rotation: o.rotation.as_str().into(),
            rules,
            targets,
            in_app: o.in_app.map(|a| a.as_str().to_string()).unwrap_or_default(),
            fields: form
                .map(|f| {
                    f.fields
                        .iter()
                        .map(|f| FieldForm {
                            name: f.name.clone(),
                            label: f.label.clone(),
                            kind: f.kind.as_str().into(),
                            required: f.required,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            consent: form.and_then(|f| f.consent.clone()).unwrap_or_default(),
            retention: form
                .map(|f| retention_text(f.retention))
                .unwrap_or_default(),
            og_title: preview.title.unwrap_or_default(),
            og_description: preview.description.unwrap_or_default(),
            og_image: preview.image.unwrap_or_default(),
        }
    }

    /// The form as posted.
    pub fn from_fields(fields: &Fields) -> Self {
        let text = |name: &str| field(fields, name).unwrap_or_default().to_string();
        let checked = |prefix: &str, values: &[&str]| -> Vec<String> {
            values
                .iter()
                .filter(|v| fields.contains_key(&format!("{prefix}.{v}")))
                .map(|v| v.to_string())
                .collect()
        };
        let rules = row_numbers(fields, "rule", MAX_RULES)
            .into_iter()
            .map(|n| {
                let at = |part: &str| format!("rule.{n}.{part}");
                RuleForm {
                    url: text(&at("url")),
                    device: checked(&at("device"), &DEVICES),
                    os: checked(&at("os"), &SYSTEMS),
                    app: checked(&at("app"), &apps()),
                    language: text(&at("language")),
                    country: text(&at("country")),
                    ip: text(&at("ip")),
                    query: text(&at("query")),
                    after: text(&at("after")),
                    before: text(&at("before")),
                }
            })
            .collect();
        let targets = row_numbers(fields, "target", MAX_TARGETS)
            .into_iter()
            .map(|n| TargetForm {
                url: text(&format!("target.{n}.url")),
                weight: text(&format!("target.{n}.weight")),
                max_visits: text(&format!("target.{n}.max_visits")),
                remaining: None,
            })
            .collect();
        let fields_rows = row_numbers(fields, "field", MAX_FORM_FIELDS)
            .into_iter()
            .map(|n| {
                let at = |part: &str| format!("field.{n}.{part}");
                let kind = text(&at("type"));
                FieldForm {
                    name: text(&at("name")),
                    label: text(&at("label")),
                    // An unknown type is sent as typed: the service names it.
                    kind: if kind.is_empty() {
                        FieldKind::Text.as_str().into()
                    } else {
                        kind
                    },
                    required: field(fields, &at("required")).is_some(),
                }
            })
            .collect();
        let in_app = text("in_app");
        let rotation = text("rotation");
        Self {
            // A password is taken as typed: spaces may be part of it.
            password: fields.get("password").cloned().unwrap_or_default(),
            password_remove: field(fields, "password_remove").is_some(),
            max_visits: text("max_visits"),
            valid_from: text("valid_from"),
            fallback_url: text("fallback_url"),
            rotation: if rotation.is_empty() {
                Rotation::default().as_str().into()
            } else {
                rotation
            },
            rules,
            targets,
            in_app,
            fields: fields_rows,
            consent: text("form_consent"),
            retention: text("form_retention"),
            og_title: text("og_title"),
            og_description: text("og_description"),
            og_image: text("og_image"),
        }
    }

    /// Adds, removes or moves a row (other actions change nothing).
    pub fn apply(&mut self, action: OptionsAction) {
        fn change<T: Default>(list: &mut Vec<T>, action: OptionsAction, max: usize, new: T) {
            let len = list.len();
            match action {
                OptionsAction::Add(_) if len < max => list.push(new),
                OptionsAction::Remove(_, i) if i < len => {
                    list.remove(i);
                }
                OptionsAction::Up(_, i) if i > 0 && i < len => list.swap(i - 1, i),
                OptionsAction::Down(_, i) if i + 1 < len => list.swap(i, i + 1),
                _ => {}
            }
        }
        let rows = match action {
            OptionsAction::Add(r)
            | OptionsAction::Remove(r, _)
            | OptionsAction::Up(r, _)
            | OptionsAction::Down(r, _) => r,
            OptionsAction::Save | OptionsAction::Unknown => return,
        };
        match rows {
            Rows::Rule => change(&mut self.rules, action, MAX_RULES, RuleForm::default()),
            Rows::Target => change(
                &mut self.targets,
                action,
                MAX_TARGETS,
                TargetForm {
                    weight: "1".into(),
                    ..TargetForm::default()
                },
            ),
            Rows::Field => change(
                &mut self.fields,
                action,
                MAX_FORM_FIELDS,
                FieldForm::default(),
            ),
        }
    }

    /// The update the form asks for, in the API's shape: every option is set (an empty
    /// field removes it) except the password, which an empty field keeps. The visitor form is
    /// removed when no field row and no consent text is left. What only the form can tell (a
    /// time that is no date, a rule without a condition or an address) fails here, every such
    /// field at once; the rest is the service's to check.
    pub fn to_request(&self) -> Result<OptionsRequest, Vec<FormError>> {
        let mut errors = Vec::new();
        let password = if self.password_remove {
            Some(None)
        } else if self.password.is_empty() {
            None
        } else {
            Some(Some(self.password.clone()))
        };
        let time = |text: &str, at: &str, errors: &mut Vec<FormError>| {
            parse_datetime_local(text).unwrap_or_else(|()| {
                errors.push(FormError::new(at, "err.invalid_datetime"));
                None
            })
        };
        let valid_from = time(&self.valid_from, "valid_from", &mut errors);
        let mut rules = Vec::new();
        let mut rule_rows = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.is_blank() {
                continue;
            }
            let at = |part: &str| format!("rule.{i}.{part}");
            let mut when = serde_json::Map::new();
            for (name, values) in [
                ("device", &rule.device),
                ("os", &rule.os),
                ("app", &rule.app),
            ] {
                if !values.is_empty() {
                    when.insert(name.into(), values.clone().into());
                }
            }
            for (name, text) in [
                ("language", &rule.language),
                ("country", &rule.country),
                ("ip", &rule.ip),
            ] {
                let list = comma_list(text);
                if !list.is_empty() {
                    when.insert(name.into(), list.into());
                }
            }
            match query_pairs(&rule.query) {
                Ok(pairs) if pairs.is_empty() => {}
                Ok(pairs) => {
                    when.insert("query".into(), Json::Object(pairs));
                }
                Err(()) => errors.push(FormError::new(&at("query"), "err.rule_query")),
            }
            for (name, text) in [("after", &rule.after), ("before", &rule.before)] {
                if let Some(t) = time(text, &at(name), &mut errors) {
                    when.insert(name.into(), t.into());
                }
            }
            let conditions = RuleForm {
                url: String::new(),
                ..rule.clone()
            };
            if conditions.is_blank() {
                errors.push(FormError::new(&at("if"), "err.rule_condition"));
            }
            if rule.url.is_empty() {
                errors.push(FormError::new(&at("url"), "err.missing_destination"));
            }
            rules.push(serde_json::json!({ "if": when, "url": rule.url }));
            rule_rows.push(i);
        }
        let mut targets = Vec::new();
        let mut target_rows = Vec::new();
        for (i, target) in self.targets.iter().enumerate() {
            if target.url.is_empty() && target.max_visits.is_empty() {
                continue;
            }
            if target.url.is_empty() {
                errors.push(FormError::new(
                    &format!("target.{i}.url"),
                    "err.missing_destination",
                ));
            }
            let mut t = serde_json::Map::new();
            t.insert("url".into(), target.url.clone().into());
            if let Some(weight) = number(&target.weight) {
                t.insert("weight".into(), weight);
            }
            if let Some(cap) = number(&target.max_visits) {
                t.insert("max_visits".into(), cap);
            }
            targets.push(Json::Object(t));
            target_rows.push(i);
        }
        let mut form_fields = Vec::new();
        let mut field_rows = Vec::new();
        for (i, f) in self.fields.iter().enumerate() {
            if f.is_blank() {
                continue;
            }
            form_fields.push(serde_json::json!({
                "name": f.name,
                "label": f.label,
                "type": f.kind,
                "required": f.required,
            }));
            field_rows.push(i);
        }
        let form = if form_fields.is_empty() && self.consent.is_empty() {
            None
        } else {
            let mut form = serde_json::Map::new();
            form.insert("fields".into(), Json::Array(form_fields));
            if !self.consent.is_empty() {
                form.insert("consent".into(), self.consent.clone().into());
            }
            if !self.retention.is_empty() {
                form.insert("retention".into(), self.retention.clone().into());
            }
            Some(Json::Object(form))
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        let optional = |text: &str| (!text.is_empty()).then(|| text.to_string());
        Ok(OptionsRequest {
            update: UpdateLink {
                password,
                max_visits: Some(number(&self.max_visits)),
                valid_from: Some(valid_from),
                fallback_url: Some(optional(&self.fallback_url)),
                rules: Some(Some(Json::Array(rules))),
                targets: Some(Some(Json::Array(targets))),
                rotation: Some(Some(self.rotation.clone())),
                in_app: Some(optional(&self.in_app)),
                form: Some(form),
                og_title: Some(optional(&self.og_title)),
                og_description: Some(optional(&self.og_description)),
                og_image: Some(optional(&self.og_image)),
                ..UpdateLink::default()
            },
            rule_rows,
            target_rows,
            field_rows,
        })
    }
}

impl RuleForm {
    fn is_blank(&self) -> bool {
        self == &RuleForm::default()
    }
}

/// The row numbers present for `kind` (`rule.3.url` → 3), in order, at most `max` of them.
fn row_numbers(fields: &Fields, kind: &str, max: usize) -> Vec<usize> {
    let prefix = format!("{kind}.");
    let mut numbers: Vec<usize> = fields
        .keys()
        .filter_map(|k| k.strip_prefix(&prefix)?.split('.').next()?.parse().ok())
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers.truncate(max);
    numbers
}

/// Values typed as one line, separated by commas (either width) or spaces.
fn comma_list(text: &str) -> Vec<String> {
    text.split([',', '，', ' '])
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// `name=value` pairs separated by commas; a name alone means any value (`*`).
fn query_pairs(text: &str) -> Result<serde_json::Map<String, Json>, ()> {
    let mut out = serde_json::Map::new();
    for pair in text
        .split([',', '，'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, "*"));
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || value.is_empty() {
            return Err(());
        }
        out.insert(name.to_string(), value.into());
    }
    Ok(out)
}

/// A whole number typed in a field: a JSON number when it is one, else the text as typed, so
/// that the service refuses it naming its field. `None` when empty.
fn number(text: &str) -> Option<Json> {
    if text.is_empty() {
        return None;
    }
    Some(match text.parse::<u64>() {
        Ok(n) => n.into(),
        Err(_) => text.into(),
    })
}

/// A `datetime-local` value (`2030-01-02T10:30`, seconds optional), read as UTC, as RFC 3339.
/// `Ok(None)` when empty.
fn parse_datetime_local(text: &str) -> Result<Option<String>, ()> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let text = text.replacen(' ', "T", 1);
    let with_seconds = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    let without = format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let at = PrimitiveDateTime::parse(&text, with_seconds)
        .or_else(|_| PrimitiveDateTime::parse(&text, without))
        .map_err(|_| ())?
        .assume_utc();
    let secs = u64::try_from(at.unix_timestamp()).map_err(|_| ())?;
    Ok(Some(rfc3339(secs.saturating_mul(1000))))
}

/// A time as a `datetime-local` value (UTC): minutes, and seconds when there are some.
pub fn datetime_local(ms: Millis) -> String {
    let text = rfc3339(ms - ms % 1000);
    let seconds = text.get(17..19).unwrap_or("00");
    let end = if seconds == "00" { 16 } else { 19 };
    text.get(..end).unwrap_or_default().to_string()
}

/// A condition value's name, as serde writes it (`desktop`, `ios`).
fn name_of<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Where a service error about the options belongs on the form, and its words: `rules[2].if.os`
/// beside `rule.<row>.os`, `targets[1].weight` beside `target.<row>.weight` (rows as the form
/// numbers them), anything else beside the option it names or at the top of the form.
pub fn options_error(
    e: &ApiError,
    request: &OptionsRequest,
    known: impl Fn(&str) -> bool,
) -> FormError {
    let code_key = |fallback: &str| {
        let key = format!("err.{}", e.code);
        if known(&key) {
            key
        } else {
            fallback.to_string()
        }
    };
    let url_key = || match e.code {
        "blocked_url" => "err.blocked_url".to_string(),
        _ => "err.invalid_destination".to_string(),
    };
    let path = e.field.as_deref().unwrap_or("");
    let row = |rest: &str, rows: &[usize]| -> Option<(usize, String)> {
        let (n, tail) = rest.split_once(']')?;
        let row = *rows.get(n.parse::<usize>().ok()?)?;
        Some((row, tail.trim_start_matches('.').to_string()))
    };
    if let Some((row, tail)) = path
        .strip_prefix("rules[")
        .and_then(|rest| row(rest, &request.rule_rows))
    {
        let at = |part: &str| format!("rule.{row}.{part}");
        let condition = tail
            .strip_prefix("if.")
            .map(|c| c.split('.').next().unwrap_or(c));
        return match (tail.as_str(), condition) {
            ("url", _) => FormError::new(&at("url"), &url_key()),
            (_, Some(c @ ("device" | "os" | "app"))) => FormError::new(&at(c), "err.rule_choice"),
            (_, Some(c @ ("language" | "country" | "ip" | "query"))) => {
                FormError::new(&at(c), &format!("err.rule_{c}"))
            }
            (_, Some(c @ ("after" | "before"))) => FormError::new(&at(c), "err.invalid_datetime"),
            ("if", _) => FormError::new(&at("if"), "err.rule_condition"),
            _ => FormError::new(&at("if"), "err.invalid_rules"),
        };
    }
    if let Some((row, tail)) = path
        .strip_prefix("targets[")
        .and_then(|rest| row(rest, &request.target_rows))
    {
        let at = |part: &str| format!("target.{row}.{part}");
        return match tail.as_str() {
            "url" => FormError::new(&at("url"), &url_key()),
            "weight" => FormError::new(&at("weight"), "err.target_weight"),
            "max_visits" => FormError::new(&at("max_visits"), "err.invalid_max_visits"),
            _ => FormError::new(&at("url"), "err.invalid_targets"),
        };
    }
    if let Some((row, tail)) = path
        .strip_prefix("form.fields[")
        .and_then(|rest| row(rest, &request.field_rows))
    {
        let at = |part: &str| format!("field.{row}.{part}");
        return match tail.as_str() {
            "label" => FormError::new(&at("label"), "err.form_label"),
            "type" => FormError::new(&at("type"), "err.form_type"),
            _ => FormError::new(&at("name"), "err.form_name"),
        };
    }
    match path {
        "fallback_url" => FormError::new(path, &url_key()),
        "og_image" if e.code == "blocked_url" => FormError::new(path, &url_key()),
        "og_image" => FormError::new(path, "err.og_image"),
        "og_title" | "og_description" => FormError::new(path, &format!("err.{path}")),
        "in_app" => FormError::new(path, "err.invalid_in_app"),
        "form.consent" => FormError::new("form_consent", "err.form_consent"),
        "form.retention" => FormError::new("form_retention", "err.form_retention"),
        p if p == "form" || p.starts_with("form.") => {
            FormError::new("form_fields", "err.form_fields")
        }
        "password" | "max_visits" | "valid_from" | "rotation" | "rules" | "targets" => {
            FormError::new(path, &code_key("err.internal"))
        }
        _ => FormError::new("options", &code_key("err.internal")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn validity_choices() {
        assert_eq!(validity(&fields(&[])).unwrap(), Validity::Default);
        assert_eq!(
            validity(&fields(&[("validity", "7d")])).unwrap(),
            Validity::Seconds(604_800)
        );
        let v = validity(&fields(&[("validity", "date"), ("until", "2030-01-02")])).unwrap();
        assert_eq!(v.to_request().1, Some(Some("2030-01-02T23:59:59Z".into())));
        assert!(validity(&fields(&[("validity", "date")])).is_err());
        assert!(validity(&fields(&[("validity", "forever")])).is_err());
    }

    #[test]
    fn tags_split_on_commas() {
        assert_eq!(
            tags(&fields(&[("tags", " a, b ,,c，d")])),
            Some(vec!["a".into(), "b".into(), "c".into(), "d".into()])
        );
    }

    #[test]
    fn the_forms_condition_values_are_the_models() {
        use crate::model::options::{DeviceClass, Os};
        for d in DEVICES {
            assert!(
                serde_json::from_value::<DeviceClass>(d.into()).is_ok(),
                "{d}"
            );
        }
        for o in SYSTEMS {
            assert!(serde_json::from_value::<Os>(o.into()).is_ok(), "{o}");
        }
        for r in ROTATIONS {
            assert_eq!(Rotation::parse(r).map(Rotation::as_str), Some(r));
        }
    }

    #[test]
    fn datetime_local_values_are_utc() {
        assert_eq!(
            parse_datetime_local("2030-01-02T03:04"),
            Ok(Some("2030-01-02T03:04:00Z".into()))
        );
        assert_eq!(
            parse_datetime_local("2030-01-02 03:04:05"),
            Ok(Some("2030-01-02T03:04:05Z".into()))
        );
        assert_eq!(parse_datetime_local(" "), Ok(None));
        assert!(parse_datetime_local("tomorrow").is_err());
        assert!(parse_datetime_local("1969-12-31T23:59").is_err());
        let ms = 1_893_553_445_000; // 2030-01-02T03:04:05Z
        assert_eq!(datetime_local(ms), "2030-01-02T03:04:05");
        assert_eq!(datetime_local(ms - 5_000), "2030-01-02T03:04");
    }

    #[test]
    fn row_buttons_say_what_to_change() {
        let action = |a: &str| options_action(&fields(&[("action", a)]));
        assert_eq!(options_action(&fields(&[])), OptionsAction::Save);
        assert_eq!(action("save"), OptionsAction::Save);
        assert_eq!(action("add_rule"), OptionsAction::Add(Rows::Rule));
        assert_eq!(
            action("remove_target.3"),
            OptionsAction::Remove(Rows::Target, 3)
        );
        assert_eq!(action("up_rule.1"), OptionsAction::Up(Rows::Rule, 1));
        assert_eq!(
            action("down_target.0"),
            OptionsAction::Down(Rows::Target, 0)
        );
        for odd in [
            "up_rule",
            "add_rule.1",
            "drop_rule.1",
            "up_link.1",
            "up_rule.x",
        ] {
            assert_eq!(action(odd), OptionsAction::Unknown, "{odd}");
        }
        let mut form = OptionsForm::from_fields(&fields(&[
            ("rule.0.url", "https://a.example/"),
            ("rule.7.url", "https://b.example/"),
            ("rule.7.os.ios", "1"),
            ("rule.7.os.beos", "1"),
        ]));
        assert_eq!(form.rules.len(), 2, "rows in order, whatever their numbers");
        assert_eq!(form.rules[1].os, ["ios"], "only the values a rule may name");
        form.apply(OptionsAction::Down(Rows::Rule, 0));
        assert_eq!(form.rules[0].url, "https://b.example/");
        form.apply(OptionsAction::Down(Rows::Rule, 1));
        assert_eq!(
            form.rules[1].url, "https://a.example/",
            "the last stays last"
        );
        form.apply(OptionsAction::Add(Rows::Target));
        assert_eq!(form.targets[0].weight, "1");
        form.apply(OptionsAction::Remove(Rows::Rule, 5));
        assert_eq!(form.rules.len(), 2);
    }

    #[test]
    fn a_saved_form_is_the_apis_request() {
        let form = OptionsForm::from_fields(&fields(&[
            ("max_visits", "12"),
            ("rule.0.os.ios", "1"),
            ("rule.0.country", "de，fr"),
            ("rule.0.url", "https://ios.example/"),
            ("rule.1.url", ""),
            ("target.0.url", "https://a.example/"),
            ("target.0.weight", "heavy"),
            ("target.1.url", ""),
            ("target.1.weight", "1"),
            ("target.2.url", "https://c.example/"),
        ]));
        let request = form.to_request().expect("a request");
        let update = &request.update;
        assert_eq!(
            update.password, None,
            "an empty password keeps the current one"
        );
        assert_eq!(update.max_visits, Some(Some(12.into())));
        assert_eq!(update.valid_from, Some(None));
        assert_eq!(
            update.rules,
            Some(Some(serde_json::json!([
                { "if": { "os": ["ios"], "country": ["de", "fr"] }, "url": "https://ios.example/" }
            ])))
        );
        assert_eq!(
            update.targets,
            Some(Some(serde_json::json!([
                { "url": "https://a.example/", "weight": "heavy" },
                { "url": "https://c.example/" },
            ])))
        );
        assert_eq!(
            (request.rule_rows, request.target_rows),
            (vec![0], vec![0, 2])
        );
        let e = ApiError::bad_request("invalid_targets", "targets[1].weight", "x");
        let request = form.to_request().expect("a request");
        assert_eq!(
            options_error(&e, &request, |_| true),
            FormError::new("target.2.weight", "err.target_weight")
        );
        let e = ApiError::bad_request("invalid_rules", "rules[0].if.query.a", "x");
        assert_eq!(
            options_error(&e, &request, |_| true),
            FormError::new("rule.0.query", "err.rule_query")
        );
        // Nothing of the pages before the destination: each is removed.
        assert_eq!(update.form, Some(None));
        assert_eq!(update.in_app, Some(None));
        assert_eq!(update.og_image, Some(None));
    }

    #[test]
    fn a_visitor_form_is_sent_as_the_api_takes_it() {
        let form = OptionsForm::from_fields(&fields(&[
            ("field.0.label", "Phone"),
            ("field.0.name", "phone"),
            ("field.0.type", "tel"),
            ("field.0.required", "1"),
            ("field.1.label", ""),
            ("field.1.name", ""),
            ("field.1.type", "email"),
            ("field.1.required", "1"),
            ("field.2.label", "Company"),
            ("field.2.name", "Company"),
            ("form_consent", " I agree. "),
            ("form_retention", "90d"),
            ("in_app", "interstitial"),
            ("og_title", "Hello"),
        ]));
        assert_eq!(form.fields.len(), 3);
        assert_eq!(form.fields[2].kind, "text", "a missing type is text");
        let request = form.to_request().expect("a request");
        assert_eq!(
            request.update.form,
            Some(Some(serde_json::json!({
                "fields": [
                    { "name": "phone", "label": "Phone", "type": "tel", "required": true },
                    { "name": "Company", "label": "Company", "type": "text", "required": false },
                ],
                "consent": "I agree.",
                "retention": "90d",
            })))
        );
        assert_eq!(request.field_rows, [0, 2], "the blank row is left out");
        assert_eq!(request.update.in_app, Some(Some("interstitial".into())));
        assert_eq!(request.update.og_title, Some(Some("Hello".into())));
        assert_eq!(request.update.og_description, Some(None));
        // The service's refusal of the second sent field is beside the third row.
        let e = ApiError::bad_request("invalid_form", "form.fields[1].name", "x");
        assert_eq!(
            options_error(&e, &request, |_| true),
            FormError::new("field.2.name", "err.form_name")
        );
        let e = ApiError::bad_request("invalid_form", "form.retention", "x");
        assert_eq!(
            options_error(&e, &request, |_| true),
            FormError::new("form_retention", "err.form_retention")
        );
        let e = ApiError::bad_request("invalid_preview", "og_image", "x");
        assert_eq!(
            options_error(&e, &request, |_| true),
            FormError::new("og_image", "err.og_image")
        );
        // Consent alone keeps a form (the service says it needs a field); nothing removes it.
        let consent_only = OptionsForm {
            consent: "Yes".into(),
            ..OptionsForm::default()
        };
        let update = consent_only.to_request().expect("a request").update;
        assert_eq!(
            update.form,
            Some(Some(serde_json::json!({ "fields": [], "consent": "Yes" })))
        );
        let mut rows = OptionsForm::default();
        rows.apply(options_action(&fields(&[("action", "add_field")])));
        assert_eq!(rows.fields, [FieldForm::default()]);
        assert_eq!(
            rows.to_request().expect("a request").update.form,
            Some(None)
        );
    }
}
