//! `/rest/v3/short-urls/{shortCode}/redirect-rules`: Shlink's redirect rules mapped both ways
//! onto our link rules (`model::options`). A Shlink rule is a URL and conditions that must all
//! hold, tried by priority; ours is the same, in order. Per condition:
//!
//! | Shlink | ours |
//! |---|---|
//! | `device` `android`/`ios`/`windows`/`macos`/`linux`/`chromeos` | `os` |
//! | `device` `mobile` / `desktop` | `device` `[mobile, tablet]` / `[desktop]` |
//! | `language` | `language` (lowercased; `_` as `-`) |
//! | `query-param` k=v / `any-value-query-param` k / `valueless-query-param` k | `query` k=v / k=`*` / k=`""` |
//! | `ip-address` (address, CIDR, trailing `*` wildcard) | `ip` |
//! | `geolocation-country-code` | `country` |
//! | `before-date` / `after-date` | `before` / `after` |
//! | `browser`, `geolocation-city-name` | none: 400 `invalid-data` naming the condition |
//!
//! Our lists hold when any value matches, Shlink's conditions must all hold: two conditions
//! of one kind in one Shlink rule (two languages, two devices) have no form of ours and are
//! refused. The other way, a rule of ours with no Shlink form (an `app` condition, several
//! values in one list) is left out of the answer; replacing the rules of such a link through
//! this API is refused, so that it cannot drop what it did not show.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::shapes::atom;
use super::shapes::parse_date;
use super::{json_object, json_ok, ShlinkCaller, ShlinkError};
use crate::config::Role;
use crate::links::{rfc3339, UpdateLink};
use crate::model::options::{DeviceClass, Rule};
use crate::model::Link;
use crate::web::access::blocking;
use crate::web::state::AppState;

/// One Shlink condition.
fn condition(kind: &str, key: Option<&str>, value: Option<String>) -> Value {
    json!({ "type": kind, "matchKey": key, "matchValue": value })
}

/// A name as serde writes it (`ios`, `desktop`).
fn name_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Our rule's Shlink conditions, or `None` when it has no Shlink form.
fn shlink_conditions(rule: &Rule) -> Option<Vec<Value>> {
    let c = &rule.when;
    if !c.app.is_empty()
        || c.os.len() > 1
        || c.language.len() > 1
        || c.country.len() > 1
        || c.ip.len() > 1
    {
        return None;
    }
    let mut out = Vec::new();
    let mut devices = c.device.clone();
    devices.sort_by_key(name_of);
    match devices.as_slice() {
        [] => {}
        [DeviceClass::Desktop] => out.push(condition("device", None, Some("desktop".into()))),
        [DeviceClass::Mobile] | [DeviceClass::Mobile, DeviceClass::Tablet] => {
            out.push(condition("device", None, Some("mobile".into())))
        }
        _ => return None,
    }
    if let Some(os) = c.os.first() {
        out.push(condition("device", None, Some(name_of(os))));
    }
    if let Some(language) = c.language.first() {
        out.push(condition("language", None, Some(language.clone())));
    }
    for (name, want) in &c.query {
        out.push(match want.as_str() {
            "*" => condition("any-value-query-param", Some(name), None),
            "" => condition("valueless-query-param", Some(name), None),
            _ => condition("query-param", Some(name), Some(want.clone())),
        });
    }
    if let Some(net) = c.ip.first() {
        let text = if net.prefix_len() == net.max_prefix_len() {
            net.addr().to_string()
        } else {
            net.to_string()
        };
        out.push(condition("ip-address", None, Some(text)));
    }
    if let Some(country) = c.country.first() {
        out.push(condition(
            "geolocation-country-code",
            None,
            Some(country.clone()),
        ));
    }
    if let Some(at) = c.before {
        out.push(condition("before-date", None, Some(atom(at))));
    }
    if let Some(at) = c.after {
        out.push(condition("after-date", None, Some(atom(at))));
    }
    Some(out)
}

