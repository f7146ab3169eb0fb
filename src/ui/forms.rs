//! What the pages' forms mean: validity choices, tags typed as one line, and failures shown
//! beside the field they are about. Turns form fields into the same requests the API takes.

use std::collections::HashMap;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;

use time::macros::format_description;
use time::{Date, OffsetDateTime, Time};

use super::render::{message, Visitor};
use crate::http::error::ApiError;
use crate::links::rfc3339;
use crate::model::Millis;
use crate::state::AppState;

/// A submitted form.
pub type Fields = HashMap<String, String>;

/// A posted form whose token checked out (see [`Visitor::check_form`]). A body that is no
/// form is answered 400, a missing or wrong token 403, before the handler runs.
pub struct CheckedForm(pub Fields);

impl FromRequest<AppState> for CheckedForm {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Response> {
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
#[derive(Clone, Debug, serde::Serialize)]
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
}
