//! `/yourls-api.php`: the YOURLS 1.10 API, so that existing YOURLS clients (browser
//! extensions, ShareX, the PyPI `yourls` client, scripts) work unchanged.
//!
//! Owns the YOURLS request and answer shapes only: parameters from the query string and a
//! form body (POST wins, like PHP's `$_REQUEST`), the three ways to sign in, the actions
//! (`shorturl`, `expand`, `url-stats`, `stats`, `db-stats`, `version`) and the four output
//! formats (`xml` by default, `json`, `jsonp`, `simple`). The HTTP status is the body's
//! `statusCode`, else its `errorCode`, else 200, as in YOURLS's `yourls_api_output`.
//!
//! Link work goes through the domain service; YOURLS bodies are built here from domain errors
//! (they are not problem+json, so `error.rs` does not render them).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use md5::Md5;
use sha2::{Digest, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;
use time::macros::format_description;
use time::OffsetDateTime;

use super::auth::Principal;
use crate::config::Role;
use crate::links::{CreateLink, LinkError, Ranking, Totals, DEFAULT_SPACE};
use crate::model::{Link, LinkStatus, Millis};
use crate::state::AppState;

/// The YOURLS version whose API this speaks (the `version` action).
pub const YOURLS_VERSION: &str = "1.10";
/// `stats` returns at most this many links.
const MAX_STATS_LIMIT: usize = 1000;
const STATS_SIMPLE: &str = "Need either XML or JSON format for stats";

/// A value in a YOURLS answer. PHP arrays keep insertion order, and clients read some answers
/// positionally (XML), so members are an ordered list rather than a map.
#[derive(Clone, Debug)]
enum Val {
    Str(String),
    Int(u64),
    Map(Obj),
}

#[derive(Clone, Debug, Default)]
struct Obj(Vec<(String, Val)>);

impl Obj {
    fn s(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.push((key.into(), Val::Str(value.into())));
        self
    }
    fn n(mut self, key: &str, value: u64) -> Self {
        self.0.push((key.into(), Val::Int(value)));
        self
    }
    fn m(mut self, key: &str, value: Obj) -> Self {
        self.0.push((key.into(), Val::Map(value)));
        self
    }
    fn get(&self, key: &str) -> Option<&Val> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// An answer: the members, and the text of the `simple` format (YOURLS's `simple` member).
struct Answer {
    body: Obj,
    simple: Option<String>,
}

impl Answer {
    fn new(body: Obj, simple: impl Into<String>) -> Self {
        Self {
            body,
            simple: Some(simple.into()),
        }
    }
}

/// The request's parameters, query string first, then a form body overriding it.
pub struct Params(Vec<(String, String)>);

impl Params {
    /// Reads the query string and a urlencoded or multipart body.
    pub async fn read(query: Option<&str>, headers: &HeaderMap, body: Bytes) -> Self {
        let mut pairs: Vec<(String, String)> = query
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let kind = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/x-www-form-urlencoded");
        let lower = kind.to_ascii_lowercase();
        if lower.starts_with("application/x-www-form-urlencoded") {
            pairs.extend(
                url::form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), v.into_owned())),
            );
        } else if lower.starts_with("multipart/form-data") {
            // Browser extensions post `FormData`, which is multipart.
            if let Ok(boundary) = multer::parse_boundary(kind) {
                pairs.extend(multipart_fields(body, boundary).await);
            }
        }
        Params(pairs)
    }

    /// [`Params::read`] for a caller without a runtime (the fuzz target). The body is whole in
    /// memory, so multer's one-item stream is always ready and a single poll finishes the read.
    pub fn parse(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Self {
        Self::read(query, headers, Bytes::copy_from_slice(body))
            .now_or_never()
            .unwrap_or(Params(Vec::new()))
    }

    /// The last value given for `name` (PHP keeps the last of repeated keys).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every name and value, in the order read.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// A value that is present and not empty (PHP's `!empty()`; "0" is empty too).
    fn filled(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty() && *v != "0")
    }
}