/// The rules a link shows through Shlink, and whether it has rules with no Shlink form.
fn shown_rules(link: &Link) -> (Vec<Value>, bool) {
    let rules = link.options.as_deref().map_or(&[][..], |o| &o.rules[..]);
    let mut hidden = false;
    let mut out = Vec::new();
    for rule in rules {
        match shlink_conditions(rule) {
            Some(conditions) => out.push(json!({
                "longUrl": rule.url,
                "priority": out.len() + 1,
                "conditions": conditions,
            })),
            None => hidden = true,
        }
    }
    (out, hidden)
}

fn answer(link: &Link) -> Response {
    json_ok(json!({
        "defaultLongUrl": link.url,
        "redirectRules": shown_rules(link).0,
    }))
}

/// A Shlink `a.b.*.*` wildcard as a CIDR block; `None` when a `*` is followed by a number.
fn wildcard(text: &str) -> Option<String> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let fixed = parts.iter().take_while(|p| **p != "*").count();
    if parts[fixed..].iter().any(|p| *p != "*") {
        return None;
    }
    let address: Vec<&str> = parts
        .iter()
        .map(|p| if *p == "*" { "0" } else { p })
        .collect();
    Some(format!("{}/{}", address.join("."), fixed * 8))
}

/// One Shlink rule as ours (the JSON our services read), or the reason it has no form of
/// ours.
fn our_rule(index: usize, rule: &Value) -> Result<Value, String> {
    let at = format!("rule {}", index + 1);
    let object = rule.as_object().ok_or(format!("{at} is not an object"))?;
    let url = object
        .get("longUrl")
        .and_then(Value::as_str)
        .ok_or(format!("{at} has no longUrl"))?;
    let conditions = object
        .get("conditions")
        .and_then(Value::as_array)
        .ok_or(format!("{at} has no list of conditions"))?;
    let mut when = Map::new();
    let mut query = Map::new();
    let mut set = |name: &str, value: Value, kind: &str| -> Result<(), String> {
        if when.insert(name.to_string(), value).is_some() {
            return Err(format!(
                "{at} has two conditions that both set `{name}` (`{kind}`); they cannot both hold here"
            ));
        }
        Ok(())
    };
    for c in conditions {
        let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
        let key = c.get("matchKey").and_then(Value::as_str);
        let value = c.get("matchValue").and_then(Value::as_str);
        let need = |v: Option<&str>| {
            v.filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or(format!("{at}: `{kind}` needs a value"))
        };
        match kind {
            "device" => match need(value)?.as_str() {
                "mobile" => set("device", json!(["mobile", "tablet"]), kind)?,
                "desktop" => set("device", json!(["desktop"]), kind)?,
                os @ ("android" | "ios" | "windows" | "macos" | "linux" | "chromeos") => {
                    set("os", json!([os]), kind)?
                }
                other => return Err(format!("{at}: `{other}` is not a device")),
            },
            "language" => set(
                "language",
                json!([need(value)?.replace('_', "-").to_lowercase()]),
                kind,
            )?,
            "query-param" => {
                let want = need(value)?;
                if want == "*" {
                    return Err(format!("{at}: a query value of `*` would mean any value here; use any-value-query-param"));
                }
                query.insert(need(key)?, want.into());
            }
            "any-value-query-param" => {
                query.insert(need(key)?, "*".into());
            }
            "valueless-query-param" => {
                query.insert(need(key)?, "".into());
            }
            "ip-address" => {
                let text = need(value)?;
                let net = if text.contains('*') {
                    wildcard(&text).ok_or(format!(
                        "{at}: the wildcard `{text}` has a `*` before a number; only trailing ones map to a block"
                    ))?
                } else {
                    text
                };
                set("ip", json!([net]), kind)?
            }
            "geolocation-country-code" => set("country", json!([need(value)?]), kind)?,
            "before-date" | "after-date" => {
                let text = need(value)?;
                let ms = parse_date(&text).ok_or(format!("{at}: `{text}` is not a date"))?;
                let name = if kind == "before-date" {
                    "before"
                } else {
                    "after"
                };
                set(name, rfc3339(ms).into(), kind)?
            }
            "browser" | "geolocation-city-name" => {
                return Err(format!(
                    "{at}: the condition `{kind}` is not supported by this server"
                ))
            }
            other => return Err(format!("{at}: `{other}` is not a condition type")),
        }
    }
    if !query.is_empty() {
        when.insert("query".into(), Value::Object(query));
    }
    Ok(json!({ "if": when, "url": url }))
}

