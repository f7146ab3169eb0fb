//! `/yourls-api.php` against the real server: every action in every format, the three ways to
//! sign in (an expired timestamp too), YOURLS's error bodies and statuses, `unique_urls`, and
//! the real PyPI `yourls` client.

mod common;

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{TestApp, ADMIN, BASE_URL, SPORTS, VIEWER};
use md5::Md5;
use serde_json::Value;
use sha2::{Digest, Sha256, Sha512};

const USERS: &str = r#"
[yourls]
users = [{ username = "joe", password = "s3cret", key = "test-admin-key-0001" }]
"#;

fn start() -> TestApp {
    TestApp::start_with(USERS, &[])
}

/// GET with the admin signature and `format=json`; status and body.
fn call(app: &TestApp, params: &[(&str, &str)]) -> (u16, Value) {
    let mut all: Vec<(&str, &str)> = vec![("signature", ADMIN), ("format", "json")];
    all.extend_from_slice(params);
    raw_json(app, &all)
}

fn raw_json(app: &TestApp, params: &[(&str, &str)]) -> (u16, Value) {
    let (status, _, text) = raw(app, params);
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, body)
}

fn raw(app: &TestApp, params: &[(&str, &str)]) -> (u16, String, String) {
    let response = app
        .client
        .get(app.url("/yourls-api.php"))
        .query(params)
        .send()
        .expect("GET yourls-api.php");
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    (status, kind, response.text().expect("text"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

#[test]
fn shorturl_expand_and_stats_in_json() {
    let app = start();
    let (status, body) = call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/one"),
            ("title", "One"),
        ],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "success");
    assert_eq!(body["code"], "");
    assert_eq!(body["errorCode"], "");
    assert_eq!(body["statusCode"], "200");
    assert_eq!(body["message"], "https://example.com/one added to database");
    assert_eq!(body["title"], "One");
    let keyword = body["url"]["keyword"]
        .as_str()
        .expect("keyword")
        .to_string();
    assert_eq!(keyword.len(), 6, "default length");
    assert_eq!(body["url"]["url"], "https://example.com/one");
    assert_eq!(body["url"]["ip"], "127.0.0.1");
    let date = body["url"]["date"].as_str().expect("date");
    assert_eq!(date.len(), 19, "Y-m-d H:i:s: {date}");
    assert_eq!(body["shorturl"], format!("{BASE_URL}/{keyword}"));
    // The member order is YOURLS's.
    let keys: Vec<&String> = body.as_object().expect("object").keys().collect();
    assert!(!keys.is_empty());

    // The same URL again: error:url with the existing link (unique_urls, YOURLS's default).
    let (status, again) = call(
        &app,
        &[("action", "shorturl"), ("url", "https://example.com/one")],
    );
    assert_eq!(status, 400);
    assert_eq!(again["status"], "fail");
    assert_eq!(again["code"], "error:url");
    assert_eq!(again["url"]["keyword"], keyword.as_str());
    assert_eq!(again["url"]["clicks"], "0");
    assert_eq!(again["shorturl"], format!("{BASE_URL}/{keyword}"));
    assert_eq!(again["statusCode"], "400");

    // With a keyword too: YOURLS checks the URL first.
    let (status, again) = call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/one"),
            ("keyword", "other1"),
        ],
    );
    assert_eq!(status, 400, "{again}");
    assert_eq!(again["code"], "error:url");
    assert_eq!(again["url"]["keyword"], keyword.as_str());

    // expand: by keyword and by full short URL.
    for short in [keyword.clone(), format!("{BASE_URL}/{keyword}")] {
        let (status, body) = call(&app, &[("action", "expand"), ("shorturl", &short)]);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["keyword"], keyword.as_str());
        assert_eq!(body["longurl"], "https://example.com/one");
        assert_eq!(body["shorturl"], format!("{BASE_URL}/{keyword}"));
        assert_eq!(body["title"], "One");
        assert_eq!(body["message"], "success");
        assert_eq!(body["statusCode"], "200");
    }
    let (status, body) = call(&app, &[("action", "expand"), ("shorturl", "nope42")]);
    assert_eq!(status, 404);
    assert_eq!(body["keyword"], "nope42");
    assert_eq!(body["message"], "Error: short URL not found");
    assert_eq!(body["errorCode"], "404");

    // A visit makes a click.
    let response = app.get(&format!("/{keyword}"));
    assert_eq!(response.status().as_u16(), 302);
    let mut clicks = Value::Null;
    for _ in 0..100 {
        let (_, body) = call(&app, &[("action", "url-stats"), ("shorturl", &keyword)]);
        clicks = body["link"]["clicks"].clone();
        if clicks == "1" {
            assert_eq!(body["statusCode"], "200");
            assert_eq!(body["message"], "success");
            assert_eq!(body["link"]["url"], "https://example.com/one");
            assert_eq!(body["link"]["shorturl"], format!("{BASE_URL}/{keyword}"));
            assert_eq!(body["link"]["title"], "One");
            assert!(body["link"]["timestamp"].is_string());
            assert!(body["link"]["ip"].is_string());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(clicks, "1", "the visit is counted");
    let (status, body) = call(&app, &[("action", "url-stats"), ("shorturl", "nope42")]);
    assert_eq!(status, 404);
    assert_eq!(body["message"], "Error: short URL not found");

    // A second link; stats orders by clicks.
    let (_, two) = call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/two"),
            ("keyword", "two"),
        ],
    );
    assert_eq!(two["url"]["keyword"], "two");
    let (status, body) = call(
        &app,
        &[("action", "stats"), ("filter", "top"), ("limit", "10")],
    );
    assert_eq!(status, 200);
    assert_eq!(
        body["links"]["link_1"]["shorturl"],
        format!("{BASE_URL}/{keyword}")
    );
    assert_eq!(body["links"]["link_1"]["clicks"], "1");
    assert_eq!(
        body["links"]["link_2"]["shorturl"],
        format!("{BASE_URL}/two")
    );
    assert!(body["links"]["link_3"].is_null());
    assert_eq!(body["stats"]["total_links"], 2);
    assert_eq!(body["stats"]["total_clicks"], 1);
    assert_eq!(body["statusCode"], "200");
    assert_eq!(body["message"], "success");
    let (_, body) = call(
        &app,
        &[("action", "stats"), ("filter", "bottom"), ("limit", "1")],
    );
    assert_eq!(
        body["links"]["link_1"]["shorturl"],
        format!("{BASE_URL}/two")
    );
    let (_, body) = call(
        &app,
        &[("action", "stats"), ("filter", "last"), ("limit", "1")],
    );
    assert_eq!(
        body["links"]["link_1"]["shorturl"],
        format!("{BASE_URL}/two")
    );
    let (_, body) = call(
        &app,
        &[
            ("action", "stats"),
            ("filter", "top"),
            ("limit", "1"),
            ("start", "1"),
        ],
    );
    assert_eq!(
        body["links"]["link_1"]["shorturl"],
        format!("{BASE_URL}/two")
    );
    let (_, body) = call(
        &app,
        &[("action", "stats"), ("filter", "rand"), ("limit", "5")],
    );
    assert_eq!(body["links"].as_object().map(|o| o.len()), Some(2));
    // Without a limit there is no `links`.
    let (_, body) = call(&app, &[("action", "stats"), ("filter", "top")]);
    assert!(body.get("links").is_none(), "{body}");
    assert_eq!(body["stats"]["total_links"], 2);

    let (status, body) = call(&app, &[("action", "db-stats")]);
    assert_eq!(status, 200);
    assert_eq!(body["db-stats"]["total_links"], 2);
    assert_eq!(body["db-stats"]["total_clicks"], 1);
    assert_eq!(body["statusCode"], "200");
    assert_eq!(body["message"], "success");

    let (status, body) = call(&app, &[("action", "version")]);
    assert_eq!(status, 200);
    assert_eq!(body["version"], "1.10");
}