/// The text fields of a `multipart/form-data` body, read with multer (files are not
/// parameters of this API: PHP keeps them out of `$_REQUEST`). A malformed body gives the
/// fields read before the fault.
async fn multipart_fields(body: Bytes, boundary: String) -> Vec<(String, String)> {
    let stream = futures_util::stream::once(async move { Ok::<_, std::io::Error>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut fields = Vec::new();
    while let Ok(Some(field)) = form.next_field().await {
        let Some(name) = field.name().filter(|_| field.file_name().is_none()) else {
            continue;
        };
        let name = name.to_string();
        match field.text().await {
            Ok(value) => fields.push((name, value)),
            Err(_) => break,
        }
    }
    fields
}

/// `GET` and `POST /yourls-api.php`.
#[utoipa::path(method(get, post), path = "/yourls-api.php", tag = "yourls",
    responses((status = 200, description = "YOURLS 1.10 answer in `format` (xml by default, json, jsonp, simple)"),
        (status = 400, description = "YOURLS `fail` body or unknown action"), (status = 403, description = "Please log in"),
        (status = 404, description = "Short URL not found")))]
pub async fn api(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = if method == Method::POST {
        body
    } else {
        Bytes::new()
    };
    let params = Params::read(query.as_deref(), &headers, body).await;
    let format = params.get("format").unwrap_or("xml").to_string();
    let callback = params
        .get("callback")
        .or_else(|| params.get("jsonp"))
        .map(str::to_string);

    let ip = state.client_ip(peer.ip(), &headers);
    // `limits.rates.auth_per_ip`: signatures and passwords count with the API's keys.
    let presented = ["signature", "username", "password"]
        .iter()
        .any(|name| params.filled(name).is_some());
    let limited = if presented {
        state.limits.check_auth(ip).err()
    } else {
        None
    };
    let found = match limited {
        Some(e) => Err(AuthFailure::Limited(e)),
        None => authenticate(&state, &params).map_err(|message| {
            match presented.then(|| state.limits.auth_failed(ip)) {
                Some(Err(e)) => AuthFailure::Limited(e),
                _ => AuthFailure::Denied(message),
            }
        }),
    };
    let answer = match found {
        Err(AuthFailure::Limited(e)) => {
            let message = format!(
                "Too many failed logins from this address; try again in {} s",
                e.retry_after_secs
            );
            let body = Obj::default()
                .s("message", message.as_str())
                .s("errorCode", "429")
                .s("callback", params.get("callback").unwrap_or(""));
            let mut response = output(
                &format,
                Answer::new(body, message.as_str()),
                params.get("callback").map(str::to_string),
                true,
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(e.retry_after_secs));
            return response;
        }
        Err(AuthFailure::Denied(message)) => {
            // YOURLS's auth.php: the callback member is always there, empty when not given.
            let body = Obj::default()
                .s("message", message)
                .s("errorCode", "403")
                .s("callback", params.get("callback").unwrap_or(""));
            return output(
                &format,
                Answer::new(body, message),
                params.get("callback").map(str::to_string),
                true,
            );
        }
        Ok(principal) => {
            let ip = ip.to_string();
            let state2 = state.clone();
            let params = Params(params.0.clone());
            let work =
                tokio::task::spawn_blocking(move || dispatch(&state2, &principal, &params, &ip));
            match work.await {
                Ok(answer) => answer,
                Err(e) => failure_answer(&e.to_string()),
            }
        }
    };
    output(&format, answer, callback, false)
}

/// Why a request was not let in.
enum AuthFailure {
    /// YOURLS's message for a missing or wrong credential.
    Denied(&'static str),
    /// Past `limits.rates.auth_per_ip`.
    Limited(crate::limits::RateLimited),
}

/// Who signs in, by YOURLS's rules and in its order: `timestamp` + `signature`, then
/// `signature` alone, then `username` + `password`. The error is YOURLS's message.
fn authenticate(state: &AppState, params: &Params) -> Result<Arc<Principal>, &'static str> {
    let found =
        if let (Some(ts), Some(sig)) = (params.filled("timestamp"), params.filled("signature")) {
            check_timestamp_signature(state, ts, sig, params.get("hash"))
        } else if params.get("timestamp").is_none() {
            if let Some(sig) = params.filled("signature") {
                state.keys.lookup(sig)
            } else {
                check_password(state, params)
            }
        } else {
            check_password(state, params)
        };
    match found {
        Some(principal) => Ok(principal),
        None if params.get("username").is_some() || params.get("password").is_some() => {
            Err("Invalid username or password")
        }
        None => Err("Please log in"),
    }
}