/// `GET …/redirect-rules`: `{defaultLongUrl, redirectRules}`, priorities from 1.
#[utoipa::path(get, path = "/rest/v3/short-urls/{shortCode}/redirect-rules", tag = "shlink", params(("shortCode" = String, Path, description = "The short code")), security(("api_key" = [])),
    responses((status = 200, description = "`{defaultLongUrl, redirectRules}`"), (status = 404, description = "`short-url-not-found`")))]
pub async fn get(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    Path(code): Path<String>,
) -> Result<Response, ShlinkError> {
    let link = caller.link(&state, &code, Role::Viewer)?;
    Ok(answer(&link))
}

/// `POST` (or `PATCH`) `…/redirect-rules`: replaces every rule, in the order given (any
/// `priority` sent is ignored, as Shlink ignores it). The link is looked up before the body
/// is read, as Shlink does.
#[utoipa::path(post, path = "/rest/v3/short-urls/{shortCode}/redirect-rules", tag = "shlink", params(("shortCode" = String, Path, description = "The short code")), security(("api_key" = [])),
    responses((status = 200, description = "The rules as stored"), (status = 400, description = "`invalid-data` naming a condition with no form here"), (status = 404, description = "`short-url-not-found`")))]
pub async fn set(
    State(state): State<AppState>,
    caller: ShlinkCaller,
    Path(code): Path<String>,
    body: Bytes,
) -> Result<Response, ShlinkError> {
    let link = caller.link(&state, &code, Role::Editor)?;
    let body = json_object(&body)?;
    let invalid = |detail: String| ShlinkError::invalid(&["redirectRules"], detail);
    let list = match body.get("redirectRules") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list.clone(),
        Some(_) => return Err(invalid("redirectRules is a list of rules".into())),
    };
    if shown_rules(&link).1 {
        return Err(invalid(
            "this link has rules that Shlink's redirect rules cannot show (an app condition, or \
             several values in one condition); change them through /api/v1"
                .into(),
        ));
    }
    let rules: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, rule)| our_rule(i, rule))
        .collect::<Result<_, _>>()
        .map_err(invalid)?;
    let patch = UpdateLink {
        rules: Some((!rules.is_empty()).then_some(Value::Array(rules))),
        ..UpdateLink::default()
    };
    let links = state.links.clone();
    let target = code.clone();
    let updated = blocking(move || links.update(&target, patch))
        .await
        .map_err(|e| ShlinkError::from(e).about(&code))?;
    Ok(answer(&updated))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shlink_rules_map_onto_ours_or_name_what_cannot() {
        let rule = json!({"longUrl": "https://a.test", "conditions": [
            {"type": "device", "matchKey": null, "matchValue": "android"},
            {"type": "language", "matchKey": null, "matchValue": "en_US"},
            {"type": "query-param", "matchKey": "foo", "matchValue": "bar"},
            {"type": "valueless-query-param", "matchKey": "v", "matchValue": null},
            {"type": "ip-address", "matchKey": null, "matchValue": "10.1.*.*"}]});
        assert_eq!(
            our_rule(0, &rule),
            Ok(
                json!({"if": {"os": ["android"], "language": ["en-us"], "ip": ["10.1.0.0/16"],
                "query": {"foo": "bar", "v": ""}}, "url": "https://a.test"})
            )
        );
        let browser = json!({"longUrl": "https://a.test", "conditions": [
            {"type": "browser", "matchKey": null, "matchValue": "chrome"}]});
        assert!(our_rule(0, &browser).is_err_and(|e| e.contains("browser")));
        let twice = json!({"longUrl": "https://a.test", "conditions": [
            {"type": "language", "matchValue": "en"}, {"type": "language", "matchValue": "fr"}]});
        assert!(our_rule(0, &twice).is_err());
        assert_eq!(wildcard("1.2.*.4"), None);
        assert_eq!(wildcard("1.*.*.*"), Some("1.0.0.0/8".into()));
    }
}
