//! Checking what a caller asks a link to do beyond one URL: the password (hashed here, with
//! Argon2id), the visit cap, the start time, the end destination, the rules and the
//! targets. Every way in (a create, a batch item, a PATCH, an imported record) goes through
//! these checks; a bad value is a [`LinkError::Invalid`] naming the exact field
//! (`rules[2].if.os`, `targets[1].weight`).
//!
//! A request's JSON is parsed into the stored types and then checked by the same per-field
//! functions (`check_rule`, `check_target`, `check_cap_value`) that check an imported
//! record's stored options, so a rule an import may bring in is one the API would take. A
//! stored URL must be one the API's check leaves as it is; a stored password hash must be
//! Argon2id at this product's cost or lower ([`check_password_hash`]).

use std::borrow::Cow;

use ipnet::IpNet;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::{LinkError, Links, Result};
use crate::model::options::{
    App, Conditions, DeviceClass, Os, Rotation, Rule, Target, MAX_RULES, MAX_TARGETS, MAX_WEIGHT,
};
use crate::model::{CapSlot, LinkOptions, Millis, OptionsPatch};

/// A password's length in characters.
const PASSWORD_CHARS: std::ops::RangeInclusive<usize> = 4..=128;
/// Most values one condition may list.
const MAX_VALUES: usize = 64;
/// Most query parameters one rule may require.
const MAX_QUERY: usize = 16;

/// The options part of a create or a PATCH as the caller sent it: `None` absent,
/// `Some(None)` an explicit `null` (which removes the option in a PATCH).
#[derive(Clone, Debug, Default)]
pub struct OptionsInput {
    pub password: Option<Option<String>>,
    pub max_visits: Option<Option<Value>>,
    pub valid_from: Option<Option<String>>,
    pub fallback_url: Option<Option<String>>,
    pub rules: Option<Option<Value>>,
    pub targets: Option<Option<Value>>,
    pub rotation: Option<Option<String>>,
    pub in_app: Option<Option<String>>,
    pub form: Option<Option<Value>>,
    pub og_title: Option<Option<String>>,
    pub og_description: Option<Option<String>>,
    pub og_image: Option<Option<String>>,
}

impl Links {
    /// Checks the options part of a request and turns it into a patch (the password hashed).
    pub fn check_options(&self, input: OptionsInput) -> Result<OptionsPatch> {
        Ok(OptionsPatch {
            password: input
                .password
                .map(|p| p.map(|p| hash_password(&p)).transpose())
                .transpose()?,
            max_visits: input
                .max_visits
                .map(|v| v.map(|v| check_cap(&v, "max_visits")).transpose())
                .transpose()?,
            valid_from: input
                .valid_from
                .map(|v| {
                    v.map(|t| parse_instant(&t, "invalid_valid_from", "valid_from"))
                        .transpose()
                })
                .transpose()?,
            fallback_url: input
                .fallback_url
                .map(|v| {
                    v.map(|u| self.check_url(&u).map_err(|e| e.at("fallback_url")))
                        .transpose()
                })
                .transpose()?,
            rules: input
                .rules
                .map(|v| v.map_or(Ok(Vec::new()), |v| self.parse_rules(&v)))
                .transpose()?,
            targets: input
                .targets
                .map(|v| v.map_or(Ok(Vec::new()), |v| self.parse_targets(&v)))
                .transpose()?,
            rotation: input
                .rotation
                .map(|v| v.map_or(Ok(Rotation::default()), |r| parse_rotation(&r)))
                .transpose()?,
            in_app: input
                .in_app
                .map(|v| v.map(|t| self.parse_in_app(&t)).transpose())
                .transpose()?,
            form: input
                .form
                .map(|v| v.map(|f| self.parse_form(&f)).transpose())
                .transpose()?,
            og_title: input
                .og_title
                .map(|v| v.map(|t| self.check_og_text("og_title", &t)).transpose())
                .transpose()?,
            og_description: input
                .og_description
                .map(|v| {
                    v.map(|t| self.check_og_text("og_description", &t))
                        .transpose()
                })
                .transpose()?,
            og_image: input
                .og_image
                .map(|v| v.map(|u| self.check_og_image(&u)).transpose())
                .transpose()?,
        })
    }