fn check_password(state: &AppState, params: &Params) -> Option<Arc<Principal>> {
    let (user, password) = (params.filled("username")?, params.filled("password")?);
    state
        .config
        .yourls
        .users
        .iter()
        .find(|u| {
            // Compare digests so the time taken says nothing about the secret.
            constant_eq(u.username.as_bytes(), user.as_bytes())
                & constant_eq(
                    &Sha256::digest(u.password.as_bytes()),
                    &Sha256::digest(password.as_bytes()),
                )
        })
        .and_then(|u| state.keys.lookup(&u.key))
}

/// `signature` = hash(timestamp . key) or hash(key . timestamp), `hash` = md5 (default),
/// sha256, sha384 or sha512, with `timestamp` (seconds) within `yourls.signature_window`.
fn check_timestamp_signature(
    state: &AppState,
    timestamp: &str,
    signature: &str,
    hash: Option<&str>,
) -> Option<Arc<Principal>> {
    // PHP's (int) cast: leading digits, anything else is 0.
    let digits: String = timestamp
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let ts: i128 = digits.parse().unwrap_or(0);
    let now = i128::from(state.links.now() / 1000);
    let window = i128::from(state.config.yourls.signature_window.millis()? / 1000);
    if (now - ts).abs() >= window {
        return None;
    }
    let digest: fn(&[u8]) -> String = match hash.unwrap_or("md5") {
        "md5" => |b| hex::encode(Md5::digest(b)),
        "sha256" => |b| hex::encode(Sha256::digest(b)),
        "sha384" => |b| hex::encode(Sha384::digest(b)),
        "sha512" => |b| hex::encode(Sha512::digest(b)),
        _ => return None,
    };
    let signature = signature.to_ascii_lowercase();
    state.keys.find(|key| {
        let before = digest(format!("{timestamp}{key}").as_bytes());
        let after = digest(format!("{key}{timestamp}").as_bytes());
        constant_eq(before.as_bytes(), signature.as_bytes())
            | constant_eq(after.as_bytes(), signature.as_bytes())
    })
}

/// Equal bytes, compared in time that does not depend on where they differ.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Runs one action (on the blocking pool: creates are durable writes, stats walk the links).
fn dispatch(state: &AppState, principal: &Principal, params: &Params, ip: &str) -> Answer {
    let action = params.get("action").unwrap_or("");
    let result = match action {
        "shorturl" => shorturl(state, principal, params, ip),
        "expand" => expand(state, principal, params),
        "url-stats" => url_stats(state, principal, params),
        "stats" => stats(state, principal, params),
        "db-stats" => db_stats(state, principal),
        "version" => {
            let body = Obj::default().s("version", YOURLS_VERSION);
            let body = if params.get("db") == Some("1") {
                body.s("db_version", env!("CARGO_PKG_VERSION"))
            } else {
                body
            };
            Ok(Answer::new(body, YOURLS_VERSION))
        }
        _ => {
            let message = "Unknown or missing \"action\" parameter";
            Ok(Answer::new(
                Obj::default().s("errorCode", "400").s("message", message),
                message,
            ))
        }
    };
    result.unwrap_or_else(|e| failure_answer(&e.to_string()))
}

/// A server fault: logged, answered 500 without detail.
fn failure_answer(error: &str) -> Answer {
    tracing::error!(error = %error, "yourls-api request failed");
    let message = "the server failed to handle this request; the error is in its log";
    Answer::new(
        Obj::default().s("errorCode", "500").s("message", message),
        message,
    )
}

/// A `status: fail` answer of `shorturl`.
fn fail(code: &str, message: &str, status: &str) -> Answer {
    Answer::new(
        Obj::default()
            .s("status", "fail")
            .s("code", code)
            .s("message", message)
            .s("errorCode", status)
            .s("statusCode", status),
        "",
    )
}

fn forbidden(message: String) -> Answer {
    Answer::new(
        Obj::default()
            .s("message", message.as_str())
            .s("errorCode", "403"),
        message,
    )
}

/// YOURLS's `yourls_trim_long_string`: 60 characters at most, the cut marked `[...]`.
fn trim_long(text: &str) -> String {
    if text.chars().count() > 60 {
        let mut cut: String = text.chars().take(55).collect();
        cut.push_str("[...]");
        cut
    } else {
        text.to_string()
    }
}

