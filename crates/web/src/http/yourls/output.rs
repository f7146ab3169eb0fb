//! The YOURLS answer: its ordered members (`Obj`), the `simple` text beside them
//! (`Answer`), and their rendering in the four output formats (`xml`, `json`, `jsonp`,
//! `simple`) with the HTTP status taken from the body, as in YOURLS's `yourls_api_output`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// A value in a YOURLS answer. PHP arrays keep insertion order, and clients read some answers
/// positionally (XML), so members are an ordered list rather than a map.
#[derive(Clone, Debug)]
enum Val {
    Str(String),
    Int(u64),
    Map(Obj),
}

#[derive(Clone, Debug, Default)]
pub(super) struct Obj(Vec<(String, Val)>);

impl Obj {
    pub(super) fn s(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.push((key.into(), Val::Str(value.into())));
        self
    }
    pub(super) fn n(mut self, key: &str, value: u64) -> Self {
        self.0.push((key.into(), Val::Int(value)));
        self
    }
    pub(super) fn m(mut self, key: &str, value: Obj) -> Self {
        self.0.push((key.into(), Val::Map(value)));
        self
    }
    fn get(&self, key: &str) -> Option<&Val> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// An answer: the members, and the text of the `simple` format (YOURLS's `simple` member).
pub(super) struct Answer {
    body: Obj,
    simple: Option<String>,
}

impl Answer {
    pub(super) fn new(body: Obj, simple: impl Into<String>) -> Self {
        Self {
            body,
            simple: Some(simple.into()),
        }
    }
}

/// Renders an answer in the asked format (`yourls_api_output`). `auth_failure` keeps the
/// callback member the failure body already carries.
pub(super) fn output(
    format: &str,
    answer: Answer,
    callback: Option<String>,
    auth_failure: bool,
) -> Response {
    let Answer { mut body, simple } = answer;
    if !auth_failure {
        if let Some(cb) = &callback {
            body = body.s("callback", cb.as_str());
        }
    }
    let code = ["statusCode", "errorCode"]
        .iter()
        .find_map(|k| match body.get(k) {
            Some(Val::Str(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        })
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|n| StatusCode::from_u16(n).ok())
        .unwrap_or(StatusCode::OK);
    let (status, kind, text) = match format {
        "jsonp" => {
            let cb = callback.unwrap_or_default();
            if cb.is_empty() || valid_callback(&cb) {
                (
                    code,
                    "application/javascript",
                    format!("{cb}({})", json(&body)),
                )
            } else {
                let error = Obj::default()
                    .s("errorCode", "400")
                    .s("error", "Invalid callback parameter");
                (
                    StatusCode::BAD_REQUEST,
                    "application/javascript",
                    json(&error),
                )
            }
        }
        "json" => (code, "application/json", json(&body)),
        "xml" => (code, "application/xml", xml(&body)),
        _ => (code, "text/plain", simple.unwrap_or_default()),
    };
    let mut response = (status, text).into_response();
    if let Ok(value) = HeaderValue::from_str(&format!("{kind}; charset=utf-8")) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

/// YOURLS's `yourls_validate_jsonp_callback`: `[a-zA-Z0-9_$.]+`, no `\uXXXX`-like escapes.
fn valid_callback(cb: &str) -> bool {
    let bytes = cb.as_bytes();
    let smuggled = (0..bytes.len()).any(|i| {
        bytes[i] == b'u'
            && bytes.len() >= i + 5
            && bytes[i + 1..i + 5].iter().all(u8::is_ascii_hexdigit)
    });
    !smuggled
        && cb
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'))
}

fn json(obj: &Obj) -> String {
    fn value(v: &Val, out: &mut String) {
        match v {
            Val::Str(s) => out.push_str(&serde_json::Value::from(s.as_str()).to_string()),
            Val::Int(n) => out.push_str(&n.to_string()),
            Val::Map(o) => object(o, out),
        }
    }
    fn object(o: &Obj, out: &mut String) {
        out.push('{');
        for (i, (k, v)) in o.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::Value::from(k.as_str()).to_string());
            out.push(':');
            value(v, out);
        }
        out.push('}');
    }
    let mut out = String::new();
    object(obj, &mut out);
    out
}

/// Spatie's ArrayToXml as YOURLS calls it: a `<root>` element, one child per member, text
/// escaped like PHP's `htmlspecialchars`, empty values as empty elements.
fn xml(obj: &Obj) -> String {
    fn escape(s: &str, out: &mut String) {
        for c in s.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' => out.push_str("&quot;"),
                '\'' => out.push_str("&#039;"),
                c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => {}
                c => out.push(c),
            }
        }
    }
    fn element(name: &str, v: &Val, out: &mut String) {
        let name = name.replace(' ', "_");
        let mut inner = String::new();
        match v {
            Val::Str(s) => escape(s, &mut inner),
            Val::Int(n) => inner.push_str(&n.to_string()),
            Val::Map(o) => {
                for (k, v) in &o.0 {
                    element(k, v, &mut inner);
                }
            }
        }
        if inner.is_empty() {
            out.push_str(&format!("<{name}/>"));
        } else {
            out.push_str(&format!("<{name}>{inner}</{name}>"));
        }
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root>");
    for (k, v) in &obj.0 {
        element(k, v, &mut out);
    }
    out.push_str("</root>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_matches_spatie_shape() {
        let body = Obj::default()
            .s("status", "fail")
            .s("code", "")
            .m("url", Obj::default().s("url", "http://a/?x=1&y=<2>"));
        assert_eq!(
            xml(&body),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root><status>fail</status><code/><url><url>http://a/?x=1&amp;y=&lt;2&gt;</url></url></root>\n"
        );
    }

    #[test]
    fn callbacks_are_checked_like_yourls() {
        assert!(valid_callback("jQuery123_456.cb$"));
        assert!(!valid_callback("alert(1)"));
        assert!(!valid_callback("a\\u2028b"));
        assert!(!valid_callback("u2028"));
    }
}