    /// Checks stored options (an imported record's) by the functions that check a request's:
    /// every URL as `check_url` would store it, each rule and target by `check_rule` and
    /// `check_target`, the caps' range, the pages before the destination, and a password
    /// hash the product could have made. Fields are named as the record has them
    /// (`options.rules[0].when`, `options.preview.image`).
    pub fn check_stored_options(&self, options: &LinkOptions) -> Result<()> {
        self.check_stored_parts(options).map_err(|e| match e {
            LinkError::Invalid {
                code,
                field,
                detail,
            } => LinkError::Invalid {
                code,
                field: format!("options.{field}").into(),
                detail,
            },
            other => other,
        })
    }

    fn check_stored_parts(&self, options: &LinkOptions) -> Result<()> {
        if let Some(hash) = &options.password {
            check_password_hash(hash)?;
        }
        if let Some(cap) = options.max_visits {
            check_cap_value(cap, "max_visits")?;
        }
        if let Some(at) = options.valid_from {
            check_instant_value(at, "invalid_valid_from", "valid_from".into())?;
        }
        if let Some(url) = &options.fallback_url {
            self.check_stored_url(url, "fallback_url")?;
        }
        if options.rules.len() > MAX_RULES {
            return Err(bad_rules("rules", format!("at most {MAX_RULES} rules")));
        }
        for (i, rule) in options.rules.iter().enumerate() {
            self.check_rule(&format!("rules[{i}]"), "when", rule)?;
        }
        if options.targets.len() > MAX_TARGETS {
            return Err(bad_targets(
                "targets",
                format!("at most {MAX_TARGETS} targets"),
            ));
        }
        for (i, target) in options.targets.iter().enumerate() {
            self.check_target(i, target)?;
        }
        self.check_stored_gates(options.form.as_ref(), options.preview.as_ref())
    }

    /// A URL as stored: one `check_url` takes and leaves as it is. The API stores only what
    /// `check_url` returns, so anything else did not come through it: a CR or LF (which
    /// `check_url` drops, and which no redirect can send in `Location`), spaces around it, a
    /// form not normalised.
    pub(crate) fn check_stored_url(
        &self,
        url: &str,
        field: impl Into<Cow<'static, str>>,
    ) -> Result<()> {
        let field = field.into();
        let normal = self.check_url(url).map_err(|e| e.at(field.clone()))?;
        if normal == url {
            return Ok(());
        }
        let detail = if url.chars().any(char::is_control) {
            format!("{url:?} holds a control character (CR, LF, tab), which no redirect can send")
        } else {
            format!("{url:?} is not a URL as this server stores it (that would be `{normal}`)")
        };
        Err(LinkError::invalid("invalid_url", field, detail))
    }

    /// What every rule meets, however it came: a request's (parsed from `{"if", "url"}`) or
    /// a stored one (`{"when", "url"}`; `when` names the conditions' key in errors). Its URL
    /// is one `check_url` leaves as it is, it has at least one condition, each list holds 1 to
    /// `MAX_VALUES` values in the form a request's are read into.
    fn check_rule(&self, at: &str, when: &str, rule: &Rule) -> Result<()> {
        self.check_stored_url(&rule.url, format!("{at}.url"))?;
        let c = &rule.when;
        if c.is_empty() {
            return Err(bad_rules(
                format!("{at}.{when}"),
                "a rule needs at least one condition",
            ));
        }
        let field = |name: &str| format!("{at}.{when}.{name}");
        let lengths = [
            ("device", c.device.len()),
            ("os", c.os.len()),
            ("app", c.app.len()),
            ("language", c.language.len()),
            ("country", c.country.len()),
            ("ip", c.ip.len()),
        ];
        for (name, len) in lengths {
            if len > MAX_VALUES {
                return Err(bad_rules(
                    field(name),
                    format!("a condition lists 1 to {MAX_VALUES} values"),
                ));
            }
        }
        let unknown = |name: &str, value: &str| {
            bad_rules(
                field(name),
                format!("{value:?} is not a value this condition knows"),
            )
        };
        if let Some(tag) = c.language.iter().find(|t| language(t).as_ref() != Some(*t)) {
            return Err(unknown("language", tag));
        }
        if let Some(code) = c.country.iter().find(|t| country(t).as_ref() != Some(*t)) {
            return Err(unknown("country", code));
        }
        if let Some(net) = c.ip.iter().find(|n| n.trunc() != **n) {
            return Err(unknown("ip", &net.to_string()));
        }
        if c.query.len() > MAX_QUERY {
            return Err(bad_rules(
                field("query"),
                format!("query names 1 to {MAX_QUERY} parameters"),
            ));
        }
        if c.query.iter().any(|(name, _)| name.is_empty()) {
            return Err(bad_rules(field("query"), "a query parameter has a name"));
        }
        for (name, at) in [("after", c.after), ("before", c.before)] {
            if let Some(at) = at {
                check_instant_value(at, "invalid_rules", field(name).into())?;
            }
        }
        Ok(())
    }