/// `Y-m-d H:i:s`, UTC: the only date form YOURLS clients parse.
fn yourls_date(ms: Millis) -> String {
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    OffsetDateTime::from_unix_timestamp(i64::try_from(ms / 1000).unwrap_or(0))
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

/// A link's title as YOURLS shows it: YOURLS stores the URL when there is no title.
fn title_of(link: &Link) -> String {
    link.title.clone().unwrap_or_else(|| link.url.clone())
}

/// YOURLS adds `http://` to a URL written without a scheme (`example.com/a`).
fn with_scheme(raw: &str) -> String {
    let raw = raw.trim();
    let has_scheme = raw.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            && !s.contains('.')
    });
    if has_scheme || raw.is_empty() {
        raw.to_string()
    } else {
        format!("http://{raw}")
    }
}

fn shorturl(
    state: &AppState,
    principal: &Principal,
    params: &Params,
    ip: &str,
) -> Result<Answer, LinkError> {
    if principal.role < Role::Editor || !principal.allows_space(DEFAULT_SPACE) {
        return Ok(forbidden(format!(
            "the key `{}` may not create links in the space `{DEFAULT_SPACE}`",
            principal.name
        )));
    }
    // `limits.rates.create_per_key` counts creates through YOURLS too. YOURLS's own flood
    // check answers with these words and 429.
    if state.limits.check_key(&principal.name, 1).is_err() {
        return Ok(fail(
            "error:flood",
            "Too many URLs added too fast. Slow down please.",
            "429",
        ));
    }
    let url = with_scheme(params.get("url").unwrap_or(""));
    if url.is_empty() || url == "http://" || url == "https://" {
        return Ok(fail("error:nourl", "Missing or malformed URL", "400"));
    }
    if state.links.is_short_url(&url) {
        return Ok(fail("error:noloop", "URL is a short URL", "400"));
    }
    let keyword = params
        .get("keyword")
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let title = params
        .get("title")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let req = CreateLink {
        url: url.clone(),
        code: keyword.map(str::to_string),
        title,
        ..CreateLink::default()
    };
    let unique = state.config.yourls.unique_urls;
    // YOURLS checks the URL before the keyword: with a keyword, look the URL up first.
    let existing = match (unique, keyword) {
        (true, Some(_)) => state
            .links
            .existing_generated(&url, DEFAULT_SPACE)
            .map(|found| found.map(|l| (l, false))),
        _ => Ok(None),
    };
    let outcome = match existing {
        Ok(Some(found)) => Ok(found),
        Err(e) => Err(e),
        Ok(None) if unique || keyword.is_some() => state.links.create(req),
        Ok(None) => state.links.create_without_dedup(req).map(|l| (l, true)),
    };
    let (link, created) = match outcome {
        Ok(done) => done,
        Err(LinkError::CodeTaken(code)) => {
            return Ok(fail(
                "error:keyword",
                &format!("Short URL {code} already exists in database or is reserved"),
                "400",
            ))
        }
        Err(LinkError::Invalid {
            code: "invalid_code",
            detail,
            ..
        }) if detail.ends_with("reserved word") => {
            return Ok(fail(
                "error:keyword",
                &format!(
                    "Short URL {} already exists in database or is reserved",
                    keyword.unwrap_or("")
                ),
                "400",
            ))
        }
        Err(LinkError::Invalid { code, detail, .. }) => {
            return Ok(fail(&format!("error:{code}"), &detail, "400"))
        }
        Err(e @ LinkError::PoolExhausted(_)) => {
            return Ok(fail("error:pool_exhausted", &e.to_string(), "503"))
        }
        Err(e) => return Err(e),
    };
    let short = state.links.short_url(&link.code);
    if !created {
        let clicks = state.links.clicks(&link)?;
        let site = state
            .config
            .server
            .base_url
            .trim_end_matches('/')
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .to_string();
        let message = format!(
            "{} already exists in database (short URL: {site}/{})",
            trim_long(&link.url),
            link.code
        );
        let body = Obj::default()
            .s("status", "fail")
            .s("code", "error:url")
            .s("message", message)
            .s("errorCode", "400")
            .s("statusCode", "400")
            .m(
                "url",
                Obj::default()
                    .s("keyword", link.code.as_str())
                    .s("url", link.url.as_str())
                    .s("title", title_of(&link))
                    .s("date", yourls_date(link.created_at))
                    .s("ip", "")
                    .s("clicks", clicks.to_string()),
            )
            .s("title", title_of(&link))
            .s("shorturl", short.as_str());
        return Ok(Answer::new(body, short));
    }
    let body = Obj::default()
        .s("status", "success")
        .s("code", "")
        .s(
            "message",
            format!("{} added to database", trim_long(&link.url)),
        )
        .s("errorCode", "")
        .s("statusCode", "200")
        .m(
            "url",
            Obj::default()
                .s("keyword", link.code.as_str())
                .s("url", link.url.as_str())
                .s("title", title_of(&link))
                .s("date", yourls_date(link.created_at))
                .s("ip", ip),
        )
        .s("title", title_of(&link))
        .s("shorturl", short.as_str());
    Ok(Answer::new(body, short))
}

