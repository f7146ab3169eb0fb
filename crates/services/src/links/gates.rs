//! Checking what a caller asks of the pages before the destination: `in_app`, the `form`
//! (its fields, consent text and retention) and the crawler preview (`og_title`,
//! `og_description`, `og_image`); and how they read back as JSON. Every way in (create,
//! batch, PATCH, import, the link's page) goes through these; a bad value is a
//! [`LinkError::Invalid`] naming the exact field (`form.fields[1].type`).

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{json, Value};

use super::{LinkError, Links, Result};
use crate::model::gates::{
    FieldKind, FormField, InApp, LeadForm, SocialPreview, DEFAULT_LEAD_RETENTION, MAX_FORM_FIELDS,
    RESERVED_FIELD_NAMES,
};
use crate::model::time::{DAY_MS, HOUR_MS};
use crate::model::Millis;

/// A field's label, at most, in characters.
const MAX_LABEL_CHARS: usize = 100;
/// The consent text, at most.
const MAX_CONSENT_CHARS: usize = 500;
/// A field's name: `[a-z0-9_]`, this long at most.
const MAX_NAME_CHARS: usize = 32;
/// `og_title` and `og_description`, at most.
const MAX_OG_TITLE_CHARS: usize = 200;
const MAX_OG_DESCRIPTION_CHARS: usize = 500;
/// A form's retention: one hour to ten years.
const RETENTION: std::ops::RangeInclusive<Millis> = HOUR_MS..=3650 * DAY_MS;

impl Links {
    /// `in_app` as sent: `direct` or `interstitial`.
    pub fn parse_in_app(&self, text: &str) -> Result<InApp> {
        InApp::parse(text).ok_or_else(|| {
            LinkError::invalid(
                "invalid_in_app",
                "in_app",
                format!("in_app is `direct` or `interstitial`, not `{text}`"),
            )
        })
    }

    /// `form` as sent: `{"fields": [{"name", "label", "type", "required"?}], "consent"?,
    /// "retention"?}`.
    pub fn parse_form(&self, value: &Value) -> Result<LeadForm> {
        let Some(object) = value.as_object() else {
            return Err(bad_form(
                "form",
                "form is {\"fields\": [...], \"consent\"?, \"retention\"?}",
            ));
        };
        if let Some(name) = object
            .keys()
            .find(|k| !matches!(k.as_str(), "fields" | "consent" | "retention"))
        {
            return Err(bad_form(
                format!("form.{name}"),
                format!("a form has fields, consent and retention, not `{name}`"),
            ));
        }
        let Some(list) = object.get("fields").and_then(Value::as_array) else {
            return Err(bad_form("form.fields", "form.fields is a list of fields"));
        };
        if list.is_empty() || list.len() > MAX_FORM_FIELDS {
            return Err(bad_form(
                "form.fields",
                format!(
                    "a form has 1 to {MAX_FORM_FIELDS} fields, not {}",
                    list.len()
                ),
            ));
        }
        let fields = list
            .iter()
            .enumerate()
            .map(|(i, field)| parse_field(i, field))
            .collect::<Result<Vec<_>>>()?;
        let consent = match object.get("consent") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.trim().to_string()),
            Some(_) => return Err(bad_form("form.consent", "consent is a string")),
        };
        let retention = match object.get("retention") {
            None | Some(Value::Null) => DEFAULT_LEAD_RETENTION,
            Some(Value::String(text)) => parse_retention(text)?,
            Some(_) => {
                return Err(bad_form(
                    "form.retention",
                    "retention is a duration such as \"180d\"",
                ))
            }
        };
        let form = LeadForm {
            fields,
            consent,
            retention,
        };
        check_form(&form)?;
        Ok(form)
    }

    /// `og_title` or `og_description` as sent: trimmed, not empty, not too long.
    pub fn check_og_text(&self, field: &'static str, text: &str) -> Result<String> {
        let max = if field == "og_title" {
            MAX_OG_TITLE_CHARS
        } else {
            MAX_OG_DESCRIPTION_CHARS
        };
        let text = text.trim();
        let chars = text.chars().count();
        if chars == 0 || chars > max || text.chars().any(char::is_control) {
            return Err(LinkError::invalid(
                "invalid_preview",
                field,
                format!("{field} is 1 to {max} characters with no control character"),
            ));
        }
        Ok(text.to_string())
    }

    /// `og_image`: an http(s) URL, checked like a destination.
    pub fn check_og_image(&self, url: &str) -> Result<String> {
        self.check_url(url).map_err(|e| match e {
            LinkError::Invalid { detail, .. } => {
                LinkError::invalid("invalid_preview", "og_image", detail)
            }
            other => other,
        })
    }

    /// Checks the pages of stored options (an imported record's) by the rules of a request.
    pub fn check_stored_gates(
        &self,
        form: Option<&LeadForm>,
        preview: Option<&SocialPreview>,
    ) -> Result<()> {
        if let Some(form) = form {
            if form.fields.is_empty() || form.fields.len() > MAX_FORM_FIELDS {
                return Err(bad_form(
                    "form.fields",
                    format!("a form has 1 to {MAX_FORM_FIELDS} fields"),
                ));
            }
            for (i, field) in form.fields.iter().enumerate() {
                check_field(i, field)?;
            }
            check_form(form)?;
        }
        // Named as the record has them (`preview.image`), each as a request's would be
        // stored: the text trimmed, the image URL as `check_og_image` (`check_url`) leaves it.
        if let Some(p) = preview {
            for (field, stored, text) in [
                ("og_title", "preview.title", &p.title),
                ("og_description", "preview.description", &p.description),
            ] {
                if let Some(t) = text {
                    let kept = self.check_og_text(field, t).map_err(|e| e.at(stored))?;
                    if kept != *t {
                        return Err(LinkError::invalid(
                            "invalid_preview",
                            stored,
                            format!("{t:?} has spaces around it"),
                        ));
                    }
                }
            }
            if let Some(u) = &p.image {
                self.check_og_image(u).map_err(|e| e.at("preview.image"))?;
                self.check_stored_url(u, "preview.image")
                    .map_err(|e| match e {
                        LinkError::Invalid { detail, .. } => {
                            LinkError::invalid("invalid_preview", "preview.image", detail)
                        }
                        other => other,
                    })?;
            }
        }
        Ok(())
    }
}