    /// What every target meets, a request's or a stored one: a URL `check_url` leaves as it
    /// is, a weight of 1 to `MAX_WEIGHT`, a cap in range.
    fn check_target(&self, i: usize, target: &Target) -> Result<()> {
        self.check_stored_url(&target.url, format!("targets[{i}].url"))?;
        if !(1..=MAX_WEIGHT).contains(&target.weight) {
            return Err(bad_targets(
                format!("targets[{i}].weight"),
                format!("a weight is a whole number from 1 to {MAX_WEIGHT}"),
            ));
        }
        if let Some(cap) = target.max_visits {
            check_cap_value(cap, "max_visits").map_err(|e| match e {
                LinkError::Invalid { detail, .. } => {
                    bad_targets(format!("targets[{i}].max_visits"), detail)
                }
                other => other,
            })?;
        }
        Ok(())
    }

    fn parse_rules(&self, value: &Value) -> Result<Vec<Rule>> {
        let Some(list) = value.as_array() else {
            return Err(bad_rules(
                "rules",
                "rules is a list of {\"if\": {…}, \"url\": …}",
            ));
        };
        if list.len() > MAX_RULES {
            return Err(bad_rules(
                "rules",
                format!("at most {MAX_RULES} rules, not {}", list.len()),
            ));
        }
        list.iter()
            .enumerate()
            .map(|(i, rule)| self.parse_rule(i, rule))
            .collect()
    }

    fn parse_rule(&self, i: usize, value: &Value) -> Result<Rule> {
        let at = |part: &str| format!("rules[{i}]{part}");
        let Some(object) = value.as_object() else {
            return Err(bad_rules(at(""), "a rule is {\"if\": {…}, \"url\": …}"));
        };
        if let Some(name) = object.keys().find(|k| !matches!(k.as_str(), "if" | "url")) {
            return Err(bad_rules(
                at(&format!(".{name}")),
                format!("a rule has `if` and `url`, not `{name}`"),
            ));
        }
        let url = match object.get("url") {
            Some(Value::String(url)) => self.check_url(url).map_err(|e| e.at(at(".url")))?,
            _ => return Err(bad_rules(at(".url"), "each rule needs a `url` string")),
        };
        let Some(Value::Object(conditions)) = object.get("if") else {
            return Err(bad_rules(
                at(".if"),
                "each rule needs an `if` object of conditions",
            ));
        };
        let mut when = Conditions::default();
        for (name, value) in conditions {
            let field = at(&format!(".if.{name}"));
            match name.as_str() {
                "device" => when.device = values(value, &field, device_class)?,
                "os" => when.os = values(value, &field, os)?,
                "app" => when.app = values(value, &field, app)?,
                "language" => when.language = values(value, &field, language)?,
                "country" => when.country = values(value, &field, country)?,
                "ip" => when.ip = values(value, &field, network)?,
                "query" => when.query = query(value, &field)?,
                "after" | "before" => {
                    let Value::String(text) = value else {
                        return Err(bad_rules(field, format!("`{name}` is an RFC 3339 time")));
                    };
                    let at = parse_instant(text, "invalid_rules", "")
                        .map_err(|e| e.at(field.clone()))?;
                    if name == "after" {
                        when.after = Some(at);
                    } else {
                        when.before = Some(at);
                    }
                }
                _ => {
                    return Err(bad_rules(
                        field,
                        format!(
                            "unknown condition `{name}`; use device, os, app, language, country, \
                             ip, query, after or before"
                        ),
                    ))
                }
            }
        }
        let rule = Rule { when, url };
        self.check_rule(&at(""), "if", &rule)?;
        Ok(rule)
    }

