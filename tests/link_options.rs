//! Link options against the real binary: passwords (the browser form, the `X-Link-Password`
//! header, JSON answers, the per-address limit, the preview), visit caps, `valid_from`,
//! `fallback_url`, targeting rules (device, OS, in-app browser, language, country, address,
//! query, time window; first match wins), rotation targets (weighted shares and stickiness,
//! round robin, failover with per-target caps), exact caps under concurrency and across a
//! `kill -9`, bad values, export → import, and the route each visit records.
//!
//! Every server here honours `TEST_STORE=postgres`, so CI runs them on both backends.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use common::cli::{text, vsl};
use common::{problem, TestApp, ADMIN, BASE_URL};
use reqwest::blocking::{Client, Response};
use reqwest::Method;
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const MAC: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15";
const LINUX: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const CHROMEOS: &str = "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36";
const TABLET: &str = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const CURL: &str = "curl/8.5.0";
const WECHAT_ANDROID: &str = "Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/116.0 Mobile Safari/537.36 XWEB/1160065 MMWEBSDK/20231202 MicroMessenger/8.0.47.2560(0x28002F30) WeChat/arm64 Weixin NetType/WIFI Language/zh_CN";
const WECHAT_IOS: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.42(0x18002a2f) NetType/WIFI Language/zh_CN";
const WXWORK: &str = "Mozilla/5.0 (Windows NT 10.0; WOW64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/81.0.4044.138 Safari/537.36 wxwork/4.1.16 (MicroMessenger/6.2) WindowsWechat";
const DOUYIN: &str = "Mozilla/5.0 (Linux; Android 11; V2055A) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/75.0.3770.156 Mobile Safari/537.36 aweme_200101 JsSdk/1.0 NetType/WIFI Channel/douyin_vivo AppName/aweme app_version/20.1.0 ByteLocale/zh-CN Region/CN BytedanceWebview/d8a21c6";
const TIKTOK: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 16_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 musical_ly_30.3.0 JsSdk/2.0 NetType/WIFI Channel/App Store ByteLocale/en Region/US BytedanceWebview/d8a21c6";
const INSTAGRAM: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 302.0.0.23.114 (iPhone14,5; iOS 17_0; en_US; en; scale=3.00; 1170x2532; 522393020)";
const FACEBOOK: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/17.0;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]";
const QQ: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 QQ/8.9.80.626 V1_IPH_SQ_8.9.80_1_APP_A Pixel/1170";
const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

// ---------------------------------------------------------------------------------------------
// Helpers

/// RFC 3339 of now plus `seconds`, whole seconds.
fn at(seconds: i64) -> String {
    let t = OffsetDateTime::now_utc() + time::Duration::seconds(seconds);
    t.replace_nanosecond(0)
        .expect("whole second")
        .format(&Rfc3339)
        .expect("format")
}

fn parse_time(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).unwrap_or_else(|e| panic!("not RFC 3339: {s}: {e}"))
}

fn code_of(link: &Value) -> String {
    link["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code in {link}"))
        .to_string()
}

/// The link as `GET /api/v1/links/{code}` shows it.
fn link_of(app: &TestApp, code: &str) -> Value {
    app.api_get(&format!("/api/v1/links/{code}"), ADMIN)
}

/// True when the key is missing or null.
fn absent(value: &Value, key: &str) -> bool {
    value.get(key).is_none_or(Value::is_null)
}

fn patch(app: &TestApp, code: &str, body: &Value) -> Response {
    app.req(Method::PATCH, &format!("/api/v1/links/{code}"), Some(ADMIN))
        .json(body)
        .send()
        .expect("PATCH")
}

fn patch_ok(app: &TestApp, code: &str, body: &Value) -> Value {
    let response = patch(app, code, body);
    let status = response.status().as_u16();
    let json: Value = response.json().expect("json");
    assert_eq!(status, 200, "PATCH {code} {body}: {json}");
    json
}