/// YOURLS knows one domain, the default (SPEC §26): a link on another domain is not found
/// by `expand` or `url-stats` (by its code, its key or its short URL), and `stats` and
/// `db-stats` count only the default domain's links; creates land on the default domain.
#[test]
fn only_the_default_domains_links_are_seen() {
    let app = start();
    let added = app
        .req(reqwest::Method::POST, "/api/v1/domains", Some(ADMIN))
        .json(&serde_json::json!({"host": "go.y.com"}))
        .send()
        .expect("add domain");
    assert_eq!(added.status(), 201);
    let away = app.create(serde_json::json!({
        "url": "https://away.example/", "code": "away", "domain": "go.y.com",
    }));
    assert_eq!(away["domain"], "go.y.com");
    // The same code on both domains, and one only on the other domain.
    let home = app.create(serde_json::json!({"url": "https://home.example/", "code": "both"}));
    app.create(serde_json::json!({
        "url": "https://away.example/both", "code": "both", "domain": "go.y.com",
    }));
    assert_eq!(home["domain"], "sl.test");

    for short in [
        // The code, its key on the first domain added (`code@1`), its short URL.
        "away",
        "away@1",
        "http://go.y.com/away",
    ] {
        let (status, body) = call(&app, &[("action", "expand"), ("shorturl", short)]);
        assert_eq!(status, 404, "expand {short}: {body}");
        let (status, body) = call(&app, &[("action", "url-stats"), ("shorturl", short)]);
        assert_eq!(status, 404, "url-stats {short}: {body}");
    }
    let (status, body) = call(&app, &[("action", "expand"), ("shorturl", "both")]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["longurl"], "https://home.example/");
    let (status, body) = call(&app, &[("action", "url-stats"), ("shorturl", "both")]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["link"]["url"], "https://home.example/");

    let (status, body) = call(
        &app,
        &[("action", "stats"), ("filter", "top"), ("limit", "10")],
    );
    assert_eq!(status, 200, "{body}");
    let links = body["links"].as_object().expect("links");
    assert_eq!(links.len(), 1, "{body}");
    assert_eq!(
        body["links"]["link_1"]["shorturl"],
        format!("{BASE_URL}/both")
    );
    assert_eq!(body["stats"]["total_links"], 1);
    let (_, body) = call(
        &app,
        &[("action", "stats"), ("filter", "rand"), ("limit", "10")],
    );
    assert_eq!(
        body["links"].as_object().map(|o| o.len()),
        Some(1),
        "{body}"
    );
    let (_, body) = call(&app, &[("action", "db-stats")]);
    assert_eq!(body["db-stats"]["total_links"], 1, "{body}");

    // A create is on the default domain, whatever domain has the keyword.
    let (status, made) = call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/made-here"),
            ("keyword", "away"),
        ],
    );
    assert_eq!(status, 200, "{made}");
    assert_eq!(made["shorturl"], format!("{BASE_URL}/away"));
    let link = app.api_get("/api/v1/links/away", ADMIN);
    assert_eq!(link["domain"], "sl.test");
    assert_eq!(link["url"], "https://example.com/made-here");
}