    fn parse_targets(&self, value: &Value) -> Result<Vec<Target>> {
        let Some(list) = value.as_array() else {
            return Err(bad_targets(
                "targets",
                "targets is a list of {\"url\", \"weight\"?, \"max_visits\"?}",
            ));
        };
        if list.len() > MAX_TARGETS {
            return Err(bad_targets(
                "targets",
                format!("at most {MAX_TARGETS} targets, not {}", list.len()),
            ));
        }
        list.iter()
            .enumerate()
            .map(|(i, target)| {
                let at = |part: &str| format!("targets[{i}]{part}");
                let Some(object) = target.as_object() else {
                    return Err(bad_targets(
                        at(""),
                        "a target is {\"url\", \"weight\"?, \"max_visits\"?}",
                    ));
                };
                if let Some(name) = object
                    .keys()
                    // `visits_remaining` is what a GET shows: a client may send a target back as read.
                    .find(|k| {
                        !matches!(
                            k.as_str(),
                            "url" | "weight" | "max_visits" | "visits_remaining"
                        )
                    })
                {
                    return Err(bad_targets(
                        at(&format!(".{name}")),
                        format!("a target has url, weight and max_visits, not `{name}`"),
                    ));
                }
                let url = match object.get("url") {
                    Some(Value::String(url)) => {
                        self.check_url(url).map_err(|e| e.at(at(".url")))?
                    }
                    _ => return Err(bad_targets(at(".url"), "each target needs a `url` string")),
                };
                let weight = match object.get("weight") {
                    None | Some(Value::Null) => 1,
                    Some(w) => w
                        .as_u64()
                        .and_then(|w| u32::try_from(w).ok())
                        .filter(|w| (1..=MAX_WEIGHT).contains(w))
                        .ok_or_else(|| {
                            bad_targets(
                                at(".weight"),
                                format!("a weight is a whole number from 1 to {MAX_WEIGHT}"),
                            )
                        })?,
                };
                let max_visits = match object.get("max_visits") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(check_cap(v, "max_visits").map_err(|e| match e {
                        LinkError::Invalid { detail, .. } => bad_targets(at(".max_visits"), detail),
                        other => other,
                    })?),
                };
                let target = Target {
                    url,
                    weight,
                    max_visits,
                };
                self.check_target(i, &target)?;
                Ok(target)
            })
            .collect()
    }
}

/// Hashes a visitor password with Argon2id (the crate's defaults: OWASP's recommended
/// 19 MiB, 2 passes) and a random salt.
pub fn hash_password(password: &str) -> Result<String> {
    let chars = password.chars().count();
    if !PASSWORD_CHARS.contains(&chars) {
        return Err(LinkError::invalid(
            "invalid_password",
            "password",
            format!("a password is 4 to 128 characters, not {chars}"),
        ));
    }
    crate::passwords::argon2id(password)
        .map_err(|e| LinkError::invalid("invalid_password", "password", e))
}

/// Whether a stored hash is one this product could have made ([`crate::passwords::check_cost`]).
pub fn check_password_hash(hash: &str) -> Result<()> {
    crate::passwords::check_cost(hash)
        .map_err(|detail| LinkError::invalid("invalid_password", "password", detail))
}

pub use crate::passwords::verify as verify_password;

fn invalid_cap(field: impl Into<Cow<'static, str>>, detail: impl Into<String>) -> LinkError {
    LinkError::invalid("invalid_max_visits", field, detail)
}

fn bad_rules(field: impl Into<Cow<'static, str>>, detail: impl Into<String>) -> LinkError {
    LinkError::invalid("invalid_rules", field, detail)
}

fn bad_targets(field: impl Into<Cow<'static, str>>, detail: impl Into<String>) -> LinkError {
    LinkError::invalid("invalid_targets", field, detail)
}