fn parse_field(i: usize, value: &Value) -> Result<FormField> {
    let at = |part: &str| format!("form.fields[{i}]{part}");
    let Some(object) = value.as_object() else {
        return Err(bad_form(
            at(""),
            "a field is {\"name\", \"label\", \"type\", \"required\"?}",
        ));
    };
    if let Some(name) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "name" | "label" | "type" | "required"))
    {
        return Err(bad_form(
            at(&format!(".{name}")),
            format!("a field has name, label, type and required, not `{name}`"),
        ));
    }
    let text = |key: &str| match object.get(key) {
        Some(Value::String(s)) => Ok(s.trim().to_string()),
        _ => Err(bad_form(
            at(&format!(".{key}")),
            format!("each field needs a `{key}` string"),
        )),
    };
    let name = text("name")?;
    let label = text("label")?;
    let kind_text = text("type")?;
    let kind = FieldKind::parse(&kind_text).ok_or_else(|| {
        bad_form(
            at(".type"),
            format!("a field's type is tel, email or text, not `{kind_text}`"),
        )
    })?;
    let required = match object.get("required") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad_form(at(".required"), "required is true or false")),
    };
    let field = FormField {
        name,
        label,
        kind,
        required,
    };
    check_field(i, &field)?;
    Ok(field)
}

fn check_field(i: usize, field: &FormField) -> Result<()> {
    let at = |part: &str| format!("form.fields[{i}]{part}");
    let name = &field.name;
    if name.is_empty()
        || name.len() > MAX_NAME_CHARS
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(bad_form(
            at(".name"),
            format!("a field's name is 1 to {MAX_NAME_CHARS} of a-z, 0-9 and _"),
        ));
    }
    if RESERVED_FIELD_NAMES.contains(&name.as_str()) {
        return Err(bad_form(
            at(".name"),
            format!("`{name}` is the form's own; choose another name"),
        ));
    }
    let chars = field.label.chars().count();
    if chars == 0 || chars > MAX_LABEL_CHARS || field.label.chars().any(char::is_control) {
        return Err(bad_form(
            at(".label"),
            format!("a label is 1 to {MAX_LABEL_CHARS} characters"),
        ));
    }
    Ok(())
}

/// What holds across a form's fields.
fn check_form(form: &LeadForm) -> Result<()> {
    let mut seen = HashSet::new();
    for (i, field) in form.fields.iter().enumerate() {
        if !seen.insert(field.name.as_str()) {
            return Err(bad_form(
                format!("form.fields[{i}].name"),
                format!("`{}` is the name of an earlier field", field.name),
            ));
        }
    }
    if let Some(consent) = &form.consent {
        let chars = consent.chars().count();
        if chars == 0 || chars > MAX_CONSENT_CHARS {
            return Err(bad_form(
                "form.consent",
                format!("the consent text is 1 to {MAX_CONSENT_CHARS} characters"),
            ));
        }
    }
    if !RETENTION.contains(&form.retention) {
        return Err(bad_form(
            "form.retention",
            "retention is one hour to 3650 days",
        ));
    }
    Ok(())
}

/// A retention such as `180d`, `12h` or `90 days`.
pub fn parse_retention(text: &str) -> Result<Millis> {
    let ms = humantime::parse_duration(text.trim())
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
        .ok_or_else(|| {
            bad_form(
                "form.retention",
                format!("`{text}` is not a duration such as 180d or 12h"),
            )
        })?;
    if !RETENTION.contains(&ms) {
        return Err(bad_form(
            "form.retention",
            "retention is one hour to 3650 days",
        ));
    }
    Ok(ms)
}

/// A retention as it is shown: `180d`, `36h`, or minutes or seconds when it is not whole.
pub fn retention_text(ms: Millis) -> String {
    if ms % DAY_MS == 0 {
        format!("{}d", ms / DAY_MS)
    } else if ms % HOUR_MS == 0 {
        format!("{}h", ms / HOUR_MS)
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

/// A form as the API shows it (and takes it back).
pub fn form_json(form: &LeadForm) -> Value {
    json!({
        "fields": form.fields.iter().map(|f| json!({
            "name": f.name,
            "label": f.label,
            "type": f.kind.as_str(),
            "required": f.required,
        })).collect::<Vec<_>>(),
        "consent": form.consent,
        "retention": retention_text(form.retention),
    })
}

fn bad_form(field: impl Into<Cow<'static, str>>, detail: impl Into<String>) -> LinkError {
    LinkError::invalid("invalid_form", field, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_reads_back_as_written() {
        for text in ["180d", "36h", "90m"] {
            assert_eq!(retention_text(parse_retention(text).unwrap()), text);
        }
        assert!(parse_retention("10s").is_err());
        assert!(parse_retention("4000d").is_err());
        assert!(parse_retention("soon").is_err());
    }
}