#[test]
fn every_action_in_every_format() {
    let app = start();
    let (_, made) = call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/f"),
            ("keyword", "fmt"),
        ],
    );
    assert_eq!(made["status"], "success", "{made}");
    let actions: &[&[(&str, &str)]] = &[
        &[("action", "shorturl"), ("url", "https://example.com/g")],
        &[("action", "expand"), ("shorturl", "fmt")],
        &[("action", "url-stats"), ("shorturl", "fmt")],
        &[("action", "stats"), ("filter", "top"), ("limit", "3")],
        &[("action", "db-stats")],
        &[("action", "version")],
        &[("action", "nonsense")],
    ];
    for params in actions {
        let action = params[0].1;
        let mut expected_status = if action == "nonsense" { 400 } else { 200 };
        // xml is the default: no format parameter at all.
        let mut p: Vec<(&str, &str)> = vec![("signature", ADMIN)];
        p.extend_from_slice(params);
        let (status, kind, text) = raw(&app, &p);
        assert_eq!(status, expected_status, "{action} xml: {text}");
        assert_eq!(kind, "application/xml; charset=utf-8");
        assert!(
            text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root>"),
            "{text}"
        );
        assert!(text.trim_end().ends_with("</root>"), "{text}");
        if action == "shorturl" {
            // The first call made the link; the same URL again is error:url (400).
            assert!(text.contains("<status>success</status>"), "{text}");
            expected_status = 400;
        }

        p.push(("format", "json"));
        let (status, kind, text) = raw(&app, &p);
        assert_eq!(status, expected_status, "{action} json");
        assert_eq!(kind, "application/json; charset=utf-8");
        let json: Value = serde_json::from_str(&text).expect("json");
        p.pop();

        p.push(("format", "jsonp"));
        p.push(("callback", "cb_1"));
        let (status, kind, text) = raw(&app, &p);
        assert_eq!(status, expected_status, "{action} jsonp");
        assert_eq!(kind, "application/javascript; charset=utf-8");
        let inner = text
            .strip_prefix("cb_1(")
            .and_then(|t| t.strip_suffix(')'))
            .unwrap_or_else(|| panic!("jsonp: {text}"));
        let wrapped: Value = serde_json::from_str(inner).expect("jsonp json");
        assert_eq!(wrapped["callback"], "cb_1");
        p.pop();
        p.pop();

        p.push(("format", "simple"));
        let (status, kind, text) = raw(&app, &p);
        assert_eq!(status, expected_status, "{action} simple");
        assert_eq!(kind, "text/plain; charset=utf-8");
        let expected = match action {
            "shorturl" => json["shorturl"].as_str().unwrap_or("?").to_string(),
            "expand" => "https://example.com/f".to_string(),
            "version" => "1.10".to_string(),
            "nonsense" => "Unknown or missing \"action\" parameter".to_string(),
            _ => "Need either XML or JSON format for stats".to_string(),
        };
        if action == "shorturl" {
            // The second call is error:url; its simple form is still the short URL.
            assert!(text.starts_with(BASE_URL), "{text}");
        } else {
            assert_eq!(text, expected, "{action} simple");
        }
    }

    // XML content, spot-checked.
    let (_, _, text) = raw(
        &app,
        &[
            ("signature", ADMIN),
            ("action", "expand"),
            ("shorturl", "fmt"),
        ],
    );
    assert!(text.contains("<keyword>fmt</keyword>"), "{text}");
    assert!(
        text.contains("<longurl>https://example.com/f</longurl>"),
        "{text}"
    );
    assert!(text.contains("<statusCode>200</statusCode>"), "{text}");
    let (_, _, text) = raw(&app, &[("signature", ADMIN), ("action", "db-stats")]);
    assert!(text.contains("<db-stats><total_links>"), "{text}");

    // A jsonp callback that is not a plain name is refused.
    let (status, _, text) = raw(
        &app,
        &[
            ("signature", ADMIN),
            ("action", "version"),
            ("format", "jsonp"),
            ("callback", "alert(1)"),
        ],
    );
    assert_eq!(status, 400);
    assert_eq!(
        text,
        r#"{"errorCode":"400","error":"Invalid callback parameter"}"#
    );
}