/// A cap as sent: a whole number, in [`check_cap_value`]'s range.
fn check_cap(value: &Value, field: &'static str) -> Result<u64> {
    let n = value.as_u64().ok_or_else(|| {
        invalid_cap(
            field,
            format!("{field} is a whole number of at least 1, not {value}"),
        )
    })?;
    check_cap_value(n, field)?;
    Ok(n)
}

/// A cap, sent or stored: 1 to 2^63 − 1 (PostgreSQL's `bigint`).
fn check_cap_value(n: u64, field: &'static str) -> Result<()> {
    if n >= 1 && n <= i64::MAX as u64 {
        Ok(())
    } else {
        Err(invalid_cap(
            field,
            format!("{field} is a whole number of at least 1, not {n}"),
        ))
    }
}

fn parse_rotation(name: &str) -> Result<Rotation> {
    Rotation::parse(name).ok_or_else(|| {
        LinkError::invalid(
            "invalid_rotation",
            "rotation",
            format!("rotation is weighted, round_robin or failover, not `{name}`"),
        )
    })
}

/// An RFC 3339 instant as milliseconds since the epoch.
fn parse_instant(text: &str, code: &'static str, field: &'static str) -> Result<Millis> {
    let bad = |detail: String| LinkError::invalid(code, field, detail);
    let parsed = OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map_err(|e| bad(format!("`{text}` is not an RFC 3339 time: {e}")))?;
    u64::try_from(parsed.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| bad(format!("`{text}` is before 1970")))
}

/// An instant, sent or stored: one an RFC 3339 time can say (the API reads no other, and
/// shows each back in that form).
fn check_instant_value(at: Millis, code: &'static str, field: Cow<'static, str>) -> Result<()> {
    if super::rfc3339(at).is_empty() {
        return Err(LinkError::invalid(
            code,
            field,
            format!("{at} ms is past any RFC 3339 time (the year 9999)"),
        ));
    }
    Ok(())
}

/// A condition's values: one string or a list of them, each read by `one`.
fn values<T>(value: &Value, field: &str, one: fn(&str) -> Option<T>) -> Result<Vec<T>> {
    let list: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        single => vec![single],
    };
    if list.is_empty() || list.len() > MAX_VALUES {
        return Err(bad_rules(
            field.to_string(),
            format!("a condition lists 1 to {MAX_VALUES} values"),
        ));
    }
    list.into_iter()
        .map(|v| {
            v.as_str().and_then(one).ok_or_else(|| {
                bad_rules(
                    field.to_string(),
                    format!("{v} is not a value this condition knows"),
                )
            })
        })
        .collect()
}

fn device_class(name: &str) -> Option<DeviceClass> {
    match name {
        "desktop" => Some(DeviceClass::Desktop),
        "mobile" => Some(DeviceClass::Mobile),
        "tablet" => Some(DeviceClass::Tablet),
        "bot" => Some(DeviceClass::Bot),
        _ => None,
    }
}

fn os(name: &str) -> Option<Os> {
    match name {
        "ios" => Some(Os::Ios),
        "android" => Some(Os::Android),
        "windows" => Some(Os::Windows),
        "macos" => Some(Os::Macos),
        "linux" => Some(Os::Linux),
        "chromeos" => Some(Os::Chromeos),
        _ => None,
    }
}

fn app(name: &str) -> Option<App> {
    App::ALL.into_iter().find(|a| a.as_str() == name)
}

/// A language tag: letters, digits and hyphens, a primary subtag of 2–8 letters.
fn language(tag: &str) -> Option<String> {
    let primary = tag.split('-').next()?;
    let fine = (2..=8).contains(&primary.len())
        && primary.chars().all(|c| c.is_ascii_alphabetic())
        && tag.len() <= 35
        && tag
            .split('-')
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()));
    fine.then(|| tag.to_ascii_lowercase())
}

fn country(code: &str) -> Option<String> {
    (code.len() == 2 && code.chars().all(|c| c.is_ascii_alphabetic()))
        .then(|| code.to_ascii_uppercase())
}

/// An address (a one-address block) or a CIDR block.
fn network(text: &str) -> Option<IpNet> {
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<std::net::IpAddr>().ok().map(IpNet::from))
        .map(|net| net.trunc())
}