/// The keyword of `abc` or `<base_url>/abc`.
fn keyword_of(state: &AppState, shorturl: &str) -> String {
    let base = format!("{}/", state.config.server.base_url.trim_end_matches('/'));
    shorturl.trim().replace(&base, "")
}

/// The active link of a keyword the caller may see.
fn visible(
    state: &AppState,
    principal: &Principal,
    keyword: &str,
) -> Result<Option<Link>, LinkError> {
    match state.links.get(keyword) {
        Ok(link) if link.status == LinkStatus::Active && principal.allows_space(&link.space) => {
            Ok(Some(link))
        }
        Ok(_) | Err(LinkError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn expand(state: &AppState, principal: &Principal, params: &Params) -> Result<Answer, LinkError> {
    let keyword = keyword_of(state, params.get("shorturl").unwrap_or(""));
    Ok(match visible(state, principal, &keyword)? {
        Some(link) => Answer::new(
            Obj::default()
                .s("keyword", keyword.as_str())
                .s("shorturl", state.links.short_url(&link.code))
                .s("longurl", link.url.as_str())
                .s("title", title_of(&link))
                .s("message", "success")
                .s("statusCode", "200"),
            link.url.as_str(),
        ),
        None => Answer::new(
            Obj::default()
                .s("keyword", keyword.as_str())
                .s("message", "Error: short URL not found")
                .s("errorCode", "404"),
            "not found",
        ),
    })
}

/// One link as `url-stats` and `stats` show it.
fn link_stats(state: &AppState, link: &Link, clicks: u64) -> Obj {
    Obj::default()
        .s("shorturl", state.links.short_url(&link.code))
        .s("url", link.url.as_str())
        .s("title", title_of(link))
        .s("timestamp", yourls_date(link.created_at))
        .s("ip", "")
        .s("clicks", clicks.to_string())
}

fn url_stats(
    state: &AppState,
    principal: &Principal,
    params: &Params,
) -> Result<Answer, LinkError> {
    let keyword = keyword_of(state, params.get("shorturl").unwrap_or(""));
    Ok(match visible(state, principal, &keyword)? {
        Some(link) => {
            let clicks = state.links.clicks(&link)?;
            Answer::new(
                Obj::default()
                    .s("statusCode", "200")
                    .s("message", "success")
                    .m("link", link_stats(state, &link, clicks)),
                STATS_SIMPLE,
            )
        }
        None => Answer::new(
            Obj::default()
                .s("statusCode", "404")
                .s("message", "Error: short URL not found"),
            STATS_SIMPLE,
        ),
    })
}

/// Catalogue-wide statistics span every space: only keys without a space limit may read them.
fn all_spaces(principal: &Principal) -> Option<Answer> {
    principal.spaces.as_ref().map(|_| {
        forbidden(format!(
            "the key `{}` is limited to some spaces and cannot read statistics of all links",
            principal.name
        ))
    })
}

/// PHP's `intval`: leading sign and digits, else 0.
fn intval(text: Option<&str>) -> i64 {
    let text = text.unwrap_or("").trim();
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<i64>().map_or(0, |n| sign * n)
}

fn totals_obj(totals: Totals) -> Obj {
    Obj::default()
        .n("total_links", totals.links)
        .n("total_clicks", totals.clicks)
}

fn stats(state: &AppState, principal: &Principal, params: &Params) -> Result<Answer, LinkError> {
    if let Some(denied) = all_spaces(principal) {
        return Ok(denied);
    }
    let ranking = match params.get("filter").unwrap_or("") {
        "bottom" => Ranking::Bottom,
        "last" => Ranking::Last,
        "rand" | "random" => Ranking::Random,
        _ => Ranking::Top,
    };
    let limit = intval(params.get("limit"));
    let start = usize::try_from(intval(params.get("start"))).unwrap_or(0);
    let mut body = Obj::default();
    let limit = usize::try_from(limit).unwrap_or(0).min(MAX_STATS_LIMIT);
    // One walk gives both the ranked links and the totals.
    let (ranked, totals) = state.links.ranked(ranking, start, limit)?;
    // YOURLS sets `links` only when the query returned rows.
    if !ranked.is_empty() {
        let mut links = Obj::default();
        for (i, (link, clicks)) in ranked.iter().enumerate() {
            links = links.m(&format!("link_{}", i + 1), link_stats(state, link, *clicks));
        }
        body = body.m("links", links);
    }
    let body = body
        .m("stats", totals_obj(totals))
        .s("statusCode", "200")
        .s("message", "success");
    Ok(Answer::new(body, STATS_SIMPLE))
}

/// `db-stats`: the totals of the key's spaces (all of them for an unlimited key).
fn db_stats(state: &AppState, principal: &Principal) -> Result<Answer, LinkError> {
    let totals = state.links.totals_in(principal.spaces.as_deref())?;
    let body = Obj::default()
        .m("db-stats", totals_obj(totals))
        .s("statusCode", "200")
        .s("message", "success");
    Ok(Answer::new(body, STATS_SIMPLE))
}

/// Renders an answer in the asked format (`yourls_api_output`). `auth_failure` keeps the
/// callback member the failure body already carries.
fn output(format: &str, answer: Answer, callback: Option<String>, auth_failure: bool) -> Response {
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

    #[test]
    fn urls_without_scheme_get_http() {
        assert_eq!(with_scheme("example.com/a"), "http://example.com/a");
        assert_eq!(with_scheme("https://x.y"), "https://x.y");
        assert_eq!(with_scheme("javascript:alert(1)"), "javascript:alert(1)");
        assert_eq!(with_scheme("localhost:8080/x"), "localhost:8080/x");
    }

    #[test]
    fn long_strings_are_trimmed_like_yourls() {
        let long = "x".repeat(61);
        assert_eq!(trim_long(&long).chars().count(), 60);
        assert!(trim_long(&long).ends_with("[...]"));
        assert_eq!(trim_long("short"), "short");
    }

    #[test]
    fn multipart_text_fields_are_parameters_and_files_are_not() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data; boundary=\"XyZ\""),
        );
        let body = "--XyZ\r\nContent-Disposition: form-data; name=\"action\"\r\n\r\nexpand\r\n\
            --XyZ\r\nContent-Disposition: form-data; name=\"url\"; filename=\"a.txt\"\r\n\
            Content-Type: text/plain\r\n\r\nhttps://file.example/\r\n\
            --XyZ\r\ncontent-disposition: form-data; name=\"url\"\r\n\r\nhttps://a.example/?x=1\r\n\r\n\
            --XyZ--\r\n";
        let params = Params::parse(
            Some("action=version&format=json"),
            &headers,
            body.as_bytes(),
        );
        assert_eq!(params.get("action"), Some("expand"), "the body wins");
        assert_eq!(params.get("format"), Some("json"));
        assert_eq!(params.get("url"), Some("https://a.example/?x=1\r\n"));
        // A body cut short keeps the fields before the cut.
        let cut = &body[..body.find("--XyZ\r\ncontent-disposition").unwrap_or(0) + 20];
        let params = Params::parse(None, &headers, cut.as_bytes());
        assert_eq!(
            params.pairs(),
            [("action".to_string(), "expand".to_string())]
        );
    }

    #[test]
    fn intval_reads_leading_digits() {
        assert_eq!(intval(Some("12abc")), 12);
        assert_eq!(intval(Some("-3")), -3);
        assert_eq!(intval(None), 0);
    }
}