#[test]
fn errors_have_yourls_bodies() {
    let app = start();
    call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/k"),
            ("keyword", "taken"),
        ],
    );
    let (status, body) = call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/other"),
            ("keyword", "taken"),
        ],
    );
    assert_eq!(status, 400);
    assert_eq!(body["status"], "fail");
    assert_eq!(body["code"], "error:keyword");
    assert_eq!(
        body["message"],
        "Short URL taken already exists in database or is reserved"
    );
    assert_eq!(body["errorCode"], "400");
    assert_eq!(body["statusCode"], "400");
    // A reserved word is "taken" too.
    let (status, body) = call(
        &app,
        &[
            ("action", "shorturl"),
            ("url", "https://example.com/r"),
            ("keyword", "api"),
        ],
    );
    assert_eq!(status, 400);
    assert_eq!(body["code"], "error:keyword");

    let (status, body) = call(&app, &[("action", "shorturl")]);
    assert_eq!(status, 400);
    assert_eq!(body["code"], "error:nourl");
    assert_eq!(body["message"], "Missing or malformed URL");

    let (status, body) = call(
        &app,
        &[("action", "shorturl"), ("url", &format!("{BASE_URL}/abc"))],
    );
    assert_eq!(status, 400);
    assert_eq!(body["code"], "error:noloop");
    assert_eq!(body["message"], "URL is a short URL");

    let (status, body) = call(
        &app,
        &[("action", "shorturl"), ("url", "javascript:alert(1)")],
    );
    assert_eq!(status, 400);
    assert_eq!(body["status"], "fail");
    assert_eq!(body["code"], "error:invalid_url");
    assert_eq!(body["statusCode"], "400");

    let long = format!("https://example.com/{}", "a".repeat(5000));
    let (status, body) = call(&app, &[("action", "shorturl"), ("url", &long)]);
    assert_eq!(status, 400);
    assert_eq!(body["code"], "error:invalid_url");

    // A URL without a scheme gets http://, like YOURLS.
    let (status, body) = call(&app, &[("action", "shorturl"), ("url", "example.org/x")]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["url"]["url"], "http://example.org/x");

    let (status, body) = call(&app, &[]);
    assert_eq!(status, 400);
    assert_eq!(body["errorCode"], "400");
    assert_eq!(body["message"], "Unknown or missing \"action\" parameter");
}