fn query(value: &Value, field: &str) -> Result<Vec<(String, String)>> {
    let Some(object) = value.as_object() else {
        return Err(bad_rules(
            field.to_string(),
            "query is an object of parameter names and values (\"*\" for any)",
        ));
    };
    if object.is_empty() || object.len() > MAX_QUERY {
        return Err(bad_rules(
            field.to_string(),
            format!("query names 1 to {MAX_QUERY} parameters"),
        ));
    }
    object
        .iter()
        .map(|(name, want)| match want {
            Value::String(want) if !name.is_empty() => Ok((name.clone(), want.clone())),
            _ => Err(bad_rules(
                format!("{field}.{name}"),
                "a query parameter's value is a string (\"*\" for any)",
            )),
        })
        .collect()
}

/// Rules as the API shows them: the shape a request gives (`{"if": {…}, "url": …}`), every
/// condition as a list, times in RFC 3339.
pub fn rules_json(rules: &[Rule]) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|rule| {
                let c = &rule.when;
                let mut when = serde_json::Map::new();
                let mut list = |name: &str, values: Vec<String>| {
                    if !values.is_empty() {
                        when.insert(name.into(), values.into());
                    }
                };
                list("device", c.device.iter().map(name_of).collect());
                list("os", c.os.iter().map(name_of).collect());
                list(
                    "app",
                    c.app.iter().map(|a| a.as_str().to_string()).collect(),
                );
                list("language", c.language.clone());
                list("country", c.country.clone());
                list("ip", c.ip.iter().map(ToString::to_string).collect());
                if !c.query.is_empty() {
                    let query: serde_json::Map<String, Value> = c
                        .query
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                        .collect();
                    when.insert("query".into(), Value::Object(query));
                }
                if let Some(at) = c.after {
                    when.insert("after".into(), super::rfc3339(at).into());
                }
                if let Some(at) = c.before {
                    when.insert("before".into(), super::rfc3339(at).into());
                }
                serde_json::json!({ "if": when, "url": rule.url })
            })
            .collect(),
    )
}

/// Targets as the API shows them, with what is left of each cap.
pub fn targets_json(options: &LinkOptions, counted: &[(CapSlot, u64)]) -> Value {
    Value::Array(
        options
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut out = serde_json::json!({ "url": t.url, "weight": t.weight });
                if let Some(cap) = t.max_visits {
                    out["max_visits"] = cap.into();
                    out["visits_remaining"] = options.remaining(CapSlot::target(i), counted).into();
                }
                out
            })
            .collect(),
    )
}

/// A condition value's name, as serde writes it (`desktop`, `ios`).
fn name_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_and_verify() {
        let hash = hash_password("hunter22").expect("hash");
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password(&hash, "hunter22"));
        assert!(!verify_password(&hash, "hunter23"));
        assert!(hash_password("abc").is_err());
        // Our own hashes pass the import's check; a costlier one is refused, and a stored
        // one verifies nothing (its cost is never paid).
        assert!(check_password_hash(&hash).is_ok());
        let costly = hash.replacen("m=19456", "m=1048576", 1);
        assert!(check_password_hash(&costly).is_err());
        assert!(!verify_password(&costly, "hunter22"));
        let lighter = hash.replacen("t=2", "t=1", 1);
        assert!(check_password_hash(&lighter).is_ok());
    }

    #[test]
    fn condition_values_are_read_one_or_many() {
        let field = "rules[0].if.os";
        assert_eq!(
            values(&serde_json::json!("ios"), field, os).expect("one"),
            vec![Os::Ios]
        );
        assert_eq!(
            values(&serde_json::json!(["ios", "android"]), field, os).expect("many"),
            vec![Os::Ios, Os::Android]
        );
        match values(&serde_json::json!(["ios", "beos"]), field, os) {
            Err(LinkError::Invalid { code, field, .. }) => {
                assert_eq!(code, "invalid_rules");
                assert_eq!(field, "rules[0].if.os");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(language("zh-CN"), Some("zh-cn".into()));
        assert_eq!(language("z"), None);
        assert_eq!(network("10.0.0.7/8"), "10.0.0.0/8".parse().ok());
        assert_eq!(network("::1"), "::1/128".parse().ok());
        assert_eq!(country("de"), Some("DE".into()));
    }
}