/// `GET path` (a short code, with its query) with the given headers.
fn visit(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Response {
    visit_with(&app.client, &app.url(path), headers)
}

fn visit_with(client: &Client, url: &str, headers: &[(&str, &str)]) -> Response {
    let mut request = client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().expect("GET")
}

fn location(response: &Response) -> Option<String> {
    response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Follows `path` once, asserting a 302, and returns where it sent the visitor.
fn dest(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> String {
    let response = visit(app, path, headers);
    let status = response.status().as_u16();
    let to = location(&response);
    assert_eq!(status, 302, "GET {path} with {headers:?}");
    to.unwrap_or_else(|| panic!("302 without Location for {path}"))
}

fn status_of(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> u16 {
    visit(app, path, headers).status().as_u16()
}

/// Waits until the writer has recorded `n` visits of `code`.
fn wait_visits(app: &TestApp, code: &str, n: u64) -> Value {
    let started = Instant::now();
    loop {
        let link = link_of(app, code);
        if link["visits_total"].as_u64() == Some(n) {
            return link;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "visits_total of {code} stayed {} (want {n})",
            link["visits_total"]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `n` visits, then a little longer (the writer writes about once a second), and
/// asserts no more arrived.
fn exactly_visits(app: &TestApp, code: &str, n: u64) {
    wait_visits(app, code, n);
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(
        link_of(app, code)["visits_total"].as_u64(),
        Some(n),
        "{code}: more visits recorded than redirects answered"
    );
}

fn visits(app: &TestApp, code: &str) -> Vec<Value> {
    let page = app.api_get(&format!("/api/v1/links/{code}/visits?limit=1000"), ADMIN);
    page["items"].as_array().cloned().unwrap_or_default()
}

/// Polls the link until `check` holds (a few seconds), returning it; else fails showing it.
fn link_until(app: &TestApp, code: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let link = link_of(app, code);
        if check(&link) {
            return link;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{code}: {what}: {link}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_ended_by_cap(app: &TestApp, code: &str) -> Value {
    link_until(app, code, "status expired, ended_by max_visits", |l| {
        l["status"] == "expired" && l["ended_by"] == "max_visits"
    })
}

fn run_maintenance(app: &TestApp) {
    let response = app
        .req(Method::POST, "/api/v1/maintenance/run", Some(ADMIN))
        .send()
        .expect("maintenance");
    assert_eq!(response.status().as_u16(), 200, "maintenance run");
}

/// A server with the test geo database whose visitors' addresses come from
/// `X-Forwarded-For` (the loopback is a trusted proxy by default). Keep the directory alive.
#[cfg(feature = "geo")]
fn geo_app(extra: &str) -> (tempfile::TempDir, TestApp) {
    let geo_dir = tempfile::tempdir().expect("dir");
    let geo_db = geo_dir.path().join("test-geo.mmdb");
    common::mmdb::write_test_geo_db(&geo_db);
    let app = TestApp::start_with(
        &format!(
            "[visits]\ngeo_db = \"{}\"\nip = \"full\"\n{extra}",
            geo_db.display()
        ),
        &[("VSL_SERVER__TRUST_PROXY_HEADERS", "true")],
    );
    (geo_dir, app)
}

// ---------------------------------------------------------------------------------------------
// Passwords

#[test]
fn a_password_protected_link_asks_browsers_for_a_form_and_api_clients_for_a_header() {
    let app = TestApp::start();
    let destination = "https://secret.example/hidden/destination";
    let password = "open sesame";
    let created = app.create(json!({"url": destination, "password": password}));
    let code = code_of(&created);
    assert!(!created.to_string().contains(password), "{created}");
    assert!(created.get("password").is_none(), "{created}");

    // Write-only: never shown, only said to be there.
    let link = link_of(&app, &code);
    assert_eq!(link["password_protected"], true, "{link}");
    assert!(link.get("password").is_none(), "{link}");
    assert!(!link.to_string().contains(password));
    let listing = app.api_get("/api/v1/links?limit=1000", ADMIN).to_string();
    assert!(!listing.contains(password), "{listing}");
    let plain = app.create(json!({"url": "https://example.com/plain-password-control"}));
    assert_eq!(link_of(&app, &code_of(&plain))["password_protected"], false);

    let path = format!("/{code}");
    // A browser gets the form, and nothing that names the destination.
    let response = visit(&app, &path, &[("accept", BROWSER_ACCEPT)]);
    assert_eq!(response.status().as_u16(), 200);
    assert!(location(&response).is_none());
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("text/html"), "{kind}");
    let page = response.text().unwrap();
    assert!(page.contains("<form method=\"post\""), "{page}");
    assert!(page.contains("name=\"password\""), "{page}");
    assert!(
        !page.contains("secret.example"),
        "the form leaks the destination"
    );

    // The form, posted: wrong → 403 with the form again; right → 302 (no token needed).
    let wrong = app
        .client
        .post(app.url(&path))
        .header("accept", BROWSER_ACCEPT)
        .form(&[("password", "open barley")])
        .send()
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 403);
    assert!(location(&wrong).is_none());
    let page = wrong.text().unwrap();
    assert!(page.contains("<form method=\"post\""), "{page}");
    assert!(page.contains("name=\"password\""), "{page}");
    assert!(!page.contains("secret.example"));
    let right = app
        .client
        .post(app.url(&path))
        .header("accept", BROWSER_ACCEPT)
        .form(&[("password", password)])
        .send()
        .unwrap();
    assert_eq!(right.status().as_u16(), 302);
    assert_eq!(location(&right).as_deref(), Some(destination));

    // The header: right → 302 at once; wrong → 403 wrong_password; JSON without it → 401.
    assert_eq!(
        dest(&app, &path, &[("x-link-password", password)]),
        destination
    );
    let p = problem(
        visit(&app, &path, &[("x-link-password", "not it at all")]),
        403,
    );
    assert_eq!(p["code"], "wrong_password", "{p}");
    let p = problem(visit(&app, &path, &[("accept", "application/json")]), 401);
    assert_eq!(p["code"], "password_required", "{p}");
    assert!(!p.to_string().contains("secret.example"));

    // HEAD without the password does not hand out the destination either.
    let head = app.client.head(app.url(&path)).send().unwrap();
    assert_ne!(
        location(&head).as_deref(),
        Some(destination),
        "HEAD leaks the destination"
    );

    // The preview hides the destination of a protected link, and shows a plain one's.
    let preview = app.get(&format!("/{code}+")).text().unwrap();
    assert!(!preview.contains("secret.example"), "{preview}");
    let shown = app.get(&format!("/{}+", code_of(&plain))).text().unwrap();
    assert!(shown.contains("plain-password-control"), "{shown}");

    // Only the two redirects are visits: not the form, the refusals or HEAD.
    exactly_visits(&app, &code, 2);

    // A new password replaces the old; null removes it.
    patch_ok(&app, &code, &json!({"password": "second secret"}));
    let p = problem(visit(&app, &path, &[("x-link-password", password)]), 403);
    assert_eq!(p["code"], "wrong_password");
    assert_eq!(
        dest(&app, &path, &[("x-link-password", "second secret")]),
        destination
    );
    let unprotected = patch_ok(&app, &code, &json!({"password": null}));
    assert_eq!(unprotected["password_protected"], false, "{unprotected}");
    assert_eq!(link_of(&app, &code)["password_protected"], false);
    assert_eq!(dest(&app, &path, &[]), destination);
}

#[test]
fn password_attempts_past_the_per_address_limit_are_refused_even_when_right() {
    let app = TestApp::start_with(
        "[limits.rates]\npassword_per_ip = \"3/m\"\n",
        &[("VSL_SERVER__TRUST_PROXY_HEADERS", "true")],
    );
    let destination = "https://example.com/limited-password";
    let code = code_of(&app.create(json!({"url": destination, "password": "correct horse"})));
    let path = format!("/{code}");
    let attempt = |from: &str, password: &str| {
        app.client
            .post(app.url(&path))
            .header("accept", BROWSER_ACCEPT)
            .header("x-forwarded-for", from)
            .form(&[("password", password)])
            .send()
            .unwrap()
    };
    for i in 0..3 {
        let r = attempt("198.51.100.1", &format!("guess number {i}"));
        assert_eq!(r.status().as_u16(), 403, "attempt {i}");
    }
    let limited = attempt("198.51.100.1", "guess number 3");
    assert_eq!(limited.status().as_u16(), 429);
    assert!(limited.headers().get("retry-after").is_some());
    // Past the limit even the right password is refused: guessing cannot go on.
    let right = attempt("198.51.100.1", "correct horse");
    assert_eq!(right.status().as_u16(), 429);
    assert!(location(&right).is_none());
    // Another address is not limited.
    assert_eq!(attempt("198.51.100.2", "wrong once").status().as_u16(), 403);
    let other = attempt("198.51.100.2", "correct horse");
    assert_eq!(other.status().as_u16(), 302);
    assert_eq!(location(&other).as_deref(), Some(destination));
}

// ---------------------------------------------------------------------------------------------
// max_visits, valid_from, fallback_url

#[test]
fn max_visits_ends_the_link_after_that_many_redirects() {
    let app = TestApp::start();
    let destination = "https://example.com/capped-three";
    let code = code_of(&app.create(json!({"url": destination, "max_visits": 3})));
    let link = link_of(&app, &code);
    assert_eq!(link["max_visits"], 3, "{link}");
    assert_eq!(link["visits_remaining"], 3, "{link}");
    assert_eq!(link["status"], "active");
    assert!(absent(&link, "ended_by"), "{link}");
    assert_eq!(link["password_protected"], false);

    for remaining in [2, 1, 0] {
        assert_eq!(dest(&app, &format!("/{code}"), &[]), destination);
        // Counted before the answer: the next read sees it.
        assert_eq!(link_of(&app, &code)["visits_remaining"], remaining);
    }
    assert_eq!(status_of(&app, &format!("/{code}"), &[]), 410);
    let json_gone = visit(&app, &format!("/{code}"), &[("accept", "application/json")]);
    assert_eq!(problem(json_gone, 410)["code"], "gone");
    let link = assert_ended_by_cap(&app, &code);
    assert_eq!(link["visits_remaining"], 0, "{link}");
    exactly_visits(&app, &code, 3);

    // A plain link has no cap to show.
    let plain = link_of(
        &app,
        &code_of(&app.create(json!({"url": "https://example.com/uncapped"}))),
    );
    assert!(absent(&plain, "visits_remaining"), "{plain}");
    assert!(absent(&plain, "max_visits"), "{plain}");

    // A PATCH moves the cap, counting the redirects already made; null removes it.
    let moved =
        code_of(&app.create(json!({"url": "https://example.com/capped-moved", "max_visits": 5})));
    dest(&app, &format!("/{moved}"), &[]);
    let patched = patch_ok(&app, &moved, &json!({"max_visits": 2}));
    assert_eq!(patched["max_visits"], 2, "{patched}");
    assert_eq!(link_of(&app, &moved)["visits_remaining"], 1);
    let uncapped = patch_ok(&app, &moved, &json!({"max_visits": null}));
    assert!(absent(&uncapped, "max_visits"), "{uncapped}");
    assert!(absent(&link_of(&app, &moved), "visits_remaining"));
    for _ in 0..3 {
        dest(&app, &format!("/{moved}"), &[]);
    }
    assert_eq!(link_of(&app, &moved)["status"], "active");
}

#[test]
fn before_valid_from_the_code_answers_as_unknown_and_records_nothing() {
    let app = TestApp::start();
    let destination = "https://example.com/starts-soon";
    let from = at(3);
    let created = app.create(json!({"url": destination, "valid_from": from}));
    let code = code_of(&created);
    let link = link_of(&app, &code);
    assert_eq!(
        parse_time(link["valid_from"].as_str().expect("valid_from shown")),
        parse_time(&from),
        "{link}"
    );
    let path = format!("/{code}");

    // Like an unknown code: 404, in the same words as one.
    assert_eq!(status_of(&app, &path, &[]), 404);
    let unknown = problem(
        visit(&app, "/zzzzzz", &[("accept", "application/json")]),
        404,
    );
    let early = problem(visit(&app, &path, &[("accept", "application/json")]), 404);
    assert_eq!(early["code"], unknown["code"], "{early}");

    // Then, once the time has come, it redirects (polled slowly: 404s are rate limited).
    let start = parse_time(&from);
    let started = Instant::now();
    loop {
        let response = visit(&app, &path, &[]);
        match response.status().as_u16() {
            404 => {}
            302 => {
                assert_eq!(location(&response).as_deref(), Some(destination));
                let now = OffsetDateTime::now_utc();
                assert!(
                    now + time::Duration::milliseconds(500) >= start,
                    "redirected at {now}, before valid_from {from}"
                );
                break;
            }
            other => panic!("GET {path} before/at valid_from: {other}"),
        }
        assert!(started.elapsed() < Duration::from_secs(15), "never started");
        std::thread::sleep(Duration::from_millis(250));
    }
    // The 404s were no visits; the redirect was.
    exactly_visits(&app, &code, 1);

    // A far start, removed with a PATCH: redirects at once.
    let later =
        code_of(&app.create(
            json!({"url": "https://example.com/starts-tomorrow", "valid_from": at(86_400)}),
        ));
    assert_eq!(status_of(&app, &format!("/{later}"), &[]), 404);
    let patched = patch_ok(&app, &later, &json!({"valid_from": null}));
    assert!(absent(&patched, "valid_from"), "{patched}");
    assert_eq!(
        dest(&app, &format!("/{later}"), &[]),
        "https://example.com/starts-tomorrow"
    );
}

#[test]
fn fallback_url_takes_visitors_once_the_link_has_ended_but_not_once_deleted() {
    let app = TestApp::start();
    // Ended by its cap.
    let fallback = "https://example.org/sold-out";
    let capped = code_of(&app.create(json!({
        "url": "https://example.com/offer", "max_visits": 1, "fallback_url": fallback
    })));
    assert_eq!(link_of(&app, &capped)["fallback_url"], fallback);
    assert_eq!(
        dest(&app, &format!("/{capped}"), &[]),
        "https://example.com/offer"
    );
    for _ in 0..2 {
        assert_eq!(dest(&app, &format!("/{capped}"), &[]), fallback);
    }
    let link = assert_ended_by_cap(&app, &capped);
    assert_eq!(link["visits_remaining"], 0);
    // The fallback redirects are no visits.
    exactly_visits(&app, &capped, 1);

    // Ended by its expiry: the fallback at once, and still after the daily job marks it.
    let expiring_fallback = "https://example.org/too-late";
    let expiring = code_of(&app.create(json!({
        "url": "https://example.com/brief-offer", "ttl": 1, "fallback_url": expiring_fallback
    })));
    let bare = code_of(&app.create(json!({"url": "https://example.com/brief-bare", "ttl": 1})));
    assert_eq!(
        dest(&app, &format!("/{expiring}"), &[]),
        "https://example.com/brief-offer"
    );
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(dest(&app, &format!("/{expiring}"), &[]), expiring_fallback);
    assert_eq!(status_of(&app, &format!("/{bare}"), &[]), 410);
    run_maintenance(&app);
    for code in [&expiring, &bare] {
        let link = link_of(&app, code);
        assert_eq!(link["status"], "expired", "{link}");
        assert_eq!(link["ended_by"], "expiry", "{link}");
    }
    assert_eq!(dest(&app, &format!("/{expiring}"), &[]), expiring_fallback);
    assert_eq!(status_of(&app, &format!("/{bare}"), &[]), 410);
    exactly_visits(&app, &expiring, 1);

    // Deleted: 410, whatever the fallback.
    let deleted = code_of(&app.create(json!({
        "url": "https://example.com/withdrawn", "fallback_url": "https://example.org/elsewhere"
    })));
    let response = app
        .req(
            Method::DELETE,
            &format!("/api/v1/links/{deleted}"),
            Some(ADMIN),
        )
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let gone = visit(&app, &format!("/{deleted}"), &[]);
    assert_eq!(gone.status().as_u16(), 410);
    assert!(location(&gone).is_none());
}

// ---------------------------------------------------------------------------------------------
// Rules

/// Asserts where each (headers, expected destination) case goes on `path`.
fn expect_routes(app: &TestApp, path: &str, cases: &[(&[(&str, &str)], &str)]) {
    for (headers, expected) in cases {
        let got = dest(app, path, headers);
        assert_eq!(&got, expected, "GET {path} with {headers:?}");
    }
}

#[test]
fn device_os_and_app_rules_follow_the_user_agent() {
    let app = TestApp::start();
    let d = "https://example.com/ua-default";
    let device = code_of(&app.create(json!({
        "url": d,
        "rules": [
            {"if": {"device": "mobile"}, "url": "https://m.example/"},
            {"if": {"device": ["tablet", "bot"]}, "url": "https://tb.example/"},
        ]
    })));
    let link = link_of(&app, &device);
    assert_eq!(link["rules"].as_array().map(Vec::len), Some(2), "{link}");
    assert_eq!(link["rules"][1]["url"], "https://tb.example/");
    expect_routes(
        &app,
        &format!("/{device}"),
        &[
            (&[("user-agent", DESKTOP)], d),
            (&[("user-agent", PHONE)], "https://m.example/"),
            (&[("user-agent", ANDROID)], "https://m.example/"),
            (&[("user-agent", TABLET)], "https://tb.example/"),
            (&[("user-agent", GOOGLEBOT)], "https://tb.example/"),
            (&[("user-agent", CURL)], d),
        ],
    );

    let d = "https://example.com/os-default";
    let os = code_of(&app.create(json!({
        "url": d,
        "rules": [
            {"if": {"os": "ios"}, "url": "https://ios.example/"},
            {"if": {"os": ["android"]}, "url": "https://android.example/"},
            {"if": {"os": ["windows", "macos"]}, "url": "https://desk.example/"},
            {"if": {"os": "linux"}, "url": "https://linux.example/"},
            {"if": {"os": "chromeos"}, "url": "https://cros.example/"},
        ]
    })));
    expect_routes(
        &app,
        &format!("/{os}"),
        &[
            (&[("user-agent", PHONE)], "https://ios.example/"),
            (&[("user-agent", TABLET)], "https://ios.example/"),
            (&[("user-agent", ANDROID)], "https://android.example/"),
            (&[("user-agent", DESKTOP)], "https://desk.example/"),
            (&[("user-agent", MAC)], "https://desk.example/"),
            (&[("user-agent", LINUX)], "https://linux.example/"),
            (&[("user-agent", CHROMEOS)], "https://cros.example/"),
            (&[("user-agent", CURL)], d),
        ],
    );

    let d = "https://example.com/app-default";
    let apps = code_of(&app.create(json!({
        "url": d,
        "rules": [
            {"if": {"app": "wechat"}, "url": "https://wechat.example/"},
            {"if": {"app": ["douyin"]}, "url": "https://douyin.example/"},
            {"if": {"app": ["instagram", "facebook"]}, "url": "https://social.example/"},
            {"if": {"app": "qq"}, "url": "https://qq.example/"},
        ]
    })));
    expect_routes(
        &app,
        &format!("/{apps}"),
        &[
            (&[("user-agent", WECHAT_ANDROID)], "https://wechat.example/"),
            (&[("user-agent", WECHAT_IOS)], "https://wechat.example/"),
            (&[("user-agent", WXWORK)], "https://wechat.example/"),
            (&[("user-agent", DOUYIN)], "https://douyin.example/"),
            (&[("user-agent", TIKTOK)], "https://douyin.example/"),
            (&[("user-agent", INSTAGRAM)], "https://social.example/"),
            (&[("user-agent", FACEBOOK)], "https://social.example/"),
            (&[("user-agent", QQ)], "https://qq.example/"),
            (&[("user-agent", PHONE)], d),
            (&[("user-agent", ANDROID)], d),
            (&[("user-agent", DESKTOP)], d),
        ],
    );
}

#[test]
fn language_rules_read_accept_language_by_primary_tag_and_q_value() {
    let app = TestApp::start();
    let d = "https://example.com/lang-default";
    let code = code_of(&app.create(json!({
        "url": d,
        "rules": [
            {"if": {"language": "zh-CN"}, "url": "https://zh-cn.example/"},
            {"if": {"language": ["zh"]}, "url": "https://zh.example/"},
            {"if": {"language": ["en", "fr"]}, "url": "https://en-fr.example/"},
        ]
    })));
    let al = |v: &'static str| [("accept-language", v)];
    let cases: Vec<([(&str, &str); 1], &str)> = vec![
        (al("zh-CN,zh;q=0.9,en;q=0.8"), "https://zh-cn.example/"),
        (al("zh-cn"), "https://zh-cn.example/"),
        (al("ZH-CN"), "https://zh-cn.example/"),
        // `zh-CN` is only itself; `zh` is every Chinese.
        (al("zh-TW"), "https://zh.example/"),
        (al("zh"), "https://zh.example/"),
        (al("zh-Hant-HK"), "https://zh.example/"),
        (al("en-US,en;q=0.8"), "https://en-fr.example/"),
        (al("de-DE, fr;q=0.5"), "https://en-fr.example/"),
        (al("FR"), "https://en-fr.example/"),
        // q=0 is "not this one".
        (al("de, en;q=0"), d),
        (al("de, zh-CN;q=0"), d),
        (al("*"), d),
        // `en` is not a prefix of `eng`.
        (al("eng"), d),
    ];
    for (headers, expected) in &cases {
        assert_eq!(
            &dest(&app, &format!("/{code}"), headers),
            expected,
            "{headers:?}"
        );
    }
    assert_eq!(dest(&app, &format!("/{code}"), &[]), d, "no header");
}

#[test]
#[cfg(feature = "geo")]
fn country_and_ip_rules_follow_the_client_address() {
    let (_geo, app) = geo_app("");
    let d = "https://example.com/geo-default";
    let country = code_of(&app.create(json!({
        "url": d,
        "rules": [
            {"if": {"country": "GB"}, "url": "https://gb.example/"},
            {"if": {"country": ["DE", "FR"]}, "url": "https://de-fr.example/"},
        ]
    })));
    let xff = |v: &'static str| [("x-forwarded-for", v)];
    for (headers, expected) in [
        (&xff("81.2.69.160")[..], "https://gb.example/"),
        (&xff("2001:db8::7")[..], "https://de-fr.example/"),
        // Not in the database; the loopback is ZZ.
        (&xff("203.0.113.9")[..], d),
        (&[][..], d),
    ] {
        assert_eq!(
            dest(&app, &format!("/{country}"), headers),
            expected,
            "{headers:?}"
        );
    }

    let ip = code_of(&app.create(json!({
        "url": "https://example.com/ip-default",
        "rules": [
            {"if": {"ip": "81.2.69.0/24"}, "url": "https://net4.example/"},
            {"if": {"ip": ["2001:db8::/32", "203.0.113.7"]}, "url": "https://other.example/"},
            {"if": {"ip": "127.0.0.1"}, "url": "https://loopback.example/"},
        ]
    })));
    for (headers, expected) in [
        (&xff("81.2.69.1")[..], "https://net4.example/"),
        (&xff("81.2.69.254")[..], "https://net4.example/"),
        (&xff("81.2.70.1")[..], "https://example.com/ip-default"),
        (&xff("203.0.113.7")[..], "https://other.example/"),
        (&xff("203.0.113.8")[..], "https://example.com/ip-default"),
        (&xff("2001:db8:1::1")[..], "https://other.example/"),
        (&xff("2001:db9::1")[..], "https://example.com/ip-default"),
        (&[][..], "https://loopback.example/"),
    ] {
        assert_eq!(
            dest(&app, &format!("/{ip}"), headers),
            expected,
            "{headers:?}"
        );
    }
}

#[test]
fn query_and_time_rules_hold_and_the_first_matching_rule_decides() {
    let app = TestApp::start();
    let d = "https://example.com/query-default";
    let query = code_of(&app.create(json!({
        "url": d,
        "rules": [
            {"if": {"query": {"utm_source": "mail"}}, "url": "https://mail.example/"},
            {"if": {"query": {"ref": "*", "lang": "de"}}, "url": "https://ref-de.example/"},
            {"if": {"query": {"ref": "*"}}, "url": "https://ref.example/"},
        ]
    })));
    for (query_string, expected) in [
        ("?utm_source=mail", "https://mail.example/"),
        ("?x=1&utm_source=mail&y=2", "https://mail.example/"),
        ("?utm_source=web", d),
        ("?utm_source=mail2", d),
        ("?ref=abc&lang=de", "https://ref-de.example/"),
        ("?lang=de&ref=zzz", "https://ref-de.example/"),
        ("?ref=abc&lang=en", "https://ref.example/"),
        ("?ref=abc", "https://ref.example/"),
        ("?lang=de", d),
        ("", d),
    ] {
        assert_eq!(
            dest(&app, &format!("/{query}{query_string}"), &[]),
            expected,
            "{query_string}"
        );
    }

    // after ≤ now < before.
    let window = code_of(&app.create(json!({
        "url": "https://example.com/time-default",
        "rules": [
            {"if": {"before": at(-3600)}, "url": "https://past.example/"},
            {"if": {"after": at(3600)}, "url": "https://future.example/"},
            {"if": {"after": at(-3600), "before": at(3600)}, "url": "https://now.example/"},
        ]
    })));
    assert_eq!(
        dest(&app, &format!("/{window}"), &[]),
        "https://now.example/"
    );
    let closing = code_of(&app.create(json!({
        "url": "https://example.com/closing-default",
        "rules": [{"if": {"before": at(2)}, "url": "https://early-bird.example/"}]
    })));
    assert_eq!(
        dest(&app, &format!("/{closing}"), &[]),
        "https://early-bird.example/"
    );

    // Every condition of a rule must hold; the first rule that holds decides.
    let d = "https://example.com/first-default";
    let first = code_of(&app.create(json!({
        "url": d,
        "rules": [
            {"if": {"device": "mobile", "language": "de"}, "url": "https://mobile-de.example/"},
            {"if": {"device": "mobile"}, "url": "https://mobile.example/"},
            {"if": {"os": "ios"}, "url": "https://ios.example/"},
            {"if": {"query": {"any": "*"}}, "url": "https://never-first.example/"},
        ]
    })));
    let path = format!("/{first}");
    expect_routes(
        &app,
        &path,
        &[
            (
                &[("user-agent", PHONE), ("accept-language", "de-DE")],
                "https://mobile-de.example/",
            ),
            (
                &[("user-agent", PHONE), ("accept-language", "en")],
                "https://mobile.example/",
            ),
            (&[("user-agent", TABLET)], "https://ios.example/"),
            (&[("user-agent", DESKTOP)], d),
        ],
    );
    assert_eq!(
        dest(&app, &format!("{path}?any=1"), &[("user-agent", PHONE)]),
        "https://mobile.example/"
    );
    assert_eq!(
        dest(&app, &format!("{path}?any=1"), &[("user-agent", DESKTOP)]),
        "https://never-first.example/"
    );

    // The `before` two seconds ahead has passed by now (polled a few seconds).
    let started = Instant::now();
    while dest(&app, &format!("/{closing}"), &[]) != "https://example.com/closing-default" {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "`before` never closed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ---------------------------------------------------------------------------------------------
// Rotation

/// `n` requests, each a distinct visitor (its own user agent), spread over `threads`
/// threads; the destinations in request order.
fn distinct_visitors(app: &TestApp, path: &str, n: usize, threads: usize) -> Vec<String> {
    let url = app.url(path);
    let out = Mutex::new(vec![String::new(); n]);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (url, out, client) = (&url, &out, &app.client);
            s.spawn(move || {
                for i in (t..n).step_by(threads) {
                    let ua = format!("Mozilla/5.0 (rotation visitor {i})");
                    let response = visit_with(client, url, &[("user-agent", ua.as_str())]);
                    assert_eq!(response.status().as_u16(), 302, "visitor {i}");
                    let to = location(&response).expect("Location");
                    out.lock().unwrap()[i] = to;
                }
            });
        }
    });
    out.into_inner().unwrap()
}

#[test]
fn weighted_rotation_follows_the_weights_and_keeps_each_visitor_on_one_target() {
    let app = TestApp::start();
    let urls = [
        "https://one.example/w",
        "https://two.example/w",
        "https://seven.example/w",
    ];
    let created = app.create(json!({
        "targets": [
            {"url": urls[0], "weight": 1},
            {"url": urls[1], "weight": 2},
            {"url": urls[2], "weight": 7},
        ]
    }));
    let code = code_of(&created);
    let link = link_of(&app, &code);
    // Without `url`, the first target's is the link's.
    assert_eq!(link["url"], urls[0], "{link}");
    assert_eq!(link["rotation"], "weighted", "the default rotation");
    let targets = link["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 3);
    for (i, weight) in [1, 2, 7].into_iter().enumerate() {
        assert_eq!(targets[i]["url"], urls[i]);
        assert_eq!(targets[i]["weight"], weight);
        assert!(absent(&targets[i], "max_visits"), "{link}");
        assert!(absent(&targets[i], "visits_remaining"), "{link}");
    }

    let n = 10_000;
    let got = distinct_visitors(&app, &format!("/{code}"), n, 8);
    let mut counts = [0usize; 3];
    for to in &got {
        let i = urls
            .iter()
            .position(|u| u == to)
            .unwrap_or_else(|| panic!("not a target: {to}"));
        counts[i] += 1;
    }
    for (i, share) in [0.1, 0.2, 0.7].into_iter().enumerate() {
        let seen = counts[i] as f64 / n as f64;
        assert!(
            (seen - share).abs() <= 0.03,
            "target {i} got {seen:.3} of visitors, its weight says {share} ({counts:?})"
        );
    }

    // The same visitor (address and user agent) keeps its target.
    for i in (0..n).step_by(97).take(60) {
        let ua = format!("Mozilla/5.0 (rotation visitor {i})");
        for _ in 0..3 {
            assert_eq!(
                dest(&app, &format!("/{code}"), &[("user-agent", ua.as_str())]),
                got[i],
                "visitor {i} moved"
            );
        }
    }

    // Weights default to 1.
    let even = link_of(
        &app,
        &code_of(&app.create(json!({
            "url": "https://example.com/even-weights",
            "targets": [{"url": "https://a.example/even"}, {"url": "https://b.example/even"}]
        }))),
    );
    assert_eq!(even["url"], "https://example.com/even-weights");
    assert_eq!(even["targets"][0]["weight"], 1, "{even}");
    assert_eq!(even["targets"][1]["weight"], 1, "{even}");
}

#[test]
fn round_robin_rotation_takes_the_targets_in_turn() {
    let app = TestApp::start();
    let urls = [
        "https://a.example/rr",
        "https://b.example/rr",
        "https://c.example/rr",
    ];
    let code = code_of(&app.create(json!({
        "targets": urls.iter().map(|u| json!({"url": u})).collect::<Vec<_>>(),
        "rotation": "round_robin",
    })));
    assert_eq!(link_of(&app, &code)["rotation"], "round_robin");
    let order: Vec<usize> = (0..9)
        .map(|_| {
            // One visitor throughout: round robin does not stick.
            let to = dest(&app, &format!("/{code}"), &[("user-agent", DESKTOP)]);
            urls.iter()
                .position(|u| *u == to)
                .unwrap_or_else(|| panic!("not a target: {to}"))
        })
        .collect();
    for pair in order.windows(2) {
        assert_eq!(pair[1], (pair[0] + 1) % 3, "not in turn: {order:?}");
    }
}

/// SPEC §19: targets replace `url` as the default destination, but a PATCH that sets targets
/// without `url` leaves the link's `url` as its owner set it, so removing the targets later
/// sends visitors back there (not to what was target 1).
#[test]
fn a_patch_of_targets_without_url_keeps_the_links_url() {
    let app = TestApp::start();
    let home = "https://home.example/own";
    let code = code_of(&app.create(json!({ "url": home })));
    let patched = patch_ok(
        &app,
        &code,
        &json!({ "targets": [{"url": "https://b.example/t"}, {"url": "https://c.example/t"}] }),
    );
    assert_eq!(patched["url"], home, "{patched}");
    let link = link_of(&app, &code);
    assert_eq!(link["url"], home, "{link}");
    assert_eq!(link["targets"].as_array().map(Vec::len), Some(2), "{link}");
    let to = dest(&app, &format!("/{code}"), &[("user-agent", DESKTOP)]);
    assert!(
        to.starts_with("https://b.example/") || to.starts_with("https://c.example/"),
        "{to}"
    );

    let cleared = patch_ok(&app, &code, &json!({ "targets": null }));
    assert_eq!(cleared["url"], home, "{cleared}");
    assert_eq!(
        dest(&app, &format!("/{code}"), &[("user-agent", DESKTOP)]),
        home
    );
}

#[test]
fn failover_fills_target_caps_in_order_and_then_the_link_ends() {
    let app = TestApp::start();
    let urls = [
        "https://first.example/fo",
        "https://second.example/fo",
        "https://third.example/fo",
    ];
    let code = code_of(&app.create(json!({
        "targets": [
            {"url": urls[0], "max_visits": 2},
            {"url": urls[1], "max_visits": 3, "weight": 5},
            {"url": urls[2], "max_visits": 1},
        ],
        "rotation": "failover",
    })));
    let link = link_of(&app, &code);
    assert_eq!(link["rotation"], "failover");
    assert_eq!(
        link["targets"][0],
        json!({"url": urls[0], "weight": 1, "max_visits": 2, "visits_remaining": 2}),
        "{link}"
    );
    assert_eq!(link["targets"][1]["weight"], 5);
    assert_eq!(link["targets"][1]["visits_remaining"], 3);
    assert_eq!(link["status"], "active");

    let path = format!("/{code}");
    let order: Vec<String> = (0..6).map(|_| dest(&app, &path, &[])).collect();
    let expected = [urls[0], urls[0], urls[1], urls[1], urls[1], urls[2]];
    assert_eq!(order, expected);
    // Every target full: the link has ended.
    assert_eq!(status_of(&app, &path, &[]), 410);
    let link = assert_ended_by_cap(&app, &code);
    for i in 0..3 {
        assert_eq!(link["targets"][i]["visits_remaining"], 0, "{link}");
    }
    exactly_visits(&app, &code, 6);
}

// ---------------------------------------------------------------------------------------------
// Exact caps

/// Forty visitors (each its own user agent) at once on `code`: each one's status and
/// Location.
fn forty_at_once(app: &TestApp, code: &str) -> Vec<(u16, Option<String>)> {
    let url = app.url(&format!("/{code}"));
    let barrier = Barrier::new(40);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let (url, barrier, client) = (&url, &barrier, &app.client);
                s.spawn(move || {
                    let ua = format!("Mozilla/5.0 (concurrent visitor {i})");
                    barrier.wait();
                    let r = visit_with(client, url, &[("user-agent", ua.as_str())]);
                    (r.status().as_u16(), location(&r))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn forty_concurrent_visitors_on_a_cap_of_ten_get_exactly_ten_redirects() {
    let app = TestApp::start();
    for round in 0..3 {
        let destination = format!("https://example.com/exact/{round}");
        let code = code_of(&app.create(json!({"url": destination, "max_visits": 10})));
        let statuses = forty_at_once(&app, &code);
        let redirected = statuses
            .iter()
            .filter(|(s, to)| *s == 302 && to.as_deref() == Some(destination.as_str()))
            .count();
        let gone = statuses.iter().filter(|(s, _)| *s == 410).count();
        assert_eq!(redirected, 10, "round {round}: {statuses:?}");
        assert_eq!(gone, 30, "round {round}: {statuses:?}");
        let link = assert_ended_by_cap(&app, &code);
        assert_eq!(link["visits_remaining"], 0, "{link}");
        assert_eq!(link["max_visits"], 10);
        exactly_visits(&app, &code, 10);
    }

    // Target caps are counted alike: 4 + 6 redirects, then the link has ended.
    let urls = ["https://four.example/exact", "https://six.example/exact"];
    let code = code_of(&app.create(json!({
        "targets": [{"url": urls[0], "max_visits": 4}, {"url": urls[1], "max_visits": 6}],
        "rotation": "failover",
    })));
    let statuses = forty_at_once(&app, &code);
    let to = |url: &str| {
        statuses
            .iter()
            .filter(|(s, to)| *s == 302 && to.as_deref() == Some(url))
            .count()
    };
    assert_eq!((to(urls[0]), to(urls[1])), (4, 6), "{statuses:?}");
    let gone = statuses.iter().filter(|(s, _)| *s == 410).count();
    assert_eq!(gone, 30, "{statuses:?}");
    let link = assert_ended_by_cap(&app, &code);
    assert_eq!(link["targets"][0]["visits_remaining"], 0, "{link}");
    assert_eq!(link["targets"][1]["visits_remaining"], 0, "{link}");
    exactly_visits(&app, &code, 10);
}

/// Hammers `url` from `threads` threads until it stops redirecting (410), the server goes
/// away, or `stop` is set, counting the 302s to `destination` in `counter`.
fn hammer(
    client: &Client,
    url: &str,
    destination: &str,
    threads: usize,
    counter: &AtomicU64,
    stop: &AtomicBool,
) {
    let unexpected = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let unexpected = &unexpected;
            s.spawn(move || {
                let ua = format!("Mozilla/5.0 (hammer {t})");
                while !stop.load(Ordering::Relaxed) {
                    let Ok(response) = client.get(url).header("user-agent", ua.as_str()).send()
                    else {
                        break;
                    };
                    match response.status().as_u16() {
                        302 => {
                            assert_eq!(location(&response).as_deref(), Some(destination));
                            counter.fetch_add(1, Ordering::SeqCst);
                        }
                        410 => break,
                        other => {
                            unexpected.lock().unwrap().push(other);
                            break;
                        }
                    }
                }
            });
        }
    });
    let unexpected = unexpected.into_inner().unwrap();
    assert!(unexpected.is_empty(), "unexpected statuses: {unexpected:?}");
}

#[test]
fn a_kill_9_under_load_never_lets_a_capped_link_exceed_its_cap() {
    let mut app = TestApp::binary();
    let cap = 1000u64;
    let destination = "https://example.com/crash-capped";
    let code = code_of(&app.create(json!({"url": destination, "max_visits": cap})));

    let before_kill = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (client, url) = (app.client.clone(), app.url(&format!("/{code}")));
        let (counter, stop) = (before_kill.clone(), stop.clone());
        std::thread::spawn(move || hammer(&client, &url, destination, 8, &counter, &stop))
    };
    let started = Instant::now();
    while before_kill.load(Ordering::SeqCst) < 50 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no load reached the server"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    app.kill9();
    stop.store(true, Ordering::Relaxed);
    load.join().expect("load threads");
    let answered_before = before_kill.load(Ordering::SeqCst);
    assert!(
        answered_before < cap,
        "the cap was reached before the kill: nothing was tested"
    );

    app.respawn();
    // Every redirect answered before the crash was counted durably.
    let link = link_of(&app, &code);
    let remaining = link["visits_remaining"]
        .as_u64()
        .unwrap_or_else(|| panic!("{link}"));
    assert!(
        remaining <= cap - answered_before,
        "{answered_before} redirects answered before the kill, yet {remaining} of {cap} remain"
    );

    let after = AtomicU64::new(0);
    hammer(
        &app.client,
        &app.url(&format!("/{code}")),
        destination,
        8,
        &after,
        &AtomicBool::new(false),
    );
    let after = after.load(Ordering::SeqCst);
    assert!(
        answered_before + after <= cap,
        "{answered_before} + {after} redirects answered for a cap of {cap}"
    );
    assert_eq!(after, remaining, "every remaining redirect is served");
    let link = assert_ended_by_cap(&app, &code);
    assert_eq!(link["visits_remaining"], 0);
    assert_eq!(status_of(&app, &format!("/{code}"), &[]), 410);
}

// ---------------------------------------------------------------------------------------------
// Bad values

#[test]
fn bad_option_values_are_problems_naming_the_field_and_write_nothing() {
    let app = TestApp::start();
    let keep = code_of(&app.create(json!({
        "url": "https://example.com/keep-options", "max_visits": 5, "password": "keep this"
    })));
    let before = app.link_total();
    let url = "https://example.com/bad-options";
    let rule = |cond: Value| json!({"if": cond, "url": "https://r.example/"});
    let ok_rule = rule(json!({"device": "mobile"}));
    let target = |weight: Value| json!({"url": "https://t.example/", "weight": weight});

    // (extra fields, accepted codes (`a|b`), field, field must be exact (else a prefix))
    let cases: Vec<(Value, &str, &str, bool)> = vec![
        (
            json!({"password": "abc"}),
            "invalid_password",
            "password",
            true,
        ),
        (
            json!({"password": "密码密"}),
            "invalid_password",
            "password",
            true,
        ),
        (
            json!({"password": "x".repeat(129)}),
            "invalid_password",
            "password",
            true,
        ),
        (
            json!({"password": "密".repeat(129)}),
            "invalid_password",
            "password",
            true,
        ),
        (
            json!({"password": 12345}),
            "invalid_password",
            "password",
            true,
        ),
        (
            json!({"max_visits": 0}),
            "invalid_max_visits",
            "max_visits",
            true,
        ),
        (
            json!({"max_visits": -1}),
            "invalid_max_visits",
            "max_visits",
            true,
        ),
        (
            json!({"max_visits": 1.5}),
            "invalid_max_visits",
            "max_visits",
            true,
        ),
        (
            json!({"max_visits": "ten"}),
            "invalid_max_visits",
            "max_visits",
            true,
        ),
        (
            json!({"valid_from": "tomorrow"}),
            "invalid_valid_from",
            "valid_from",
            true,
        ),
        (
            json!({"valid_from": "2026-02-30T00:00:00Z"}),
            "invalid_valid_from",
            "valid_from",
            true,
        ),
        (
            json!({"valid_from": true}),
            "invalid_valid_from",
            "valid_from",
            true,
        ),
        (
            json!({"fallback_url": "javascript:alert(1)"}),
            "invalid_url",
            "fallback_url",
            true,
        ),
        (
            json!({"fallback_url": "not a url"}),
            "invalid_url",
            "fallback_url",
            true,
        ),
        (
            json!({"fallback_url": format!("{BASE_URL}/abc")}),
            "invalid_url",
            "fallback_url",
            true,
        ),
        (json!({"rules": "mobile"}), "invalid_rules", "rules", true),
        (
            json!({"rules": vec![ok_rule.clone(); 33]}),
            "invalid_rules",
            "rules",
            true,
        ),
        (
            json!({"rules": [rule(json!({"colour": "red"}))]}),
            "invalid_rules",
            "rules[0].if.colour",
            true,
        ),
        (
            json!({"rules": [ok_rule.clone(), ok_rule.clone(), rule(json!({"os": "beos"}))]}),
            "invalid_rules",
            "rules[2].if.os",
            true,
        ),
        (
            json!({"rules": [rule(json!({"device": ["mobile", "fridge"]}))]}),
            "invalid_rules",
            "rules[0].if.device",
            true,
        ),
        (
            json!({"rules": [rule(json!({"app": "myspace"}))]}),
            "invalid_rules",
            "rules[0].if.app",
            true,
        ),
        (
            json!({"rules": [rule(json!({"country": "GBR"}))]}),
            "invalid_rules",
            "rules[0].if.country",
            true,
        ),
        (
            json!({"rules": [ok_rule.clone(), rule(json!({"ip": "300.1.2.3"}))]}),
            "invalid_rules",
            "rules[1].if.ip",
            true,
        ),
        (
            json!({"rules": [rule(json!({"ip": ["10.0.0.0/33"]}))]}),
            "invalid_rules",
            "rules[0].if.ip",
            true,
        ),
        (
            json!({"rules": [rule(json!({"language": 42}))]}),
            "invalid_rules",
            "rules[0].if.language",
            true,
        ),
        (
            json!({"rules": [rule(json!({"query": "utm=x"}))]}),
            "invalid_rules",
            "rules[0].if.query",
            false,
        ),
        (
            json!({"rules": [rule(json!({"after": "yesterday"}))]}),
            "invalid_rules",
            "rules[0].if.after",
            true,
        ),
        (
            json!({"rules": [rule(json!({"before": "2026-13-01T00:00:00Z"}))]}),
            "invalid_rules",
            "rules[0].if.before",
            true,
        ),
        (
            json!({"rules": [{"if": {"os": "ios"}, "url": "javascript:alert(1)"}]}),
            "invalid_rules|invalid_url",
            "rules[0].url",
            true,
        ),
        (
            json!({"rules": [{"if": {"os": "ios"}}]}),
            "invalid_rules|invalid_url",
            "rules[0].url",
            true,
        ),
        (
            json!({"targets": "https://t.example/"}),
            "invalid_targets",
            "targets",
            true,
        ),
        (
            json!({"targets": vec![json!({"url": "https://t.example/"}); 101]}),
            "invalid_targets",
            "targets",
            true,
        ),
        (
            json!({"targets": [target(json!(1)), target(json!(0))]}),
            "invalid_targets",
            "targets[1].weight",
            true,
        ),
        (
            json!({"targets": [target(json!(1001))]}),
            "invalid_targets",
            "targets[0].weight",
            true,
        ),
        (
            json!({"targets": [target(json!("heavy"))]}),
            "invalid_targets",
            "targets[0].weight",
            true,
        ),
        (
            json!({"targets": [{"url": "https://t.example/", "max_visits": 0}]}),
            "invalid_targets",
            "targets[0].max_visits",
            true,
        ),
        (
            json!({"targets": [{"url": "https://t.example/"}, {"url": "javascript:alert(1)"}]}),
            "invalid_targets|invalid_url",
            "targets[1].url",
            true,
        ),
        (
            json!({"targets": [{"weight": 3}]}),
            "invalid_targets|invalid_url",
            "targets[0].url",
            true,
        ),
        (
            json!({"targets": [{"url": "https://t.example/"}], "rotation": "random"}),
            "invalid_rotation",
            "rotation",
            true,
        ),
        (
            json!({"targets": [{"url": "https://t.example/"}], "rotation": 3}),
            "invalid_rotation",
            "rotation",
            true,
        ),
    ];
    // Every case is tried before failing, so that one run shows every mismatch.
    let mut mismatches = Vec::new();
    let mut check = |what: &str, p: &Value, codes: &str, field: &str, exact: bool| {
        let code = p["code"].as_str().unwrap_or("");
        let got = p["field"].as_str().unwrap_or("");
        let field_ok = if exact {
            got == field
        } else {
            got.starts_with(field)
        };
        if !codes.split('|').any(|c| c == code) || !field_ok {
            mismatches.push(format!(
                "{what}: got {code} / {got}, want {codes} / {field}: {}",
                p["detail"]
            ));
        }
    };
    let keep_before = link_of(&app, &keep);
    for (extra, codes, field, exact) in &cases {
        let mut body = extra.clone();
        let object = body.as_object_mut().expect("object");
        if !object.contains_key("targets") {
            object.insert("url".into(), json!(url));
        }
        let what: String = body.to_string().chars().take(120).collect();
        let p = problem(app.post_json("/api/v1/links", ADMIN, &body), 400);
        check(&what, &p, codes, field, *exact);
        // The same value in a PATCH is refused alike and changes nothing.
        let p = problem(patch(&app, &keep, extra), 400);
        check(&format!("PATCH {what}"), &p, codes, field, *exact);
    }
    assert!(mismatches.is_empty(), "\n{}", mismatches.join("\n"));
    // A bad option beside a good field: the good one is not written either.
    let p = problem(
        patch(&app, &keep, &json!({"title": "changed", "max_visits": 0})),
        400,
    );
    assert_eq!(p["field"], "max_visits");
    assert_eq!(
        link_of(&app, &keep),
        keep_before,
        "a refused PATCH changed the link"
    );
    assert_eq!(
        dest(
            &app,
            &format!("/{keep}"),
            &[("x-link-password", "keep this")]
        ),
        "https://example.com/keep-options"
    );
    assert_eq!(app.link_total(), before, "a refused create wrote a link");

    // A batch: each bad item answers its own problem, prefixed; the good one is created.
    let response = app.post_json(
        "/api/v1/links/batch",
        ADMIN,
        &json!({"links": [
            {"url": "https://example.com/batch-ok", "max_visits": 2},
            {"url": "https://example.com/batch-bad", "max_visits": 0},
            {"url": "https://example.com/batch-bad-rule", "rules": [rule(json!({"os": "beos"}))]},
            {"url": "https://example.com/batch-bad-target", "targets": [target(json!(0))]},
        ]}),
    );
    assert_eq!(response.status().as_u16(), 200);
    let batch: Value = response.json().unwrap();
    let results = &batch["results"];
    assert_eq!(results[0]["ok"], true, "{batch}");
    assert_eq!(results[0]["link"]["max_visits"], 2, "{batch}");
    for (i, code, field) in [
        (1, "invalid_max_visits", "links[1].max_visits"),
        (2, "invalid_rules", "links[2].rules[0].if.os"),
        (3, "invalid_targets", "links[3].targets[0].weight"),
    ] {
        assert_eq!(results[i]["ok"], false, "{batch}");
        assert_eq!(results[i]["error"]["code"], code, "{batch}");
        assert_eq!(results[i]["error"]["field"], field, "{batch}");
    }
    assert_eq!(app.link_total(), before + 1);

    // The edges that are allowed: 4 and 128 characters (not bytes), a cap of one.
    for (i, extra) in [
        json!({"password": "abcd"}),
        json!({"password": "密码密码"}),
        json!({"password": "x".repeat(128)}),
        json!({"password": "密".repeat(128)}),
        json!({"max_visits": 1}),
        json!({"rules": vec![rule(json!({"os": "ios"})); 32]}),
        json!({"targets": vec![json!({"url": "https://t.example/", "weight": 1000}); 100]}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut body = extra.clone();
        body.as_object_mut()
            .unwrap()
            .insert("url".into(), json!(format!("https://example.com/edge/{i}")));
        let response = app.post_json("/api/v1/links", ADMIN, &body);
        assert_eq!(response.status().as_u16(), 201, "{extra}");
    }
    assert_eq!(app.link_total(), before + 8);
}

// ---------------------------------------------------------------------------------------------
// Export and import

#[test]
fn export_and_import_keep_every_option() {
    let mut app = TestApp::binary();
    let password = "travelling secret";
    let guarded = code_of(&app.create(json!({
        "url": "https://example.com/moved-guarded",
        "password": password,
        "max_visits": 5,
        "fallback_url": "https://example.org/moved-fallback",
        "rules": [{"if": {"query": {"r": "1"}, "os": ["ios", "android"]}, "url": "https://rule.example/moved"}],
    })));
    let rotating = code_of(&app.create(json!({
        "targets": [
            {"url": "https://first.example/moved", "max_visits": 2},
            {"url": "https://second.example/moved", "weight": 3},
        ],
        "rotation": "failover",
    })));
    let later = code_of(&app.create(json!({
        "url": "https://example.com/moved-later", "valid_from": at(86_400)
    })));
    // Use some of the caps first.
    let with_pw = [("x-link-password", password)];
    assert_eq!(
        dest(&app, &format!("/{guarded}"), &with_pw),
        "https://example.com/moved-guarded"
    );
    assert_eq!(
        dest(
            &app,
            &format!("/{guarded}?r=1"),
            &[with_pw[0], ("user-agent", PHONE)]
        ),
        "https://rule.example/moved"
    );
    assert_eq!(
        dest(&app, &format!("/{rotating}"), &[]),
        "https://first.example/moved"
    );
    wait_visits(&app, &guarded, 2);
    wait_visits(&app, &rotating, 1);
    let codes = [guarded.clone(), rotating.clone(), later.clone()];
    let originals: Vec<Value> = codes.iter().map(|c| link_of(&app, c)).collect();
    assert_eq!(originals[0]["visits_remaining"], 3, "{}", originals[0]);

    assert!(app.terminate().success());
    let file = app.dir.path().join("options.jsonl");
    let out = vsl(
        &app.config_path(),
        &["export", "--visits", "--output", file.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let exported = std::fs::read_to_string(&file).unwrap();
    assert!(
        !exported.contains(password),
        "the export carries the password in clear"
    );

    // Into a fresh store. It has a `hash_secret` of its own, which an import does not replace:
    // the links here are not computed codes, so their lines go without the key line.
    let links_only: String = exported
        .lines()
        .filter(|l| !l.contains("\"type\":\"key\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, links_only).unwrap();
    let mut fresh = TestApp::binary();
    assert!(fresh.terminate().success());
    let out = vsl(&fresh.config_path(), &["import", file.to_str().unwrap()]);
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{report}");
    assert!(report.contains("refused 0"), "{report}");
    fresh.respawn();

    let fields = [
        "url",
        "status",
        "expires_at",
        "password_protected",
        "max_visits",
        "visits_remaining",
        "valid_from",
        "fallback_url",
        "rules",
        "targets",
        "rotation",
        "visits_total",
    ];
    for (code, original) in codes.iter().zip(&originals) {
        let moved = link_of(&fresh, code);
        for field in fields {
            assert_eq!(
                moved.get(field),
                original.get(field),
                "{code}.{field} changed in the move: {original} → {moved}"
            );
        }
    }

    // And they still behave: the password, the rule, the caps, the start.
    let path = format!("/{guarded}");
    assert_eq!(
        problem(visit(&fresh, &path, &[("x-link-password", "wrong")]), 403)["code"],
        "wrong_password"
    );
    assert_eq!(
        problem(visit(&fresh, &path, &[("accept", "application/json")]), 401)["code"],
        "password_required"
    );
    assert_eq!(
        dest(
            &fresh,
            &format!("{path}?r=1"),
            &[with_pw[0], ("user-agent", ANDROID)]
        ),
        "https://rule.example/moved"
    );
    for _ in 0..2 {
        assert_eq!(
            dest(&fresh, &path, &with_pw),
            "https://example.com/moved-guarded"
        );
    }
    // 5 used up: the fallback.
    assert_eq!(
        dest(&fresh, &path, &with_pw),
        "https://example.org/moved-fallback"
    );
    // The first target had one of its two left.
    let rotating_path = format!("/{rotating}");
    assert_eq!(
        dest(&fresh, &rotating_path, &[]),
        "https://first.example/moved"
    );
    assert_eq!(
        dest(&fresh, &rotating_path, &[]),
        "https://second.example/moved"
    );
    assert_eq!(status_of(&fresh, &format!("/{later}"), &[]), 404);
}

// ---------------------------------------------------------------------------------------------
// Routes

#[test]
fn each_visit_records_its_route_and_stats_count_destinations() {
    let app = TestApp::start();
    let rule_url = "https://rule.example/route";
    let target_urls = ["https://t0.example/route", "https://t1.example/route"];
    let routed = code_of(&app.create(json!({
        "rules": [{"if": {"query": {"r": "1"}}, "url": rule_url}],
        "targets": [{"url": target_urls[0]}, {"url": target_urls[1]}],
        "rotation": "round_robin",
    })));
    let path = format!("/{routed}");
    let mut expected: HashMap<String, (String, u64)> = HashMap::new();
    let mut note = |to: String| {
        let route = if to == rule_url {
            "rule:0".to_string()
        } else {
            let i = target_urls
                .iter()
                .position(|u| *u == to)
                .unwrap_or_else(|| panic!("unexpected destination {to}"));
            format!("target:{i}")
        };
        expected.entry(route).or_insert((to, 0)).1 += 1;
    };
    for _ in 0..2 {
        note(dest(&app, &format!("{path}?r=1"), &[]));
    }
    for _ in 0..4 {
        note(dest(&app, &path, &[]));
    }
    assert_eq!(expected["rule:0"].1, 2, "{expected:?}");
    assert_eq!(expected["target:0"].1, 2, "{expected:?}");
    assert_eq!(expected["target:1"].1, 2, "{expected:?}");
    wait_visits(&app, &routed, 6);
    let mut listed: HashMap<String, u64> = HashMap::new();
    for v in visits(&app, &routed) {
        let route = v["route"]
            .as_str()
            .unwrap_or_else(|| panic!("no route: {v}"));
        *listed.entry(route.to_string()).or_default() += 1;
    }
    let want: HashMap<String, u64> = expected.iter().map(|(r, (_, n))| (r.clone(), *n)).collect();
    assert_eq!(listed, want);

    let stats = app.api_get(&format!("/api/v1/links/{routed}/stats"), ADMIN);
    let destinations = stats["destinations"]
        .as_array()
        .unwrap_or_else(|| panic!("no destinations: {stats}"));
    assert_eq!(destinations.len(), 3, "{stats}");
    for d in destinations {
        let route = d["route"].as_str().expect("route");
        let (url, n) = &expected[route];
        assert_eq!(d["url"], url.as_str(), "{d}");
        assert_eq!(d["visits"], *n, "{d}");
    }

    // A link with rules that none holds goes to its own URL: route "default".
    let own = "https://example.com/route-own";
    let ruled = code_of(&app.create(json!({
        "url": own,
        "rules": [{"if": {"device": "bot"}, "url": "https://bots.example/"}],
    })));
    assert_eq!(
        dest(&app, &format!("/{ruled}"), &[("user-agent", DESKTOP)]),
        own
    );
    assert_eq!(
        dest(&app, &format!("/{ruled}"), &[("user-agent", GOOGLEBOT)]),
        "https://bots.example/"
    );
    wait_visits(&app, &ruled, 2);
    let mut routes: Vec<String> = visits(&app, &ruled)
        .iter()
        .map(|v| v["route"].as_str().unwrap_or("?").to_string())
        .collect();
    routes.sort();
    assert_eq!(routes, ["default", "rule:0"]);
    let stats = app.api_get(&format!("/api/v1/links/{ruled}/stats"), ADMIN);
    let mut destinations = stats["destinations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    destinations.sort_by_key(|d| d["route"].as_str().unwrap_or("").to_string());
    assert_eq!(
        Value::Array(destinations),
        json!([
            {"route": "default", "url": own, "visits": 1},
            {"route": "rule:0", "url": "https://bots.example/", "visits": 1},
        ]),
        "{stats}"
    );
}

/// "Each visit records its route": a plain link (no rules, no targets) goes to its own URL,
/// so its visits say `default` too, and its stats list that one destination.
#[test]
fn a_plain_links_visits_record_the_default_route() {
    let app = TestApp::start();
    let url = "https://example.com/route-plain";
    let plain = code_of(&app.create(json!({ "url": url })));
    dest(&app, &format!("/{plain}"), &[]);
    wait_visits(&app, &plain, 1);
    let listed = visits(&app, &plain);
    assert_eq!(listed[0]["route"], "default", "{}", listed[0]);
    let stats = app.api_get(&format!("/api/v1/links/{plain}/stats"), ADMIN);
    assert_eq!(
        stats["destinations"],
        json!([{"route": "default", "url": url, "visits": 1}]),
        "{stats}"
    );
}