#[test]
fn three_ways_to_sign_in() {
    let app = start();
    let version = |params: &[(&str, &str)]| {
        let mut p = vec![("action", "version"), ("format", "json")];
        p.extend_from_slice(params);
        raw_json(&app, &p)
    };
    // No credentials.
    let (status, body) = version(&[]);
    assert_eq!(status, 403);
    assert_eq!(body["message"], "Please log in");
    assert_eq!(body["errorCode"], "403");
    // A plain signature: an API key.
    assert_eq!(version(&[("signature", ADMIN)]).0, 200);
    assert_eq!(
        version(&[("signature", "wrong-key-123")]).1["message"],
        "Please log in"
    );

    // timestamp + signature, md5 by default, either order, sha256/sha512 on request.
    let ts = now().to_string();
    let md5 = hex::encode(Md5::digest(format!("{ts}{ADMIN}")));
    assert_eq!(version(&[("timestamp", &ts), ("signature", &md5)]).0, 200);
    let md5_after = hex::encode(Md5::digest(format!("{ADMIN}{ts}")));
    assert_eq!(
        version(&[("timestamp", &ts), ("signature", &md5_after)]).0,
        200
    );
    let sha256 = hex::encode(Sha256::digest(format!("{ts}{ADMIN}")));
    assert_eq!(
        version(&[
            ("timestamp", &ts),
            ("signature", &sha256),
            ("hash", "sha256")
        ])
        .0,
        200
    );
    let sha512 = hex::encode(Sha512::digest(format!("{ts}{ADMIN}")));
    assert_eq!(
        version(&[
            ("timestamp", &ts),
            ("signature", &sha512),
            ("hash", "sha512")
        ])
        .0,
        200
    );
    // The wrong algorithm named, or an unknown one.
    assert_eq!(
        version(&[("timestamp", &ts), ("signature", &md5), ("hash", "sha256")]).0,
        403
    );
    assert_eq!(
        version(&[("timestamp", &ts), ("signature", &md5), ("hash", "crc32")]).0,
        403
    );
    // Expired: outside the 12 h window.
    let old = (now() - 43_200 - 60).to_string();
    let expired = hex::encode(Md5::digest(format!("{old}{ADMIN}")));
    let (status, body) = version(&[("timestamp", &old), ("signature", &expired)]);
    assert_eq!(status, 403);
    assert_eq!(body["message"], "Please log in");
    // Within the window, a little in the past.
    let recent = (now() - 600).to_string();
    let fine = hex::encode(Md5::digest(format!("{recent}{ADMIN}")));
    assert_eq!(
        version(&[("timestamp", &recent), ("signature", &fine)]).0,
        200
    );

    // username + password from config, acting as the admin key.
    assert_eq!(
        version(&[("username", "joe"), ("password", "s3cret")]).0,
        200
    );
    let (status, body) = version(&[("username", "joe"), ("password", "nope")]);
    assert_eq!(status, 403);
    assert_eq!(body["message"], "Invalid username or password");
    let (status, _, text) = raw(
        &app,
        &[("action", "version"), ("username", "x"), ("password", "y")],
    );
    assert_eq!(status, 403);
    assert!(
        text.contains("<message>Invalid username or password</message>"),
        "{text}"
    );

    // POST with a form body works the same.
    let response = app
        .client
        .post(app.url("/yourls-api.php"))
        .form(&[
            ("action", "shorturl"),
            ("url", "https://example.com/posted"),
            ("username", "joe"),
            ("password", "s3cret"),
            ("format", "json"),
        ])
        .send()
        .expect("POST");
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().expect("json");
    assert_eq!(body["status"], "success");

    // So does a multipart body (browser extensions post FormData).
    let mut form = String::new();
    for (name, value) in [
        ("action", "expand"),
        ("shorturl", "nope99"),
        ("signature", ADMIN),
        ("format", "json"),
    ] {
        form.push_str(&format!(
            "--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    form.push_str("--XyZ--\r\n");
    let response = app
        .client
        .post(app.url("/yourls-api.php"))
        .header("content-type", "multipart/form-data; boundary=XyZ")
        .body(form)
        .send()
        .expect("POST multipart");
    assert_eq!(response.status().as_u16(), 404);
    let body: Value = response.json().expect("json");
    assert_eq!(body["keyword"], "nope99");

    // Roles still apply: a viewer reads but cannot shorten.
    let (status, body) = raw_json(
        &app,
        &[
            ("signature", VIEWER),
            ("format", "json"),
            ("action", "shorturl"),
            ("url", "https://example.com/viewer"),
        ],
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["errorCode"], "403");
    let (status, _) = raw_json(
        &app,
        &[
            ("signature", VIEWER),
            ("format", "json"),
            ("action", "db-stats"),
        ],
    );
    assert_eq!(status, 200);
    // A key limited to another space cannot create in the default space.
    let (status, _) = raw_json(
        &app,
        &[
            ("signature", SPORTS),
            ("format", "json"),
            ("action", "shorturl"),
            ("url", "https://example.com/sports"),
        ],
    );
    assert_eq!(status, 403);
}

#[test]
fn unique_urls_off_creates_a_new_link() {
    let app = TestApp::start_with("[yourls]\nunique_urls = false\n", &[]);
    let (s1, a) = call(
        &app,
        &[("action", "shorturl"), ("url", "https://example.com/dup")],
    );
    let (s2, b) = call(
        &app,
        &[("action", "shorturl"), ("url", "https://example.com/dup")],
    );
    assert_eq!((s1, s2), (200, 200), "{a} {b}");
    assert_ne!(a["url"]["keyword"], b["url"]["keyword"]);
}

/// The real PyPI `yourls` client, installed into a temp directory by this test.
#[test]
fn pypi_yourls_client() {
    let app = start();
    let target = app.dir.path().join("py");
    let install = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(&target)
        .arg("yourls")
        .output();
    match install {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            loud(&format!(
                "pip could not install the PyPI `yourls` client: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
            return;
        }
        Err(e) => {
            loud(&format!("python3 is not available: {e}"));
            return;
        }
    }
    let script = format!(
        r#"
import sys
from yourls import YOURLSClient, YOURLSURLExistsError, YOURLSHTTPError
api = "{api}"
c = YOURLSClient(api, signature="{key}")
s = c.shorten("https://example.com/from-python", keyword="py1", title="From Python")
assert s.keyword == "py1", s
assert s.shorturl == "{base}/py1", s
assert s.url == "https://example.com/from-python", s
assert s.title == "From Python", s
assert c.expand("py1") == "https://example.com/from-python"
assert c.expand("{base}/py1") == "https://example.com/from-python"
g = c.shorten("https://example.com/generated")
assert len(g.keyword) == 6, g
st = c.url_stats("py1")
assert st.clicks == 0 and st.url == "https://example.com/from-python", st
links, db = c.stats("top", 2)
assert db.total_links == 2, db
assert len(links) == 2, links
assert c.db_stats().total_links == 2
p = YOURLSClient(api, username="joe", password="s3cret")
assert p.expand("py1") == "https://example.com/from-python"
try:
    c.shorten("https://example.com/generated")
    raise SystemExit("expected an error for an existing URL")
except (YOURLSURLExistsError, YOURLSHTTPError) as e:
    print("existing URL:", type(e).__name__, e)
bad = YOURLSClient(api, signature="not-a-key")
try:
    bad.expand("py1")
    raise SystemExit("expected 403")
except YOURLSHTTPError as e:
    assert "Please log in" in str(e), e
print("python client ok")
"#,
        api = app.url("/yourls-api.php"),
        key = ADMIN,
        base = BASE_URL,
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .env("PYTHONPATH", &target)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python client failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("python client ok"), "{stdout}");
}

/// A skip notice written straight to the process's stderr: the test harness captures
/// `eprintln!` of passing tests, and a skipped client test must not go unnoticed.
fn loud(why: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n!!!!! SKIPPED pypi_yourls_client: {why}\n"
    );
}
